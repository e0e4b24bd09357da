/* The socket transport's handshake: the 48-byte hello on every socket of a
 * connection, read by the listener from strangers as well as peers, and the
 * listen handle a peer sends for connect. The first byte picks which; hellos
 * come several in a row, as the sockets of one connection do, and are filed
 * by connection id and index the way the listener files them. */
#include "../../transports/socket/socket_priv.h"
#include "error.h"
#include "fuzz_common.h"

#define FUZZ_SECRET 0x5eC2e7f022aa11bbull /* the corpus's seeds carry it */
#define FUZZ_GROUPS 4

typedef struct group {
  uint64_t conn_id;
  uint16_t nsocks;
  unsigned char have[SOCKET_MAX_SOCKS];
} group_t;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

/* As socket_group_add: a valid hello's index must fit its group's sockets. */
static void file_hello(group_t *g, int *ng, const socket_hello_t *h) {
  int i = 0;
  while (i < *ng && g[i].conn_id != h->conn_id)
    i++;
  if (i == *ng) {
    if (*ng == FUZZ_GROUPS)
      return;
    g[i] = (group_t){.conn_id = h->conn_id, .nsocks = h->nsocks_total};
    (*ng)++;
  }
  if (h->nsocks_total != g[i].nsocks)
    return; /* the listener drops it: disagrees with its connection */
  FUZZ_ASSERT(h->index < SOCKET_MAX_SOCKS, "index %u passed", h->index);
  g[i].have[h->index] = 1;
}

static void fuzz_hellos(fuzz_in_t *in) {
  group_t groups[FUZZ_GROUPS];
  int ngroups = 0;
  while (in->left > 0) {
    unsigned char wire[sizeof(socket_hello_t)];
    size_t len = in->left < sizeof wire ? in->left : sizeof wire;
    socket_hello_t h;
    fuzz_take(in, wire, sizeof wire);
    if (socket_hello_parse(wire, len, FUZZ_SECRET, &h) != NULL)
      continue;
    FUZZ_ASSERT(h.nthreads >= 1 && h.nthreads <= SOCKET_MAX_THREADS, "nthreads %u", h.nthreads);
    FUZZ_ASSERT(h.nsocks_total == 1 + h.nthreads * h.nsocks_per && h.nsocks_total <= SOCKET_MAX_SOCKS,
                "nsocks %u", h.nsocks_total);
    FUZZ_ASSERT(h.inline_max <= INT32_MAX, "inline_max %llu", (unsigned long long)h.inline_max);
    file_hello(groups, &ngroups, &h);
  }
}

static void fuzz_handle(fuzz_in_t *in) {
  unsigned char handle[RCOLL_NET_HANDLE_BYTES];
  socket_handle_t h;
  fuzz_take(in, handle, sizeof handle);
  if (socket_handle_decode(handle, &h) != rcollSuccess) {
    FUZZ_ASSERT(strstr(rcoll_error_text(), "socket:") != NULL, "error: %s", rcoll_error_text());
    return;
  }
  FUZZ_ASSERT(h.magic == SOCKET_MAGIC && rcoll_sockaddr_len(&h.addr) != 0, "handle passed");
  FUZZ_ASSERT(rcoll_sockaddr_port(&h.addr) > 0, "port %d", rcoll_sockaddr_port(&h.addr));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  if (fuzz_u8(&in) % 2 == 0)
    fuzz_hellos(&in);
  else
    fuzz_handle(&in);
  return 0;
}
