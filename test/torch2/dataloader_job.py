"""A DataLoader whose Dataset segfaults in __getitem__ (ctypes.string_at(0))
in its 2 workers. Usage: dataloader_job.py fork|forkserver. The parent's
DataLoader raises; exit 7 with its message on stdout."""
import ctypes
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Poison(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return ctypes.string_at(0)


if __name__ == "__main__":
    print(f"torch {torch.__version__} python {sys.version.split()[0]}", flush=True)
    loader = DataLoader(Poison(), num_workers=2, multiprocessing_context=sys.argv[1])
    try:
        for _ in loader:
            pass
    except RuntimeError as e:
        print(f"PARENT: {e}", flush=True)
        sys.exit(7)
    sys.exit(0)
