"""Lab exercise 03 (README.md next to this file): the textbook costs of a
ring and a tree all-reduce in the alpha-beta model, and the size where they
cross. alpha in us, beta in us per byte, size in bytes, n ranks (each on
its own node). Grade with `make lab-check EX=3`."""
import math


def ring_time(n, alpha, beta, size):
    """Ring all-reduce: reduce-scatter then all-gather (README)."""
    # TODO
    return 0.0


def tree_time(n, alpha, beta, size):
    """Binary-tree all-reduce, not pipelined: reduce up, broadcast down."""
    # TODO (math.ceil, math.log2)
    return 0.0


def crossover(n, alpha, beta):
    """The size in bytes where ring_time == tree_time (solve for size)."""
    # TODO
    return 0.0
