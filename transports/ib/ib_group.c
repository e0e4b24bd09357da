/* Grouped receives on a verbs connection (irecv of n > 1 tagged buffers,
 * NCCL's multi-receive): one receive consumes the next n messages, each
 * landing in a buffer posted with its tag, whatever order they come in.
 *
 * The group takes n request slots, consecutive message numbers; member i is
 * message seq + i and also owns buffer i's memory (its registration or
 * bounce slot), so everything a single receive has exists once per buffer.
 * One credit carries the n buffers and tags. Which buffer a message fills is
 * settled without a round trip (ib_priv.h): rendezvous messages from the
 * front of their tag's buffers, chosen by the sender and named in the
 * immediate; eager ones from the back, chosen here from the tag in their
 * header. With as many buffers of each tag as messages, the two never meet;
 * when they do, the peer broke the protocol and the connection fails naming
 * the tag. Nothing is ever written outside a buffer: every write is bounded
 * by the size posted for the buffer it names. */
#if RCOLL_HAVE_IBVERBS
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

void ib_group_tags_str(const int *tags, int n, char *out, size_t len) {
  out[0] = '\0';
  for (int i = 0, at = 0; i < n && at < (int)len; i++)
    at += snprintf(out + at, len - (size_t)at, "%s%d", i ? "," : "", tags[i]);
}

static void ib_group_tag_fail(ib_comm_t *c, const ib_req_t *r, int32_t tag, int seen) {
  const ib_rgroup_t *g = r->group;
  char list[RCOLL_NET_MAX_RECVS * 13];
  ib_group_tags_str(g->tags, g->n, list, sizeof list);
  ib_comm_fail(c, rcollInvalidUsage,
               "ib: message %u with tag %d from %s %s of the grouped receive of %d buffers (tags %s)", r->seq,
               (int)tag, c->peer, seen ? "matches only already filled buffers" : "matches no buffer", g->n, list);
}

int ib_group_eager_buf(ib_comm_t *c, ib_req_t *r, int32_t tag) {
  ib_rgroup_t *g = r->group;
  int seen = 0;
  for (int i = g->n - 1; i >= 0; i--) {
    if (g->tags[i] != tag)
      continue;
    seen = 1;
    if (g->filled & (1u << i))
      continue;
    g->filled |= 1u << i;
    r->where = i;
    return i;
  }
  ib_group_tag_fail(c, r, tag, seen);
  return -1;
}

/* Every write of a message names the same buffer; the first one claims it
 * and tells how many LAST writes to expect (from the buffer's size, as the
 * sender decided the spread). */
int ib_group_data_buf(ib_comm_t *c, ib_req_t *r, uint32_t imm) {
  ib_rgroup_t *g = r->group;
  int b = (int)IB_IMM_BUF(imm);
  if (r->where >= 0) {
    if (r->where == b)
      return 0;
    ib_comm_fail(c, rcollInternalError, "ib: data from %s for message %u names buffer %d, then %d", c->peer,
                 r->seq, r->where, b);
    return -1;
  }
  if (b >= g->n || (g->filled & (1u << b))) {
    if (b >= g->n)
      ib_comm_fail(c, rcollInternalError, "ib: data from %s for message %u names buffer %d of a group of %d",
                   c->peer, r->seq, b, g->n);
    else
      ib_group_tag_fail(c, r, g->tags[b], 1);
    return -1;
  }
  g->filled |= 1u << b;
  r->where = b;
  r->pending = ib_split(c, g->members[b]->size) ? c->nqps : 1;
  return 0;
}

static void ib_group_free(ib_comm_t *c, ib_rgroup_t *g) {
  for (int i = g->n - 1; i >= 0; i--)
    ib_req_free(c, g->members[i]);
}

/* n slots and n message numbers, all or none (NULL: the caller retries). */
static ib_rgroup_t *ib_group_alloc(ib_comm_t *c, int n, void **data, const size_t *sizes, const int *tags,
                                   void **mh) {
  if (c->nfree < n)
    return NULL;
  for (int i = 0; i < n; i++)
    if (c->by_seq[(c->seq + (uint32_t)i) % IB_NREQS] != NULL)
      return NULL;
  ib_rgroup_t *g = NULL;
  for (int i = 0; i < n; i++) {
    ib_req_t *r = ib_req_alloc(c, IB_REQ_RECV, data[i], sizes[i]);
    if (g == NULL) {
      g = &c->rgroups[ib_slot(c, r)];
      *g = (ib_rgroup_t){.n = n};
    }
    r->pending = 1; /* until its first data names its buffer */
    r->device = ib_mr_is_device(mh ? mh[i] : NULL);
    r->group = g;
    r->gidx = i;
    r->where = -1;
    g->members[i] = r;
    g->tags[i] = tags[i];
  }
  return g;
}

/* Eager messages that came before the group wait in message order: take
 * those that are its own. */
static void ib_group_match(ib_comm_t *c, ib_rgroup_t *g) {
  uint32_t first = g->members[0]->seq;
  while (c->err == rcollSuccess && c->unexp_head != c->unexp_tail) {
    const ib_unexp_t *u = &c->unexp[c->unexp_head % IB_NLAND];
    if (u->seq - first >= (uint32_t)g->n)
      break;
    c->unexp_head++;
    ib_eager_deliver(c, g->members[u->seq - first], u->land);
  }
  if (c->err == rcollSuccess)
    ib_progress(c);
}

rcollResult_t ib_irecv_group(ib_comm_t *c, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                             void **request) {
  if (tags == NULL || data == NULL || sizes == NULL)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: grouped irecv of %d buffers without %s", n,
                             tags == NULL ? "tags" : data == NULL ? "buffers" : "sizes");
  ib_rgroup_t *g = ib_group_alloc(c, n, data, sizes, tags, mh);
  if (g == NULL) {
    RCOLL_TRACE(RCOLL_SUB_NET, "ib: grouped irecv %u of %d from %s: no slots", c->seq, n, c->peer);
    return rcollSuccess;
  }
  ib_group_match(c, g);
  if (c->err != rcollSuccess) { /* an eager message broke the group: wrong tag, or device memory */
    ib_group_free(c, g);
    return ib_comm_error(c);
  }
  int eager = 0;
  for (int i = 0; i < n; i++)
    eager += g->members[i]->eager;
  RCOLL_TRACE(RCOLL_SUB_NET, "ib: grouped irecv %u..%u from %s: %d of %d already here eagerly", g->members[0]->seq,
              g->members[n - 1]->seq, c->peer, eager, n);
  if (eager < n) {
    /* Every buffer goes into the credit, filled or not: the sender never
     * picks one an eager message took unless it breaks the protocol, and
     * then what it writes stays inside the buffer. */
    for (int i = 0; i < n; i++) {
      rcollResult_t rc = ib_req_mem(c, g->members[i], mh ? mh[i] : NULL,
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
      if (rc != rcollSuccess) {
        ib_group_free(c, g);
        c->seq -= (uint32_t)n;
        return rc;
      }
    }
    if (ib_post_credit(c, g->members, n, tags) != 0)
      return ib_comm_error(c);
  }
  *request = g->members[0];
  return rcollSuccess;
}

/* A member's message, done: the size check and the bounce copy into the
 * buffer it landed in. */
static int ib_group_member_done(ib_comm_t *c, ib_rgroup_t *g, ib_req_t *m, size_t *sizes) {
  ib_req_t *dst = g->members[m->where];
  if (m->toobig || m->got > dst->size) {
    ib_comm_fail(c, rcollInvalidUsage, "ib: %s sent a message (tag %d) larger than the buffer of %zu bytes "
                 "posted for it in a grouped receive", c->peer, g->tags[m->where], dst->size);
    return -1;
  }
  if (dst->bounce && !m->eager && m->got > 0)
    memcpy(dst->buf, ib_block_slot(c, ib_slot(c, dst)) + IB_HDR, m->got);
  if (sizes != NULL)
    sizes[m->where] = m->got;
  return 0;
}

/* Done when every member's message is; each size is reported at the index
 * of the buffer it landed in. */
rcollResult_t ib_group_test(ib_req_t *first, int *done, size_t *sizes) {
  ib_comm_t *c = first->comm;
  ib_rgroup_t *g = first->group;
  int left = 0;
  for (int i = 0; i < g->n; i++)
    left += g->members[i]->pending != 0;
  if (left > 0 && c->err == rcollSuccess) {
    ib_progress(c);
    left = 0;
    for (int i = 0; i < g->n; i++)
      left += g->members[i]->pending != 0;
  }
  if (left > 0 || c->err != rcollSuccess)
    return c->err != rcollSuccess ? ib_comm_error(c) : rcollSuccess;
  for (int i = 0; i < g->n; i++)
    if (ib_group_member_done(c, g, g->members[i], sizes) != 0) {
      ib_group_free(c, g);
      return ib_comm_error(c);
    }
  ib_group_free(c, g);
  *done = 1;
  return rcollSuccess;
}
#endif
