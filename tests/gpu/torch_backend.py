"""The "rcoll" torch.distributed backend on CUDA tensors beside "nccl", one
rank of it (tests/gpu/run.sh starts two on the one GPU, with NCCL_HOSTID
different per rank so that NCCL, which refuses two ranks on one GPU, takes
them for two hosts).

Every collective torch maps, on tensors made on the caller's current stream
(a side stream, so a backend that ignored it would read them unfinished),
is run through both backends on the same inputs; results must be equal
(integers exactly, floats within 1e-6 relative, 1e-2 for 16-bit types), and
each is also checked against the value computed here from every rank's
inputs. Then all_reduce of float32 is timed through both at 8 B and 16 MiB.

    python3 tests/gpu/torch_backend.py [--device cuda|cpu] [--ref nccl|gloo]

--device cpu --ref gloo runs the same checks on a machine without a GPU
(tests/check_python.sh does not: this script is for the device). Ranks come
from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT. Exit status 0 when every
check passed.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

import rcoll.torch  # noqa: F401 - registers "rcoll"


def inputs(rank, dtype, n, device):
    x = (torch.arange(n, dtype=torch.int64) * 7 + rank * 3) % 5 + 1
    return x.to(dtype).to(device)


def everyone(world, dtype, n):
    return torch.stack([inputs(r, dtype, n, "cpu") for r in range(world)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--ref", default="nccl", choices=["nccl", "gloo"])
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = args.device
    if dev == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group("rcoll", init_method="env://", rank=rank, world_size=world)
    ref = dist.new_group(backend=args.ref)
    side = torch.cuda.Stream() if dev == "cuda" else None
    R = dist.ReduceOp
    bad = []
    checked = 0

    def check(name, got, want):
        nonlocal checked
        checked += 1
        got, want = got.cpu(), want.cpu()
        if got.is_floating_point():
            tol = 1e-2 if got.element_size() == 2 else 1e-6
            ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=0)
        else:
            ok = torch.equal(got, want)
        if not ok:
            bad.append("%s: got %s, want %s" % (name, got.reshape(-1)[:6].tolist(),
                                               want.reshape(-1)[:6].tolist()))

    def on_stream(fn):
        """fn's tensors made and its collective called on the side stream."""
        if side is None:
            return fn()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = fn()
        torch.cuda.synchronize()
        return out

    def both(name, fn, want):
        """fn(group) through rcoll (None: the default group) and the reference."""
        mine = on_stream(lambda: fn(None))
        check(name + " vs computed", mine, want)
        try:
            theirs = on_stream(lambda: fn(ref))
        except (RuntimeError, ValueError) as e:  # the reference lacks it (gloo: AVG)
            print("rank %d: %s: %s lacks it (%s)" % (rank, name, args.ref, str(e)[:80]), flush=True)
            return
        check(name + " vs " + args.ref, mine, theirs)

    local = {"SUM": lambda s: s.sum(0), "PRODUCT": lambda s: s.prod(0),
             "MIN": lambda s: s.min(0).values, "MAX": lambda s: s.max(0).values,
             "AVG": lambda s: s.mean(0)}
    n = 1000  # not a multiple of anything a kernel would like
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.uint8):
        all_in = everyone(world, dt, n)
        wide = all_in.double() if dt.is_floating_point else all_in.long()
        for opname in ("SUM", "PRODUCT", "MIN", "MAX", "AVG"):
            if opname == "AVG" and not dt.is_floating_point:
                continue
            op = getattr(R, opname)

            def ar(g, dt=dt, op=op):
                t = inputs(rank, dt, n, dev)
                dist.all_reduce(t, op=op, group=g)
                return t
            both("all_reduce %s %s" % (dt, opname), ar, local[opname](wide).to(dt))

        def rst(g, dt=dt):
            o = torch.zeros(n // world, dtype=dt, device=dev)
            dist.reduce_scatter_tensor(o, inputs(rank, dt, n // world * world, dev), group=g)
            return o
        sums = everyone(world, dt, n // world * world)
        sums = (sums.double() if dt.is_floating_point else sums.long()).sum(0).to(dt)
        both("reduce_scatter_tensor %s" % dt, rst, sums.chunk(world)[rank])

        def agt(g, dt=dt):
            o = torch.zeros(n * world, dtype=dt, device=dev)
            dist.all_gather_into_tensor(o, inputs(rank, dt, n, dev), group=g)
            return o
        both("all_gather_into_tensor %s" % dt, agt, all_in.reshape(-1))

        def bc(g, dt=dt):
            t = inputs(rank, dt, n, dev)
            dist.broadcast(t, src=world - 1, group=g)
            return t
        both("broadcast %s" % dt, bc, all_in[world - 1])

        def red(g, dt=dt):
            t = inputs(rank, dt, n, dev)
            dist.reduce(t, dst=0, group=g)
            return t if rank == 0 else torch.zeros(0, dtype=dt)
        both("reduce %s" % dt, red, wide.sum(0).to(dt) if rank == 0 else torch.zeros(0, dtype=dt))

        def a2a(g, dt=dt):
            o = torch.zeros(n // world * world, dtype=dt, device=dev)
            dist.all_to_all_single(o, inputs(rank, dt, n // world * world, dev), group=g)
            return o
        blocks = everyone(world, dt, n // world * world).reshape(world, world, -1)
        both("all_to_all_single %s" % dt, a2a, blocks[:, rank].reshape(-1))

    # point to point, a ring both ways at once, and an async all_reduce's future
    s, r = inputs(rank, torch.float32, 1 << 16, dev), torch.zeros(1 << 16, device=dev)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, (rank + 1) % world),
                                     dist.P2POp(dist.irecv, r, (rank - 1) % world)]):
        q.wait()
    check("batch_isend_irecv ring", r, inputs((rank - 1) % world, torch.float32, 1 << 16, "cpu"))
    if side is not None:
        # wait() alone orders the caller's stream after the call, which runs
        # on the group's own stream: the result is used on the side stream
        # with no device-wide synchronization in between.
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            big = inputs(rank, torch.float32, 1 << 22, dev)
            dist.all_reduce(big, async_op=True).wait()
            twice = big * 2
        side.synchronize()
        check("all_reduce, wait(), then used on the caller's stream", twice,
              everyone(world, torch.float32, 1 << 22).sum(0) * 2)
    w = dist.all_reduce(inputs(rank, torch.float32, n, dev), async_op=True)
    check("async all_reduce future", w.get_future().wait()[0], everyone(world, torch.float32, n).sum(0))

    # speed: float32 all_reduce through each backend, same tensors, same run
    print("rank %d: %d checks, %d wrong" % (rank, checked, len(bad)), flush=True)
    for size in (8, 16 << 20):
        t = torch.ones(size // 4, device=dev)
        times = {}
        for name, g in (("rcoll", None), (args.ref, ref)):
            iters = 200 if size < 4096 else 20
            for _ in range(5):
                dist.all_reduce(t, group=g)
            if dev == "cuda":
                torch.cuda.synchronize()
            dist.barrier(group=g)
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t, group=g)
            if dev == "cuda":
                torch.cuda.synchronize()
            times[name] = (time.perf_counter() - t0) / iters * 1e6
        if rank == 0:
            print("all_reduce float32 %9d B: rcoll %10.1f us, %s %10.1f us, rcoll/%s %.2f"
                  % (size, times["rcoll"], args.ref, times[args.ref], args.ref,
                     times["rcoll"] / times[args.ref]), flush=True)
    for b in bad[:20]:
        print("rank %d: WRONG %s" % (rank, b), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if bad:
        return 1
    print("rank %d: all checks passed" % rank, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
