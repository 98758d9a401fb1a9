"""Uncaught Python exceptions: a report of kind "exception" (the exception's
type, message, traceback and text, and every thread's native and Python
stacks), through the library's live-dump capture. sys.excepthook and
threading.excepthook are chained: the previous hook runs first and prints
as before, then the report is written; the exit status is Python's own.
KeyboardInterrupt and SystemExit leave no report. FAULTLINE_EXCEPTION_REPORTS=0
turns it off. Nothing here is public."""
import ctypes
import os
import sys
import threading

_SKIP = (KeyboardInterrupt, SystemExit)
_lock = threading.Lock()
_last = None  # the exception last reported: a hook chained twice reports it once


def enabled():
    return os.environ.get("FAULTLINE_EXCEPTION_REPORTS", "1") != "0"


def _name(exc_type):
    module = getattr(exc_type, "__module__", None)
    qualname = getattr(exc_type, "__qualname__", None) or getattr(exc_type, "__name__", "?")
    return qualname if module in (None, "builtins", "__main__") else f"{module}.{qualname}"


def _field(text):
    # One line, one field of the library's "file<TAB>line<TAB>function" lines.
    return str(text).replace("\t", " ").replace("\n", " ").replace("\r", " ")


def _encode(text):
    return text.encode("utf-8", "backslashreplace").replace(b"\0", b"\\x00")


def report(lib, exc_type, exc, tb):
    """Writes the report of this exception (None when there is none to write)."""
    global _last
    if lib is None or exc_type is None or issubclass(exc_type, _SKIP) or not enabled():
        return
    if exc is not None and exc is _last:
        return
    _last = exc
    import traceback
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ still leaves a report
        message = "<exception str() failed>"
    frames = "".join(f"{_field(f.filename)}\t{f.lineno or 0}\t{_field(f.name)}\n"
                     for f in traceback.extract_tb(tb))
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    fn = lib.faultline_exception_report
    fn.argtypes = [ctypes.c_char_p] * 4
    fn.restype = ctypes.c_int
    with _lock:  # one at a time: the library keeps one exception
        fn(_encode(_name(exc_type)), _encode(message), _encode(frames), _encode(text))


def _library():
    faultline = sys.modules.get("faultline")
    lib = getattr(faultline, "_lib", None)
    if lib is None or not hasattr(lib, "faultline_exception_report"):
        return None
    return lib if lib.faultline_installed() else None


def _chain_sys(previous):
    def hook(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
        finally:
            report(_library(), exc_type, exc, tb)
    hook._faultline_hook = True
    return hook


def _chain_threading(previous):
    def hook(args):
        try:
            previous(args)
        finally:
            report(_library(), args.exc_type, args.exc_value, args.exc_traceback)
    hook._faultline_hook = True
    return hook


def install():
    """Chains faultline's hooks in front of sys.excepthook and
    threading.excepthook (once: hooks already chained are left alone)."""
    if not enabled():
        return
    if not getattr(sys.excepthook, "_faultline_hook", False):
        sys.excepthook = _chain_sys(sys.excepthook)
    if not getattr(threading.excepthook, "_faultline_hook", False):
        threading.excepthook = _chain_threading(threading.excepthook)
