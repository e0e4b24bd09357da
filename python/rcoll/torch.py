"""The torch.distributed backend "rcoll".

    import rcoll.torch                      # registers the backend
    dist.init_process_group("rcoll")        # under torchrun or mp.spawn, as with "gloo"

Mechanism: a Python subclass of c10d's ProcessGroup, returned by the creator
that Backend.register_backend takes. This is what both torch 1.13 (Debian 12's
python3-torch) and torch 2.x accept without compiling anything: 1.13 has no
Python Backend class, and 2.x's init_process_group keeps a ProcessGroup
subclass that a creator returns as the group itself. Every operation returns a
Work (a Python subclass of c10d's Work) whose wait() raises rcoll's error and
whose get_future() is what DDP's comm hooks chain on.

The unique id travels through the store torch hands the backend (rank 0 sets
it, the others wait for it), as ProcessGroupNCCL does. Collectives run on one
communicator, in submission order: in the calling thread, or above
RCOLL_TORCH_INLINE_BYTES on the group's own thread (see _INLINE_DEFAULT for
why the caller is the default). Point-to-point messages from rank a to rank
b use their own two-rank communicator, made on first use, so that isend/irecv
pairs in any order (batch_isend_irecv's exchanges) cannot block each other.
On CUDA tensors each of these lanes has its own stream, ordered after the
caller's current stream at submission and before it at Work.wait(), as
ProcessGroupNCCL does (see ProcessGroupRcoll._on_lane_stream).

Every wait is bounded: rcoll's own by RCOLL_TIMEOUT (or init_process_group's
timeout when RCOLL_TIMEOUT is not set), the store's by the same.
"""
import collections
import contextlib
import datetime
import inspect
import os
import threading
import time

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

import rcoll
from . import comm as _comm
from ._lanes import Lane
from ._lib import lib as _lib
from .errors import check as _check

__all__ = ["ProcessGroupRcoll", "Work", "BACKEND"]
BACKEND = "rcoll"

_R = dist.ReduceOp
_REDOPS = [(_R.SUM, rcoll.SUM, "SUM"), (_R.PRODUCT, rcoll.PROD, "PRODUCT"),
           (_R.MIN, rcoll.MIN, "MIN"), (_R.MAX, rcoll.MAX, "MAX")]
if hasattr(_R, "AVG"):
    _REDOPS.append((_R.AVG, rcoll.AVG, "AVG"))


_RCOLL_TYPES = {torch.int8: 0, torch.uint8: 1, torch.int32: 2, torch.int64: 4, torch.float16: 6,
                torch.float32: 7, torch.float64: 8, torch.bfloat16: 9}
for _name, _code in (("float8_e4m3fn", 10), ("float8_e5m2", 11)):  # torch >= 2.1
    if hasattr(torch, _name):
        _RCOLL_TYPES[getattr(torch, _name)] = _code


def _unsupported(what):
    return NotImplementedError("rcoll backend: %s is not supported" % what)


class _PreMul:
    """A PREMUL_SUM ReduceOp's factor: the rcoll op is made on the lane's
    communicator for the call's dtype right before the call and destroyed
    right after it, as ProcessGroupNCCL does (unpackPreMulSum, ncclRedOpRAII)."""
    __slots__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor


# PREMUL_SUM's types: ProcessGroupNCCL takes half, float and double; rcoll's
# PreMulSum does bfloat16 too. Complex tensors go as pairs of reals, each part
# scaled by the (real) factor, as NCCL's view-as-real does.
_PREMUL_TYPES = {torch.float16: torch.float16, torch.bfloat16: torch.bfloat16,
                 torch.float32: torch.float32, torch.float64: torch.float64,
                 torch.complex64: torch.float32, torch.complex128: torch.float64}


def _premul_factor(op):
    """The factor of a PREMUL_SUM ReduceOp (dist._make_nccl_premul_sum).
    torch 2.x pickles a ReduceOp as (RedOpType, factor), the factor a float
    or a tensor (torch/csrc/distributed/c10d/init.cpp); torch 1.13's ReduceOp
    keeps it in C++ only (no __getstate__), where a Python backend cannot
    read it. UNVERIFIED on a torch that pickles it: tested with a stand-in."""
    try:
        state = op.__getstate__()
    except (AttributeError, TypeError, RuntimeError):
        state = None
    if isinstance(state, tuple) and len(state) == 2 and state[1] is not None:
        f = state[1]
        if isinstance(f, (list, tuple)) and len(f) == 1:  # torch 2.0: one tensor per device
            f = f[0]
        if torch.is_tensor(f):
            if f.numel() != 1:
                raise ValueError("rcoll backend: ReduceOp.PREMUL_SUM's factor has %d elements; one "
                                 "is needed" % f.numel())
            f = f.item()  # read now: the op is made right before its call runs
        return float(f)
    raise NotImplementedError(
        "rcoll backend: ReduceOp.PREMUL_SUM (torch.distributed._make_nccl_premul_sum) is not supported "
        "on torch %s: its ReduceOp keeps the factor in C++ only, where a Python backend cannot read it "
        "(newer torch pickles a ReduceOp with its factor, and there the backend maps it to "
        "rcollRedOpCreatePreMulSum); multiply the tensor by the factor and use SUM, or use "
        "rcoll.Communicator.premul_sum_op directly" % torch.__version__)


def _redop(op, dtype):
    """rcoll's op for a torch ReduceOp on tensors of dtype: an rcoll op
    number, or a _PreMul for PREMUL_SUM."""
    if op == _R.PREMUL_SUM:
        if dtype not in _PREMUL_TYPES:
            raise _unsupported("ReduceOp.PREMUL_SUM on %s tensors (float16, bfloat16, float32, float64 "
                               "and complex work)" % dtype)
        return _PreMul(_premul_factor(op))
    for top, rop, name in _REDOPS:
        if op == top:
            break
    else:
        raise _unsupported("ReduceOp.%s (rcoll reduces with SUM, PRODUCT, MIN, MAX, AVG and "
                           "PREMUL_SUM)" % str(getattr(op, "op", op)).split(".")[-1])
    if dtype == torch.bool:  # torch's bool arithmetic: sum is "any", product is "all"
        if rop == rcoll.AVG:
            raise _unsupported("ReduceOp.AVG on bool tensors")
        rop = {rcoll.SUM: rcoll.MAX, rcoll.PROD: rcoll.MIN}.get(rop, rop)
    if dtype.is_complex and rop not in (rcoll.SUM, rcoll.AVG):
        raise _unsupported("ReduceOp.%s on complex tensors (SUM, AVG and PREMUL_SUM work)" % name)
    return rop


@contextlib.contextmanager
def _op_on(comm, rop, dtype):
    """The op to pass to comm's call: rop itself, or for PREMUL_SUM an rcoll
    PreMulSum made now for dtype and destroyed when the call has returned."""
    if not isinstance(rop, _PreMul):
        yield rop
        return
    op = comm.premul_sum_op(rop.factor, str(_PREMUL_TYPES[dtype]).replace("torch.", ""))
    try:
        yield op
    finally:
        op.destroy()


def _flat(t):
    """What to hand to rcoll for a contiguous t (rcoll needs only its address
    and element count): complex as pairs of reals."""
    return torch.view_as_real(t) if t.dtype.is_complex else t


def _one(tensors, what):
    if len(tensors) != 1:
        raise _unsupported("%s with %d tensors per process (one device per process: pass one "
                           "tensor)" % (what, len(tensors)))
    t = tensors[0]
    if t.is_sparse:
        raise _unsupported("%s on sparse tensors" % what)
    return t


class _Staged:
    """t itself when rcoll can use it directly, else a contiguous copy that
    is written back after the operation."""

    def __init__(self, t, copy_in=True):
        self.t = t
        self.direct = t.is_contiguous()
        self.c = t if self.direct else (t.contiguous() if copy_in else torch.empty_like(
            t, memory_format=torch.contiguous_format))

    def flat(self):
        return _flat(self.c)

    def back(self):
        if not self.direct:
            self.t.copy_(self.c)


def _nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def _cuda_device(ts):
    """The device of the first CUDA tensor in ts, or None."""
    for t in ts:
        if t.is_cuda:
            return t.device
    return None


class _DeviceCall:
    """The CUDA side of one call, and its stream argument: rcoll reads
    cuda_stream, which _submit sets to the lane's own stream (see
    ProcessGroupRcoll._on_lane_stream). tensors are those the call uses, to
    be recorded on that stream for the caching allocator."""

    def __init__(self, device, tensors):
        self.device = device
        self.tensors = tensors
        self.cuda_stream = None


def _stream_for(uses):
    """None for host tensors; for CUDA ones a _DeviceCall, to pass to
    _submit and, as stream=, to rcoll. uses: every tensor the call reads or
    writes that is made before it is submitted (_Staged: the tensor and its
    contiguous copy; None is skipped)."""
    ts = []
    for x in uses:
        if isinstance(x, _Staged):
            ts += [x.t] if x.direct else [x.t, x.c]
        elif x is not None:
            ts.append(x)
    device = _cuda_device(ts)
    return None if device is None else _DeviceCall(device, [t for t in ts if t.device == device])


# Collectives of at most this many bytes run in the calling thread when the
# group's thread is idle; larger ones on that thread, so that DDP's backward
# goes on meanwhile. The default is every collective in the caller: the DDP
# Reducer of torch 1.13 and of 2.15 (checked on CPU) crashes (SIGSEGV) on a
# gradient future completed with an exception, and run in the caller a
# failure raises out of backward() naming the peer instead. The thread is
# opt-in (e.g. RCOLL_TORCH_INLINE_BYTES=262144) for runs that favour overlap.
_INLINE_DEFAULT = str(1 << 62)


class Work(_c10d.Work):
    """The handle of one operation: wait() raises its error, get_future() is
    completed with its output tensors (or the error)."""

    def __init__(self, result, timeout_s, device=None):
        super().__init__()
        self._result = result
        # On CUDA a future of that device, as ProcessGroupNCCL's: completed
        # with the lane's stream current, its wait() and then() make the
        # consumer's stream wait for that stream.
        self._fut = torch.futures.Future() if device is None else torch.futures.Future(devices=[device])
        self._done = False
        self._lock = threading.Lock()  # held until the operation ends (cheaper than an Event)
        self._lock.acquire()
        self._error = None
        self._timeout_s = timeout_s
        self._cuda_lane = None
        self._cuda_done = None  # CUDA: (device, event recorded on the lane's stream after the call)

    def _finish(self, error):
        self._error = error
        self._done = True
        self._lock.release()
        if error is None:
            self._fut.set_result(self._result)
        else:
            self._fut.set_exception(error)

    def wait(self, timeout=None):
        limit = self._timeout_s + 30  # rcoll itself gives up after timeout_s
        if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
            limit = min(limit, timeout.total_seconds())
        if not self._done:
            if not self._lock.acquire(timeout=limit):
                raise RuntimeError("rcoll backend: an operation did not finish within %.0f s" % limit)
            self._lock.release()
        if self._error is not None:
            raise self._error
        if self._cuda_done is not None:
            # As ProcessGroupNCCL's Work.wait: the waiting thread's current
            # stream waits for the call's stream; the CPU does not wait.
            device, done = self._cuda_done
            torch.cuda.current_stream(device).wait_event(done)
        if self._cuda_lane is not None and self._cuda_lane.comm is not None:
            # UNVERIFIED (no GPU here): a device call returned once queued on
            # its stream; what went wrong since shows in rcollCommGetAsyncError.
            self._cuda_lane.comm.check_async_error()
        return True

    def is_completed(self):
        return self._done

    def is_success(self):
        return self._done and self._error is None

    def exception(self):
        return self._error

    def get_future(self):
        return self._fut

    def result(self):
        return self._result

    def synchronize(self):
        self.wait()


class ProcessGroupRcoll(_c10d.ProcessGroup):
    """The "rcoll" process group. init_process_group makes it; see the module doc."""

    # Completed Work objects are kept this long (a count): C++ callers such as
    # DDP hold only the C++ half of a Python Work and call wait()/get_future()
    # right after the call returns, which needs the Python half alive.
    KEEP_WORKS = 64

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._store = store
        self._rank, self._size = rank, size
        if "RCOLL_TIMEOUT" in os.environ or timeout is None:
            self._timeout_ms = 0
            self._timeout_s = _comm._timeout_s()
        else:
            self._timeout_s = max(1, int(timeout.total_seconds()))
            self._timeout_ms = self._timeout_s * 1000
        self._inline = int(os.environ.get("RCOLL_TORCH_INLINE_BYTES", _INLINE_DEFAULT))
        self._net = os.environ.get("RCOLL_TORCH_NET") or None
        self._works = collections.deque()
        self._works_lock = threading.Lock()
        self.comm = _comm.Communicator.from_store(store, rank, size, key="rcoll/uid",
                                                  timeout_ms=self._timeout_ms, net=self._net)
        self._coll = Lane("coll", comm=self.comm, inline_bytes=self._inline)
        self._p2p = {}
        self._p2p_lock = threading.Lock()
        self._store_lock = threading.Lock()
        self._streams = {}  # (lane name, device): the lane's CUDA stream
        self._streams_lock = threading.Lock()

    def getBackendName(self):
        return BACKEND

    # torch 2.15 keeps a group's name and description in its backends, which
    # a creator-made group has none of ("ProcessGroup name not set" when
    # DeviceMesh, and so FSDP2, reads group_name): the group keeps them.
    def _set_group_name(self, name):
        self._group_name = name
        setter = getattr(super(), "_set_group_name", None)
        if setter is not None:
            setter(name)

    def _set_group_desc(self, desc):
        self._group_desc = desc
        setter = getattr(super(), "_set_group_desc", None)
        if setter is not None:
            setter(desc)

    @property
    def group_name(self):
        return getattr(self, "_group_name", "")

    @property
    def group_desc(self):
        return getattr(self, "_group_desc", "")

    def _get_backend(self, device=None):
        """torch 2.15 asks a group for its backend of a device where 2.5 caught
        the error (batch_isend_irecv). A group made by a creator, like this one,
        registers no backends, and c10d's answer is an error; this group serves
        cpu and cuda itself, and answers what c10d reads of a backend."""
        return self

    # What c10d reads of a backend: rcoll neither splits a communicator for a
    # new group (each group makes its own) nor coalesces (each op is posted
    # on its own, as batch_isend_irecv then does).
    supports_splitting = False
    supports_coalescing = False

    def __repr__(self):
        return "<ProcessGroupRcoll rank %d of %d>" % (self._rank, self._size)

    # -- plumbing
    def _submit(self, lane, result, fn, nbytes, stream=None):
        """Runs fn(comm) on lane; stream: _stream_for's answer for the call's
        tensors (None on the host)."""
        work = Work(result, self._timeout_s, None if stream is None else stream.device)
        finish = work._finish
        if stream is not None:
            work._cuda_lane = lane  # stream-ordered: errors come later, from the communicator
            fn, finish = self._on_lane_stream(lane, stream, work, fn)
        with self._works_lock:
            self._works.append(work)
            while len(self._works) > self.KEEP_WORKS and self._works[0].is_completed():
                self._works.popleft()
        lane.submit(fn, finish, nbytes)
        return work

    def _lane_stream(self, lane, device):
        """The lane's own CUDA stream on device, made on first use."""
        key = (lane.name, device)
        with self._streams_lock:
            s = self._streams.get(key)
            if s is None:
                s = self._streams[key] = torch.cuda.Stream(device=device)
        return s

    def _on_lane_stream(self, lane, call, work, fn):
        """fn and work's completion, run on the lane's own CUDA stream, as
        ProcessGroupNCCL runs each communicator's calls on its own stream.
        rcoll's device calls are stream-ordered (a call starts when the
        stream's earlier work is done), and a send and a receive run on two
        lanes, from two threads: on the caller's stream they could queue on
        each rank as [recv, send], each receive behind the send its peer
        waits for. That deadlock was seen on an H200 (batch_isend_irecv,
        tests/gpu/torch_backend.py). So: the caller's stream is marked here,
        in the calling thread, after its work on the inputs and the staging
        copies just made; the lane's stream waits for that mark, runs the
        call and whatever fn copies after it (_Staged.back), and marks its
        end, which Work.wait makes the caller's stream wait for."""
        device = call.device
        ls = self._lane_stream(lane, device)
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(device))
        for t in call.tensors:  # made on another stream: not to be reused before ls is past them
            t.record_stream(ls)
        call.cuda_stream = ls.cuda_stream  # what fn passes to rcoll
        done = torch.cuda.Event()
        work._cuda_done = (device, done)

        def on_lane(comm):
            with torch.cuda.device(device), torch.cuda.stream(ls):
                ls.wait_event(ready)
                try:
                    fn(comm)
                finally:
                    done.record(ls)

        def finish(error):
            with torch.cuda.device(device), torch.cuda.stream(ls):  # the future marks the current stream
                work._finish(error)
        return on_lane, finish

    def _p2p_lane(self, src, dst):
        key = (src, dst)
        with self._p2p_lock:
            lane = self._p2p.get(key)
            if lane is None:
                def make(src=src, dst=dst):
                    return self._p2p_comm(src, dst)
                # Never inline: a send blocks until its receiver posts, and the
                # caller may post that receive's counterpart next (isend, irecv).
                lane = self._p2p[key] = Lane("p2p-%d-%d" % key, make_comm=make, inline_bytes=-1)
        return lane

    def _p2p_comm(self, src, dst):
        """The two-rank communicator for messages src -> dst; src makes the id.
        Several lane threads may do this at once, and a torch store client is
        not for concurrent use: each store call holds a lock, and the receiver
        polls a counter (PrefixStore has no check() in torch 1.13, and a timed-out
        wait() leaves 1.13's TCPStore client out of step) rather than blocking."""
        key = "rcoll/p2p/%d-%d" % (src, dst)
        if self._rank == src:
            uid = rcoll.UniqueId()
            with self._store_lock:
                self._store.set(key, bytes(uid))
                self._store.add(key + "/ready", 1)
        else:
            deadline = time.monotonic() + self._timeout_s
            while True:
                with self._store_lock:  # add(k, 0) reads a counter without blocking
                    if self._store.add(key + "/ready", 0) > 0:
                        uid = rcoll.UniqueId(self._store.get(key))
                        break
                if time.monotonic() > deadline:
                    raise rcoll.TimeoutError("rcoll backend: recv", 8, "rank %d did not start "
                                             "sending to rank %d within %d s" % (src, dst, self._timeout_s))
                time.sleep(0.005)
        return _comm.Communicator(uid, 0 if self._rank == src else 1, 2,
                                  timeout_ms=self._timeout_ms, net=self._net)

    def _check_peer(self, peer, what):
        if not 0 <= peer < self._size or peer == self._rank:
            raise ValueError("rcoll backend: %s peer %d is not another rank of this group (0..%d, "
                             "this is %d)" % (what, peer, self._size - 1, self._rank))

    # -- collectives
    def allreduce(self, tensors, opts=None):
        t = _one(tensors, "allreduce")
        op = _redop(opts.reduceOp if opts is not None else _R.SUM, t.dtype)
        dt = _RCOLL_TYPES.get(t.dtype)
        if dt is not None and t.is_contiguous() and not t.is_cuda and not isinstance(op, _PreMul):
            # The common case, without the generic path's checks: the call
            # costs microseconds at small sizes and this is most of them.
            ptr, n = t.data_ptr(), t.numel()

            def fast(comm):
                _check("rcollAllReduce", _lib.rcollAllReduce(ptr, ptr, n, dt, op, comm._h, None), comm._h)
            return self._submit(self._coll, tensors, fast, n * t.element_size())
        s = _Staged(t)
        stream = _stream_for([s])

        def run(comm):
            with _op_on(comm, op, t.dtype) as o:
                comm.all_reduce(s.flat(), op=o, stream=stream)
            s.back()
        return self._submit(self._coll, tensors, run, _nbytes(t), stream)

    def allreduce_coalesced(self, tensors, opts=None):
        op_in = opts.reduceOp if opts is not None else _R.SUM
        staged = [(_Staged(t), _redop(op_in, t.dtype)) for t in tensors]
        stream = _stream_for([s for s, _ in staged])

        def run(comm):
            for s, op in staged:
                with _op_on(comm, op, s.t.dtype) as o:
                    comm.all_reduce(s.flat(), op=o, stream=stream)
                s.back()
        return self._submit(self._coll, tensors, run, _nbytes(*tensors), stream)

    def broadcast(self, tensors, opts):
        t = _one(tensors, "broadcast")
        root = opts.rootRank
        s = _Staged(t)
        stream = _stream_for([s])

        def run(comm):
            comm.broadcast(s.flat(), root=root, stream=stream)
            s.back()
        return self._submit(self._coll, tensors, run, _nbytes(t), stream)

    def reduce(self, tensors, opts):
        t = _one(tensors, "reduce")
        op, root = _redop(opts.reduceOp, t.dtype), opts.rootRank
        s = _Staged(t)
        stream = _stream_for([s])

        def run(comm):
            with _op_on(comm, op, t.dtype) as o:
                comm.reduce(s.flat(), op=o, root=root, stream=stream)
            if comm.rank == root:
                s.back()
        return self._submit(self._coll, tensors, run, _nbytes(t), stream)

    def _check_blocks(self, what, whole, whole_name, block):
        """whole must be n blocks of block's type: the output of an all-gather,
        the input of a reduce-scatter."""
        if whole.numel() != block.numel() * self._size or whole.dtype != block.dtype:
            raise ValueError("rcoll backend: %s needs its %s to be %d x %d %s elements, got %d %s"
                             % (what, whole_name, self._size, block.numel(), block.dtype,
                                whole.numel(), whole.dtype))

    def _allgather_base(self, output, input, opts=None):
        self._check_blocks("all_gather_into_tensor", output, "output", input)
        si, so = _Staged(input), _Staged(output, copy_in=False)
        stream = _stream_for([si, so])

        def run(comm):
            comm.all_gather(si.flat(), so.flat(), stream=stream)
            so.back()
        return self._submit(self._coll, [output], run, _nbytes(output), stream)

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "allgather")
        outs = _one_list(output_tensors, "allgather")
        _check_list(outs, t, self._size, "allgather output")
        flat = torch.empty((self._size,) + tuple(t.shape), dtype=t.dtype, device=t.device)
        si = _Staged(t)
        stream = _stream_for([si, flat] + list(outs))

        def run(comm):
            comm.all_gather(si.flat(), _flat(flat), stream=stream)
            for i, o in enumerate(outs):
                o.copy_(flat[i])
        return self._submit(self._coll, output_tensors, run, _nbytes(flat), stream)

    def _reduce_scatter_base(self, output, input, opts=None):
        self._check_blocks("reduce_scatter_tensor", input, "input", output)
        op = _redop(opts.reduceOp if opts is not None else _R.SUM, input.dtype)
        si, so = _Staged(input), _Staged(output, copy_in=False)
        stream = _stream_for([si, so])

        def run(comm):
            with _op_on(comm, op, input.dtype) as o:
                comm.reduce_scatter(si.flat(), so.flat(), op=o, stream=stream)
            so.back()
        return self._submit(self._coll, [output], run, _nbytes(input), stream)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        ins = _one_list(input_tensors, "reduce_scatter")
        _check_list(ins, out, self._size, "reduce_scatter input")
        op = _redop(opts.reduceOp if opts is not None else _R.SUM, out.dtype)
        so = _Staged(out, copy_in=False)
        stream = _stream_for([so] + list(ins))

        def run(comm):
            flat = torch.stack([i.contiguous() for i in ins])
            with _op_on(comm, op, out.dtype) as o:
                comm.reduce_scatter(_flat(flat), so.flat(), op=o, stream=stream)
            so.back()
        return self._submit(self._coll, output_tensors, run, _nbytes(out) * self._size, stream)

    def barrier(self, opts=None):
        one = torch.zeros(1, dtype=torch.uint8)

        def run(comm):
            comm.all_reduce(one.numpy(), op=rcoll.MAX)
        return self._submit(self._coll, [], run, 1)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        n = self._size
        if (not output_split_sizes and not input_split_sizes and input.is_contiguous()
                and output.is_contiguous() and input.numel() == output.numel()):
            stream = _stream_for([input, output])

            def run(comm):
                comm.all_to_all(_flat(input), _flat(output), stream=stream)
            return self._submit(self._coll, [output], run, _nbytes(input), stream)
        outs = _split(output, output_split_sizes, n, "all_to_all_single output")
        ins = _split(input, input_split_sizes, n, "all_to_all_single input")
        return self._alltoall(outs, ins, [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != self._size or len(input_tensors) != self._size:
            raise ValueError("rcoll backend: all_to_all needs %d input and %d output tensors"
                             % (self._size, self._size))
        return self._alltoall(list(output_tensors), list(input_tensors), output_tensors)

    def _alltoall(self, outs, ins, result):
        me, n = self._rank, self._size
        if len({o.numel() for o in outs + ins}) == 1:
            # Equal blocks (all_to_all_single without splits, or equal
            # splits): one rcollAlltoAll over staged contiguous copies.
            so = torch.empty((n,) + tuple(ins[0].shape), dtype=ins[0].dtype, device=ins[0].device)
            stream = _stream_for(ins + outs + [so])

            def run(comm):
                si = torch.stack([i.contiguous() for i in ins])
                comm.all_to_all(_flat(si), _flat(so), stream=stream)
                for o, block in zip(outs, so):
                    o.copy_(block.view(o.shape))
            return self._submit(self._coll, result, run, _nbytes(*ins), stream)
        # Uneven splits: NCCL has no all-to-all-v either; a group of sends
        # and receives is what ProcessGroupNCCL does too.
        so = [_Staged(o, copy_in=False) for o in outs]
        si = [_Staged(i) for i in ins]
        stream = _stream_for(so + si)

        def run(comm):
            so[me].flat().copy_(si[me].flat())
            with rcoll.group():
                for p in range(n):
                    if p != me:
                        comm.send(si[p].flat(), p, stream=stream)
                        comm.recv(so[p].flat(), p, stream=stream)
            for s in so:
                s.back()
        return self._submit(self._coll, result, run, _nbytes(*ins), stream)

    def gather(self, output_tensors, input_tensors, opts):
        t, root, me = _one(input_tensors, "gather"), opts.rootRank, self._rank
        outs = _one_list(output_tensors, "gather") if me == root else []
        if me == root:
            _check_list(outs, t, self._size, "gather output")
        si = _Staged(t)
        flat = (torch.empty((self._size,) + tuple(t.shape), dtype=t.dtype, device=t.device)
                if me == root else None)
        stream = _stream_for([si, flat] + list(outs))

        def run(comm):
            comm.gather(si.flat(), None if flat is None else _flat(flat), root=root, stream=stream)
            for o, block in zip(outs, flat if flat is not None else []):
                o.copy_(block)
        return self._submit(self._coll, output_tensors, run, _nbytes(t) * self._size, stream)

    def scatter(self, output_tensors, input_tensors, opts):
        t, root, me = _one(output_tensors, "scatter"), opts.rootRank, self._rank
        ins = _one_list(input_tensors, "scatter") if me == root else []
        if me == root:
            _check_list(ins, t, self._size, "scatter input")
        so = _Staged(t, copy_in=False)
        stream = _stream_for([so] + list(ins))

        def run(comm):
            flat = torch.stack([i.contiguous() for i in ins]) if me == root else None
            comm.scatter(None if flat is None else _flat(flat), so.flat(), root=root, stream=stream)
            so.back()
        return self._submit(self._coll, output_tensors, run, _nbytes(t) * self._size, stream)

    # -- point to point
    def send(self, tensors, dstRank, tag=0):
        t = _one(tensors, "send")
        self._check_peer(dstRank, "send")
        if tag:
            raise _unsupported("send with tag=%d (messages between two ranks match in order; "
                               "use tag 0)" % tag)
        s = _Staged(t)
        stream = _stream_for([s])
        return self._submit(self._p2p_lane(self._rank, dstRank), tensors,
                            lambda comm: comm.send(s.flat(), 1, stream=stream), _nbytes(t), stream)

    def recv(self, tensors, srcRank, tag=0):
        t = _one(tensors, "recv")
        self._check_peer(srcRank, "recv")
        if tag:
            raise _unsupported("recv with tag=%d (messages between two ranks match in order; "
                               "use tag 0)" % tag)
        s = _Staged(t, copy_in=False)
        stream = _stream_for([s])

        def run(comm):
            comm.recv(s.flat(), 0, stream=stream)
            s.back()
        return self._submit(self._p2p_lane(srcRank, self._rank), tensors, run, _nbytes(t), stream)

    def recv_anysource(self, tensors, tag=0):
        raise _unsupported("recv from any source (src=None); name the sender")

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        raise _unsupported("monitored_barrier (use barrier: rcoll's timeout names a missing rank)")

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        raise _unsupported("all_gather_coalesced (call all_gather per tensor)")

    # -- the names torch 2.15 calls (it renamed the single-tensor forms and
    # added gather_single and the coalesced single-tensor forms); older
    # torch calls the names above.
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base

    def gather_single(self, output, input, opts):
        """gather_single: the root's output is one tensor of n x input.numel()
        elements (the others pass an empty one)."""
        root, me, n = opts.rootRank, self._rank, self._size
        if me == root:
            self._check_blocks("gather_single", output, "output at the root", input)
        si = _Staged(input)
        so = _Staged(output, copy_in=False) if me == root else None
        stream = _stream_for([si, so])

        def run(comm):
            comm.gather(si.flat(), None if so is None else so.flat(), root=root, stream=stream)
            if so is not None:
                so.back()
        return self._submit(self._coll, [output], run, _nbytes(input) * n, stream)

    def _coalesced(self, what, outputs, inputs, call):
        """A coalesced list of single-tensor collectives: one after another,
        in one submission, so they complete as one Work."""
        if len(outputs) != len(inputs):
            raise ValueError("rcoll backend: %s has %d outputs and %d inputs"
                             % (what, len(outputs), len(inputs)))
        staged = [(_Staged(i), _Staged(o, copy_in=False)) for o, i in zip(outputs, inputs)]
        stream = _stream_for([x for pair in staged for x in pair])

        def run(comm):
            for si, so in staged:
                call(comm, si, so, stream)
                so.back()
        return self._submit(self._coll, list(outputs), run, _nbytes(*inputs, *outputs), stream)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        what = "all_gather_into_tensor (coalesced)"
        for o, i in zip(outputs, inputs):
            self._check_blocks(what, o, "output", i)
        return self._coalesced(what, outputs, inputs,
                               lambda comm, si, so, stream:
                               comm.all_gather(si.flat(), so.flat(), stream=stream))

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        what = "reduce_scatter_tensor (coalesced)"
        op_in = opts.reduceOp if opts is not None else _R.SUM
        for o, i in zip(outputs, inputs):
            self._check_blocks(what, i, "input", o)
        # Resolved here, so that an op rcoll lacks raises in the caller.
        ops = {i.dtype: _redop(op_in, i.dtype) for i in inputs}

        def call(comm, si, so, stream):
            with _op_on(comm, ops[si.t.dtype], si.t.dtype) as o:
                comm.reduce_scatter(si.flat(), so.flat(), op=o, stream=stream)
        return self._coalesced(what, outputs, inputs, call)

    # torch 2.x before the rename calls these for the same coalesced forms.
    allgather_into_tensor_coalesced = all_gather_single_coalesced
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced


def _one_list(lists, what):
    if len(lists) != 1:
        raise _unsupported("%s with %d tensor lists per process (one device per process)"
                           % (what, len(lists)))
    return lists[0]


def _check_list(ts, like, n, what):
    if len(ts) != n:
        raise ValueError("rcoll backend: %s has %d tensors; the group has %d ranks" % (what, len(ts), n))
    for i, o in enumerate(ts):
        if o.numel() != like.numel() or o.dtype != like.dtype:
            raise ValueError("rcoll backend: %s[%d] is %d %s elements; expected %d %s"
                             % (what, i, o.numel(), o.dtype, like.numel(), like.dtype))


def _split(t, sizes, n, what):
    if not sizes:
        if t.shape[0] % n:
            raise ValueError("rcoll backend: %s's first dimension %d does not divide by %d ranks"
                             % (what, t.shape[0], n))
        sizes = [t.shape[0] // n] * n
    if len(sizes) != n or sum(sizes) != t.shape[0]:
        raise ValueError("rcoll backend: %s split sizes %s do not cover %d rows for %d ranks"
                         % (what, list(sizes), t.shape[0], n))
    return list(torch.split(t, list(sizes)))


def _create(store, rank, size, timeout=None):
    return ProcessGroupRcoll(store, rank, size, timeout)


def _register():
    if hasattr(dist.Backend, BACKEND.upper()):
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:  # torch 1.13: no per-device backends; the group serves whatever it is given
        dist.Backend.register_backend(BACKEND, _create)


_register()
