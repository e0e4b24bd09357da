"""rcoll.Error and one subclass per rcollResult_t, each carrying the result code
and rcoll's last-error text (which names the peer when one is at fault)."""
import builtins

from . import _abi
from ._lib import lib


class Error(RuntimeError):
    """A failed rcoll call. `code` is the rcollResult_t value, `result` its name,
    `detail` rcoll's last-error text (rcollGetLastError), `call` what Python called."""
    code = -1

    def __init__(self, call, code, detail):
        self.call, self.code, self.detail = call, code, detail
        self.result = _NAMES.get(code, "result %d" % code)
        msg = lib.rcollGetErrorString(code)
        summary = msg.decode(errors="replace") if msg else self.result
        text = "%s failed: %s (%s)" % (call, summary, self.result)
        if detail:
            text += ": " + detail
        super().__init__(text)


class UnhandledCudaError(Error):
    code = 1


class SystemCallError(Error):
    code = 2


class InternalError(Error):
    code = 3


class InvalidArgumentError(Error, ValueError):
    code = 4


class InvalidUsageError(Error):
    code = 5


class RemoteError(Error):
    """A peer failed or disconnected; the text names it."""
    code = 6


class InProgressError(Error):
    code = 7


class TimeoutError(Error, builtins.TimeoutError):
    """A wait for a peer outlasted RCOLL_TIMEOUT; the text names the peer."""
    code = 8


_NAMES = {v: k for k, v in _abi.RESULTS.items()}
_BY_CODE = {c.code: c for c in (UnhandledCudaError, SystemCallError, InternalError,
                                 InvalidArgumentError, InvalidUsageError, RemoteError,
                                 InProgressError, TimeoutError)}


def last_error(comm_handle=None):
    """rcoll's last-error text for this thread (or for the communicator handle)."""
    t = lib.rcollGetLastError(comm_handle)
    return t.decode(errors="replace") if t else ""


def check(call, result, comm_handle=None):
    """Raises the Error subclass for a non-success result of `call`."""
    if result == 0:
        return
    detail = last_error(None) or (last_error(comm_handle) if comm_handle else "")
    raise _BY_CODE.get(result, Error)(call, result, detail)
