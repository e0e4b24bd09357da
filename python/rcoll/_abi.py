"""The C ABI of include/rcoll.h, as Python values.

These are copied from the header on purpose (the package must work where only
librcoll.so is installed, without the header); tests/python/test_header.py
parses include/rcoll.h and fails when any value here disagrees with it.
"""
import ctypes

# RCOLL_MAJOR, RCOLL_MINOR, RCOLL_PATCH: the version this binding was written for.
VERSION = (0, 1, 0)
VERSION_CODE = VERSION[0] * 10000 + VERSION[1] * 100 + VERSION[2]

# rcollResult_t (RCOLL_RESULT_MAP)
RESULTS = {
    "rcollSuccess": 0,
    "rcollUnhandledCudaError": 1,
    "rcollSystemError": 2,
    "rcollInternalError": 3,
    "rcollInvalidArgument": 4,
    "rcollInvalidUsage": 5,
    "rcollRemoteError": 6,
    "rcollInProgress": 7,
    "rcollTimeout": 8,
}
NUM_RESULTS = 9

# rcollDataType_t (the canonical names; the header's aliases are checked too)
DATATYPES = {
    "rcollInt8": 0,
    "rcollUint8": 1,
    "rcollInt32": 2,
    "rcollUint32": 3,
    "rcollInt64": 4,
    "rcollUint64": 5,
    "rcollFloat16": 6,
    "rcollFloat32": 7,
    "rcollFloat64": 8,
    "rcollBfloat16": 9,
    "rcollFloat8e4m3": 10,
    "rcollFloat8e5m2": 11,
}
DATATYPE_ALIASES = {
    "rcollChar": 0, "rcollInt": 2, "rcollHalf": 6, "rcollFloat": 7, "rcollDouble": 8,
}
NUM_TYPES = 12

# rcollRedOp_t
REDOPS = {
    "rcollSum": 0,
    "rcollProd": 1,
    "rcollMax": 2,
    "rcollMin": 3,
    "rcollAvg": 4,
}
NUM_OPS = 5
MAX_REDOP = 0x7FFFFFFF  # rcollMaxRedOp: ops made on a communicator lie below it

# rcollScalarResidence_t (where rcollRedOpCreatePreMulSum's scalar lives)
SCALAR_RESIDENCES = {
    "rcollScalarDevice": 0,
    "rcollScalarHostImmediate": 1,
}

UNIQUE_ID_BYTES = 128  # RCOLL_UNIQUE_ID_BYTES
SPLIT_NOCOLOR = -1     # RCOLL_SPLIT_NOCOLOR
SHRINK_DEFAULT = 0     # RCOLL_SHRINK_DEFAULT
SHRINK_ABORT = 1       # RCOLL_SHRINK_ABORT
REVOKE_DEFAULT = 0     # RCOLL_REVOKE_DEFAULT
CONFIG_MAGIC = 0x72636F6C  # RCOLL_CONFIG_MAGIC
CONFIG_UNDEF_INT = -2**31  # RCOLL_CONFIG_UNDEF_INT (INT_MIN)
SIM_INFO_MAGIC = 0x7273696D  # RCOLL_SIM_INFO_MAGIC
UNDEF_FLOAT = -1.0           # RCOLL_UNDEF_FLOAT


class UniqueIdStruct(ctypes.Structure):
    # A byte array, not c_char: c_char arrays read back as bytes cut at the first NUL.
    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    """rcollConfig_t; fields in the header's order."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("timeoutMs", ctypes.c_int),
        ("netName", ctypes.c_char_p),
        ("splitShare", ctypes.c_int),
        ("commName", ctypes.c_char_p),
    ]

    @classmethod
    def make(cls, timeout_ms=0, net=None):
        """The equivalent of RCOLL_CONFIG_INITIALIZER, with the two options Python exposes."""
        c = cls()
        c.size = ctypes.sizeof(cls)
        c.magic = CONFIG_MAGIC
        c.version = VERSION_CODE
        c.blocking = 1
        c.timeoutMs = int(timeout_ms)
        c.netName = net.encode() if net else None
        c.splitShare = CONFIG_UNDEF_INT
        c.commName = None
        return c


class SimInfoStruct(ctypes.Structure):
    """rcollSimInfo_t; fields in the header's order."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("estimatedTime", ctypes.c_float),
    ]

    @classmethod
    def make(cls):
        """The equivalent of RCOLL_SIM_INFO_INITIALIZER."""
        return cls(ctypes.sizeof(cls), SIM_INFO_MAGIC, VERSION_CODE, UNDEF_FLOAT)
