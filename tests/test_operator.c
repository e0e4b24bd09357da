/* What an operator sees when creating communicators: the one NOTE line
 * rank 0 prints at the default log level (transports per class of peer, and
 * why a preferred one was not used), and the errors for the classic
 * mistakes (an interface that does not exist, a transport that cannot run
 * here or has no such name, RCOLL_NET_REQUIRE unmet). Also RCOLL_DEBUG_FILE,
 * RCOLL_DEBUG_TIMESTAMP and RCOLL_TOPO_DUMP_FILE. Each test runs in its own
 * process (Criterion), so the environment it sets is read fresh. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "rcoll.h"

static char lines[32][1024];
static int nlines;

static void catch_line(int level, const char *msg) {
  (void)level;
  if (nlines < 32)
    snprintf(lines[nlines++], sizeof lines[0], "%s", msg);
}

/* The caught line holding `needle`, or NULL. */
static const char *line_with(const char *needle) {
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], needle) != NULL)
      return lines[i];
  return NULL;
}

static int count_with(const char *needle) {
  int n = 0;
  for (int i = 0; i < nlines; i++)
    n += strstr(lines[i], needle) != NULL;
  return n;
}

static void setup(void) {
  setenv("RCOLL_TIMEOUT", "30", 1);
  nlines = 0;
  rcoll_log_set_sink(catch_line);
}

static void teardown(void) { rcoll_log_set_sink(NULL); }

TestSuite(operator, .init = setup, .fini = teardown, .timeout = 60);

/* Creates n ranks in threads; returns the result, destroying what was made. */
static rcollResult_t init_all(int n) {
  rcollComm_t comms[8];
  rcollResult_t r = rcollCommInitAll(comms, n, NULL);
  if (r == rcollSuccess)
    for (int i = 0; i < n; i++)
      rcollCommDestroy(comms[i]);
  return r;
}

static void expect_text(const char *needle) {
  const char *text = rcollGetLastError(NULL);
  cr_assert(strstr(text, needle) != NULL, "\"%s\" does not say \"%s\"", text, needle);
}

Test(operator, a_bad_interface_name_lists_the_interfaces_present) {
  setenv("RCOLL_SOCKET_IFNAME", "nosuch0", 1);
  cr_assert_eq(init_all(2), rcollInvalidArgument);
  expect_text("RCOLL_SOCKET_IFNAME=nosuch0 matches no interface");
  expect_text("present: lo");
}

Test(operator, a_bad_nccl_interface_name_is_named_as_nccls) {
  setenv("NCCL_SOCKET_IFNAME", "=eth", 1); /* exact: "eth" alone exists nowhere */
  cr_assert_eq(init_all(2), rcollInvalidArgument);
  expect_text("NCCL_SOCKET_IFNAME==eth matches no interface");
}

Test(operator, an_unknown_transport_lists_those_built_in) {
  setenv("RCOLL_NET", "nosuch", 1);
  cr_assert_eq(init_all(2), rcollInvalidArgument);
  expect_text("RCOLL_NET=nosuch: no such transport (available: ");
  expect_text("socket");
}

/* Here there is no RDMA device (the test says so and stops where there is). */
Test(operator, a_forced_transport_that_cannot_run_says_why) {
  setenv("RCOLL_NET", "ib", 1);
  rcollResult_t r = init_all(2);
  if (r == rcollSuccess)
    cr_skip_test("ib runs here: this machine has an RDMA device");
  const char *text = rcollGetLastError(NULL);
  cr_assert(strstr(text, "RCOLL_NET=ib cannot be used here: ib: ") != NULL ||
                strstr(text, "RCOLL_NET=ib: no such transport") != NULL,
            "%s", text);
}

Test(operator, rank_0_prints_one_line_per_communicator) {
  cr_assert_eq(init_all(3), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(count_with(" on 1 node; within a node "), 2, "%d lines, first: %s", nlines, lines[0]);
  cr_assert_not_null(line_with("3 ranks on 1 node; within a node shm (/dev/shm)"), "%s", lines[0]);
}

Test(operator, the_fallback_to_tcp_is_shown_with_its_reason) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  /* socket here; ib where the machine has an RDMA device */
  const char *l = line_with("2 ranks on 1 node; within a node ");
  cr_assert_not_null(l, "%d lines, first: %s", nlines, lines[0]);
  cr_assert(strstr(l, "within a node socket (") != NULL || strstr(l, "within a node ib (") != NULL, "%s", l);
  cr_assert(strstr(l, "shm not used: RCOLL_SHM_DISABLE=1") != NULL, "%s", l);
}

Test(operator, net_require_makes_the_fallback_an_error) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  setenv("RCOLL_NET_REQUIRE", "shm", 1);
  cr_assert_eq(init_all(2), rcollSystemError);
  expect_text("RCOLL_NET_REQUIRE=shm, but shm cannot be used here: RCOLL_SHM_DISABLE=1");
  setenv("RCOLL_NET_REQUIRE", "nosuch", 1);
  cr_assert_eq(init_all(2), rcollInvalidArgument);
  expect_text("RCOLL_NET_REQUIRE=nosuch: nosuch is not built into this library");
  unsetenv("RCOLL_SHM_DISABLE");
  setenv("RCOLL_NET_REQUIRE", "shm", 1);
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
}

Test(operator, debug_none_silences_the_line) {
  setenv("RCOLL_DEBUG", "NONE", 1);
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(nlines, 0, "%s", lines[0]);
}

/* Two "nodes" need two processes with their own RCOLL_HOSTID: rank 1 is a
 * child. Rank 0's line then names the class between nodes. */
Test(operator, two_nodes_show_the_transport_between_them) {
  rcollUniqueId id;
  setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  pid_t child = fork();
  cr_assert_geq(child, 0);
  rcollComm_t comm;
  setenv("RCOLL_HOSTID", child == 0 ? "node-b" : "node-a", 1);
  rcollResult_t r = rcollCommInitRank(&comm, 2, id, child == 0 ? 1 : 0);
  if (r == rcollSuccess)
    rcollCommDestroy(comm);
  if (child == 0)
    _exit(r == rcollSuccess ? 0 : 1);
  int status;
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert_eq(r, rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const char *l = line_with("2 ranks on 2 nodes; between nodes ");
  cr_assert_not_null(l, "%d lines, first: %s", nlines, lines[0]);
  cr_assert(strstr(l, "between nodes socket (lo 127.0.0.1)") != NULL || strstr(l, "between nodes ib (") != NULL,
            "%s", l);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s was not written", path);
  static char buf[16384];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

Test(operator, topo_dump_file_holds_the_machine_and_every_rank) {
  char path[128], pattern[128];
  snprintf(pattern, sizeof pattern, "/tmp/rcoll-topo-%%p-%d.txt", (int)getpid());
  snprintf(path, sizeof path, "/tmp/rcoll-topo-%d-%d.txt", (int)getpid(), (int)getpid());
  setenv("RCOLL_TOPO_DUMP_FILE", pattern, 1);
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  const char *text = slurp(path);
  unlink(path);
  const char *want[] = {"# rcoll topology of", "NICs:", "GPUs:", "rank 0 of 2", "rank 1 of 2", "shm (used): /dev/shm"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_assert(strstr(text, want[i]) != NULL, "no \"%s\" in:\n%s", want[i], text);
}

/* Without the sink: the lines go to the file RCOLL_DEBUG_FILE names, each
 * starting with the time. */
Test(log_file, debug_file_with_host_and_pid_and_timestamps) {
  char host[64], path[256];
  cr_assert_eq(gethostname(host, sizeof host), 0);
  setenv("RCOLL_DEBUG_FILE", "/tmp/rcoll-log-%h-%p.txt", 1);
  setenv("RCOLL_DEBUG_TIMESTAMP", "1", 1);
  setenv("RCOLL_TIMOUT", "5", 1);
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  snprintf(path, sizeof path, "/tmp/rcoll-log-%s-%d.txt", host, (int)getpid());
  const char *text = slurp(path);
  unlink(path);
  regex_t re;
  cr_assert_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{6}Z [^ ]+ rcoll WARN RCOLL_TIMOUT is "
                            "not an rcoll setting", REG_EXTENDED | REG_NEWLINE), 0);
  cr_assert_eq(regexec(&re, text, 0, NULL, 0), 0, "%s", text);
  regfree(&re);
  cr_assert(strstr(text, "rcoll NOTE comm ") != NULL, "%s", text);
}

/* An unknown level keeps WARN, and says so once (into the file, here). */
Test(log_file, an_unknown_level_is_named_once) {
  char path[128];
  snprintf(path, sizeof path, "/tmp/rcoll-level-%d.txt", (int)getpid());
  setenv("RCOLL_DEBUG_FILE", "/tmp/rcoll-level-%p.txt", 1);
  setenv("RCOLL_DEBUG", "VERBOSE", 1);
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(init_all(2), rcollSuccess, "%s", rcollGetLastError(NULL));
  const char *text = slurp(path);
  unlink(path);
  const char *first = strstr(text, "RCOLL_DEBUG=VERBOSE is not accepted: one of NONE, WARN, INFO or TRACE");
  cr_assert_not_null(first, "%s", text);
  cr_assert_null(strstr(first + 1, "RCOLL_DEBUG=VERBOSE"), "said twice:\n%s", text);
  cr_assert(strstr(text, "rcoll NOTE comm ") != NULL, "WARN level kept: %s", text);
}
