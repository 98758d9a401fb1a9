"""A four-rank gloo job on CPU in which rank 3 skips a collective: ranks 0,
1 and 2 call all_reduce on a group that rank 3 never enters (it goes on to
the next barrier). Rank 0 made the group with a short timeout=, so gloo
raises its RuntimeError there first: an uncaught exception, whose report is
the root cause; torchrun then stops the others with SIGTERM (run by
test_job_timeout.py under torchrun_nolibuv.py)."""
import os
from datetime import timedelta

import faultline  # noqa: F401  (the preloaded library's Python side: exception reports)
import torch
import torch.distributed as dist
import gloo_store  # noqa: F401  (the root has no libuv)

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", timeout=timedelta(seconds=300))
# Every rank makes the group; only rank 0's times out soon.
group = dist.new_group(timeout=timedelta(seconds=3 if rank == 0 else 300))


def sync_grads(t):
    dist.all_reduce(t, group=group)  # USER: all_reduce


def end_of_epoch():
    dist.barrier()  # USER: barrier


t = torch.ones(4)
sync_grads(t)  # every rank connected
if rank != 3:  # rank 3 skips this collective
    sync_grads(t)
end_of_epoch()
