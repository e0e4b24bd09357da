/* The host fake of the CUDA function table (cuda_fake.h): allocations the
 * fake remembers, one thread per stream running its operations in order, and
 * the driver's context lock as a real driver showed it.
 *
 * One file past 600 lines, on purpose: every function of the table pushes
 * an operation onto a stream and takes the lock, and every operation is run
 * by fake_run, which also applies the bus models (copy_bytes_per_us,
 * dev_bytes_per_us); split, those would be shared through a private header
 * that is all of this file's state. The direct kernels' block function, the
 * one part that stands alone, is cuda_fake_direct.c already. */
#include "cuda_fake.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/bounce_kernel.h"
#include "cuda/direct_kernel.h"
#include "cuda/module.h"
#include "reduce.h"

#define FAKE_MAX_ALLOCS 4096

enum fake_op_kind {
  FAKE_OP_COPY, FAKE_OP_KERNEL, FAKE_OP_EVENT, FAKE_OP_WAIT, FAKE_OP_HOST, FAKE_OP_DIRECT, FAKE_OP_BOUNCE,
  FAKE_OP_WAIT_EVENT
};

typedef struct fake_fn {
  int kind; /* rcoll_cuda_kernel_kind */
  rcollDataType_t t;
  rcollRedOp_t op;
  _Atomic int loaded; /* by cuFuncLoad; cuModuleGetFunction leaves it lazy */
} fake_fn_t;

/* As on a GPU, a query is about the event's latest record only: an event
 * recorded again before its stream ran the first record is not ready when
 * the first one runs (a fake that said so let two direct kernels of one rank
 * run at once, which a GPU never does). */
typedef struct fake_event {
  _Atomic uint64_t recorded; /* records made, */
  _Atomic uint64_t reached;  /* and the latest of them a stream has run */
} fake_event_t;

typedef struct fake_op {
  int kind;
  void *dst;
  const void *src;
  size_t bytes;
  const fake_fn_t *fn;
  uint64_t args[4];
  fake_event_t *event;
  uint64_t record; /* FAKE_OP_EVENT: which of the event's records; _WAIT_EVENT: the one waited for */
  const _Atomic uint32_t *flag;
  uint32_t value;
  void (*host)(void *);
  void *host_arg;
  rcoll_direct_args_t *direct; /* FAKE_OP_DIRECT: the kernel's parameter, copied */
  rcoll_bounce_kargs_t *bounce; /* FAKE_OP_BOUNCE: the same */
  int delay_us;                /* FAKE_OP_COPY, _BOUNCE: its stream's own delay, beside copy_delay_us */
  int d2d;                     /* FAKE_OP_COPY: device memory to device memory */
  int cold;                    /* pushed while its stream had nothing queued (dev_op_us) */
  _Atomic int *queued;         /* FAKE_OP_COPY: its stream's copies_queued */
  struct fake_op *next;
} fake_op_t;

typedef struct fake_stream {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  fake_op_t *head, *tail;
  int busy, stop;
  _Atomic int copy_delay_us; /* fake_stream_copy_delay */
  _Atomic int copies_queued; /* copies pushed and not yet run (fake_stats.copies_queued_most) */
  _Atomic int copies;        /* copies pushed (fake_stream_copies) */
  pthread_t thread;
} fake_stream_t;

typedef struct fake_alloc {
  char *base;
  size_t bytes;
  int type;   /* RCOLL_CUDA_MEMTYPE_DEVICE or _HOST (pinned) */
  int no_ipc; /* made under fake_alloc_no_ipc */
} fake_alloc_t;

struct fake_stats fake_stats;

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_alloc_t fake_allocs[FAKE_MAX_ALLOCS];
static int fake_nallocs;
static fake_stream_t *fake_legacy;
static fake_fn_t fake_fns[RCOLL_CUDA_K_BOUNCE + 1][rcollNumTypes][rcollNumOps];

static const fake_alloc_t *fake_find(const void *p) {
  const char *c = p;
  const fake_alloc_t *hit = NULL;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < fake_nallocs && hit == NULL; i++)
    if (fake_allocs[i].base != NULL && c >= fake_allocs[i].base &&
        c < fake_allocs[i].base + fake_allocs[i].bytes)
      hit = &fake_allocs[i];
  pthread_mutex_unlock(&fake_mu);
  return hit;
}

static int fake_alloc(void **p, size_t bytes, int type) {
  char *m = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (m == NULL)
    return 2; /* cudaErrorMemoryAllocation */
  memset(m, 0xa5, bytes);
  pthread_mutex_lock(&fake_mu);
  int slot = fake_nallocs;
  for (int i = 0; i < fake_nallocs; i++)
    if (fake_allocs[i].base == NULL)
      slot = i;
  if (slot == fake_nallocs)
    fake_nallocs++;
  fake_allocs[slot] = (fake_alloc_t){m, bytes, type, fake_alloc_no_ipc};
  pthread_mutex_unlock(&fake_mu);
  *p = m;
  return 0;
}

int fake_free(void *p) {
  if (p == NULL)
    return 0;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < fake_nallocs; i++)
    if (fake_allocs[i].base == p)
      fake_allocs[i].base = NULL;
  pthread_mutex_unlock(&fake_mu);
  free(p);
  return 0;
}

/* ---- streams: one thread each, running operations in order ---- */

/* *gauge += 1, and *most follows the largest value it took. */
static void fake_gauge_up(_Atomic int *gauge, _Atomic int *most) {
  int now = atomic_fetch_add(gauge, 1) + 1;
  for (int m = atomic_load(most); now > m && !atomic_compare_exchange_weak(most, &m, now);)
    ;
}

static void fake_sleep_us(int us) {
  if (us > 0) {
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
}

/* The device's memory, when fake_stats.dev_bytes_per_us is set: work
 * pushed on an idle stream waits dev_op_us (a launch; other streams' work
 * goes on meanwhile; work queued behind other work starts when that ends,
 * as on a GPU), then moves its bytes over one bus that all streams share,
 * in turn. Returns
 * when its turn on the bus ends; the caller does the work (on this
 * machine's cores) first and then waits for that, so the model's time, not
 * the memcpy's, is what a bench sees. */
static pthread_mutex_t fake_bus_mu = PTHREAD_MUTEX_INITIALIZER;
static struct timespec fake_bus_free;

static void fake_wait_until(const struct timespec *end) {
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, end, NULL) != 0)
    ;
}

static struct timespec fake_device_work(size_t traffic, int cold) {
  int rate = atomic_load(&fake_stats.dev_bytes_per_us);
  if (cold)
    fake_sleep_us(atomic_load(&fake_stats.dev_op_us));
  struct timespec now, end;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t ns = (uint64_t)((double)traffic / rate * 1000);
  pthread_mutex_lock(&fake_bus_mu);
  if (fake_bus_free.tv_sec < now.tv_sec || (fake_bus_free.tv_sec == now.tv_sec && fake_bus_free.tv_nsec < now.tv_nsec))
    fake_bus_free = now;
  fake_bus_free.tv_sec += (time_t)(ns / 1000000000u);
  fake_bus_free.tv_nsec += (long)(ns % 1000000000u);
  if (fake_bus_free.tv_nsec >= 1000000000) {
    fake_bus_free.tv_sec++;
    fake_bus_free.tv_nsec -= 1000000000;
  }
  end = fake_bus_free;
  pthread_mutex_unlock(&fake_bus_mu);
  return end;
}

/* rcoll_k_bounce (lib/cuda/bounce_kernel.h) on the CPU: its copies take
 * as long as the stream's copies do (copy_delay_us and the stream's own). */
static void fake_bounce_run(const rcoll_bounce_kargs_t *a, int delay_us) {
  if (a->in != NULL) {
    fake_sleep_us(atomic_load(&fake_stats.copy_delay_us) + delay_us);
    memcpy(a->in_host, a->in, a->in_bytes);
  }
  atomic_store_explicit((_Atomic uint32_t *)a->ready, a->seq, memory_order_release);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while ((int32_t)(atomic_load_explicit((const _Atomic uint32_t *)a->flag, memory_order_acquire) - a->seq) < 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((uint64_t)(now.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(now.tv_nsec - t0.tv_nsec) > a->timeout_ns) {
      *(volatile uint32_t *)a->timed_out = 1;
      return;
    }
    fake_sleep_us(20);
  }
  if (a->out != NULL) {
    fake_sleep_us(atomic_load(&fake_stats.copy_delay_us) + delay_us);
    memcpy(a->out, a->out_host, a->out_bytes);
  }
}

static void fake_run(fake_op_t *op) {
  switch (op->kind) {
  case FAKE_OP_COPY: {
    if (op->d2d && atomic_load(&fake_stats.dev_bytes_per_us) > 0) { /* read and written: twice its bytes */
      fake_gauge_up(&fake_stats.copies_running, &fake_stats.copies_overlap);
      struct timespec end = fake_device_work(2 * op->bytes, op->cold);
      memmove(op->dst, op->src, op->bytes);
      fake_wait_until(&end);
      atomic_fetch_sub(&fake_stats.copies_running, 1);
      atomic_fetch_sub(op->queued, 1);
      break;
    }
    int rate = atomic_load(&fake_stats.copy_bytes_per_us);
    int delay_us = atomic_load(&fake_stats.copy_delay_us) + op->delay_us +
                   (rate > 0 ? (int)(op->bytes / (size_t)rate) : 0);
    fake_gauge_up(&fake_stats.copies_running, &fake_stats.copies_overlap);
    if (rate > 0) { /* a bench: the bus's time, the memmove within it (cuda_fake.h) */
      struct timespec end;
      clock_gettime(CLOCK_MONOTONIC, &end);
      end.tv_sec += delay_us / 1000000;
      end.tv_nsec += (long)(delay_us % 1000000) * 1000;
      if (end.tv_nsec >= 1000000000)
        end.tv_sec++, end.tv_nsec -= 1000000000;
      memmove(op->dst, op->src, op->bytes);
      fake_wait_until(&end);
    } else { /* the bytes land when the delay ends: data read before then is stale */
      fake_sleep_us(delay_us);
      memmove(op->dst, op->src, op->bytes);
    }
    atomic_fetch_sub(&fake_stats.copies_running, 1);
    atomic_fetch_sub(op->queued, 1);
    break;
  }
  case FAKE_OP_EVENT:
    for (uint64_t r = atomic_load(&op->event->reached);
         r < op->record && !atomic_compare_exchange_weak(&op->event->reached, &r, op->record);)
      ;
    break;
  case FAKE_OP_HOST: op->host(op->host_arg); break;
  case FAKE_OP_DIRECT:
    fake_direct_run(op->direct, op->fn->t, op->fn->op);
    free(op->direct);
    break;
  case FAKE_OP_BOUNCE:
    fake_bounce_run(op->bounce, op->delay_us);
    free(op->bounce);
    break;
  case FAKE_OP_WAIT_EVENT:
    while (atomic_load(&op->event->reached) < op->record) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
    break;
  case FAKE_OP_WAIT:
    while ((int32_t)(atomic_load(op->flag) - op->value) < 0) {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
    break;
  case FAKE_OP_KERNEL:
    if (op->fn->kind == RCOLL_CUDA_K_REDUCE) {
      int model = atomic_load(&fake_stats.dev_bytes_per_us) > 0;
      struct timespec end = {0, 0}; /* two operands read, one written */
      if (model)
        end = fake_device_work(3 * (size_t)op->args[3] * rcoll_type_size(op->fn->t), op->cold);
      rcoll_reduce((void *)op->args[0], (const void *)op->args[1], (const void *)op->args[2],
                   (size_t)op->args[3], op->fn->t, op->fn->op);
      if (model)
        fake_wait_until(&end);
    }
    else if (op->fn->kind == RCOLL_CUDA_K_AVG)
      rcoll_reduce_finish((void *)op->args[0], (size_t)op->args[1], op->fn->t, rcollAvg,
                          (int)op->args[2]);
    break;
  }
}

static void *fake_stream_main(void *arg) {
  fake_stream_t *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->stop)
      pthread_cond_wait(&s->cv, &s->mu);
    if (s->head == NULL)
      break;
    fake_op_t *op = s->head;
    s->busy = 1;
    pthread_mutex_unlock(&s->mu);
    fake_run(op);
    pthread_mutex_lock(&s->mu);
    s->head = op->next;
    if (s->head == NULL)
      s->tail = NULL;
    s->busy = 0;
    free(op);
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static fake_stream_t *fake_stream_new(void) {
  fake_stream_t *s = calloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_create(&s->thread, NULL, fake_stream_main, s);
  return s;
}

static fake_stream_t *fake_stream_of(rcoll_cuda_stream_t h) {
  return h == NULL ? fake_legacy : h;
}

static void fake_push(rcoll_cuda_stream_t h, fake_op_t op) {
  fake_stream_t *s = fake_stream_of(h);
  fake_op_t *o = malloc(sizeof *o);
  *o = op;
  o->next = NULL;
  if (o->kind == FAKE_OP_COPY) {
    o->queued = &s->copies_queued;
    fake_gauge_up(o->queued, &fake_stats.copies_queued_most);
  }
  pthread_mutex_lock(&s->mu);
  o->cold = s->head == NULL;
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void fake_stream_host(rcoll_cuda_stream_t h, void (*fn)(void *), void *arg) {
  fake_push(h, (fake_op_t){.kind = FAKE_OP_HOST, .host = fn, .host_arg = arg});
}

int fake_stream_sync(rcoll_cuda_stream_t h) {
  fake_stream_t *s = fake_stream_of(h);
  pthread_mutex_lock(&s->mu);
  while (s->head != NULL || s->busy)
    pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* ---- the driver's context lock ----
 * As a real driver showed it (H200, driver 580.159, CUDA 13, found with
 * tests/gpu/probe.sh): a copy into pageable host memory holds the lock while
 * it waits for its stream, shared on a created stream and exclusive on the
 * legacy default stream; cuEventDestroy takes it exclusive; copies, launches,
 * event records and queries, stream waits and syncs take it shared. The fake
 * waits for it at most FAKE_LOCK_MS: each wait that gives up is a deadlock on
 * a GPU, counted in fake_stats.deadlocks, and the call goes on without it. */
#define FAKE_LOCK_MS 1500
static pthread_rwlock_t fake_driver_lock = PTHREAD_RWLOCK_INITIALIZER;

static int fake_lock(int exclusive) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += FAKE_LOCK_MS / 1000;
  ts.tv_nsec += (FAKE_LOCK_MS % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  int e = exclusive ? pthread_rwlock_timedwrlock(&fake_driver_lock, &ts)
                    : pthread_rwlock_timedrdlock(&fake_driver_lock, &ts);
  if (e != 0)
    atomic_fetch_add(&fake_stats.deadlocks, 1);
  return e == 0;
}

static void fake_unlock(int held) {
  if (held)
    pthread_rwlock_unlock(&fake_driver_lock);
}

/* Test hook: cudaMemcpyAsync from device memory into pageable host memory,
 * which returns only once the copy is done, with the lock held meanwhile. */
void fake_copy_to_pageable(void *dst, const void *src, size_t n, rcoll_cuda_stream_t h) {
  int held = fake_lock(h == NULL);
  fake_push(h, (fake_op_t){.kind = FAKE_OP_COPY, .dst = dst, .src = src, .bytes = n});
  fake_stream_sync(h);
  fake_unlock(held);
}

/* ---- the table ---- */

static int f_get_device_count(int *n) { *n = 1; return 0; }
static int f_get_device(int *d) { *d = 0; return 0; }
static int f_set_device(int d) { return d == 0 ? 0 : 101; }
static int f_malloc(void **p, size_t b) { return fake_alloc(p, b, RCOLL_CUDA_MEMTYPE_DEVICE); }
static int f_host_alloc(void **p, size_t b, unsigned f) {
  (void)f;
  if (fake_host_alloc_limit > 0 && b > fake_host_alloc_limit)
    return 2; /* cudaErrorMemoryAllocation */
  return fake_alloc(p, b, RCOLL_CUDA_MEMTYPE_HOST);
}
static int f_host_dev_ptr(void **d, void *h, unsigned f) { (void)f; *d = h; return 0; }
static int f_get_last_error(void) { return 0; }
static const char *f_error_string(int e) { (void)e; return "fake CUDA error"; }
static int f_cu_init(unsigned f) { (void)f; return 0; }

static int f_pointer_attrs(rcoll_cuda_ptr_attr_t *a, const void *p) {
  atomic_fetch_add(&fake_stats.attr_queries, 1);
  const fake_alloc_t *m = fake_find(p);
  memset(a, 0, sizeof *a);
  a->type = m ? m->type : RCOLL_CUDA_MEMTYPE_UNREGISTERED;
  a->device = m ? 0 : -2;
  return 0;
}

static int f_cu_pointer_attr(void *data, int attr, rcoll_cu_deviceptr_t p) {
  const fake_alloc_t *m = fake_find((const void *)(uintptr_t)p);
  if (attr != RCOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE || m == NULL)
    return 1; /* CUDA_ERROR_INVALID_VALUE */
  *(unsigned *)data = m->type == RCOLL_CUDA_MEMTYPE_DEVICE ? RCOLL_CU_MEMORYTYPE_DEVICE
                                                           : RCOLL_CU_MEMORYTYPE_HOST;
  return 0;
}

static int f_cu_range(rcoll_cu_deviceptr_t *base, size_t *bytes, rcoll_cu_deviceptr_t p) {
  const fake_alloc_t *m = fake_find((const void *)(uintptr_t)p);
  if (m == NULL)
    return 1;
  *base = (rcoll_cu_deviceptr_t)(uintptr_t)m->base;
  *bytes = m->bytes;
  return 0;
}

static int f_memcpy_async(void *d, const void *s, size_t n, int kind, rcoll_cuda_stream_t st) {
  (void)kind;
  int held = fake_lock(0);
  atomic_fetch_add(&fake_stats.copies, 1);
  atomic_fetch_add(&fake_stream_of(st)->copies, 1);
  int delay_us = atomic_load(&fake_stream_of(st)->copy_delay_us);
  const fake_alloc_t *to = fake_find(d), *from = fake_find(s);
  int d2d = to != NULL && from != NULL && to->type == RCOLL_CUDA_MEMTYPE_DEVICE &&
            from->type == RCOLL_CUDA_MEMTYPE_DEVICE;
  fake_push(st, (fake_op_t){.kind = FAKE_OP_COPY, .dst = d, .src = s, .bytes = n, .delay_us = delay_us,
                            .d2d = d2d});
  fake_unlock(held);
  return 0;
}

static int f_stream_sync(rcoll_cuda_stream_t h) {
  int held = fake_lock(0);
  atomic_fetch_add(&fake_stats.syncs, 1);
  fake_stream_sync(h);
  fake_unlock(held);
  return 0;
}

static int f_stream_create(rcoll_cuda_stream_t *s, unsigned f) { (void)f; *s = fake_stream_new(); return 0; }

static int f_stream_destroy(rcoll_cuda_stream_t h) {
  fake_stream_t *s = h;
  fake_stream_sync(h);
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  free(s);
  return 0;
}

static int f_event_create(rcoll_cuda_event_t *e, unsigned f) {
  (void)f;
  int held = fake_lock(0);
  atomic_fetch_add(&fake_stats.events_created, 1);
  *e = calloc(1, sizeof(fake_event_t));
  fake_unlock(held);
  return 0;
}
static int f_event_destroy(rcoll_cuda_event_t e) {
  int held = fake_lock(1);
  free(e);
  fake_unlock(held);
  return 0;
}
static int f_event_query(rcoll_cuda_event_t e) {
  int held = fake_lock(0);
  fake_event_t *ev = e;
  int r = atomic_load(&ev->reached) < atomic_load(&ev->recorded) ? RCOLL_CUDA_ERROR_NOT_READY : 0;
  fake_unlock(held);
  return r;
}
/* The stream waits until the event's latest record so far has run. */
static int f_stream_wait_event(rcoll_cuda_stream_t s, rcoll_cuda_event_t e, unsigned flags) {
  (void)flags;
  int held = fake_lock(0);
  fake_event_t *ev = e;
  fake_push(s, (fake_op_t){.kind = FAKE_OP_WAIT_EVENT, .event = ev, .record = atomic_load(&ev->recorded)});
  fake_unlock(held);
  return 0;
}

static int f_event_record(rcoll_cuda_event_t e, rcoll_cuda_stream_t s) {
  int held = fake_lock(0);
  atomic_fetch_add(&fake_stats.records, 1);
  uint64_t record = atomic_fetch_add(&((fake_event_t *)e)->recorded, 1) + 1;
  fake_push(s, (fake_op_t){.kind = FAKE_OP_EVENT, .event = e, .record = record});
  fake_unlock(held);
  return 0;
}

char fake_bus_id[32];
int fake_mps = -1;

static int f_device_attribute(int *value, int attr, int device) {
  int sms = atomic_load(&fake_stats.sm_count);
  if (attr == RCOLL_CUDA_DEV_ATTR_MPS_ENABLED && device == 0 && fake_mps >= 0) {
    *value = fake_mps;
    return 0;
  }
  if (attr != RCOLL_CUDA_DEV_ATTR_SM_COUNT || device != 0 || sms <= 0)
    return 1; /* cudaErrorInvalidValue */
  *value = sms;
  return 0;
}

static int f_device_bus_id(char *bus, int len, int device) {
  if (fake_bus_id[0] == '\0' || device != 0 || len < 1)
    return 1; /* cudaErrorInvalidValue */
  snprintf(bus, (size_t)len, "%s", fake_bus_id);
  return 0;
}

_Thread_local int fake_refuse_ipc, fake_alloc_no_ipc;
_Thread_local size_t fake_host_alloc_limit;

static int f_ipc_get(rcoll_cuda_ipc_handle_t *h, void *p) {
  atomic_fetch_add(&fake_stats.ipc_gets, 1);
  const fake_alloc_t *a = fake_find(p);
  if (fake_refuse_ipc || (a != NULL && a->no_ipc))
    return 801; /* cudaErrorNotSupported */
  memset(h, 0, sizeof *h);
  memcpy(h->reserved, &p, sizeof p);
  return 0;
}
static int f_ipc_open(void **p, rcoll_cuda_ipc_handle_t h, unsigned f) {
  (void)f;
  atomic_fetch_add(&fake_stats.ipc_opens, 1);
  memcpy(p, h.reserved, sizeof *p);
  return 0;
}
static int f_ipc_close(void *p) {
  (void)p;
  atomic_fetch_add(&fake_stats.ipc_closes, 1);
  return 0;
}

static int f_module_load(rcoll_cu_module_t *m, const void *image) { (void)image; *m = fake_fns; return 0; }
static int f_module_unload(rcoll_cu_module_t m) { (void)m; return 0; }

static int f_module_get_function(rcoll_cu_function_t *f, rcoll_cu_module_t m, const char *name) {
  (void)m;
  char buf[64];
  for (int kind = RCOLL_CUDA_K_REDUCE; kind <= RCOLL_CUDA_K_BOUNCE; kind++)
    for (int t = 0; t < rcollNumTypes; t++)
      for (int op = 0; op < rcollNumOps; op++) {
        rcoll_cuda_kernel_name(kind, (rcollDataType_t)t, (rcollRedOp_t)op, buf, sizeof buf);
        if (strcmp(buf, name) == 0) {
          fake_fn_t *fn = &fake_fns[kind][t][op];
          fn->kind = kind;
          fn->t = (rcollDataType_t)t;
          fn->op = (rcollRedOp_t)op;
          *f = fn;
          return 0;
        }
      }
  return 500; /* CUDA_ERROR_NOT_FOUND */
}

static int f_func_load(rcoll_cu_function_t f) {
  atomic_store(&((fake_fn_t *)f)->loaded, 1);
  return 0;
}

static int f_launch(rcoll_cu_function_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                    unsigned by, unsigned bz, unsigned shm, rcoll_cuda_stream_t s, void **params,
                    void **extra) {
  (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm; (void)extra;
  fake_fn_t *fn = f;
  if (!atomic_exchange(&fn->loaded, 1))
    atomic_fetch_add(&fake_stats.lazy_loads, 1);
  fake_op_t op = {.kind = FAKE_OP_KERNEL, .fn = fn};
  if (fn->kind == RCOLL_CUDA_K_WAIT) {
    atomic_fetch_add(&fake_stats.wait_kernels, 1);
    op.kind = FAKE_OP_WAIT;
    op.flag = (const _Atomic uint32_t *)(uintptr_t)*(rcoll_cu_deviceptr_t *)params[0];
    op.value = *(uint32_t *)params[1];
    atomic_store(&fake_stats.last_wait_value, op.value);
  } else if (fn->kind == RCOLL_CUDA_K_DIRECT) {
    atomic_fetch_add(&fake_stats.direct_kernels, 1);
    op.kind = FAKE_OP_DIRECT;
    op.direct = malloc(sizeof *op.direct);
    if (op.direct == NULL)
      return 2;
    memcpy(op.direct, params[0], sizeof *op.direct);
  } else if (fn->kind == RCOLL_CUDA_K_BOUNCE) {
    atomic_fetch_add(&fake_stats.bounce_kernels, 1);
    op.kind = FAKE_OP_BOUNCE;
    op.delay_us = atomic_load(&fake_stream_of(s)->copy_delay_us);
    op.bounce = malloc(sizeof *op.bounce);
    if (op.bounce == NULL)
      return 2;
    memcpy(op.bounce, params[0], sizeof *op.bounce);
  } else if (fn->kind == RCOLL_CUDA_K_REDUCE) {
    atomic_fetch_add(&fake_stats.reduce_kernels, 1);
    for (int i = 0; i < 3; i++)
      op.args[i] = (uint64_t)(uintptr_t)*(void **)params[i];
    op.args[3] = *(size_t *)params[3];
  } else {
    op.args[0] = (uint64_t)(uintptr_t)*(void **)params[0];
    op.args[1] = *(size_t *)params[1];
    op.args[2] = (uint64_t)*(int *)params[2];
  }
  int held = fake_lock(0);
  fake_push(s, op);
  fake_unlock(held);
  return 0;
}

static int f_wait_value(rcoll_cuda_stream_t s, rcoll_cu_deviceptr_t addr, uint32_t value, unsigned fl) {
  (void)fl;
  if (atomic_load(&fake_stats.refuse_memop))
    return 801; /* CUDA_ERROR_NOT_SUPPORTED */
  atomic_fetch_add(&fake_stats.waits, 1);
  atomic_store(&fake_stats.last_wait_value, value);
  int held = fake_lock(0);
  fake_push(s, (fake_op_t){.kind = FAKE_OP_WAIT, .flag = (const _Atomic uint32_t *)(uintptr_t)addr,
                           .value = value});
  fake_unlock(held);
  return 0;
}

static const rcoll_cuda_api_t fake_api = {
    .get_device_count = f_get_device_count, .get_device = f_get_device,
    .set_device = f_set_device, .pointer_get_attributes = f_pointer_attrs, .malloc = f_malloc,
    .free = fake_free, .host_alloc = f_host_alloc, .free_host = fake_free,
    .host_get_device_pointer = f_host_dev_ptr, .memcpy_async = f_memcpy_async,
    .stream_create_with_flags = f_stream_create, .stream_destroy = f_stream_destroy,
    .stream_synchronize = f_stream_sync, .event_create_with_flags = f_event_create,
    .event_destroy = f_event_destroy, .event_record = f_event_record, .event_query = f_event_query,
    .stream_wait_event = f_stream_wait_event,
    .ipc_get_mem_handle = f_ipc_get, .ipc_open_mem_handle = f_ipc_open,
    .ipc_close_mem_handle = f_ipc_close, .get_error_string = f_error_string,
    .get_last_error = f_get_last_error, .cu_init = f_cu_init,
    .cu_pointer_get_attribute = f_cu_pointer_attr, .cu_mem_get_address_range = f_cu_range,
    .cu_module_load_data = f_module_load, .cu_module_unload = f_module_unload,
    .cu_module_get_function = f_module_get_function, .cu_launch_kernel = f_launch,
    .cu_stream_wait_value32 = f_wait_value, .cu_flush_gpudirect_rdma_writes = NULL,
    .cu_func_load = f_func_load,
    .device_get_pci_bus_id = f_device_bus_id, /* fails unless fake_bus_id is set */
    .device_get_attribute = f_device_attribute,
};

void fake_cuda_install(void) {
  fake_legacy = fake_stream_new();
  rcoll_cuda_api_override(&fake_api);
}

void fake_stream_copy_delay(rcoll_cuda_stream_t h, int us) {
  atomic_store(&((fake_stream_t *)h)->copy_delay_us, us);
}

int fake_stream_copies(rcoll_cuda_stream_t h) { return atomic_load(&((fake_stream_t *)h)->copies); }
