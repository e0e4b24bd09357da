/* The ucx transport's handshake over its rendezvous socket: the hello the
 * listener reads from whoever connects, the answer header the connecting
 * side reads back (its worker-address length sizes an allocation), and the
 * listen handle a peer sends for connect. The first byte picks which.
 * Without UCX in this build there is nothing to parse: every input passes. */
#include "error.h"
#include "fuzz_common.h"
#if RCOLL_HAVE_UCX
#include "../../transports/ucx/ucx_priv.h"

#define FUZZ_SECRET 0x5eC2e7f022aa11bbull /* the corpus's seeds carry it */

static void fuzz_hello(fuzz_in_t *in) {
  ucx_hello_t h;
  if (ucx_hello_parse(in->p, in->left, FUZZ_SECRET, &h) == NULL)
    FUZZ_ASSERT(h.magic == UCX_MAGIC && h.secret == FUZZ_SECRET && in->left == sizeof h, "hello passed");
}

static void fuzz_reply(fuzz_in_t *in) {
  ucx_reply_t r;
  if (ucx_reply_parse(in->p, in->left, &r) != NULL)
    return;
  FUZZ_ASSERT(r.addr_len > 0 && r.addr_len <= UCX_WORKER_ADDR_MAX, "addr_len %u", r.addr_len);
  FUZZ_ASSERT(r.conn_id > 0 && r.conn_id <= UCX_CONN_ID_MAX, "conn_id %u", r.conn_id);
}

static void fuzz_handle(fuzz_in_t *in) {
  unsigned char handle[RCOLL_NET_HANDLE_BYTES];
  ucx_handle_t h;
  fuzz_take(in, handle, sizeof handle);
  if (ucx_handle_decode(handle, &h) == rcollSuccess)
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
#if RCOLL_HAVE_UCX
  fuzz_in_t in = {data, size};
  switch (fuzz_u8(&in) % 3) {
  case 0: fuzz_hello(&in); break;
  case 1: fuzz_reply(&in); break;
  default: fuzz_handle(&in); break;
  }
#else
  (void)data;
  (void)size;
#endif
  return 0;
}
