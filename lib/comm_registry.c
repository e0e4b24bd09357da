/* Which communicator handles are live. rcollCommDestroy frees the
 * communicator, so a handle passed again afterwards points at freed memory
 * (or at whatever malloc put there since): no field of it can be trusted,
 * and reading one is itself the bug ASan reports. So the public entry
 * points ask this table before they touch a handle.
 *
 * Why a table and not tombstoned handles: a handle is the address of the
 * struct the whole library works on, and keeping every destroyed struct
 * (kilobytes each) would grow without bound in a program that makes
 * communicators in a loop. The table costs one word per handle.
 *
 * A slot holds a live handle's address, the address with bit 0 set once it
 * was destroyed (a tombstone: "already destroyed" can then be said), or 0
 * (never used). Lookups are lock-free (every collective makes one, and a
 * mutex would cost more than the rest of an 8-byte call's checks); creation
 * and destruction take the lock. Tombstones are never emptied, only reused
 * by a later handle, so a probe chain never breaks. A new communicator that
 * malloc places at a destroyed one's address takes over that address's
 * slot: the stale handle then names the new communicator, which no check
 * on a bare pointer can tell apart. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "comm.h"
#include "error.h"

#define REG_BITS 12
#define REG_SLOTS (1u << REG_BITS) /* live communicators one process may hold */

static _Atomic uintptr_t reg_slots[REG_SLOTS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned reg_home(uintptr_t p) {
  return (unsigned)(((uint64_t)p >> 4) * 0x9e3779b97f4a7c15ull >> (64 - REG_BITS));
}

rcoll_comm_state_t rcoll_comm_registry_state(const void *comm) {
  uintptr_t p = (uintptr_t)comm;
  unsigned h = reg_home(p);
  for (unsigned i = 0; i < REG_SLOTS; i++) {
    uintptr_t v = atomic_load_explicit(&reg_slots[(h + i) & (REG_SLOTS - 1)], memory_order_acquire);
    if (v == p)
      return RCOLL_COMM_LIVE;
    if (v == (p | 1))
      return RCOLL_COMM_DESTROYED;
    if (v == 0)
      break;
  }
  return RCOLL_COMM_UNKNOWN;
}

/* The address's own tombstone if its chain has one, else the first slot
 * that is free or holds another address's tombstone; -1 when full. */
static long reg_place(uintptr_t p) {
  unsigned h = reg_home(p);
  long reuse = -1;
  for (unsigned i = 0; i < REG_SLOTS; i++) {
    unsigned s = (h + i) & (REG_SLOTS - 1);
    uintptr_t v = atomic_load_explicit(&reg_slots[s], memory_order_relaxed);
    if (v == (p | 1))
      return s;
    if (reuse < 0 && (v & 1))
      reuse = s;
    if (v == 0)
      return reuse >= 0 ? reuse : (long)s;
  }
  return reuse;
}

rcollResult_t rcoll_comm_registry_add(const void *comm) {
  uintptr_t p = (uintptr_t)comm;
  pthread_mutex_lock(&reg_lock);
  long s = reg_place(p);
  if (s >= 0)
    atomic_store_explicit(&reg_slots[s], p, memory_order_release);
  pthread_mutex_unlock(&reg_lock);
  if (s < 0)
    return rcoll_error(rcollSystemError, "cannot create a communicator: this process already holds "
                       "%u live ones (destroy some first)", REG_SLOTS);
  return rcollSuccess;
}

void rcoll_comm_registry_remove(const void *comm) {
  uintptr_t p = (uintptr_t)comm;
  unsigned h = reg_home(p);
  pthread_mutex_lock(&reg_lock);
  for (unsigned i = 0; i < REG_SLOTS; i++) {
    unsigned s = (h + i) & (REG_SLOTS - 1);
    uintptr_t v = atomic_load_explicit(&reg_slots[s], memory_order_relaxed);
    if (v == p) {
      atomic_store_explicit(&reg_slots[s], p | 1, memory_order_release);
      break;
    }
    if (v == 0)
      break;
  }
  pthread_mutex_unlock(&reg_lock);
}
