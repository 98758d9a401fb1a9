"""A fake PyTorch 2.x laid out on disk: the files and names a Dynamo/Inductor
crash stack goes through, so the classifier, the faultline Python package and
the hints can be tested where no torch 2.x is installed.

Nothing here imitates torch's behaviour beyond what the tests read: module
paths, code-object names, Dynamo's compile-start callbacks (or, without
them, convert_frame._compile) and torch._dynamo.utils.guard_failures.
"""
import getpass
import os
import textwrap

# Each hop of the crash chain: (file below the root, function name). A hop
# calls the next one, so the crashed thread's Python stack holds every file.
CHAIN = [
    ("site-packages/torch/_dynamo/eval_frame.py", "_fn"),
    ("site-packages/torch/_dynamo/convert_frame.py", "_convert_frame_assert"),
    ("site-packages/torch/_dynamo/symbolic_convert.py", "run"),
    ("site-packages/torch/_dynamo/output_graph.py", "compile_and_call_fx_graph"),
    ("site-packages/torch/_dynamo/variables/builder.py", "wrap"),
    ("site-packages/torch/_functorch/aot_autograd.py", "aot_module_simplified"),
    ("site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py", "runtime_wrapper"),
    ("site-packages/torch/_inductor/compile_fx.py", "compile_fx"),
    ("site-packages/torch/fx/graph_module.py", "__call__"),
    ("site-packages/torch/nn/modules/module.py", "_call_impl"),
    ("site-packages/triton/runtime/jit.py", "run"),
    ("<eval_with_key>.7", "forward"),
    ("torchinductor_{user}/ab/cabcdef0123.py", "call"),
    ("model.py", "torch_dynamo_resume_in_forward_at_12"),
    ("site-packages/torch/_dynamo/guards.py", "check"),
]

# The origin each hop must get (the rule names are in classify_test.cpp).
EXPECTED_ORIGIN = {
    "eval_frame.py": "dynamo",
    "convert_frame.py": "dynamo",
    "symbolic_convert.py": "dynamo",
    "output_graph.py": "dynamo",
    "builder.py": "dynamo",
    "aot_autograd.py": "aot_autograd",
    "runtime_wrappers.py": "aot_autograd",
    "compile_fx.py": "inductor",
    "graph_module.py": "fx",
    "module.py": "torch",
    "jit.py": "triton",
    "<eval_with_key>.7": "fx",
    "cabcdef0123.py": "inductor",
    "model.py": "dynamo",  # the resume function
    "guards.py": "dynamo",
    "shape_base.py": "library",  # numpy, between two hops
    "<frozen runpy>": "stdlib",  # runpy, frozen into 3.11
    "<__array_function__ internals>": "library",  # numpy's dispatch shim
    "job.py": "python",
}

TORCH_FILES = {
    "site-packages/torch/__init__.py": """
        __version__ = "2.5.0+fake"
        from . import version
    """,
    "site-packages/torch/version.py": """
        cuda = None
        git_version = "0123456789abcdef"
    """,
    "site-packages/torch/_guards.py": """
        class CompileContext:
            current = None

            @staticmethod
            def current_compile_id():
                return CompileContext.current
    """,
    "site-packages/torch/_dynamo/__init__.py": """
        from . import convert_frame, utils
    """,
    "site-packages/torch/_dynamo/utils.py": """
        import collections
        guard_failures = collections.defaultdict(list)
    """,
}

CALLBACK_FILE = """
    class CompilationCallbackHandler:
        def __init__(self):
            self.start_callbacks = []

        def register_start_callback(self, callback):
            self.start_callbacks.append(callback)
            return callback

        def run_start_callbacks(self):
            for cb in self.start_callbacks:
                cb()

    callback_handler = CompilationCallbackHandler()
"""

# convert_frame.py: _compile as every Dynamo compilation's entry, plus the
# crash-chain hop.
CONVERT_FRAME = """
    import torch._guards

    def _compile(code, compile_id=None):
        torch._guards.CompileContext.current = compile_id
        try:
            import torch._dynamo.callback as cb
        except ImportError:
            cb = None
        if cb is not None:
            cb.callback_handler.run_start_callbacks()
        return code
"""


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))


def hop_source(function):
    return f"def {function}(rest):\n    return rest[0](rest[1:])\n"


def make_fake_torch(root, with_callbacks=True):
    """Writes the fake torch under root/site-packages and the chain files;
    returns the site-packages directory (for PYTHONPATH)."""
    user = getpass.getuser()
    for rel, text in TORCH_FILES.items():
        _write(os.path.join(root, rel), text)
    if with_callbacks:
        _write(os.path.join(root, "site-packages/torch/_dynamo/callback.py"), CALLBACK_FILE)
    for rel, function in CHAIN:
        if rel.startswith("<"):
            continue
        path = os.path.join(root, rel.format(user=user))
        existing = ""
        if rel.endswith("convert_frame.py"):
            existing = textwrap.dedent(CONVERT_FRAME) + "\n\n"
        if not os.path.exists(path) or existing:
            _write(path, existing + hop_source(function))
        else:
            with open(path, "a") as f:
                f.write("\n\n" + hop_source(function))
    return os.path.join(root, "site-packages")


JOB = """
import ctypes
import os
import sys

import numpy as np

import faultline  # before torch: its hooks wait for the import
import torch
import torch._dynamo
from torch._dynamo import convert_frame, utils

ROOT = os.environ["FAKE_ROOT"]
COMPILES = int(os.environ.get("FAKE_COMPILES", "6"))
lib = ctypes.CDLL(os.environ["FAKE_DYNAMO_LIB"])


def forward(x):
    return x + 1


# torch.compile in a loop with new shapes: Dynamo compiles forward again and again.
for i in range(COMPILES):
    if i:
        utils.guard_failures[forward.__code__].append(f"tensor 'x' size mismatch at index 0. expected {i}, actual {i + 1}")
    convert_frame._compile(forward.__code__, compile_id=f"0/{i}")

CHAIN = %(chain)r
user = %(user)r


def load(rel, function):
    if rel.startswith("<"):
        ns = {}
        exec(compile("def %%s(rest):\\n    return rest[0](rest[1:])\\n" %% function, rel, "exec"), ns)
        return ns[function]
    path = os.path.join(ROOT, rel.format(user=user))
    ns = {}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    return ns[function]


hops = [load(rel, fn) for rel, fn in CHAIN]


def through_numpy(rest):
    # A third-party package's Python frame between two hops.
    return np.apply_along_axis(lambda row: rest[0](rest[1:]), 0, np.zeros(1))


def crash(rest):
    return lib.fake_dynamo_check_guards(1)


chain = hops[:-2] + [through_numpy] + hops[-2:] + [crash]
chain[0](chain[1:])
"""


def make_job(root):
    """Writes job.py (run through runpy by a launcher, for stdlib frames)."""
    user = getpass.getuser()
    job = os.path.join(root, "job.py")
    _write(job, JOB % {"chain": CHAIN, "user": user})
    launcher = os.path.join(root, "launch.py")
    _write(launcher, f"import runpy\nrunpy.run_path({job!r}, run_name='__main__')\n")
    return launcher
