"""Lab exercise 03's grader: the student's crossover.py against the
textbook formulas (README) and against the crossover of the library's own
cost model, bench/rcoll_tune, run here for each scenario with the link's
latency and bandwidth set (RCOLL_TUNE_ALPHA, RCOLL_TUNE_BW) and the choice
restricted to ring and tree. Usage: grade_crossover.py CROSSOVER_PY RCOLL_TUNE.
The library's model pipelines its tree and pays per-message costs the
textbook leaves out, so the prediction passes within a factor of FACTOR."""
import importlib.util
import math
import os
import subprocess
import sys

FACTOR = 2.5
GBPS = 1.25  # the link's bandwidth in every scenario: beta = 1 / (GBPS * 1000) us per byte
SCENARIOS = [(4, 50.0), (4, 200.0), (8, 50.0), (8, 500.0)]  # (ranks, alpha in us)
failed = 0


def verdict(ok, what, detail=""):
    global failed
    print("  %s  %s" % ("PASS" if ok else "FAIL", what))
    for line in detail.splitlines():
        print("        | " + line)
    failed += not ok


def model_crossover(tune, n, alpha):
    """(below, above): the sizes of rcoll_tune's table between which the
    ring's predicted time falls below the tree's; None when it never does."""
    env = dict(os.environ, RCOLL_TUNE_ALPHA="inter=%g" % alpha, RCOLL_TUNE_BW="inter=%g" % GBPS,
               RCOLL_ALGO="ring,tree")
    env_text = "RCOLL_TUNE_ALPHA=inter=%g RCOLL_TUNE_BW=inter=%g RCOLL_ALGO=ring,tree " % (alpha, GBPS)
    cmd = [tune, "-n", str(n), "-N", str(n), "-t", "socket", "-c", "allreduce", "-b", "256", "-e", "1G", "-f", "2"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120).stdout
    head, prev = None, None
    for line in out.splitlines():
        f = line.split()
        if line.startswith("#") and "ring" in f and "tree" in f:
            head = f[1:]  # "#", then the column names
            continue
        if head is None or not f or not f[0].isdigit():
            continue
        size = int(f[0])
        ring, tree = float(f[head.index("ring")]), float(f[head.index("tree")])
        if ring <= tree and prev is not None:
            return prev, size, env_text + " ".join(cmd)
        prev = size if ring > tree else None
    return None, None, env_text + " ".join(cmd)


def main():
    spec = importlib.util.spec_from_file_location("student_crossover", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        verdict(False, "%s loads" % sys.argv[1], repr(e))
        return 1
    beta = 1.0 / (GBPS * 1000)
    # The formulas, at sizes and rank counts where they differ.
    bad = []
    for n in (2, 3, 4, 8, 16):
        lv = math.ceil(math.log2(n))
        for s in (0, 1000, 1 << 20):
            want_r = 2 * (n - 1) * 10 + 2 * (n - 1) / n * s * beta
            want_t = 2 * lv * (10 + s * beta)
            try:
                got_r, got_t = float(mod.ring_time(n, 10, beta, s)), float(mod.tree_time(n, 10, beta, s))
            except Exception as e:
                got_r = got_t = float("nan")
                bad.append("n=%d S=%d: raised %r" % (n, s, e))
            if not (abs(got_r - want_r) <= 1e-6 * want_r + 1e-9 and abs(got_t - want_t) <= 1e-6 * want_t + 1e-9):
                bad.append("n=%d, alpha 10 us, %.2f GB/s, S=%d B: ring %.3f tree %.3f us; the README's formulas give %.3f and %.3f"
                           % (n, GBPS, s, got_r, got_t, want_r, want_t))
    verdict(not bad, "ring_time and tree_time are the README's formulas", "\n".join(bad[:4]))
    for n, alpha in SCENARIOS:
        lo, hi, cmd = model_crossover(sys.argv[2], n, alpha)
        try:
            got = float(mod.crossover(n, alpha, beta))
        except Exception as e:
            verdict(False, "crossover(%d, %g, %g)" % (n, alpha, beta), "raised %r" % e)
            continue
        if lo is None:
            verdict(False, "%d ranks, alpha %g us: rcoll_tune's model shows no crossover" % (n, alpha), cmd)
            continue
        mid = math.sqrt(lo * hi)
        ok = math.isfinite(got) and got > 0 and mid / FACTOR <= got <= mid * FACTOR
        verdict(ok, "%d ranks, alpha %g us, %.2f GB/s: you predict the ring wins from %.0f B; rcoll_tune's model "
                "between %d and %d B" % (n, alpha, GBPS, got, lo, hi),
                "model: " + cmd if ok else "not within a factor of %g of %.0f B. The model: %s" % (FACTOR, mid, cmd))
    return 1 if failed else 0


sys.exit(main())
