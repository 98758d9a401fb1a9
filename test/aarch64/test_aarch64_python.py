"""Python frames on aarch64: an arm64 CPython (Debian bookworm's 3.11, from
the root tools/arm64-root makes and caches) crashes under qemu-user with
the cross-built preload; the report's Python frames of the crashing thread
equal faulthandler's traceback of the same crash without faultline."""
import glob
import json
import os
import re
import subprocess

import pytest

import arm64

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("FAULTLINE_ARM64_ROOT", "/var/cache/faultline/arm64-root")


def python_root():
    arm64.require_tools()
    if not os.path.exists(os.path.join(ROOT, ".faultline-root-complete")):
        pytest.skip(f"no arm64 root at {ROOT} (tools/arm64-root make)")
    return ROOT


def run_python(root, args, cwd, preload=None, env=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.pop("PYTHONHOME", None)
    e.pop("PYTHONPATH", None)
    e.update(env or {})
    if preload:
        e["LD_PRELOAD"] = preload
    # -L: the guest's absolute paths (its loader, libraries, stdlib) are
    # looked up in the root first.
    return subprocess.run(["qemu-aarch64-static", "-L", root, root + "/usr/bin/python3", *args],
                          cwd=cwd, env=e, capture_output=True, text=True, timeout=300)


def test_python_frames_equal_faulthandler(tmp_path):
    root = python_root()
    lib = arm64.library()
    script = os.path.join(HERE, "pycrash.py")
    fh = run_python(root, [script, "faulthandler"], cwd=str(tmp_path))
    expected = re.findall(r'^  File "([^"]+)", line (\d+) in (\S+)', fh.stderr, re.M)
    assert [f[2] for f in expected][:4] == ["string_at", "leaf", "middle", "outer"], fh.stderr
    withfl = run_python(root, [script], cwd=str(tmp_path), preload=lib,
                        env={"FAULTLINE_DIR": str(tmp_path)})
    assert withfl.returncode == fh.returncode < 0, withfl.stderr
    report = json.load(open(glob.glob(str(tmp_path / "faultline-*.json"))[0]))
    assert report["process"]["arch"] == "aarch64"
    assert report["python"]["version"].startswith("3.11")
    t = next(t for t in report["threads"] if t["tid"] == report["crashed_tid"])
    got = [(f["file"], str(f["line"]), f["function"]) for f in t["frames"]
           if f.get("kind") == "python"]
    assert got == expected, (got, expected)
