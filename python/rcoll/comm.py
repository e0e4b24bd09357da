"""Communicator, UniqueId and group(): the Python face of rcoll's C API."""
import base64
import collections
import contextlib
import ctypes
import numbers
import os

from . import _abi
from ._buffers import as_buf, dtype_code, stream_of, type_name
from ._lib import lib
from .errors import InvalidArgumentError, InvalidUsageError, check

SUM, PROD, MAX, MIN, AVG = (_abi.REDOPS[n] for n in
                            ("rcollSum", "rcollProd", "rcollMax", "rcollMin", "rcollAvg"))
_OPS = {"sum": SUM, "prod": PROD, "max": MAX, "min": MIN, "avg": AVG}


class UniqueId:
    """The 128 bytes rank 0 makes (rcollGetUniqueId) and every rank passes to
    Communicator. Picklable; `bytes(uid)` and `UniqueId(b)` round-trip, and
    `str(uid)` / `UniqueId.from_str` give a text form for stores and CLIs."""
    __slots__ = ("_b",)

    def __init__(self, data=None):
        if data is None:
            s = _abi.UniqueIdStruct()
            check("rcollGetUniqueId", lib.rcollGetUniqueId(ctypes.byref(s)))
            data = bytes(s.internal)
        data = bytes(data)
        if len(data) != _abi.UNIQUE_ID_BYTES:
            raise InvalidArgumentError("UniqueId", 4, "a unique id is %d bytes, not %d"
                                       % (_abi.UNIQUE_ID_BYTES, len(data)))
        self._b = data

    def __bytes__(self):
        return self._b

    def __str__(self):
        return base64.b64encode(self._b).decode()

    @classmethod
    def from_str(cls, s):
        return cls(base64.b64decode(s))

    def __eq__(self, other):
        return isinstance(other, UniqueId) and other._b == self._b

    def __hash__(self):
        return hash(self._b)

    def __reduce__(self):
        return (UniqueId, (self._b,))

    def _struct(self):
        s = _abi.UniqueIdStruct()
        ctypes.memmove(s.internal, self._b, _abi.UNIQUE_ID_BYTES)
        return s


def get_unique_id():
    return UniqueId()


def _op(op, comm=None):
    if isinstance(op, PreMulSum):
        return op._value_for(comm)
    if isinstance(op, str):
        if op.lower() not in _OPS:
            raise InvalidArgumentError("op", 4, "op %r is not one of %s" % (op, ", ".join(_OPS)))
        return _OPS[op.lower()]
    if op not in _OPS.values():
        raise InvalidArgumentError("op", 4, "op %r is not an rcoll op (0..%d, or an rcoll.PreMulSum)"
                                   % (op, _abi.NUM_OPS - 1))
    return int(op)


def _scalar_bytes(scalar, code, what):
    """scalar as one element of rcoll type `code`, in the type's bytes. A
    NumPy scalar or 0-d array of that very dtype is taken as it is (so
    ml_dtypes' bfloat16 and fp8 scalars work); anything else is a number
    converted here. An integer type refuses a value it would change."""
    import numpy
    name = type_name(code)
    a = None
    if type(scalar).__module__.split(".")[0] == "torch":
        scalar = scalar.item() if scalar.numel() == 1 else scalar
    if isinstance(scalar, (numpy.ndarray, numpy.generic)):
        a = numpy.asarray(scalar)
        if a.size != 1:
            raise InvalidArgumentError(what, 4, "the scalar is an array of %d elements; give one" % a.size)
        if a.dtype.name == name:
            return a.tobytes()
        scalar = a.reshape(()).item()
    if not isinstance(scalar, numbers.Number) or isinstance(scalar, complex):
        raise InvalidArgumentError(what, 4, "the scalar %r is not a real number" % (scalar,))
    if name == "bfloat16":  # float32's upper half, rounded to nearest even (NaN stays NaN)
        b = int(numpy.array(scalar, dtype=numpy.float32).view(numpy.uint32))
        if (b & 0x7FFFFFFF) > 0x7F800000:
            return ((b >> 16) | 0x40).to_bytes(2, "little")
        return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).to_bytes(2, "little")
    if name.startswith("float8"):
        raise InvalidArgumentError(what, 4, "an %s scalar must be given as a NumPy scalar of that dtype "
                                   "(ml_dtypes.%s); rcoll does not round to fp8 in Python"
                                   % (name, name))
    t = numpy.dtype(name)
    if t.kind in "iu":
        info = numpy.iinfo(t)
        if scalar != int(scalar) or not info.min <= int(scalar) <= info.max:
            raise InvalidArgumentError(what, 4, "the scalar %r is not a %s value" % (scalar, name))
        scalar = int(scalar)
    return numpy.array(scalar, dtype=t).tobytes()


class PreMulSum:
    """A reduction op made by rcollRedOpCreatePreMulSum: each rank's input is
    multiplied by this rank's own `scalar`, then the products are summed.
    Made with comm.premul_sum_op(scalar, dtype) for one communicator and one
    dtype, it is given as op= to that communicator's all_reduce, reduce and
    reduce_scatter on arrays of that dtype. The scalar is read at creation
    (rcollScalarHostImmediate). destroy() (or the end of a with block, or the
    communicator's destroy) frees it; keep it until a group using it ends."""

    def __init__(self, comm, scalar, dtype=None):
        what = "rcollRedOpCreatePreMulSum"
        if dtype is None:
            dtype = getattr(scalar, "dtype", None)
            if dtype is None:
                raise InvalidArgumentError(what, 4, "give dtype= for the scalar %r (the op is for "
                                           "one datatype)" % (scalar,))
        self.dtype = dtype_code(dtype, what)
        self.scalar = scalar
        raw = _scalar_bytes(scalar, self.dtype, what)
        buf = ctypes.create_string_buffer(raw, len(raw))
        v = ctypes.c_int()
        check(what, lib.rcollRedOpCreatePreMulSum(
            ctypes.byref(v), buf, self.dtype, _abi.SCALAR_RESIDENCES["rcollScalarHostImmediate"],
            comm._handle(what)), comm._h)
        self.value = v.value
        self._comm = comm
        comm._ops[self.value] = self

    def _value_for(self, comm):
        if self._comm is None:
            raise InvalidUsageError("op", 5, "the PreMulSum op was destroyed")
        if comm is not None and comm is not self._comm:
            raise InvalidUsageError("op", 5, "the PreMulSum op was made on another communicator (%r)"
                                    % self._comm)
        return self.value

    def destroy(self):
        """rcollRedOpDestroy; nothing when destroyed already."""
        comm, self._comm = self._comm, None
        if comm is None:
            return
        comm._ops.pop(self.value, None)
        if comm._h is not None:
            check("rcollRedOpDestroy", lib.rcollRedOpDestroy(self.value, comm._h), comm._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    def __repr__(self):
        return "<rcoll.PreMulSum %r x %s, op %d%s>" % (self.scalar, type_name(self.dtype), self.value,
                                                       "" if self._comm else ", destroyed")


Algorithm = collections.namedtuple("Algorithm", "name chunk_bytes")
PeerTransport = collections.namedtuple("PeerTransport", "transport same_node")


def _store_get(store, key, timeout_s):
    """store.get(key), after store.wait([key], timeout) where the store has one."""
    if hasattr(store, "wait"):
        import datetime
        try:
            store.wait([key], datetime.timedelta(seconds=timeout_s))
        except TypeError:
            store.wait([key])
    v = store.get(key)
    return v.encode() if isinstance(v, str) else bytes(v)


def _timeout_s():
    try:
        return int(os.environ.get("RCOLL_TIMEOUT", "300"))
    except ValueError:
        return 300


class Communicator:
    """A group of ranks that run collectives together.

        Communicator(uid, rank, size)          every rank passes the same UniqueId
        Communicator.from_env()                RANK/WORLD_SIZE + MASTER_ADDR, mpiexec, Slurm
        Communicator.from_store(store, rank, size, key="rcoll")   any store with set/get
    Use it as a context manager (it is destroyed on exit) or call destroy().
    `timeout_ms` and `net` set rcollConfig_t's timeoutMs and netName."""

    def __init__(self, uid, rank, size, timeout_ms=0, net=None, _handle=None):
        self._h = None
        self._ops = {}  # PreMulSum ops made on this communicator, by value
        if _handle is not None:
            self._h = _handle
        else:
            if not isinstance(uid, UniqueId):
                uid = UniqueId(uid)
            cfg = _abi.ConfigStruct.make(timeout_ms, net)
            h = ctypes.c_void_p()
            check("rcollCommInitRank(rank %d of %d)" % (rank, size),
                  lib.rcollCommInitRankConfig(ctypes.byref(h), int(size), uid._struct(), int(rank),
                                              ctypes.byref(cfg)))
            self._h = h.value
        self.rank = self._query(lib.rcollCommUserRank, "rcollCommUserRank")
        self.size = self._query(lib.rcollCommCount, "rcollCommCount")

    @classmethod
    def from_env(cls, timeout_ms=0, net=None):
        cfg = _abi.ConfigStruct.make(timeout_ms, net)
        h = ctypes.c_void_p()
        check("rcollCommInitFromEnv", lib.rcollCommInitFromEnv(ctypes.byref(h), ctypes.byref(cfg)))
        return cls(None, 0, 0, _handle=h.value)

    @classmethod
    def from_unique_ids(cls, uids, rank, size, timeout_ms=0, net=None):
        """rcollCommInitRankScalable: every rank passes the same unique ids in
        the same order (1..size of them); the ranks are cut in order into
        len(uids) blocks (the first size % len(uids) one rank larger) and
        block k meets at uids[k], so that no one root serves every rank."""
        uids = [u if isinstance(u, UniqueId) else UniqueId(u) for u in uids]
        if not uids:
            raise InvalidArgumentError("rcollCommInitRankScalable", 4, "no unique ids")
        arr = (_abi.UniqueIdStruct * len(uids))(*(u._struct() for u in uids))
        cfg = _abi.ConfigStruct.make(timeout_ms, net)
        h = ctypes.c_void_p()
        check("rcollCommInitRankScalable(rank %d of %d, %d ids)" % (rank, size, len(uids)),
              lib.rcollCommInitRankScalable(ctypes.byref(h), int(size), int(rank), len(uids), arr,
                                            ctypes.byref(cfg)))
        return cls(None, 0, 0, _handle=h.value)

    @classmethod
    def from_store(cls, store, rank, size, key="rcoll/unique_id", timeout_ms=0, net=None):
        """Rank 0 makes the id and sets it under `key` (store.set(key, bytes));
        the others get it: a store with wait() (a torch Store) is waited on up
        to the timeout, any other store's get() must block or already hold it."""
        if rank == 0:
            uid = UniqueId()
            store.set(key, bytes(uid))
        else:
            uid = UniqueId(_store_get(store, key, timeout_ms / 1000 if timeout_ms else _timeout_s()))
        return cls(uid, rank, size, timeout_ms=timeout_ms, net=net)

    def _query(self, fn, name):
        v = ctypes.c_int()
        check(name, fn(self._handle(name), ctypes.byref(v)))
        return v.value

    def _handle(self, call):
        if self._h is None:
            raise InvalidUsageError(call, 5, "the communicator was destroyed or aborted")
        return self._h

    @property
    def handle(self):
        """The rcollComm_t as an int, for C code that shares this communicator."""
        return self._handle("handle")

    def __repr__(self):
        if self._h is None:
            return "<rcoll.Communicator (destroyed)>"
        return "<rcoll.Communicator rank %d of %d>" % (self.rank, self.size)

    # -- lifetime
    def split(self, color, key=None, timeout_ms=0, net=None):
        """Collective: ranks with the same color form a new communicator ordered
        by key (default: rank). color None or -1 returns None for this rank."""
        if color is None:
            color = _abi.SPLIT_NOCOLOR
        cfg = _abi.ConfigStruct.make(timeout_ms, net)
        h = ctypes.c_void_p()
        check("rcollCommSplit", lib.rcollCommSplit(self._handle("split"), int(color),
                                                   self.rank if key is None else int(key),
                                                   ctypes.byref(h), ctypes.byref(cfg)), self._h)
        return None if not h.value else Communicator(None, 0, 0, _handle=h.value)

    def shrink(self, exclude, abort=False, timeout_ms=0, net=None):
        """After a rank dies: every rank not in `exclude` calls this with the
        same ranks and gets a communicator of the others, numbered in this
        one's order; a listed rank that calls gets None. abort=True
        (RCOLL_SHRINK_ABORT) first stops this communicator's calls and closes
        its connections; it can then only be destroyed. timeout_ms and net
        default to this communicator's."""
        ranks = [int(r) for r in exclude]
        arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
        cfg = None if not timeout_ms and net is None else _abi.ConfigStruct.make(timeout_ms, net)
        h = ctypes.c_void_p()
        flags = _abi.SHRINK_ABORT if abort else _abi.SHRINK_DEFAULT
        check("rcollCommShrink", lib.rcollCommShrink(self._handle("shrink"), arr, len(ranks), ctypes.byref(h),
                                                     None if cfg is None else ctypes.byref(cfg), flags), self._h)
        return None if not h.value else Communicator(None, 0, 0, _handle=h.value)

    def revoke(self):
        """Stops this communicator's calls in other threads and refuses later
        ones; shrink, destroy and abort may follow."""
        check("rcollCommRevoke", lib.rcollCommRevoke(self._handle("revoke"), _abi.REVOKE_DEFAULT), self._h)

    def destroy(self):
        """Destroys the PreMulSum ops made on it, then the communicator."""
        if self._h is not None:
            for op in list(self._ops.values()):
                op.destroy()
            h, self._h = self._h, None
            check("rcollCommDestroy", lib.rcollCommDestroy(h))

    def abort(self):
        """Ends the communicator at once; peers' pending calls fail naming this rank."""
        if self._h is not None:
            h, self._h = self._h, None
            for op in list(self._ops.values()):
                op.destroy()  # only marks it: the communicator (and its ops) go with the abort
            check("rcollCommAbort", lib.rcollCommAbort(h))

    # -- reduction ops and queries
    def premul_sum_op(self, scalar, dtype=None):
        """An rcoll.PreMulSum op (see there) of this rank's scalar for arrays of
        dtype (default: the scalar's own, for a NumPy scalar or 0-d array)."""
        return PreMulSum(self, scalar, dtype)

    def algorithm(self, coll, nbytes):
        """rcollCommAlgorithm: (name, chunk_bytes) of what a call of `coll`
        ("allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
        "alltoall", "gather", "scatter") would use for nbytes: count x type
        size, times the ranks for the calls whose count is per rank."""
        if int(nbytes) < 0:
            raise InvalidArgumentError("rcollCommAlgorithm", 4, "nbytes %d is negative" % int(nbytes))
        name = ctypes.create_string_buffer(128)
        chunk = ctypes.c_size_t()
        check("rcollCommAlgorithm", lib.rcollCommAlgorithm(self._handle("algorithm"), str(coll).encode(),
                                                           int(nbytes), name, len(name),
                                                           ctypes.byref(chunk)), self._h)
        return Algorithm(name.value.decode(errors="replace"), chunk.value)

    def peer_transport(self, peer):
        """rcollCommPeerTransport: (transport, same_node) this rank uses to
        `peer`: the transport and its device ("shm", "socket eth0 10000 Mb/s"),
        and whether the library counts the peer on this rank's node."""
        text = ctypes.create_string_buffer(256)
        same = ctypes.c_int()
        check("rcollCommPeerTransport", lib.rcollCommPeerTransport(self._handle("peer_transport"), int(peer),
                                                                   ctypes.byref(same), text, len(text)),
              self._h)
        return PeerTransport(text.value.decode(errors="replace"), bool(same.value))

    def async_error(self):
        r = ctypes.c_int()
        check("rcollCommGetAsyncError", lib.rcollCommGetAsyncError(self._handle("async_error"),
                                                                  ctypes.byref(r)))
        return r.value

    def check_async_error(self):
        """Raises what a stream-ordered (CUDA) call reported, if anything."""
        r = self.async_error()
        if r not in (0, _abi.RESULTS["rcollInProgress"]):
            check("rcollCommGetAsyncError", r, self._h)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.destroy()
        else:
            self.abort()  # peers may be waiting on a call this rank will never make
        return False

    def __del__(self):
        # No destroy here: it is collective and may wait on peers. Leaked
        # communicators end with the process.
        pass

    # -- collectives. recvbuf None means in place (into sendbuf).
    def _call(self, name, fn, args, bufs, stream):
        h = self._handle(name)
        s = stream_of(bufs, stream)
        check(name, fn(*args, h, s), h)

    @staticmethod
    def _same_type(name, a, b):
        if a.dtype != b.dtype:
            raise InvalidArgumentError(name, 4, "sendbuf is %s but recvbuf is %s"
                                       % (type_name(a.dtype), type_name(b.dtype)))

    def all_reduce(self, sendbuf, recvbuf=None, op=SUM, stream=None):
        s = as_buf(sendbuf, "rcollAllReduce", "sendbuf", writable=recvbuf is None)
        r = s if recvbuf is None else as_buf(recvbuf, "rcollAllReduce", "recvbuf", True)
        self._same_type("rcollAllReduce", s, r)
        if r.count != s.count:
            raise InvalidArgumentError("rcollAllReduce", 4, "recvbuf has %d elements, sendbuf %d"
                                       % (r.count, s.count))
        self._call("rcollAllReduce", lib.rcollAllReduce, (s.ptr, r.ptr, s.count, s.dtype, _op(op, self)),
                   (s, r), stream)
        return r.obj

    def broadcast(self, sendbuf, recvbuf=None, root=0, stream=None):
        s = as_buf(sendbuf, "rcollBroadcast", "sendbuf", writable=recvbuf is None)
        r = s if recvbuf is None else as_buf(recvbuf, "rcollBroadcast", "recvbuf", True)
        self._same_type("rcollBroadcast", s, r)
        self._call("rcollBroadcast", lib.rcollBroadcast, (s.ptr, r.ptr, r.count, r.dtype, int(root)),
                   (s, r), stream)
        return r.obj

    def reduce(self, sendbuf, recvbuf=None, op=SUM, root=0, stream=None):
        s = as_buf(sendbuf, "rcollReduce", "sendbuf", writable=recvbuf is None)
        r = s if recvbuf is None else as_buf(recvbuf, "rcollReduce", "recvbuf", True)
        self._same_type("rcollReduce", s, r)
        self._call("rcollReduce", lib.rcollReduce,
                   (s.ptr, r.ptr, s.count, s.dtype, _op(op, self), int(root)), (s, r), stream)
        return r.obj

    def all_gather(self, sendbuf, recvbuf, stream=None):
        """recvbuf holds size * len(sendbuf) elements, rank i's block at i.
        In place: sendbuf may be recvbuf's block at this rank."""
        s = as_buf(sendbuf, "rcollAllGather", "sendbuf")
        r = as_buf(recvbuf, "rcollAllGather", "recvbuf", True)
        self._same_type("rcollAllGather", s, r)
        if r.count != s.count * self.size:
            raise InvalidArgumentError("rcollAllGather", 4, "recvbuf has %d elements; %d ranks x %d "
                                       "need %d" % (r.count, self.size, s.count, s.count * self.size))
        self._call("rcollAllGather", lib.rcollAllGather, (s.ptr, r.ptr, s.count, s.dtype), (s, r), stream)
        return r.obj

    def reduce_scatter(self, sendbuf, recvbuf, op=SUM, stream=None):
        """sendbuf holds size * len(recvbuf) elements; this rank gets its block reduced."""
        s = as_buf(sendbuf, "rcollReduceScatter", "sendbuf")
        r = as_buf(recvbuf, "rcollReduceScatter", "recvbuf", True)
        self._same_type("rcollReduceScatter", s, r)
        if s.count != r.count * self.size:
            raise InvalidArgumentError("rcollReduceScatter", 4, "sendbuf has %d elements; %d ranks x "
                                       "%d need %d" % (s.count, self.size, r.count, r.count * self.size))
        self._call("rcollReduceScatter", lib.rcollReduceScatter,
                   (s.ptr, r.ptr, r.count, r.dtype, _op(op, self)), (s, r), stream)
        return r.obj

    def all_to_all(self, sendbuf, recvbuf, stream=None):
        """sendbuf and recvbuf hold size blocks of equal length: block j of
        sendbuf goes to rank j, block i of recvbuf comes from rank i."""
        s = as_buf(sendbuf, "rcollAlltoAll", "sendbuf")
        r = as_buf(recvbuf, "rcollAlltoAll", "recvbuf", True)
        self._same_type("rcollAlltoAll", s, r)
        if r.count != s.count or s.count % self.size:
            raise InvalidArgumentError("rcollAlltoAll", 3, "sendbuf has %d elements and recvbuf %d; "
                                       "both need %d ranks x the same block"
                                       % (s.count, r.count, self.size))
        self._call("rcollAlltoAll", lib.rcollAlltoAll,
                   (s.ptr, r.ptr, s.count // self.size, s.dtype), (s, r), stream)
        return r.obj

    def _rooted_blocks(self, name, small, big, root, what):
        """gather's and scatter's shape check: on the root, big holds size
        blocks of len(small); elsewhere big is unused and may be None."""
        if big is not None:
            self._same_type(name, small, big)
        if self.rank == int(root) and (big is None or big.count != small.count * self.size):
            raise InvalidArgumentError(name, 2, "the root's %s needs %d ranks x %d elements, got %s"
                                       % (what, self.size, small.count,
                                          "none" if big is None else big.count))

    def gather(self, sendbuf, recvbuf=None, root=0, stream=None):
        """Rank i's sendbuf lands in block i of the root's recvbuf (which
        only the root needs)."""
        s = as_buf(sendbuf, "rcollGather", "sendbuf")
        r = None if recvbuf is None else as_buf(recvbuf, "rcollGather", "recvbuf", True)
        self._rooted_blocks("rcollGather", s, r, root, "recvbuf")
        self._call("rcollGather", lib.rcollGather,
                   (s.ptr, r.ptr if r else None, s.count, s.dtype, int(root)),
                   (s, r) if r else (s,), stream)
        return r.obj if r else None

    def scatter(self, sendbuf, recvbuf, root=0, stream=None):
        """Block i of the root's sendbuf (which only the root needs) lands in
        rank i's recvbuf."""
        r = as_buf(recvbuf, "rcollScatter", "recvbuf", True)
        s = None if sendbuf is None else as_buf(sendbuf, "rcollScatter", "sendbuf")
        self._rooted_blocks("rcollScatter", r, s, root, "sendbuf")
        self._call("rcollScatter", lib.rcollScatter,
                   (s.ptr if s else None, r.ptr, r.count, r.dtype, int(root)),
                   (s, r) if s else (r,), stream)
        return r.obj

    def send(self, buf, peer, stream=None):
        b = as_buf(buf, "rcollSend", "buf")
        self._call("rcollSend", lib.rcollSend, (b.ptr, b.count, b.dtype, int(peer)), (b,), stream)

    def recv(self, buf, peer, stream=None):
        b = as_buf(buf, "rcollRecv", "buf", True)
        self._call("rcollRecv", lib.rcollRecv, (b.ptr, b.count, b.dtype, int(peer)), (b,), stream)
        return b.obj

    def barrier(self):
        """A one-byte all-reduce: returns when every rank has called it."""
        import numpy
        self.all_reduce(numpy.zeros(1, dtype=numpy.uint8), op=MAX)


class Simulation:
    """What `with rcoll.group(simulate=True) as sim` gives: after the block,
    sim.estimated_us is the tuner's predicted time of its calls in
    microseconds (rcollSimInfo_t.estimatedTime)."""
    estimated_us = None

    def __repr__(self):
        return "<rcoll.Simulation estimated_us=%r>" % self.estimated_us


@contextlib.contextmanager
def group(simulate=False):
    """Calls inside run together when the block ends (rcollGroupStart/End):
    send and recv pairs that would deadlock one by one, or collectives on
    several communicators. Buffers must stay alive until the block ends.

    simulate=True ends the group with rcollGroupSimulateEnd instead: nothing
    runs, and the Simulation the block gets (`as sim`) holds the predicted
    time (the sum of one communicator's calls, the slowest communicator's
    for several; a send or receive counts as one message; host calls only).
    Local: no peer takes part, and no buffer is touched."""
    check("rcollGroupStart", lib.rcollGroupStart())
    sim = Simulation() if simulate else None
    ok = False
    try:
        yield sim
        ok = True
    finally:
        if simulate:
            info = _abi.SimInfoStruct.make()
            r = lib.rcollGroupSimulateEnd(ctypes.byref(info))
            if ok:
                check("rcollGroupSimulateEnd", r)
                sim.estimated_us = info.estimatedTime
        else:
            r = lib.rcollGroupEnd()
            if ok:
                check("rcollGroupEnd", r)
