/* The library's clock: monotonic time in milliseconds and microseconds.
 *
 * Every deadline and timeout in rcoll (socket I/O, connection set-up, the
 * engine's progress loop, the CUDA proxy) is an absolute value of this clock,
 * rcoll_now_ms() + a budget. It has its own header because its users are in
 * every layer: a file that only needs the time should not see socket code. */
#ifndef RCOLL_CLOCK_H
#define RCOLL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC: never steps back when the wall clock is set. */
int64_t rcoll_now_ms(void);
int64_t rcoll_now_us(void);
/* The same in nanoseconds, for accounts of calls that take microseconds. */
int64_t rcoll_now_ns(void);
/* CLOCK_MONOTONIC_COARSE: the same clock to the kernel's tick (1-4 ms), for
 * records, never for deadlines or spins. Read on every call by the flight
 * recorder: 5 ns where the fine clock takes 30 on our VMs, whose two reads
 * per call were 10% of an 8-byte shared-memory all-reduce's samples. */
int64_t rcoll_now_coarse_us(void);

#endif
