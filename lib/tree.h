/* Binary trees (tree.c) for the tree algorithms and the tuner's model of
 * them. */
#ifndef RCOLL_TREE_H
#define RCOLL_TREE_H

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

#endif
