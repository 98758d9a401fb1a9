"""For the gloo jobs run under torchrun_nolibuv.py: the PyTorch of the root
has no libuv, so the ranks' env:// rendezvous must make its TCPStore with
use_libuv=False. Import before init_process_group."""
import sys

import torch.distributed as dist
import torch.distributed.rendezvous  # noqa: F401

_TCPStore = dist.TCPStore


def tcp_store_without_libuv(*args, **kwargs):
    kwargs["use_libuv"] = False
    return _TCPStore(*args, **kwargs)


# (the module, not the function torch.distributed.rendezvous that shadows it)
sys.modules["torch.distributed.rendezvous"].TCPStore = tcp_store_without_libuv
