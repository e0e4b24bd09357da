/* A local copy into memory that the call does not read again (the user's
 * receive buffer). */
#ifndef RCOLL_COPY_OUT_H
#define RCOLL_COPY_OUT_H

#include <stddef.h>

/* From this many bytes (a core's L2 on the 2-core VMs) rcoll_copy_out
 * writes with non-temporal stores. Measured there, one thread, best of 60:
 * 2 MiB 176 -> 150 us, 4 MiB 358 -> 344, 8 MiB 740 -> 583 (memcpy ->
 * streaming); below L2 streaming loses (512 KiB: 14 -> 30 us), as the data
 * would have stayed in cache. */
#define RCOLL_COPY_OUT_STREAM_MIN (2u << 20)

/* memmove(dst, src, n), except that a large copy between buffers that do
 * not overlap skips the cache: it does not read each destination line before
 * writing it, and does not evict what the call still needs. */
void rcoll_copy_out(void *dst, const void *src, size_t n);

/* memcpy(dst, src, n) of buffers that do not overlap, with non-temporal
 * stores whatever the size (x86-64; plain memcpy elsewhere). A fence at the
 * end orders the streamed stores before what this thread does next
 * (marking a step done, which a peer may act on). */
void rcoll_copy_stream(void *dst, const void *src, size_t n);

#endif
