/* The lane: small messages of a pair of ranks on one TCP connection.
 *
 * Each direction of a pair is a connection of its own, and a control socket
 * carries data one way only, so the receiving kernel acknowledges small
 * messages with segments of their own: even in delayed-ACK mode
 * (socket_io.c, socket_delay_acks) it sends one for every second small
 * segment read, inside that recv, on the critical path of the call. A pair
 * that exchanges 8 bytes both ways (recursive doubling, the tree) then
 * moves three segments per exchange where MPICH, whose connections carry
 * both directions, moves two.
 *
 * So once both directions to a peer exist, the higher rank sends its
 * messages up to RCOLL_SOCKET_LANE bytes that follow a small one
 * (socket_isend) back over the control socket of the connection the lower
 * rank made to it, and the lower rank reads them there; each side's
 * acknowledgements then ride on its own messages. Larger messages keep
 * their own connection: with every message of both directions on one
 * control socket (docs/execution.md, "The lane"), medium ones got slower
 * (4 KiB 7.0-7.8 to 7.7-8.9 us, 32 KiB 16-17 to 17.3-18.6) and 64 KiB ones
 * stalled, segments of one socket sent from two cores arriving out of order
 * over veth.
 *
 * Both message streams of a direction carry one sequence of numbers, and
 * the receiver takes each message from the stream that has the next one
 * (socket_io.c, socket_hdr_take), so neither end needs to know when the
 * other started using the lane. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "socket_priv.h"

rcollResult_t socket_pair(void *vctx, void *send_comm, void *recv_comm, int lower) {
  socket_ctx_t *ctx = vctx;
  socket_conn_t *s = send_comm, *r = recv_comm;
  /* The higher rank writes the lane only if the lower one reads it, which
   * it does unless its RCOLL_SOCKET_LANE is 0 (its hello says so): ranks
   * set differently must not leave messages where nobody looks. */
  if (ctx->lane_max == 0 || (!lower && r->lane_max == 0))
    return rcollSuccess;
  /* The lower rank reads the lane on its send comm's socket; the higher
   * one writes it on its recv comm's. Each comm gets its own descriptor,
   * so either may be closed first. */
  socket_conn_t *user = lower ? r : s;
  const socket_conn_t *owner = lower ? s : r;
  if (user->lane_fd >= 0)
    return rcoll_error(rcollInternalError, "socket: the connection %s %s already has a lane",
                       lower ? "from" : "to", user->peer);
  int fd = fcntl(owner->ctrl_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return rcoll_error(rcollSystemError, "socket: dup of the control socket %s %s failed: %s",
                       lower ? "to" : "from", owner->peer, strerror(errno));
  user->lane_fd = fd;
  return rcollSuccess;
}
