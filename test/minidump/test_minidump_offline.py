"""The minidump writer over a captured state (mdgen), read by lldb-14: the
thread count, each thread's registers and stack let lldb unwind the saving
thread through md_leaf, md_middle and main, and the parked ones through md_park."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

BUILD = os.environ.get("FAULTLINE_BUILD", "build")
MDGEN = os.path.join(BUILD, "test-programs", "mdgen")
LLDB = shutil.which("lldb-14")


def test_header_and_size():
    d = tempfile.mkdtemp(prefix="faultline-md-")
    try:
        out = os.path.join(d, "x.dmp")
        p = subprocess.run([MDGEN, out, "4"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        data = open(out, "rb").read()
        assert data[:4] == b"MDMP" and int.from_bytes(data[8:12], "little") >= 8
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(LLDB is None, reason="lldb-14 is not installed (tools/install-deps.sh)")
def test_lldb_unwinds_every_thread():
    d = tempfile.mkdtemp(prefix="faultline-md-")
    try:
        out = os.path.join(d, "x.dmp")
        assert subprocess.run([MDGEN, out, "4"], timeout=60).returncode == 0
        p = subprocess.run([LLDB, "--batch", "-c", out, MDGEN, "-o", "thread backtrace all", "-o", "version"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        # "version" after the backtrace: lldb writes the whole backtrace before it.
        text = p.stdout.split("(lldb) version")[0]
        threads = re.split(r"\n\s*\*?\s*thread #\d+", text)[1:]
        assert len(threads) == 5, text
        first = threads[0]
        assert "stop reason = signal SIGSEGV" in first
        names = re.findall(r"frame #\d+: 0x[0-9a-f]+ \S+`(?:\(anonymous namespace\)::)?(\w+)", first)
        assert names[:3] == ["md_leaf", "md_middle", "main"], text
        for t in threads[1:]:
            assert "md_park" in t and "worker" in t, text
    finally:
        shutil.rmtree(d, ignore_errors=True)
