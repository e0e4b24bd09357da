/* The shared-memory transport tests' common set-up (tests/test_shm.c,
 * test_shm_faults.c): a fresh segment directory per test under /dev/shm (so
 * that leftovers can be counted), ring settings, and a pair connected in
 * one process or across a fork. */
#ifndef RCOLL_TESTS_SUPPORT_SHM_PAIR_H
#define RCOLL_TESTS_SUPPORT_SHM_PAIR_H

#include "../../transports/shm/shm.h"
#include "transport_harness.h"

/* Short names the two test files share: constants and one table, no code
 * worth compiling once. */
#define SECRET TH_SECRET
#define SLOT 4096
#define MIB TH_MIB
/* Receives land at every alignment (streaming stores align first). */
#define SHIFT 8
static const rcoll_transport_ops_t *const ops = &shm_ops;
typedef th_pair_t pair_t;

/* The directory of the running test (Criterion runs each in a process). */
extern char shm_test_dir[128];
void shm_pair_dir_make(void);   /* a suite's .init */
void shm_pair_dir_remove(void); /* its .fini */
int shm_pair_dir_entries(void); /* files left in it */

typedef struct shm_cfg {
  int slots, slot_size;
  long cma, memcpy_min, exchange;
  int timeout;     /* seconds; 0 means 30 */
  int no_pool_map; /* 1: RCOLL_SHM_POOL_MAP=0 */
} shm_cfg_t;

void shm_pair_settings(rcoll_settings_t *s, const shm_cfg_t *c);
void shm_pair_listen(pair_t *p, const shm_cfg_t *c);
/* Listen, then connect and accept in this process. */
void shm_pair_open(pair_t *p, const shm_cfg_t *c);
/* th_exchange at SHIFT alignments. */
int shm_pair_exchange(pair_t *p, int n, const size_t *sizes, size_t extra);

/* For a forked child and its parent: connect to (or accept on) p's listener
 * within 5 s; NULL on failure. */
void *shm_pair_proc_connect(pair_t *p);
void *shm_pair_proc_accept(pair_t *p);

#endif
