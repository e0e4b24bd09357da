/* Binary trees (tree.c) for the tree algorithms and the tuner's model of
 * them. */
#ifndef RCOLL_TREE_H
#define RCOLL_TREE_H

#include <stddef.h>

/* A rank's parent (-1 at the root) and children (-1 where absent). */
typedef struct rcoll_tree_node {
  int parent;
  int child[2];
  int nchild;
} rcoll_tree_node_t;

/* Tree `which` (0 or 1) of the double binary tree over n ranks. */
void rcoll_dbtree_node(int n, int which, int rank, rcoll_tree_node_t *out);
/* The binary tree over n ranks rooted at `root`. */
void rcoll_btree_node(int n, int root, int rank, rcoll_tree_node_t *out);
/* Levels below the root of these trees (0 for one rank). */
int rcoll_btree_height(int n);

/* Binomial trees, for gather and scatter: in rank order relative to the
 * root (v = (rank - root) mod n), the parent of v > 0 is v with its lowest
 * set bit cleared, and v's children are v + 1, v + 2, v + 4, ... below that
 * bit (every power of two below n for the root) and below n. The subtree of
 * v is the ranks [v, v + size) in relative order. */
int rcoll_binomial_parent(int v);
/* One more than the distance to v's farthest possible child: v's lowest set
 * bit, or the power of two at or above n for the root. Children are v + d
 * for d = 1, 2, 4 ... < span, v + d < n. */
int rcoll_binomial_span(int n, int v);
int rcoll_binomial_size(int n, int v);

/* The messages in which v's subtree of blocks travels to (gather) or from
 * (scatter) v's parent, as ranges [begin, end) of bytes of the vector in
 * relative rank order (block u at u x block): one message for the whole
 * subtree when it fits a chunk; otherwise v's own block in chunks, then
 * each child's messages in turn, child by child, in order. Sender and
 * receiver list the same messages. */
typedef void (*rcoll_binomial_msg_fn)(void *ctx, size_t begin, size_t end);
void rcoll_binomial_msgs(int n, int v, size_t block, size_t chunk, rcoll_binomial_msg_fn fn, void *ctx);

#endif
