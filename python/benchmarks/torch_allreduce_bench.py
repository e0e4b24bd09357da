"""float32 all_reduce through torch.distributed, 2 processes: gloo against
rcoll over shared memory and rcoll over sockets, in alternating rounds; then
bench/allreduce_perf (rcoll without Python) at the same sizes, and DDP step
time of examples/python/ddp_train.py. One command:

    PYTHONPATH=python /usr/bin/python3 python/benchmarks/torch_allreduce_bench.py [--rounds 3]

Each figure is the median over rounds of the mean time per call. The torch
layer's cost is given twice: against allreduce_perf (other processes, launched
by mpiexec), and measured inside the rcoll-shm workers, alternating blocks of
dist.all_reduce with blocks of the bare C call on the same tensor, which is
the figure to trust on a noisy machine. Run it on a quiet machine: `uptime` is
printed first and last.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = [8, 1 << 20, 16 << 20, 128 << 20]
CONFIGS = {
    "gloo": ("gloo", {}),
    "rcoll-shm": ("rcoll", {}),
    "rcoll-socket": ("rcoll", {"RCOLL_NET": "socket", "RCOLL_SHM_DISABLE": "1"}),
}


def iters_for(nbytes):
    # 4 GiB of traffic a size: 16 calls at 16 MiB (1 GiB) left the torch
    # layer's cost there swinging from -6% to +14% between sessions.
    return 2000 if nbytes <= 4096 else max(5, min(200, (1 << 32) // (nbytes * 4)))


def worker(rank, size, backend, port, out):
    import torch
    import torch.distributed as dist
    if backend == "rcoll":
        import rcoll.torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=size)
    res = {}
    for nbytes in SIZES:
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        n = iters_for(nbytes)
        for _ in range(max(2, n // 10)):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(t)
        res[nbytes] = (time.perf_counter() - t0) / n
        if backend == "rcoll":
            res[("layer", nbytes)] = layer_in_process(t, n)
    if rank == 0:
        out.put(res)
    dist.barrier()
    dist.destroy_process_group()


def layer_in_process(t, n, blocks=6):
    """The torch layer's cost, measured in the same processes on the same
    tensor: blocks of n dist.all_reduce calls alternate with blocks of n bare
    rcollAllReduce calls on the group's communicator through ctypes; the
    median block time of each, so that neither the launcher, the buffers'
    placement nor a slow stretch of the machine weighs on one side only.
    Returns (torch seconds per call, C seconds per call)."""
    import torch.distributed as dist
    from rcoll._lib import lib
    comm = dist.distributed_c10d._get_default_group().comm
    ptr, count = t.data_ptr(), t.numel()
    kinds = {"torch": lambda: dist.all_reduce(t),
             "c": lambda: lib.rcollAllReduce(ptr, ptr, count, 7, 0, comm.handle, None)}
    got = {k: [] for k in kinds}
    for b in range(blocks):
        for k in (("torch", "c") if b % 2 == 0 else ("c", "torch")):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                kinds[k]()
            got[k].append((time.perf_counter() - t0) / n)
    return statistics.median(got["torch"]), statistics.median(got["c"])


def run_config(name, port):
    import torch.multiprocessing as mp
    backend, env = CONFIGS[name]
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(r, 2, backend, port, q)) for r in range(2)]
        for p in ps:
            p.start()
        res = q.get(timeout=600)
        for p in ps:
            p.join(60)
        return res
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def allreduce_perf(env):
    """Mean time per call of bench/allreduce_perf (2 processes under mpiexec), by size."""
    exe = os.path.join(ROOT, "bench", "allreduce_perf")
    if not os.path.exists(exe):
        return {}
    out = {}
    for nbytes in SIZES:
        cmd = ["mpiexec", "-n", "2", "env"] + ["%s=%s" % kv for kv in env.items()] + [
            exe, "-b", str(nbytes), "-e", str(nbytes), "-n", str(iters_for(nbytes)), "-w", "5"]
        try:
            text = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
        except subprocess.TimeoutExpired:
            continue
        for line in text.splitlines():
            f = line.split()
            if len(f) > 6 and f[0] == str(nbytes) and f[1].isdigit():
                out[nbytes] = float(f[9]) * 1e-6  # in-place time (us), as dist.all_reduce
    return out


def ddp_step(backend):
    cmd = [sys.executable, os.path.join(ROOT, "examples", "python", "ddp_train.py"), "--backend",
           backend, "--nproc", "2", "--steps", "40", "--port", str(29400 + os.getpid() % 100)]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    m = re.search(r"mean step ([\d.]+) ms", text)
    return float(m.group(1)) if m else float("nan")


LAYER = r"""
import time, ctypes, numpy as np, torch, torch.distributed as dist
import rcoll, rcoll.torch
c = rcoll.Communicator(rcoll.UniqueId(), 0, 1)
x = np.ones(2, np.float32); t = torch.ones(2)
dist.init_process_group("rcoll", store=dist.HashStore(), rank=0, world_size=1)
p, h, f = x.ctypes.data, c.handle, rcoll._lib.lib.rcollAllReduce
def per_call(fn, n=20000):
    for _ in range(n // 10): fn()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    return (time.perf_counter() - t0) / n * 1e6
raw = min(per_call(lambda: f(p, p, 2, 7, 0, h, None)) for _ in range(3))
npy = min(per_call(lambda: c.all_reduce(x)) for _ in range(3))
tor = min(per_call(lambda: dist.all_reduce(t)) for _ in range(3))
print("%.2f %.2f %.2f" % (raw, npy, tor))
"""


def layer_cost():
    """Per-call cost of each layer at 8 B on a 1-rank communicator, where no
    peer or transport adds its own time: the C call through ctypes, the NumPy
    method, and dist.all_reduce through the backend (best of 3)."""
    out = subprocess.run([sys.executable, "-c", LAYER], capture_output=True, text=True, timeout=300)
    return [float(v) for v in out.stdout.split()[-3:]]


def fmt_size(n):
    return "%d B" % n if n < 1024 else "%d MiB" % (n >> 20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print("# uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    times = {c: {s: [] for s in SIZES} for c in CONFIGS}
    ddp = {"gloo": [], "rcoll": []}
    perf_runs = {sz: [] for sz in SIZES}
    layer = {sz: [] for sz in SIZES}
    port = 29300
    for rnd in range(args.rounds):
        for c in CONFIGS:  # alternating: every round runs every configuration once
            port += 1
            for s, t in run_config(c, port).items():
                if isinstance(s, tuple):  # ("layer", size): rcoll-shm's in-process pair
                    if c == "rcoll-shm":
                        layer[s[1]].append(t)
                    continue
                times[c][s].append(t)
        for sz, t in allreduce_perf({}).items():  # rcoll without Python, same round
            perf_runs[sz].append(t)
        for b in ddp:
            ddp[b].append(ddp_step(b))
        print("# round %d done" % (rnd + 1), flush=True)
    perf = {sz: statistics.median(v) for sz, v in perf_runs.items() if v}
    med = {c: {s: statistics.median(v) for s, v in times[c].items()} for c in CONFIGS}
    print("\n%-9s %14s %14s %14s %14s %10s %10s" % ("size", "gloo", "rcoll-shm", "rcoll-socket",
                                                   "allreduce_perf", "shm/gloo", "sock/gloo"))
    for s in SIZES:
        def cell(t):
            return "%8.1f us" % (t * 1e6) if s < 1024 else "%6.2f GB/s" % (s / t / 1e9)
        p = perf.get(s)
        print("%-9s %14s %14s %14s %14s %9.2fx %9.2fx" % (
            fmt_size(s), cell(med["gloo"][s]), cell(med["rcoll-shm"][s]), cell(med["rcoll-socket"][s]),
            cell(p) if p else "-", med["gloo"][s] / med["rcoll-shm"][s],
            med["gloo"][s] / med["rcoll-socket"][s]))
    print("\n(algbw = bytes / time per call; 8 B row: time per call)")
    for s in (8, 16 << 20):
        if perf.get(s):
            extra = med["rcoll-shm"][s] - perf[s]
            print("torch layer cost at %s: %+.1f us per call (%+.1f %% of allreduce_perf's time)"
                  % (fmt_size(s), extra * 1e6, 100 * extra / perf[s]))
    for s in (8, 16 << 20):
        if layer[s]:
            tor = statistics.median(v[0] for v in layer[s])
            cee = statistics.median(v[1] for v in layer[s])
            print("torch layer cost at %s, same processes and tensor, alternating with the C call: "
                  "%+.1f us per call (%+.1f %%; dist.all_reduce %.1f us, rcollAllReduce %.1f us)"
                  % (fmt_size(s), (tor - cee) * 1e6, 100 * (tor - cee) / cee, tor * 1e6, cee * 1e6))
    raw, npy, tor = layer_cost()
    print("1 rank, 8 B: C call via ctypes %.1f us, Communicator.all_reduce %.1f us, "
          "dist.all_reduce %.1f us: the torch layer costs %.1f us per call"
          % (raw, npy, tor, tor - raw))
    print("DDP step (examples/python/ddp_train.py, 2 ranks): gloo %.2f ms, rcoll %.2f ms (medians of %s / %s)"
          % (statistics.median(ddp["gloo"]), statistics.median(ddp["rcoll"]), ddp["gloo"], ddp["rcoll"]))
    print("# uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
