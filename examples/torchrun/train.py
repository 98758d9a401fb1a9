"""A two-rank torchrun job in which rank 1 dies with SIGSEGV in an ATen kernel.

    LD_PRELOAD=build/lib/libfaultline.so PYTHONPATH=python \
      python3 -m torch.distributed.run --nproc_per_node=2 --redirects 2 --tee 2 \
      examples/torchrun/train.py

torchrun's failure summary then shows faultline's diagnosis and stack as the
root cause (see README.md next to this file).
"""
import os
import sys
import time

try:
    import faultline  # optional: crash keys and versions in the report
except ImportError:
    faultline = None

import numpy as np
import torch

rank = int(os.environ.get("RANK", "0"))
if faultline is not None:
    faultline.annotate("rank", str(rank))
    faultline.breadcrumb(f"rank {rank} started")


def step(x):
    return (x * 2).sum()


if rank == 1:
    # A tensor whose strides point 2**40 bytes apart over a 16-byte buffer:
    # the kernel reads unmapped memory.
    bad = torch.from_numpy(np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (4,), (1 << 40,)))
    step(bad)
else:
    # Rank 0 would train; here it waits until torchrun stops it.
    time.sleep(float(os.environ.get("RANK0_SECONDS", "30")))
sys.exit(0)
