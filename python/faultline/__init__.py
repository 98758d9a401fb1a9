"""faultline from Python: crash keys, breadcrumbs and PyTorch compile history.

Talks through ctypes to libfaultline.so when the process already has it
(preloaded with LD_PRELOAD, or linked into the interpreter's host program).
When it does not, every function here does nothing and returns quietly: a
training script can import faultline unconditionally.

    import faultline
    faultline.annotate("run_id", "exp-42")        # in every crash report
    faultline.thread_annotate("batch", "1337")    # in the crashing thread's report
    faultline.breadcrumb("epoch 3 started")       # last 64, with times

Importing it with PyTorch 2.x present also records each Dynamo compilation
(function, file:line, compile id, how often that function was compiled and
the recompile reason when Dynamo gives one) as a breadcrumb, and torch, CUDA
and Triton versions as annotations, so a crash report shows what
torch.compile was doing just before the crash. FAULTLINE_TORCH_HOOKS=0 turns
that off.
"""
import ctypes
import os
import sys

__all__ = ["annotate", "thread_annotate", "breadcrumb", "available", "load", "version"]

# Limits of the C API (faultline.h): longer strings are cut there; cutting here
# first keeps a multi-byte character whole.
_KEY_BYTES = 63
_VALUE_BYTES = 511
_THREAD_VALUE_BYTES = 255
_BREADCRUMB_BYTES = 255

_lib = None


def _bind(lib):
    """Returns lib if it exports faultline's C API (with argtypes set), else None."""
    try:
        for name in ("faultline_annotate", "faultline_thread_annotate"):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            fn.restype = ctypes.c_int
        lib.faultline_breadcrumb.argtypes = [ctypes.c_char_p]
        lib.faultline_breadcrumb.restype = None
        lib.faultline_version.argtypes = []
        lib.faultline_version.restype = ctypes.c_char_p
    except AttributeError:
        return None
    return lib


def _find_loaded():
    """The library if this process already has it: the global namespace
    (preload, or linked), else FAULTLINE_LIB if that file is already loaded.
    Never loads it: loading would install crash handlers behind the
    application's back."""
    try:
        lib = _bind(ctypes.CDLL(None))
        if lib is not None:
            return lib
    except OSError:
        pass
    path = os.environ.get("FAULTLINE_LIB")
    if path and hasattr(os, "RTLD_NOLOAD"):
        try:
            return _bind(ctypes.CDLL(path, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL))
        except OSError:
            return None
    return None


load_error = None


def load(path=None):
    """Tries to load libfaultline.so (path, or FAULTLINE_LIB) into this
    running process and install its crash handlers. Returns True on success.

    Preloading (LD_PRELOAD) or linking is the supported way: the library and
    libunwind use initial-exec thread-local storage, which the dynamic
    loader can usually not provide to a library loaded this late ("cannot
    allocate memory in static TLS block"). On failure the loader's message is
    kept in faultline.load_error."""
    global _lib, load_error
    if _lib is not None:
        return True
    path = path or os.environ.get("FAULTLINE_LIB")
    if not path:
        load_error = "no path given and FAULTLINE_LIB is not set"
        return False
    try:
        lib = _bind(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
    except OSError as e:
        load_error = str(e)
        return False
    if lib is None:
        load_error = f"{path} does not export the faultline API"
        return False
    lib.faultline_install.argtypes = [ctypes.c_void_p]
    rc = lib.faultline_install(None)
    if rc != 0:
        load_error = f"faultline_install failed: {os.strerror(-rc)}"
        return False
    _lib = lib
    return True


def available():
    """True when crash reports will include what this module records."""
    return _lib is not None


def version():
    """The library's version, or None when it is not loaded."""
    if _lib is None:
        return None
    return _lib.faultline_version().decode()


def _bytes(text, limit):
    if not isinstance(text, (bytes, bytearray)):
        text = str(text).encode("utf-8", "replace")
    text = bytes(text)
    if len(text) <= limit:
        return text
    # Cut at a character boundary.
    cut = text[:limit]
    return cut.decode("utf-8", "ignore").encode("utf-8")


def annotate(key, value):
    """Sets a process-wide crash key (value None removes it). Returns 0, or a
    negative errno (-ENOSPC: 64 keys already set); 0 also when the library is
    not loaded."""
    if _lib is None:
        return 0
    v = None if value is None else _bytes(value, _VALUE_BYTES)
    return _lib.faultline_annotate(_bytes(key, _KEY_BYTES), v)


def thread_annotate(key, value):
    """Sets a crash key of the calling thread (shown when this thread crashes)."""
    if _lib is None:
        return 0
    v = None if value is None else _bytes(value, _THREAD_VALUE_BYTES)
    return _lib.faultline_thread_annotate(_bytes(key, _KEY_BYTES), v)


def breadcrumb(message):
    """Appends a message to the ring of the last 64 (shown with its time)."""
    if _lib is not None:
        _lib.faultline_breadcrumb(_bytes(message, _BREADCRUMB_BYTES))


_lib = _find_loaded()

if os.environ.get("FAULTLINE_TORCH_HOOKS", "1") != "0":
    from . import _torch  # noqa: E402

    _torch.install(sys.modules[__name__])
