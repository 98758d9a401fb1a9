"""faulthandler's text, as faultline writes it: the preloaded library's
crash text against faulthandler's own in the same process (preload and -X
faulthandler: faulthandler writes first, then hands the signal on), `faultline
show --faulthandler` against the same, and who writes what when both are
there (the text once, faultline's additions after it)."""
import glob
import os
import re
import signal
import subprocess
import sys

import pytest

import fltest
import pyenvs
from pkgtest import PYTHONPATH

CRASH = """
import sys, threading, ctypes
ev = threading.Event()
def worker():
    ev.wait()
threads = [threading.Thread(target=worker) for _ in range(2)]
for t in threads:
    t.start()
def crash_\u00e9():
    if sys.argv[1] == "fpe":
        import faulthandler
        faulthandler._sigfpe()
    ctypes.string_at(0)
crash_\u00e9()
"""
HEADER = "Fatal Python error: "
C_STACK = "\nCurrent thread's C stack trace (most recent call first):\n"


def crash(python, tmp_path, kind, pyflags=("-X", "faulthandler"), setup=""):
    script = tmp_path / "crash.py"
    script.write_text(setup + CRASH, encoding="utf-8")
    r = fltest.run([python, *pyflags, str(script), kind], env={"PYTHONPATH": PYTHONPATH},
                   timeout=120)
    expected = signal.SIGFPE if kind == "fpe" else signal.SIGSEGV
    assert r.returncode == -expected, r.stderr
    return r


def blocks(stderr):
    """faulthandler's text and faultline's, in that order (up to the C
    stack, which 3.14's faulthandler writes too)."""
    parts = stderr.split(HEADER)
    assert len(parts) == 3, stderr
    theirs = HEADER + parts[1].split("\nExtension modules:")[0].split(C_STACK)[0]
    assert C_STACK in parts[2], stderr
    ours = HEADER + parts[2].split(C_STACK)[0]
    return theirs, ours


def crash_in_sid(tmp_path, kind, pyflags=("-X", "faulthandler")):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch2"))
    import rootrun
    if not os.path.exists(os.path.join(rootrun.fltest.SOURCE, "tools", "torch-root")):
        pytest.skip("no tools/torch-root")
    root = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")
    if not os.path.exists(os.path.join(root, ".faultline-root-complete")):
        pytest.skip(f"no sid root at {root}")
    script = tmp_path / "crash.py"
    script.write_text(CRASH, encoding="utf-8")
    r = rootrun.run(["python3", *pyflags, str(script), kind], tmp_path)
    assert r.signal == (signal.SIGFPE if kind == "fpe" else signal.SIGSEGV), r.stderr
    return r


def text_block(stderr):
    """The Python text of a crash (up to the C stack, which 3.14's
    faulthandler and faultline both write after it)."""
    parts = stderr.split(HEADER)
    assert len(parts) == 2, stderr  # once
    return HEADER + parts[1].split("\nExtension modules:")[0].split(C_STACK)[0]


def same_but_ids(text):
    """Thread ids and the run's own folder aside."""
    text = text.replace("/both/", "/RUN/").replace("/alone/", "/RUN/")
    return re.sub(r"0x[0-9a-f]{16}", "0xID", text)


@pytest.mark.parametrize("kind", ["segv", "fpe"])
@pytest.mark.parametrize("python", pyenvs.interpreter_params() + [pytest.param("sid", id="sid-3.14")])
def test_preloaded_text_is_faulthandlers(python, kind, tmp_path):
    # -X faulthandler under the preload: faulthandler writes its text, then
    # faultline its report, and the text is not written twice. The preload
    # alone writes the same text itself (thread ids aside: another run).
    (tmp_path / "both").mkdir()
    (tmp_path / "alone").mkdir()
    if python == "sid":
        both = crash_in_sid(tmp_path / "both", kind)
        alone = crash_in_sid(tmp_path / "alone", kind, pyflags=())
    else:
        pyenvs.require(python)
        both = crash(python, tmp_path / "both", kind)
        alone = crash(python, tmp_path / "alone", kind, pyflags=())
    theirs, ours = text_block(both.stderr), text_block(alone.stderr)
    assert "crash_\\xe9" in theirs and theirs.count("Thread 0x") == 2
    assert theirs.count("Current thread 0x") == 1
    assert same_but_ids(ours) == same_but_ids(theirs)
    # The report carries what `show --faulthandler` needs (pthread ids, the
    # interpreter's order): it prints the same text.
    (path,) = glob.glob(os.path.join(alone.report_dir, "faultline-*.json"))
    shown = fltest.cli("show", "--faulthandler", path, check=True)
    assert shown.stdout == ours


def test_api_writes_the_text_once_then_faultlines_additions(tmp_path):
    r = crash(pyenvs.interpreters()[0][1], tmp_path, "segv", pyflags=(),
              setup="import faultline; faultline.enable()\n")
    assert r.stderr.count(HEADER) == 1, r.stderr
    text, rest = r.stderr.split(C_STACK)
    assert text.startswith(HEADER + "Segmentation fault\n\n")
    assert "faultline: report written to " in rest
    assert fltest.validate(r.report)["kind"] == "crash"


def test_api_extras_off_leaves_faulthandlers_text_alone(tmp_path):
    r = crash(pyenvs.interpreters()[0][1], tmp_path, "segv", pyflags=(),
              setup="import faultline; faultline.enable(extras=False)\n")
    assert r.stderr.count(HEADER) == 1, r.stderr
    assert C_STACK not in r.stderr and "faultline:" not in r.stderr, r.stderr
    assert fltest.validate(r.report)["kind"] == "crash"


def test_start_up_hook_under_x_faulthandler_keeps_the_text_single(tmp_path):
    # The installed package's start-up hook (faultline-boot.pth imports
    # _faultline_boot in preloaded jobs): faulthandler writes the text,
    # faultline only its additions.
    r = crash(pyenvs.interpreters()[0][1], tmp_path, "segv",
              setup="import _faultline_boot\n")
    assert r.stderr.count(HEADER) == 1, r.stderr
    assert C_STACK in r.stderr and "faultline: report written to " in r.stderr


DUMP = """
import faulthandler, faultline, os, threading
ev = threading.Event()
ts = [threading.Thread(target=ev.wait, name="w\\u00e9rker-%d" % i) for i in range(2)]
for t in ts:
    t.start()
def dump_\u00e9(f, fd, all_threads):
    f(fd, all_threads=all_threads)
outs = []
for all_threads in (True, False):
    for f in (faulthandler.dump_traceback, faultline.dump_traceback):
        r, w = os.pipe()
        dump_\u00e9(f, w, all_threads)
        os.close(w)
        outs.append(os.read(r, 1000000))
ev.set()
print(outs[0] == outs[1], outs[2] == outs[3], outs[0].count(b"Thread 0x"))
"""


def dump_params():
    return pyenvs.interpreter_params() + [pytest.param("sid", id="sid-3.14")]


@pytest.mark.parametrize("python", dump_params())
def test_dump_traceback_is_faulthandlers_byte_for_byte(python, tmp_path):
    # Called the same way from the same line: faultline's text (written from
    # Python, without its own frame) equals faulthandler's, every thread,
    # non-ASCII names, 3.14's thread names.
    script = tmp_path / "dump.py"
    script.write_text(DUMP, encoding="utf-8")
    env = {"PYTHONPATH": PYTHONPATH, "FAULTLINE_LIB": "/nonexistent", "LANG": "C.UTF-8"}
    if python == "sid":
        root = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")
        if not os.path.exists(os.path.join(root, ".faultline-root-complete")):
            pytest.skip(f"no sid root at {root}")
        cmd = [os.path.join(fltest.SOURCE, "tools", "torch-root"), "run", "--rw", str(tmp_path),
               "--", "env", "-i", "PATH=/usr/bin:/bin", *[f"{k}={v}" for k, v in env.items()],
               "python3", str(script)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out, err = p.stdout, p.stderr
    else:
        pyenvs.require(python)
        r = fltest.run([python, str(script)], preload=False, env=env)
        out, err = r.stdout, r.stderr
    assert out.split() == ["True", "True", "2"], out + err


@pytest.mark.parametrize("all_threads", [True, False])
def test_preloaded_enable_writes_the_text_itself(tmp_path, all_threads):
    # Preloaded, enable() leaves faulthandler's handler off: it would go in
    # front of the library's and hand on a re-raised signal. The library
    # writes faulthandler's text (all_threads=False: "Stack"), and the
    # report is of the fault itself.
    python = pyenvs.interpreters()[0][1]
    r = crash(python, tmp_path, "segv", pyflags=(),
              setup=f"import faultline; faultline.enable(all_threads={all_threads})\n")
    assert r.stderr.count(HEADER) == 1, r.stderr
    text = r.stderr.split(C_STACK)[0]
    if all_threads:
        assert text.count("Thread 0x") == 2 and text.count("Current thread 0x") == 1, text
    else:
        assert text.startswith(HEADER + "Segmentation fault\n\nStack (most recent call first):\n"
                               '  File "/usr/lib/python3.11/ctypes/__init__.py"'), text
        assert "Thread 0x" not in text
    rep = fltest.validate(r.report)
    assert "reraised" not in rep["signal"] and rep["signal"]["fault_address"] == "0x0", rep["signal"]
