"""Compiles a small model ahead of time with AOTInductor into a package:
`python3 aoti_compile.py OUT.pt2`. The model gathers x[idx] (a 16-element x,
two indices) and Inductor's bounds check on the indices is turned off, as in
a model whose indices come from data: an index far out of range makes the
generated C++ kernel read unmapped memory. comment_origin keeps each fused
node's ATen op and source line in the generated kernel (lines marked
`# ORIGIN:` below)."""
import sys
import time

import torch
import torch._inductor.config as cfg

print(f"torch {torch.__version__} python {sys.version.split()[0]}", flush=True)
cfg.assert_indirect_indexing = False
cfg.comment_origin = True


class Gather(torch.nn.Module):
    def forward(self, x, idx):
        y = x[idx] * 2  # ORIGIN: index, mul
        return torch.relu(y)  # ORIGIN: relu


start = time.monotonic()
program = torch.export.export(Gather(), (torch.randn(16), torch.tensor([1, 2])))
path = torch._inductor.aoti_compile_and_package(program, package_path=sys.argv[1])
print(f"compiled {path} in {time.monotonic() - start:.1f} s", flush=True)
