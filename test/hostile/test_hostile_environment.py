"""Crashing processes in a hostile environment: a report directory shared by
pid namespaces, full, removed or on a filesystem that refuses renames or
flushes slowly, no /proc, a file-size limit, a daemon whose fd 2 is its
database, a setuid program run by another user, libraries replaced or
preloaded under other names, secrets in argv, conflicting settings. What the
crashing process itself does is test_hostile_process.py's.
Each asserts that no report is lost, nothing else is written, the exit status
is the one the program would have had, and nothing hangs (the timeout)."""
import errno
import glob
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import fltest
from hostlib import LIB

CRASHER = fltest.program("crasher")
PY = sys.executable


def reports(d):
    return sorted(glob.glob(os.path.join(str(d), "faultline-*.json")))


def clean_env(**extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("FAULTLINE_") or k in ("FAULTLINE_SOURCE", "FAULTLINE_BUILD",
                                                   "FAULTLINE_LIB", "FAULTLINE_CLI")}
    e.pop("LD_PRELOAD", None)
    e.update(extra)
    return e


def only_report(d):
    """The one report in d: its path and its validated document."""
    [path] = reports(d)
    with open(path) as f:
        return path, fltest.validate(json.load(f))


def stderr_report(err):
    """The report copied to stderr between the markers, parsed."""
    body = err.split("--- faultline report begin ---\n", 1)[1]
    return json.loads(body.split("--- faultline report end ---", 1)[0])


# --- report names: unique across pid namespaces, never replacing a file -----------------

@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs unshare and root for pid namespaces")
def test_four_pid_namespaces_crashing_at_once_leave_four_reports(tmp_path):
    # Every container's job is pid 1 with the same thread id: the old names
    # (<second>-<pid>-<tid>) collided and one report silently replaced another.
    (tmp_path / "faultline-keep.json").write_text("not ours")
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path))
    procs = [subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", CRASHER, "null-read"],
                              env=env, stderr=subprocess.PIPE) for _ in range(4)]
    errs = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [-signal.SIGSEGV] * 4 or \
        all(rc in (-signal.SIGSEGV, 128 + signal.SIGSEGV) for rc in [p.returncode for p in procs]), errs
    found = [r for r in reports(tmp_path) if not r.endswith("faultline-keep.json")]
    assert len(found) == 4, (found, errs)
    for path in found:
        with open(path) as f:
            doc = json.load(f)
        assert doc["process"]["pid"] == 1
        assert "-1-1-" in os.path.basename(path)
    written = [line.split("report written to ")[1] for e in errs for line in e.splitlines()
               if "report written to " in line]
    assert len(set(written)) == 4
    assert (tmp_path / "faultline-keep.json").read_text() == "not ours"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_many_reports_in_one_second_from_one_thread_all_kept(tmp_path):
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path))
    for _ in range(5):
        p = subprocess.run([CRASHER, "null-read"], env=env, capture_output=True, timeout=60)
        assert p.returncode == -signal.SIGSEGV
    assert len(reports(tmp_path)) == 5


# --- a file-size limit ---------------------------------------------------------------------

def test_file_size_limit_gives_efbig_and_the_stderr_copy_not_sigxfsz(tmp_path):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path))
    p = subprocess.run([CRASHER, "null-read"], env=env, capture_output=True, timeout=60,
                       preexec_fn=limit)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == -signal.SIGSEGV, (p.returncode, err)  # not SIGXFSZ (exit 153)
    assert "EFBIG" in err and "--- faultline report begin ---" in err
    assert stderr_report(err)["signal"]["name"] == "SIGSEGV"
    assert fltest.listdir(tmp_path) == []  # no report, no .tmp left behind


# --- an address-space limit ----------------------------------------------------------------

def test_address_space_limit_gets_a_smaller_arena_not_no_report(tmp_path):
    # ulimit -v (a batch system's memory limit as RLIMIT_AS) refused the
    # crash arena's mapping, the preload ignored the failed install, and the
    # crash left no report and no word at start. Now a smaller arena, said.
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (24 << 20, 24 << 20))
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_ARENA_MB="64")
    p = subprocess.run([CRASHER, "null-read"], env=env, capture_output=True, timeout=60,
                       preexec_fn=limit)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == -signal.SIGSEGV, (p.returncode, err)
    m = re.search(r"faultline: the crash arena of 64 MiB could not be mapped \(ENOMEM, ulimit -v\?\); "
                  r"using (\d+) MiB", err)
    assert m and 1 <= int(m.group(1)) <= 16, err
    _, rep = only_report(tmp_path)
    assert fltest.native_symbols(rep["threads"][0])[:2] == ["null_read", "level3"]
    assert rep["faultline"]["errors"] == []


# --- a daemon whose fd 2 is its database -----------------------------------------------

DAEMON = textwrap.dedent("""
    import ctypes, os, sys
    db = sys.argv[1]
    for fd in (0, 1, 2):
        os.close(fd)
    for _ in range(3):
        fd = os.open(db, os.O_RDWR | os.O_APPEND)
    assert fd == 2
    ctypes.string_at(0)
""")


@pytest.mark.parametrize("dir_ok", [True, False])
@pytest.mark.parametrize("stderr_opt", ["1", "0"])
def test_a_daemons_database_on_fd_2_is_never_written(tmp_path, dir_ok, stderr_opt):
    db = tmp_path / "app.db"
    db.write_bytes(b"SQLite format 3\0" + b"\1" * 100)
    before = db.read_bytes()
    prog = tmp_path / "daemon.py"
    prog.write_text(DAEMON)
    rdir = tmp_path / "reports"
    if dir_ok:
        rdir.mkdir()
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(rdir), FAULTLINE_STDERR=stderr_opt)
    p = subprocess.run([PY, str(prog), str(db)], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV
    assert db.read_bytes() == before
    err = p.stderr.decode(errors="replace")
    if dir_ok:
        assert len(reports(rdir)) == 1
    if stderr_opt == "0":
        # Nothing at crash time, not even the fallback copy (the start-up
        # warning about the directory says the reports will be lost).
        assert "report begin" not in err and "SIGSEGV" not in err, err
        assert dir_ok or "will be lost" in err
    elif not dir_ok:
        # The original stderr (kept since install) gets the fallback copy.
        assert "--- faultline report begin ---" in err


# --- a setuid program run by another user ------------------------------------------------

SETUID_PROG = r"""
#include <faultline/faultline.h>
#include <stdio.h>
int main(void) {
  faultline_install(NULL);
  volatile int* p = 0;
  return *p;
}
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or
                    shutil.which("cc") is None, reason="needs root, setpriv and a C compiler")
def test_setuid_program_ignores_the_callers_settings(tmp_path):
    os.chmod(tmp_path, 0o755)
    src = tmp_path / "suid.c"
    src.write_text(SETUID_PROG)
    exe = tmp_path / "suid"
    libdir = os.path.dirname(LIB)
    include = os.path.join(fltest.SOURCE, "include")
    subprocess.run(["cc", "-o", str(exe), str(src), f"-I{include}", f"-L{libdir}", "-lfaultline",
                    f"-Wl,-rpath,{libdir}"], check=True)
    os.chown(exe, 0, 0)
    os.chmod(exe, 0o4755)
    protected = tmp_path / "protected"
    protected.mkdir(mode=0o755)
    victim = protected / "victim"
    victim.write_text("root's data\n")
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    env = clean_env(FAULTLINE_DIR=str(protected), TORCHELASTIC_ERROR_FILE=str(victim),
                    FAULTLINE_STDERR="1", TORCHELASTIC_RUN_ID="caller-chosen", RANK="0")
    p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", str(exe)],
                       env=env, cwd=str(work), capture_output=True, timeout=60)
    assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), p.stderr
    assert victim.read_text() == "root's data\n"
    assert os.listdir(protected) == ["victim"]
    # The defaults apply: the report is in the working directory.
    assert len(reports(work)) == 1, p.stderr
    # Nor does the caller write a job into the report (secure_getenv).
    with open(reports(work)[0]) as f:
        assert "job" not in json.load(f)



REPLACE_AND_CRASH = """
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[2] == "-":
    os.unlink(sys.argv[1])  # a cleaned cache directory, a removed build
else:
    os.rename(sys.argv[2], sys.argv[1])  # an upgrade puts another library at the path
lib.crashlib_crash(3)
"""


def crash_report(argv, reports_dir, user=None):
    """Runs argv under the preload (as user, through setpriv, if given),
    checks that it died of SIGSEGV leaving one report, and returns that
    report, validated."""
    if user:
        argv = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups"] + argv
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(reports_dir))
    p = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    found = reports(reports_dir)
    assert len(found) == 1, p.stderr
    return fltest.validate(json.load(open(found[0])))


def crash_in_replaced_library(tmp_path, user=None, delete=False):
    lib = tmp_path / "libcrash.so"
    shutil.copy(fltest.program("libcrashlib.so"), lib)
    # Another library, with its own functions where libcrashlib's crash is.
    other = tmp_path / "libother.so"
    shutil.copy(os.path.join(os.path.dirname(fltest.program("libcrashlib.so")), "dlo",
                             "libdlo_inner.so"), other)
    reports_dir = tmp_path / "reports"
    reports_dir.mkdir()
    os.chmod(reports_dir, 0o777)
    script = tmp_path / "replace.py"
    script.write_text(REPLACE_AND_CRASH)
    os.chmod(tmp_path, 0o777)  # the rename, by another user too
    argv = ["/usr/bin/python3", str(script), str(lib), "-" if delete else str(other)]
    rep = crash_report(argv, reports_dir, user)
    t = fltest.crashed_thread(rep)
    assert t["frames"][0]["module"].endswith("libcrash.so")
    mine = [f for f in t["frames"] if f.get("module", "").endswith("libcrash.so")]
    assert len(mine) == 3, t["frames"]
    # Never another build's names (the old code named all three _fini).
    assert [f.get("symbol") for f in mine] == ["crashlib_inner", "crashlib_middle",
                                               "crashlib_crash"], mine
    return rep


def can_open_map_files():
    # CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE) in the first user namespace:
    # root outside a container.
    try:
        first = sorted(os.listdir("/proc/self/map_files"))[0]
        os.close(os.open("/proc/self/map_files/" + first, os.O_RDONLY))
        return True
    except (OSError, IndexError):
        return False


IMAGE_NOTE = "its frames named from the loaded image's exported symbols"


@pytest.mark.parametrize("delete", [False, True], ids=["replaced", "deleted"])
def test_library_replaced_or_deleted_on_disk_is_named_from_the_loaded_build(tmp_path, delete):
    # The file at a loaded library's path is another build (an upgrade) or
    # gone: its frames are named from the file that was mapped
    # (/proc/self/map_files, where the kernel allows it) or else from the
    # loaded image's own exported symbols, and the report says which.
    rep = crash_in_replaced_library(tmp_path, delete=delete)
    noted = [e for e in rep["faultline"]["errors"] if IMAGE_NOTE in e]
    assert bool(noted) != can_open_map_files(), rep["faultline"]["errors"]
    if noted and not delete:
        assert "replaced on disk" in noted[0]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run as another user")
@pytest.mark.parametrize("delete", [False, True], ids=["replaced", "deleted"])
def test_library_replaced_or_deleted_without_map_files_is_named_from_the_image(delete):
    # Another user cannot open /proc/self/map_files: the exported symbols of
    # the loaded image name the frames, and the report says so.
    import pathlib
    base = tempfile.mkdtemp(prefix="fl-replaced-")  # pytest's own is root's alone
    try:
        rep = crash_in_replaced_library(pathlib.Path(base), user="nobody", delete=delete)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    errors = rep["faultline"]["errors"]
    assert any(IMAGE_NOTE in e for e in errors), errors
    assert any("replaced on disk" in e for e in errors) != delete, errors


# --- the library under another name -------------------------------------------------------

LDSO = "/lib64/ld-linux-x86-64.so.2"


@pytest.mark.parametrize("how", ["copy", "symlink-in-a-list", "ld.so --preload", "two copies"])
def test_library_preloaded_under_another_name_still_reports(tmp_path, how):
    # A packager or user who renames the library (or links it under another
    # name) and preloads that, or preloads it without LD_PRELOAD (ld.so
    # --preload, as /etc/ld.so.preload does): the preload was taken for
    # "linked, not preloaded" (LD_PRELOAD did not say libfaultline) and
    # nothing was installed, so the crash left no report. Two copies
    # preloaded at once (a site-wide copy and the job's own) are two sets of
    # handlers, one behind the other: one report, not two.
    argv = [CRASHER, "null-read"]
    preload = None
    if how in ("copy", "two copies"):
        lib = tmp_path / "crashreport.so"
        shutil.copy(LIB, lib)
        preload = str(lib) if how == "copy" else f"{LIB} {lib}"
    elif how == "symlink-in-a-list":
        lib = tmp_path / "cr.so"
        os.symlink(os.path.realpath(LIB), lib)
        preload = f"libm.so.6 {lib}"
    else:
        if not os.path.exists(LDSO):
            pytest.skip("no " + LDSO)
        argv = [LDSO, "--preload", LIB] + argv
    reports_dir = tmp_path / "reports"
    reports_dir.mkdir()
    env = clean_env(FAULTLINE_DIR=str(reports_dir))
    if preload:
        env["LD_PRELOAD"] = preload
    p = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    found = reports(reports_dir)
    assert len(found) == 1, p.stderr
    rep = fltest.validate(json.load(open(found[0])))
    assert rep["signal"]["name"] == "SIGSEGV"
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "null_read"


def crash_through_the_loader(reports_dir, argv, user=None):
    if not os.path.exists(LDSO):
        pytest.skip("no " + LDSO)
    return crash_report([LDSO] + argv, reports_dir, user)


@pytest.mark.parametrize("user", [None, "nobody"])
def test_program_started_through_its_loader_is_named_as_itself(user):
    # `ld.so prog`, as portable bundles and some sandboxes start programs:
    # the kernel runs the loader, so /proc/self/exe is the loader. The report
    # named ld.so as the executable and the main module, and read the
    # program's symbols from ld.so's file: its frames were left unnamed.
    if user and (os.geteuid() != 0 or shutil.which("setpriv") is None):
        pytest.skip("needs root and setpriv to run as another user")
    base = tempfile.mkdtemp(prefix="fl-loader-")  # pytest's own is root's alone
    try:
        os.chmod(base, 0o777)
        rep = crash_through_the_loader(base, [CRASHER, "null-read"], user)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    exe = os.path.realpath(CRASHER)
    assert rep["process"]["executable"] == exe
    (main,) = [m for m in rep["modules"] if m.get("main")]
    assert main["path"] == exe
    t = fltest.crashed_thread(rep)
    assert fltest.native_symbols(t)[:5] == ["null_read", "level3", "level2", "level1", "main"]
    assert all(f["module"] == exe for f in t["frames"][:5]), t["frames"][:5]


def test_python_started_through_its_loader_keeps_its_python_frames(tmp_path):
    # The interpreter is found in the program the loader mapped, not in the
    # loader /proc/self/exe names.
    script = tmp_path / "job.py"
    script.write_text("import ctypes\n\ndef crash_here():\n    ctypes.string_at(0)\n\n"
                      "crash_here()\n")
    rep = crash_through_the_loader(tmp_path, [os.path.realpath(PY), str(script)])
    assert rep["process"]["executable"] == os.path.realpath(PY)
    t = fltest.crashed_thread(rep)
    py = [f["function"] for f in t["frames"] if f["kind"] == "python"]
    assert py[:3] == ["string_at", "crash_here", "<module>"], t["frames"]



def test_library_loaded_with_dlopen_does_not_install_itself(tmp_path):
    # Loaded late (ctypes, as the Python package does before enable()), it
    # waits to be asked: its constructor installs only a preload.
    script = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
              "print(lib.faultline_installed())")
    p = subprocess.run([PY, "-c", script, LIB], env=clean_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "0"



@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or
                    not shutil.which("setpriv"),
                    reason="needs root, unshare and setpriv")
def test_system_wide_preload_installs_except_in_a_setuid_program():
    # /etc/ld.so.preload (in a mount namespace of this test only) naming the
    # library: a program run by another user gets a report; the same
    # program setuid root does not install faultline, so its caller cannot
    # make it write a report of a privileged process.
    import pathlib
    base = tempfile.mkdtemp(prefix="fl-sysprel-")  # pytest's own is root's alone
    try:
        system_wide_preload(pathlib.Path(base))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def system_wide_preload(tmp_path):
    os.chmod(tmp_path, 0o755)
    lib = tmp_path / "libfaultline.so"
    shutil.copy(LIB, lib)
    etc = tmp_path / "etc"
    shutil.copytree("/etc", etc, symlinks=True)
    (etc / "ld.so.preload").write_text(f"{lib}\n")
    plain = tmp_path / "crasher"
    shutil.copy(CRASHER, plain)
    suid = tmp_path / "crasher-suid"
    shutil.copy(CRASHER, suid)
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o4755)
    results = {}
    for exe in (plain, suid):
        work = tmp_path / ("work-" + exe.name)
        work.mkdir()
        os.chmod(work, 0o777)
        script = (f"mount --bind {etc} /etc && exec setpriv --reuid=nobody --regid=nogroup "
                  f"--clear-groups {exe} null-read")
        p = subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=str(work),
                           env=clean_env(), capture_output=True, timeout=60)
        if exe == plain and p.returncode not in (-signal.SIGSEGV, 128 + signal.SIGSEGV):
            pytest.skip("no mount namespace here: " + p.stderr.decode(errors="replace")[-200:])
        assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), p.stderr
        results[exe.name] = (reports(work), p.stderr)
    assert len(results["crasher"][0]) == 1, results["crasher"][1]
    assert results["crasher-suid"][0] == [], results["crasher-suid"][1]
    assert b"faultline" not in results["crasher-suid"][1]


# --- secrets in argv ---------------------------------------------------------------------

SECRET_ARGS = ["--api-key=sk-live-123", "--password", "hunter2", "--db",
               "postgres://bob:pw0rd@db/x", "--lr=0.1", "MYCORP_DSN=abc"]


def crash_with_args(tmp_path, extra_env, report_dir=None):
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(report_dir or tmp_path), **extra_env)
    return subprocess.run([PY, "-c", "import ctypes; ctypes.string_at(0)", *SECRET_ARGS],
                          env=env, capture_output=True, timeout=60)


def test_secrets_in_argv_are_filtered_in_the_report_and_the_stderr_copy(tmp_path):
    p = crash_with_args(tmp_path, {"FAULTLINE_SCRUB_KEYS": "mycorp_dsn"})
    assert p.returncode == -signal.SIGSEGV
    with open(reports(tmp_path)[0]) as f:
        argv = json.load(f)["process"]["argv"]
    assert argv[-7:] == ["--api-key=[Filtered]", "--password", "[Filtered]", "--db",
                         "postgres://bob:[Filtered]@db/x", "--lr=0.1", "MYCORP_DSN=[Filtered]"]
    raw = open(reports(tmp_path)[0]).read()
    for secret in ("sk-live-123", "hunter2", "pw0rd", "abc\""):
        assert secret not in raw
    # The stderr fallback (an unwritable directory) is the same report.
    p = crash_with_args(tmp_path, {}, report_dir=tmp_path / "missing")
    err = p.stderr.decode()
    assert "--- faultline report begin ---" in err
    assert "hunter2" not in err and "sk-live-123" not in err and "pw0rd" not in err


HEADER_ARGS = ["-H", "Authorization: Bearer S1-secret", "https://h/p?limit=10&api_key=S2-secret",
               "--header=PRIVATE-TOKEN: S3-secret", "--header", "X-Api-Key: S5-secret",
               "-H", "Accept: text/plain", "https://h/q?corp=S6-secret&x=1"]


def test_header_values_and_query_keys_in_argv_are_filtered(tmp_path):
    # curl-shaped command lines: these reached the report whole before.
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_SCRUB_KEYS="corp")
    p = subprocess.run([CRASHER, "null-read", *HEADER_ARGS], env=env, capture_output=True,
                       timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    path, rep = only_report(tmp_path)
    assert rep["process"]["argv"][-len(HEADER_ARGS):] == [
        "-H", "Authorization: [Filtered]", "https://h/p?limit=10&api_key=[Filtered]",
        "--header=PRIVATE-TOKEN: [Filtered]", "--header", "X-Api-Key: [Filtered]",
        "-H", "Accept: text/plain", "https://h/q?corp=[Filtered]&x=1"]
    assert "-secret" not in open(path).read()
    assert "-secret" not in p.stderr.decode(errors="replace")


LONG_ARGS = [f"{i:03d}" + "x" * 96 for i in range(200)]  # 20,000 bytes, past the 8 KiB kept


@pytest.mark.parametrize("how", ["preloaded", "enabled"])
def test_a_command_line_too_long_to_keep_is_said_to_be_cut(tmp_path, how):
    # The arguments that fit were kept and the rest dropped in silence: a
    # reader took the report's argv for the whole command line. Preloaded,
    # argv comes whole from the constructor; enabled from Python, from
    # /proc/self/cmdline (the last argument may be cut inside).
    code = "import ctypes; ctypes.string_at(0)"
    env = clean_env(FAULTLINE_DIR=str(tmp_path), FAULTLINE_STDERR="0")
    if how == "preloaded":
        env["LD_PRELOAD"] = LIB
    else:
        env["PYTHONPATH"] = os.path.join(fltest.SOURCE, "python")
        env["FAULTLINE_LIB"] = LIB
        code = "import faultline; faultline.enable(); " + code
    p = subprocess.run([PY, "-c", code, *LONG_ARGS], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    [path] = reports(tmp_path)
    with open(path) as f:
        proc = json.load(f)["process"]
    assert proc["argv_truncated"] is True
    kept = proc["argv"][3:]
    assert proc["argv"][:3] == [PY, "-c", code]
    assert 60 < len(kept) < 90 and sum(len(a) + 1 for a in proc["argv"]) <= 8192
    whole = kept if how == "preloaded" else kept[:-1]
    assert whole == LONG_ARGS[:len(whole)]
    assert LONG_ARGS[len(kept) - 1].startswith(kept[-1])
    shown = fltest.cli("show", path)
    assert "(command line cut at 8 KiB)" in shown.stdout, shown.stdout[:2000]


def test_a_command_line_of_exactly_8_kib_is_not_said_to_be_cut(tmp_path):
    # Read from /proc/self/cmdline into 8191 bytes: the one left over is the
    # final NUL, not a cut.
    code = "import faultline; faultline.enable(); import ctypes; ctypes.string_at(0)"
    fixed = len(PY) + 1 + len("-c") + 1 + len(code) + 1
    pad = "p" * (8192 - fixed - 1)
    env = clean_env(FAULTLINE_DIR=str(tmp_path), FAULTLINE_STDERR="0", FAULTLINE_LIB=LIB,
                    PYTHONPATH=os.path.join(fltest.SOURCE, "python"))
    p = subprocess.run([PY, "-c", code, pad], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    with open(reports(tmp_path)[0]) as f:
        proc = json.load(f)["process"]
    assert proc["argv"] == [PY, "-c", code, pad]
    assert "argv_truncated" not in proc


def test_a_command_line_that_fits_is_not_said_to_be_cut(tmp_path):
    crash_with_args(tmp_path, {"FAULTLINE_SCRUB": "0"})
    with open(reports(tmp_path)[0]) as f:
        proc = json.load(f)["process"]
    assert "argv_truncated" not in proc and proc["argv"][-7:] == SECRET_ARGS


def test_scrubbing_can_be_turned_off(tmp_path):
    crash_with_args(tmp_path, {"FAULTLINE_SCRUB": "0"})
    with open(reports(tmp_path)[0]) as f:
        assert json.load(f)["process"]["argv"][-7:] == SECRET_ARGS


def test_environment_stays_out_of_reports(tmp_path):
    crash_with_args(tmp_path, {"MY_SECRET_ENV": "do-not-leak-42"})
    assert "do-not-leak-42" not in open(reports(tmp_path)[0]).read()


# --- conflicting and odd settings ---------------------------------------------------------

@pytest.mark.parametrize("env,warning", [
    ({"FAULTLINE_THREAD_SIGNAL": "SEGV"}, "FAULTLINE_THREAD_SIGNAL=SEGV"),
    ({"FAULTLINE_DUMP_SIGNAL": "SEGV"}, "FAULTLINE_DUMP_SIGNAL=SEGV"),
    # RTMAX-3 is the thread signal (61) spelled as kill -l does: refused as
    # the number is, not as an unknown name.
    ({"FAULTLINE_SIGNALS": "SEGV,RTMAX-3"}, "FAULTLINE_SIGNALS=SEGV,RTMAX-3 (it includes the thread"),
    ({"FAULTLINE_SIGNALS": "SEGV,61"}, "FAULTLINE_SIGNALS=SEGV,61"),
    ({"FAULTLINE_THREAD_SIGNAL": "ABRT"}, "FAULTLINE_THREAD_SIGNAL=ABRT"),
    ({"FAULTLINE_THREAD_SIGNAL": "USR2", "FAULTLINE_DUMP": "1"}, "FAULTLINE_THREAD_SIGNAL=USR2"),
    ({"FAULTLINE_SIGNALS": "KILL"}, "FAULTLINE_SIGNALS=KILL (SIGKILL and SIGSTOP cannot be caught)"),
    # The dump signal set to the thread signal: the dump signal is refused,
    # not FAULTLINE_SIGNALS (which was put back to the default set).
    ({"FAULTLINE_SIGNALS": "SEGV,ABRT", "FAULTLINE_DUMP_SIGNAL": "SIGRTMAX-3"},
     "FAULTLINE_DUMP_SIGNAL=SIGRTMAX-3 (it is the thread signal)"),
    # The watchdog's alarm: as the thread signal no thread answered.
    ({"FAULTLINE_THREAD_SIGNAL": "SIGALRM"}, "FAULTLINE_THREAD_SIGNAL=SIGALRM (the watchdog uses it"),
    ({"FAULTLINE_SIGNALS": ",,,"}, "FAULTLINE_SIGNALS=,,,"),
])
def test_conflicting_signal_settings_are_refused_and_the_crash_still_reported(tmp_path, env, warning):
    r = fltest.run([fltest.program("threads"), "many", "3"], env=env, timeout=120)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    if warning:
        assert warning in r.stderr and "using the default" in r.stderr, r.stderr
    rep = r.report  # exactly one report, no dump loop
    assert rep["kind"] == "crash"
    assert all(t["captured"] for t in rep["threads"]), "other threads' stacks were lost"
    if "FAULTLINE_SIGNALS" not in (warning or ""):  # kept as set, or not set
        assert "ignoring FAULTLINE_SIGNALS" not in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["SIGRTMAX-3", "RTMAX-5", "SIGRTMIN+2", "40"])
def test_thread_signal_by_real_time_name(value):
    # The README names the default SIGRTMAX-3; that spelling was refused as
    # an unknown signal (and the default used), so no other could be named.
    r = fltest.run([fltest.program("threads"), "many", "3"],
                   env={"FAULTLINE_THREAD_SIGNAL": value}, timeout=120)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert "ignoring" not in r.stderr, r.stderr
    rep = r.report
    assert len(rep["threads"]) == 4
    assert all(t["captured"] for t in rep["threads"]), [t.get("note") for t in rep["threads"]]


@pytest.mark.parametrize("value", ["SIGRTMAX", "64"])
def test_thread_signal_64_is_refused_with_its_reason(value):
    r = fltest.run([fltest.program("threads"), "many", "3"],
                   env={"FAULTLINE_THREAD_SIGNAL": value}, timeout=120)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert (f"ignoring FAULTLINE_THREAD_SIGNAL={value} (signal 64 (SIGRTMAX) cannot be used"
            in r.stderr), r.stderr
    assert all(t["captured"] for t in r.report["threads"])


def test_thread_signal_0_is_none():
    # 0 is "none", as for the dump signal: only the crashing thread's stack,
    # said so in the report. It was taken for a clash with the dump signal
    # (also 0), refused with a wrong reason and the default used.
    r = fltest.run([fltest.program("threads"), "many", "3"],
                   env={"FAULTLINE_THREAD_SIGNAL": "0"}, timeout=120)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert "ignoring" not in r.stderr, r.stderr
    rep = fltest.validate(r.report)
    assert len(rep["threads"]) == 4
    crashed = [t for t in rep["threads"] if t.get("crashed")]
    assert len(crashed) == 1 and crashed[0]["captured"]
    assert not any(t["captured"] for t in rep["threads"] if not t.get("crashed"))
    assert any("no thread-dump signal installed" in e for e in rep["faultline"]["errors"])


@pytest.mark.parametrize("value", ["1", "yes", "true", "on"])
def test_disable_accepts_the_usual_words(value):
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_DISABLE": value})
    assert r.returncode == -signal.SIGSEGV and r.reports == []


# --- the arena stays out of core files -------------------------------------------------------

def test_arena_is_not_dumped_in_cores(tmp_path):
    # An arena of an unusual size (24 MiB) to tell it from other mappings.
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_ARENA_MB="24")
    p = subprocess.Popen([PY, "-c", "import sys; print('ready', flush=True); sys.stdin.readline()"],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"  # the library is installed by now
        with open(f"/proc/{p.pid}/smaps") as f:
            smaps = f.read()
    finally:
        p.communicate(b"\n", timeout=30)
    blocks = re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", smaps)
    arena = [b for b in blocks if re.search(r"^Size:\s+24576 kB$", b, re.M)]
    assert arena, "no 24 MiB mapping found"
    flags = [re.search(r"^VmFlags:(.*)$", b, re.M).group(1).split() for b in arena]
    assert any("dd" in f for f in flags), flags


# --- a filesystem without RENAME_NOREPLACE or hard links ------------------------------------

def crash_denied(tmp_path, denied):
    """The crasher's null read under the preload, with the system calls in
    denied ({number: errno}) refused by seccomp; its stderr as text."""
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path))
    deny = [a for nr, e in denied.items() for a in ("-d", f"{nr}:{e}")]
    p = subprocess.run([fltest.program("seccomp_launcher"), *deny, CRASHER, "null-read"], env=env,
                       capture_output=True, timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == -signal.SIGSEGV, err
    return err


def test_report_published_where_neither_rename_noreplace_nor_link_works(tmp_path):
    # vfat, exFAT and some FUSE filesystems: renameat2(RENAME_NOREPLACE) fails
    # with EINVAL and linkat with EPERM. Before, the report was dropped for
    # the stderr copy; now a plain rename publishes it under a free name.
    (tmp_path / "faultline-keep.json").write_text("not ours")
    err = crash_denied(tmp_path, {316: errno.EINVAL, 265: errno.EPERM})  # renameat2, linkat
    found = [r for r in reports(tmp_path) if not r.endswith("faultline-keep.json")]
    assert len(found) == 1, (found, err)
    with open(found[0]) as f:
        fltest.validate(json.load(f))
    assert "could not write the report" not in err and "report written to" in err, err
    assert (tmp_path / "faultline-keep.json").read_text() == "not ours"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize("refusal", [errno.EPERM, errno.EACCES, errno.EOPNOTSUPP])
def test_report_published_where_a_filter_refuses_renameat2(tmp_path, refusal):
    # Container runtimes' seccomp profiles refuse system calls they do not
    # know with EPERM (some EACCES or EOPNOTSUPP), not ENOSYS. Before, only
    # EINVAL and ENOSYS led to link(2): the report went to stderr only.
    err = crash_denied(tmp_path, {316: refusal})  # renameat2
    path, rep = only_report(tmp_path)
    assert "could not write the report" not in err and f"report written to {path}" in err, err
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_report_published_where_a_filter_refuses_renameat2_and_link(tmp_path):
    # Both refused as a filter refuses them: the rename once the name is free.
    err = crash_denied(tmp_path, {316: errno.EPERM, 265: errno.EACCES})  # renameat2, linkat
    path, rep = only_report(tmp_path)
    assert f"report written to {path}" in err, err
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# Filesystems whose every reader shares this machine's page cache, where a
# report is renamed before its flush (report_file.cpp); elsewhere (NFS,
# 9p, virtiofs, FUSE) the flush comes first.
LOCAL_FS = {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x858458F6, 0x794C7630, 0x2FC12FC1,
            0xF2F52010, 0xCA451A4E}


def skip_unless_renamed_first(d):
    out = subprocess.run(["stat", "-f", "-c", "%t", str(d)], capture_output=True, text=True)
    if out.returncode != 0 or int(out.stdout.strip() or "0", 16) not in LOCAL_FS:
        pytest.skip(f"{d} is not on a local filesystem: reports are flushed before their rename")


def test_report_kept_and_copied_to_stderr_when_its_flush_fails(tmp_path):
    skip_unless_renamed_first(tmp_path)
    # A disk that fails the flush (EIO: a dying disk, a thin pool out of
    # space, a network filesystem that lost its server). The report used to
    # be removed for the stderr copy; on a local filesystem it is published
    # before the flush now, and stays (a reader may still find it whole),
    # and stderr says it may not last and carries the copy to trust.
    err = crash_denied(tmp_path, {74: errno.EIO})  # fsync
    path, rep = only_report(tmp_path)
    assert f"report written to {path} but not flushed to the disk: EIO" in err, err
    assert stderr_report(err)["diagnosis"]["signature"] == rep["diagnosis"]["signature"]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_where_the_filesystem_is_unknown_the_report_is_flushed_before_its_rename(tmp_path):
    # On a network filesystem a reader on another host sees only flushed
    # data, so the report is flushed before its rename there, and so where
    # the filesystem cannot be told (fstatfs refused). A failed flush then
    # publishes nothing (the data may not be on the server) and the report
    # goes to stderr.
    err = crash_denied(tmp_path, {138: errno.EPERM, 74: errno.EIO})  # fstatfs, fsync
    assert reports(tmp_path) == [], err
    assert "could not write the report to" in err and ": EIO" in err, err
    fltest.validate(stderr_report(err))
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def strace_works():
    """strace on this machine, able to trace (ptrace is refused in some containers)."""
    if not hasattr(strace_works, "ok"):
        strace_works.ok = shutil.which("strace") is not None and subprocess.run(
            ["strace", "-f", "-o", "/dev/null", "true"], capture_output=True).returncode == 0
    return strace_works.ok


def strace_argv(inject, program, *args, lib=LIB):
    """The program under strace with one system call slowed or failed as
    `inject` says (strace's -e inject=...), the preload on the program only."""
    call = inject.split(":", 1)[0]
    return [shutil.which("strace"), "-f", "-o", "/dev/null", "-E", f"LD_PRELOAD={lib}",
            "-e", f"trace={call}", "-e", f"inject={inject}", program, *args]


@pytest.mark.skipif(not strace_works(), reason="needs strace, and ptrace allowed")
def test_report_is_seen_while_the_disk_is_slow_to_flush(tmp_path):
    skip_unless_renamed_first(tmp_path)
    # A flush that takes seconds (a disk behind a job's checkpoint writes;
    # here every fsync made 2 s longer). The report was flushed before its
    # rename and stayed a hidden temporary file all that time. On a local
    # filesystem it is whole once written, so it is renamed first now: a
    # reader has it while the process waits on the disk.
    env = clean_env(FAULTLINE_DIR=str(tmp_path))
    p = subprocess.Popen(strace_argv("fsync:delay_enter=2000000", CRASHER, "null-read"),
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = []
    while p.poll() is None and not seen:
        seen = reports(tmp_path)
        time.sleep(0.01)
    err = p.communicate(timeout=120)[1].decode(errors="replace")
    assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), err
    assert seen, (fltest.listdir(tmp_path), err)  # seen while the process waited on the disk
    _, rep = only_report(tmp_path)
    assert rep["signal"]["name"] == "SIGSEGV"


THREADS = fltest.program("threads")


def crash_with_minidump_under_watchdog(tmp_path, inject):
    """The threads program's crash with a minidump and a 1 s watchdog, one
    system call slowed by strace (inject): its stderr and its one report."""
    env = clean_env(FAULTLINE_DIR=str(tmp_path), FAULTLINE_WATCHDOG="1", FAULTLINE_MINIDUMP="1")
    r = subprocess.run(strace_argv(inject, THREADS, "many"), env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), r.stderr
    return (r.stderr, *only_report(tmp_path))


@pytest.mark.skipif(not strace_works(), reason="needs strace, and ptrace allowed")
def test_a_report_written_while_the_minidump_waits_on_the_disk_names_it(tmp_path):
    skip_unless_renamed_first(tmp_path)
    # The owner renamed the minidump and waits on its flush past the
    # watchdog, and another thread writes the report: the report names the
    # minidump (it said none, and the two files had different names).
    err, path, rep = crash_with_minidump_under_watchdog(tmp_path, "fsync:delay_enter=6000000")
    assert "writing what was captured from another thread" in err, err
    dmp = rep["minidump"]
    assert dmp and os.path.exists(tmp_path / dmp) and dmp[:-4] == os.path.basename(path)[:-5], dmp


@pytest.mark.skipif(not strace_works(), reason="needs strace, and ptrace allowed")
def test_a_minidump_whose_flush_the_watchdog_cut_short_is_named_as_written(tmp_path):
    # The minidump's flush (the first fsync, 2 s) outlasts the watchdog's
    # first stage (1 s), which takes the crashing thread out of the phase
    # once the flush returns. The minidump was already published: the report
    # said "no minidump" beside its name, and its descriptors stayed open.
    skip_unless_renamed_first(tmp_path)
    _, _, rep = crash_with_minidump_under_watchdog(tmp_path, "fsync:delay_enter=2000000:when=1")
    assert rep["minidump"] and os.path.exists(tmp_path / rep["minidump"]), rep["minidump"]
    errors = rep["faultline"]["errors"]
    assert "minidump: written; its flush to the disk was cut short" in errors, errors
    assert not any("no minidump" in e for e in errors), errors


def test_a_minidump_on_a_filesystem_flushed_first_leaves_no_temporary_file(tmp_path):
    # Where the minidump is flushed before its rename (fstatfs refused: the
    # filesystem cannot be told from a network one) and the flush fails, it
    # is removed and the report says why.
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_MINIDUMP="1")
    p = subprocess.run([fltest.program("seccomp_launcher"), "-d", f"138:{errno.EPERM}", "-d",
                        f"74:{errno.EIO}", CRASHER, "null-read"], env=env, capture_output=True,
                       timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == -signal.SIGSEGV, err
    assert fltest.listdir(tmp_path) == [], fltest.listdir(tmp_path)
    rep = fltest.validate(stderr_report(err))
    assert "minidump: not written: could not flush its file (EIO)" in rep["faultline"]["errors"]
    assert rep["minidump"] is None


@pytest.mark.skipif(not strace_works(), reason="needs strace, and ptrace allowed")
def test_nothing_on_stderr_from_the_watchdog_under_stderr_0(tmp_path):
    # FAULTLINE_STDERR=0 promises nothing on stderr at a crash. The
    # watchdog's stand-in (the owner stuck writing the minidump) printed its
    # lines and, when the report's flush failed, the whole report.
    env = clean_env(FAULTLINE_DIR=str(tmp_path), FAULTLINE_WATCHDOG="1", FAULTLINE_MINIDUMP="1",
                    FAULTLINE_STDERR="0")
    argv = strace_argv("pwrite64:delay_enter=6000000", THREADS, "many")
    r = subprocess.run([fltest.program("seccomp_launcher"), "-d", f"74:{errno.EIO}", *argv],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), r.stderr
    assert "faultline" not in r.stderr, r.stderr
    _, rep = only_report(tmp_path)
    assert any("another thread wrote this report" in e for e in rep["faultline"]["errors"]), rep


# --- system calls a sandbox's allow-list may lack ------------------------------------------

def test_install_works_where_raw_fstat_and_the_clock_syscall_are_refused(tmp_path):
    # Allow-lists traced from real programs lack what glibc never calls: the
    # fstat system call (glibc's fstat is newfstatat) and clock_gettime (the
    # vDSO's). The install reads its descriptors' identities and the start
    # time without them: with a raw fstat refused every descriptor looked
    # replaced (stderr too: no summary on it).
    err = crash_denied(tmp_path, {5: errno.EPERM, 228: errno.EPERM})  # fstat, clock_gettime
    found = reports(tmp_path)
    assert len(found) == 1, (found, err)
    with open(found[0]) as f:
        rep = fltest.validate(json.load(f))
    start = rep["process"]["start_time"]
    assert start.startswith(time.strftime("%Y-", time.gmtime())), start
    assert "report written to" in err, err


# --- the crash-time stderr summary -----------------------------------------------------------

def test_crash_time_summary_escapes_control_characters(tmp_path):
    from hostlib import unsafe_bytes
    code = ("import ctypes\n"
            "exec(compile('import ctypes\\nctypes.string_at(0)', "
            "'/tmp/evil\\x1b]0;owned\\x07\\x1b[2J\\r\\u009b\\u202e.py', 'exec'))")
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path))
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV
    assert b"evil\\x1b]0;owned\\x07\\x1b[2J\\x0d" in p.stderr, p.stderr
    assert unsafe_bytes(p.stderr) == [], p.stderr
    # The report keeps the name exactly.
    with open(reports(tmp_path)[0]) as f:
        files = {fr.get("file") for t in json.load(f)["threads"] for fr in t["frames"]}
    assert "/tmp/evil\x1b]0;owned\x07\x1b[2J\r\u009b\u202e.py" in files


def test_report_path_with_control_characters_is_escaped_on_stderr(tmp_path):
    from hostlib import unsafe_bytes
    d = tmp_path / "evil\x1b]0;owned\x07\r"
    d.mkdir()
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(d))
    p = subprocess.run([CRASHER, "null-read"], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV
    assert len(reports(d)) == 1
    assert b"report written to " in p.stderr and b"evil\\x1b]0;owned\\x07\\x0d/" in p.stderr, p.stderr
    assert unsafe_bytes(p.stderr) == [], p.stderr


def test_a_real_time_signal_is_named_and_the_report_valid(tmp_path):
    # Before, the report said "UNKNOWN", which the schema rejects.
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_SIGNALS="SEGV,RTMIN+5")
    code = "import os, signal; os.kill(os.getpid(), signal.SIGRTMIN + 5)"
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, timeout=60)
    assert p.returncode == -(signal.SIGRTMIN + 5), p.stderr
    assert b"FAULTLINE_SIGNALS" not in p.stderr, p.stderr
    _, doc = only_report(tmp_path)
    assert doc["signal"]["name"] == "SIGRTMIN+5" and doc["signal"]["number"] == signal.SIGRTMIN + 5


# --- out of descriptors where process_vm_readv is denied ------------------------------------

def test_pipe_reader_works_with_descriptors_exhausted(tmp_path):
    # The safe reader's pipe is made by the first read that needs it, at crash
    # time; in a process out of descriptors it needs two of the ones kept in
    # reserve (and the report a third). Before the reserve held three, this
    # report had no modules and one unnamed frame.
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(tmp_path))
    p = subprocess.run([fltest.program("seccomp_launcher"), fltest.program("threads"), "fd-exhaust"],
                       env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    reports = glob.glob(str(tmp_path / "faultline-*.json"))
    assert len(reports) == 1, p.stderr
    rep = fltest.validate(json.load(open(reports[0])))
    assert rep["faultline"]["safe_read"] == "pipe"
    assert rep["modules"], rep["faultline"]["errors"]
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "crash_now"


@pytest.mark.parametrize("mode", ["once", "again", "elsewhere"])
def test_descriptors_kept_in_reserve_across_installs(tmp_path, mode):
    # A second install (after faultline_uninstall, or back from another
    # directory) opens the report directory again; the spares kept from the
    # first are still released at the crash, so a process out of descriptors
    # still gets its report.
    d, other = tmp_path / "reports", tmp_path / "other"
    d.mkdir()
    other.mkdir()
    p = subprocess.run([fltest.program("reinstall"), str(d), mode, str(other)], env=clean_env(),
                       capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    reports = glob.glob(str(d / "faultline-*.json"))
    assert len(reports) == 1, p.stderr
    fltest.validate(json.load(open(reports[0])))


# --- an executable replaced while it runs ---------------------------------------------------

def test_executable_deleted_while_running_is_named_by_its_path(tmp_path):
    # A package upgrade replaces the binary under a running process; the
    # kernel then names it "<path> (deleted)". The report names the path (the
    # same for crashes before and after the upgrade, so they group).
    exe = tmp_path / "crasher-copy"
    shutil.copy(CRASHER, exe)
    other = tmp_path / "other"  # what the upgrade puts at the path
    shutil.copy(fltest.program("threads"), other)
    reports = tmp_path / "reports"
    reports.mkdir()
    script = textwrap.dedent(f"""
        import os
        fd = os.open({str(exe)!r}, os.O_RDONLY)
        os.set_inheritable(fd, True)
        os.unlink({str(exe)!r})
        os.rename({str(other)!r}, {str(exe)!r})
        os.execv(f"/proc/self/fd/{{fd}}", ["crasher-copy", "null-read"])
    """)
    env = clean_env(LD_PRELOAD=LIB, FAULTLINE_DIR=str(reports))
    p = subprocess.run([PY, "-c", script], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr
    found = glob.glob(str(reports / "faultline-*.json"))
    assert len(found) == 1, p.stderr
    rep = fltest.validate(json.load(open(found[0])))
    main = [m for m in rep["modules"] if m.get("main")]
    assert [m["path"] for m in main] == [str(exe)], main
    # Named from the binary that ran, not from the one now at its path.
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "null_read"


# --- the report directory and /proc taken away -----------------------------------------------

def test_disk_full_falls_back_to_stderr(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with open(mnt / "filler", "wb") as f:
            try:
                f.write(b"x" * 65536)
            except OSError:
                pass
        r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_DIR": str(mnt)})
        assert r.returncode == -signal.SIGSEGV
        assert "could not write the report" in r.stderr
        body = r.stderr.split("--- faultline report begin ---\n", 1)[1].split("--- faultline report end ---")[0]
        fltest.validate(json.loads(body))
        assert not [n for n in fltest.listdir(mnt) if n.startswith(".faultline")]  # no half report left
    finally:
        subprocess.run(["umount", str(mnt)])


def test_directory_removed_after_start(tmp_path):
    d = tmp_path / "gone"
    d.mkdir()
    # The directory disappears while the program runs: a shell removes it
    # and then the crasher (already started with the fd open) crashes.
    script = f'sleep 0.2; exec {CRASHER} null-read'
    env = dict(FAULTLINE_DIR=str(d))
    p = subprocess.Popen(["bash", "-c", script], env=dict(os.environ, LD_PRELOAD=fltest.LIB, **env),
                         stderr=subprocess.PIPE)
    time.sleep(0.05)
    os.rmdir(d)
    _, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGSEGV or p.returncode == 128 + 11
    assert b"faultline report begin" in err or b"cannot be opened" in err


def test_proc_not_mounted():
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespaces here")
    d = fltest.run(["true"], preload=False).report_dir
    script = f"mount -t tmpfs none /proc && LD_PRELOAD={fltest.LIB} FAULTLINE_DIR={d} exec {THREADS} many 3"
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", script],
                       capture_output=True, timeout=60)
    assert p.returncode in (-signal.SIGSEGV, 128 + 11)
    reports = [n for n in os.listdir(d) if n.startswith("faultline-")]
    assert len(reports) == 1
    rep = fltest.validate(json.load(open(os.path.join(d, reports[0]))))
    assert any("/proc" in e for e in rep["faultline"]["errors"])
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "crash_now"
