/* The NCCL net plugin's handles: the 128 bytes NCCL carries from one
 * process's listen() to another's connect(), through ncclNetPlugin_v8 as
 * NCCL calls it. The plugin runs over the socket transport on loopback.
 * Every handle is decoded as connect decodes it; one that is refused must
 * make connect fail at once, leaving no comm, socket or connect state
 * behind. A handle that decodes names an address anyone could have put
 * there: the harness does not connect to it (it would reach an arbitrary
 * host), it checks what connect would use. */
#include <unistd.h>

#include "../../plugin/plugin.h"
#include "../../transports/socket/socket_priv.h"
#include "error.h"
#include "fuzz_common.h"

extern nccl_net_v8_t ncclNetPlugin_v8;

static void quiet_logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  setenv("RCOLL_NET", "socket", 1);
  setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
  if (ncclNetPlugin_v8.init(quiet_logger) != NCCL_ABI_SUCCESS) {
    fprintf(stderr, "fuzz_plugin: the plugin did not start over sockets on lo: %s\n", rcoll_error_text());
    exit(1);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  unsigned char handle[NCCL_ABI_HANDLE_MAXSIZE];
  fuzz_take(&in, handle, sizeof handle);
  socket_handle_t h;
  if (socket_handle_decode(handle, &h) == rcollSuccess) {
    FUZZ_ASSERT(h.magic == SOCKET_MAGIC && rcoll_sockaddr_len(&h.addr) != 0, "handle passed");
    FUZZ_ASSERT(rcoll_sockaddr_port(&h.addr) > 0, "port %d", rcoll_sockaddr_port(&h.addr));
    return 0;
  }
  void *send = (void *)1;
  nccl_net_device_handle_t *dev = NULL;
  nccl_result_t r = ncclNetPlugin_v8.connect(0, handle, &send, &dev);
  FUZZ_ASSERT(r != NCCL_ABI_SUCCESS && send == NULL, "connect took a refused handle (%d)", (int)r);
  return 0;
}
