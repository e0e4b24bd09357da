"""Finds and loads librcoll.so, and declares the C prototypes once.

Search order, first hit wins:
  1. $RCOLL_LIBRARY (a path; an error if it does not load)
  2. next to the package: rcoll/librcoll.so (a wheel that bundles it)
  3. the build tree this package sits in: <tree>/lib/librcoll.so
  4. the system loader: librcoll.so.0, then librcoll.so (LD_LIBRARY_PATH, ldconfig)
`rcoll.library_path` and `rcoll.library_source` tell which one was loaded.
"""
import ctypes
import os
import sys

from . import _abi

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("RCOLL_LIBRARY")
    if env:
        yield env, "RCOLL_LIBRARY", True
        return
    yield os.path.join(_HERE, "librcoll.so"), "package", False
    tree = os.path.dirname(os.path.dirname(_HERE))
    if os.path.exists(os.path.join(tree, "include", "rcoll.h")):  # python/rcoll in a source tree
        yield os.path.join(tree, "lib", "librcoll.so"), "build tree", False
    for name in ("librcoll.so.0", "librcoll.so"):
        yield name, "system loader", True


def _load():
    tried = []
    for path, source, must_try in _candidates():
        if not must_try and not os.path.exists(path):
            tried.append("%s (%s): not there" % (path, source))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            if source == "RCOLL_LIBRARY":
                raise ImportError("rcoll: RCOLL_LIBRARY=%s does not load: %s" % (path, e)) from None
            tried.append("%s (%s): %s" % (path, source, e))
            continue
        return lib, _path_of(lib, path), source
    raise ImportError("rcoll: librcoll.so not found; set RCOLL_LIBRARY to its path, or build it "
                      "with `make` in the source tree. Tried:\n  " + "\n  ".join(tried))


def _path_of(lib, fallback):
    """The file the loader really mapped (dladdr on one of its symbols)."""
    try:
        class DlInfo(ctypes.Structure):
            _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                        ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
        libdl = ctypes.CDLL(None)
        info = DlInfo()
        addr = ctypes.cast(lib.rcollGetVersion, ctypes.c_void_p)
        if libdl.dladdr(addr, ctypes.byref(info)) and info.fname:
            return os.path.realpath(info.fname.decode())
    except (AttributeError, OSError):
        pass
    return fallback


lib, library_path, library_source = _load()
if os.environ.get("RCOLL_DEBUG", os.environ.get("NCCL_DEBUG", "")).upper() in ("INFO", "TRACE"):
    sys.stderr.write("rcoll: loaded %s (from %s)\n" % (library_path, library_source))

R = ctypes.c_int          # rcollResult_t
COMM = ctypes.c_void_p    # rcollComm_t
P = ctypes.c_void_p
SZ = ctypes.c_size_t
I = ctypes.c_int
CFG = ctypes.POINTER(_abi.ConfigStruct)

_PROTOS = {
    "rcollGetVersion": (R, [ctypes.POINTER(I)]),
    "rcollGetErrorString": (ctypes.c_char_p, [R]),
    "rcollGetLastError": (ctypes.c_char_p, [COMM]),
    "rcollGetUniqueId": (R, [ctypes.POINTER(_abi.UniqueIdStruct)]),
    "rcollCommInitRankConfig": (R, [ctypes.POINTER(COMM), I, _abi.UniqueIdStruct, I, CFG]),
    "rcollCommInitRankScalable": (R, [ctypes.POINTER(COMM), I, I, I, ctypes.POINTER(_abi.UniqueIdStruct),
                                      CFG]),
    "rcollCommInitFromEnv": (R, [ctypes.POINTER(COMM), CFG]),
    "rcollCommSplit": (R, [COMM, I, I, ctypes.POINTER(COMM), CFG]),
    "rcollCommShrink": (R, [COMM, ctypes.POINTER(I), I, ctypes.POINTER(COMM), CFG, I]),
    "rcollCommRevoke": (R, [COMM, I]),
    "rcollCommFinalize": (R, [COMM]),
    "rcollCommDestroy": (R, [COMM]),
    "rcollCommAbort": (R, [COMM]),
    "rcollCommGetAsyncError": (R, [COMM, ctypes.POINTER(R)]),
    "rcollCommCount": (R, [COMM, ctypes.POINTER(I)]),
    "rcollCommUserRank": (R, [COMM, ctypes.POINTER(I)]),
    "rcollCommCuDevice": (R, [COMM, ctypes.POINTER(I)]),
    "rcollAllReduce": (R, [P, P, SZ, I, I, COMM, P]),
    "rcollBroadcast": (R, [P, P, SZ, I, I, COMM, P]),
    "rcollReduce": (R, [P, P, SZ, I, I, I, COMM, P]),
    "rcollAllGather": (R, [P, P, SZ, I, COMM, P]),
    "rcollReduceScatter": (R, [P, P, SZ, I, I, COMM, P]),
    "rcollAlltoAll": (R, [P, P, SZ, I, COMM, P]),
    "rcollGather": (R, [P, P, SZ, I, I, COMM, P]),
    "rcollScatter": (R, [P, P, SZ, I, I, COMM, P]),
    "rcollSend": (R, [P, SZ, I, I, COMM, P]),
    "rcollRecv": (R, [P, SZ, I, I, COMM, P]),
    "rcollRedOpCreatePreMulSum": (R, [ctypes.POINTER(I), P, I, I, COMM]),
    "rcollRedOpDestroy": (R, [I, COMM]),
    "rcollCommRegister": (R, [COMM, P, SZ, ctypes.POINTER(P)]),
    "rcollCommDeregister": (R, [COMM, P]),
    "rcollMemAlloc": (R, [ctypes.POINTER(P), SZ]),
    "rcollMemFree": (R, [P]),
    "rcollCommPeerTransport": (R, [COMM, I, ctypes.POINTER(I), ctypes.c_char_p, SZ]),
    "rcollCommAlgorithm": (R, [COMM, ctypes.c_char_p, SZ, ctypes.c_char_p, SZ, ctypes.POINTER(SZ)]),
    "rcollGroupStart": (R, []),
    "rcollGroupEnd": (R, []),
    "rcollGroupSimulateEnd": (R, [ctypes.POINTER(_abi.SimInfoStruct)]),
}

for _name, (_res, _args) in _PROTOS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise ImportError("rcoll: %s (%s) lacks %s; it is older than this binding (%d.%d.%d)"
                          % (library_path, library_source, _name, *_abi.VERSION)) from None
    _f.restype = _res
    _f.argtypes = _args


def library_version():
    """(major, minor, patch) of the loaded library, from rcollGetVersion."""
    v = I()
    lib.rcollGetVersion(ctypes.byref(v))
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)


if library_version()[0] != _abi.VERSION[0]:
    raise ImportError("rcoll: %s is version %d.%d.%d; this binding speaks %d.x"
                      % ((library_path,) + library_version() + (_abi.VERSION[0],)))
