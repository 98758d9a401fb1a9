"""process_vm_readv denied by seccomp (as in some containers): the SafeReader
falls back to its pipe method and the Python frames are still captured."""
import os
import subprocess
import tempfile

import pytest

import fltest
import pyenvs

HERE = os.path.dirname(os.path.abspath(__file__))

JOB = """
import ctypes

def under_seccomp():
    ctypes.string_at(0)

under_seccomp()
"""

PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
n = libc.syscall(310, os.getpid(), iov, 1, iov, 1, 0)
print(n, ctypes.get_errno())
"""


@pytest.fixture(scope="module")
def launcher():
    out = os.path.join(tempfile.mkdtemp(prefix="faultline-seccomp-"), "seccomp_launcher")
    pyenvs.cc(["cc", "-O1", "-o", out, os.path.join(HERE, "native", "seccomp_launcher.c")])
    return out


def test_filter_really_denies(launcher):
    # Without this, a launcher that filters nothing would pass the test below.
    p = subprocess.run([launcher, "/usr/bin/python3.11", "-c", PROBE], capture_output=True, text=True)
    assert p.stdout.split() == ["-1", "1"], p.stdout + p.stderr  # EPERM


@pytest.mark.parametrize("python", [pytest.param("/usr/bin/python3.11", id="debian-3.11"),
                                    pytest.param(dict(pyenvs.interpreters())["pyenv-3.12"], id="pyenv-3.12")])
def test_python_frames_with_process_vm_readv_denied(launcher, python):
    python = pyenvs.require(python)
    r = fltest.run([launcher, python, "-c", JOB])
    rep = r.report
    fltest.validate(rep)
    assert rep["faultline"]["safe_read"] == "pipe"
    t = fltest.crashed_thread(rep)
    assert [f["function"] for f in t["frames"] if f["kind"] == "python"] == ["string_at", "under_seccomp", "<module>"]
    assert "python_error" not in t
