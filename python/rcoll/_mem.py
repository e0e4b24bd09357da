"""rcoll.mem_alloc: memory from rcollMemAlloc, freed by rcollMemFree.

Host memory (a machine without a CUDA device) is handed out as NumPy views.
A view must never outlive the memory it shows, and Python cannot stop a user
from keeping one, so the memory is freed when the buffer is closed *and* the
last view is gone: each view's base is one ctypes array over the memory, and
rcollMemFree runs from that array's finalizer."""
import ctypes
import weakref

from ._lib import lib
from .errors import InvalidArgumentError, InvalidUsageError, check

_CUDART = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")  # as lib/cuda/cudart_loader.c
_cudart = []  # [library or None], looked up once


def _device_of(ptr):
    """The CUDA device ptr lives on, or None for host memory. rcollMemAlloc
    gives device memory exactly when the CUDA runtime sees a device, so a
    machine without the runtime has host memory only. UNVERIFIED with a GPU."""
    if not _cudart:
        found = None
        for name in _CUDART:
            try:
                found = ctypes.CDLL(name)
                break
            except OSError:
                continue
        _cudart.append(found)
    rt = _cudart[0]
    if rt is None:
        return None

    class Attr(ctypes.Structure):  # cudaPointerAttributes (CUDA >= 10)
        _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                    ("devicePointer", ctypes.c_void_p), ("hostPointer", ctypes.c_void_p),
                    ("reserved", ctypes.c_long * 32)]  # room for fields a newer runtime appends
    a = Attr()
    if rt.cudaPointerGetAttributes(ctypes.byref(a), ctypes.c_void_p(ptr)) != 0:
        rt.cudaGetLastError()
        return None
    return a.device if a.type in (2, 3) else None  # cudaMemoryTypeDevice, cudaMemoryTypeManaged


def _free(ptr):
    check("rcollMemFree", lib.rcollMemFree(ctypes.c_void_p(ptr)))


class MemBuffer:
    """nbytes of memory from rcollMemAlloc (page-aligned host memory from
    rcoll's pool, or device memory on the current CUDA device). `ptr` is its
    address, `device` None for host memory. For host memory, `numpy(dtype)`
    is a NumPy view to pass to any collective. close() (or the end of a with
    block) frees it once no view is left."""

    def __init__(self, nbytes):
        nbytes = int(nbytes)
        if nbytes < 0:
            raise InvalidArgumentError("rcollMemAlloc", 4, "size %d is negative" % nbytes)
        p = ctypes.c_void_p()
        check("rcollMemAlloc(%d bytes)" % nbytes, lib.rcollMemAlloc(ctypes.byref(p), nbytes))
        self.nbytes = nbytes
        self.ptr = p.value or 0  # size 0: NULL, as rcollMemAlloc gives
        self.device = _device_of(self.ptr) if self.ptr else None
        self._mem = None
        self._freed = None
        if self.ptr:
            if self.device is None:
                # A Python subclass of the array type: it takes weak references.
                self._mem = type("MemView", (ctypes.c_ubyte * nbytes,), {}).from_address(self.ptr)
                self._freed = weakref.finalize(self._mem, _free, self.ptr)
            else:
                self._freed = weakref.finalize(self, _free, self.ptr)

    @property
    def closed(self):
        return self.ptr is None

    def numpy(self, dtype="uint8", count=None):
        """A NumPy view of the memory as `count` elements of dtype (default:
        as many as fit). Host memory only."""
        import numpy
        if self.ptr is None:
            raise InvalidUsageError("MemBuffer.numpy", 5, "the buffer is closed")
        if self.device is not None:
            raise InvalidUsageError("MemBuffer.numpy", 5, "the buffer is device memory (CUDA device "
                                    "%d); NumPy sees host memory only" % self.device)
        dt = numpy.dtype(dtype)
        fit = self.nbytes // dt.itemsize
        count = fit if count is None else int(count)
        if not 0 <= count <= fit:
            raise InvalidArgumentError("MemBuffer.numpy", 4, "%d elements of %s need %d bytes; the "
                                       "buffer has %d" % (count, dt, count * dt.itemsize, self.nbytes))
        if self._mem is None:  # size 0
            return numpy.empty(0, dt)
        return numpy.frombuffer(self._mem, dtype=dt, count=count)

    def close(self):
        """Frees the memory now, or, while NumPy views of it are alive, when the
        last of them goes."""
        if self.ptr is None:
            return
        self.ptr = None
        self._mem = None  # the views, if any, keep the array and so the memory
        if self.device is not None:
            self._freed()  # no views of device memory

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        where = "host" if self.device is None else "CUDA device %d" % self.device
        state = "closed" if self.ptr is None else "0x%x" % self.ptr
        return "<rcoll.MemBuffer %d bytes, %s, %s>" % (self.nbytes, where, state)


def mem_alloc(nbytes):
    """rcollMemAlloc(nbytes) as a MemBuffer (see there)."""
    return MemBuffer(nbytes)
