"""Parity with CPython's faulthandler: every scenario in scenarios/ runs once
with -X faulthandler and once under the preload, on every interpreter; the
report must give the same (file, line, function) sequence as faulthandler for
the crashing thread and for every other thread faulthandler lists."""
import concurrent.futures
import os
import subprocess

import pytest

import faulthandler_text
import fltest
import pyenvs

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = sorted(f for f in os.listdir(os.path.join(HERE, "scenarios")) if f.endswith(".py"))
# What the crashed thread's holds_gil must be, where the scenario decides it.
HOLDS_GIL = {"nested_segv.py": True, "gil_released.py": False, "deep_recursion.py": True}


def run_scenario(python, script):
    path = os.path.join(HERE, "scenarios", script)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
    fh = fltest.run([python, "-X", "faulthandler", path], preload=False, env=env, timeout=60)
    fl = fltest.run([python, path], env=env, timeout=60)
    return script, fh, fl


@pytest.fixture(scope="module")
def runs_by_python():
    return {}


def runs_for(python, cache):
    if python not in cache:
        # Two at a time: the machine is shared.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            cache[python] = {s: (fh, fl) for s, fh, fl in pool.map(lambda s: run_scenario(python, s), SCENARIOS)}
    return cache[python]


def report_threads(report):
    return [(t, faulthandler_text.as_faulthandler(frames)) for t, frames in pyenvs.python_threads(report)]


@pytest.mark.parametrize("script", SCENARIOS)
@pytest.mark.parametrize("python", pyenvs.interpreter_params())
def test_same_frames_as_faulthandler(python, script, runs_by_python):
    python = pyenvs.require(python)
    fh, fl = runs_for(python, runs_by_python)[script]
    dumped = faulthandler_text.parse(fh.stderr)
    assert dumped, f"faulthandler printed no traceback:\n{fh.stderr}"
    assert fl.signal is not None, "the process did not die of a signal under the preload"
    report = fl.report
    fltest.validate(report)
    assert report["python"] is not None, report["faultline"]["errors"]
    minor = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True).stdout.strip()
    assert report["python"]["version"].startswith(minor)

    threads = report_threads(report)
    crashed = [(t, frames) for t, frames in threads if t["crashed"]]
    assert len(crashed) == 1
    t, frames = crashed[0]
    current = [d for d in dumped if d[0]]
    assert len(current) == 1, dumped
    assert frames == current[0][1], f"crashed thread differs (python_error: {t.get('python_error')})"
    assert "python_error" not in t
    if current[0][2]:  # faulthandler cut the stack: the report must not have
        assert t["python_frames_total"] > faulthandler_text.MAX_FRAME_DEPTH
    if script in HOLDS_GIL:
        assert t["holds_gil"] is HOLDS_GIL[script]

    others = [d[1] for d in dumped if not d[0]]
    report_others = [frames for t, frames in threads if not t["crashed"]]
    for seq in others:
        assert seq in report_others, f"thread {seq} of faulthandler missing from the report {report_others}"
    # Exactly one thread holds the GIL, or none when the crashed thread had
    # released it and no one took it.
    holders = [t for t in report["threads"] if t.get("holds_gil")]
    assert len(holders) <= 1


@pytest.mark.parametrize("python", pyenvs.interpreter_params())
def test_interpreter_known_from_the_install(python, runs_by_python):
    # The install finds the interpreter through CPython's exported symbols as
    # the loader bound them (no symbol tables read at start); a crash uses
    # that answer. "crash" here would mean the install-time path failed and
    # every crash paid for a lookup in the modules' symbol tables.
    python = pyenvs.require(python)
    _, fl = runs_for(python, runs_by_python)[SCENARIOS[0]]
    rep = fl.report
    ver = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # 3.9 and 3.10 have no Py_Version: their minor version comes from the
    # module's name ("3.9").
    assert ver == rep["python"]["version"] or ver.startswith(rep["python"]["version"] + ".")
    assert rep["python"]["runtime_found"] == "install"
