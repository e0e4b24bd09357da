/* The CUDA IPC hello a rank receives from a peer on its node before device
 * data moves: the ring's shape, the IPC memory handle and the path of the
 * control page, which the receiver opens, maps and unlinks. Checked before
 * any CUDA call, so no GPU is needed. */
#include "cuda/ipc.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  rcoll_ipc_hello_t h;
  fuzz_take(&in, &h, sizeof h);
  if (rcoll_ipc_hello_check(&h, size) != NULL)
    return 0;
  FUZZ_ASSERT(size == sizeof h && h.magic == RCOLL_IPC_MAGIC, "a hello of %zu bytes passed", size);
  FUZZ_ASSERT(h.nslots >= 1 && h.nslots <= RCOLL_MAX_SLOTS && h.slot_bytes > 0, "ring %d x %llu", h.nslots,
              (unsigned long long)h.slot_bytes);
  const char *end = memchr(h.path, '\0', sizeof h.path);
  FUZZ_ASSERT(end != NULL, "path not terminated");
  const char *slash = strrchr(h.path, '/');
  FUZZ_ASSERT(strncmp(slash ? slash + 1 : h.path, "rcoll-ipc-", 10) == 0, "unlinks %s", h.path);
  FUZZ_ASSERT(strstr(h.path, "/../") == NULL, "path %s", h.path);
  return 0;
}
