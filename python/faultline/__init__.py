"""faultline from Python: crash reports, faulthandler's API, crash keys,
breadcrumbs and PyTorch compile history.

    import faultline
    faultline.enable()                            # like faulthandler.enable()
    faultline.annotate("run_id", "exp-42")        # in every crash report
    faultline.thread_annotate("batch", "1337")    # in the crashing thread's report
    faultline.breadcrumb("epoch 3 started")       # last 64, with times

enable() loads libfaultline.so into the running interpreter (the copy in
the installed package, FAULTLINE_LIB, or the one already preloaded) and
installs its crash handlers: a fatal signal then writes a JSON report to the
report directory (FAULTLINE_DIR, else the current directory) and
faulthandler-style text to stderr. disable(), is_enabled(), dump_traceback(),
dump_traceback_later(), cancel_dump_traceback_later(), register() and
unregister() follow faulthandler's names, arguments and semantics where they
apply (see doc/python-package.md for the differences). faulthandler may be
enabled as well: both report the same crash.

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

from . import _native

__all__ = ["annotate", "thread_annotate", "breadcrumb", "available", "load", "version",
           "enable", "disable", "is_enabled", "dump_traceback", "dump_traceback_later",
           "cancel_dump_traceback_later", "register", "unregister", "last_report"]

# Limits of the C API (faultline.h, in _native): longer strings are cut there;
# cutting here first keeps a multi-byte character whole.
_KEY_BYTES = _native.KEY_MAX
_VALUE_BYTES = _native.VALUE_MAX
_THREAD_VALUE_BYTES = _native.THREAD_VALUE_MAX
_BREADCRUMB_BYTES = _native.BREADCRUMB_MAX

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
    global _lib, load_error
    if _lib is not None:
        return True
    path = path or _native.library_path()
    if not path:
        load_error = ("libfaultline.so not found: not in this package, FAULTLINE_LIB is not set, "
                      "and it is not preloaded")
        return False
    try:
        lib = _bind(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
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
_timer = None          # the dump_traceback_later timer
_timer_exit = False
_env_max_threads = 0   # FAULTLINE_MAX_THREADS (0: the library's default)
_env_dump_signal = 0   # FAULTLINE_DUMP / FAULTLINE_DUMP_SIGNAL
_timer_signo = 0
_registered = None     # the signal register() gave the library's dump handler
# The signal a dump_traceback_later timer sends when no signal is registered:
# (Numbers, not the signal module: importing it costs start-up time.)
_TIMER_SIGNAL = 12  # SIGUSR2, as the library's own FAULTLINE_DUMP_AFTER
_FATAL = {11, 8, 6, 7, 4}  # SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL
_SIGKILL, _SIGSTOP, _NSIG = 9, 19, 65


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


def enable(file=None, all_threads=True, c_stack=True, *, report_dir=None, signals=None, minidump=None):
    """Like faulthandler.enable(): on SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL
    (and SIGTRAP) write a faultline report of every thread and
    faulthandler-style text to file (default sys.stderr), then let the
    process die as it would have.

    all_threads=False captures only the crashing thread's native stack (the
    others are listed with their Python frames). c_stack is accepted for faulthandler's sake: native
    frames are always captured. report_dir: where reports go (default
    FAULTLINE_DIR, else the current directory; one that is not a directory
    raises FileNotFoundError or NotADirectoryError). signals: an iterable
    of signals (numbers, signal.Signals members or names such as
    'SIGSEGV') instead of the default set. A bad argument raises before
    anything is installed. minidump: True or False to write
    a minidump beside each crash report or not (default FAULTLINE_MINIDUMP,
    else the library's default). Loads libfaultline.so if the process
    does not have it yet; raises RuntimeError when it cannot be loaded."""
    global _report_dir
    fd = _text_fd(file)
    # The arguments first: a bad one changes nothing.
    directory = _report_dir_argument(report_dir) if report_dir is not None else None
    mask = _signal_mask(signals) if signals is not None else None
    _require_lib()
    opts = _current_options()
    opts.write_stderr = 1
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


def disable():
    """Like faulthandler.disable(): restores the handlers that were there
    before (a pending dump_traceback_later is cancelled too)."""
    cancel_dump_traceback_later()
    if _lib is not None and _lib.faultline_installed():
        _lib.faultline_uninstall()


def is_enabled():
    """True when faultline's crash handlers are installed (by enable(), or by
    the preloaded library)."""
    return bool(_lib is not None and _lib.faultline_installed())


def _ensure_enabled(file):
    fd = _text_fd(file)
    if not is_enabled():
        enable(file)
    _set_text_fd(fd)


def dump_traceback(file=None, all_threads=True):
    """Like faulthandler.dump_traceback(): writes a "dump" report of every
    thread now, and faulthandler's text (by faulthandler) to file; the
    process goes on. Returns the report's path. Without enable() (and no preloaded
    library) it is faulthandler.dump_traceback() and returns None."""
    if not is_enabled():
        import faulthandler
        faulthandler.dump_traceback(sys.stderr if file is None else file, all_threads)
        return None
    import faulthandler
    before = _text_fd_now
    fd = _text_fd(file)
    _set_text_fd(fd)
    try:
        rc = _lib.faultline_dump_now()
    finally:
        _set_text_fd(before)  # this file was for this dump only
    if rc != 0:
        raise OSError(-rc, f"faultline_dump_now: {os.strerror(-rc)}")
    # The text faulthandler writes, by faulthandler itself.
    faulthandler.dump_traceback(fd, all_threads)
    return last_report()


def _dump_signal():
    """The dump signal without a timer: the registered one, else the one the
    FAULTLINE_* variables set (0: none)."""
    return _registered or _env_dump_signal


def _reinstall_dump(signo, exit_after):
    opts = _current_options()
    opts.dump_signal = signo
    opts.dump_after_seconds = 0
    opts.exit_after_dump = 1 if exit_after else 0
    _install(opts)


def dump_traceback_later(timeout, repeat=False, file=None, exit=False):
    """Like faulthandler.dump_traceback_later(): after timeout seconds (and
    then every timeout seconds if repeat) write a "dump" report and its text,
    from a kernel timer, so it fires even while the interpreter is stuck
    holding the GIL; exit=True ends the process with status 1 after the
    dump. Calling it again replaces the previous timer. Enables faultline
    first if it is not."""
    global _timer, _timer_exit, _timer_signo
    timeout = float(timeout)
    if not timeout > 0:
        raise ValueError("timeout must be greater than 0")
    if timeout > 2**62 / 1e9:
        raise OverflowError("timeout value is too large")
    _ensure_enabled(file)
    cancel_dump_traceback_later()
    signo = _dump_signal() or _TIMER_SIGNAL
    _reinstall_dump(signo, exit)
    _timer_exit = bool(exit)
    _timer = _native.Timer(signo, timeout, repeat)
    _timer_signo = signo


def cancel_dump_traceback_later():
    """Like faulthandler.cancel_dump_traceback_later()."""
    global _timer, _timer_exit
    if _timer is None:
        return
    _timer.cancel()
    _timer = None
    _timer_exit = False
    if _lib is not None and _lib.faultline_installed():
        _reinstall_dump(_dump_signal(), False)


def register(signum, file=None, all_threads=True, chain=False):
    """Like faulthandler.register(): signal signum writes a "dump" report of
    every thread and its text; the process goes on. The library has one dump
    signal: registering another signal moves it there. chain=True (calling
    the previous handler too) is not supported and raises ValueError.
    Enables faultline first if it is not."""
    global _registered
    signo = _native.signal_number(signum)
    if not 0 < signo < _NSIG:
        raise ValueError("signal number out of range")
    if signo in _FATAL:
        raise RuntimeError(f"signal {signo} cannot be registered, use enable() instead")
    if signo in (_SIGKILL, _SIGSTOP):
        raise OSError(22, "Invalid argument")
    if chain:
        raise ValueError("faultline.register(): chain=True is not supported")
    _ensure_enabled(file)
    thread_signal = _current_options().thread_signal
    if thread_signal > 0 and signo == thread_signal:
        # Taken as a thread's answer to a stack request, never as a dump:
        # registered, it would do nothing at all.
        raise ValueError(
            f"signal {signo} is faultline's thread-stack signal (FAULTLINE_THREAD_SIGNAL) and "
            "cannot be the dump signal; register another signal, or move the thread-stack "
            "signal with FAULTLINE_THREAD_SIGNAL")
    _registered = signo
    _reinstall_dump(signo, _timer_exit)


def unregister(signum):
    """Like faulthandler.unregister(): True if signum was registered."""
    global _registered
    signo = _native.signal_number(signum)
    if _registered != signo:
        return False
    _registered = None
    if _lib is not None and _lib.faultline_installed():
        # A pending timer keeps its signal's handler until it is cancelled.
        _reinstall_dump(_dump_signal() or (_timer_signo if _timer is not None else 0), _timer_exit)
    return True


_lib = _find_loaded()
if _lib is not None:
    _native.bind_install(_lib)
    _hooks()
