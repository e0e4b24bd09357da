"""The torch.distributed backend "rcoll" against "gloo" on the same inputs:
every collective torch maps, every dtype, every ReduceOp, 3 processes.
Integers must be equal; floats within a relative 1e-6 (1e-2 for 16-bit types),
since the two libraries may add in different orders. Where gloo lacks an
operation (AVG, reduce_scatter, the *_tensor forms on 1.13) the reference is
torch's own arithmetic on the gathered inputs."""
import os
import unittest

from spawn import run

SIZE = 3


def inputs(rank, dtype, n=12):
    import torch
    x = (torch.arange(n, dtype=torch.int64) * 7 + rank * 3) % 5 + 1
    return x.to(dtype)


def sweep(rank, size, port):
    import torch
    import torch.distributed as dist
    import rcoll.torch  # noqa: F401 - registers "rcoll"
    dist.init_process_group("rcoll", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    gloo = dist.new_group(backend="gloo")
    R = dist.ReduceOp
    dtypes = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
              torch.float32, torch.float64]
    out = []  # (name, rcoll result, reference)

    def both(name, f):
        a = f(None)
        try:
            b = f(gloo)
        except (RuntimeError, NotImplementedError, ValueError):
            b = "gloo-lacks"
        out.append((name, a, b))

    def everyone(dtype, n=12):
        return torch.stack([inputs(r, dtype, n) for r in range(size)])

    local = {R.SUM: lambda s: s.sum(0), R.PRODUCT: lambda s: s.prod(0),
             R.MIN: lambda s: s.min(0).values, R.MAX: lambda s: s.max(0).values}
    for dt in dtypes:
        for opname in ("SUM", "PRODUCT", "MIN", "MAX"):
            op = getattr(R, opname)
            ref = local[op](everyone(dt).double() if dt.is_floating_point else everyone(dt)).to(dt)

            def ar(g, dt=dt, op=op):
                t = inputs(rank, dt)
                dist.all_reduce(t, op=op, group=g)
                return t
            both("all_reduce %s %s" % (dt, opname), ar)
            out.append(("all_reduce %s %s vs torch" % (dt, opname), ar(None), ref))

            def red(g, dt=dt, op=op):
                t = inputs(rank, dt)
                dist.reduce(t, dst=1, op=op, group=g)
                return t if rank == 1 else None
            both("reduce %s %s" % (dt, opname), red)

            def rs(g, dt=dt, op=op):
                o = torch.zeros(4, dtype=dt)
                dist.reduce_scatter(o, list(inputs(rank, dt).chunk(size)), op=op, group=g)
                return o
            out.append(("reduce_scatter %s %s" % (dt, opname), rs(None), ref.chunk(size)[rank]))
            if hasattr(dist, "reduce_scatter_tensor"):
                def rst(g, dt=dt, op=op):
                    o = torch.zeros(4, dtype=dt)
                    dist.reduce_scatter_tensor(o, inputs(rank, dt), op=op, group=g)
                    return o
                out.append(("reduce_scatter_tensor %s %s" % (dt, opname), rst(None), ref.chunk(size)[rank]))
        if dt.is_floating_point and hasattr(R, "AVG"):
            t = inputs(rank, dt)
            dist.all_reduce(t, op=R.AVG)
            out.append(("all_reduce %s AVG vs torch" % dt, t, everyone(dt).double().mean(0).to(dt)))

        def ag(g, dt=dt):
            o = [torch.zeros(12, dtype=dt) for _ in range(size)]
            dist.all_gather(o, inputs(rank, dt), group=g)
            return torch.stack(o)
        both("all_gather %s" % dt, ag)
        agt = torch.zeros(12 * size, dtype=dt)
        (dist.all_gather_into_tensor if hasattr(dist, "all_gather_into_tensor")
         else dist._all_gather_base)(agt, inputs(rank, dt))
        out.append(("all_gather_into_tensor %s" % dt, agt, everyone(dt).reshape(-1)))
        if hasattr(dist, "gather_single"):  # torch 2.15: the root gets one flat tensor
            gst = torch.zeros(12 * size, dtype=dt) if rank == 0 else None
            dist.gather_single(inputs(rank, dt), gst, dst=0)
            if rank == 0:
                out.append(("gather_single %s" % dt, gst, everyone(dt).reshape(-1)))
        if int(torch.__version__.split(".")[0]) >= 2:
            # coalesced single-tensor forms (all_gather_single_coalesced and
            # reduce_scatter_single_coalesced in 2.15, *_tensor_coalesced before)
            ags = [torch.zeros(n * size, dtype=dt) for n in (12, 3)]
            rss = [torch.zeros(n, dtype=dt) for n in (4, 1)]
            with dist._coalescing_manager(async_ops=True) as cm:
                for o, n in zip(ags, (12, 3)):
                    dist.all_gather_into_tensor(o, inputs(rank, dt, n))
            cm.wait()
            with dist._coalescing_manager(async_ops=True) as cm:
                for o, n in zip(rss, (4, 1)):
                    dist.reduce_scatter_tensor(o, inputs(rank, dt, n * size))
            cm.wait()
            for o, n in zip(ags, (12, 3)):
                out.append(("coalesced all_gather_into_tensor %d %s" % (n, dt), o,
                            everyone(dt, n).reshape(-1)))
            for o, n in zip(rss, (4, 1)):
                sums = (everyone(dt, n * size).double() if dt.is_floating_point
                        else everyone(dt, n * size)).sum(0).to(dt)
                out.append(("coalesced reduce_scatter_tensor %d %s" % (n, dt), o,
                            sums.chunk(size)[rank]))

        def bc(g, dt=dt):
            t = inputs(rank, dt)
            dist.broadcast(t, src=2, group=g)
            return t
        both("broadcast %s" % dt, bc)

        def a2a(g, dt=dt):
            o = torch.zeros(12, dtype=dt)
            dist.all_to_all_single(o, inputs(rank, dt), group=g)
            return o
        both("all_to_all_single %s" % dt, a2a)

        def a2av(g, dt=dt):
            # uneven splits: rank r sends p + 1 elements to rank p
            ins = [p + 1 for p in range(size)]
            o = torch.zeros((rank + 1) * size, dtype=dt)
            dist.all_to_all_single(o, inputs(rank, dt, sum(ins)), [rank + 1] * size, ins, group=g)
            return o
        both("all_to_all_single uneven %s" % dt, a2av)

        def ga(g, dt=dt):
            o = [torch.zeros(12, dtype=dt) for _ in range(size)] if rank == 0 else None
            dist.gather(inputs(rank, dt), o, dst=0, group=g)
            return torch.stack(o) if rank == 0 else None
        both("gather %s" % dt, ga)

        def sc(g, dt=dt):
            o = torch.zeros(12, dtype=dt)
            dist.scatter(o, [inputs(r, dt) * 1 for r in range(size)] if rank == 1 else None, src=1, group=g)
            return o
        both("scatter %s" % dt, sc)

        # send/recv in a ring with isend/irecv both ways at once
        s, r = inputs(rank, dt, 1 << 18), torch.zeros(1 << 18, dtype=dt)
        reqs = [dist.isend(s, (rank + 1) % size), dist.irecv(r, (rank - 1) % size)]
        for q in reqs:
            q.wait()
        out.append(("isend/irecv ring %s" % dt, r, inputs((rank - 1) % size, dt, 1 << 18)))
    ops = [dist.P2POp(dist.isend, inputs(rank, torch.float32), (rank + 1) % size),
           dist.P2POp(dist.irecv, torch.zeros(12), (rank - 1) % size)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    out.append(("batch_isend_irecv", ops[1].tensor, inputs((rank - 1) % size, torch.float32)))
    if rank == 0:
        dist.send(inputs(rank, torch.float64), 1)
    elif rank == 1:
        t = torch.zeros(12, dtype=torch.float64)
        dist.recv(t, 0)
        out.append(("send/recv", t, inputs(0, torch.float64)))
    bools = torch.stack([torch.tensor([r == 0, False, True, r != 1]) for r in range(size)])
    for opname, ref in (("SUM", bools.any(0)), ("PRODUCT", bools.all(0)), ("MAX", bools.any(0)),
                        ("MIN", bools.all(0))):
        b = bools[rank].clone()
        dist.all_reduce(b, op=getattr(R, opname))
        out.append(("all_reduce bool %s vs torch" % opname, b.to(torch.uint8), ref.to(torch.uint8)))
    cx = torch.tensor([1 + 2j, 3 - 1j, 0.5j]) * (rank + 1)
    dist.all_reduce(cx)
    want = torch.tensor([1 + 2j, 3 - 1j, 0.5j]) * sum(range(1, size + 1))
    out.append(("all_reduce complex64 SUM vs torch", torch.view_as_real(cx), torch.view_as_real(want)))
    nc = torch.zeros(6, 4)[:, 1]  # a strided tensor is staged and written back
    nc += rank + 1
    dist.all_reduce(nc)
    out.append(("all_reduce non-contiguous", nc, torch.full((6,), float(sum(range(1, size + 1))))))
    w = dist.all_reduce(inputs(rank, torch.float32), async_op=True)
    fut_val = w.get_future().wait()[0]
    out.append(("async work future", fut_val, everyone(torch.float32).sum(0)))
    sub = dist.new_group([0, 2], backend="rcoll")  # a second rcoll group, not every rank in it
    if rank != 1:
        t = torch.full((5,), float(rank + 1))
        dist.all_reduce(t, group=sub)
        out.append(("new_group([0, 2]) all_reduce", t, torch.full((5,), 4.0)))
    dist.barrier()
    errors = []
    for bad in (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int32), op=R.BAND),
                lambda: dist.recv(torch.zeros(2)),
                lambda: dist.send(torch.zeros(2), (rank + 1) % size, tag=5)):
        try:
            bad()
            errors.append(None)
        except (NotImplementedError, RuntimeError) as e:
            errors.append(str(e))
    dist.barrier()
    dist.destroy_process_group()
    def plain(t):  # tensors would travel back as shared-memory handles of an exited process
        if t is None or isinstance(t, str):
            return t
        return (t.element_size() if t.is_floating_point() else 0,
                (t.double() if t.is_floating_point() else t.long()).reshape(-1).tolist())
    return [(n, plain(a), plain(b)) for n, a, b in out], errors


class TorchAgainstGloo(unittest.TestCase):
    def test_sweep(self):
        import torch
        res = run(sweep, SIZE, (29000 + os.getpid() % 500,), timeout=600)
        checked, lacks = 0, set()
        for rank, (cases, errors) in enumerate(res):
            for name, a, b in cases:
                if a is None and b is None:
                    continue
                if isinstance(b, str):  # gloo lacks it: the rcoll rank result must still exist
                    if not name.startswith(("reduce ", "gather ")):
                        self.assertIsNotNone(a, name)
                    lacks.add(name.split(" ")[0] + " " + name.split(" ")[1])
                    continue
                msg = "rank %d: %s: rcoll %s, reference %s" % (rank, name, a, b)
                if a[0]:
                    tol = 1e-2 if a[0] == 2 else 1e-6
                    torch.testing.assert_close(torch.tensor(a[1]), torch.tensor(b[1]), rtol=tol,
                                               atol=0, msg=msg)
                else:
                    self.assertEqual(a[1], b[1], msg)
                checked += 1
            self.assertIn("BAND", errors[0] or "", errors)
            self.assertIn("any source", errors[1] or "", errors)
            self.assertIn("tag=5", errors[2] or "", errors)
        print("\n  %d results compared, %d ranks; gloo lacks: %s" % (checked, SIZE, sorted(lacks)))
        self.assertGreater(checked, 300)


class _PreMulOp:
    """What torch 2.x's ReduceOp from dist._make_nccl_premul_sum(factor) shows
    a Python backend: it equals ReduceOp.PREMUL_SUM and pickles as
    (RedOpType.PREMUL_SUM, factor) (torch/csrc/distributed/c10d/init.cpp).
    torch 1.13's keeps the factor in C++ only, so on 1.13 this stand-in is
    how the backend's PREMUL_SUM path is run, over real communicators."""

    def __init__(self, factor):
        self.factor = factor

    def __eq__(self, other):
        import torch.distributed as dist
        return other == dist.ReduceOp.PREMUL_SUM

    def __getstate__(self):
        import torch.distributed as dist
        return (dist.ReduceOp.PREMUL_SUM, self.factor)


def premul(rank, size, port):
    import types

    import torch
    import torch.distributed as dist
    import rcoll.torch  # noqa: F401 - registers "rcoll"
    dist.init_process_group("rcoll", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    pg = dist.distributed_c10d._get_default_group()
    f = 0.5 * (rank + 1)  # each rank's own factor
    out = {}
    # torch's own op: mapped where torch lets a Python backend read the factor,
    # else an error that names it.
    t = inputs(rank, torch.float32)
    try:
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
        out["torch op"] = t.tolist()
    except NotImplementedError as e:
        out["torch op"] = str(e)
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64):
        for factor in (f, torch.tensor([f], dtype=torch.float64)):  # a float, or a one-element tensor
            kind = "tensor" if torch.is_tensor(factor) else "float"
            op = _PreMulOp(factor)
            t = inputs(rank, dt)
            pg.allreduce([t], types.SimpleNamespace(reduceOp=op)).wait()
            out["allreduce", str(dt), kind] = t
            t = inputs(rank, dt)
            pg.reduce([t], types.SimpleNamespace(reduceOp=op, rootRank=1)).wait()
            if rank == 1:
                out["reduce", str(dt), kind] = t
            o = torch.zeros(4, dtype=dt)
            pg._reduce_scatter_base(o, inputs(rank, dt), types.SimpleNamespace(reduceOp=op)).wait()
            out["reduce_scatter_tensor", str(dt), kind] = o
            o = torch.zeros(4, dtype=dt)
            pg.reduce_scatter([o], [list(inputs(rank, dt).chunk(size))],
                              types.SimpleNamespace(reduceOp=op)).wait()
            out["reduce_scatter", str(dt), kind] = o
    try:
        pg.allreduce([inputs(rank, torch.int32)], types.SimpleNamespace(reduceOp=_PreMulOp(f)))
        out["int32"] = None
    except NotImplementedError as e:
        out["int32"] = str(e)
    left = len(pg.comm._ops)  # every op made for a call was destroyed after it
    dist.barrier()
    dist.destroy_process_group()
    return {k: (v.tolist() if torch.is_tensor(v) and not v.is_complex() else
                torch.view_as_real(v).tolist() if torch.is_tensor(v) else v)
            for k, v in out.items()}, left, torch.__version__


class TorchPreMulSum(unittest.TestCase):
    def test_premul_sum(self):
        import torch
        res = run(premul, SIZE, (29500 + os.getpid() % 300,), timeout=300)
        factors = [0.5 * (r + 1) for r in range(SIZE)]
        checked = 0
        for rank, (out, left, version) in enumerate(res):
            self.assertEqual(left, 0)
            ref32 = sum(f * inputs(r, torch.float64) for r, f in enumerate(factors))
            if isinstance(out["torch op"], str):
                # torch 1.13: the factor cannot be read; the error must say what and why.
                self.assertTrue(version.startswith("1."), out["torch op"])
                for word in ("PREMUL_SUM", "_make_nccl_premul_sum", "premul_sum_op"):
                    self.assertIn(word, out["torch op"])
            else:
                torch.testing.assert_close(torch.tensor(out["torch op"], dtype=torch.float64), ref32)
                checked += 1
            self.assertIn("PREMUL_SUM on torch.int32", out["int32"] or "")
            for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64):
                # the scaled inputs summed in float64, then rounded to dt: exact for these values
                ref = sum(f * inputs(r, torch.float64) for r, f in enumerate(factors)).to(dt)
                for kind in ("float", "tensor"):
                    def same(key, want):
                        got = torch.tensor(out[key])
                        w = torch.view_as_real(want) if want.is_complex() else want
                        self.assertEqual(got.tolist(), w.tolist(), "rank %d %s" % (rank, key))
                    same(("allreduce", str(dt), kind), ref)
                    same(("reduce_scatter_tensor", str(dt), kind), ref.chunk(SIZE)[rank])
                    same(("reduce_scatter", str(dt), kind), ref.chunk(SIZE)[rank])
                    if rank == 1:
                        same(("reduce", str(dt), kind), ref)
                    checked += 3 + (rank == 1)
        print("\n  PREMUL_SUM: %d results equal to the reference (torch %s: torch's own op %s)"
              % (checked, res[0][2], "mapped" if not isinstance(res[0][0]["torch op"], str)
                 else "refused with a clear error"))


def lane_streams(rank, size, port):
    """The backend's CUDA stream handling, run on CPU tensors through a fake
    of torch.cuda's streams and events that logs each use; the tensors count
    as on a device (rcoll.torch._cuda_device), rcoll moves them as host memory."""
    import contextlib
    import threading
    from unittest import mock

    import torch
    import torch.distributed as dist
    import rcoll.comm
    import rcoll.torch as rt
    dist.init_process_group("rcoll", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    log, tls, handles = [], threading.local(), {}

    def note(*entry):
        log.append(entry + (threading.current_thread().name,))

    class Stream:
        def __init__(self, name=None, device=None):
            self.name = name or "stream%d" % len(handles)
            self.cuda_stream = 1000 + len(handles)
            handles[self.name] = self.cuda_stream

        def wait_event(self, ev):
            note("wait", self.name, ev.name)

    default = Stream("default")

    def current_stream(device=None):
        return getattr(tls, "stream", default)

    @contextlib.contextmanager
    def stream(s):
        prev, tls.stream = current_stream(), s
        try:
            yield
        finally:
            tls.stream = prev

    class Event:
        made = []

        def __init__(self):
            self.name = "ev%d" % len(Event.made)
            Event.made.append(self)

        def record(self, s=None):
            note("record", self.name, (s or current_stream()).name)

    class Future(torch.futures.Future):
        def __init__(self, devices=None):
            super().__init__()
            self.devices = devices

        def set_result(self, result):
            note("future", current_stream().name, str(self.devices))
            super().set_result(result)

    def logged(name, real):
        def call(comm, *args, stream=None, **kw):
            note("call", name, stream.cuda_stream, current_stream().name)
            return real(comm, *args, stream=stream, **kw)
        return call

    real_back = rt._Staged.back

    def back(staged):
        note("back", current_stream().name, staged.direct)
        real_back(staged)

    tags = {}
    C = rcoll.comm.Communicator
    with contextlib.ExitStack() as patches:
        for target, name, fake in (
                (torch.cuda, "Stream", Stream), (torch.cuda, "Event", Event),
                (torch.cuda, "current_stream", current_stream), (torch.cuda, "stream", stream),
                (torch.cuda, "device", lambda d: contextlib.nullcontext()),
                (torch.futures, "Future", Future),
                (torch.Tensor, "record_stream",
                 lambda t, s: note("record_stream", tags.get(t.data_ptr(), "copy"), s.name)),
                (rt, "_cuda_device", lambda ts: torch.device("cpu") if ts else None),
                (rt._Staged, "back", back),
                (C, "send", logged("send", C.send)), (C, "recv", logged("recv", C.recv)),
                (C, "broadcast", logged("broadcast", C.broadcast))):
            patches.enter_context(mock.patch.object(target, name, fake))
        caller = Stream("caller")
        with stream(caller):  # the caller works on a side stream, as in tests/gpu/torch_backend.py
            peer = (rank + 1) % size
            s, r = torch.full((1000,), float(rank + 1)), torch.zeros(1000)
            tags[s.data_ptr()], tags[r.data_ptr()] = "s", "r"
            for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer),
                                             dist.P2POp(dist.irecv, r, (rank - 1) % size)]):
                q.wait()
            nc = torch.zeros(6, 4)[:, 1]  # non-contiguous: staged through a copy, written back
            nc += rank + 1
            tags[nc.data_ptr()] = "nc"
            w = dist.broadcast(nc, src=0, async_op=True)
            w.wait()
            fut_devices = w.get_future().devices
    dist.barrier()
    dist.destroy_process_group()
    return log, handles, r.tolist(), nc.tolist(), str(fut_devices)


class TorchLaneStreams(unittest.TestCase):
    """Each lane's device calls on the lane's own stream, ordered after the
    caller's stream and before what the caller does after wait() (a fake
    torch.cuda: no GPU here). On the caller's stream, a send and a receive
    on two lanes deadlocked batch_isend_irecv on an H200."""

    def test_lane_streams(self):
        res = run(lane_streams, 2, (29800 + os.getpid() % 150,), timeout=120)
        for rank, (log, handles, r, nc, fut_devices) in enumerate(res):
            self.assertEqual(r, [float((rank - 1) % 2 + 1)] * 1000)
            self.assertEqual(nc, [1.0] * 6)
            self.assertEqual(fut_devices, "[device(type='cpu')]")
            calls = {e[1]: i for i, e in enumerate(log) if e[0] == "call"}
            self.assertEqual(sorted(calls), ["broadcast", "recv", "send"], log)
            lanes = {}
            for op, i in calls.items():
                _, _, handle, cur, thread = log[i]
                msg = "rank %d %s: %s" % (rank, op, log)
                self.assertNotIn(cur, ("caller", "default"), msg)  # run with the lane's stream current
                self.assertEqual(handle, handles[cur], msg)       # and given to rcoll
                lanes[op] = cur
                # the lane's stream waits for an event recorded on the
                # caller's stream in the calling thread, before the call ...
                ready = [e[2] for e in log[:i] if e[:2] == ("wait", cur)][-1]
                self.assertIn(("record", ready, "caller", "MainThread"), log[:i], msg)
                # ... then records one after it, which wait() makes the caller's stream wait for
                done = next(j for j in range(i + 1, len(log)) if log[j][0] == "record" and log[j][2] == cur)
                self.assertIn(("wait", "caller", log[done][1]), [e[:3] for e in log[done:]], msg)
                # the future is completed with the lane's stream current (it marks that stream)
                self.assertIn(("future", cur), [e[:2] for e in log[done:]], msg)
                if op == "broadcast":  # the staged copy goes back on the lane's stream, before done
                    self.assertIn(("back", cur, False), [e[:3] for e in log[i:done]], msg)
            self.assertEqual(len(set(lanes.values())), 3, lanes)  # send, recv, collectives: a stream each
            recorded = sorted(e[1:3] for e in log if e[0] == "record_stream")
            self.assertEqual(recorded, sorted([("s", lanes["send"]), ("r", lanes["recv"]),
                                               ("nc", lanes["broadcast"]), ("copy", lanes["broadcast"])]))


if __name__ == "__main__":
    unittest.main()
