"""A four-rank gloo job on CPU in which rank 2 dies with SIGSEGV in
poison_step while the other ranks wait for it in all_reduce (run by
test_job.py under torchrun_nolibuv.py)."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.rendezvous  # noqa: F401

rank = int(os.environ["RANK"])
_TCPStore = dist.TCPStore


def tcp_store_without_libuv(*args, **kwargs):  # the root's PyTorch has no libuv
    kwargs["use_libuv"] = False
    return _TCPStore(*args, **kwargs)


# (the module, not the function torch.distributed.rendezvous that shadows it)
sys.modules["torch.distributed.rendezvous"].TCPStore = tcp_store_without_libuv
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
