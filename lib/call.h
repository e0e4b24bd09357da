/* Calls as the ranks see them: every public collective or send/recv gets a
 * number, a fingerprint that the ranks compare (fingerprint.c), an entry in
 * the flight recorder (flight_recorder.h), and a description that error
 * messages quote ("allreduce #17 (4000 x float32 sum, ring)").
 *
 * Numbers: collectives count 1, 2, ... per communicator, the same on every
 * rank because every rank makes every collective call; a send or receive
 * counts per pair of ranks and direction ("send #3 to rank 1" is matched by
 * "recv #3 from rank 0"), since the other ranks do not make it. */
#ifndef RCOLL_CALL_H
#define RCOLL_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "rcoll.h"

struct rcollComm;

#define RCOLL_FP_MAGIC 0x6672u /* "rf": a call on host buffers */
#define RCOLL_FP_MAGIC_DEVICE 0x6472u /* "rd": a call on device buffers */
/* "rb": a call on device buffers run through host memory (lib/cuda/bounce.h).
 * Told apart from "rd" because the two send different messages: a rank that
 * makes a small device call in a group (a device plan) and one that makes
 * it outside (bounced) fail at the fingerprint, naming the cause. */
#define RCOLL_FP_MAGIC_BOUNCED 0x6272u
/* The op of a call whose op was made by rcollRedOpCreatePreMulSum: the
 * handle and the scalar may differ between ranks; what they must agree on
 * is that the call sums scaled inputs. */
#define RCOLL_FP_OP_PREMUL (-2)
#define RCOLL_FP_NONE (-1)

/* A call's fingerprint, sent ahead of its data to each peer: 40 bytes, so
 * that with an 8-byte first message inline it fits what a shared-memory
 * slot carries in its first cache line (48 bytes). */
typedef struct rcoll_fp {
  uint64_t seq;   /* collectives: the comm's collective number; send/recv: the pair's */
  uint64_t count; /* elements, as the user passed them */
  int32_t root;   /* root of a rooted collective, peer of a send/recv, else RCOLL_FP_NONE */
  int32_t op;     /* rcollRedOp_t, RCOLL_FP_OP_PREMUL, or RCOLL_FP_NONE */
  uint16_t magic; /* RCOLL_FP_MAGIC, _DEVICE for device buffers, _BOUNCED through host memory */
  uint8_t kind;   /* rcoll_coll_kind_t */
  uint8_t dtype;  /* rcollDataType_t */
  /* The algorithm that planned it ("" for send/recv), its first
   * RCOLL_FP_ALGO bytes: enough to tell the algorithms apart; messages
   * print the whole name (rcoll_fp_describe). Not terminated when full. */
  char algo[12];
} rcoll_fp_t;
#define RCOLL_FP_ALGO 12

/* Bytes of a call's first message to a peer that may travel inside its
 * fingerprint message, saving a message per peer on small calls. At 256 a
 * 2-rank all-reduce (recursive doubling: one exchange) took twice as long
 * from 512 B up over TCP as at 256 B (16-18 us against 9.4); with 4096 the
 * 512 B-4 KiB calls took 6.3-9.5 us, and over shm 1.2-1.7 us instead of
 * 1.5-2.2 (tests/test_fp_inline.c checks the limit). The price is memory:
 * each fingerprint slot has room for it (blocks of 64, call.c). */
#define RCOLL_FP_INLINE 4096

/* Where a fingerprint message is built or received: the fingerprint, then
 * the inline bytes; inline_step is the plan step they belong to (-1: none). */
typedef struct rcoll_fp_slot {
  rcoll_fp_t fp;
  unsigned char data[RCOLL_FP_INLINE];
  int inline_step;
} rcoll_fp_slot_t;
_Static_assert(sizeof(rcoll_fp_t) == 40, "the fingerprint is 40 bytes, with the inline bytes right after it");

/* One call of the plan being built or run. */
typedef struct rcoll_call {
  rcoll_fp_t *fp;         /* stable storage: fingerprint sends point at it */
  int first_step, nsteps; /* its steps in the communicator's plan */
  uint64_t fr_id;         /* its flight-recorder entry (0: none) */
  int device;             /* queued for the CUDA proxy (its fingerprints carry no inline data) */
} rcoll_call_t;

/* Records a call that was just planned (its steps are plan steps
 * first_step.. on): numbers it, makes its fingerprint, adds the fingerprint
 * messages to its peers (fingerprint.c) and its flight-recorder entry.
 * `user_op` is the op the user passed (before PreMulSum's rewrite); `mem`
 * is RCOLL_FP_MAGIC, _DEVICE or _BOUNCED (queued for the CUDA proxy). */
rcollResult_t rcoll_call_add(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a,
                             rcollRedOp_t user_op, int first_step, uint16_t mem);
/* Numbers and records an all-reduce that runs on the flat board (flat.h)
 * rather than as a plan; its fingerprint is made in *fp (the board's own:
 * the fingerprint blocks may hold the kept plan's, plan_cache.h) and
 * returned. */
const rcoll_fp_t *rcoll_call_board(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a,
                                   rcollRedOp_t user_op, rcoll_fp_t *fp);
/* The error for two calls that should match and do not (fingerprint.c):
 * names the first field that differs, and both calls. */
rcollResult_t rcoll_fp_mismatch(const struct rcollComm *c, const rcoll_fp_t *mine, const rcoll_fp_t *theirs,
                                int peer);
/* The calls of the plan are done, failed or discarded: forget them. */
void rcoll_calls_reset(struct rcollComm *c);
/* A group was refused before it ran: give back the numbers its calls took. */
void rcoll_calls_discard(struct rcollComm *c);
void rcoll_calls_free(struct rcollComm *c);

/* "allreduce #17 (4000 x float32 sum, ring)", "send #3 to rank 1 (10 x int32)". */
const char *rcoll_fp_describe(const rcoll_fp_t *fp, int self, char *buf, size_t len);
/* The call that step `step` of the comm's plan belongs to (NULL: none). */
const rcoll_call_t *rcoll_call_of_step(const struct rcollComm *c, int step);

/* How far a call got, for timeouts and the flight recorder: of its steps,
 * how many are done; and for the step it waits on (the oldest not done),
 * the peer, the direction and how many of the call's messages with that
 * peer in that direction are done. */
typedef struct rcoll_call_progress {
  int steps_done, steps;
  int peer;   /* -1: waits on nothing (local steps only) */
  int sending;
  int msgs_done, msgs;
  size_t bytes; /* of the message waited on */
} rcoll_call_progress_t;

/* The call that `step` of the comm's plan belongs to and its progress;
 * NULL when the step is in no recorded call. */
const rcoll_call_t *rcoll_call_progress(const struct rcollComm *c, int step,
                                        rcoll_call_progress_t *out);
/* " in allreduce #17 (...): 3 of 12 steps done, 1 of 4 messages from rank 1
 * received" for step `step` of the plan ("" when the plan has no call). */
const char *rcoll_call_where(const struct rcollComm *c, int step, char *buf, size_t len);
/* " in allreduce #17 (...)" or " in a group of 3 calls from allreduce #17
 * (...)" for the whole plan, before any step ran ("" when none). */
const char *rcoll_calls_where(const struct rcollComm *c, char *buf, size_t len);

/* Fingerprint messages (fingerprint.c): inserts, ahead of the steps of the
 * call just planned, one fingerprint send to and one receive from every
 * peer the call exchanges messages with (both ways for collectives, so that
 * both ranks of a mismatched pair find it; the receiver only for send/recv,
 * whose other direction a group may order freely). */
rcollResult_t rcoll_fp_insert(struct rcollComm *c, rcoll_call_t *call);
/* Compares a received fingerprint (step `step` of plan `p`, `got` bytes)
 * with the call it arrived for; on a mismatch returns rcollInvalidUsage
 * with a message naming both calls. */
rcollResult_t rcoll_fp_check(rcoll_plan_t *p, int step, size_t got);
/* A zeroed fingerprint slot (inline_step -1) that stays put until the plan
 * is reset (NULL when out of memory). */
rcoll_fp_slot_t *rcoll_fp_alloc(struct rcollComm *c);
/* A fingerprint send copies its inline bytes in just before it is posted
 * (engine.c moves the inline steps themselves). */
void rcoll_fp_fill_inline(rcoll_plan_t *p, rcoll_step_t *st);

#endif
