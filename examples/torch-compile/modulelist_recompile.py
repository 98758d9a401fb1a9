"""The repeated torch.compile ModuleList job.

A model made of an nn.ModuleList is compiled again and again, inside the
training loop, with a new input shape each time. Every torch.compile call
and every new shape makes Dynamo compile the same forward again; its
per-code cache entries and guards pile up, and on some PyTorch 2.x versions
the job dies with SIGSEGV inside Dynamo's cache and guard code.

Run it under faultline (from the repository root):

    LD_PRELOAD=build/lib/libfaultline.so PYTHONPATH=python \
      python3 examples/torch-compile/modulelist_recompile.py

With the faultline package importable, each compilation is a breadcrumb
("torch.compile: compiling forward (...) compile_id=.. compiles=N reason: ..."),
so a crash report shows the repetition, and `faultline explain REPORT`
prints the repeated-compile hint with its advice. Where torch 2.x is not
installed the script says so and exits 0.

Options: --steps N (default 40), --fixed (the corrected version: compile
once, dynamic=True, reuse the handle), --backend NAME (default inductor;
"eager" recompiles the same way, faster), --static (dynamic=False: every new
shape is a new compile, as with older PyTorch), --crash (end with a SIGSEGV
in an ATen kernel, to see the report of a job that went through the pattern).
"""
import argparse
import sys

try:
    import faultline  # noqa: F401  (compile history as breadcrumbs, before torch)
except ImportError:
    faultline = None


def torch_2_or_explain():
    try:
        import torch
    except ImportError:
        print("modulelist_recompile: PyTorch is not installed; this example needs torch >= 2.0 "
              "(torch.compile). Nothing to do.")
        return None
    major = int(torch.__version__.split(".")[0])
    if major < 2 or not hasattr(torch, "compile"):
        print(f"modulelist_recompile: PyTorch {torch.__version__} has no torch.compile "
              "(needs >= 2.0). Nothing to do.")
        return None
    return torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--fixed", action="store_true", help="compile once with dynamic=True and reuse it")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--static", action="store_true", help="dynamic=False: each new shape recompiles")
    ap.add_argument("--crash", action="store_true", help="end with a SIGSEGV in an ATen kernel")
    args = ap.parse_args()
    torch = torch_2_or_explain()
    if torch is None:
        return 0

    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.lin = torch.nn.Linear(width, width)

        def forward(self, x):
            return torch.relu(self.lin(x)) + x

    class Model(torch.nn.Module):
        def __init__(self, width=32, depth=8):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(width) for _ in range(depth)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x.sum()

    model = Model().to(args.device)
    compiled = torch.compile(model, backend=args.backend, dynamic=True) if args.fixed else None
    for step in range(args.steps):
        batch = 1 + step  # a new shape every step
        x = torch.randn(batch, 32, device=args.device)
        if not args.fixed:
            # The pattern: a fresh torch.compile each step, old handles kept alive.
            compiled = torch.compile(model, backend=args.backend, dynamic=False if args.static else None)
        loss = compiled(x)
        if faultline is not None:
            faultline.breadcrumb(f"step {step} batch={batch} loss={float(loss.detach()):.3f}")
    if args.crash:
        import numpy as np
        # 32 floats 2**40 bytes apart over a 16-byte buffer: the kernel reads unmapped memory.
        bad = torch.from_numpy(np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (32,), (1 << 40,)))
        model(bad.unsqueeze(0))  # CRASH
    print(f"modulelist_recompile: {args.steps} steps finished without a crash on PyTorch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
