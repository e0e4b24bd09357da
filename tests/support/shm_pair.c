/* The shm transport tests' pair set-up (shm_pair.h). */
#include "shm_pair.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"

char shm_test_dir[128];

void shm_pair_dir_make(void) {
  snprintf(shm_test_dir, sizeof shm_test_dir, "/dev/shm/rcoll-test-XXXXXX");
  cr_assert_not_null(mkdtemp(shm_test_dir), "mkdtemp: %s", strerror(errno));
}

void shm_pair_dir_remove(void) { rmdir(shm_test_dir); }

int shm_pair_dir_entries(void) {
  int n = 0;
  DIR *d = opendir(shm_test_dir);
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

void shm_pair_settings(rcoll_settings_t *s, const shm_cfg_t *c) {
  memset(s, 0, sizeof *s);
  shm_settings(s)->shm_slots = c->slots;
  shm_settings(s)->shm_slot_size = c->slot_size;
  shm_settings(s)->shm_cma_threshold = c->cma;
  shm_settings(s)->shm_memcpy_threshold = c->memcpy_min;
  shm_settings(s)->shm_exchange_threshold = c->exchange;
  shm_settings(s)->shm_pool_map = !c->no_pool_map;
  s->timeout = c->timeout ? c->timeout : 30;
  snprintf(s->shm_dir, sizeof s->shm_dir, "%s", shm_test_dir);
}

void shm_pair_listen(pair_t *p, const shm_cfg_t *c) {
  memset(p, 0, sizeof *p);
  shm_pair_settings(&p->set, c);
  th_pair_listen(p, ops);
}

void shm_pair_open(pair_t *p, const shm_cfg_t *c) {
  shm_pair_listen(p, c);
  p->sctx = th_ctx_try(ops, &p->set, SECRET);
  th_pair_connect(p, 5000, 0, "shm");
}

int shm_pair_exchange(pair_t *p, int n, const size_t *sizes, size_t extra) {
  return th_exchange(p, n, sizes, extra, SHIFT);
}

void *shm_pair_proc_connect(pair_t *p) {
  void *ctx = th_ctx_try(ops, &p->set, SECRET), *comm = NULL;
  int64_t end = rcoll_now_ms() + 5000;
  while (ctx && comm == NULL && rcoll_now_ms() < end)
    if (ops->connect(ctx, 0, p->handle, &comm) != rcollSuccess)
      return NULL;
  return comm;
}

void *shm_pair_proc_accept(pair_t *p) {
  void *comm = NULL;
  int64_t end = rcoll_now_ms() + 5000;
  while (comm == NULL && rcoll_now_ms() < end)
    if (ops->accept(p->listen, &comm) != rcollSuccess)
      return NULL;
  return comm;
}
