/* Writes the seeds of tests/fuzz/corpus/<target>/: one valid message of each
 * kind a harness parses, taken from the library where it makes them in the
 * open (the unique id from a real root, the socket and shm listen handles
 * from real listeners on loopback) and laid out with the library's own
 * structs and byte-order helpers otherwise (the hellos, replies, tables and
 * handshakes are built inside static functions next to socket I/O). Every
 * seed carries the harnesses' secret, FUZZ_SECRET. Seeds start with the
 * harness's selector byte where it has one.
 *
 *   build-fuzz/bin/gen_corpus DIR      (make fuzz-corpus writes tests/fuzz/corpus) */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../transports/shm/shm_priv.h"
#include "../../transports/socket/socket_priv.h"
#include "bootstrap.h"
#include "comm.h"
#include "bootstrap_wire.h"
#include "config.h"
#include "cuda/ipc.h"
#include "error.h"
#include "net.h"
#include "topo.h"
#include "tuner.h"
#if RCOLL_HAVE_UCX
#include "../../transports/ucx/ucx_priv.h"
#endif
#if RCOLL_HAVE_IBVERBS
#include "../../transports/ib/ib_priv.h"
#endif

#define FUZZ_SECRET 0x5eC2e7f022aa11bbull

static const char *dir;

static void die(const char *what) {
  fprintf(stderr, "gen_corpus: %s: %s\n", what, rcoll_error_text());
  exit(1);
}

/* DIR/<target>/seed-<name>: the selector byte (when >= 0), then the bytes. */
static void seed(const char *target, const char *name, int selector, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    die(path);
  snprintf(path, sizeof path, "%s/%s/seed-%s", dir, target, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL)
    die(path);
  if (selector >= 0)
    fputc(selector, f);
  fwrite(p, 1, n, f);
  fclose(f);
}

static rcoll_sockaddr_t loopback(int port) {
  rcoll_sockaddr_t a;
  char text[32];
  snprintf(text, sizeof text, "127.0.0.1:%d", port);
  if (rcoll_sockaddr_parse(text, -1, &a) != rcollSuccess)
    die("loopback address");
  return a;
}

static void gen_uid(rcoll_settings_t *s) {
  rcollUniqueId id;
  rcoll_sockaddr_t at = loopback(0);
  s->timeout = 1; /* the root gives up a second later; the program is gone by then */
  if (rcoll_bootstrap_root_start(s, &at, FUZZ_SECRET, &id) != rcollSuccess)
    die("root");
  seed("uid", "root-127.0.0.1", -1, id.internal, sizeof id.internal);
}

static rcoll_bootstrap_hello_t hello(int rank, int nranks) {
  rcoll_bootstrap_hello_t h;
  memset(&h, 0, sizeof h);
  h.secret = FUZZ_SECRET;
  h.rank = rank;
  h.nranks = nranks;
  h.listen_addr = loopback(40000 + rank);
  snprintf(h.host, sizeof h.host, "node%d:%d", rank, 1000 + rank);
  rcoll_bootstrap_hello_swap(&h);
  return h;
}

static void gen_bootstrap(void) {
  rcoll_bootstrap_hello_t two[2] = {hello(1, 2), hello(0, 2)};
  seed("bootstrap", "hellos-2-ranks", 0, two, sizeof two);
  rcoll_bootstrap_reply_t r = {.status = rcollSuccess};
  rcoll_bootstrap_reply_swap(&r);
  seed("bootstrap", "reply-ok", 1, &r, sizeof r);
  r = (rcoll_bootstrap_reply_t){.status = rcollTimeout};
  snprintf(r.text, sizeof r.text, "ranks 1 of 2 never reached the root 127.0.0.1:40000 within 1 s");
  rcoll_bootstrap_reply_swap(&r);
  seed("bootstrap", "reply-timeout", 1, &r, sizeof r);
  /* The table: its first byte is nranks - 1. */
  unsigned char table[1 + sizeof two];
  rcoll_bootstrap_hello_t in_order[2] = {hello(0, 2), hello(1, 2)};
  table[0] = 1;
  memcpy(table + 1, in_order, sizeof in_order);
  seed("bootstrap", "table-2-ranks", 2, table, sizeof table);
  rcoll_bootstrap_intro_t in = {.secret = FUZZ_SECRET, .rank = 1};
  rcoll_bootstrap_intro_swap(&in);
  seed("bootstrap", "intro-rank-1", 3, &in, sizeof in);
}

/* A real listen handle of one transport, on loopback. */
static void real_handle(const char *net, rcoll_settings_t *s, unsigned char handle[RCOLL_NET_HANDLE_BYTES]) {
  const rcoll_transport_ops_t *ops = rcoll_net_find(net);
  rcoll_net_config_t cfg = {.settings = s, .secret = FUZZ_SECRET, .rank = 0};
  void *ctx = NULL, *lc = NULL;
  if (ops == NULL || ops->init(&cfg, &ctx) != rcollSuccess || ops->listen(ctx, 0, handle, &lc) != rcollSuccess)
    die(net);
  ops->close_listen(lc);
  ops->finalize(ctx);
}

static void gen_socket(rcoll_settings_t *s) {
  socket_hello_t h[3];
  for (int i = 0; i < 3; i++)
    h[i] = (socket_hello_t){.magic = SOCKET_MAGIC, .secret = FUZZ_SECRET, .conn_id = 0x1234567890abcdefull,
                            .inline_max = 65536, .index = (uint16_t)i, .nsocks_total = 3, .nthreads = 2,
                            .nsocks_per = 1};
  seed("socket", "hellos-3-sockets", 0, h, sizeof h);
  unsigned char handle[RCOLL_NET_HANDLE_BYTES];
  real_handle("socket", s, handle);
  seed("socket", "listen-handle", 1, handle, sizeof handle);
  seed("plugin", "socket-listen-handle", -1, handle, sizeof handle);
  memset(handle, 0x5a, sizeof handle);
  seed("plugin", "garbage", -1, handle, sizeof handle);
}

static void gen_shm(rcoll_settings_t *s) {
  shm_conn_req_t req = {.magic = SHM_MAGIC, .secret = FUZZ_SECRET, .pid = 4242};
  snprintf(req.seg, sizeof req.seg, SHM_PREFIX "-4242-0-0123456789abcdef");
  seed("shm", "request", 0, &req, sizeof req);
  /* The segment: the file's size (8 bytes), then its header page. */
  unsigned char seg[sizeof(uint64_t) + SHM_HDR_BYTES];
  memset(seg, 0, sizeof seg);
  shm_seg_t hdr = {.magic = SHM_MAGIC, .nslots = 4, .slot_size = 65536, .sender_pid = 4242};
  hdr.bytes = shm_seg_bytes(hdr.nslots, hdr.slot_size);
  memcpy(seg, &hdr.bytes, sizeof hdr.bytes);
  memcpy(seg + sizeof(uint64_t), &hdr, sizeof hdr);
  seed("shm", "segment-4x64k", 1, seg, sizeof seg);
  unsigned char handle[RCOLL_NET_HANDLE_BYTES];
  real_handle("shm", s, handle);
  seed("shm", "listen-handle", 2, handle, sizeof handle);
}

static void gen_ucx(void) {
#if RCOLL_HAVE_UCX
  ucx_hello_t h = {.magic = UCX_MAGIC, .secret = FUZZ_SECRET, .host_id = 77};
  seed("ucx", "hello", 0, &h, sizeof h);
  ucx_reply_t r = {.magic = UCX_MAGIC, .host_id = 78, .conn_id = 1, .addr_len = 120};
  seed("ucx", "answer", 1, &r, sizeof r);
  ucx_handle_t hd = {.magic = UCX_MAGIC, .secret = FUZZ_SECRET, .addr = loopback(40001)};
  unsigned char handle[RCOLL_NET_HANDLE_BYTES] = {0};
  memcpy(handle, &hd, sizeof hd);
  seed("ucx", "listen-handle", 2, handle, sizeof handle);
#endif
}

static void gen_ib(void) {
#if RCOLL_HAVE_IBVERBS
  ib_qp_info_t q = {.magic = IB_MAGIC, .secret = FUZZ_SECRET, .nqps = 2, .mtu = IBV_MTU_1024,
                    .qpn = {0x11, 0x12}, .psn = {0x100, 0x200}, .link_layer = IBV_LINK_LAYER_ETHERNET,
                    .gid_index = 1};
  snprintf(q.desc, sizeof q.desc, "rxe0:1");
  seed("ib", "qp-info-2-qps", 0, &q, sizeof q);
  ib_handle_t hd = {.magic = IB_MAGIC, .secret = FUZZ_SECRET, .addr = loopback(40002)};
  unsigned char handle[RCOLL_NET_HANDLE_BYTES] = {0};
  memcpy(handle, &hd, sizeof hd);
  seed("ib", "listen-handle", 1, handle, sizeof handle);
#endif
}

/* Two ranks on one host, each with its host id, the socket transport open
 * (its real listen handle) and the tuner parameters the defaults give. */
static void gen_rankinfo(rcoll_settings_t *s) {
  unsigned char buf[1 + 2 * sizeof(rcoll_rank_info_t) + 2 * sizeof(rcoll_tune_params_t)];
  rcoll_rank_info_t infos[2];
  rcoll_tune_params_t prm[2];
  memset(infos, 0, sizeof infos);
  int sock = rcoll_net_index("socket");
  for (int r = 0; r < 2; r++) {
    rcoll_topo_hostid(s, infos[r].hostid);
    infos[r].nets = 1u << sock;
    real_handle("socket", s, (unsigned char *)infos[r].handles[sock]);
  }
  const char *const nets[2] = {"socket", "socket"};
  rcoll_tune_link_t links[2] = {rcoll_tune_default_link("socket"), rcoll_tune_default_link("socket")};
  memset(prm, 0, sizeof prm);
  if (rcoll_tune_params_from_settings(s, nets, links, (size_t)s->chunk_size, &prm[0]) != rcollSuccess)
    die("tuner parameters");
  prm[0].window = (int)s->nslots;
  prm[1] = prm[0];
  buf[0] = 1; /* nranks - 1 */
  memcpy(buf + 1, infos, sizeof infos);
  memcpy(buf + 1 + sizeof infos, prm, sizeof prm);
  seed("rankinfo", "2-ranks-socket", -1, buf, sizeof buf);
}

/* The hello a sender of device data posts (lib/cuda/ipc.c lays it out). */
static void gen_ipc(const rcoll_settings_t *s) {
  rcoll_ipc_hello_t h;
  memset(&h, 0, sizeof h);
  h.magic = RCOLL_IPC_MAGIC;
  h.pid = 4242;
  h.ns_key = 0x0123456789abcdefull; /* any key but 0: rcoll_pid_ns_key() sets the low bit */
  h.nslots = (int32_t)s->nslots;
  h.slot_bytes = (uint64_t)s->chunk_size;
  snprintf(h.path, sizeof h.path, "%s/rcoll-ipc-4242-0-0-1", s->shm_dir);
  seed("ipc", "hello", -1, &h, sizeof h);
}

/* One line per setting: the index of its name in the listing, then the value. */
static void gen_settings(void) {
  static const char *const lines[][2] = {
      {"TIMEOUT", "30"}, {"CHUNK_SIZE", "1M"}, {"ALGO", "^ring,tree"}, {"TUNE_ALPHA", "socket=30,shm=1,inter=250"},
      {"TUNE_BW", "socket=1.2,intra=8"}, {"TUNE_REDUCE_BW", "12.5"}, {"SOCKET_IFNAME", "^docker,=eth0,lo"},
      {"COMM_ID", "[::1]:29500"}, {"DEBUG_SUBSYS", "^INIT,NET"}, {"DEBUG_FILE", "/tmp/rcoll.%h.%p"},
      {"SOCKET_FAMILY", "AF_INET6"}, {"IB_HCA", "=mlx5_0:1,^mlx5_1"}, {"NET", "socket"}};
  int count = rcoll_settings_count();
  for (size_t l = 0; l < sizeof lines / sizeof lines[0]; l++) {
    for (int i = 0; i < count; i++) {
      rcoll_setting_info_t info;
      rcoll_settings_describe(i, &info);
      if (strcmp(info.name, lines[l][0]) != 0)
        continue;
      char name[64];
      snprintf(name, sizeof name, "%s", info.name);
      for (char *c = name; *c; c++)
        *c = (char)(*c == '_' ? '-' : tolower((unsigned char)*c));
      seed("settings", name, i, lines[l][1], strlen(lines[l][1]));
    }
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  setenv("RCOLL_DEBUG", "NONE", 1);
  rcoll_settings_t s;
  if (rcoll_settings_load(&s) != rcollSuccess)
    die("settings");
  snprintf(s.socket_ifname, sizeof s.socket_ifname, "lo");
  s.socket_family[0] = '\0';
  gen_settings();
  gen_bootstrap();
  gen_socket(&s);
  gen_shm(&s);
  gen_ucx();
  gen_ib();
  gen_rankinfo(&s);
  gen_ipc(&s);
  gen_uid(&s);
  return 0;
}
