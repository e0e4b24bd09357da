"""Lab exercise 03, reference solution: the textbook costs of a ring and a
tree all-reduce in the alpha-beta model, and the size where they cross."""
import math


def ring_time(n, alpha, beta, size):
    """Ring: reduce-scatter then all-gather, 2(n-1) steps of size/n bytes."""
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * size * beta


def tree_time(n, alpha, beta, size):
    """Binary tree, not pipelined: reduce up then broadcast down, each of
    ceil(log2 n) levels moving the whole vector."""
    levels = math.ceil(math.log2(n))
    return 2 * levels * (alpha + size * beta)


def crossover(n, alpha, beta):
    """The size in bytes where ring_time == tree_time: below it the tree's
    fewer latencies win, above it the ring's fewer bytes."""
    levels = math.ceil(math.log2(n))
    return alpha * ((n - 1) - levels) / (beta * (levels - (n - 1) / n))
