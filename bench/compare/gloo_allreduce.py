#!/usr/bin/python3
"""Reference benchmark: PyTorch's Gloo all-reduce (float32, sum) over TCP.

Timed the way bench/allreduce_perf times rcollAllReduce, so that the tables
can be set side by side:

    /usr/bin/python3 bench/compare/gloo_allreduce.py -N 2 8 1M 16M 128M

Run it with Debian's python3-torch (PyTorch 1.13, CPU, with Gloo) under
/usr/bin/python3. By default it starts N worker processes itself (rendezvous
on MASTER_ADDR=127.0.0.1 and a free MASTER_PORT); launched by torchrun or any
launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT it runs as
that one rank instead.

Each size runs -w warm-up calls, then -n timed calls after a barrier; the time
reported is the mean over ranks of each rank's time per call (nccl-tests'
default -a 1). algbw = bytes / time and busbw = algbw * 2(n-1)/n, in GB/s
(1e9). Gloo's all-reduce is in place; the timed tensor holds zeros, which a
float sum handles at full speed, and the check uses a separate call on
known inputs.
"""
import argparse
import datetime
import json
import os
import re
import socket
import sys
import time

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """'64', '1K', '4M', '1.5G', '64MB' -> bytes (binary multiples)."""
    m = re.fullmatch(r"([0-9.]+)([KMG]?)B?", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError("invalid size %r" % text)
    return int(float(m.group(1)) * UNITS[m.group(2)])


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sizes", nargs="*", type=parse_size,
                   help="sizes in bytes (K/M/G suffixes); default: the -b/-e/-f sweep")
    p.add_argument("-N", "--nranks", type=int, default=2,
                   help="processes to start when not launched externally (default 2)")
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=128 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("-c", "--check", type=int, default=1, help="0: skip the result check")
    p.add_argument("-J", "--json", help="also write the results to this JSON file")
    p.add_argument("--timeout", type=float, default=120,
                   help="seconds before a stuck rendezvous or call fails (default 120)")
    a = p.parse_args(argv)
    if a.iters < 1 or a.warmup < 0 or a.nranks < 1 or a.stepfactor < 2:
        p.error("need -n >= 1, -w >= 0, -N >= 1, -f >= 2")
    if not a.sizes:
        s = a.minbytes
        while s <= a.maxbytes:
            a.sizes.append(s)
            if s == 0:
                break
            s *= a.stepfactor
    return a


def expected_inputs(torch, count, rank):
    """Rank r's check input: small integers, so every partial sum is exact in
    float32 whatever order Gloo reduces in, and the check can demand equality."""
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 7 + rank * 13) % 101).to(torch.float32)


def count_wrong(torch, dist, count, rank, nranks):
    t = expected_inputs(torch, count, rank)
    dist.all_reduce(t)
    want = sum(expected_inputs(torch, count, r) for r in range(nranks))
    wrong = torch.tensor([int((t != want).sum())], dtype=torch.int64)
    dist.all_reduce(wrong)
    return int(wrong.item())


def run_size(torch, dist, args, nbytes, rank, nranks):
    count = nbytes // 4
    buf = torch.zeros(count, dtype=torch.float32)  # zeros also pre-touches the pages
    for _ in range(args.warmup):
        dist.all_reduce(buf)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(buf)
    mine = torch.tensor([(time.perf_counter() - t0) / args.iters], dtype=torch.float64)
    dist.all_reduce(mine)
    time_us = mine.item() / nranks * 1e6
    algbw = count * 4 / (time_us * 1e3) if time_us > 0 else 0.0
    wrong = count_wrong(torch, dist, count, rank, nranks) if args.check else None
    return {"bytes": count * 4, "time_us": time_us, "algbw": algbw,
            "busbw": algbw * 2.0 * (nranks - 1) / nranks, "wrong": wrong}


def print_header(args, nranks):
    print("# gloo_allreduce: torch %s gloo all_reduce float sum, %d ranks, %d iters, %d warmup"
          % (__import__("torch").__version__, nranks, args.iters, args.warmup))
    print("# %12s %12s %12s %10s %10s %7s" % ("bytes", "count", "time_us", "algbw", "busbw",
                                             "#wrong"))
    print("# %12s %12s %12s %10s %10s %7s" % ("(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)",
                                             ""))


def print_row(r):
    wrong = "N/A" if r["wrong"] is None else str(r["wrong"])
    print("  %12d %12d %12.2f %10.3f %10.3f %7s" % (r["bytes"], r["bytes"] // 4, r["time_us"],
                                                   r["algbw"], r["busbw"], wrong), flush=True)


def worker(rank, nranks, args):
    """One rank: rendezvous, sweep, and (rank 0) print. Returns the exit status."""
    import torch
    import torch.distributed as dist
    # Two cores host two ranks: one intra-op thread each, as the C benchmarks use.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=nranks,
                            timeout=datetime.timedelta(seconds=args.timeout))
    if rank == 0:
        print_header(args, nranks)
    results = []
    for nbytes in args.sizes:
        results.append(run_size(torch, dist, args, nbytes, rank, nranks))
        if rank == 0:
            print_row(results[-1])
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "gloo", "collective": "all_reduce", "nranks": nranks,
                       "torch": torch.__version__, "results": results}, f, indent=1)
    return 1 if any(r["wrong"] for r in results) else 0


def spawned(rank, nranks, args):
    # torch.multiprocessing.spawn reports a failure only through an exception.
    if worker(rank, nranks, args) != 0:
        raise SystemExit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    args = parse_args(argv)
    # Gloo picks its interface from the host name unless told; loopback is the
    # link every reference here is measured on.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    import torch.multiprocessing as mp
    try:
        mp.spawn(spawned, args=(args.nranks, args), nprocs=args.nranks, join=True)
    except mp.ProcessRaisedException as e:
        print("gloo_allreduce: a rank failed:\n%s" % e, file=sys.stderr)
        return 2
    except mp.ProcessExitedException as e:
        print("gloo_allreduce: %s" % e, file=sys.stderr)
        return 1 if e.exit_code == 1 else 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
