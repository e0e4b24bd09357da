/* The receiving side of single copy from rcollMemAlloc's shared host pool
 * (transports/shm/shm_pool.c), given references to a real peer's blocks:
 * a forked child allocates them and writes the references down a pipe. A
 * good reference maps the block once and finds the bytes; a reference out
 * of its block or to memory that is not the block's is an error naming the
 * peer; an fd the peer does not have turns mapping off for the connection,
 * so that its messages are read with process_vm_readv instead. Two whole
 * processes exchanging through pool buffers are in test_shm.c. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/shm/shm_priv.h"
#include "error.h"
#include "rcoll.h"

#define BLOCK (1 << 20)

typedef struct holder {
  pid_t pid;
  rcoll_pool_ref_t block; /* a 1 MiB pool block, byte i = i * 7 */
  rcoll_pool_ref_t tiny;  /* a one-page memory file claiming to be a block of 1 MiB */
} holder_t;

static holder_t holder;

/* The child keeps its blocks until the parent closes the pipe. */
static void holder_start(void) {
  int up[2], down[2];
  cr_assert_eq(pipe(up), 0);
  cr_assert_eq(pipe(down), 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(up[0]), close(down[1]);
    holder_t h = {0};
    unsigned char *b = NULL;
    if (rcollMemAlloc((void **)&b, BLOCK) != rcollSuccess || !rcoll_pool_find(b, BLOCK, &h.block))
      _exit(2);
    for (size_t i = 0; i < BLOCK; i++)
      b[i] = (unsigned char)(i * 7);
    int fd = memfd_create("rcoll-test-tiny", 0);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
      _exit(3);
    h.tiny = (rcoll_pool_ref_t){.fd = fd, .gen = h.block.gen + 1000, .bytes = BLOCK};
    if (write(up[1], &h, sizeof h) != (ssize_t)sizeof h)
      _exit(4);
    char c;
    (void)!read(down[0], &c, 1);
    _exit(0);
  }
  close(up[1]), close(down[0]);
  cr_assert_eq(read(up[0], &holder, sizeof holder), (ssize_t)sizeof holder, "the holder did not start");
  holder.pid = pid;
  close(up[0]);
  /* down[1] stays open: the child reads EOF when this test process exits. */
}

static void holder_stop(void) {
  if (holder.pid > 0) {
    kill(holder.pid, SIGKILL);
    waitpid(holder.pid, NULL, 0);
  }
}

TestSuite(shm_pool, .init = holder_start, .fini = holder_stop, .timeout = 60);

/* A receiving connection to the holder, as shm_accept_one leaves it. */
static shm_conn_t *conn_to_holder(void) {
  shm_conn_t *c = calloc(1, sizeof *c);
  c->copy = SHM_COPY_CMA;
  c->peer_pid = holder.pid;
  snprintf(c->peer, sizeof c->peer, "pid %d", (int)holder.pid);
  return c;
}

static void conn_free(shm_conn_t *c) {
  shm_pool_close(c);
  cr_expect_null(c->pool);
  free(c);
}

Test(shm_pool, a_block_is_mapped_once_and_read_at_its_offsets) {
  shm_conn_t *c = conn_to_holder();
  rcoll_pool_ref_t at = holder.block;
  const unsigned char *first = NULL;
  for (size_t off = 0; off < BLOCK; off += 99991) {
    at.offset = off;
    const unsigned char *p = (const unsigned char *)shm_pool_map(c, &at, BLOCK - off);
    cr_assert_not_null(p, "offset %zu: %s", off, c->errmsg);
    if (first == NULL)
      first = p;
    cr_expect_eq(p, first + off, "one mapping serves every offset of the block");
    for (size_t i = 0; i < BLOCK - off; i += 4093)
      cr_assert_eq(p[i], (unsigned char)((off + i) * 7), "byte %zu of the block", off + i);
  }
  cr_expect_eq(c->err, rcollSuccess);
  cr_expect_eq(c->pool_off, 0);
  conn_free(c);
}

Test(shm_pool, a_reference_out_of_its_block_is_an_error) {
  shm_conn_t *c = conn_to_holder();
  rcoll_pool_ref_t at = holder.block;
  at.offset = BLOCK - 100;
  cr_expect_null(shm_pool_map(c, &at, 101));
  cr_expect_eq(c->err, rcollInternalError);
  cr_expect(strstr(c->errmsg, c->peer) != NULL && strstr(c->errmsg, "out of its block") != NULL, "%s", c->errmsg);
  conn_free(c);
}

/* The file behind the fd is smaller than the block claimed (a freed block's
 * number reused): mapping it would fault on the first read past its end. */
Test(shm_pool, a_reference_to_a_smaller_file_is_an_error) {
  shm_conn_t *c = conn_to_holder();
  cr_expect_null(shm_pool_map(c, &holder.tiny, 4096));
  cr_expect_eq(c->err, rcollRemoteError);
  cr_expect(strstr(c->errmsg, "memory is gone") != NULL, "%s", c->errmsg);
  conn_free(c);
}

Test(shm_pool, an_fd_the_peer_lacks_turns_mapping_off) {
  shm_conn_t *c = conn_to_holder();
  rcoll_pool_ref_t at = holder.block;
  at.fd = 1000;
  cr_expect_null(shm_pool_map(c, &at, 16));
  cr_expect_eq(c->err, rcollSuccess, "not an error: the message is read by CMA instead (%s)", c->errmsg);
  cr_expect_eq(c->pool_off, 1);
  cr_expect_null(shm_pool_map(c, &holder.block, 16), "mapping stays off for the connection");
  conn_free(c);
}
