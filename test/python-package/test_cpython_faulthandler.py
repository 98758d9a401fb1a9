"""CPython's own test_faulthandler (the interpreter's Lib/test) against
faultline: run once as it is and once with faultline's functions standing in
for faulthandler's (cpython_faulthandler_suite.py), in Debian's 3.11 (the
libpython3.11-testsuite package), the newest pyenv 3.x and the Debian sid
root's 3.14 (tools/torch-root; libpython3.14-testsuite installed there). Every test that
passes against faulthandler must pass against faultline; the tests that
cannot, by design, are listed in doc/python-package.md (none today)."""
import glob
import json
import os
import subprocess
import sys

import pytest

import fltest
import pyenvs

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "cpython_faulthandler_suite.py")


def newest_pyenv():
    for minor in reversed(pyenvs.MINORS):
        prefix = pyenvs.pyenv_prefix(minor)
        if prefix:
            return os.path.join(prefix, "bin", "python3")
    return None


SID_ROOT = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")


def interpreters():
    return [pytest.param("/usr/bin/python3.11", id="debian-3.11"),
            pytest.param(newest_pyenv(), id="pyenv-newest"),
            pytest.param("sid", id="sid-3.14")]


def in_root(cmd, tmp_path):
    """cmd in the sid root (tools/torch-root: the checkout and the build
    bound read-only, tmp_path writable)."""
    env = ["PATH=/usr/bin:/bin", "LANG=C.UTF-8", f"HOME={tmp_path}", f"FAULTLINE_LIB={fltest.LIB}"]
    return [os.path.join(fltest.SOURCE, "tools", "torch-root"), "run", "--bind", fltest.BUILD,
            "--rw", str(tmp_path), "--cd", fltest.SOURCE, "--", "env", "-i", *env, *cmd]


def require_suite(python, tmp_path):
    if python == "sid":
        if not os.path.exists(os.path.join(SID_ROOT, ".faultline-root-complete")):
            if os.environ.get("FAULTLINE_PY_ALLOW_MISSING") == "1":
                pytest.skip(f"no sid root at {SID_ROOT}")
            pytest.fail(f"no sid root at {SID_ROOT}: tools/torch-root make")
        if not glob.glob(os.path.join(SID_ROOT, "usr/lib/python3.*/test/test_faulthandler.py")):
            pytest.skip("the sid root has no test_faulthandler: tools/torch-root run -- "
                        "apt-get install libpython3.14-testsuite")
        return
    pyenvs.require(python)
    p = subprocess.run([python, "-c", "import test.test_faulthandler"], capture_output=True)
    if p.returncode != 0:
        pytest.fail(f"{python} has no test.test_faulthandler (Debian: apt-get install "
                    f"libpython3.11-testsuite; tools/install-deps.sh installs it)")


def outcomes(python, mode, work, tmp_path):
    if python == "sid":
        cmd = in_root(["python3", SUITE, "/usr/bin/python3", mode, str(work)], tmp_path)
    else:
        cmd = [sys.executable, SUITE, python, mode, str(work)]
    env = dict(os.environ, FAULTLINE_LIB=fltest.LIB)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("python", interpreters())
def test_faultline_passes_what_faulthandler_passes(python, tmp_path):
    require_suite(python, tmp_path)
    theirs = outcomes(python, "faulthandler", tmp_path / "faulthandler", tmp_path)
    ours = outcomes(python, "faultline", tmp_path / "faultline", tmp_path)
    passed = sorted(t for t, r in theirs.items() if r == "ok")
    assert len(passed) > 30, theirs  # the suite ran
    log = (tmp_path / "faultline" / "faultline.log").read_text()
    assert [t for t in passed if ours.get(t) != "ok"] == [], log
    # faultline wrote its reports beside the text (the suite's children
    # crash and dump with FAULTLINE_DIR set).
    reports = list((tmp_path / "faultline" / "reports").glob("faultline-*.json"))
    assert reports, "no faultline report written"
    kinds = {fltest.validate(json.loads(p.read_text()))["kind"] for p in reports}
    assert {"crash", "dump"} <= kinds, kinds
