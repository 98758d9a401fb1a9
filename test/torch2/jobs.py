"""torch.compile jobs that crash, run with torch 2.x inside the root
(tools/torch-root) under the preloaded library: `python3 jobs.py SCENARIO`.

Every scenario prints the versions it runs with, then dies with SIGSEGV in
the layer it is named after. Lines the tests look for carry a `# USER:` or
`# LAYER:` comment. The crashes are real: an Inductor kernel reading far
outside its input, and ATen kernels reading a tensor whose strides point
2**40 bytes apart over a 16-byte buffer.
"""
import os
import sys

import faultline  # compile history and versions in the report

import numpy as np
import torch

print(f"torch {torch.__version__} python {sys.version.split()[0]}", flush=True)


def bad_tensor():
    # 4 floats 2**40 bytes apart over a 16-byte buffer: any kernel reading it faults.
    return torch.from_numpy(np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (4,), (1 << 40,)))


class Gather(torch.nn.Module):
    # A compiled frame shows its first line: Dynamo's bytecode runs the kernel.
    def forward(self, x, idx):  # LAYER: inductor kernel
        return torch.relu(x[idx] * 2)


def inductor_kernel():
    """An out-of-range gather inside an Inductor-generated C++ kernel: the
    bounds assert Inductor would add is turned off, as in a model whose
    indices come from data."""
    import torch._inductor.config as cfg
    cfg.assert_indirect_indexing = False
    model = torch.compile(Gather())
    x = torch.randn(16)
    model(x, torch.tensor([1, 2]))  # compiles, runs fine
    model(x, torch.tensor([1 << 40, 2]))  # USER: inductor kernel


@torch.compile(backend="eager")
def scaled_sum(x, weights):
    y = x * 2
    # The rest runs in a resume function, which starts at the break.
    torch._dynamo.graph_break()  # LAYER: resume
    return (y * weights).sum()


def resume():
    """A crash after a graph break: Dynamo's resume function
    (torch_dynamo_resume_in_scaled_sum_at_N) runs the compiled rest of the
    function, an FX graph (<eval_with_key>) whose ATen kernel faults."""
    scaled_sum(torch.ones(4), bad_tensor())  # USER: resume


class NativeScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 + native_gradient_term(grad)  # LAYER: backward


def native_gradient_term(grad):
    return bad_tensor().sum()  # ATen reads the bad tensor


def backward():
    """A crash in a backward pass: the autograd engine calls a custom
    Function's backward, which runs a native kernel that faults."""
    x = torch.ones(4, requires_grad=True)
    loss = NativeScale.apply(x).sum()
    loss.backward()  # USER: backward


class GatherSum(torch.nn.Module):
    def forward(self, x, idx):
        return (x[idx] * 2).sum()


def compiled_autograd():
    """A crash in a backward pass run by compiled autograd: Dynamo traces the
    autograd graph into an FX graph (<eval_with_key>) that Inductor compiles;
    its scatter of the gradient into x uses an index that was changed
    after the forward (through .data, which autograd does not see), and the
    generated kernel writes far outside the gradient's buffer."""
    import torch._inductor.config as cfg
    cfg.assert_indirect_indexing = False
    model = torch.compile(GatherSum())
    x = torch.randn(16, requires_grad=True)
    idx = torch.tensor([1, 2])
    loss = model(x, idx)
    idx.data.fill_(1 << 40)  # the index saved for backward
    with torch._dynamo.compiled_autograd._enable(torch.compile(backend="inductor")):
        loss.backward()  # USER: compiled autograd


SCENARIOS = {f.__name__: f for f in (inductor_kernel, resume, backward, compiled_autograd)}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
    print("no crash", flush=True)
    sys.exit(3)
