"""The native side of the faultline package: finding libfaultline.so and the
`faultline` command, the C options struct, and POSIX timers (through ctypes).
Nothing here is public."""
import ctypes
import os

HERE = os.path.dirname(os.path.abspath(__file__))
# A wheel carries the library and the command here (bin/ beside lib/, the
# layout the command expects when it looks for the library to preload).
BUNDLE = os.path.join(HERE, "_bundle")
# A source checkout run with PYTHONPATH=python: the default CMake build tree.
SOURCE_BUILD = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build")
# Installed by `cmake --install` or the .deb: PREFIX/lib/python3/dist-packages/
# faultline, the library in PREFIX/lib (or its multiarch folder), the command
# in PREFIX/bin.
PREFIX = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
INSTALLED_LIBS = [os.path.join(PREFIX, "lib", "libfaultline.so"),
                  os.path.join(PREFIX, "lib", "x86_64-linux-gnu", "libfaultline.so")]


def _first_file(paths):
    for p in paths:
        if p and os.path.isfile(p):
            return p
    return None


def library_path():
    """The libfaultline.so to load: FAULTLINE_LIB, the bundled copy, a
    source checkout's build tree, or the installed one beside the package.
    None when there is none."""
    return _first_file([os.environ.get("FAULTLINE_LIB"),
                        os.path.join(BUNDLE, "lib", "libfaultline.so"),
                        os.path.join(SOURCE_BUILD, "lib", "libfaultline.so"), *INSTALLED_LIBS])


def cli_path():
    """The `faultline` command: FAULTLINE_CLI, the bundled copy, a source
    checkout's build tree, or the installed one. None when there is none."""
    return _first_file([os.environ.get("FAULTLINE_CLI"),
                        os.path.join(BUNDLE, "bin", "faultline"),
                        os.path.join(SOURCE_BUILD, "bin", "faultline"),
                        os.path.join(PREFIX, "bin", "faultline")])


# The limits of faultline.h (FAULTLINE_KEY_MAX, ...; a test compares them
# with the header's): bytes without the terminating NUL, and counts.
KEY_MAX = 63
VALUE_MAX = 511
ANNOTATIONS_MAX = 64
THREAD_VALUE_MAX = 255
THREAD_ANNOTATIONS_MAX = 8
ANNOTATED_THREADS_MAX = 256
BREADCRUMB_MAX = 255
BREADCRUMBS_MAX = 64
CALLBACK_VALUE_MAX = 1023
CALLBACK_PAIRS_MAX = 32
OPTIONS_SIZE_V1 = 96
OPTIONS_SIZE_V2 = 104


class Options(ctypes.Structure):
    """struct faultline_options of include/faultline/faultline.h (a test
    compares its layout with the C compiler's). Make it with options(lib)."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("report_dir", ctypes.c_char_p),
        ("signals", ctypes.c_ulonglong),
        ("write_stderr", ctypes.c_int),
        ("max_frames", ctypes.c_int),
        ("watchdog_seconds", ctypes.c_int),
        ("arena_bytes", ctypes.c_size_t),
        ("max_threads", ctypes.c_int),
        ("thread_signal", ctypes.c_int),
        ("thread_timeout_ms", ctypes.c_int),
        ("dump_signal", ctypes.c_int),
        ("dump_after_seconds", ctypes.c_int),
        ("exit_after_dump", ctypes.c_int),
        ("thread_altstacks", ctypes.c_int),
        ("stay_in_front", ctypes.c_int),
        ("callback", ctypes.c_void_p),
        ("callback_data", ctypes.c_void_p),
        ("minidump", ctypes.c_int),
    ]


def bind_install(lib):
    """Sets the argument types of the install-time functions on lib."""
    lib.faultline_options_init_sized.argtypes = [ctypes.POINTER(Options), ctypes.c_size_t]
    lib.faultline_options_init_sized.restype = ctypes.c_int
    lib.faultline_install.argtypes = [ctypes.POINTER(Options)]
    lib.faultline_install.restype = ctypes.c_int
    lib.faultline_uninstall.argtypes = []
    lib.faultline_uninstall.restype = None
    lib.faultline_installed.argtypes = []
    lib.faultline_installed.restype = ctypes.c_int
    lib.faultline_dump_now.argtypes = []
    lib.faultline_dump_now.restype = ctypes.c_int
    lib.faultline_last_report.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.faultline_last_report.restype = ctypes.c_size_t
    return lib


def options(lib):
    """An Options with the library's defaults and the FAULTLINE_* variables
    applied (faultline_options_init())."""
    opts = Options()
    rc = lib.faultline_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
    if rc != 0:
        raise OSError(-rc, f"faultline_options_init: {os.strerror(-rc)}")
    return opts


# ---- POSIX timers: a timed dump must fire while the interpreter is stuck
# (in C code, holding the GIL), so it cannot be a Python thread. The kernel
# sends the dump signal; the library's handler writes the report.

class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):
    # glibc x86-64: sigval, signo, notify, then a 48-byte union: 64 bytes.
    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int),
                ("sigev_notify", ctypes.c_int), ("_pad", ctypes.c_int * 12)]


_SIGEV_SIGNAL = 0
_CLOCK_MONOTONIC = 1
_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        for name in ("timer_create", "timer_settime", "timer_delete"):
            if not hasattr(_libc, name):  # glibc < 2.34 keeps them in librt
                _libc = ctypes.CDLL("librt.so.1", use_errno=True)
                break
        _libc.timer_create.argtypes = [ctypes.c_int, ctypes.POINTER(_Sigevent),
                                       ctypes.POINTER(ctypes.c_void_p)]
        _libc.timer_settime.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                        ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
        _libc.timer_delete.argtypes = [ctypes.c_void_p]
    return _libc


class Timer:
    """A CLOCK_MONOTONIC timer that sends signo after `seconds`, and then
    every `seconds` when repeat is true (si_code SI_TIMER)."""

    def __init__(self, signo, seconds, repeat):
        libc = _c()
        ev = _Sigevent()
        ev.sigev_notify = _SIGEV_SIGNAL
        ev.sigev_signo = int(signo)
        self._id = ctypes.c_void_p()
        if libc.timer_create(_CLOCK_MONOTONIC, ctypes.byref(ev), ctypes.byref(self._id)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "timer_create: " + os.strerror(e))
        sec = int(seconds)
        nsec = int(round((seconds - sec) * 1e9))
        if nsec >= 1000000000:
            sec, nsec = sec + 1, nsec - 1000000000
        if sec == 0 and nsec == 0:
            nsec = 1
        its = _Itimerspec()
        its.it_value = _Timespec(sec, nsec)
        if repeat:
            its.it_interval = _Timespec(sec, nsec)
        if libc.timer_settime(self._id, 0, ctypes.byref(its), None) != 0:
            e = ctypes.get_errno()
            self.cancel()
            raise OSError(e, "timer_settime: " + os.strerror(e))

    def cancel(self):
        if self._id is not None:
            _c().timer_delete(self._id)
            self._id = None


def signal_number(signum):
    """An int from a signal number, a signal.Signals member (an IntEnum) or a
    name ("SIGSEGV" or "SEGV"). ValueError for an unknown name, TypeError
    for anything else."""
    if isinstance(signum, str):
        import signal
        name = signum if signum.startswith("SIG") else "SIG" + signum
        member = signal.Signals.__members__.get(name)
        if member is None:
            raise ValueError(f"unknown signal {signum!r}")
        return int(member)
    if isinstance(signum, bool) or not isinstance(signum, int):
        raise TypeError(f"a signal is a number, a signal.Signals member or a name such as "
                        f"'SIGSEGV', not {type(signum).__name__}")
    return int(signum)
