/* The adaptive spin of waits on the kernel's network stack (lib/engine.c,
 * rcoll_engine_spin_missed): four spins in a row that run out make waits
 * sleep at once; after 64 such waits the whole spin is tried again; a met
 * spin (spin_misses back to 0, as the engine does) keeps it; a comm whose
 * peers are all local (spin_now_us -1) is left alone. The timing it is for
 * is measured by bench/compare/compare_netns.sh, not asserted here. */
#include <criterion/criterion.h>
#include <string.h>

#include "comm.h"

static struct rcollComm comm_with(int64_t spin_us, int64_t now) {
  struct rcollComm c;
  memset(&c, 0, sizeof c);
  c.spin_us = spin_us;
  c.spin_now_us = now;
  return c;
}

Test(spin_adapt, four_misses_stop_the_spin_and_64_rests_restore_it) {
  struct rcollComm c = comm_with(50, 50);
  for (int i = 0; i < 3; i++) {
    rcoll_engine_spin_missed(&c);
    cr_assert_eq(c.spin_now_us, 50, "after %d misses", i + 1);
  }
  rcoll_engine_spin_missed(&c);
  cr_assert_eq(c.spin_now_us, 0, "four misses in a row");
  for (int i = 0; i < 63; i++)
    rcoll_engine_spin_missed(&c);
  cr_assert_eq(c.spin_now_us, 0, "63 waits without a spin");
  rcoll_engine_spin_missed(&c);
  cr_assert_eq(c.spin_now_us, 50, "the 64th restores it");
  cr_assert_eq(c.spin_rests, 0);
}

Test(spin_adapt, a_met_spin_between_misses_keeps_it) {
  struct rcollComm c = comm_with(50, 50);
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 3; i++)
      rcoll_engine_spin_missed(&c);
    c.spin_misses = 0; /* what the engine does when a spin is met */
  }
  cr_assert_eq(c.spin_now_us, 50);
}

Test(spin_adapt, local_only_comms_keep_their_spin) {
  struct rcollComm c = comm_with(50, -1);
  for (int i = 0; i < 100; i++)
    rcoll_engine_spin_missed(&c);
  cr_assert_eq(c.spin_now_us, -1);
  cr_assert_eq(c.spin_misses, 0);
}
