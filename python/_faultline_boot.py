"""Start-up hook of the faultline package: the wheel installs it with
faultline-boot.pth, whose one line site runs at every Python start-up in
that environment and which imports this module only when libfaultline.so is
preloaded into the process (LD_PRELOAD names it, as `faultline run` and a
plain preload do): other jobs pay one environment lookup. This module then waits for the job to import torch, at the cost of one meta path
finder, and imports the faultline package at that moment: Dynamo's
compilations become breadcrumbs and torch's versions annotations
(faultline/_torch.py) without `import faultline` in the job.
FAULTLINE_TORCH_HOOKS=0 turns it off, as it turns off the package's hooks."""
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
        try:
            from faultline import _torch
        except Exception:  # noqa: BLE001 - never break the job's import of torch
            return None
        if _torch._watcher not in sys.meta_path:
            return None
        return _torch._watcher.find_spec(name, path, target)


def _boot():
    if os.environ.get("FAULTLINE_TORCH_HOOKS", "1") == "0":
        return
    if "libfaultline" not in os.environ.get("LD_PRELOAD", ""):
        return
    sys.meta_path.insert(0, _OnTorchImport())


_boot()
