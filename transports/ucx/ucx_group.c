/* Grouped receives on a UCX connection (irecv of 2..8 buffers, NCCL's
 * multi-receive): one receive consumes the next n messages of its
 * connection, and each lands in the buffer posted with its tag, whatever
 * order the tags come in.
 *
 * A single receive is posted to UCX before its message arrives because its
 * buffer is known. A message of a group can be placed only once its tag is
 * known, so a group posts nothing: test probes for each of the group's
 * sequence numbers (ucp_tag_probe_nb, which takes the message out of UCX's
 * unexpected queue), reads the sender's tag bits from the tag the message
 * came with (ucx_priv.h), and receives it into that buffer
 * (ucp_tag_msg_recv_nbx): eager data is copied out of UCX's own buffers, a
 * rendezvous is fetched straight into the buffer. A message that fits no
 * buffer fails the connection, and is received into nothing, so that UCX
 * releases it and its sender is not left waiting for a rendezvous. */
#if RCOLL_HAVE_UCX

#include <stdio.h>
#include <string.h>

#include "error.h"
#include "ucx_priv.h"

static unsigned ucx_tag_low(int tag) { return (unsigned)tag & UCX_TAG_LOW_MASK; }

/* Equal tags are allowed (a message takes the first unfilled buffer of its
 * tag, as on the other transports). Tags that differ only above the bits
 * UCX carries could not be told apart when their messages come. */
static rcollResult_t ucx_group_check_tags(int n, const int *tags) {
  for (int i = 1; i < n; i++)
    for (int j = 0; j < i; j++)
      if (tags[i] != tags[j] && ucx_tag_low(tags[i]) == ucx_tag_low(tags[j]))
        return rcoll_error(rcollInvalidArgument,
                           "ucx: grouped irecv with tags %d and %d, which differ only above the low %d bits "
                           "that UCX carries: their messages could not be told apart",
                           tags[j], tags[i], UCX_TAG_BITS);
  return rcollSuccess;
}

/* Takes n slots at once, or none (a NULL request: the caller retries after
 * testing older requests), and the next n sequence numbers. */
rcollResult_t ucx_irecv_group(ucx_conn_t *c, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                              void **request) {
  if (tags == NULL)
    return rcoll_error(rcollInvalidArgument, "ucx: grouped irecv of %d buffers without tags", n);
  RCOLL_CHECK(ucx_group_check_tags(n, tags));
  if (c->nfree < n)
    return rcollSuccess;
  ucx_req_t *first = ucx_req_alloc(c, UCX_REQ_GROUP, sizes[0]);
  ucx_group_t *g = &c->groups[first - c->reqs];
  memset(g, 0, sizeof *g);
  g->n = n;
  g->seq0 = c->seq;
  c->seq += (uint32_t)n;
  for (int i = 0; i < n; i++) {
    ucx_req_t *r = i == 0 ? first : ucx_req_alloc(c, UCX_REQ_GROUP, sizes[i]);
    g->slots[i] = (int)(r - c->reqs);
    g->bufs[i] = data[i];
    g->caps[i] = sizes[i];
    g->tags[i] = tags[i];
    g->mhs[i] = mh ? mh[i] : NULL;
  }
  *request = first;
  return rcollSuccess;
}

/* The buffer for a message with tag bits t: the first unfilled one posted
 * with them, or -1 (*had: a filled buffer had them). */
static int ucx_group_pick(const ucx_group_t *g, unsigned t, int *had) {
  *had = 0;
  for (int i = 0; i < g->n; i++) {
    if (ucx_tag_low(g->tags[i]) != t)
      continue;
    if (!(g->filled & (1u << i)))
      return i;
    *had = 1;
  }
  return -1;
}

static void ucx_group_tags_text(const ucx_group_t *g, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < g->n && used < len; i++) {
    int k = snprintf(out + used, len - used, "%s%d", i ? "," : "", g->tags[i]);
    if (k < 0)
      break;
    used += (size_t)k;
  }
}

/* A message no buffer can take: received into nothing, so that UCX frees
 * it (reporting the truncation to this receive only) and a rendezvous
 * sender is answered instead of waiting for a transfer that never comes. */
static void ucx_group_drop(ucx_conn_t *c, ucp_tag_message_h msg) {
  ucp_request_param_t param = {.op_attr_mask = 0};
  ucs_status_ptr_t p = ucp_tag_msg_recv_nbx(c->ctx->worker, NULL, 0, msg, &param);
  if (UCS_PTR_IS_PTR(p))
    ucx_orphan(c->ctx, p);
}

/* Fails the connection over the probed message (tag bits t, len bytes) that
 * has no buffer to go to. */
static void ucx_group_refuse(ucx_conn_t *c, const ucx_group_t *g, unsigned t, size_t len, int i, int had) {
  char list[RCOLL_NET_MAX_RECVS * 13];
  ucx_group_tags_text(g, list, sizeof list);
  if (i < 0)
    ucx_conn_fail(c, rcollInvalidUsage,
                  "ucx: message with tag %u from %s %s of the grouped receive of %d buffers (tags %s; "
                  "UCX carries the low %d bits of a tag)",
                  t, c->peer, had ? "matches only already filled buffers" : "matches no buffer", g->n, list,
                  UCX_TAG_BITS);
  else
    ucx_conn_fail(c, rcollInvalidUsage,
                  "ucx: message of %zu bytes with tag %u from %s larger than posted receive of %zu bytes "
                  "(buffer %d of a grouped receive, tags %s)",
                  len, t, c->peer, g->caps[i], i, list);
}

/* Takes message seq0 + k from UCX if it is there, and starts receiving it
 * into the buffer of its tag. */
static void ucx_group_take(ucx_conn_t *c, ucx_group_t *g, int k) {
  ucp_tag_recv_info_t info;
  ucp_tag_message_h msg = ucp_tag_probe_nb(c->ctx->worker, ucx_tag_make(c->conn_id, g->seq0 + (uint32_t)k, 0),
                                           UCX_TAG_MATCH_MASK, 1, &info);
  if (msg == NULL)
    return;
  g->seen |= 1u << k;
  unsigned t = (unsigned)(info.sender_tag & UCX_TAG_LOW_MASK);
  int had, i = ucx_group_pick(g, t, &had);
  if (i < 0 || info.length > g->caps[i]) {
    ucx_group_refuse(c, g, t, info.length, i, had);
    ucx_group_drop(c, msg);
    return;
  }
  g->filled |= 1u << i;
  g->got[i] = info.length;
  ucx_req_t *r = &c->reqs[g->slots[i]];
  ucp_request_param_t param = {.op_attr_mask = 0};
  ucx_param_memh(&param, c, g->bufs[i], g->caps[i], g->mhs[i]);
  ucx_req_started(r, ucp_tag_msg_recv_nbx(c->ctx->worker, g->bufs[i], g->caps[i], msg, &param));
}

static rcollResult_t ucx_group_done(ucx_conn_t *c, const ucx_group_t *g, int *done, size_t *sizes) {
  int slots[RCOLL_NET_MAX_RECVS], n = g->n;
  memcpy(slots, g->slots, sizeof slots);
  for (int i = 0; i < n; i++)
    if (sizes != NULL)
      sizes[i] = g->got[i];
  for (int i = 0; i < n; i++)
    ucx_req_free(c, &c->reqs[slots[i]]);
  *done = 1;
  return rcollSuccess;
}

/* The connection failed. The error is reported once no message of the group
 * is still being written into the caller's buffers (so the caller may free
 * them), or after UCX_CLOSE_UNCLEAN_MS when one does not finish: it is then
 * left to the context. */
static rcollResult_t ucx_group_fail(ucx_conn_t *c, ucx_group_t *g, int running) {
  int64_t now = rcoll_now_ms();
  if (g->fail_ms == 0)
    g->fail_ms = now;
  if (running > 0 && now - g->fail_ms < UCX_CLOSE_UNCLEAN_MS)
    return rcollSuccess;
  for (int i = 0; i < g->n; i++)
    ucx_req_abandon(c, &c->reqs[g->slots[i]]);
  g->failed = 1;
  return ucx_conn_error(c);
}

/* Done when every buffer has its message and every receive has finished,
 * with each size reported at the index of the buffer it landed in. */
rcollResult_t ucx_test_group(ucx_req_t *first, int *done, size_t *sizes) {
  ucx_conn_t *c = first->conn;
  ucx_group_t *g = &c->groups[first - c->reqs];
  if (g->failed)
    return ucx_conn_error(c);
  ucp_worker_progress(c->ctx->worker);
  for (int k = 0; k < g->n && c->err == rcollSuccess; k++)
    if (!(g->seen & (1u << k)))
      ucx_group_take(c, g, k);
  int pending = 0, running = 0;
  size_t waiting = 0; /* bytes posted for messages not in yet */
  for (int i = 0; i < g->n; i++) {
    ucx_req_t *r = &c->reqs[g->slots[i]];
    if (g->filled & (1u << i) && !r->done)
      ucx_req_collect(r);
    if (!(g->filled & (1u << i)) || !r->done) {
      pending++;
      running += (g->filled >> i) & 1;
      waiting += g->caps[i];
    } else if (r->status != UCS_OK) {
      ucx_req_failed(c, r);
    }
  }
  if (c->err == rcollSuccess && pending == 0)
    return ucx_group_done(c, g, done, sizes);
  if (c->err == rcollSuccess && !ucx_req_peer_failed(c, waiting))
    return rcollSuccess;
  return ucx_group_fail(c, g, running);
}

#endif /* RCOLL_HAVE_UCX */
