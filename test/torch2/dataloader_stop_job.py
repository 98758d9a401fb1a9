"""torchrun's way of stopping a rank, for a rank with DataLoader workers.
Usage: dataloader_stop_job.py launch | rank. `launch` (the agent: no job
variables of its own) starts `rank` in a session of its own with
torchrun's variables, waits until its 2 forkserver workers are up, sends
SIGTERM to the rank's whole process group (os.killpg, as torchrun does)
and prints the rank's pid and exit status."""
import os
import signal
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        return torch.tensor([i])


def rank():
    loader = DataLoader(Numbers(), num_workers=2, multiprocessing_context="forkserver")
    it = iter(loader)
    next(it)
    next(it)  # both workers have answered
    print("ready", flush=True)
    while True:
        time.sleep(3600)


def launch():
    print(f"torch {torch.__version__} python {sys.version.split()[0]}", flush=True)
    env = dict(os.environ, TORCHELASTIC_RUN_ID="dataloader-stop", RANK="0", LOCAL_RANK="0",
               WORLD_SIZE="1", GROUP_RANK="0", TORCHELASTIC_RESTART_COUNT="0")
    p = subprocess.Popen([sys.executable, __file__, "rank"], env=env, stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    assert p.stdout.readline() == "ready\n"
    os.killpg(p.pid, signal.SIGTERM)
    status = p.wait()
    print(f"rank {p.pid} status {status}", flush=True)


if __name__ == "__main__":
    rank() if sys.argv[1] == "rank" else launch()
