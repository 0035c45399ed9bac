"""flashtrie.errors - the exceptions of the Python client.

Every failure the C client library reports is raised as a subclass of
:class:`Error` carrying the library's ``ft_err`` code (``code``), its name
(``name``, e.g. ``"FT_EREQUEST"``) and the message (``message``): the
server's own message when the server answered with an error.  Faults the
client finds in its arguments before anything is sent are ordinary
``TypeError``/``ValueError`` exceptions, as Python code expects.
"""
from __future__ import annotations

import builtins

# The stable ft_err enum of include/flashtrie.h.  It only grows, so the
# numbers here never change meaning.
FT_OK = 0
FT_ENOMEM = 1
FT_EINVAL = 2
FT_EIO = 3
FT_EPARSE = 4
FT_EFORMAT = 5
FT_ECHECKSUM = 6
FT_EVERSION = 7
FT_ETRUNC = 8
FT_ELIMIT = 9
FT_ENOTFOUND = 10
FT_EREQUEST = 11
FT_ENODEV = 12
FT_ECUDA = 13
FT_ENCCL = 14
FT_ENOTSUP = 15
FT_EBUSY = 16
FT_EINTERNAL = 17
FT_ESTATE = 18
FT_EPROTO = 19
FT_EDEADLINE = 20
FT_ETIMEDOUT = 21
FT_ECONN = 22
FT_EPERM = 23
FT_ECONFIG = 24
FT_ESHUTDOWN = 25
FT_EMANIFEST = 26

# CODES maps each ft_err value to its name.
CODES = {v: k for k, v in list(globals().items()) if k.startswith("FT_")}


class Error(Exception):
    """Error is the base of every error the server or the C library reports.

    ``code`` is the ``ft_err`` value, ``name`` its enum name and
    ``message`` the text that came with it ("<field>: <reason>" for a
    rejected request).  ``index`` is the request's place in a batch when
    the error belongs to one request of it, else None.
    """

    def __init__(self, code: int, message: str, index: int | None = None):
        self.code = code
        self.name = CODES.get(code, "FT_E%d" % code)
        self.message = message
        self.index = index
        # args[0] is the readable text, so that str() and tracebacks show
        # it whatever other base class (OSError) shares the instance.
        Exception.__init__(self, self._text())

    def _text(self) -> str:
        where = "" if self.index is None else "request %d: " % self.index
        return "%s%s (%s)" % (where, self.message, self.name)

    def __str__(self) -> str:
        return self._text()

    def __reduce__(self):
        return (type(self), (self.code, self.message, self.index))


class RequestError(Error):
    """The server rejected a request (FT_EREQUEST): a rule of
    docs/specification.md section 3 or a server cap was broken; the message
    names the field."""


class BusyError(Error):
    """The server's queue was full (FT_EBUSY); retrying later may succeed."""


class DeadlineError(Error):
    """The request's deadline passed before it could run (FT_EDEADLINE)."""


class TimeoutError(Error, builtins.TimeoutError):
    """No answer came within the client's timeout (FT_ETIMEDOUT)."""


class ConnectionError(Error, builtins.ConnectionError):
    """The server could not be reached or the connection broke (FT_ECONN)."""


class ProtocolError(Error):
    """A frame was malformed, on either side (FT_EPROTO)."""


class ShutdownError(Error):
    """The server is draining and takes no new work (FT_ESHUTDOWN)."""


class PermissionError(Error, builtins.PermissionError):
    """The operation is not allowed on this listener (FT_EPERM)."""


class LimitError(Error):
    """A size limit of the wire format or the library was exceeded
    (FT_ELIMIT)."""


class StateError(Error):
    """The client is closed (FT_ESTATE)."""


_BY_CODE = {
    FT_EREQUEST: RequestError,
    FT_EBUSY: BusyError,
    FT_EDEADLINE: DeadlineError,
    FT_ETIMEDOUT: TimeoutError,
    FT_ECONN: ConnectionError,
    FT_EPROTO: ProtocolError,
    FT_ESHUTDOWN: ShutdownError,
    FT_EPERM: PermissionError,
    FT_ELIMIT: LimitError,
    FT_ESTATE: StateError,
}


def error_for(code: int, message: str, index: int | None = None) -> Error:
    """error_for returns the exception of the class that code maps to
    (Error itself for the codes without a class of their own)."""
    return _BY_CODE.get(code, Error)(code, message, index)
