/* Binary trees for the tree algorithms (algorithms/allreduce_tree.c, broadcast_tree.c)
 * and for the tuner's cost model.
 *
 * The basic tree is the in-order binary tree over positions 1..n: the root
 * is the largest power of two not above n, and a node v = 2^b * odd has
 * children v -/+ 2^(b-1). Every odd v has no children, so the even
 * 0-based positions are all leaves, about half of the nodes. Where n is not
 * of the form 2^k - 1 the right edge of the tree is cut off, and a node whose
 * complete-tree parent lies beyond n hangs from the nearest ancestor inside.
 *
 * The double binary tree (two trees that each carry half the data) uses this
 * tree over ranks, and a second one over ranks renumbered so that the leaves
 * of the first are the inner nodes of the second: mirrored (n-1-r) when n is
 * even, shifted by one (r-1) when n is odd (mirroring an odd n would keep
 * the leaves where they are). Every rank is then a leaf in at least one tree
 * and an inner node in at most one, so no rank sends more than about twice
 * the data, as in NCCL's double binary tree. */
#include "tree.h"

static int lowbit(int v) { return __builtin_ctz((unsigned)v); }

static int tree_root(int n) {
  int v = 1;
  while (2 * v <= n)
    v *= 2;
  return v;
}

/* Parent of v in the complete (unbounded) in-order tree. */
static int complete_parent(int v) {
  int b = lowbit(v);
  return ((v >> (b + 1)) & 1) ? v - (1 << b) : v + (1 << b);
}

/* Node at 1-based position v of the in-order tree over 1..n, in positions. */
static void inorder_node(int n, int v, int *parent, int child[2], int *nchild) {
  *nchild = 0;
  if (v == tree_root(n)) {
    *parent = 0;
  } else {
    int up = complete_parent(v);
    while (up > n)
      up = complete_parent(up);
    *parent = up;
  }
  int b = lowbit(v);
  if (b == 0)
    return;
  child[(*nchild)++] = v - (1 << (b - 1)); /* the left child always exists */
  int c = v + (1 << (b - 1));
  while (c > n && lowbit(c) > 0) /* the right subtree is cut: descend left */
    c -= 1 << (lowbit(c) - 1);
  if (c <= n)
    child[(*nchild)++] = c;
}

/* Fills *out for the node at 0-based position pos, mapping positions to
 * ranks with rank_of (a permutation given by its two parameters). */
static void tree_fill(int n, int pos, int mode, int shift, rcoll_tree_node_t *out) {
  int parent, child[2], nchild;
  inorder_node(n, pos + 1, &parent, child, &nchild);
#define RANK_OF(v) (mode == 1 ? n - (v) : ((v) - 1 + shift) % n)
  out->parent = parent == 0 ? -1 : RANK_OF(parent);
  out->nchild = nchild;
  for (int i = 0; i < 2; i++)
    out->child[i] = i < nchild ? RANK_OF(child[i]) : -1;
#undef RANK_OF
}

void rcoll_dbtree_node(int n, int which, int rank, rcoll_tree_node_t *out) {
  if (which == 0)
    tree_fill(n, rank, 0, 0, out);
  else if (n % 2 == 0)
    tree_fill(n, n - 1 - rank, 1, 0, out); /* mirrored: position n-1-r */
  else
    tree_fill(n, (rank - 1 + n) % n, 0, 1, out); /* shifted: position r-1 */
}

void rcoll_btree_node(int n, int root, int rank, rcoll_tree_node_t *out) {
  /* Rotate so that the tree's root position lands on `root`. */
  int rootpos = tree_root(n) - 1;
  int shift = (root - rootpos + n) % n;
  tree_fill(n, (rank - shift + n) % n, 0, shift, out);
}

int rcoll_btree_height(int n) {
  int h = 0;
  while ((2 << h) <= n) /* the root 2^h is the largest power of two <= n */
    h++;
  return h;
}

/* ---------------------------------------------------------------- binomial */

int rcoll_binomial_parent(int v) { return v & (v - 1); }

int rcoll_binomial_span(int n, int v) {
  if (v > 0)
    return v & -v;
  int d = 1;
  while (d < n)
    d *= 2;
  return d;
}

int rcoll_binomial_size(int n, int v) {
  int span = rcoll_binomial_span(n, v);
  return span < n - v ? span : n - v;
}

void rcoll_binomial_msgs(int n, int v, size_t block, size_t chunk, rcoll_binomial_msg_fn fn, void *ctx) {
  size_t begin = (size_t)v * block, bytes = (size_t)rcoll_binomial_size(n, v) * block;
  if (bytes <= chunk) {
    if (bytes > 0)
      fn(ctx, begin, begin + bytes);
    return;
  }
  for (size_t off = 0; off < block; off += chunk)
    fn(ctx, begin + off, begin + (block - off < chunk ? block : off + chunk));
  for (int d = 1; d < rcoll_binomial_span(n, v) && v + d < n; d *= 2)
    rcoll_binomial_msgs(n, v + d, block, chunk, fn, ctx);
}
