"""The faultline command against hostile input: huge and deep documents,
FIFOs, devices and sparse files among reports, escape sequences and bidi
controls inside reports, and a `dump` or `run` that must not hurt the job."""
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from hostlib import CLI, LIB, base_report, cli, copy_of, unsafe_bytes, write_report

PY = sys.executable


# --- item: parsing stays linear ----------------------------------------------------------

def test_a_million_entry_array_is_read_not_stalled(tmp_path):
    # A parse callback made each array element cost time proportional to the
    # array: 200,000 entries took 13 s and 1,000,000 minutes. Linear parsing
    # reads this in about a second; the test's own timeout is the bound.
    doc = base_report()
    doc["breadcrumbs"] = [{"message": "x"}] * 1_000_000
    path = write_report(tmp_path / "wide.json", doc)
    for cmd in ("show", "explain"):
        r = cli(cmd, path, timeout=120)
        assert r.returncode == 0, r.stderr
    r = cli("triage", str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"1 reports, 1 groups" in r.stdout


def test_deep_nesting_is_refused_with_a_message(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"schema": "faultline/1", "x": ' + "[" * 100000 + "]" * 100000 + "}")
    r = cli("show", str(p))
    assert r.returncode == 1
    assert b"nested more than 256 levels" in r.stderr
    # Brackets inside strings are not nesting.
    doc = base_report()
    doc["annotations"] = {"k": "[" * 10000}
    r = cli("show", write_report(tmp_path / "strings.json", doc))
    assert r.returncode == 0, r.stderr


# --- item: files that are not reports ----------------------------------------------------

@pytest.fixture
def hostile_dir(tmp_path):
    """A report directory with two good reports and every kind of trap."""
    d = tmp_path / "reports"
    d.mkdir()
    good = base_report()
    write_report(d / "faultline-a.json", good)
    write_report(d / "faultline-b.json", good)
    os.mkfifo(d / "fifo-target")
    os.symlink(d / "fifo-target", d / "faultline-fifo.json")
    os.mkfifo(d / "faultline-plainfifo.json")
    os.symlink("/dev/zero", d / "faultline-zero.json")
    with open(d / "faultline-sparse.json", "wb") as f:
        f.truncate(3 << 30)  # 3 GB, no blocks
    os.mkdir(d / "faultline-dir.json")
    return d


def test_triage_skips_fifos_devices_and_huge_files_and_keeps_the_rest(hostile_dir):
    r = cli("triage", "--json", str(hostile_dir), timeout=120)
    assert r.returncode == 1, r.stderr  # files were skipped
    out = json.loads(r.stdout)
    assert out["reports"] == 2 and out["groups"][0]["count"] == 2
    skipped = {os.path.basename(s["path"]): s for s in out["skipped"]}
    assert skipped["faultline-fifo.json"]["reason"] == "not-a-file"
    assert "a FIFO" in skipped["faultline-fifo.json"]["message"]
    assert skipped["faultline-plainfifo.json"]["reason"] == "not-a-file"
    assert skipped["faultline-zero.json"]["reason"] == "not-a-file"
    assert "character device" in skipped["faultline-zero.json"]["message"]
    assert skipped["faultline-sparse.json"]["reason"] == "too-large"
    assert "128 MiB" in skipped["faultline-sparse.json"]["message"]


def test_single_file_commands_refuse_traps_promptly(hostile_dir):
    for name, why in (("faultline-fifo.json", b"a FIFO"), ("faultline-zero.json", b"character device"),
                      ("faultline-sparse.json", b"larger than 128 MiB"), ("faultline-dir.json", b"a directory")):
        path = str(hostile_dir / name)
        for cmd in (["show"], ["explain"], ["markdown"], ["sentry"], ["validate"]):
            r = cli(*cmd, path, timeout=60)
            assert r.returncode == 1, (cmd, name, r.stderr)
            assert why in r.stderr + r.stdout, (cmd, name, r.stderr)
        r = cli("symbolize", path, "-o", os.devnull, timeout=60)
        assert r.returncode == 1 and why in r.stderr, (name, r.stderr)


def test_stdin_without_end_is_cut_at_the_cap():
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([CLI, "show", "-"], stdin=zero, capture_output=True, timeout=120)
    assert p.returncode == 1
    assert b"larger than 128 MiB" in p.stderr


def test_symbolize_does_not_block_on_a_module_that_is_a_fifo(tmp_path):
    fifo = tmp_path / "libtrap.so"
    os.mkfifo(fifo)
    r = cli("symbolize", "--module", str(fifo), "0x1000", timeout=60)
    assert r.returncode == 1
    assert b"not a regular file" in r.stderr
    # A report naming the FIFO as a module: symbolized as far as possible, no hang.
    doc = base_report()
    doc["modules"][0]["path"] = str(fifo)
    for t in doc["threads"]:
        for f in t["frames"]:
            if f.get("kind") == "native":
                f["module"] = str(fifo)
    r = cli("symbolize", write_report(tmp_path / "r.json", doc), "-o", str(tmp_path / "out.json"),
            timeout=60)
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "out.json").exists() or r.returncode == 1


# --- item: output paths are written, never replaced when they are not files -------------

def symbolize_to(tmp_path, out, **kw):
    return subprocess.run([CLI, "symbolize", write_report(tmp_path / "in.json", base_report()), "-o",
                           str(out)], capture_output=True, timeout=60, **kw)


def test_symbolize_output_writes_through_a_fifo_and_a_device(tmp_path):
    # Before, -o wrote a temporary file and renamed it over the target
    # whatever it was: as root `-o /dev/null` made the system's /dev/null a
    # world-readable regular file. Now what is not a regular file is written
    # through and stays what it was.
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    cat = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    r = symbolize_to(tmp_path, fifo)
    got = cat.communicate(timeout=60)[0]
    assert r.returncode == 0, r.stderr
    assert json.loads(got)["schema"] == "faultline/1"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(null, 0o666)  # whatever the umask
        open(null, "wb").close()
    except OSError:
        return  # no device nodes here (not root, or a nodev filesystem)
    r = symbolize_to(tmp_path, null)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_mode & 0o777 == 0o666


def test_symbolize_output_never_replaces_a_link(tmp_path):
    # A link to the standard output (as /dev/stdout is) is written through;
    # before, it was replaced by a regular file.
    to_stdout = tmp_path / "stdout"
    os.symlink("/proc/self/fd/1", to_stdout)
    r = symbolize_to(tmp_path, to_stdout)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "faultline/1"
    assert os.readlink(to_stdout) == "/proc/self/fd/1"
    # A link to a file: refused, the link and its file untouched.
    (tmp_path / "target.json").write_text("keep")
    link = tmp_path / "link.json"
    os.symlink("target.json", link)
    r = symbolize_to(tmp_path, link)
    assert r.returncode == 1 and b"is a symbolic link" in r.stderr, r.stderr
    assert os.readlink(link) == "target.json" and (tmp_path / "target.json").read_text() == "keep"
    # Another user's link, even to a FIFO: refused as well.
    if os.geteuid() == 0:
        fifo = tmp_path / "f"
        os.mkfifo(fifo)
        theirs = tmp_path / "theirs"
        os.symlink("f", theirs)
        os.lchown(theirs, 65534, 65534)
        r = symbolize_to(tmp_path, theirs)
        assert r.returncode == 1 and b"of another user" in r.stderr, r.stderr
        assert os.path.islink(theirs)
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


def test_symbolize_output_replaces_a_regular_file_whole_and_keeps_its_mode(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("old")
    os.chmod(out, 0o600)
    r = symbolize_to(tmp_path, out)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["schema"] == "faultline/1"
    assert os.stat(out).st_mode & 0o777 == 0o600
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


# --- item: terminal and Markdown injection ------------------------------------------------

EVIL = "\x1b]0;owned\x07\x1b[2J\r\x1b[31mFAKE\u009b1m\u202egnp.exe\nnext line"


def evil_report():
    doc = base_report()
    doc["process"]["argv"] = ["python3", "train.py", "--name=" + EVIL, EVIL]
    doc["process"]["hostname"] = "host" + EVIL
    doc["process"]["cwd"] = "/tmp/" + EVIL
    doc["diagnosis"]["summary"] = "SIGSEGV " + EVIL
    doc["diagnosis"]["category"] = "cat" + EVIL
    doc["signal"]["description"] = "desc" + EVIL
    for t in doc["threads"]:
        t["name"] = "thr" + EVIL
        for f in t["frames"]:
            if f.get("kind") == "python":
                f["file"] = "/x/" + EVIL + ".py"
                f["function"] = "fn" + EVIL
                f["qualname"] = "Q." + EVIL
            else:
                f["symbol"] = "sym" + EVIL
    doc["faultline"]["errors"] = ["err" + EVIL]
    return doc


def test_show_explain_triage_validate_escape_control_characters(tmp_path):
    d = tmp_path / ("dir\x1b[2J")
    d.mkdir()
    path = write_report(d / "faultline-evil.json", evil_report())
    outputs = {
        "show": cli("show", "--color=always", path),
        "show-plain": cli("show", path),
        "faulthandler": cli("show", "--faulthandler", path),
        "explain": cli("explain", path),
        "triage": cli("triage", str(d)),
        "validate": cli("validate", path),
    }
    for name, r in outputs.items():
        assert r.returncode in (0, 1), (name, r.stderr)
        out = r.stdout + r.stderr
        if name == "show":
            # The renderer's own colors are the only escape sequences allowed.
            import re
            out = re.sub(rb"\x1b\[[0-9;]*m", b"", out)
        assert unsafe_bytes(out) == [], (name, unsafe_bytes(out), out[:2000])
    show = outputs["show-plain"].stdout.decode()
    # Escaped, not dropped: the reader still sees what was there.
    assert "\\x1b]0;owned\\x07" in show and "\\u009b" in show and "\\u202e" in show
    assert "\\n" in show
    # argv prints as a line that a shell types back exactly.
    line = next(l for l in show.splitlines() if l.startswith("Process:"))
    cmdline = line[line.index(": python3 ") + 2:]
    back = subprocess.run(["bash", "-c", f"printf '%s\\0' {cmdline}"], capture_output=True).stdout
    assert back.split(b"\0")[:-1] == [a.encode() for a in evil_report()["process"]["argv"]]


def test_error_messages_escape_file_names(tmp_path):
    p = tmp_path / "bad\x1b]0;x\x07.json"
    p.write_text("{")
    r = cli("show", str(p))
    assert r.returncode == 1 and unsafe_bytes(r.stderr) == []


def test_markdown_cells_and_html_cannot_be_broken_out_of(tmp_path):
    doc = evil_report()
    doc["diagnosis"]["summary"] = "a\r<img src=x onerror=alert(1)>|b"
    doc["process"]["hostname"] = "h\r| Injected | row |\r<script>"
    doc["process"]["executable"] = "/bin/x\r</code><script>alert(1)</script>"
    r = cli("markdown", write_report(tmp_path / "r.json", doc))
    assert r.returncode == 0, r.stderr
    md = r.stdout.decode()
    assert "\r" not in md and unsafe_bytes(r.stdout) == []
    # Outside code spans (where GitHub shows HTML as text) no tag of the report's survives.
    import re
    prose = re.sub(r"(`+).*?\1", "", md)
    assert re.findall(r"(?<!\\)<(?:script|img|/code)", prose) == [], prose
    table = [l for l in md.splitlines() if l.startswith("| ")]
    assert len(table) == 14, table  # header and 13 rows: nothing added, nothing split
    for row in table:
        cells = row.replace("\\|", "").split("|")
        assert len(cells) == 4, row  # "", field, value, ""


# --- item: dump never kills, finds the directory, refuses pid 0 --------------------------

WAITER = textwrap.dedent("""
    import os, sys
    os.makedirs(sys.argv[1], exist_ok=True)
    os.chdir(sys.argv[1])
    print(os.getpid(), flush=True)
    sys.stdin.readline()
""")


def start_waiter(tmp_path, env, cwd):
    prog = tmp_path / "waiter.py"
    prog.write_text(WAITER)
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_") or k in
         ("FAULTLINE_SOURCE", "FAULTLINE_BUILD", "FAULTLINE_LIB", "FAULTLINE_CLI")}
    e.pop("LD_PRELOAD", None)
    e.update(env)
    p = subprocess.Popen([PY, str(prog), str(tmp_path / "elsewhere")], env=e, cwd=cwd,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline())
    return p, pid


def stop(p):
    if p.poll() is None:
        p.stdin.write("\n")
        p.stdin.flush()
    return p.wait(timeout=30)


def test_dump_refuses_a_preloaded_job_that_does_not_catch_the_signal(tmp_path):
    # The README's main usage: preloaded, no FAULTLINE_DUMP. SIGUSR2 would kill it.
    p, pid = start_waiter(tmp_path, {"LD_PRELOAD": LIB, "FAULTLINE_DIR": str(tmp_path)}, tmp_path)
    try:
        r = cli("dump", "--method", "signal", "--timeout", "5", str(pid), timeout=60)
        assert r.returncode == 1
        assert b"does not catch SIGUSR2" in r.stderr
        assert p.poll() is None, "the job was killed"
    finally:
        assert stop(p) == 0


def test_dump_finds_a_relative_report_dir_after_the_job_changed_directory(tmp_path):
    (tmp_path / "reports").mkdir()
    p, pid = start_waiter(tmp_path, {"LD_PRELOAD": LIB, "FAULTLINE_DIR": "reports",
                                     "FAULTLINE_DUMP": "1"}, tmp_path)
    try:
        r = cli("dump", "--print-path", "--timeout", "20", str(pid), timeout=60)
        assert r.returncode == 0, r.stderr
        path = r.stdout.decode().strip()
        assert os.path.dirname(path) == str(tmp_path / "reports")
        with open(path) as f:
            assert json.load(f)["kind"] == "dump"
    finally:
        assert stop(p) == 0


def test_dump_pid_zero_is_a_plain_usage_error():
    for bad in ("0", "-1", "abc"):
        r = cli("dump", bad)
        assert r.returncode == 2, r.stderr
        assert b"e+308" not in r.stderr and b"1.79769" not in r.stderr
    r = cli("dump", "0")
    assert b"process id" in r.stderr


# --- item: run without "--" ---------------------------------------------------------------

def test_run_without_double_dash_leaves_the_jobs_options_alone(tmp_path):
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    for args in (["-d", "data", "--quiet", "-e", "X=1", "--", "-q"], ["--dir", str(tmp_path)]):
        r = cli("run", "--dir", str(tmp_path), PY, "-c", code, *args, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == args
    # With "--" it is the same.
    r = cli("run", "--dir", str(tmp_path), "--", PY, "-c", code, "-d", "x", timeout=60)
    assert json.loads(r.stdout) == ["-d", "x"]
