"""rcoll from Python: collectives on NumPy arrays and torch tensors over
librcoll.so (ctypes; no compiler needed). `import rcoll.torch` registers the
torch.distributed backend "rcoll". See docs/python.md."""
from . import _abi
from ._lib import library_path, library_source, library_version
from ._mem import MemBuffer, mem_alloc
from .comm import (AVG, MAX, MIN, PROD, SUM, Algorithm, Communicator, PeerTransport, PreMulSum,
                   Simulation, UniqueId, get_unique_id, group)
from .errors import (Error, InProgressError, InternalError, InvalidArgumentError,
                     InvalidUsageError, RemoteError, SystemCallError, TimeoutError,
                     UnhandledCudaError)

__version__ = "%d.%d.%d" % _abi.VERSION
UNIQUE_ID_BYTES = _abi.UNIQUE_ID_BYTES

__all__ = ["Communicator", "UniqueId", "get_unique_id", "group", "SUM", "PROD", "MAX", "MIN",
           "AVG", "PreMulSum", "Simulation", "Algorithm", "PeerTransport", "MemBuffer", "mem_alloc",
           "Error", "InProgressError", "InternalError", "InvalidArgumentError",
           "InvalidUsageError", "RemoteError", "SystemCallError", "TimeoutError",
           "UnhandledCudaError", "library_path", "library_source", "library_version",
           "UNIQUE_ID_BYTES"]
