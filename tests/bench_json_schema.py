#!/usr/bin/env python3
"""Checks a bench -J file against nccl-tests' JSON schema (file version 3).

The schema as read from nccl-tests 2.19.6 (src/util.cu, which writes it, and
tools/analyze_perf_json.py, which reads it): every key it writes, with its
type, in the structure it writes it; booleans are the strings "true" and
"false"; a NaN number is the string "nan"; root is a string. Also checked:
the -I summary agrees with the raw times (min/max/avg/percentiles over the
times after skipped_iterations), and times_us is the max over the process
rows, as the analyzer's consistency check expects.

    bench_json_schema.py FILE [--per-iter] [--procs N] [--cputime] [--rows N]

Exits 0 when the file conforms, 1 with one line per problem otherwise.
"""
import argparse
import json
import math
import sys

problems = []


def fail(where, msg):
    problems.append(f"{where}: {msg}")


def is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or v == "nan"


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_boolstr(v):
    return v in ("true", "false")


KINDS = {
    "int": is_int,
    "num": is_num,
    "str": lambda v: isinstance(v, str),
    "boolstr": is_boolstr,
    "list": lambda v: isinstance(v, list),
    "obj": lambda v: isinstance(v, dict),
    "num|null": lambda v: v is None or is_num(v),
}


def need(obj, where, spec):
    """spec: {key: kind}; every key must be present with that kind."""
    if not isinstance(obj, dict):
        fail(where, "not an object")
        return False
    ok = True
    for key, kind in spec.items():
        if key not in obj:
            fail(where, f"missing key '{key}'")
            ok = False
        elif not KINDS[kind](obj[key]):
            fail(where, f"'{key}' is {obj[key]!r}, expected {kind}")
            ok = False
    return ok


TOP = {"version": "int", "start_time": "str", "args": "list", "env": "list",
       "nccl_version": "int", "config": "obj", "results": "list", "out_of_bounds": "obj",
       "average_bus_bandwidth": "obj", "errors": "list", "end_time": "str"}
CONFIG = {"nthreads": "int", "ngpus": "int", "minimum_bytes": "int", "maximum_bytes": "int",
          "warmup_iters": "int", "iterations": "int", "aggregated_iterations": "int",
          "validation": "int", "graph": "int", "blocking_collectives": "boolstr",
          "per_iter_timing": "boolstr", "per_iter_skip": "int", "parallel_init": "boolstr",
          "devices": "list"}
DEVICE = {"rank": "int", "group": "int", "pid": "int", "hostname": "str", "device": "int",
          "device_hex": "str", "device_info": "str"}
RESULT = {"size": "int", "count": "int", "type": "str", "redop": "str", "root": "str",
          "out_of_place": "obj", "in_place": "obj", "actual_iterations": "int",
          "experiment_name": "str"}
HALF = {"alg_bw": "num", "bus_bw": "num", "nwrong": "num|null"}
PER_ITER = {"skipped_iterations": "int", "min_us": "num", "max_us": "num", "avg_us": "num",
            "p50_us": "num", "p95_us": "num", "p99_us": "num", "stdev_us": "num",
            "cv_pct": "num", "times_us": "list"}


def close(a, b):
    # the file prints 6 decimals
    return abs(a - b) <= 1e-5 + 1e-9 * abs(b)


def check_summary(where, p, iters):
    times = p["times_us"]
    if len(times) != iters or not all(is_num(t) and t != "nan" for t in times):
        fail(where, f"times_us holds {len(times)} numbers, expected {iters}")
        return
    kept = sorted(times[p["skipped_iterations"]:])
    n = len(kept)
    if n == 0:
        fail(where, "skipped_iterations leaves no iteration")
        return
    avg = sum(kept) / n
    want = {"min_us": kept[0], "max_us": kept[-1], "avg_us": avg, "p50_us": kept[n // 2],
            "p95_us": kept[min(n - 1, (n * 95 + 99) // 100 - 1)],
            "p99_us": kept[min(n - 1, (n * 99 + 99) // 100 - 1)],
            "stdev_us": math.sqrt(sum((t - avg) ** 2 for t in kept) / n)}
    for key, value in want.items():
        if not close(p[key], value):
            fail(where, f"{key} is {p[key]}, the times say {value:.6f}")


def check_procs(where, p, iters, nprocs):
    rows = p.get("per_process_max_times_us")
    if nprocs <= 1:
        if rows is not None:
            fail(where, "per_process_max_times_us with a single process (nccl-tests omits it)")
        return
    if not isinstance(rows, list) or len(rows) != nprocs:
        fail(where, f"per_process_max_times_us should hold {nprocs} rows")
        return
    for r in rows:
        if not isinstance(r, list) or len(r) != iters or not all(is_num(t) for t in r):
            fail(where, f"a process row does not hold {iters} numbers")
            return
    for i, t in enumerate(p["times_us"]):
        if not close(t, max(r[i] for r in rows)):
            fail(where, f"times_us[{i}] is not the max over the process rows")
            return


def check_result(i, r, args, cfg):
    where = f"results[{i}]"
    if not need(r, where, RESULT):
        return
    iters = cfg.get("iterations", 0)
    if r["actual_iterations"] != iters:
        fail(where, "actual_iterations differs from config.iterations")
    for half in ("out_of_place", "in_place"):
        h = r[half]
        time_key = "cpu_time" if args.cputime else "time"
        need(h, f"{where}.{half}", dict(HALF, **{time_key: "num"}))
        per = r.get(half + "_per_iter")
        if not args.per_iter:
            if per is not None:
                fail(where, f"{half}_per_iter without -I")
            continue
        w = f"{where}.{half}_per_iter"
        if need(per, w, PER_ITER):
            if per["skipped_iterations"] != cfg.get("per_iter_skip"):
                fail(w, "skipped_iterations differs from config.per_iter_skip")
            check_summary(w, per, iters)
            check_procs(w, per, iters, args.procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--per-iter", action="store_true", help="expect -I 1's objects")
    ap.add_argument("--procs", type=int, default=1, help="processes of the run")
    ap.add_argument("--cputime", action="store_true", help="expect -C 1's cpu_time")
    ap.add_argument("--rows", type=int, default=-1, help="expected number of results")
    args = ap.parse_args()
    try:
        with open(args.file) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{args.file}: not JSON: {e}")
        return 1
    if need(data, "top", TOP):
        if data["version"] != 3:
            fail("top", f"version {data['version']}, expected 3")
        if not all(isinstance(a, str) for a in data["args"] + data["env"]):
            fail("top", "args and env must be lists of strings")
        cfg = data["config"]
        if need(cfg, "config", CONFIG):
            if ("step_factor" in cfg) == ("step_bytes" in cfg):
                fail("config", "exactly one of step_factor and step_bytes")
            if len(cfg["devices"]) != args.procs:
                fail("config", f"{len(cfg['devices'])} devices, expected one per process ({args.procs})")
            for d, dev in enumerate(cfg["devices"]):
                need(dev, f"config.devices[{d}]", DEVICE)
        if args.rows >= 0 and len(data["results"]) != args.rows:
            fail("top", f"{len(data['results'])} results, expected {args.rows}")
        for i, r in enumerate(data["results"]):
            check_result(i, r, args, cfg)
        need(data["out_of_bounds"], "out_of_bounds", {"count": "int", "okay": "boolstr"})
        need(data["average_bus_bandwidth"], "average_bus_bandwidth",
             {"bandwidth": "num", "okay": "str"})
    for p in problems:
        print(f"{args.file}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
