/* Point to point: one message. Matching is by order on the connection, as
 * in NCCL: the k-th send to a peer meets that peer's k-th receive from us. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan_send(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  rcoll_plan_send(p, a->root, a->sendbuff, a->count * rcoll_type_size(a->dtype), RCOLL_NO_DEP,
                  RCOLL_NO_DEP);
}

static void plan_recv(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  rcoll_plan_recv(p, a->root, a->recvbuff, a->count * rcoll_type_size(a->dtype), RCOLL_NO_DEP,
                  RCOLL_NO_DEP);
}

/* One message over the slower class of link, since the peer may be on
 * another node. */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  (void)c;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->nnodes > 1, 1);
  return l.lat + rcoll_cost_msg_us(l, m) + m * l.b;
}

/* One message of S, each way counted by its own side. */
static void traffic_send(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  rcoll_traffic_set(out, rcoll_traffic_bytes(a), 0, 0, "S sent");
}

static void traffic_recv(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  rcoll_traffic_set(out, 0, rcoll_traffic_bytes(a), 0, "S received");
}

RCOLL_ALGORITHM(send_p2p) = {
    .name = "p2p",
    .coll = RCOLL_COLL_SEND,
    .summary = "One message to the peer",
    .plan = plan_send,
    .cost = cost,
    .traffic = traffic_send,
    .flags = RCOLL_ALGO_ONLY | RCOLL_ALGO_FALLBACK,
    .tie_order = 6,
};

RCOLL_ALGORITHM(recv_p2p) = {
    .name = "p2p",
    .coll = RCOLL_COLL_RECV,
    .summary = "One message from the peer",
    .plan = plan_recv,
    .cost = cost,
    .traffic = traffic_recv,
    .flags = RCOLL_ALGO_ONLY | RCOLL_ALGO_FALLBACK,
    .tie_order = 6,
};
