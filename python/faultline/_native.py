"""The native side of the faultline package: finding libfaultline.so and the
`faultline` command, and the C options struct (through ctypes).
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
    if hasattr(lib, "faultline_dump_after_thread"):  # a library older than the package lacks it
        lib.faultline_dump_after_thread.argtypes = [ctypes.c_uint, ctypes.c_int, ctypes.c_int]
        lib.faultline_dump_after_thread.restype = ctypes.c_int
        lib.faultline_cancel_dump_after.argtypes = []
        lib.faultline_cancel_dump_after.restype = None
    return lib


def options(lib):
    """An Options with the library's defaults and the FAULTLINE_* variables
    applied (faultline_options_init())."""
    opts = Options()
    rc = lib.faultline_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
    if rc != 0:
        raise OSError(-rc, f"faultline_options_init: {os.strerror(-rc)}")
    return opts


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
