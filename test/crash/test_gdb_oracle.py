"""Oracle: gdb's backtrace of the core file of the very process that wrote the
report. Frame by frame, the pcs agree, and the function names agree wherever
both gdb and the report name one; frames of the test programs must be named."""
import os
import re
import resource
import subprocess

import pytest

import fltest

FRAME_RE = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+) \(")


def gdb_bt(exe, core):
    out = subprocess.run(["gdb", "-batch", "-nx", "-ex", "set pagination off", "-ex", "bt", exe, core],
                         capture_output=True, text=True, timeout=120).stdout
    frames = []
    for line in out.splitlines():
        m = FRAME_RE.match(line)
        if m:
            frames.append((int(m.group(1)), m.group(2), m.group(3)))
    return frames, out


def crash_with_core(tmp_path, args):
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_STDERR="0")
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (-1, -1)))
    assert p.returncode < 0
    reports = [f for f in os.listdir(tmp_path) if f.startswith("faultline-")]
    assert len(reports) == 1
    import json
    with open(tmp_path / reports[0]) as f:
        rep = json.load(f)
    chosen = env.get("FAULTLINE_UNWINDER")
    if chosen:  # the suite run for one unwinder must have used it
        assert fltest.crashed_thread(rep)["unwinder"].startswith(chosen), fltest.crashed_thread(rep)["unwinder"]
    return rep


@pytest.mark.skipif(open("/proc/sys/kernel/core_pattern").read().strip() != "core",
                    reason="needs core_pattern 'core'")
@pytest.mark.parametrize("args", [["null-read"], ["bad-fnptr"], ["div-zero"], ["ro-write"],
                                  ["dlopen", "LIB"], ["deep"]])
def test_frames_agree_with_gdb(tmp_path, args):
    if args == ["deep"]:
        exe, argv = fltest.program("deep"), [fltest.program("deep")]
    else:
        exe = fltest.program("crasher")
        argv = [exe] + [fltest.program("libcrashlib.so") if a == "LIB" else a for a in args]
    rep = crash_with_core(tmp_path, argv)
    ours = fltest.crashed_thread(rep)["frames"]
    gdb, text = gdb_bt(exe, str(tmp_path / "core"))
    assert len(gdb) >= 3, text
    own_modules = (os.path.realpath(exe), os.path.realpath(fltest.program("libcrashlib.so")))
    compared = 0
    for idx, pc, name in gdb:
        if idx >= len(ours):
            break
        f = ours[idx]
        if pc is not None:
            assert int(pc, 16) == int(f["pc"], 16), f"frame {idx}: gdb {pc} vs report {f['pc']}\n{text}"
        if name != "??" and f.get("symbol"):
            # gdb prints demangled names without arguments for C++ frames.
            ours_name = f["symbol"]
            if ours_name.startswith("_Z"):
                ours_name = subprocess.run(["c++filt", "-p", ours_name], capture_output=True,
                                           text=True).stdout.strip()
            assert ours_name == name or ours_name.split("(")[0] == name, f"frame {idx}\n{text}"
            compared += 1
        elif f.get("module") in own_modules:
            pytest.fail(f"frame {idx} in the test program has no symbol in the report\n{text}")
    assert compared >= 3


@pytest.mark.skipif(open("/proc/sys/kernel/core_pattern").read().strip() != "core",
                    reason="needs core_pattern 'core'")
@pytest.mark.parametrize("unwinder", ["cfi", "libunwind"])
@pytest.mark.parametrize("mode", ["null", "one", "freed-jit", "no-unwind-info"])
def test_first_frame_without_unwind_info(tmp_path, monkeypatch, mode, unwinder):
    """main -> dispatch -> apply -> (*f)() with f null, 0x1 or unmapped JIT
    code, and a leaf in a library without unwind tables (-O2, no frame
    pointers): every caller is kept, frame for frame as gdb sees the core."""
    monkeypatch.setenv("FAULTLINE_UNWINDER", unwinder)
    exe = fltest.program("fnptr")
    rep = crash_with_core(tmp_path, [exe, mode, fltest.program("libnounwind.so")])
    thread = fltest.crashed_thread(rep)
    ours = thread["frames"]
    assert thread["unwinder"].startswith(unwinder), thread["unwinder"]
    gdb, text = gdb_bt(exe, str(tmp_path / "core"))
    # gdb prints frame 0 once more when it loads the core: by index.
    by_idx = {idx: (pc, name) for idx, pc, name in gdb}
    assert [by_idx[i][1] for i in (1, 2, 3)] == ["apply", "dispatch", "main"], text
    for idx in range(4):
        pc, name = by_idx[idx]
        f = ours[idx]
        if pc is not None:
            assert int(pc, 16) == int(f["pc"], 16), f"frame {idx}: gdb {pc} vs report {f['pc']}\n{text}"
        if idx > 0:
            assert f.get("symbol") == name, f"frame {idx}: {f.get('symbol')}\n{text}"
