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

#endif
