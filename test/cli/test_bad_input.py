"""Bad input: every command says what is wrong, exits 1 (2 for usage), never crashes."""

import json
import os
import random

import pytest

from clitest import DATA, run

with open(os.path.join(DATA, "cli-python-segv.json"), "rb") as _f:
    GOOD = _f.read()

rng = random.Random(1)
BAD = {
    "empty": (b"", "empty file"),
    "blank": (b"  \n\t\n", "empty file"),
    "truncated-half": (GOOD[: len(GOOD) // 2], "truncated JSON"),
    "truncated-one-byte": (GOOD[:1], "truncated JSON"),
    "truncated-last-brace": (GOOD.rstrip()[:-1], "truncated JSON"),
    "not-json": (b"Segmentation fault (core dumped)\n", "not JSON"),
    "trailing-garbage": (GOOD + b"}", "not JSON"),
    "array": (b"[1, 2, 3]", "not a faultline report"),
    "string": (b'"faultline/1"', "not a faultline report"),
    "no-schema": (b'{"kind": "crash"}', 'no "schema"'),
    "wrong-schema": (GOOD.replace(b'"faultline/1"', b'"faultline/2"'), 'unsupported schema "faultline/2"'),
    "other-schema-type": (b'{"schema": 1}', 'no "schema"'),
    "binary-nul": (bytes(rng.randrange(256) for _ in range(4096)) + b"\0", "binary data"),
    "binary-latin1": ('{"schema": "faultline/1", "x": "é"}'.encode("latin-1"), "binary data"),
    "elf": (b"\x7fELF\x02\x01\x01\0" + b"\0" * 56, "binary data"),
    "deep": (b"[" * 100000 + b"]" * 100000, "nested more than"),
    # Valid syntax, but no double holds it (found by the symbolizer's fuzzer).
    "number-overflow": (b'{"schema": "faultline/1", "n": 4' + b"4" * 70 + b'e444}', "number overflow"),
}


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    for name, (content, _) in BAD.items():
        (d / (name + ".json")).write_bytes(content)
    return d


@pytest.mark.parametrize("command", [["show"], ["show", "--faulthandler"], ["markdown"], ["sentry"],
                                     ["sentry", "--envelope"], ["explain"]])
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_report(bad_dir, name, command):
    path = str(bad_dir / (name + ".json"))
    r = run(*command, path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("faultline: " + path + ": "), r.stderr
    assert BAD[name][1] in r.stderr
    assert r.stderr.count("\n") == 1  # one clear line, no stack dump


@pytest.mark.parametrize("name", sorted(BAD))
def test_validate_bad_report(bad_dir, name):
    path = str(bad_dir / (name + ".json"))
    r = run("validate", path)
    assert r.returncode == 1
    assert r.stdout.startswith(path + ": invalid")


def test_missing_file():
    r = run("show", "/nonexistent/report.json")
    assert r.returncode == 1
    assert r.stderr == "faultline: /nonexistent/report.json: cannot open: No such file or directory\n"


def test_directory_as_report(tmp_path):
    r = run("show", str(tmp_path))
    assert r.returncode == 1 and r.stderr.startswith("faultline: ")


def test_stdin():
    r = run("show", "-", input=GOOD)
    assert r.returncode == 0 and b"SIGSEGV" in r.stdout
    r = run("show", "-", input=b"")
    assert r.returncode == 1 and b"<stdin>: empty file" in r.stderr


@pytest.mark.parametrize("args", [[], ["show"], ["nosuchcommand"], ["show", "--color=bogus", "x.json"],
                                  ["markdown", "a.json", "b.json"], ["triage"], ["dump"],
                                  ["dump", "notapid"], ["run"]])
def test_usage_errors_exit_2(args):
    r = run(*args)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert r.stderr


@pytest.mark.parametrize("sub", ["show", "markdown", "sentry", "triage", "validate", "explain", "run",
                                 "dump", ""])
def test_help(sub):
    r = run(*([sub] if sub else []), "--help")
    assert r.returncode == 0
    assert "Usage:" in r.stdout or "Options:" in r.stdout or "OPTIONS" in r.stdout


def test_triage_skips_and_lists_bad_files(bad_dir, tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    for name, (content, _) in BAD.items():
        (d / (name + ".json")).write_bytes(content)
    (d / "good.json").write_bytes(GOOD)
    (d / "notes.txt").write_text("not a report name: ignored")
    (d / ".faultline-x.json.tmp-1").write_text("{")  # being written: ignored
    # An unreadable file: a dangling link (chmod does not stop root).
    os.symlink("/nonexistent/target.json", d / "dangling.json")
    unreadable = d / "unreadable.json"
    unreadable.write_bytes(GOOD)
    os.chmod(unreadable, 0)
    r = run("triage", "--json", str(d))
    assert r.returncode == 1
    out = json.loads(r.stdout)
    skipped = {os.path.basename(s["path"]): s["reason"] for s in out["skipped"]}
    expected = {n + ".json" for n in BAD} | {"dangling.json"}
    if os.geteuid() != 0:
        expected.add("unreadable.json")
    assert set(skipped) == expected
    assert skipped["dangling.json"] == "unreadable"
    assert skipped["empty.json"] == "empty"
    assert skipped["truncated-half.json"] == "truncated"
    assert skipped["binary-nul.json"] == "binary"
    assert skipped["wrong-schema.json"] == "wrong-schema"
    assert out["reports"] == 1 + (1 if os.geteuid() == 0 else 0)
    text = run("triage", str(d))
    assert text.returncode == 1
    assert "Skipped (not valid reports):" in text.stdout
    assert "dangling.json: cannot open" in text.stdout


def test_triage_missing_dir():
    r = run("triage", "/nonexistent/dir")
    assert r.returncode == 1
    assert r.stderr == "faultline: /nonexistent/dir: not a directory\n"
