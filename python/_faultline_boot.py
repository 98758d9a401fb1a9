"""Start-up hook of the faultline package: the wheel installs it with
faultline-boot.pth, whose one line site runs at every Python start-up in
that environment and which imports this module only when something may be
preloaded (LD_PRELOAD is set, or /etc/ld.so.preload exists): other jobs pay
one environment lookup and one stat. This module then waits for the job to
import torch, at the cost of one meta path finder, and at that moment, if
libfaultline is in the process (LD_PRELOAD names it, as `faultline run` and
a plain preload do, or its symbols are there: a copy preloaded under
another name, /etc/ld.so.preload), imports the faultline package: Dynamo's
compilations become breadcrumbs and torch's versions annotations
(faultline/_torch.py) without `import faultline` in the job.
FAULTLINE_TORCH_HOOKS=0 turns it off, as it turns off the package's hooks.
Under PYTHONFAULTHANDLER or -X faulthandler it also tells the library that
faulthandler writes the crash text (see _faulthandler_writes_the_text).
When LD_PRELOAD names libfaultline it also chains sys.excepthook (and
threading.excepthook once the package is imported): an uncaught exception
leaves a report of kind "exception" (faultline/_excepthook.py, imported
only then)."""
import os
import sys


class _OnTorchImport:
    """A meta path finder (duck-typed: importlib.abc is slow to import) that
    finds nothing itself. On the first import of torch it leaves sys.meta_path
    and imports faultline, whose own finder then wraps torch's loader."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        if not _library_loaded():
            return None
        try:
            from faultline import _torch
        except Exception:  # noqa: BLE001 - never break the job's import of torch
            return None
        if _torch._watcher not in sys.meta_path:
            return None
        return _torch._watcher.find_spec(name, path, target)


def _library_loaded():
    """Whether libfaultline is in this process: named in LD_PRELOAD, or its
    exported symbols in the global namespace, whatever its file is called
    (ctypes: torch imports it anyway, so this costs the job nothing)."""
    if "libfaultline" in os.environ.get("LD_PRELOAD", ""):
        return True
    try:
        import ctypes
        return hasattr(ctypes.CDLL(None), "faultline_version")
    except Exception:  # noqa: BLE001 - never break the job's import of torch
        return False


def _maybe_preloaded():
    """faultline-boot.pth's own test, for an import of this module by name."""
    return bool(os.environ.get("LD_PRELOAD")) or os.path.exists("/etc/ld.so.preload")


def _faulthandler_writes_the_text():
    """PYTHONFAULTHANDLER or -X faulthandler in a preloaded job (faulthandler
    is enabled before site runs): at a crash faulthandler's handler writes
    its text, then hands the signal on to faultline's, which then writes only
    its report and additions (the process annotation "faultline.faulthandler", as
    faultline.enable() sets it), not the same text a second time."""
    import faulthandler
    if not faulthandler.is_enabled():
        return
    try:
        import ctypes
        annotate = ctypes.CDLL(None).faultline_annotate
    except (OSError, AttributeError):  # not preloaded after all
        return
    annotate.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    annotate(b"faultline.faulthandler", b"on")


def _on_exception(exc_type, exc, tb):
    """The report of an uncaught exception, through the package (imported
    now, which binds the preloaded library)."""
    try:
        import faultline
        from faultline import _excepthook
        _excepthook.report(_excepthook._library(), exc_type, exc, tb)
    except Exception:  # noqa: BLE001 - the job's own hook has already printed
        pass


def _chain_exception_hooks():
    """sys.excepthook, calling the previous hook first (which prints as
    before), then writing the report. threading.excepthook only if threading
    is imported already: importing it here would come before a program's
    own early patches (gevent's monkey.patch_all() wants to run first); the
    package chains it when it is imported (with torch, or by the job)."""
    previous_sys = sys.excepthook

    def sys_hook(exc_type, exc, tb):
        try:
            previous_sys(exc_type, exc, tb)
        finally:
            _on_exception(exc_type, exc, tb)

    sys_hook._faultline_hook = True
    sys.excepthook = sys_hook
    threading = sys.modules.get("threading")
    if threading is not None:
        previous_threading = threading.excepthook

        def threading_hook(args):
            try:
                previous_threading(args)
            finally:
                _on_exception(args.exc_type, args.exc_value, args.exc_traceback)

        threading_hook._faultline_hook = True
        threading.excepthook = threading_hook


def _boot():
    if os.environ.get("FAULTLINE_TORCH_HOOKS", "1") == "0" or not _maybe_preloaded():
        return
    try:
        _faulthandler_writes_the_text()
    except Exception:  # noqa: BLE001 - never break the job's start-up
        pass
    sys.meta_path.insert(0, _OnTorchImport())
    if ("libfaultline" in os.environ.get("LD_PRELOAD", "")
            and os.environ.get("FAULTLINE_EXCEPTION_REPORTS", "1") != "0"):
        _chain_exception_hooks()


_boot()
