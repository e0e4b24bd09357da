/* The bootstrap's messages as they come off its sockets: the hellos the
 * root reads from every connection, the root's reply and table that each
 * rank reads, and the introductions on the ring's listeners. The first byte
 * picks the message, the rest is its bytes; hellos come several in a row, as
 * the root sees them from many connections, so that the first valid one
 * fixes nranks for the others. Decoders must refuse what is malformed with
 * an error and hand on only values the callers can index with. */
#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "error.h"
#include "fuzz_common.h"

/* The corpus's seeds carry this secret (gen_corpus.c). */
#define FUZZ_SECRET 0x5eC2e7f022aa11bbull

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

static void check_hello(const rcoll_bootstrap_hello_t *h, int expected) {
  FUZZ_ASSERT(h->secret == FUZZ_SECRET, "a hello with another secret passed");
  FUZZ_ASSERT(h->nranks >= 1 && h->nranks <= RCOLL_BOOTSTRAP_MAX_RANKS, "nranks %d", h->nranks);
  FUZZ_ASSERT(expected <= 0 || h->nranks == expected, "nranks %d after %d", h->nranks, expected);
  FUZZ_ASSERT(h->rank >= 0 && h->rank < h->nranks, "rank %d of %d", h->rank, h->nranks);
  FUZZ_ASSERT(rcoll_sockaddr_len(&h->listen_addr) != 0, "family %d", h->listen_addr.sa.sa_family);
  FUZZ_ASSERT(rcoll_sockaddr_port(&h->listen_addr) > 0, "port %d", rcoll_sockaddr_port(&h->listen_addr));
  FUZZ_ASSERT(memchr(h->host, '\0', sizeof h->host) != NULL, "host name not terminated");
}

/* The root's view: hellos from several connections, one after another. */
static void fuzz_hellos(fuzz_in_t *in) {
  int expected = 0;
  while (in->left > 0) {
    unsigned char wire[sizeof(rcoll_bootstrap_hello_t)];
    size_t len = in->left < sizeof wire ? in->left : sizeof wire;
    rcoll_bootstrap_hello_t h;
    fuzz_take(in, wire, sizeof wire);
    if (rcoll_bootstrap_hello_decode(wire, len, FUZZ_SECRET, expected, &h) == rcollSuccess) {
      check_hello(&h, expected);
      expected = h.nranks;
    } else {
      FUZZ_ASSERT(rcoll_error_text()[0] != '\0', "a refusal without a reason");
    }
  }
}

static void fuzz_reply(fuzz_in_t *in) {
  rcollResult_t status = rcollSuccess;
  char text[RCOLL_BOOTSTRAP_REPLY_TEXT];
  if (rcoll_bootstrap_reply_decode(in->p, in->left, &status, text) != rcollSuccess)
    return;
  FUZZ_ASSERT(status >= rcollSuccess && status < rcollNumResults, "status %d", status);
  FUZZ_ASSERT(memchr(text, '\0', sizeof text) != NULL, "reason not terminated");
  (void)rcollGetErrorString(status);
}

/* A rank's view of the table: nranks from the first byte, as its own. */
static void fuzz_table(fuzz_in_t *in) {
  int nranks = 1 + fuzz_u8(in) % 8;
  size_t len = in->left;
  rcoll_bootstrap_hello_t *table = malloc(len ? len : 1);
  char(*hosts)[RCOLL_BOOTSTRAP_HOST_MAX] = calloc((size_t)nranks, RCOLL_BOOTSTRAP_HOST_MAX);
  FUZZ_ASSERT(table != NULL && hosts != NULL, "out of memory");
  fuzz_take(in, table, len);
  if (rcoll_bootstrap_table_decode(table, len, FUZZ_SECRET, nranks, hosts, 0, nranks) == rcollSuccess) {
    for (int i = 0; i < nranks; i++) {
      check_hello(&table[i], nranks);
      FUZZ_ASSERT(table[i].rank == i, "entry %d says rank %d", i, table[i].rank);
      FUZZ_ASSERT(memchr(hosts[i], '\0', RCOLL_BOOTSTRAP_HOST_MAX) != NULL, "host %d", i);
    }
  }
  free(table);
  free(hosts);
}

static void fuzz_intro(fuzz_in_t *in) {
  int rank = -7;
  const char *why = rcoll_bootstrap_intro_decode(in->p, in->left, FUZZ_SECRET, &rank);
  FUZZ_ASSERT(why != NULL || in->left == sizeof(rcoll_bootstrap_intro_t), "a short intro passed");
  FUZZ_ASSERT(why == NULL || rank == -7, "a refused intro set the rank");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  switch (fuzz_u8(&in) % 4) {
  case 0: fuzz_hellos(&in); break;
  case 1: fuzz_reply(&in); break;
  case 2: fuzz_table(&in); break;
  default: fuzz_intro(&in); break;
  }
  return 0;
}
