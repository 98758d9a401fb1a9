"""faultline from Python: crash reports, faulthandler's API, crash keys,
breadcrumbs and PyTorch compile history.

    import faultline
    faultline.enable()                            # like faulthandler.enable()
    faultline.annotate("run_id", "exp-42")        # in every crash report
    faultline.thread_annotate("batch", "1337")    # in the crashing thread's report
    faultline.breadcrumb("epoch 3 started")       # last 64, with times

enable() loads libfaultline.so into the running interpreter (the copy in
the installed package, FAULTLINE_LIB, or the one already preloaded) and
installs its crash handlers behind faulthandler's: a fatal signal then
writes faulthandler's own text (byte for byte the running interpreter's) to
stderr, a JSON report to the report directory (FAULTLINE_DIR, else the
current directory), and after the text faultline's additions (native
frames, the report's path). disable(), is_enabled(), dump_traceback(),
dump_traceback_later(), cancel_dump_traceback_later(), register(),
unregister() and, on 3.14, dump_c_stack() are faulthandler's, with a report
beside the text (see doc/python-package.md for who writes what).

Without enable() the module only talks to a library that the process already
has (preloaded with LD_PRELOAD, or linked into the interpreter's host
program); when there is none, annotate() and friends do nothing and return
quietly, so a training script can import faultline unconditionally.

With PyTorch 2.x, each Dynamo compilation (function, file:line, compile id,
how often that function was compiled and the recompile reason when Dynamo
gives one) is recorded as a breadcrumb, and torch, CUDA and Triton versions
as annotations, once the library is there (preloaded, or after enable()), so
a crash report shows what torch.compile was doing just before the crash.
FAULTLINE_TORCH_HOOKS=0 turns that off.
"""
import ctypes
import errno
import os
import stat
import sys

import faulthandler
import types

# The interpreter's own faulthandler, as it was when faultline was imported
# (faultline writes its text through it; a copy of its functions, so that
# faultline's may be put in its place, as in faulthandler.enable =
# faultline.enable).
_fh = types.SimpleNamespace(**vars(faulthandler))

from . import _native, _text

__all__ = ["annotate", "thread_annotate", "breadcrumb", "available", "load", "version",
           "enable", "disable", "is_enabled", "dump_traceback", "dump_traceback_later",
           "cancel_dump_traceback_later", "register", "unregister", "last_report"]
if sys.version_info >= (3, 14):
    __all__.append("dump_c_stack")

# Limits of the C API (faultline.h, in _native): longer strings are cut there;
# cutting here first keeps a multi-byte character whole.
_KEY_BYTES = _native.KEY_MAX
_VALUE_BYTES = _native.VALUE_MAX
_THREAD_VALUE_BYTES = _native.THREAD_VALUE_MAX
_BREADCRUMB_BYTES = _native.BREADCRUMB_MAX

_lib = None
_late_loaded = False  # _lib was loaded by this module (not preloaded or linked)
_extras = True  # enable(extras=): faultline's additions after the text


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
    """Loads libfaultline.so into this running process and installs its crash
    handlers (the settings come from the FAULTLINE_* variables). path
    defaults to FAULTLINE_LIB, then the copy installed with this package.
    Returns True on success; on failure the reason is kept in
    faultline.load_error. enable() does the same and more, and raises."""
    global load_error
    if _lib is not None and _lib.faultline_installed():
        return True
    if not _load(path):
        return False
    rc = _lib.faultline_install(None)
    if rc != 0:
        load_error = f"faultline_install failed: {os.strerror(-rc)}"
        return False
    _hooks()
    return True


def _load(path=None):
    """Makes _lib the library (already in the process, or loaded from path,
    FAULTLINE_LIB, the bundled copy, a source checkout's build). Returns
    True, or False with load_error set."""
    global _lib, load_error, _late_loaded
    if _lib is not None:
        return True
    path = path or _native.library_path()
    if not path:
        load_error = ("libfaultline.so not found: not in this package, FAULTLINE_LIB is not set, "
                      "and it is not preloaded")
        return False
    try:
        lib = _bind(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
        _late_loaded = True
    except OSError as e:
        load_error = str(e)
        return False
    if lib is None:
        load_error = f"{path} does not export the faultline API"
        return False
    _lib = _native.bind_install(lib)
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
    if b"\0" in text:
        # The library takes C strings: "a\0b" would be the key "a", over
        # another one's value. As os.environ and open() do.
        raise ValueError("embedded null byte")
    if len(text) <= limit:
        return text
    # Cut at a character boundary.
    cut = text[:limit]
    return cut.decode("utf-8", "ignore").encode("utf-8")


def annotate(key, value):
    """Sets a process-wide crash key (value None removes it). Returns 0, or a
    negative errno (-ENOSPC: 64 keys already set); 0 also when the library is
    not loaded. A key or value with a NUL byte raises ValueError."""
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


def last_report():
    """The path of the last report this process wrote, or None."""
    if _lib is None:
        return None
    buf = ctypes.create_string_buffer(4096)
    n = _lib.faultline_last_report(buf, len(buf))
    return os.fsdecode(buf.value) if n else None


# ---- faulthandler's API

_options = None        # the Options last installed (kept: it owns report_dir's bytes)
_report_dir = None
_text_files = {}       # descriptor -> file object, kept alive as faulthandler does
_env_max_threads = 0   # FAULTLINE_MAX_THREADS (0: the library's default)
_env_dump_signal = 0   # FAULTLINE_DUMP / FAULTLINE_DUMP_SIGNAL
_registered = None     # the signal register() gave the library's dump handler
# (Numbers, not the signal module: importing it costs start-up time.)
_FATAL = {11, 8, 6, 7, 4}  # SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL
_SIGKILL, _SIGSTOP, _NSIG = 9, 19, 65
_C_STACK = sys.version_info >= (3, 14)  # faulthandler.enable(c_stack=) and dump_c_stack()
# The process annotation that tells the crash path who writes the text
# (see _sync_text_mode).
TEXT_MODE_KEY = "faultline.faulthandler"


def _text_fd(file):
    """faulthandler's rules for its file argument: None means sys.stderr; an
    int is a descriptor; anything else must have fileno(). Returns the
    descriptor (the stream is flushed first)."""
    if file is None:
        file = sys.stderr
        if file is None:
            raise RuntimeError("sys.stderr is None")
    if isinstance(file, int):
        if file < 0:
            raise ValueError("file is not a valid file descriptor")
        return file
    fd = file.fileno()
    if fd < 0:
        raise ValueError("file is not a valid file descriptor")
    try:
        file.flush()
    except Exception:  # noqa: BLE001 - faulthandler ignores flush errors too
        pass
    _text_files[fd] = file  # kept open while the library may write to fd
    return fd


_text_fd_now = 2  # the descriptor the library writes its text to


def _set_text_fd(fd):
    global _text_fd_now
    setter = getattr(_lib, "faultline_set_text_fd", None)
    if setter is not None:
        setter.argtypes = [ctypes.c_int]
        setter.restype = ctypes.c_int
        rc = setter(fd)
        if rc != 0:
            raise OSError(-rc, os.strerror(-rc))
        _text_fd_now = fd
    elif fd != 2:
        raise ValueError("this libfaultline.so writes its text to stderr only (file must be "
                         "sys.stderr or descriptor 2)")


def _require_lib():
    if not _load():
        raise RuntimeError(f"faultline: cannot load libfaultline.so: {load_error}")


def _install(opts):
    global _options
    rc = _lib.faultline_install(ctypes.byref(opts))
    if rc != 0:
        raise OSError(-rc, f"faultline_install: {os.strerror(-rc)}")
    _options = opts


def _current_options():
    if _options is not None:
        return _options
    global _env_max_threads, _env_dump_signal
    opts = _native.options(_lib)
    _env_max_threads = opts.max_threads
    _env_dump_signal = opts.dump_signal
    return opts


def _hooks():
    from . import _excepthook
    _excepthook.install()
    if os.environ.get("FAULTLINE_TORCH_HOOKS", "1") != "0":
        from . import _torch
        _torch.install(sys.modules[__name__])


def _report_dir_argument(report_dir):
    """enable()'s report_dir as the library takes it (absolute, bytes); a
    directory that is not there raises, as open() would (the library would
    only warn and send reports to stderr)."""
    path = os.fsencode(os.path.abspath(os.fspath(report_dir)))
    if b"\0" in path:
        raise ValueError("report_dir: embedded null byte")
    try:
        st = os.stat(path)
    except OSError as e:  # FileNotFoundError, PermissionError: named as given
        raise type(e)(e.errno, e.strerror, report_dir) from None
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), report_dir)
    return path


def _signal_mask(signals):
    """enable()'s signals as the library's bit mask: numbers,
    signal.Signals members or names, at least one."""
    if isinstance(signals, (str, bytes, int)):
        raise TypeError("signals: an iterable of signals, such as [signal.SIGSEGV, 'SIGBUS']")
    mask = 0
    for s in signals:
        n = _native.signal_number(s)
        if not 0 < n < 64:
            raise ValueError(f"signal number {n} out of range (1 to 63)")
        if n in (_SIGKILL, _SIGSTOP):
            raise ValueError(f"signal {n} cannot be caught")
        mask |= 1 << n
    if not mask:
        raise ValueError("signals: none given (disable() turns faultline's handlers off)")
    return mask


def _sync_text_mode():
    """Tells the library who writes the text (the process annotation
    TEXT_MODE_KEY, which the crash path reads): "on" while faulthandler's
    fatal handler is enabled (it writes the Python traceback; faultline adds
    its native frames and the report's path after it), "off" otherwise
    (faultline writes faulthandler's text itself), "text" when it does
    so without its additions (enable(extras=False)). Any value also keeps
    the library's dumps quiet: their text is faulthandler's."""
    if _lib is not None:
        annotate(TEXT_MODE_KEY, "on" if _fh.is_enabled() else "off" if _extras else "text")


def enable(file=None, all_threads=True, c_stack=True, *, report_dir=None, signals=None,
           minidump=None, extras=True):
    """faulthandler.enable(), and a faultline report: on SIGSEGV, SIGFPE,
    SIGABRT, SIGBUS, SIGILL faulthandler's own text goes to file (default
    sys.stderr), byte for byte the running interpreter's; then faultline
    writes its report and, after the text, its additions (the crashing
    thread's native frames and the report's path; extras=False leaves them
    out). The process then dies as it would have. In a preloaded process
    the library writes faulthandler's text itself (see
    doc/python-package.md).

    c_stack is faulthandler's (3.14+: its C stack after the traceback).
    report_dir: where reports go (default FAULTLINE_DIR, else the current
    directory; one that is not a directory raises FileNotFoundError or
    NotADirectoryError). signals: the signals faultline reports (numbers,
    signal.Signals members or names such as 'SIGSEGV'). minidump: a minidump
    beside each crash report or not (default FAULTLINE_MINIDUMP). A bad
    argument raises before anything is installed. Loads libfaultline.so if
    the process does not have it yet; raises RuntimeError when it cannot be
    loaded."""
    global _report_dir, _extras
    fd = _text_fd(file)
    # The arguments first: a bad one changes nothing.
    directory = _report_dir_argument(report_dir) if report_dir is not None else None
    mask = _signal_mask(signals) if signals is not None else None
    # Who writes the text: the preloaded library, installed in front since
    # start-up, writes faulthandler's text itself (faulthandler's handler
    # enabled now would go in front of it, and its re-raise would hide the
    # fault's own context from the report); otherwise faulthandler's handler,
    # enabled before faultline's is installed: faultline's, in front, calls
    # it first and holds its re-raise until the report is written.
    own_text = (_lib is not None and not _late_loaded and _lib.faultline_installed()
                and not _fh.is_enabled())
    if not own_text:
        if _C_STACK:
            _fh.enable(sys.stderr if file is None else file, all_threads, c_stack)
        else:
            _fh.enable(sys.stderr if file is None else file, all_threads)
    _require_lib()
    _extras = bool(extras)
    opts = _current_options()
    # Without the additions: nothing of faultline's on the text file when
    # faulthandler writes the text, else the text alone ("text").
    opts.write_stderr = 1 if extras or own_text else 0
    opts.max_threads = _env_max_threads if all_threads else 1
    if directory is not None:
        _report_dir = directory
        opts.report_dir = _report_dir
    if mask is not None:
        opts.signals = mask
    if minidump is not None:
        opts.minidump = 1 if minidump else 0
    _set_text_fd(fd)
    _install(opts)
    _hooks()
    _sync_text_mode()


def disable():
    """faulthandler.disable(), and faultline's handlers restored to those
    that were there before (a pending dump_traceback_later is cancelled
    too)."""
    cancel_dump_traceback_later()
    # Last installed, first removed: faultline's handler gives faulthandler's
    # back, which then gives back what was there before.
    if _lib is not None and _lib.faultline_installed():
        _lib.faultline_uninstall()
    _fh.disable()
    _sync_text_mode()


def is_enabled():
    """True when a fatal signal writes faulthandler's text: faulthandler's
    handler is enabled (enable(), PYTHONFAULTHANDLER, -X faulthandler) or
    faultline's is installed (enable(), or the preloaded library, which
    writes the same text itself)."""
    return bool(_fh.is_enabled() or (_lib is not None and _lib.faultline_installed()))


def _write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def dump_traceback(file=None, all_threads=True):
    """faulthandler.dump_traceback(): faulthandler's text of the calling
    thread (all_threads=False) or of every thread, to file; then, when
    faultline's library is installed, a "dump" report of every thread.
    Returns the report's path, or None."""
    fd = _text_fd(file)
    _write_all(fd, _text.traceback(sys._getframe(1), all_threads))
    if not (_lib is not None and _lib.faultline_installed()):
        return None
    _sync_text_mode()
    rc = _lib.faultline_dump_now()
    if rc != 0:
        raise OSError(-rc, f"faultline_dump_now: {os.strerror(-rc)}")
    return last_report()


def _dump_signal():
    """The dump signal: the registered one, else the one the FAULTLINE_*
    variables set (0: none)."""
    return _registered or _env_dump_signal


def _reinstall_dump(signo):
    opts = _current_options()
    opts.dump_signal = signo
    opts.dump_after_seconds = 0  # leaves a timed dump armed as it is
    opts.exit_after_dump = 0
    _install(opts)


def _ensure_installed():
    """The library loaded and installed (for a dump's report); False when it
    cannot be loaded (faulthandler's text is written all the same)."""
    if not _load():
        return False
    if not _lib.faultline_installed():
        opts = _current_options()
        _install(opts)
        _hooks()
    return True


def _tasks():
    """The thread ids of this process."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


# The longest timed dump the library takes (faultline_dump_after's unsigned
# milliseconds: 49.7 days); a longer timeout is faulthandler's alone.
_LATER_MAX_MS = 2**32 - 1


def dump_traceback_later(timeout, repeat=False, file=None, exit=False):
    """faulthandler.dump_traceback_later(): after timeout seconds (and then
    every timeout seconds if repeat) faulthandler writes "Timeout (...)!"
    and the traceback of every thread to file, from its watchdog thread, so
    it fires even while the interpreter is stuck holding the GIL. faultline
    writes one "dump" report, at the first timeout, from the library's own
    watchdog thread, taken as dump_traceback() takes it (by a ptrace
    helper: no thread of the program is interrupted). exit=True ends the
    process with status 1 after the first dump (after faulthandler's text
    and the report, when the library is there). Calling it again replaces
    the previous one."""
    # faulthandler's checks first: a bad argument changes nothing.
    if not float(timeout) > 0:
        raise ValueError("timeout must be greater than 0")
    if float(timeout) > 2**62 / 1e9:
        raise OverflowError("timeout value is too large")
    ms = max(1, round(float(timeout) * 1000))
    have_lib = (_ensure_installed() and hasattr(_lib, "faultline_dump_after_thread")
                and ms <= _LATER_MAX_MS)
    exit = bool(exit)
    # With the library, its watchdog ends the process after its report and
    # once faulthandler's watchdog thread, new with each call, has ended
    # (after its text: without repeat, which exit makes moot, it ends there).
    lib_exit = exit and have_lib
    before = _tasks() if lib_exit else set()
    _fh.dump_traceback_later(timeout, repeat and not lib_exit,
                             sys.stderr if file is None else file, exit and not have_lib)
    if not have_lib:
        _cancel_later()
        return
    new = _tasks() - before if lib_exit else set()
    wait_tid = int(new.pop()) if len(new) == 1 else 0
    # One report, at the first timeout (faulthandler repeats its text).
    rc = _lib.faultline_dump_after_thread(ms, 1 if exit else 0, wait_tid)
    if rc != 0:
        raise OSError(-rc, f"faultline_dump_after: {os.strerror(-rc)}")
    _sync_text_mode()


def _cancel_later():
    if _lib is not None and hasattr(_lib, "faultline_cancel_dump_after"):
        _lib.faultline_cancel_dump_after()


def cancel_dump_traceback_later():
    """faulthandler.cancel_dump_traceback_later(), and faultline's timed
    dump (one being written is waited for)."""
    _fh.cancel_dump_traceback_later()
    _cancel_later()


def register(signum, file=None, all_threads=True, chain=False):
    """faulthandler.register(): signal signum writes faulthandler's text of
    every thread (or of the one that received it) to file, and the process
    goes on. With chain=False faultline's dump handler sits behind
    faulthandler's and writes a "dump" report too; with chain=True the
    handler that was there before is called instead, and there is no
    report (faultline's dump handler does not chain). The library has one
    dump signal: registering another signal moves the report there."""
    global _registered
    signo = _native.signal_number(signum)
    if not 0 < signo < _NSIG:
        raise ValueError("signal number out of range")
    if signo in _FATAL:
        raise RuntimeError(f"signal {signo} cannot be registered, use enable() instead")
    if signo in (_SIGKILL, _SIGSTOP):
        raise OSError(22, "Invalid argument")
    report = not chain and _ensure_installed()
    thread_signal = _current_options().thread_signal if _lib is not None else 0
    if thread_signal > 0 and signo == thread_signal:
        # Taken as a thread's answer to a stack request, never as a dump:
        # registered, it would do nothing at all.
        raise ValueError(
            f"signal {signo} is faultline's thread-stack signal (FAULTLINE_THREAD_SIGNAL) and "
            "cannot be the dump signal; register another signal, or move the thread-stack "
            "signal with FAULTLINE_THREAD_SIGNAL")
    if report:
        _fh.unregister(signo)  # faultline's handler goes in behind faulthandler's
        _registered = signo
        _reinstall_dump(signo)
        _sync_text_mode()
    # chain=True behind our back: faulthandler calls faultline's dump
    # handler after its text.
    _fh.register(signo, sys.stderr if file is None else file, all_threads, chain or report)


def unregister(signum):
    """faulthandler.unregister(): True if signum was registered."""
    global _registered
    signo = _native.signal_number(signum)
    answer = _fh.unregister(signo)
    if _registered == signo:
        _registered = None
        if _lib is not None and _lib.faultline_installed():
            _reinstall_dump(_dump_signal())
    return answer


# faulthandler's public functions, which faultline's stand in for.
FAULTHANDLER_API = ("enable", "disable", "is_enabled", "dump_traceback", "dump_traceback_later",
                    "cancel_dump_traceback_later", "register", "unregister")


def _stand_in_for_faulthandler():
    """Puts faultline's functions in the faulthandler module itself (which
    stays the built-in module in sys.modules), so that code that calls
    faulthandler gets faultline's report too (the test of CPython's suite
    against faultline does this from a .pth file)."""
    for name in FAULTHANDLER_API:
        setattr(faulthandler, name, globals()[name])


if hasattr(_fh, "dump_c_stack"):
    dump_c_stack = _fh.dump_c_stack  # 3.14+: faulthandler's own (native frames only)


def __getattr__(name):
    # The rest of faulthandler's module (its test helpers such as
    # _sigsegv()): faultline stands in for it.
    try:
        return getattr(_fh, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


_lib = _find_loaded()
if _lib is not None:
    _native.bind_install(_lib)
    _hooks()
    if _fh.is_enabled():  # PYTHONFAULTHANDLER, -X faulthandler: its text, faultline's additions
        _sync_text_mode()
