"""Synthetic faultline/1 reports for the CLI tests and the triage benchmark.

Twelve distinct crashes (CRASHES), each rendered into as many reports as
wanted with everything that differs between runs of the same crash varied:
pids, tids, load addresses (ASLR), host names, ranks, temporary directories,
hashed file names of generated code, timestamps. Grouping them by crash must
give back exactly the twelve.
"""

import json
import os
import random

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBPY = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
TORCH = "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
CUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
SERVER = "/srv/bin/inference-server"
SITE = "/opt/venv/lib/python3.11/site-packages"


def native(module, symbol, offset=0x40, origin="native"):
    return {"kind": "native", "origin": origin, "module": module, "symbol": symbol,
            "symbol_offset": offset}


def stripped(module, module_offset, origin="native"):
    return {"kind": "native", "origin": origin, "module": module,
            "module_offset_fixed": module_offset}


def py(file, line, function, origin="python", qualname=None):
    f = {"kind": "python", "origin": origin, "file": file, "line": line, "function": function}
    if qualname:
        f["qualname"] = qualname
    return f


def eval_frame():
    return native(LIBPY, "_PyEval_EvalFrameDefault", 0x2e53, origin="cpython")


# Each crash: signal, si_code, category, whether the writer put a signature in
# (reports of older writers have none: triage computes one), and the crashed
# thread's frames, innermost first. "{tmp}" and "{hash}" vary per report.
CRASHES = [
    dict(name="memmove-null", sig=("SIGSEGV", 11, 1, "SEGV_MAPERR"), category="null-deref",
         signature=True, frames=[
             native(LIBC, "__memmove_avx_unaligned_erms", 0x40),
             native(TORCH, "_ZN2at6native12_GLOBAL__N_19copy_implERNS_6TensorERKS2_b", 0x1f0, "aten"),
             eval_frame(),
             py("{tmp}/train.py", 41, "step", qualname="Trainer.step"),
             py("{tmp}/train.py", 88, "main"),
         ]),
    dict(name="inductor-kernel", sig=("SIGSEGV", 11, 2, "SEGV_ACCERR"), category="access-violation",
         signature=False, frames=[
             stripped("/tmp/torchinductor_{user}/{h2}/c{hash}.so", 0x1a20, "inductor"),
             eval_frame(),
             py("/tmp/torchinductor_{user}/{h2}/c{hash}.py", 120, "call", "inductor"),
             py(SITE + "/torch/_inductor/codecache.py", 900, "__call__", "inductor"),
             py(SITE + "/torch/_dynamo/eval_frame.py", 451, "_fn", "dynamo"),
             py("{tmp}/model.py", 17, "forward", qualname="Net.forward"),
         ]),
    dict(name="abort-assert", sig=("SIGABRT", 6, -6, "SI_TKILL"), category="abort",
         signature=True, frames=[
             native(LIBC, "__pthread_kill_implementation", 0x11c),
             native(LIBC, "raise", 0x12),
             native(LIBC, "abort", 0xd3),
             native(SERVER, "_ZN6server5Batch8validateEv", 0x88),
             native(SERVER, "_ZN6server6Worker3runEv", 0x1f4),
         ]),
    dict(name="terminate", sig=("SIGABRT", 6, -6, "SI_TKILL"), category="uncaught-exception",
         kind="terminate", signature=False, frames=[
             native(LIBC, "__pthread_kill_implementation", 0x11c),
             native(LIBC, "abort", 0xd3),
             native("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "_ZSt9terminatev", 0x1a),
             native(SERVER, "_ZN6server6Loader4loadERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", 0x3c),
         ]),
    dict(name="cuda-bus", sig=("SIGBUS", 7, 2, "BUS_ADRERR"), category="bus-error",
         signature=True, frames=[
             stripped(CUDA, 0x2a1f30),
             stripped(CUDA, 0x2b0010),
             native(TORCH, "_ZN2at4cuda4blas4gemmIfEEvcclll", 0x90, "aten"),
             eval_frame(),
             py("{tmp}/bench.py", 12, "matmul"),
         ]),
    dict(name="fpe-div", sig=("SIGFPE", 8, 1, "FPE_INTDIV"), category="divide-by-zero",
         signature=False, frames=[
             native(SERVER, "_ZN6server5stats4meanERKSt6vectorIlSaIlEE", 0x21),
             native(SERVER, "_ZN6server6Worker6reportEv", 0x77),
         ]),
    dict(name="stack-overflow", sig=("SIGSEGV", 11, 2, "SEGV_ACCERR"), category="stack-overflow",
         signature=True, frames=[
             native(SERVER, "_ZN6server4json5parseERKNS_5TokenE", 0x12),
             native(SERVER, "_ZN6server4json5parseERKNS_5TokenE", 0x1a2),
             native(SERVER, "_ZN6server4json5parseERKNS_5TokenE", 0x1a2),
         ]),
    # Same innermost frame as memmove-null, reached from other Python code: another bug.
    dict(name="memmove-null-eval", sig=("SIGSEGV", 11, 1, "SEGV_MAPERR"), category="null-deref",
         signature=False, frames=[
             native(LIBC, "__memmove_avx_unaligned_erms", 0x40),
             native(TORCH, "_ZN2at6native12_GLOBAL__N_19copy_implERNS_6TensorERKS2_b", 0x1f0, "aten"),
             eval_frame(),
             py("{tmp}/evaluate.py", 30, "score"),
         ]),
    # Same frames as memmove-null-eval but SIGBUS: another crash.
    dict(name="memmove-bus-eval", sig=("SIGBUS", 7, 2, "BUS_ADRERR"), category="bus-error",
         signature=False, frames=[
             native(LIBC, "__memmove_avx_unaligned_erms", 0x40),
             native(TORCH, "_ZN2at6native12_GLOBAL__N_19copy_implERNS_6TensorERKS2_b", 0x1f0, "aten"),
             eval_frame(),
             py("{tmp}/evaluate.py", 30, "score"),
         ]),
    dict(name="triton-launch", sig=("SIGSEGV", 11, 1, "SEGV_MAPERR"), category="null-deref",
         signature=False, frames=[
             stripped("/root/.triton/cache/{hash}/cuda_utils.so", 0x3f00, "triton"),
             eval_frame(),
             py(SITE + "/triton/backends/nvidia/driver.py", 444, "__call__", "triton"),
             py("/tmp/torchinductor_{user}/{h2}/c{hash}.py", 77, "call", "inductor"),
             py("{tmp}/model.py", 17, "forward", qualname="Net.forward"),
         ]),
    dict(name="ill-avx512", sig=("SIGILL", 4, 1, "ILL_ILLOPC"), category="illegal-instruction",
         signature=True, frames=[
             native("/opt/venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
                    "AVX512F_add_DOUBLE", 0x55),
             eval_frame(),
             py("{tmp}/prep.py", 9, "normalize"),
         ]),
    dict(name="gil-release", sig=("SIGSEGV", 11, 1, "SEGV_MAPERR"), category="null-deref",
         signature=False, frames=[
             native(LIBPY, "take_gil", 0x5e, origin="cpython"),
             native(LIBPY, "PyEval_RestoreThread", 0x1b, origin="cpython"),
             native("/opt/venv/lib/python3.11/site-packages/ext/_fast.cpython-311-x86_64-linux-gnu.so",
                    "fast_loop", 0x2c0),
             eval_frame(),
             py("{tmp}/worker.py", 55, "run", qualname="Worker.run"),
         ]),
]

assert len(CRASHES) == 12
assert len({c["name"] for c in CRASHES}) == 12


def _signature_of(name):
    # What a writer that computes signatures would put in: fixed per crash.
    return "%016x" % (hash_str(name) & 0xFFFFFFFFFFFFFFFF)


def hash_str(s):
    h = 0xcbf29ce484222325
    for c in s.encode():
        h ^= c
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def _fill(text, ctx):
    return text.format(**ctx) if isinstance(text, str) else text


def make_report(crash, rng, index=0):
    """One report of `crash` with run-specific details drawn from `rng`."""
    pid = rng.randint(1000, 4_000_000)
    ctx = {
        "tmp": "/tmp/tmp" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8)),
        "hash": "".join(rng.choice("0123456789abcdef") for _ in range(40)),
        "user": rng.choice(["root", "alice", "bob"]),
    }
    ctx["h2"] = ctx["hash"][:2]
    bases = {}

    def base_of(module):
        if module not in bases:
            bases[module] = 0x7f0000000000 + rng.randrange(0, 0xffffff) * 0x1000
        return bases[module]

    frames = []
    for tmpl in crash["frames"]:
        f = {k: _fill(v, ctx) for k, v in tmpl.items()}
        if f["kind"] == "native":
            module = f["module"]
            if "module_offset_fixed" in f:
                off = f.pop("module_offset_fixed")
            else:
                off = 0x10000 + hash_str(f["symbol"]) % 0x100000 + f["symbol_offset"]
                f["symbol_offset"] = hex(f["symbol_offset"])
            f["module_offset"] = hex(off)
            f["pc"] = hex(base_of(module) + off)
            f["sp"] = hex(0x7ffc00000000 + rng.randrange(0, 0xfffffff) * 16)
        frames.append(f)
    tid = pid
    sig_name, signo, code, code_name = crash["sig"]
    top = frames[0]
    where = (os.path.basename(top["module"]) + "!" + top.get("symbol", top["module_offset"])
             if top["kind"] == "native" else top["function"])
    fault = hex(rng.randrange(0, 0x1000)) if signo in (7, 11) else ("0x0" if signo in (4, 8) else None)
    day = 1 + index % 28
    report = {
        "schema": "faultline/1",
        "kind": crash.get("kind", "crash"),
        "timestamp": "2026-11-%02dT%02d:%02d:%02d.%03dZ" % (day, rng.randrange(24), rng.randrange(60),
                                                             rng.randrange(60), rng.randrange(1000)),
        "signal": {"number": signo, "name": sig_name, "code": code, "code_name": code_name,
                   "description": "%s: generated" % code_name, "fault_address": fault},
        "diagnosis": {"summary": "%s in %s" % (sig_name, where), "category": crash["category"],
                      "signature": _signature_of(crash["name"])},
        "process": {"pid": pid, "ppid": 1, "executable": "/usr/bin/python3.11",
                    "argv": ["python3", ctx["tmp"] + "/train.py", "--rank=%d" % rng.randrange(256)],
                    "cwd": ctx["tmp"], "hostname": "node%d" % rng.randrange(64),
                    "start_time": "2026-11-%02dT00:00:00.000Z" % day, "uid": 1000},
        "python": {"version": "3.11.7", "implementation": "cpython"},
        "crashed_tid": tid,
        "threads": [
            {"tid": tid, "name": "python3", "crashed": True, "unwinder": "libunwind",
             "frames_total": len(frames), "frames_truncated": False, "frames": frames},
            {"tid": tid + 1 + rng.randrange(50), "name": "pt_autograd_0", "crashed": False,
             "frames_total": 1, "frames_truncated": False,
             "frames": [{"kind": "native", "origin": "native", "pc": hex(base_of(LIBC) + 0x91d36),
                         "module": LIBC, "module_offset": "0x91d36", "symbol": "__futex_abstimed_wait_common",
                         "symbol_offset": "0x106"}]},
        ],
        "modules": [{"path": m, "base": hex(b), "size": "0x200000", "load_bias": hex(b),
                     "build_id": "%040x" % hash_str(m)} for m, b in sorted(bases.items())],
        "annotations": {"test.crash": crash["name"]},  # the truth, for checking groups
        "breadcrumbs": [],
        "faultline": {"version": "0.1.0", "capture_ns": rng.randrange(100000, 900000), "errors": []},
    }
    if not crash["signature"]:
        del report["diagnosis"]["signature"]  # an older writer: triage computes one
    return report


def write_reports(directory, count, seed=7, crashes=CRASHES):
    """Writes `count` reports spread over the crashes (and over per-host
    subdirectories). Returns {crash name: number of reports}."""
    rng = random.Random(seed)
    counts = {}
    for i in range(count):
        crash = crashes[i % len(crashes)]
        report = make_report(crash, rng, i)
        host = report["process"]["hostname"]
        sub = os.path.join(directory, host)
        os.makedirs(sub, exist_ok=True)
        name = "faultline-20261130T%06d-%d-%d.json" % (i, report["process"]["pid"], report["crashed_tid"])
        with open(os.path.join(sub, name), "w") as f:
            json.dump(report, f)
        counts[crash["name"]] = counts.get(crash["name"], 0) + 1
    return counts
