/* The progress engine's idle wait (engine_priv.h: rcoll_engine_idle):
 * what a rank does while none of its plans can progress. */
#include <sched.h>

#include "engine_priv.h"
#include "home_core.h"
#include "trace.h"

/* Collects the distinct connections that posted steps wait on, for the
 * transport of the first one; *mixed is set when others use another. */
static int engine_wait_set(rcoll_plan_t **plans, int nplans, void **comms, int max,
                           const rcoll_transport_ops_t **net, int *mixed) {
  int n = 0;
  *net = NULL;
  *mixed = 0;
  for (int i = 0; i < nplans; i++) {
    rcoll_plan_t *p = plans[i];
    int seen = 0;
    for (int k = p->head; k < p->nsteps && seen < ENGINE_WINDOW && n < max; k++) {
      rcoll_step_t *st = &p->steps[k];
      if (st->state != RCOLL_STEP_POSTED || st->kind == RCOLL_STEP_COPY) /* a board step: no connection */
        continue;
      seen++;
      const rcoll_transport_ops_t *ops = rcoll_peer_net(p->comm, st->peer);
      if (*net == NULL)
        *net = ops;
      if (ops != *net) {
        *mixed = 1;
        continue;
      }
      rcoll_peer_t *pe = &p->comm->peers[st->peer];
      void *c = st->kind == RCOLL_STEP_SEND ? pe->send_comm : pe->recv_comm;
      int dup = 0;
      for (int j = 0; j < n && !dup; j++)
        dup = comms[j] == c;
      if (!dup)
        comms[n++] = c;
    }
  }
  return n;
}

/* Waits without burning a core: spin for spin_us (a reply usually comes
 * within microseconds when the peer runs), yielding now and then when a
 * peer is reached through the kernel's network stack (comm_spin_policy): on these
 * VMs loopback packets are often delivered by ksoftirqd, which a pure spin
 * keeps off the CPU (8-byte all-reduce, 2 threads on 2 cores: 1.5 ms with a
 * 1 ms pure spin, 51 us with a yielding one). Then sleep in the transport until
 * a connection may progress. The sleep is capped so that abort and the
 * timeout are noticed promptly, and kept short when connections of another
 * transport are waited on too (one transport cannot watch the other's). */
void rcoll_engine_idle(rcoll_plan_t **plans, int nplans, int64_t idle_us, int64_t spin_us) {
  if (engine_device(plans[0]->comm)) {
    rcoll_device_ops.idle(idle_us, spin_us);
    return;
  }
  if (idle_us < spin_us) {
    if (plans[0]->comm->spin_yield != RCOLL_YIELD_NEVER)
      sched_yield();
    return;
  }
  void *comms[64];
  const rcoll_transport_ops_t *net;
  int mixed;
  int n = engine_wait_set(plans, nplans, comms, 64, &net, &mixed);
  if (n == 0) {
    sched_yield();
    return;
  }
  rcoll_trace_t *trace = plans[0]->comm->trace;
  int64_t slept_at = trace != NULL ? rcoll_trace_now() : 0;
  net->wait(comms, n, mixed ? 200 : 10000);
  /* A woken thread may have been put beside its waker (home_core.c). */
  struct rcollComm *c = plans[0]->comm;
  c->home_moves += rcoll_home_core_return(c->home_cpu, c->home_cores);
  if (trace != NULL)
    rcoll_trace_net_wait(trace, slept_at, n);
}
