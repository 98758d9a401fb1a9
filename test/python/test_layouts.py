"""The walker's checked-in layout tables (src/core/python/layouts.cpp) against
offsetof() from each interpreter's own internal headers, as printed by
tools/python-layout-probe. A silent layout mistake becomes this failure."""
import os
import subprocess

import pytest

import fltest
import pyenvs

PROBE = os.path.join(fltest.SOURCE, "tools", "python-layout-probe", "run-probe")
DUMP = os.path.join(fltest.BUILD, "test-programs", "python_layout_dump")


def include_dirs():
    out = [pytest.param("/usr/include/python3.11", id="debian-3.11")]
    for minor in pyenvs.MINORS:
        prefix = pyenvs.pyenv_prefix(minor)
        out.append(pytest.param(os.path.join(prefix, "include", "python" + minor) if prefix else None,
                                id="pyenv-" + minor))
    return out


def parse(text):
    return dict((k, int(v)) for k, v in (line.split() for line in text.splitlines() if line and not line.startswith("version")))


@pytest.mark.parametrize("inc", include_dirs())
def test_tables_match_headers(inc):
    pyenvs.require(inc)
    probe = subprocess.run([PROBE, inc], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    minor = probe.stdout.splitlines()[0].split()[1].split(".")[1]
    expected = parse(probe.stdout)
    assert os.path.exists(DUMP), "build the python_layout_dump target"
    dump = subprocess.run([DUMP, minor], capture_output=True, text=True, check=True)
    table = parse(dump.stdout)
    assert table, f"the walker has no layout for 3.{minor}"
    wrong = {k: (v, expected.get(k)) for k, v in table.items() if expected.get(k) != v}
    assert not wrong, f"table vs headers (table, headers): {wrong}"
