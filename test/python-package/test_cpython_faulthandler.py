"""CPython's own test_faulthandler (the interpreter's Lib/test) against
faultline: run once as it is and once with faultline's functions standing in
for faulthandler's (cpython_faulthandler_suite.py), in Debian's 3.11 (the
libpython3.11-testsuite package) and the newest pyenv 3.x. Every test that
passes against faulthandler must pass against faultline; the tests that
cannot, by design, are listed in doc/python-package.md (none today)."""
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


def interpreters():
    return [pytest.param("/usr/bin/python3.11", id="debian-3.11"),
            pytest.param(newest_pyenv(), id="pyenv-newest")]


def has_suite(python):
    p = subprocess.run([python, "-c", "import test.test_faulthandler"], capture_output=True)
    return p.returncode == 0


def outcomes(python, mode, work):
    env = dict(os.environ, FAULTLINE_LIB=fltest.LIB)
    p = subprocess.run([sys.executable, SUITE, python, mode, str(work)], capture_output=True,
                       text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("python", interpreters())
def test_faultline_passes_what_faulthandler_passes(python, tmp_path):
    pyenvs.require(python)
    if not has_suite(python):
        pytest.fail(f"{python} has no test.test_faulthandler (Debian: apt-get install "
                    f"libpython3.11-testsuite; tools/install-deps.sh installs it)")
    theirs = outcomes(python, "faulthandler", tmp_path / "faulthandler")
    ours = outcomes(python, "faultline", tmp_path / "faultline")
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
