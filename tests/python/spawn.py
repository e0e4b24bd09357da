"""Runs fn(rank, size, *args) in `size` fresh processes and returns their
results in rank order; a child's exception comes back as an AssertionError
naming the rank. Every wait is bounded."""
import multiprocessing as mp
import queue
import traceback


def _child(fn, rank, size, args, q):
    try:
        q.put((rank, True, fn(rank, size, *args)))
    except BaseException:  # noqa: B902 - reported to the parent
        q.put((rank, False, traceback.format_exc()))


def run(fn, size, args=(), timeout=120, ranks=None):
    """ranks: those whose results to wait for (default all)."""
    want = list(range(size)) if ranks is None else list(ranks)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(fn, r, size, args, q)) for r in range(size)]
    for p in procs:
        p.start()
    results, errors = {}, []
    try:
        for _ in want:
            rank, ok, value = q.get(timeout=timeout)
            (results.__setitem__(rank, value) if ok else errors.append("rank %d:\n%s" % (rank, value)))
    except queue.Empty:
        errors.append("no result within %d s from ranks %s" % (timeout, sorted(set(want) - set(results))))
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    if errors:
        raise AssertionError("\n".join(errors))
    return [results.get(r) for r in range(size)]
