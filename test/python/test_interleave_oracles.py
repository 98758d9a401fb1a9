"""Native and Python frames merged in call order on every interpreter, checked
against gdb on the core file and CPython's faulthandler (interleave_oracle):
C -> Python -> C -> Python -> C on the crashed thread and on a thread waiting
in C, through ctypes callbacks and through an embedding program.

Interpreters: pyenv 3.9-3.13, Debian's static /usr/bin/python3.11, and a copy
of it whose eval loop has no symbol (the merge then rests on the _PyCFrame
each eval call keeps on the C stack, as it rests on the entry frame from
3.12 on); 3.14 is in test/torch2."""
import glob
import os
import shlex
import subprocess
import tempfile

import pytest

import fltest
import interleave_oracle as oracle
import pyenvs

DEBIAN = "/usr/bin/python3.11"


def interpreters():
    out = [pytest.param(("debian", DEBIAN, False), id="debian-3.11"),
           pytest.param(("debian", DEBIAN, True), id="debian-3.11-nameless")]
    for minor in pyenvs.MINORS:
        prefix = pyenvs.pyenv_prefix(minor)
        out.append(pytest.param(("pyenv", os.path.join(prefix, "bin", "python3") if prefix else None, False),
                                id="pyenv-" + minor))
    return out


@pytest.fixture(scope="module")
def callback_lib():
    out = os.path.join(tempfile.mkdtemp(prefix="faultline-cb-"), "libflcb.so")
    pyenvs.cc(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", out, oracle.CALLBACK_LIB_SRC])
    return out


def build_embed(kind, python, out):
    """native/embed_nested.c against the interpreter's headers and library:
    pyenv's shared libpython, Debian's static libpython3.11.a."""
    flags = ["-O1", "-g", "-fno-omit-frame-pointer"]
    if kind == "debian":
        cmd = ["cc", "-no-pie", *flags, "-I/usr/include/python3.11", "-o", out, oracle.EMBED_SRC,
               "/usr/lib/x86_64-linux-gnu/libpython3.11.a", "-lexpat", "-lz", "-lm", "-ldl", "-lpthread", "-lutil"]
    else:
        config = sorted(glob.glob(os.path.join(os.path.dirname(python), "python3*-config")))[0]
        cfg = subprocess.run([config, "--embed", "--includes", "--ldflags"], capture_output=True, text=True,
                             check=True).stdout
        cmd = ["cc", *flags, "-o", out, oracle.EMBED_SRC, *shlex.split(cfg)]
        libdir = os.path.join(os.path.dirname(os.path.dirname(python)), "lib")
        cmd.append("-Wl,-rpath," + libdir)
    pyenvs.cc(cmd)


@pytest.mark.parametrize("job", ["ctypes", "embed"])
@pytest.mark.parametrize("interp", interpreters())
def test_interleaved_against_gdb_and_faulthandler(interp, job, callback_lib, tmp_path):
    kind, python, strip_eval = interp
    python = pyenvs.require(python)
    d = str(tmp_path)
    env = {"PYTHONHOME": "/usr"} if kind == "debian" else {}
    if job == "ctypes":
        exe = python
        if strip_eval:
            exe = os.path.join(d, "python3.11")
            assert oracle.nameless(python, exe) >= 1
        with open(os.path.join(d, "job.py"), "w") as f:
            f.write(oracle.CTYPES_JOB)
        args = [exe, "job.py", callback_lib]
    else:
        exe = os.path.join(d, "embed")
        build_embed(kind, python, exe)
        if strip_eval:
            assert oracle.nameless(exe, exe + "-nameless") >= 1
            exe += "-nameless"
        if kind == "pyenv":
            env["PYTHONHOME"] = os.path.dirname(os.path.dirname(python))
        with open(os.path.join(d, "job.py"), "w") as f:
            f.write(oracle.EMBED_JOB)
        args = [exe, "job.py"]
    # A second crash only when gdb itself failed on the first one's core.
    for attempt in (1, 2):
        for name in os.listdir(d):
            if name.startswith("faultline-") and name.endswith(".json"):
                os.remove(os.path.join(d, name))
        r = fltest.run(oracle.with_core(args), report_dir=d, cwd=d, env=env, timeout=120)
        assert r.signal == 11, (r.returncode, r.stderr)
        rep = fltest.validate(r.report)
        if strip_eval:
            syms = [f.get("symbol") or "" for t in rep["threads"] for f in t["frames"]]
            assert not any(s.startswith(oracle.EVAL) for s in syms), "the eval loop still has its name"
        core = oracle.find_core(d)
        try:
            gdb = oracle.gdb_threads(exe, core, d)
        except oracle.GdbInternalError:
            if attempt == 2:
                raise
            continue
        finally:
            os.remove(core)  # tens of MB; the report and gdb's reading are enough to debug a failure
        break
    oracle.check(rep, r.stderr, gdb, job)
