"""flashtrie - the Python client of the FlashTrie daemon ("flashtrie serve").

    import flashtrie, numpy as np
    with flashtrie.Client("ipc:///run/ft.sock") as c:
        hits = c.search(np.array([[1, 7], [2, 5]]), np.array([[-0.5, -1], [-0.25, -0.5]]), beam=4)

It runs over the C client library (libflashtrie_client) through ctypes: the
environment variable FLASHTRIE_CLIENT_LIB names the library file; else a
copy next to this package, else the system's search path, is loaded.
"""
from .client import (MAX_BATCH, MAX_K, MAX_T, TLS, BatchResult, Client, Hit,
                     hit_dtype, parse_info)
from .errors import (CODES, BusyError, ConnectionError, DeadlineError, Error,
                     LimitError, PermissionError, ProtocolError, RequestError,
                     ShutdownError, StateError, TimeoutError, error_for)

# The autoregressive step API (libflashtrie itself, loaded on first use):
# flashtrie.ar (Index, Session), flashtrie.hf (TrieLogitsProcessor for
# transformers), flashtrie.vllm and flashtrie.sglang (serving adapters).
from . import ar  # noqa: E402  (imports no library until used)

__version__ = "0.1.0"

__all__ = [
    "Client", "Hit", "BatchResult", "TLS", "hit_dtype", "parse_info", "MAX_T", "MAX_K",
    "MAX_BATCH", "CODES", "Error", "RequestError", "BusyError",
    "DeadlineError", "TimeoutError", "ConnectionError", "ProtocolError",
    "ShutdownError", "PermissionError", "LimitError", "StateError",
    "error_for", "ar",
]
