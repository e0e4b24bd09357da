/* Point to point: one message (in parts on device buffers, below).
 * Matching is by order on the connection, as in NCCL: the k-th send to a
 * peer meets that peer's k-th receive from us.
 *
 * On device buffers the message goes in parts of a staging slot
 * (p2p_part_bytes), each a message of its own: through host memory each
 * part is copied to the host, sent, and copied to the device, and the
 * copies of one part overlap the wire time of the others, where a whole
 * message was copied down, then sent, then copied up, each waiting for the
 * other, through a pinned buffer as large as the message. Host buffers go
 * whole: the transports move them without a copy between. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

/* The message in its parts: at least one, so an empty message is still
 * sent and matched (its buffer may then be NULL: no offset is taken). */
static void plan_parts(rcoll_plan_t *p, const rcoll_coll_args_t *a, int sending) {
  size_t bytes = a->count * rcoll_type_size(a->dtype);
  size_t part = p->p2p_part_bytes > 0 && bytes > p->p2p_part_bytes ? p->p2p_part_bytes : bytes;
  size_t n = bytes == 0 ? 1 : (bytes + part - 1) / part;
  char *buf = sending ? (char *)a->sendbuff : a->recvbuff;
  for (size_t k = 0; k < n; k++) {
    char *at = k == 0 ? buf : buf + k * part;
    size_t len = k + 1 < n ? part : bytes - k * part;
    if (sending)
      rcoll_plan_send(p, a->root, at, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    else
      rcoll_plan_recv(p, a->root, at, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
  }
}

static void plan_send(rcoll_plan_t *p, const rcoll_coll_args_t *a) { plan_parts(p, a, 1); }
static void plan_recv(rcoll_plan_t *p, const rcoll_coll_args_t *a) { plan_parts(p, a, 0); }

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
