/* CUDA IPC between ranks of one node (ipc.h). */
#include "cuda/ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cuda/cuda_comm.h"
#include "cuda/module.h"
#include "cuda/stage.h"
#include "log.h"
#include "pidns.h"
#include "reduce.h"

static _Atomic unsigned ipc_counter;

static size_t ctrl_bytes(void) {
  long page = sysconf(_SC_PAGESIZE);
  size_t p = page > 0 ? (size_t)page : 4096;
  return (sizeof(rcoll_ipc_ctrl_t) + p - 1) / p * p;
}

/* The control page lives in a file of RCOLL_SHM_DIR; the receiver unlinks it
 * once mapped, the sender at teardown in case the receiver never came. */
static rcollResult_t ctrl_create(struct rcollComm *c, int peer, rcoll_ipc_tx_t *tx) {
  snprintf(tx->hello.path, sizeof tx->hello.path, "%s/rcoll-ipc-%d-%u-%d-%d", c->settings.shm_dir,
           (int)getpid(), atomic_fetch_add(&ipc_counter, 1), c->rank, peer);
  int fd = open(tx->hello.path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return rcoll_error(rcollSystemError, "rank %d: cannot create %s: %s", c->rank, tx->hello.path,
                       strerror(errno));
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)ctrl_bytes()) == 0)
    p = mmap(NULL, ctrl_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int saved = errno;
  close(fd);
  if (p == MAP_FAILED) {
    unlink(tx->hello.path);
    return rcoll_error(rcollSystemError, "rank %d: cannot map %s: %s", c->rank, tx->hello.path,
                       strerror(saved));
  }
  tx->ctrl = p;
  return rcollSuccess;
}

/* One event per part in flight (ipc.h), RCOLL_NSLOTS of them. */
static rcollResult_t flight_alloc(rcoll_cuda_comm_t *cc, rcoll_ipc_flight_t *f) {
  for (uint32_t i = 0; i < (uint32_t)cc->comm->nslots; i++) {
    int r = rcoll_cuda_api()->event_create_with_flags(&f->ev[i], RCOLL_CUDA_EVENT_DISABLE_TIMING);
    if (r != 0)
      return rcoll_error(rcollUnhandledCudaError, "rank %d: cudaEventCreate for CUDA IPC parts on "
                         "device %d failed: %s", cc->comm->rank, cc->device, rcoll_cuda_strerror(r));
    f->nev = i + 1;
  }
  return rcollSuccess;
}

static void flight_free(rcoll_ipc_flight_t *f) {
  for (uint32_t i = 0; i < f->nev; i++)
    rcoll_cuda_api()->event_destroy(f->ev[i]);
}

rcollResult_t rcoll_ipc_rx_alloc(rcoll_cuda_comm_t *cc, int peer) {
  rcoll_ipc_rx_t *rx = &cc->peers[peer].rx;
  if (rx->f.nev > 0)
    return rcollSuccess;
  rcollResult_t r = flight_alloc(cc, &rx->f);
  if (r != rcollSuccess)
    rcoll_ipc_rx_free(rx);
  return r;
}

rcollResult_t rcoll_ipc_tx_alloc(rcoll_cuda_comm_t *cc, int peer) {
  struct rcollComm *c = cc->comm;
  rcoll_ipc_tx_t *tx = &cc->peers[peer].tx;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  size_t bytes = (size_t)c->nslots * c->chunk_bytes;
  rcollResult_t res = flight_alloc(cc, &tx->f);
  if (res != rcollSuccess) {
    rcoll_ipc_tx_free(tx);
    return res;
  }
  void *ring = NULL;
  int r = a->malloc(&ring, bytes);
  if (r != 0) {
    rcoll_ipc_tx_free(tx);
    return rcoll_error(rcollUnhandledCudaError, "rank %d: cudaMalloc of a %zu-byte IPC ring failed: %s",
                       c->rank, bytes, rcoll_cuda_strerror(r));
  }
  tx->ring = ring;
  tx->hello = (rcoll_ipc_hello_t){.magic = RCOLL_IPC_MAGIC, .pid = getpid(),
                                  .ns_key = rcoll_pid_ns_key(), .device = cc->device,
                                  .nslots = c->nslots, .slot_bytes = c->chunk_bytes,
                                  .ring_addr = (uint64_t)(uintptr_t)ring};
  r = a->ipc_get_mem_handle(&tx->hello.handle, ring);
  if (r != 0) {
    rcoll_ipc_tx_free(tx);
    return rcoll_error(rcollUnhandledCudaError, "rank %d: cudaIpcGetMemHandle failed: %s (set "
                       "RCOLL_P2P_DISABLE=1 to stage through host memory)", c->rank,
                       rcoll_cuda_strerror(r));
  }
  res = ctrl_create(c, peer, tx);
  if (res != rcollSuccess)
    rcoll_ipc_tx_free(tx);
  return res;
}

/* A send is done once its data is in the ring, so the receiver may still be
 * reading the last parts when the sender's comm goes away: wait for it. */
void rcoll_ipc_tx_drain(rcoll_ipc_tx_t *tx, int64_t timeout_ms) {
  if (tx->ctrl == NULL || tx->state != RCOLL_IPC_READY)
    return;
  int64_t deadline = rcoll_now_us() + timeout_ms * 1000;
  while (atomic_load_explicit(&tx->ctrl->consumed, memory_order_acquire) < tx->f.next_part &&
         rcoll_now_us() < deadline) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

void rcoll_ipc_tx_free(rcoll_ipc_tx_t *tx) {
  if (tx->ctrl != NULL) {
    unlink(tx->hello.path); /* ENOENT when the receiver already did */
    munmap(tx->ctrl, ctrl_bytes());
  }
  if (tx->ring != NULL)
    rcoll_cuda_api()->free(tx->ring);
  flight_free(&tx->f);
  memset(tx, 0, sizeof *tx);
}

void rcoll_ipc_rx_free(rcoll_ipc_rx_t *rx) {
  if (rx->ctrl != NULL)
    munmap(rx->ctrl, ctrl_bytes());
  if (rx->opened)
    rcoll_cuda_api()->ipc_close_mem_handle(rx->ring);
  flight_free(&rx->f);
  memset(rx, 0, sizeof *rx);
}

/* ---- the hello: the sender posts it, the receiver maps what it names ---- */

static int tx_connect(struct rcollComm *c, int peer, rcoll_ipc_tx_t *tx, rcollResult_t *err) {
  const rcoll_transport_ops_t *ops = rcoll_peer_net(c, peer);
  rcollResult_t r;
  if (tx->state == RCOLL_IPC_NONE) {
    r = ops->isend(c->peers[peer].send_comm, &tx->hello, sizeof tx->hello, 0, NULL, &tx->req);
    if (r == rcollSuccess && tx->req != NULL)
      tx->state = RCOLL_IPC_HELLO;
  } else {
    int done = 0;
    r = ops->test(tx->req, &done, NULL);
    if (r == rcollSuccess && done) {
      tx->req = NULL;
      tx->state = RCOLL_IPC_READY;
    }
  }
  if (r != rcollSuccess)
    *err = rcoll_dev_peer_error(c, peer, r, "CUDA IPC hello to");
  return r == rcollSuccess && tx->state != RCOLL_IPC_NONE;
}

static rcollResult_t rx_map(struct rcollComm *c, int peer, rcoll_ipc_rx_t *rx) {
  const rcoll_ipc_hello_t *h = &rx->hello;
  if (rcoll_ipc_same_process(h)) {
    rx->ring = (char *)(uintptr_t)h->ring_addr;
  } else {
    void *p = NULL;
    int r = rcoll_cuda_api()->ipc_open_mem_handle(&p, h->handle, RCOLL_CUDA_IPC_LAZY_PEER_ACCESS);
    if (r != 0)
      return rcoll_error(rcollUnhandledCudaError, "rank %d: cudaIpcOpenMemHandle of rank %d's ring "
                         "(device %d) failed: %s (set RCOLL_P2P_DISABLE=1 to stage through host "
                         "memory)", c->rank, peer, (int)h->device, rcoll_cuda_strerror(r));
    rx->ring = p;
    rx->opened = 1;
  }
  int fd = open(h->path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return rcoll_error(rcollSystemError, "rank %d: cannot open rank %d's IPC control page %s: %s",
                       c->rank, peer, h->path, strerror(errno));
  void *p = mmap(NULL, ctrl_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int saved = errno;
  close(fd);
  unlink(h->path);
  if (p == MAP_FAILED)
    return rcoll_error(rcollSystemError, "rank %d: cannot map %s: %s", c->rank, h->path,
                       strerror(saved));
  rx->ctrl = p;
  return rcollSuccess;
}

int rcoll_ipc_same_process(const rcoll_ipc_hello_t *h) {
  if (h->pid != (int64_t)getpid() || h->ns_key == 0)
    return 0;
  return h->ns_key == rcoll_pid_ns_key();
}

const char *rcoll_ipc_hello_check(const rcoll_ipc_hello_t *h, size_t got) {
  if (got != sizeof *h || h->magic != RCOLL_IPC_MAGIC)
    return "not a CUDA IPC hello";
  if (h->nslots < 1 || h->nslots > RCOLL_MAX_SLOTS || h->slot_bytes == 0)
    return "a ring of no or too many slots";
  if (memchr(h->path, 0, sizeof h->path) == NULL)
    return "a control page path without its end";
  /* The receiver opens and then unlinks the file the hello names: only a
   * control page of ours, never another file the peer picks (seen while
   * writing tests/fuzz/fuzz_ipc.c, which holds the check to it). */
  const char *slash = strrchr(h->path, '/');
  const char *base = slash != NULL ? slash + 1 : h->path;
  if (strncmp(base, "rcoll-ipc-", 10) != 0 || strstr(h->path, "/../") != NULL)
    return "a control page path outside rcoll's pattern";
  return NULL;
}

static rcollResult_t rx_check(struct rcollComm *c, int peer, const rcoll_ipc_rx_t *rx, size_t got) {
  const char *why = rcoll_ipc_hello_check(&rx->hello, got);
  if (why == NULL)
    return rcollSuccess;
  char name[128];
  rcoll_comm_peer_name(c, peer, name, sizeof name);
  return rcoll_error(rcollInvalidUsage, "rank %d: expected the CUDA IPC hello of %s but got %zu bytes (%s): "
                     "every rank of a call must use device buffers (or all host buffers) and make a "
                     "small device call in a group on all of them or on none (outside a group, one of "
                     "at most RCOLL_CUDA_BOUNCE bytes runs through host memory), and RCOLL_P2P_DISABLE "
                     "must be the same on every rank", c->rank, name, got, why);
}

static int rx_connect(struct rcollComm *c, int peer, rcoll_ipc_rx_t *rx, rcollResult_t *err) {
  const rcoll_transport_ops_t *ops = rcoll_peer_net(c, peer);
  rcollResult_t r;
  if (rx->state == RCOLL_IPC_NONE) {
    void *buf = &rx->hello;
    size_t size = sizeof rx->hello;
    int tag = 0;
    r = ops->irecv(c->peers[peer].recv_comm, 1, &buf, &size, &tag, NULL, &rx->req);
    if (r == rcollSuccess && rx->req != NULL)
      rx->state = RCOLL_IPC_HELLO;
    if (r != rcollSuccess)
      *err = rcoll_dev_peer_error(c, peer, r, "CUDA IPC hello from");
    return rx->state != RCOLL_IPC_NONE;
  }
  int done = 0;
  size_t got = 0;
  r = ops->test(rx->req, &done, &got);
  if (r != rcollSuccess) {
    *err = rcoll_dev_peer_error(c, peer, r, "CUDA IPC hello from");
    return 0;
  }
  if (!done)
    return 0;
  rx->req = NULL;
  if ((*err = rx_check(c, peer, rx, got)) != rcollSuccess)
    return 0;
  if ((*err = rx_map(c, peer, rx)) != rcollSuccess)
    return 0;
  rx->state = RCOLL_IPC_READY;
  return 1;
}

int rcoll_ipc_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_peer_t *cp = &c->cuda->peers[st->peer];
  if (st->kind == RCOLL_STEP_SEND && cp->tx.state != RCOLL_IPC_READY)
    return tx_connect(c, st->peer, &cp->tx, err);
  if (st->kind != RCOLL_STEP_SEND && cp->rx.state != RCOLL_IPC_READY)
    return rx_connect(c, st->peer, &cp->rx, err);
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  x->mode = RCOLL_CUDA_MODE_IPC;
  x->part = 0;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

/* ---- parts ----
 * Each part is issued on a proxy stream and ends in its own event (a
 * send's copies into our ring on the second stream, `down`, as staged
 * sends' copies are: behind a receive's copy out or reduction on the first
 * they would wait for it, where the GPU could run both; the host orders
 * the two, posting a step only once the steps it depends on have run); the
 * proxy polls the oldest between its other steps (a receive from one peer
 * while its send to another copies, as staging does) and publishes every
 * part that has run, then issues as many more as the ring allows. A step
 * lets the next message on its connection start (send_posted or
 * recv_posted) once all its parts are issued, and is done once they are
 * all published; the parts of several steps can be in flight at once. */

/* After a part's copy or reduction, on the stream that ran it: its event. */
static rcollResult_t flight_record(rcoll_cuda_comm_t *cc, rcoll_ipc_flight_t *f, rcoll_cuda_stream_t s,
                                   const char *what) {
  RCOLL_CHECK(rcoll_dev_event_record(cc, s, f->ev[(f->next_part + f->inflight) % f->nev], what));
  f->inflight++;
  return rcollSuccess;
}

/* Publishes (in *counter: filled, or consumed) the parts whose events have
 * fired, whichever steps they belong to. Returns how many. */
static uint32_t flight_publish(rcoll_cuda_comm_t *cc, rcoll_ipc_flight_t *f, _Atomic uint64_t *counter,
                               const char *what, rcollResult_t *err) {
  uint32_t ran = 0;
  while (ran < f->inflight && rcoll_dev_event_ran(cc, f->ev[(f->next_part + ran) % f->nev], what, err))
    ran++;
  if (ran > 0) {
    f->next_part += ran;
    f->inflight -= ran;
    atomic_store_explicit(counter, f->next_part, memory_order_release);
  }
  return ran;
}

/* The step's next part is about to be issued: where its parts start. */
static void step_part_issued(rcoll_cuda_stepx_t *x, const rcoll_ipc_flight_t *f) {
  if (x->part == 0)
    x->first = f->next_part + f->inflight;
  x->part++;
}

/* Once the step has issued its parts the connection's next message may
 * start; once they are all published the step is done. */
static int step_progress(struct rcollComm *c, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                         const rcoll_ipc_flight_t *f, size_t nparts, uint32_t issued, int moved) {
  rcoll_peer_t *pe = &c->peers[st->peer];
  if (issued > 0 && x->part == nparts) {
    if (st->kind == RCOLL_STEP_SEND)
      pe->send_posted++;
    else
      pe->recv_posted++;
  }
  if (x->part == nparts && f->next_part >= x->first + nparts) {
    st->state = RCOLL_STEP_DONE;
    return 1;
  }
  return moved || issued > 0;
}

/* Publishes the parts copied into the ring (the step is done when its last
 * is there: the user's buffer is no longer needed), then copies as many
 * more as the ring has room for. */
static int ipc_send_parts(struct rcollComm *c, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                          rcollResult_t *err) {
  static const char what[] = "a copy into the IPC ring";
  rcoll_cuda_comm_t *cc = c->cuda;
  rcoll_ipc_tx_t *tx = &cc->peers[st->peer].tx;
  rcoll_ipc_flight_t *f = &tx->f;
  size_t slot_bytes = c->chunk_bytes, nparts = rcoll_stage_nparts(st->bytes, slot_bytes);
  uint32_t published = flight_publish(cc, f, &tx->ctrl->filled, what, err), issued = 0;
  cc->prof.ipc_parts_sent += published;
  uint64_t consumed = atomic_load_explicit(&tx->ctrl->consumed, memory_order_acquire);
  while (*err == rcollSuccess && x->part < nparts && f->next_part + f->inflight - consumed < (uint64_t)c->nslots) {
    size_t k = x->part, slot = (size_t)((f->next_part + f->inflight) % (uint64_t)c->nslots);
    size_t n = rcoll_stage_part_bytes(st->bytes, slot_bytes, k);
    *err = rcoll_dev_copy_issue(cc, cc->down, tx->ring + slot * slot_bytes, (const char *)st->src + k * slot_bytes, n);
    if (*err != rcollSuccess)
      break;
    tx->ctrl->part_bytes[slot] = n;
    tx->ctrl->msg_bytes[slot] = st->bytes;
    step_part_issued(x, f);
    *err = flight_record(cc, f, cc->down, what);
    issued++;
  }
  return *err == rcollSuccess && step_progress(c, st, x, f, nparts, issued, published > 0);
}

static rcollResult_t ipc_mismatch(struct rcollComm *c, const rcoll_step_t *st, uint64_t sent) {
  char name[128];
  rcoll_comm_peer_name(c, st->peer, name, sizeof name);
  return rcoll_error(rcollInvalidUsage, "rank %d: %s sent %llu bytes where %zu were expected "
                     "(counts, types or call order differ between ranks)", c->rank, name,
                     (unsigned long long)sent, st->bytes);
}

/* Hands back the slots of the parts read (the step is done with its last
 * part in its place), then copies out (or reduces from) every part that
 * has arrived, as many as we have events for. */
static int ipc_recv_parts(struct rcollComm *c, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                          rcollResult_t *err) {
  static const char what[] = "a copy out of the IPC ring";
  rcoll_cuda_comm_t *cc = c->cuda;
  rcoll_ipc_rx_t *rx = &cc->peers[st->peer].rx;
  rcoll_ipc_flight_t *f = &rx->f;
  size_t slot_bytes = rx->hello.slot_bytes, nparts = rcoll_stage_nparts(st->bytes, slot_bytes);
  uint32_t published = flight_publish(cc, f, &rx->ctrl->consumed, what, err), issued = 0;
  cc->prof.ipc_parts_recv += published;
  uint64_t filled = atomic_load_explicit(&rx->ctrl->filled, memory_order_acquire);
  while (*err == rcollSuccess && x->part < nparts && f->next_part + f->inflight < filled && f->inflight < f->nev) {
    size_t k = x->part;
    size_t slot = (size_t)((f->next_part + f->inflight) % (uint64_t)rx->hello.nslots);
    size_t n = rcoll_stage_part_bytes(st->bytes, slot_bytes, k);
    if (rx->ctrl->msg_bytes[slot] != st->bytes || rx->ctrl->part_bytes[slot] != n) {
      *err = ipc_mismatch(c, st, rx->ctrl->msg_bytes[slot]);
      break;
    }
    const char *part = rx->ring + slot * slot_bytes;
    *err = st->kind == RCOLL_STEP_RECV_REDUCE
               ? rcoll_dev_reduce_issue(cc, st, k * slot_bytes, part, n)
               : rcoll_dev_copy_issue(cc, cc->stream, (char *)st->dst + k * slot_bytes, part, n);
    if (*err != rcollSuccess)
      break;
    step_part_issued(x, f);
    *err = flight_record(cc, f, cc->stream, what);
    issued++;
  }
  return *err == rcollSuccess && step_progress(c, st, x, f, nparts, issued, published > 0);
}

int rcoll_ipc_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  if (st->kind == RCOLL_STEP_SEND)
    return ipc_send_parts(p->comm, st, x, err);
  return ipc_recv_parts(p->comm, st, x, err);
}
