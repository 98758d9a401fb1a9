"""Live dumps by ptrace (`faultline dump PID`, and faultline_dump_now()'s
helper) carry what the application recorded, as the dump faultline writes
in the process does: the crash keys, the thread keys, the breadcrumbs. They
are read out of the stopped process through the descriptor the library
exports; one that does not match leaves them out, saying why."""
import json
import os
import subprocess

import pytest

import fltest
from test_dump_now import _under_seccomp, ask, finish

DUMPKEYS = fltest.program("dumpkeys")

# What dumpkeys records (the oracle: the program's own calls), as a report
# holds it: the invalid UTF-8 byte is U+FFFD, the removed key is gone.
PROCESS_KEYS = {"job": "train-42", "stage": "epoch 3\ttab \"quoted\" \u00e9t\u00e9",
                "bad-utf8": "caf\ufffd!"}
CRUMBS = ["loaded config", "step 1", "step 2 \u2713"]


def thread_keys_set(main, a, b):
    return {main: {"role": "main"},
            a: {"request": "GET /a?id=1", "worker": "a"},
            b: {"request": "POST /b", "worker": "b"}}


def start(tmp_path, helper=False):
    """dumpkeys, and its threads. Without the helper, the dump signal's dump
    is written in the process (the oracle); with it, the dump signal, like
    faultline_dump_now(), is taken by the library's ptrace helper."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e["FAULTLINE_DIR"] = str(tmp_path)
    if not helper:
        e["FAULTLINE_DUMP_HELPER"] = "0"
    p = subprocess.Popen([DUMPKEYS], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert line and line[0] == "ready", p.stderr.read()
    return p, [int(x) for x in line[1:]]


def load(path):
    rep = fltest.validate(json.load(open(path)))
    v = fltest.cli("validate", path)
    assert v.returncode == 0, v.stdout + v.stderr
    return rep


def cli_dump(pid, method, capture=None):
    """`faultline dump --method METHOD`'s report, taken by `capture` (the
    method, unless the library's helper takes the dump signal's dump)."""
    r = fltest.cli("dump", "--print-path", "--method", method, str(pid), timeout=60)
    assert r.returncode == 0, r.stderr
    rep = load(r.stdout.strip().splitlines()[-1])
    assert rep["kind"] == "dump" and rep["capture"] == (capture or method), rep["capture"]
    return rep


def thread_keys(rep):
    return {t["tid"]: t["annotations"] for t in rep["threads"] if "annotations" in t}


def messages(rep):
    return [b["message"] for b in rep["breadcrumbs"]]


def check_signal_dump(rep, main):
    assert rep["annotations"] == PROCESS_KEYS
    assert messages(rep) == CRUMBS
    # In the process only the dumping thread's keys can be read.
    assert rep["dumping_tid"] == main
    assert thread_keys(rep) == {main: {"role": "main"}}


def check_same_as_signal(rep, sig, main):
    """rep carries what the signal dump sig does, field for field."""
    assert rep["annotations"] == sig["annotations"]
    assert rep["breadcrumbs"] == sig["breadcrumbs"]  # times too
    assert thread_keys(rep)[main] == thread_keys(sig)[main]
    assert not [e for e in rep["faultline"]["errors"] if "annotations" in e], rep["faultline"]


def test_a_ptrace_dump_carries_the_keys_and_breadcrumbs_a_signal_dump_does(tmp_path):
    p, (main, a, b) = start(tmp_path)
    try:
        sig = cli_dump(main, "signal")
        check_signal_dump(sig, main)
        rep = cli_dump(main, "ptrace")
        check_same_as_signal(rep, sig, main)
        # From outside every thread's keys can be read: each on its thread.
        assert thread_keys(rep) == thread_keys_set(main, a, b)
        names = {t["tid"]: t["name"] for t in rep["threads"]}
        assert names[a] == "keys-a" and names[b] == "keys-b"
    finally:
        assert finish(p) == 0, p.stderr.read()


@pytest.mark.skipif(_under_seccomp(), reason="under a seccomp filter dumps go by signal")
def test_dumps_by_the_librarys_helper_carry_the_keys_and_breadcrumbs(tmp_path):
    # faultline_dump_now() and the dump signal, both by the helper: as the
    # dump from outside, which the test above holds to the signal dump.
    p, (main, a, b) = start(tmp_path, helper=True)
    try:
        ref = cli_dump(main, "ptrace")
        assert ref["annotations"] == PROCESS_KEYS and messages(ref) == CRUMBS
        rc, path = ask(p, "dump")[1:3]
        assert rc == "0", path
        now = load(path)
        assert now["capture"] == "ptrace" and now["dumping_tid"] == main
        by_signal = cli_dump(main, "signal", capture="ptrace")
        for rep in (now, by_signal):
            check_same_as_signal(rep, ref, main)
            assert thread_keys(rep) == thread_keys_set(main, a, b)
    finally:
        assert finish(p) == 0, p.stderr.read()


@pytest.mark.parametrize("helper", [False, True], ids=["signal-in-process", "helper"])
def test_a_descriptor_that_does_not_match_leaves_the_keys_out_and_says_why(tmp_path, helper):
    if helper and _under_seccomp():
        pytest.skip("under a seccomp filter dumps go by signal")
    p, (main, a, b) = start(tmp_path, helper)
    try:
        assert ask(p, "corrupt") == ["corrupted"]
        reps = [cli_dump(main, "ptrace")]
        if helper:
            rc, path = ask(p, "dump")[1:3]
            assert rc == "0", path
            reps.append(load(path))
            reps.append(cli_dump(main, "signal", capture="ptrace"))
        for rep in reps:
            assert rep["capture"] == "ptrace"
            assert "annotations" not in rep and "breadcrumbs" not in rep, rep.get("annotations")
            assert thread_keys(rep) == {}
            why = [e for e in rep["faultline"]["errors"] if "faultline_remote_tables" in e]
            assert why and "version 99" in why[0], rep["faultline"]["errors"]
            assert len(rep["threads"]) == 3
        if not helper:
            # The process's own dump does not use the descriptor.
            check_signal_dump(cli_dump(main, "signal"), main)
        assert p.poll() is None
    finally:
        assert finish(p) == 0, p.stderr.read()


def test_tables_scribbled_over_are_read_within_their_bounds(tmp_path):
    p, (main, a, b) = start(tmp_path)
    try:
        assert ask(p, "scribble") == ["scribbled"]
        sig = cli_dump(main, "signal")
        rep = cli_dump(main, "ptrace")
        # Cut at their buffers, as the process's own dump cuts them; a count
        # past the table reads the table; breadcrumbs numbered past the ring
        # are not there.
        assert rep["annotations"] == sig["annotations"]
        assert rep["annotations"]["K" * 63] == "V" * 511
        assert len(rep["annotations"]) == len(PROCESS_KEYS)
        assert rep["breadcrumbs"] == sig["breadcrumbs"] == []
        assert thread_keys(rep) == thread_keys_set(main, a, b)
        # Tables where nothing is mapped: left out, and why.
        assert ask(p, "badptr") == ["badptr"]
        rep = cli_dump(main, "ptrace")
        assert "annotations" not in rep and thread_keys(rep) == {}
        assert any("could not be read" in e for e in rep["faultline"]["errors"]), rep["faultline"]
        assert p.poll() is None
    finally:
        assert finish(p) == 0, p.stderr.read()
