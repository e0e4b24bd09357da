/* The shm transport's handshake: the connection request a listener reads
 * from its unix socket (anyone on the host may connect to it), the ring
 * segment's header the peer wrote and the listener maps, with the segment
 * name it turns into a path, and the listen handle a peer sends for
 * connect. The first byte picks which. */
#include "../../transports/shm/shm_priv.h"
#include "error.h"
#include "fuzz_common.h"

#define FUZZ_SECRET 0x5eC2e7f022aa11bbull /* the corpus's seeds carry it */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

static void fuzz_request(fuzz_in_t *in) {
  shm_conn_req_t req;
  const char *why = shm_req_parse(in->p, in->left, FUZZ_SECRET, &req);
  if (why != NULL)
    return;
  FUZZ_ASSERT(req.magic == SHM_MAGIC && req.secret == FUZZ_SECRET, "request passed");
  FUZZ_ASSERT(memchr(req.seg, '\0', sizeof req.seg) != NULL, "segment name not terminated");
  /* What shm_seg_open does next with the name: only our pattern is a path. */
  if (shm_seg_name_ok(req.seg))
    FUZZ_ASSERT(strchr(req.seg, '/') == NULL && strncmp(req.seg, SHM_PREFIX "-", sizeof SHM_PREFIX) == 0,
                "name %s", req.seg);
}

/* The header as mapped from a file of `bytes` bytes (from the input). */
static void fuzz_segment(fuzz_in_t *in) {
  uint64_t bytes;
  fuzz_take(in, &bytes, sizeof bytes);
  shm_seg_t *seg = aligned_alloc(SHM_LINE, SHM_HDR_BYTES);
  FUZZ_ASSERT(seg != NULL, "out of memory");
  fuzz_take(in, seg, SHM_HDR_BYTES);
  if (shm_seg_valid(seg, (size_t)bytes)) {
    FUZZ_ASSERT(seg->nslots >= SHM_MIN_SLOTS && seg->nslots <= SHM_MAX_SLOTS, "nslots %u", seg->nslots);
    FUZZ_ASSERT(seg->slot_size >= SHM_MIN_SLOT && seg->slot_size <= SHM_MAX_SLOT, "slot size");
    FUZZ_ASSERT(bytes >= SHM_HDR_BYTES && (bytes - SHM_HDR_BYTES) / seg->nslots >= seg->slot_size,
                "the slots do not fit the file");
  }
  free(seg);
}

static void fuzz_handle(fuzz_in_t *in) {
  unsigned char handle[RCOLL_NET_HANDLE_BYTES];
  shm_handle_t h;
  fuzz_take(in, handle, sizeof handle);
  if (shm_handle_decode(handle, &h) != rcollSuccess)
    return;
  size_t len = strnlen(h.sock, sizeof h.sock);
  FUZZ_ASSERT(len > 0 && len < sizeof h.sock && h.pid > 0, "handle passed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  switch (fuzz_u8(&in) % 3) {
  case 0: fuzz_request(&in); break;
  case 1: fuzz_segment(&in); break;
  default: fuzz_handle(&in); break;
  }
  return 0;
}
