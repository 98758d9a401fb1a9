"""A four-rank gloo job on CPU in which rank 2 dies with SIGSEGV in
poison_step while the other ranks wait for it in all_reduce (run by
test_job.py under torchrun_nolibuv.py)."""
import ctypes
import os

import torch
import torch.distributed as dist
import gloo_store  # noqa: F401  (the root has no libuv)

rank = int(os.environ["RANK"])
dist.init_process_group("gloo")


def poison_step():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def sync_grads(t):
    dist.all_reduce(t)  # USER: all_reduce


t = torch.ones(4)
sync_grads(t)  # every rank connected
if rank == 2:
    poison_step()
sync_grads(t)
