/* The ib transport's handshake over TCP: the queue-pair information each
 * side reads from the other (the listener from whoever connects, the
 * connecting side from whoever answers at the handle's address), and the
 * listen handle a peer sends for connect. The first byte picks which. No
 * device is needed: these are checked before any verbs call. Without verbs
 * in this build there is nothing to parse: every input passes. */
#include "error.h"
#include "fuzz_common.h"
#if RCOLL_HAVE_IBVERBS
#include "../../transports/ib/ib_priv.h"

#define FUZZ_SECRET 0x5eC2e7f022aa11bbull /* the corpus's seeds carry it */

static void fuzz_info(fuzz_in_t *in) {
  ib_qp_info_t r;
  if (ib_qp_info_parse(in->p, in->left, FUZZ_SECRET, &r) != NULL)
    return;
  FUZZ_ASSERT(r.nqps >= 1 && r.nqps <= IB_MAX_QPS, "nqps %u", r.nqps);
  FUZZ_ASSERT(r.mtu >= IBV_MTU_256 && r.mtu <= IBV_MTU_4096, "mtu %u", r.mtu);
  FUZZ_ASSERT(memchr(r.desc, '\0', sizeof r.desc) != NULL, "desc not terminated");
  /* What ib_qp_ready reads per queue pair. */
  uint64_t sum = 0;
  for (uint32_t q = 0; q < r.nqps; q++)
    sum += r.qpn[q] + r.psn[q];
  (void)sum;
}

static void fuzz_handle(fuzz_in_t *in) {
  unsigned char handle[RCOLL_NET_HANDLE_BYTES];
  ib_handle_t h;
  fuzz_take(in, handle, sizeof handle);
  if (ib_handle_decode(handle, &h) == rcollSuccess)
    FUZZ_ASSERT(rcoll_sockaddr_len(&h.addr) != 0 && rcoll_sockaddr_port(&h.addr) > 0, "handle passed");
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#if RCOLL_HAVE_IBVERBS
  fuzz_in_t in = {data, size};
  if (fuzz_u8(&in) % 2 == 0)
    fuzz_info(&in);
  else
    fuzz_handle(&in);
#else
  (void)data;
  (void)size;
#endif
  return 0;
}
