/* Point to point: one message. Matching is by order on the connection, as
 * in NCCL: the k-th send to a peer meets that peer's k-th receive from us. */
#include "algo.h"
#include "reduce.h"

void rcoll_send_p2p(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  rcoll_plan_send(p, a->root, a->sendbuff, a->count * rcoll_type_size(a->dtype), RCOLL_NO_DEP,
                  RCOLL_NO_DEP);
}

void rcoll_recv_p2p(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  rcoll_plan_recv(p, a->root, a->recvbuff, a->count * rcoll_type_size(a->dtype), RCOLL_NO_DEP,
                  RCOLL_NO_DEP);
}
