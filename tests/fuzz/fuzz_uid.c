/* The unique id: 128 bytes a launcher carries from rank 0 to every rank, as
 * rcollCommInitRank receives them. Whatever they hold, decoding must either
 * refuse them with an error or yield an address that can be connected to;
 * the public call with an id that does not decode must fail at once, without
 * opening anything. */
#include <sys/socket.h>

#include "bootstrap.h"
#include "error.h"
#include "fuzz_common.h"
#include "rcoll.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  rcollUniqueId id;
  rcoll_bootstrap_id_t d;
  fuzz_take(&in, id.internal, sizeof id.internal);
  rcollResult_t r = rcoll_bootstrap_id_decode(&id, &d);
  if (r == rcollSuccess) {
    char buf[80];
    FUZZ_ASSERT(d.magic == RCOLL_BOOTSTRAP_ID_MAGIC, "decoded a wrong magic");
    FUZZ_ASSERT(rcoll_sockaddr_len(&d.root) != 0, "decoded family %d", d.root.sa.sa_family);
    FUZZ_ASSERT(rcoll_sockaddr_port(&d.root) > 0, "decoded port %d", rcoll_sockaddr_port(&d.root));
    rcoll_sockaddr_str(&d.root, buf, sizeof buf);
    FUZZ_ASSERT(strlen(buf) < sizeof buf, "address text");
    return 0;
  }
  FUZZ_ASSERT(r == rcollInvalidArgument, "decode failed with %d", r);
  FUZZ_ASSERT(rcoll_error_text()[0] != '\0', "an error without a message");
  /* The public entry refuses the same id before it starts anything. */
  rcollComm_t comm = NULL;
  r = rcollCommInitRank(&comm, 2, id, 1);
  FUZZ_ASSERT(r == rcollInvalidArgument && comm == NULL, "rcollCommInitRank gave %d", r);
  return 0;
}
