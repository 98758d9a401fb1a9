"""Crash loops: at most COUNT reports of one signature per window
(FAULTLINE_SAME_CRASH_LIMIT), the rest counted in the next report written,
and a cap on the report directory's faultline files (FAULTLINE_DIR_LIMIT_MB)
that never removes a report an upload spool has not sent."""
import glob
import json
import os
import pwd
import signal
import subprocess
import time

import pytest

import fltest

CRASHER = fltest.program("crasher")
MODES = ["null-read", "ro-write", "bad-fnptr", "div-zero", "ud2", "sigbus", "trap", "abort"]
SIGNALS = {"null-read": signal.SIGSEGV, "ro-write": signal.SIGSEGV, "bad-fnptr": signal.SIGSEGV,
           "div-zero": signal.SIGFPE, "ud2": signal.SIGILL, "sigbus": signal.SIGBUS,
           "trap": signal.SIGTRAP, "abort": signal.SIGABRT}


def crash(d, mode="null-read", **env):
    r = fltest.run([CRASHER, mode], report_dir=str(d), env=env)
    # The first law: the process ends as it would have, limited or not.
    assert r.returncode == -SIGNALS[mode], r.stderr
    return r


def reports(d):
    return sorted(glob.glob(os.path.join(str(d), "faultline-*.json")))


def faultline_bytes(d):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(str(d), "faultline-*"))
               if p.endswith((".json", ".dmp")))


def load(path):
    with open(path) as f:
        return fltest.validate(json.load(f))


def test_a_loop_of_one_crash_writes_count_reports_per_window_and_counts_the_rest(tmp_path):
    limit = {"FAULTLINE_SAME_CRASH_LIMIT": "3/5", "FAULTLINE_MINIDUMP": "1"}
    start = time.time()
    runs = [crash(tmp_path, **limit) for _ in range(8)]
    if int(time.time()) - int(start) >= 5:
        pytest.skip("the loop outlasted the 5 s window on this machine")
    assert len(reports(tmp_path)) == 3
    assert len(glob.glob(os.path.join(str(tmp_path), "faultline-*.dmp"))) == 3  # suppressed: none
    signature = load(reports(tmp_path)[0])["diagnosis"]["signature"]
    for i, r in enumerate(runs):
        assert "fatal signal" in r.stderr  # the summary still goes to stderr
        if i < 3:
            assert "report written to" in r.stderr and "suppressed" not in r.stderr
        else:
            assert "report written to" not in r.stderr
            assert (f"faultline: report suppressed: {i - 2} crashes of signature {signature} since "
                    in r.stderr), r.stderr
            assert "(FAULTLINE_SAME_CRASH_LIMIT=3/5)" in r.stderr
    first_suppressed = [ln for ln in runs[3].stderr.splitlines() if "suppressed" in ln][0]
    since = first_suppressed.split(" since ")[1].split(" ")[0]
    # The next window: the next report written says how many were not.
    time.sleep(max(0.0, int(start) + 5.2 - time.time()))
    r = crash(tmp_path, **limit)
    assert "report written to" in r.stderr
    assert len(reports(tmp_path)) == 4
    newest = max(reports(tmp_path), key=os.path.getmtime)
    assert load(newest)["faultline"]["suppressed"] == {"count": 5, "since": since}
    # Counted once: the report after it says nothing of them.
    crash(tmp_path, **limit)
    newest = max(reports(tmp_path), key=os.path.getmtime)
    assert "suppressed" not in load(newest)["faultline"]


def test_the_same_crash_limit_is_on_by_default_and_0_turns_it_off(tmp_path):
    on, off = tmp_path / "default", tmp_path / "off"
    on.mkdir()
    off.mkdir()
    for _ in range(12):
        crash(on)
        crash(off, FAULTLINE_SAME_CRASH_LIMIT="0")
    assert len(reports(on)) == 10  # 10/3600
    assert len(reports(off)) == 12
    assert not [n for n in os.listdir(off) if n.startswith(".faultline-limit-")]


def test_a_bad_same_crash_limit_is_reported_and_the_default_kept(tmp_path):
    r = crash(tmp_path, FAULTLINE_SAME_CRASH_LIMIT="3")
    assert "faultline: ignoring FAULTLINE_SAME_CRASH_LIMIT=3 (expected COUNT/SECONDS" in r.stderr
    assert len(reports(tmp_path)) == 1


def padded(size):
    """A JSON document of exactly size bytes (fltest.run parses every report)."""
    return b'{"pad": "' + b"x" * (size - 11) + b'"}'


def seed(d, n, size):
    """n old faultline reports of size bytes, oldest first."""
    paths = []
    for i in range(n):
        p = d / f"faultline-2020010{i + 1}T000000-oldhost-{100 + i}-{100 + i}-00000000000000{i:02d}.json"
        p.write_bytes(padded(size))
        paths.append(p)
    return paths


def test_distinct_crashes_leave_at_most_the_cap_never_an_unsent_report(tmp_path):
    spool = tmp_path / ".faultline-spool"
    spool.mkdir()
    old = seed(tmp_path, 5, 300 * 1024)
    # Uploaded, all but the second oldest: the spool still holds that one.
    for p in old[:1] + old[2:]:
        (spool / (p.name[:-5] + ".sent")).write_text("{}")
    env = {"FAULTLINE_DIR_LIMIT_MB": "1", "FAULTLINE_MINIDUMP": "1"}
    for mode in MODES:
        crash(tmp_path, mode, **env)
    assert faultline_bytes(tmp_path) <= 1 << 20, sorted(os.listdir(tmp_path))
    assert old[1].exists()  # not sent: kept
    assert not old[0].exists()  # the oldest sent one went first
    assert len([p for p in reports(tmp_path) if "oldhost" not in p]) == len(MODES)


def test_without_a_spool_the_oldest_go_and_0_turns_the_cap_off(tmp_path):
    capped, off = tmp_path / "capped", tmp_path / "off"
    capped.mkdir()
    off.mkdir()
    nobody = pwd.getpwnam("nobody")
    for d in (capped, off):
        old = seed(d, 5, 300 * 1024)
        theirs = d / "faultline-20190101T000000-other-1-1-0000000000000000.json"
        theirs.write_bytes(padded(300 * 1024))
        os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    for mode in MODES[:4]:
        crash(capped, mode, FAULTLINE_DIR_LIMIT_MB="1")
        crash(off, mode, FAULTLINE_DIR_LIMIT_MB="0")
    mine = [p for p in glob.glob(str(capped / "faultline-*")) if "-other-" not in p]
    assert sum(os.path.getsize(p) for p in mine) <= 1 << 20
    assert len([p for p in mine if "oldhost" in p]) < 5
    assert len([p for p in mine if "oldhost" not in p]) == 4  # the new ones stay
    assert (capped / "faultline-20190101T000000-other-1-1-0000000000000000.json").exists()
    assert len(reports(off)) == 5 + 1 + 4


def signature_of(tmp_path, mode):
    d = tmp_path / "probe"
    d.mkdir()
    crash(d, mode)
    return load(reports(d)[0])["diagnosis"]["signature"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a file as another user")
@pytest.mark.parametrize("planted", ["symlink", "file"])
def test_a_state_file_planted_by_another_user_is_not_followed_or_trusted(tmp_path, planted):
    sig = signature_of(tmp_path, "null-read")
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)  # writable by all, no sticky bit: only O_NOFOLLOW protects
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    nobody = pwd.getpwnam("nobody")
    state = d / f".faultline-limit-{sig}"
    if planted == "symlink":
        os.symlink(victim, state)
    else:
        # "Over the limit for a year": would silence every report if trusted.
        state.write_text(f"1 {int(time.time())} 1000000 0 0\n")
    os.lchown(state, nobody.pw_uid, nobody.pw_gid)
    for _ in range(3):
        crash(d, FAULTLINE_SAME_CRASH_LIMIT="1/3600")
    assert victim.read_text() == "root's file\n"
    assert len(reports(d)) == 3  # no limit applies: written as usual


def test_the_state_file_past_the_file_size_limit_ends_nothing(tmp_path):
    # The first law: under `ulimit -f` smaller than the state file, its write
    # fails (EFBIG) and the process still dies by its own signal, not SIGXFSZ.
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40))
    e = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path))
    p = subprocess.run([CRASHER, "null-read"], env=e, capture_output=True, preexec_fn=limit,
                       timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr.decode(errors="replace")


def test_one_crash_brings_a_directory_of_many_small_reports_under_the_cap_oldest_first(tmp_path):
    # 100 reports of 20 KiB (2000 KiB): more than one listing's batch must go.
    for i in range(100):
        name = f"faultline-20200101T00{i // 60:02d}{i % 60:02d}-oldhost-1-1-{i:016x}.json"
        (tmp_path / name).write_bytes(padded(20 * 1024))
    crash(tmp_path, FAULTLINE_DIR_LIMIT_MB="1")
    assert faultline_bytes(tmp_path) <= 1 << 20
    kept = sorted(int(p.rsplit("-", 1)[1][:-5], 16) for p in reports(tmp_path) if "oldhost" in p)
    assert kept and kept == list(range(100 - len(kept), 100))  # the oldest went
    assert len(kept) >= 45  # no more than needed


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant files as another user")
@pytest.mark.parametrize("how", ["group-writable spool", "markers of another user"])
def test_sent_markers_another_user_could_plant_do_not_count(tmp_path, how):
    # The cap removes only what the spool says was sent; a spool others may
    # write into, or a marker another user made, would let them have this
    # user's unsent reports deleted.
    spool = tmp_path / ".faultline-spool"
    spool.mkdir()
    old = seed(tmp_path, 5, 300 * 1024)
    for p in old:
        marker = spool / (p.name[:-5] + ".sent")
        marker.write_text("{}")
        if how == "markers of another user":
            os.chown(marker, 65534, 65534)
    if how == "group-writable spool":
        os.chmod(spool, 0o770)
    crash(tmp_path, "null-read", FAULTLINE_DIR_LIMIT_MB="1")
    assert all(p.exists() for p in old), sorted(os.listdir(tmp_path))
