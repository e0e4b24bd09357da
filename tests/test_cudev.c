/* rcollCommCuDevice and rcollCommInitAll's devlist (lib/comm.c, lib/init.c):
 * a communicator is bound at init to the CUDA device current then, as NCCL
 * binds it (not at its first device call); rcollCommInitAll binds
 * communicator i to devlist[i] and refuses a device that is not there.
 * Without a GPU here, the CUDA fake (tests/support/cuda_fake.c: one device,
 * 0) stands for the runtime; without any CUDA the device is -1. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "rcoll.h"
#include "support/cuda_fake.h"

static void setup(void) { setenv("RCOLL_TIMEOUT", "30", 1); }
TestSuite(cudev, .init = setup, .timeout = 120);

Test(cudev, bound_at_init_to_the_current_device) {
  fake_cuda_install();
  rcollUniqueId id;
  rcollComm_t comm;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  cr_assert_eq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess, "%s", rcollGetLastError(NULL));
  int dev = -7;
  cr_assert_eq(rcollCommCuDevice(comm, &dev), rcollSuccess);
  cr_expect_eq(dev, 0, "the device current at init, before any device call (got %d)", dev);
  rcollCommDestroy(comm);
}

Test(cudev, init_all_binds_each_comm_to_its_devlist_entry) {
  fake_cuda_install();
  rcollComm_t comms[2];
  const int devlist[2] = {0, 0};
  cr_assert_eq(rcollCommInitAll(comms, 2, devlist), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    int dev = -7;
    cr_assert_eq(rcollCommCuDevice(comms[r], &dev), rcollSuccess);
    cr_expect_eq(dev, devlist[r], "comm %d: device %d", r, dev);
    rcollCommDestroy(comms[r]);
  }
}

Test(cudev, init_all_refuses_a_device_that_is_not_there) {
  fake_cuda_install();
  rcollComm_t comms[2] = {NULL, NULL};
  const int missing[2] = {0, 1}, negative[2] = {-1, 0};
  cr_expect_eq(rcollCommInitAll(comms, 2, missing), rcollInvalidArgument);
  cr_expect(strstr(rcollGetLastError(NULL), "devlist[1] = 1") != NULL, "%s", rcollGetLastError(NULL));
  cr_expect_eq(rcollCommInitAll(comms, 2, negative), rcollInvalidArgument);
  cr_expect(strstr(rcollGetLastError(NULL), "devlist[0] = -1") != NULL, "%s", rcollGetLastError(NULL));
}

/* No CUDA at all (this machine, no fake): NCCL could not make the
 * communicator; rcoll does, on host buffers, and reports -1. */
Test(cudev, no_cuda_device_reports_minus_one) {
  if (rcoll_device_ops.current_device() >= 0)
    cr_skip_test("this machine has a CUDA device");
  rcollComm_t comms[2];
  const int devlist[2] = {0, 3};
  cr_assert_eq(rcollCommInitAll(comms, 2, devlist), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    int dev = 7;
    cr_assert_eq(rcollCommCuDevice(comms[r], &dev), rcollSuccess);
    cr_expect_eq(dev, -1, "no CUDA device here");
    rcollCommDestroy(comms[r]);
  }
}
