"""Lab exercise 01's grader: the student's fit.py (parse_table, fit,
predict) against a table made up here with known numbers, against this
machine's own bench tables, and against an ordinary least-squares fit
computed here. Usage: grade_fit.py FIT_PY TABLE... ; prints PASS/FAIL per
check and exits 1 when any failed. Grades agreement with least squares on
the same numbers, never a timing: the machine's speed is no grade."""
import importlib.util
import math
import os
import random
import sys

failed = 0


def verdict(ok, what, detail=""):
    global failed
    print("  %s  %s" % ("PASS" if ok else "FAIL", what))
    if detail:
        for line in detail.splitlines():
            print("        | " + line)
    failed += not ok


def rows(text):
    """The grader's own reading of a table: (size, out-of-place time)."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 9 and not line.lstrip().startswith("#") and f[0].isdigit():
            out.append((int(f[0]), float(f[5])))
    return out


def least_squares(points):
    n = len(points)
    ms = sum(s for s, _ in points) / n
    mt = sum(t for _, t in points) / n
    beta = sum((s - ms) * (t - mt) for s, t in points) / sum((s - ms) ** 2 for s, _ in points)
    return mt - beta * ms, beta


def close(a, b, rel=0.01, abs_tol=0.05):
    return math.isfinite(a) and abs(a - b) <= rel * abs(b) + abs_tol


def made_up_table(rng):
    """A table in the bench's format with known alpha and beta and a little
    noise, with comment and log lines in it as the real ones have."""
    alpha, beta = rng.uniform(2, 60), rng.uniform(1e-4, 2e-3)
    lines = ["# nccl-tests style table made up by the lab grader",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    size = 8
    while size <= 64 << 20:
        t = (alpha + beta * size) * rng.uniform(0.97, 1.03)
        lines.append("%12d  %12d     float     sum      -1  %7.2f  %6.2f  %6.2f  %5d  %7.2f  %6.2f  %6.2f  %5s"
                     % (size, size // 4, t, size / t / 1e3, size / t / 1e3, 0, t * 1.01, 0.0, 0.0, "N/A"))
        if size == 512:
            lines.append("vm:123:123 [0] rcoll WARN something the library logged 42 times")
        size *= 4
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.23", "#"]
    return "\n".join(lines) + "\n", alpha, beta


def check_table(mod, name, text):
    want = rows(text)
    try:
        got = [(int(s), float(t)) for s, t in mod.parse_table(text)]
    except Exception as e:  # the student's code may raise anything
        verdict(False, "parse_table reads %s" % name, "it raised %r" % e)
        return None
    verdict(got == want, "parse_table reads the %d rows of %s" % (len(want), name),
            "" if got == want else "expected %s ...\ngot      %s ..." % (want[:3], got[:3]))
    ref = least_squares(want)
    try:
        a, b = mod.fit(want)
    except Exception as e:
        verdict(False, "fit on %s" % name, "it raised %r" % e)
        return ref
    ok = close(a, ref[0]) and close(b, ref[1], abs_tol=1e-9)
    verdict(ok, "fit on %s: alpha %.3f us, beta %.6f us/B (%.3f GB/s)" % (name, a, b, 1e-3 / b if b > 0 else 0),
            "" if ok else "least squares gives alpha %.3f us, beta %.6g us/B" % ref)
    return ref


def main():
    spec = importlib.util.spec_from_file_location("student_fit", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        verdict(False, "%s loads" % sys.argv[1], repr(e))
        return 1
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    text, alpha, beta = made_up_table(rng)
    print("  a made-up table (seed %d): alpha %.3f us, beta %.6f us/B, 3%% noise" % (seed, alpha, beta))
    ref = check_table(mod, "the made-up table", text)
    for path in sys.argv[2:]:
        with open(path) as f:
            ref = check_table(mod, os.path.basename(path) + " (measured here, on a loaded machine)", f.read()) or ref
    # A size no table has: the prediction must be the model's.
    size = 3 * (1 << 20) + 123
    try:
        got = float(mod.predict(ref[0], ref[1], size))
    except Exception as e:
        got = float("nan")
        print("        | predict raised %r" % e)
    want = ref[0] + ref[1] * size
    verdict(close(got, want, 1e-6, 1e-6), "predict(alpha, beta, %d B), a size no table has: %.2f us" % (size, got),
            "" if close(got, want, 1e-6, 1e-6) else "the model alpha + beta S gives %.2f us" % want)
    for bad, why in (([(1024, 5.0)], "one point"), ([(64, 2.0), (64, 2.5)], "two points of one size")):
        try:
            mod.fit(bad)
            ok, detail = False, "fit(%s) returned instead of raising ValueError" % bad
        except ValueError as e:
            ok, detail = True, "ValueError: %s" % e
        except Exception as e:
            ok, detail = False, "fit(%s) raised %r, not ValueError" % (bad, e)
        verdict(ok, "fit refuses %s with a ValueError" % why, detail)
    return 1 if failed else 0


sys.exit(main())
