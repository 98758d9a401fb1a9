"""faultline's Python API (faulthandler's names and semantics) against real
crashing, hanging and signalled interpreters. The oracles: the report the
library wrote, CPython's own faulthandler in the same process, and Sentry's
event schema for the event made from a real report."""
import ctypes
import json
import os
import re
import signal
import subprocess

import pytest

import fltest
from pkgtest import SYSTEM_PYTHON, faulthandler_current, python_frames, run_py, sentry_event

CRASH = """
    import ctypes, sys
    import faultline
    {setup}
    def kernel():
        return ctypes.c_int64.from_address(8).value
    def step():
        return kernel()
    step()
"""


def crash(tmp_path, setup="faultline.enable()", **kw):
    return run_py(CRASH.format(setup=setup), tmp_path, **kw)


@pytest.fixture(params=["preloaded", "late"])
def mode(request):
    return request.param


def late_load_works():
    r = subprocess.run([SYSTEM_PYTHON, "-c", f"import ctypes; ctypes.CDLL({fltest.LIB!r})"],
                       capture_output=True, text=True)
    return r.returncode == 0


def loaded(mode):
    if mode == "late" and not late_load_works():
        pytest.xfail("this libfaultline.so cannot be loaded after start-up")
    return mode == "preloaded"


def header_values(tmp_path, expressions):
    """The values of C expressions over faultline.h, as the C compiler sees them."""
    src = tmp_path / "values.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "faultline/faultline.h"\n'
                   "int main(void) {\n" +
                   "".join(f'  printf("%zu\\n", (size_t)({e}));\n' for e in expressions) +
                   "  return 0;\n}\n")
    exe = tmp_path / "values"
    subprocess.run(["cc", "-I", os.path.join(fltest.SOURCE, "include"), str(src), "-o", str(exe)],
                   check=True)
    return [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True,
                                           check=True).stdout.split()]


def test_options_struct_matches_the_header(tmp_path):
    from faultline import _native
    fields = [f for f, _ in _native.Options._fields_]
    got = header_values(tmp_path, [f"offsetof(faultline_options, {f})" for f in fields] +
                        ["sizeof(faultline_options)"])
    want = [getattr(_native.Options, f).offset for f in fields] + [ctypes.sizeof(_native.Options)]
    assert got == want


def test_limits_equal_the_headers_macros(tmp_path):
    """Every FAULTLINE_*_MAX and FAULTLINE_OPTIONS_SIZE_* macro of faultline.h,
    as the C compiler sees it, is the package's constant of the same name."""
    from faultline import _native
    header = os.path.join(fltest.SOURCE, "include", "faultline", "faultline.h")
    with open(header) as f:
        names = re.findall(r"^#define FAULTLINE_(\w+_MAX|OPTIONS_SIZE_V\d+)\b", f.read(), re.M)
    assert "KEY_MAX" in names and "OPTIONS_SIZE_V1" in names
    got = header_values(tmp_path, [f"FAULTLINE_{n}" for n in names])
    assert dict(zip(names, got)) == {n: getattr(_native, n, None) for n in names}


def test_enable_crash_writes_report_and_text(tmp_path, mode):
    preload = loaded(mode)
    r = crash(tmp_path, setup="faultline.enable(); assert faultline.is_enabled()", preload=preload)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    names = [f[2] for f in python_frames(t)]
    assert names[:3] == ["kernel", "step", "<module>"], names
    assert "Current thread" in r.stderr and 'line 6 in kernel' in r.stderr.replace('", ', " "), r.stderr


def test_python_frames_equal_faulthandlers(tmp_path, mode):
    # faulthandler enabled first (-X faulthandler), faultline after: both
    # report the one crash, faultline first, then faulthandler.
    preload = loaded(mode)
    r = crash(tmp_path, preload=preload, pyflags=["-X", "faulthandler"],
              env={"FAULTLINE_STDERR": "0"})
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert "Fatal Python error: Segmentation fault" in r.stderr
    t = fltest.crashed_thread(fltest.validate(r.report))
    assert python_frames(t) == faulthandler_current(r.stderr)


def test_faulthandler_enabled_after_faultline(tmp_path, mode):
    preload = loaded(mode)
    r = crash(tmp_path, setup="faultline.enable(); import faulthandler; faulthandler.enable()",
              preload=preload, env={"FAULTLINE_STDERR": "0"})
    assert r.returncode == -signal.SIGSEGV, r.stderr
    t = fltest.crashed_thread(fltest.validate(r.report))
    assert python_frames(t) == faulthandler_current(r.stderr)


def test_disable_restores_the_previous_handler(tmp_path, mode):
    preload = loaded(mode)
    r = crash(tmp_path, setup="faultline.enable(); faultline.disable(); "
                              "assert not faultline.is_enabled()", preload=preload)
    assert r.returncode == -signal.SIGSEGV
    assert r.reports == [] and "Current thread" not in r.stderr


def test_enable_report_dir_and_all_threads_false(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = crash(tmp_path, preload=True, setup=f"""
    import threading, time
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    faultline.enable(all_threads=False, report_dir={str(elsewhere)!r})""")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert r.reports == []
    (path,) = elsewhere.glob("faultline-*.json")
    rep = fltest.validate(json.loads(path.read_text()))
    assert rep["threads_total"] == 2
    (other,) = [t for t in rep["threads"] if not t["crashed"]]
    assert other["captured"] is False and rep["threads_cut"] == 1
    assert [f for f in other["frames"] if f["kind"] == "native"] == []


BAD_ENABLE = """
    import faultline, signal
    def attempt(**kw):
        try:
            faultline.enable(**kw)
        except Exception as e:
            print(type(e).__name__, e, "| enabled:", faultline.is_enabled(), flush=True)
        else:
            print("accepted", kw, flush=True)
    attempt(report_dir={missing!r})
    attempt(report_dir={a_file!r})
    attempt(report_dir={missing!r} + "\\0x")
    attempt(signals=["NOPE"])
    attempt(signals=[])
    attempt(signals="SEGV")
    attempt(signals=[signal.SIGKILL])
    attempt(signals=[1.5])
    attempt(signals=[64])
    faultline.enable(signals=["SEGV", "SIGBUS", signal.SIGABRT, 8], report_dir={here!r})
    print("enabled", faultline.is_enabled(), flush=True)
    import ctypes
    ctypes.string_at(0)
"""


def test_enable_refuses_bad_arguments_before_it_changes_anything(tmp_path):
    # A directory that is not there was taken (reports went to stderr with a
    # warning), a path with a NUL byte was cut at it, a signal name was
    # "invalid literal for int()", and signals=[] handled no signal at all.
    here = tmp_path / "here"
    here.mkdir()
    a_file = tmp_path / "file"
    a_file.write_text("")
    r = run_py(BAD_ENABLE.format(missing=str(tmp_path / "missing"), a_file=str(a_file),
                                 here=str(here)), tmp_path)
    lines = r.stdout.splitlines()
    assert lines == [
        f"FileNotFoundError [Errno 2] No such file or directory: {str(tmp_path / 'missing')!r}"
        " | enabled: False",
        f"NotADirectoryError [Errno 20] Not a directory: {str(a_file)!r} | enabled: False",
        "ValueError report_dir: embedded null byte | enabled: False",
        "ValueError unknown signal 'NOPE' | enabled: False",
        "ValueError signals: none given (disable() turns faultline's handlers off) | enabled: False",
        "TypeError signals: an iterable of signals, such as [signal.SIGSEGV, 'SIGBUS'] | enabled: False",
        "ValueError signal 9 cannot be caught | enabled: False",
        "TypeError a signal is a number, a signal.Signals member or a name such as 'SIGSEGV', not "
        "float | enabled: False",
        "ValueError signal number 64 out of range (1 to 63) | enabled: False",
        "enabled True",
    ], r.stdout + r.stderr
    assert r.returncode == -signal.SIGSEGV, r.stderr
    (path,) = here.glob("faultline-*.json")
    assert fltest.validate(json.loads(path.read_text()))["signal"]["name"] == "SIGSEGV"


@pytest.mark.parametrize("minidump", [True, False])
def test_enable_minidump(tmp_path, minidump):
    r = crash(tmp_path, preload=True, setup=f"faultline.enable(minidump={minidump!r})")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = r.report
    dumps = [n for n in os.listdir(r.report_dir) if n.endswith(".dmp")]
    if minidump:
        assert dumps == [rep["minidump"]]
    else:
        assert dumps == [] and rep["minidump"] is None


def test_breadcrumbs_and_annotations_reach_report_and_sentry(tmp_path, mode):
    preload = loaded(mode)
    r = crash(tmp_path, preload=preload, setup="""
    faultline.enable()
    faultline.annotate("run_id", "exp-42")
    faultline.thread_annotate("batch", "1337")
    faultline.breadcrumb("epoch 3 started")""")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)
    assert rep["annotations"]["run_id"] == "exp-42"
    assert fltest.crashed_thread(rep)["annotations"]["batch"] == "1337"
    assert [b["message"] for b in rep["breadcrumbs"]] == ["epoch 3 started"]
    # The real report's Sentry event passes Sentry's schema, breadcrumbs included.
    import jsonschema
    path = next((tmp_path / "reports").glob("faultline-*.json"))
    event = sentry_event(str(path))
    with open(os.path.join(fltest.SOURCE, "test", "cli", "sentry", "event.schema.json")) as f:
        jsonschema.Draft7Validator(json.load(f)).validate(event)
    assert event["breadcrumbs"]["values"][0]["timestamp"] == rep["breadcrumbs"][0]["time"]


NUL_KEYS = """
    import faultline
    faultline.enable()
    faultline.annotate("a", "first")
    for call in (lambda: faultline.annotate("a\\0b", "second"),
                 lambda: faultline.annotate("c", b"x\\0y"),
                 lambda: faultline.thread_annotate("t\\0", "v"),
                 lambda: faultline.breadcrumb("m\\0")):
        try:
            call()
            print("accepted", flush=True)
        except ValueError as e:
            print("ValueError", e, flush=True)
    import ctypes
    ctypes.string_at(0)
"""


def test_a_nul_byte_in_a_crash_key_is_refused_not_cut(tmp_path):
    # "a\0b" reached the library as "a": another key's value, replaced.
    r = run_py(NUL_KEYS, tmp_path)
    assert r.stdout.splitlines() == ["ValueError embedded null byte"] * 4, r.stdout + r.stderr
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)
    # (faultline.faulthandler: who wrote the crash text, set by the package.)
    assert {k: v for k, v in rep["annotations"].items() if k != "faultline.faulthandler"} == {"a": "first"}


GUARD_REASON_WITH_NUL = """
    import sys, types
    import faultline
    from faultline import _torch
    faultline.enable()
    def compiled():
        pass
    code = compiled.__code__
    # Dynamo's record of why a frame was compiled again; a guard on a string
    # constant quotes it, NUL byte and all.
    utils = types.ModuleType("torch._dynamo.utils")
    utils.guard_failures = {code: ["L['mode'] == 'a\\x00b'"]}
    sys.modules["torch._dynamo.utils"] = utils
    _torch._record(code)
    _torch._record(code)
    import ctypes
    ctypes.string_at(0)
"""


def test_a_recompile_reason_with_a_nul_byte_keeps_its_breadcrumb(tmp_path):
    r = run_py(GUARD_REASON_WITH_NUL, tmp_path)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    crumbs = [b["message"] for b in fltest.validate(r.report)["breadcrumbs"]]
    assert len(crumbs) == 2 and "compiles=2" in crumbs[1], crumbs
    assert "reason: L['mode'] == 'a\\0b'" in crumbs[1], crumbs


def test_dump_traceback_writes_a_dump_and_goes_on(tmp_path, mode):
    preload = loaded(mode)
    r = run_py("""
    import faultline
    faultline.enable()
    def look():
        return faultline.dump_traceback()
    path = look()
    print("path", path)
    """, tmp_path, preload=preload)
    assert r.returncode == 0, r.stderr
    rep = fltest.validate(r.report)
    assert rep["kind"] == "dump"
    assert r.stdout.split()[1].endswith(".json")
    me = [t for t in rep["threads"] if python_frames(t)]
    # faultline's own function, then its caller's.
    assert [f[2] for f in python_frames(me[0])][:3] == ["dump_traceback", "look", "<module>"]


def test_dump_traceback_without_enable_is_faulthandlers(tmp_path):
    r = run_py("""
    import faultline
    def look():
        faultline.dump_traceback()
    look()
    """, tmp_path, env={"FAULTLINE_LIB": "/nonexistent"})
    assert r.returncode == 0, r.stderr
    assert r.reports == []
    # faulthandler's text, with no frame of faultline's on top.
    assert [f[2] for f in faulthandler_current(r.stderr)] == ["look", "<module>"]


HOLD_GIL = """
    import ctypes, faultline
    faultline.dump_traceback_later({args})
    def stuck():
        # libc's sleep() called with the GIL held: no Python thread could run.
        ctypes.PyDLL(None).sleep(30)
    stuck()
"""


def test_dump_traceback_later_exit_fires_while_the_gil_is_held(tmp_path, mode):
    preload = loaded(mode)
    r = run_py(HOLD_GIL.format(args="0.2, exit=True"), tmp_path, preload=preload)
    assert r.returncode == 1, r.stderr
    rep = fltest.validate(r.report)
    assert rep["kind"] == "dump"
    frames = [f for t in rep["threads"] for f in python_frames(t)]
    assert [f[2] for f in frames][:2] == ["stuck", "<module>"]


def test_dump_traceback_later_repeat_and_cancel(tmp_path):
    # faulthandler's text every time, one report (at the first timeout),
    # nothing after the cancel.
    r = run_py("""
    import os, time, faultline
    f = open("text", "w+b")
    faultline.dump_traceback_later(0.05, repeat=True, file=f)
    deadline = time.monotonic() + 60
    while open("text").read().count("Timeout") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    faultline.cancel_dump_traceback_later()
    n = open("text").read().count("Timeout")
    time.sleep(0.3)
    print(n, open("text").read().count("Timeout"))
    """, tmp_path, preload=True)
    assert r.returncode == 0, r.stderr
    before, after = map(int, r.stdout.split())
    assert before >= 2 and after == before
    assert fltest.validate(r.report)["kind"] == "dump"
    text = (tmp_path / "reports" / "text").read_text()
    assert text.startswith("Timeout (0:00:00.050000)!\nThread 0x"), text
    assert "faultline" not in text


def test_dump_traceback_later_arguments():
    import faultline
    with pytest.raises(ValueError):
        faultline.dump_traceback_later(0)
    with pytest.raises(ValueError):
        faultline.dump_traceback_later(-1)


def test_register_and_unregister(tmp_path, mode):
    preload = loaded(mode)
    r = run_py("""
    import os, signal, faultline
    try:
        faultline.register(signal.SIGSEGV)
    except RuntimeError as e:
        print("refused:", e)
    faultline.register(signal.SIGUSR1)
    def poke():
        os.kill(os.getpid(), signal.SIGUSR1)
    poke()
    print(faultline.unregister(signal.SIGUSR1), faultline.unregister(signal.SIGUSR1))
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    os.kill(os.getpid(), signal.SIGUSR1)
    """, tmp_path, preload=preload)
    assert r.returncode == 0, r.stderr
    assert "refused: signal 11 cannot be registered, use enable() instead" in r.stdout
    assert "True False" in r.stdout
    rep = fltest.validate(r.report)  # exactly one: none after unregister
    assert rep["kind"] == "dump"
    frames = [f for t in rep["threads"] for f in python_frames(t)]
    assert [f[2] for f in frames][:2] == ["poke", "<module>"]


def test_python_m_faultline_run(tmp_path):
    example = os.path.join(fltest.SOURCE, "examples", "python-crash", "train.py")
    run_py("", tmp_path)  # makes the reports folder
    reports = tmp_path / "reports"
    env = dict(os.environ, PYTHONPATH=os.path.join(fltest.SOURCE, "python"),
               FAULTLINE_CLI=fltest.CLI, FAULTLINE_LIB=fltest.LIB)
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([SYSTEM_PYTHON, "-m", "faultline", "run", "--dir", str(reports), example],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 128 + signal.SIGSEGV or p.returncode == -signal.SIGSEGV, p.stderr
    (path,) = reports.glob("faultline-*.json")
    rep = fltest.validate(json.loads(path.read_text()))
    names = [f[2] for f in python_frames(fltest.crashed_thread(rep))]
    assert names[:4] == ["native_kernel", "train_step", "train", "<module>"]
    assert rep["process"]["executable"] == os.path.realpath(SYSTEM_PYTHON)


def test_after_import_torch_versions_are_recorded(tmp_path, mode):
    # torch loads many libraries first; enable() afterwards still records
    # its version (the hooks of faultline/_torch.py) and reports the crash.
    preload = loaded(mode)
    r = crash(tmp_path, preload=preload, setup="""
    import numpy, torch
    faultline.enable()""", timeout=300)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)
    import torch  # the same interpreter's torch (Debian's python3-torch)
    assert rep["annotations"]["torch.version"] == torch.__version__
    names = [f[2] for f in python_frames(fltest.crashed_thread(rep))]
    assert names[:3] == ["kernel", "step", "<module>"], names


def test_thread_annotations_without_tls(tmp_path, mode):
    # 600 threads each leave a key behind and exit: more than the 256 places
    # of the table, so exited threads' places are reused; the crashing
    # thread shows only its own key (none inherited from a dead thread that
    # had the same id), and the main thread's stays in the process.
    preload = loaded(mode)
    r = run_py("""
    import ctypes, threading, faultline
    faultline.enable()
    def worker(i):
        assert faultline.thread_annotate("worker", str(i)) == 0
    for i in range(600):
        t = threading.Thread(target=worker, args=(i,))
        t.start()
        t.join()
    faultline.thread_annotate("main", "yes")
    def crasher():
        faultline.thread_annotate("request", "r-1")
        ctypes.c_int64.from_address(8).value
    t = threading.Thread(target=crasher)
    t.start()
    t.join()
    """, tmp_path, preload=preload)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)
    assert fltest.crashed_thread(rep)["annotations"] == {"request": "r-1"}


def test_file_argument_takes_the_text(tmp_path, mode):
    preload = loaded(mode)
    log = tmp_path / "text.log"
    dump_log = tmp_path / "dump.log"
    r = crash(tmp_path, preload=preload, setup=f"""
    dump_file = open({str(dump_log)!r}, "w")
    faultline.enable(file=open({str(log)!r}, "w"))
    faultline.dump_traceback(file=dump_file)""")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert len(r.reports) == 2  # the dump, then the crash
    crash_text, dump_text = log.read_text(), dump_log.read_text()
    assert "Fatal Python error: Segmentation fault" in crash_text and "in kernel" in crash_text
    assert "Current thread" in dump_text and "Segmentation fault" not in dump_text
    assert "Current thread" not in r.stderr, r.stderr
