"""Synthetic torchrun jobs for `faultline job` and the triage of jobs: the
reports of a job's ranks, made from a real crash report
(test/data/real-python-segv.json) with each rank's job object, host, pid,
time and stack varied. One rank crashes (or raises), the others are stopped
by torchrun while they wait in all_reduce."""

import copy
import datetime
import json
import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
TORCH = "/opt/venv/lib/python3.12/site-packages/torch/distributed"
BASE_TIME = datetime.datetime(2026, 11, 30, 6, 10, 0, tzinfo=datetime.timezone.utc)


def base_report():
    with open(os.path.join(DATA, "real-python-segv.json")) as f:
        return json.load(f)


def _py(file, line, function):
    return {"kind": "python", "origin": "python", "file": file, "line": line,
            "function": function, "qualname": function}


def _stamp(ms):
    t = BASE_TIME + datetime.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def waiting_frames(call="all_reduce", line=41):
    """A main thread blocked in torch.distributed.CALL from sync_grads."""
    return [
        {"kind": "native", "origin": "native", "pc": "0x7f0c56900000",
         "module": "/lib/x86_64-linux-gnu/libc.so.6", "module_offset": "0x98d36",
         "symbol": "__futex_abstimed_wait_common", "symbol_offset": "0x106"},
        _py(TORCH + "/distributed_c10d.py", 2501, call),
        _py(TORCH + "/c10d_logger.py", 83, "wrapper"),
        _py("/job/train.py", line, "sync_grads"),
        _py("/job/train.py", 60, "train"),
        _py("/job/train.py", 75, "<module>"),
    ]


def rank_report(base, run_id, rank, world_size, kind, ms, per_host=8, restart=0,
                call="all_reduce", line=41, message=None):
    """One rank's report: kind "crash" (base's SIGSEGV), "shutdown" (SIGTERM
    from torchrun, waiting in CALL) or "exception" (RuntimeError MESSAGE)."""
    r = copy.deepcopy(base)
    host = f"node{rank // per_host:04d}"
    r["kind"] = kind
    r["timestamp"] = _stamp(ms)
    r["process"]["pid"] = 1000 + rank
    r["process"]["hostname"] = host
    r["job"] = {"launcher": "torchrun", "run_id": run_id, "rank": rank,
                "local_rank": rank % per_host, "world_size": world_size,
                "group_rank": rank // per_host, "restart_count": restart, "host": host,
                "master_addr": "node0000", "master_port": 29500}
    main = r["threads"][0]
    if kind == "shutdown":
        r["signal"] = {"number": 15, "name": "SIGTERM", "code": 0, "code_name": "SI_USER",
                       "description": "SI_USER: sent by kill", "fault_address": None,
                       "sender_pid": 999, "sender_uid": 0}
        r["diagnosis"] = {"summary": f"SIGTERM sent by pid 999 while in {call}",
                          "category": "shutdown", "signature": "0000000000000015"}
        main["frames"] = waiting_frames(call, line)
    elif kind == "exception":
        r["signal"] = {"number": 0, "name": "NONE", "code": 0, "code_name": "NONE",
                       "description": "uncaught Python exception", "fault_address": None}
        msg = message or "[gloo] Timed out waiting 5000ms for recv operation to complete"
        r["exception"] = {"type": "RuntimeError", "message": msg}
        r["diagnosis"] = {"summary": f"RuntimeError: {msg}", "category": "python-exception",
                          "signature": "00000000000000e1"}
        main["frames"] = waiting_frames(call, line)
    return r


def write_job(directory, run_id="job-1", world_size=4, root=2, root_kind="crash",
              missing=(), restart=0, per_host=8, collateral_kind="shutdown", delay_ms=250,
              prefix=""):
    """Writes the job's reports into DIRECTORY; returns {rank: path}."""
    base = base_report()
    paths = {}
    for rank in range(world_size):
        if rank in missing:
            continue
        if rank == root:
            r = rank_report(base, run_id, rank, world_size, root_kind, 0, per_host, restart)
        else:
            r = rank_report(base, run_id, rank, world_size, collateral_kind,
                            delay_ms + rank % 7, per_host, restart)
        path = os.path.join(directory, f"{prefix}faultline-{run_id}-r{restart}-{rank:05d}.json")
        with open(path, "w") as f:
            json.dump(r, f)
        paths[rank] = path
    return paths
