"""PyTorch integration: versions as annotations, Dynamo compilations as
breadcrumbs. Imported by faultline/__init__.py; nothing here is public.

Hooks are installed when the module they need is imported (now, if it
already is): `torch` for the versions, `torch._dynamo` for the compile
events, so importing faultline never imports torch itself.

Compile events come from Dynamo's compile-start callbacks
(torch._dynamo.callback.callback_handler, torch >= 2.3) or, where those do
not exist, from a wrapper around torch._dynamo.convert_frame._compile (the
function every Dynamo compilation goes through since 2.0). Each event
becomes one breadcrumb:

    torch.compile: compiling forward (/job/model.py:42) compile_id=0/3 compiles=4 reason: ...

where `compiles` counts the compilations of that code object seen in this
process, and the reason is Dynamo's last recorded guard failure for it.
"""
import importlib
import sys
import threading

BREADCRUMB_PREFIX = "torch.compile: compiling "

_fl = None
_lock = threading.Lock()
_counts = {}  # (file, line, name) -> compilations seen
_total = 0
_installed = set()


def install(fl):
    """Called once from faultline/__init__.py with the faultline module."""
    global _fl
    _fl = fl
    if not fl.available():
        return  # nothing could record what the hooks collect
    _when_imported("torch", _on_torch)
    _when_imported("torch._dynamo", _on_dynamo)


# ---- running a hook once a module is imported

class _ImportWatcher:
    """A meta path finder (duck-typed: importlib.abc costs ~40 ms of start-up
    to import). Finds nothing itself; wraps the loader of a watched module so that its
    hook runs right after the module finished executing."""

    def __init__(self):
        self.hooks = {}

    def find_spec(self, name, path, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        del self.hooks[name]
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _safely(hook, module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            return spec
        return spec


_watcher = _ImportWatcher()


def _when_imported(name, hook):
    module = sys.modules.get(name)
    if module is not None:
        _safely(hook, module)
        return
    _watcher.hooks[name] = hook
    if _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)


def _safely(fn, *args):
    # A hook must never break the program it observes.
    try:
        fn(*args)
    except Exception:  # noqa: BLE001
        pass


# ---- versions

def _distribution_version(*names):
    try:
        from importlib import metadata
    except ImportError:
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # noqa: BLE001
            continue
    return None


def _on_torch(torch):
    if "torch" in _installed:
        return
    _installed.add("torch")
    _fl.annotate("torch.version", getattr(torch, "__version__", "unknown"))
    v = getattr(torch, "version", None)
    cuda = getattr(v, "cuda", None)
    hip = getattr(v, "hip", None)
    _fl.annotate("torch.cuda", cuda or "none")
    if hip:
        _fl.annotate("torch.hip", hip)
    git = getattr(v, "git_version", None)
    if git:
        _fl.annotate("torch.git", git)
    triton = _distribution_version("triton", "pytorch-triton", "pytorch-triton-rocm")
    if triton:
        _fl.annotate("triton.version", triton)


# ---- Dynamo compile events

def _major(torch):
    try:
        return int(str(torch.__version__).split(".")[0])
    except (AttributeError, ValueError):
        return 0


def _on_dynamo(dynamo):
    if "dynamo" in _installed:
        return
    torch = sys.modules.get("torch")
    if torch is None or _major(torch) < 2:
        return
    _installed.add("dynamo")
    callback = _import("torch._dynamo.callback")
    handler = getattr(callback, "callback_handler", None)
    if handler is not None and hasattr(handler, "register_start_callback"):
        handler.register_start_callback(_on_compile_start)
        return
    convert_frame = _import("torch._dynamo.convert_frame")
    original = getattr(convert_frame, "_compile", None)
    if original is None or getattr(original, "_faultline_wrapped", False):
        return

    def _compile(code, *args, **kwargs):
        _safely(_record, code, kwargs.get("compile_id"))
        return original(code, *args, **kwargs)

    _compile._faultline_wrapped = True
    _compile.__wrapped__ = original
    convert_frame._compile = _compile


def _import(name):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001
        return None


def _on_compile_start(*args, **kwargs):
    # The callback gets no code object: find it in Dynamo's own frame, the
    # innermost one of convert_frame.py that has a `code` local.
    compile_id = getattr(args[0], "compile_id", None) if args else None
    f = sys._getframe(1)
    for _ in range(64):
        if f is None:
            break
        if f.f_code.co_filename.endswith("convert_frame.py") and "code" in f.f_locals:
            _safely(_record, f.f_locals["code"], compile_id or f.f_locals.get("compile_id"))
            return
        f = f.f_back


def _current_compile_id():
    guards = sys.modules.get("torch._guards")
    ctx = getattr(guards, "CompileContext", None)
    getter = getattr(ctx, "current_compile_id", None)
    try:
        return getter() if getter else None
    except Exception:  # noqa: BLE001
        return None


def _last_reason(code):
    utils = sys.modules.get("torch._dynamo.utils")
    failures = getattr(utils, "guard_failures", None)
    try:
        reasons = failures.get(code) if failures is not None else None
    except Exception:  # noqa: BLE001
        return None
    if not reasons:
        return None
    reason = reasons[-1]
    reason = getattr(reason, "reason", reason)
    return " ".join(str(reason).split())  # one line


def _record(code, compile_id=None):
    global _total
    name = getattr(code, "co_qualname", None) or code.co_name
    where = (code.co_filename, code.co_firstlineno, name)
    with _lock:
        n = _counts.get(where, 0) + 1
        _counts[where] = n
        _total += 1
        total = _total
        top_where, top_n = max(_counts.items(), key=lambda kv: kv[1])
    if compile_id is None:
        compile_id = _current_compile_id()
    msg = f"{BREADCRUMB_PREFIX}{name} ({code.co_filename}:{code.co_firstlineno})"
    if compile_id is not None:
        msg += f" compile_id={compile_id}"
    msg += f" compiles={n}"
    reason = _last_reason(code) if n > 1 else None
    if reason:
        msg += f" reason: {reason}"
    # A guard's reason may quote a string with a NUL byte in it, which the
    # library's C strings refuse (ValueError): never into torch's compile.
    _fl.breadcrumb(msg.replace("\0", "\\0"))
    _fl.annotate("torch.compile.compiles", str(total))
    most = f"{top_where[2]} ({top_where[0]}:{top_where[1]}) x{top_n}"
    _fl.annotate("torch.compile.most_compiled", most.replace("\0", "\\0"))


def compile_counts():
    """{(file, line, name): compilations} seen so far (for tests)."""
    with _lock:
        return dict(_counts)
