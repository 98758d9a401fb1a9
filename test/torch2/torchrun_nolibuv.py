"""torchrun for a PyTorch built without libuv (Debian's): every TCPStore is
made with use_libuv=False, then torch.distributed.run runs as `torchrun`
would. Usage: python3 torchrun_nolibuv.py [torchrun arguments]."""
import os
import sys

import torch.distributed as dist

os.environ.setdefault("USE_LIBUV", "0")  # the workers' own env:// rendezvous
_TCPStore = dist.TCPStore


class TCPStore(_TCPStore):
    def __init__(self, *args, **kwargs):
        kwargs["use_libuv"] = False
        super().__init__(*args, **kwargs)


dist.TCPStore = TCPStore

from torch.distributed.run import main  # noqa: E402  (after the patch: it imports TCPStore)

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(main())
