/* What the progress engine's files share (engine.c runs the loop,
 * engine_idle.c waits when nothing progresses). Private to them; plan.h
 * and comm.h have the interface. */
#ifndef RCOLL_ENGINE_PRIV_H
#define RCOLL_ENGINE_PRIV_H

#include <stdint.h>

#include "comm.h"
#include "device.h"
#include "plan.h"

/* Steps examined per pass: far more than can be in flight at once. (Traces
 * give a connection as many lanes as this, trace_write.c.) */
#define ENGINE_WINDOW 512

/* Whether the comm's CUDA proxy is running one of its device plans. A comm
 * without device state (c->cuda is made at its first device call) is never
 * executing one: the check skips the call through the device table on the
 * host path, where the engine asks on every pass (device.h). */
static inline int engine_device(const struct rcollComm *c) {
  return c->cuda != NULL && rcoll_device_ops.executing(c);
}

/* When no plan progressed for idle_us: before spin_us, yields (or returns
 * at once); then sleeps in the transport until a connection may progress. */
void rcoll_engine_idle(rcoll_plan_t **plans, int nplans, int64_t idle_us, int64_t spin_us);

#endif
