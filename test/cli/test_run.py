"""faultline run (preload, exit status passed through, reports announced) and
faultline dump (live reports of a running process)."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from clitest import CLI, LIB, run, schema_errors

PY = sys.executable


def reports_in(d):
    return sorted(glob.glob(os.path.join(str(d), "faultline-*.json")))


def lib_supports(word):
    """Whether libfaultline.so knows an environment variable (a feature the crash
    path adds, such as the dump signal)."""
    try:
        with open(LIB, "rb") as f:
            return word.encode() in f.read()
    except OSError:
        return False


def test_exit_status_passes_through(tmp_path):
    r = run("run", "--dir", str(tmp_path), "--", PY, "-c", "import sys; sys.exit(3)")
    assert r.returncode == 3
    assert reports_in(tmp_path) == []
    assert r.stderr == ""


def test_environment_of_the_command(tmp_path):
    code = "import os; print(os.environ['LD_PRELOAD']); print(os.environ['FAULTLINE_DIR']);" \
           "print(os.environ.get('FAULTLINE_STDERR')); print(os.environ['FAULTLINE_DUMP_SIGNAL']);" \
           "print(os.environ['EXTRA'])"
    r = run("run", "--dir", str(tmp_path), "--no-stderr", "--dump-signal", "USR1", "-e", "EXTRA=1=2",
            "--", PY, "-c", code)
    assert r.returncode == 0, r.stderr
    preload, dir_, stderr_opt, dump_sig, extra = r.stdout.splitlines()
    assert os.path.basename(preload.split()[0]).startswith("libfaultline.so")
    assert os.path.samefile(preload.split()[0], LIB)
    assert dir_ == str(tmp_path)
    assert (stderr_opt, dump_sig, extra) == ("0", "USR1", "1=2")


def test_command_not_found():
    r = run("run", "--", "/nonexistent/program")
    assert r.returncode == 127
    assert "cannot run /nonexistent/program: No such file or directory" in r.stderr


def test_crash_passes_signal_and_names_the_report(tmp_path):
    r = run("run", "--dir", str(tmp_path), "--", PY, "-c", "import ctypes; ctypes.string_at(0)")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    reports = reports_in(tmp_path)
    assert len(reports) == 1
    assert f"faultline: report {reports[0]}\n" in r.stderr
    with open(reports[0]) as f:
        doc = json.load(f)
    assert [e.message for e in schema_errors(doc)] == []
    assert doc["signal"]["name"] == "SIGSEGV"
    assert run("validate", reports[0]).returncode == 0
    assert run("show", reports[0]).returncode == 0


def test_shell_sees_128_plus_n(tmp_path):
    script = f'"{CLI}" run -q --no-stderr --dir "{tmp_path}" -- {PY} -c "import os; os.abort()"; echo "status $?"'
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=str(tmp_path))
    assert out.stdout.strip().endswith(f"status {128 + signal.SIGABRT}"), out


def test_sigterm_to_faultline_reaches_the_command(tmp_path):
    p = subprocess.Popen([CLI, "run", "-q", "--dir", str(tmp_path), "--", "sleep", "30"])
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == -signal.SIGTERM


# --- --faulthandler on a real crash: CPython's test regex ---------------------------------


def test_faulthandler_layout_of_a_real_python_crash(tmp_path):
    code = "import faulthandler\nfaulthandler._sigsegv()"
    r = run("run", "--no-stderr", "--dir", str(tmp_path), "--", PY, "-c", code)
    assert r.returncode == -signal.SIGSEGV
    (report,) = reports_in(tmp_path)
    with open(report) as f:
        doc = json.load(f)
    if not any(fr.get("kind") == "python" for t in doc["threads"] for fr in t["frames"]):
        pytest.skip("the crash path does not capture Python frames yet")
    out = run("show", "--faulthandler", report).stdout
    # CPython's FaultHandlerTests.check_fatal_error(code, 2, 'Segmentation fault').
    regex = '(?m)' + '\n'.join(['^Fatal Python error: Segmentation fault', '',
                                r'Current thread 0x[0-9a-f]+ \(most recent call first\):',
                                '  File "<string>", line 2 in <module>'])
    assert re.search(regex, out), out


# --- dump ---------------------------------------------------------------------------------

HANG = textwrap.dedent("""
    import os, sys, threading, time, ctypes
    lock = threading.Lock(); lock.acquire()
    def locked():
        with lock: pass
    def sleeper():
        time.sleep(600)
    def spin():
        libc = ctypes.CDLL(None)
        while not done.is_set():
            libc.usleep(1000)
    done = threading.Event()
    for f in (locked, sleeper, spin):
        threading.Thread(target=f, name=f.__name__, daemon=True).start()
    def leaf():
        print(os.getpid(), flush=True)
        sys.stdin.readline()
    def middle(): leaf()
    def top(): middle()
    top()
    done.set(); lock.release()
""")


def test_dump_refuses_a_process_without_faultline():
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = run("dump", "--method", "signal", str(p.pid))
        assert r.returncode == 1
        assert "has not loaded libfaultline.so" in r.stderr and "--force" in r.stderr
        assert p.poll() is None  # not killed
    finally:
        p.kill()
        p.wait()


def test_dump_no_such_process():
    r = run("dump", "999999999")
    assert r.returncode in (1, 2)  # out of pid range: usage or no process
    r = run("dump", "4194303")
    assert r.returncode == 1 and "no process 4194303" in r.stderr


def test_dump_times_out_when_no_report_comes(tmp_path):
    code = "import signal, sys, time; signal.signal(signal.SIGUSR2, signal.SIG_IGN);" \
           "print('ready', flush=True); time.sleep(30)"
    p = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        r = run("dump", "--method", "signal", "--force", "--timeout", "0.5", "--dir", str(tmp_path), str(p.pid))
        assert r.returncode == 1
        assert f"no dump report from process {p.pid}" in r.stderr
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(not lib_supports("FAULTLINE_DUMP_SIGNAL"),
                    reason="libfaultline.so has no dump handler yet (FAULTLINE_DUMP_SIGNAL)")
def test_dump_100_times_and_the_job_finishes(tmp_path):
    prog = tmp_path / "hang.py"
    prog.write_text(HANG)
    p = subprocess.Popen([CLI, "run", "-q", "--dir", str(tmp_path), "--", PY, str(prog)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        time.sleep(0.3)
        r = run("dump", "--print-path", str(pid), timeout=30)
        assert r.returncode == 0, r.stderr
        with open(r.stdout.strip()) as f:
            doc = json.load(f)
        assert doc["kind"] == "dump" and doc["process"]["pid"] == pid
        assert [e.message for e in schema_errors(doc)] == []
        functions = {fr.get("function") for t in doc["threads"] for fr in t["frames"]}
        assert {"leaf", "middle", "top", "locked", "sleeper", "spin"} <= functions
        for _ in range(99):
            assert run("dump", "--print-path", str(pid), timeout=30).returncode == 0
        assert len(reports_in(tmp_path)) == 100, \
            "100 dumps, fewer files: report names (<UTC second>-<pid>-<tid>) repeat within a second"
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("name", ["SIGRTMAX-5", "RTMIN+2"])
def test_dump_by_real_time_signal_name(tmp_path, name):
    # glibc names no real-time signal (sigabbrev_np), so "SIGRTMAX-5" was an
    # unknown signal to both `run --dump-signal` and `dump --signal`.
    prog = tmp_path / "hang.py"
    prog.write_text(HANG)
    p = subprocess.Popen([CLI, "run", "-q", "--dir", str(tmp_path), "--dump-signal", name, "--",
                          PY, str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        r = run("dump", "--method", "signal", "--signal", name, "--print-path", str(pid), timeout=30)
        assert r.returncode == 0, r.stderr
        with open(r.stdout.strip()) as f:
            assert json.load(f)["kind"] == "dump"
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
        assert "ignoring" not in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("name", ["SIGRTMAX", "64"])
def test_run_refuses_dump_signal_64(tmp_path, name):
    # A signal, but past the 63 the library's settings hold: refused here,
    # with the reason, not passed on for the library to warn about.
    r = run("run", "--dir", str(tmp_path), "--dump-signal", name, "--", PY, "-c", "pass")
    assert r.returncode == 2
    assert "signal 64 (SIGRTMAX) cannot be used" in r.stderr


@pytest.mark.parametrize("signals,why", [
    ("NOPE", 'unknown signal "NOPE"'),
    ("SEGV,KILL", "KILL cannot be caught"),
    (",", "no signal named"),
    ("SEGV,64", "signal 64 (SIGRTMAX) cannot be used"),
    # What the library refuses at start (and falls back to its default set):
    ("SEGV,RTMAX-3", "RTMAX-3 is the thread signal (FAULTLINE_THREAD_SIGNAL)"),
    ("SEGV,USR2", "USR2 is the dump signal (--dump-signal, or --no-dump)"),
])
def test_run_refuses_bad_signals(tmp_path, signals, why):
    # They were passed on: the library warned at start and handled its
    # default set, and the command ran.
    marker = tmp_path / "ran"
    r = run("run", "--dir", str(tmp_path), "--signals", signals, "--", "touch", str(marker))
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not marker.exists()


def test_run_takes_the_dump_signal_among_signals_with_no_dump(tmp_path):
    r = run("run", "--dir", str(tmp_path), "--no-dump", "--signals", "SEGV,USR2", "--", "true")
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.parametrize("number", ["4294967297", "65", "0"])
def test_run_refuses_a_dump_signal_number_out_of_range(tmp_path, number):
    # 4294967297 wrapped to 1 (SIGHUP) through atoi.
    r = run("run", "--dir", str(tmp_path), "--dump-signal", number, "--", "true")
    assert r.returncode == 2 and f'unknown signal "{number}"' in r.stderr, r.stderr


def test_run_takes_signals_by_name_and_number(tmp_path):
    r = run("run", "--dir", str(tmp_path), "--signals", "SEGV BUS,SIGABRT 8", "--", PY, "-c",
            "import os; print(os.environ['FAULTLINE_SIGNALS'])")
    assert r.returncode == 0 and r.stdout.strip() == "SEGV BUS,SIGABRT 8", r.stderr
    assert "ignoring" not in r.stderr


@pytest.mark.parametrize("kind", ["text", "executable", "other library"])
def test_run_refuses_a_lib_that_is_not_faultline(tmp_path, kind):
    # The loader refused it with a message of its own (or loaded another
    # library that does nothing), and the command ran without faultline.
    lib = {"text": "/etc/hostname", "executable": "/bin/true",
           "other library": next(p for p in ("/lib/x86_64-linux-gnu/libz.so.1",
                                             "/usr/lib/x86_64-linux-gnu/libz.so.1")
                                 if os.path.exists(p))}[kind]
    marker = tmp_path / "ran"
    r = run("run", "--dir", str(tmp_path), "--lib", lib, "--", "touch", str(marker))
    assert r.returncode == 1, r.stderr
    assert f"faultline: --lib {lib}: " in r.stderr
    assert "the command would run without faultline" in r.stderr
    assert not marker.exists()


def test_run_says_a_report_dir_that_is_a_file_is_not_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    r = run("run", "--dir", str(f), "--", "true")
    assert r.returncode == 1 and f"report directory {f} is not a directory" in r.stderr


@pytest.mark.parametrize("timeout", ["-5", "0", "nan", "inf", "1e400", "5s"])
def test_dump_refuses_a_timeout_that_is_not_seconds(timeout):
    r = run("dump", "--timeout", timeout, "1")
    assert r.returncode == 2
    assert "--timeout: seconds, more than 0" in r.stderr, r.stderr


def test_the_lib_check_installs_nothing_in_faultline_itself(tmp_path):
    # `faultline run` under a preload that names libfaultline (a nested run,
    # /etc/ld.so.preload): the check that --lib loads ran the library's
    # constructor in this process, which installed faultline's handlers here,
    # and dlclose unmapped the code they point to.
    import shutil
    lib = tmp_path / "libfaultline.so"
    shutil.copy(LIB, lib)
    def caught(preload):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = preload
        r = subprocess.run([CLI, "run", "--dir", str(tmp_path), "--lib", str(lib), "--", "sh", "-c",
                            'grep SigCgt /proc/$PPID/status'], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        # Less the signals `faultline run` forwards to its child: it sets
        # those once the child has started, so the child may see them or not.
        forwarded = sum(1 << (s - 1) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                                                signal.SIGUSR2))
        return int(r.stdout.split()[1], 16) & ~forwarded
    # The CLI's own handlers as built (a sanitizer build catches SIGSEGV
    # itself) are the oracle: the check adds none.
    assert caught("/nonexistent/libfaultline.so") == caught(None)
