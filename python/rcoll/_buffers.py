"""What rcoll needs from an array: address, element count, rcoll type, and the
stream for CUDA memory. NumPy arrays, torch tensors, and anything with the
buffer protocol (bytearray, memoryview) are understood."""
import sys

from . import _abi
from ._mem import MemBuffer
from .errors import InvalidArgumentError

DT = _abi.DATATYPES

# NumPy dtype names and torch dtype names (str(torch.float32) is "torch.float32").
_BY_NAME = {
    "int8": DT["rcollInt8"], "uint8": DT["rcollUint8"], "int32": DT["rcollInt32"],
    "uint32": DT["rcollUint32"], "int64": DT["rcollInt64"], "uint64": DT["rcollUint64"],
    "float16": DT["rcollFloat16"], "float32": DT["rcollFloat32"], "float64": DT["rcollFloat64"],
    "bfloat16": DT["rcollBfloat16"],
    # torch's and ml_dtypes' names for NVIDIA's e4m3 (finite, "fn") and e5m2
    "float8_e4m3fn": DT["rcollFloat8e4m3"], "float8_e5m2": DT["rcollFloat8e5m2"],
}
_TYPE_NAMES = {v: k for k, v in _BY_NAME.items()}
_MEMVIEW_FORMATS = {"b": "int8", "B": "uint8", "c": "uint8", "i": "int32", "I": "uint32",
                    "l": "int64", "L": "uint64", "q": "int64", "Q": "uint64",
                    "e": "float16", "f": "float32", "d": "float64"}


class Buf:
    """One buffer as the C call sees it."""
    __slots__ = ("ptr", "count", "dtype", "nbytes", "cuda_device", "obj")

    def __init__(self, ptr, count, dtype, nbytes, cuda_device, obj):
        self.ptr, self.count, self.dtype, self.nbytes = ptr, count, dtype, nbytes
        self.cuda_device, self.obj = cuda_device, obj


def _fail(what, name, why):
    raise InvalidArgumentError(what, 4, "%s: %s" % (name, why))


def type_name(dtype):
    return _TYPE_NAMES.get(dtype, str(dtype))


def dtype_code(dtype, what):
    """The rcollDataType_t of a dtype given as a name ("float32"), a NumPy
    dtype or type, or a torch dtype."""
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        if isinstance(dtype, type) and hasattr(dtype, "__module__") and dtype.__module__ == "numpy":
            import numpy
            name = numpy.dtype(dtype).name
        else:
            name = str(dtype).replace("torch.", "")
    if name not in _BY_NAME:
        _fail(what, "dtype", "%r is not an rcoll type (rcoll has %s)" % (dtype, ", ".join(_BY_NAME)))
    return _BY_NAME[name]


def as_buf(x, what, name, writable=False):
    """Buf for x, or InvalidArgumentError naming the argument and what is wrong."""
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, MemBuffer):  # its bytes, as uint8
        if x.ptr is None:
            _fail(what, name, "the rcoll.MemBuffer is closed")
        if x.device is None:
            return _numpy_buf(x.numpy(), what, name, writable, obj=x)
        return Buf(x.ptr, x.nbytes, DT["rcollUint8"], x.nbytes, x.device, x)
    if mod == "torch":
        return _torch_buf(x, what, name)
    if mod == "numpy":
        return _numpy_buf(x, what, name, writable)
    if hasattr(x, "__cuda_array_interface__"):
        return _cai_buf(x, what, name)
    try:
        mv = memoryview(x)
    except TypeError:
        _fail(what, name, "a %s is not an array (NumPy, torch, or a buffer)" % type(x).__name__)
    import numpy
    return _numpy_buf(numpy.asarray(mv) if mv.format in _MEMVIEW_FORMATS else
                      numpy.frombuffer(mv, dtype="uint8"), what, name, writable, obj=x)


def _numpy_buf(a, what, name, writable, obj=None):
    dt = _BY_NAME.get(a.dtype.name)
    if dt is None:
        _fail(what, name, "NumPy dtype %s has no rcoll type (rcoll has %s)"
              % (a.dtype, ", ".join(_BY_NAME)))
    if not a.flags.c_contiguous:
        _fail(what, name, "the array is not contiguous (use numpy.ascontiguousarray)")
    if writable and not a.flags.writeable:
        _fail(what, name, "the array is read-only but rcoll writes into it")
    return Buf(a.ctypes.data, a.size, dt, a.nbytes, None, obj if obj is not None else a)


def _torch_buf(t, what, name):
    import torch
    if t.dtype == torch.bool:
        dt = DT["rcollUint8"]
    else:
        dt = _BY_NAME.get(str(t.dtype).replace("torch.", ""))
    if dt is None:
        _fail(what, name, "torch dtype %s has no rcoll type" % t.dtype)
    if not t.is_contiguous():
        _fail(what, name, "the tensor is not contiguous (call .contiguous())")
    if t.is_sparse:
        _fail(what, name, "sparse tensors are not supported")
    dev = None
    if t.device.type == "cuda":
        dev = t.device.index if t.device.index is not None else torch.cuda.current_device()
    elif t.device.type != "cpu":
        _fail(what, name, "tensors on %s are not supported (cpu and cuda are)" % t.device)
    return Buf(t.data_ptr(), t.numel(), dt, t.numel() * t.element_size(), dev, t)


def _cai_buf(x, what, name):
    import numpy
    cai = x.__cuda_array_interface__
    ty = numpy.dtype(cai["typestr"])
    dt = _BY_NAME.get(ty.name)
    if dt is None:
        _fail(what, name, "dtype %s has no rcoll type" % ty)
    if cai.get("strides") not in (None,):
        _fail(what, name, "the device array is not contiguous")
    count = 1
    for s in cai["shape"]:
        count *= s
    return Buf(cai["data"][0], count, dt, count * ty.itemsize, -1, x)


def stream_of(bufs, stream):
    """The stream argument: None for host memory; for CUDA memory the given
    stream (an int handle or an object with .cuda_stream or .ptr), else
    torch's current stream on that device. UNVERIFIED: written without a GPU."""
    dev = next((b for b in bufs if b is not None and b.cuda_device is not None), None)
    if dev is None:
        return None
    if stream is None:
        if dev.cuda_device >= 0 and "torch" in sys.modules:
            import torch
            return torch.cuda.current_stream(dev.cuda_device).cuda_stream or None
        return None  # the legacy default stream
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr)) or None
    return int(stream) or None
