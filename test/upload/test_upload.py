"""faultline upload / watch / run --upload against a local stand-in for Sentry
(127.0.0.1 only; see fake_sentry.py): envelope framing, headers, item types,
the event's shape, retries, the spool, and never a duplicate."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import fltest
from fake_sentry import FakeSentry

CLI = fltest.CLI
DATA = os.path.join(fltest.SOURCE, "test", "data")
HEX32 = re.compile(r"^[0-9a-f]{32}$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture
def server():
    s = FakeSentry()
    yield s
    s.close()


@pytest.fixture
def reports():
    """A report directory with two real reports, one with a (stand-in) minidump beside it."""
    d = tempfile.mkdtemp(prefix="faultline-upload-")
    for name in ("real-native-segv.json", "real-threads.json"):
        shutil.copy(os.path.join(DATA, name), os.path.join(d, "faultline-" + name))
    with open(os.path.join(d, "faultline-real-native-segv.dmp"), "wb") as f:
        f.write(b"MDMP\x93\xa7\x00\x00" + bytes(56))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def upload(*args, timeout=60):
    return subprocess.run([CLI, "upload", "--backoff", "0.05", *args], capture_output=True,
                          text=True, timeout=timeout)


def check_event(event, envelope_header):
    """What Sentry's event schema requires of the fields the event uses."""
    assert HEX32.match(event["event_id"]) and event["event_id"] == envelope_header["event_id"]
    assert event["platform"] == "native" and event["level"] in ("fatal", "error", "warning", "info")
    assert isinstance(event["timestamp"], (str, int, float))
    exc = event["exception"]["values"]
    assert exc and all(isinstance(e["type"], str) and e["mechanism"]["type"] for e in exc)
    for e in exc:
        for fr in e.get("stacktrace", {}).get("frames", []):
            assert re.match(r"^0x[0-9a-f]+$", fr.get("instruction_addr", "0x0"))
    for img in event["debug_meta"]["images"]:
        assert img["type"] == "elf" and re.match(r"^0x[0-9a-f]+$", img["image_addr"])
        if img.get("debug_id"):
            assert UUID.match(img["debug_id"])


def test_one_envelope_per_report_with_items(server, reports):
    paths = sorted(os.path.join(reports, n) for n in os.listdir(reports) if n.endswith(".json"))
    p = upload("--dsn", server.dsn, *paths)
    assert p.returncode == 0, p.stderr
    assert server.errors == []
    assert len(server.envelopes) == 2
    by_file = {}
    for env in server.envelopes:
        check_event(env.event, env.header)
        assert "sentry_client=faultline/" in env.headers["X-Sentry-Auth"]
        (h, payload), = env.of_type("attachment", "event.attachment")
        assert h["content_type"] == "application/json"
        by_file[h["filename"]] = env
        # The attached report is the file, byte for byte.
        with open(os.path.join(reports, h["filename"]), "rb") as f:
            assert f.read() == payload
    segv = by_file["faultline-real-native-segv.json"]
    (h, payload), = segv.of_type("attachment", "event.minidump")
    assert h["filename"] == "faultline-real-native-segv.dmp" and payload.startswith(b"MDMP")
    assert by_file["faultline-real-threads.json"].of_type("attachment", "event.minidump") == []
    # Sent markers are in the spool; a second upload sends nothing.
    spool = os.path.join(reports, ".faultline-spool")
    assert sorted(os.listdir(spool)) == ["faultline-real-native-segv.sent", "faultline-real-threads.sent"]
    p = upload("--dsn", server.dsn, *paths)
    assert p.returncode == 0 and "sent already" in p.stderr
    assert len(server.envelopes) == 2 and server.requests == 2


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_server_down_spools_then_sends_once(reports):
    port = free_port()
    dsn = "http://publickey@127.0.0.1:%d/42" % port
    path = os.path.join(reports, "faultline-real-native-segv.json")
    p = upload("--retries", "2", "--dsn", dsn, path)
    assert p.returncode == 1
    assert "retrying" in p.stderr and "kept in" in p.stderr
    spool = os.path.join(reports, ".faultline-spool")
    assert os.listdir(spool) == ["faultline-real-native-segv.envelope"]
    server = FakeSentry(port=port)
    try:
        # Another report's upload sends what was spooled first, then its own.
        other = os.path.join(reports, "faultline-real-threads.json")
        p = upload("--dsn", dsn, other)
        assert p.returncode == 0, p.stderr
        assert len(server.envelopes) == 2 and server.errors == []
        names = [env.of_type("attachment", "event.attachment")[0][0]["filename"] for env in server.envelopes]
        assert names == ["faultline-real-native-segv.json", "faultline-real-threads.json"]
        assert upload("--dsn", dsn, path, other).returncode == 0
        assert len(server.envelopes) == 2 and server.requests == 2
    finally:
        server.close()


def test_retries_on_server_errors_then_sends(server, reports):
    server.fail_with = [503, 429]
    path = os.path.join(reports, "faultline-real-native-segv.json")
    p = upload("--dsn", server.dsn, path)
    assert p.returncode == 0, p.stderr
    assert server.requests == 3 and len(server.envelopes) == 1
    assert p.stderr.count("retrying") == 2


def test_refused_report_is_not_retried(server, reports):
    server.fail_with = [400]
    path = os.path.join(reports, "faultline-real-native-segv.json")
    p = upload("--dsn", server.dsn, path)
    assert p.returncode == 1 and "refused" in p.stderr
    assert upload("--dsn", server.dsn, path).returncode == 1
    assert server.requests == 1 and server.envelopes == []
    assert os.path.exists(os.path.join(reports, ".faultline-spool", "faultline-real-native-segv.rejected"))


@pytest.mark.parametrize("dsn", ["nonsense", "ftp://k@h/1", "http://127.0.0.1:9/1", "http://k@127.0.0.1:9/",
                                 "http://k@127.0.0.1:9/a b"])
def test_bad_dsn_is_a_usage_error(reports, dsn):
    p = upload("--dsn", dsn, os.path.join(reports, "faultline-real-native-segv.json"))
    assert p.returncode == 2 and "bad DSN" in p.stderr
    assert not os.path.exists(os.path.join(reports, ".faultline-spool"))


def test_bad_report_is_an_error_not_a_crash(server, reports):
    bad = os.path.join(reports, "faultline-broken.json")
    with open(bad, "w") as f:
        f.write('{"schema": "faultline/1", "kind": ')
    p = upload("--dsn", server.dsn, bad, os.path.join(reports, "faultline-real-threads.json"))
    assert p.returncode == 1 and "faultline-broken.json" in p.stderr
    assert len(server.envelopes) == 1  # the good one still went


def test_watch_sends_reports_as_they_appear(server, reports):
    p = subprocess.Popen([CLI, "watch", reports, "--dsn", server.dsn, "--backoff", "0.05",
                          "--retry-interval", "0.5"], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(server.envelopes) == 2)  # the two already there
        # A crash report appears the way the library writes it: temporary name, then rename.
        tmp = os.path.join(reports, ".faultline-new.json.tmp")
        shutil.copy(os.path.join(DATA, "real-python-segv.json"), tmp)
        os.rename(tmp, os.path.join(reports, "faultline-new.json"))
        wait_for(lambda: len(server.envelopes) == 3)
        # Server down for a while: the next one is spooled and sent when it is back.
        server.fail_with = [503] * 8
        shutil.copy(os.path.join(DATA, "real-terminate.json"), os.path.join(reports, "faultline-late.json"))
        wait_for(lambda: len(server.envelopes) == 4, timeout=60)
        time.sleep(1.5)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert server.errors == []
    names = [env.of_type("attachment", "event.attachment")[0][0]["filename"] for env in server.envelopes]
    assert sorted(names) == sorted(set(names)), names  # no duplicate


def wait_for(cond, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_run_upload_sends_the_crash_report(server):
    d = tempfile.mkdtemp(prefix="faultline-upload-run-")
    try:
        p = subprocess.run([CLI, "run", "--dir", d, "--upload", server.dsn, "--",
                            fltest.program("crasher"), "null-read"], capture_output=True, text=True, timeout=120)
        assert p.returncode == -signal.SIGSEGV or p.returncode == 128 + signal.SIGSEGV, p.stderr
        assert len(server.envelopes) == 1, p.stderr
        env = server.envelopes[0]
        check_event(env.event, env.header)
        assert env.event["exception"]["values"][0]["mechanism"]["meta"]["signal"]["number"] == signal.SIGSEGV
        (h, payload), = env.of_type("attachment", "event.attachment")
        report = json.loads(payload)
        assert report["kind"] == "crash" and h["filename"].startswith("faultline-")
        # run --upload turns the minidump on: the crash's own minidump is sent.
        assert report["minidump"], report["faultline"]["errors"]
        (mh, dump), = env.of_type("attachment", "event.minidump")
        assert mh["filename"] == report["minidump"] and dump.startswith(b"MDMP")
        assert len(dump) == report["faultline"]["minidump_bytes"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_job_fields_become_tags(server, tmp_path):
    """A torchrun rank's report: its job object as Sentry tags (group and
    filter a fleet's events by job and rank); none without a job."""
    with open(os.path.join(DATA, "real-native-segv.json")) as f:
        report = json.load(f)
    plain = tmp_path / "faultline-plain.json"
    plain.write_text(json.dumps(report))
    report["job"] = {"launcher": "torchrun", "run_id": "run-7", "rank": 2, "local_rank": 2,
                     "world_size": 4, "group_rank": 0, "restart_count": 1, "host": "node3",
                     "master_addr": "10.0.0.1", "master_port": 29500}
    ranked = tmp_path / "faultline-ranked.json"
    ranked.write_text(json.dumps(report))
    p = upload("--dsn", server.dsn, str(plain), str(ranked))
    assert p.returncode == 0, p.stderr
    tags = {}
    for env in server.envelopes:
        (h, _), = env.of_type("attachment", "event.attachment")
        tags[h["filename"]] = env.event["tags"]
    assert not any(k.startswith("job.") for k in tags["faultline-plain.json"])
    assert {k: v for k, v in tags["faultline-ranked.json"].items() if k.startswith("job.")} == {
        "job.run_id": "run-7", "job.rank": "2", "job.local_rank": "2", "job.world_size": "4",
        "job.group_rank": "0", "job.restart_count": "1", "job.host": "node3"}


# --- the spool against another user -----------------------------------------------------

NOBODY = 65534
STEM = "faultline-real-native-segv"


def as_nobody(*argv):
    """Runs argv as the user nobody (a real process of another user)."""
    subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
                   check=True, timeout=30)


def plant(reports, spool_mode):
    """The documented set-up (a report directory writable by all, uploads
    as root) with nobody's links in the spool: to a root-only file and to a
    file of nobody's. Returns (root file, nobody's file)."""
    os.chmod(reports, 0o1777)
    secret = os.path.join(reports, "root-only")
    with open(secret, "w") as f:
        f.write("root only\n")
    os.chmod(secret, 0o600)
    theirs = os.path.join(reports, "theirs")
    as_nobody("sh", "-c", f"echo theirs > {theirs}")
    spool = os.path.join(reports, ".faultline-spool")
    if spool_mode is None:  # nobody makes the spool first
        as_nobody("mkdir", "-m", "755", spool)
    else:  # root's, as given, its group nobody's
        os.mkdir(spool)
        os.chown(spool, 0, NOBODY)
        os.chmod(spool, spool_mode)
    as_nobody("ln", "-s", secret, f"{spool}/{STEM}.envelope.tmp")
    as_nobody("ln", "-s", theirs, f"{spool}/{STEM}.sent.tmp")
    return secret, theirs


def unchanged(secret, theirs):
    st = os.stat(secret)
    return (open(secret).read() == "root only\n" and st.st_uid == 0 and st.st_mode & 0o777 == 0o600
            and open(theirs).read() == "theirs\n" and os.stat(theirs).st_uid == NOBODY)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root and setpriv to act as another user")


@needs_root
@pytest.mark.parametrize("spool_mode", [None, 0o777, 0o770])
def test_a_spool_another_user_can_write_into_is_refused(server, reports, spool_mode):
    # Before, root wrote the envelope through nobody's link over a root-only
    # file and gave nobody's file root's report.
    secret, theirs = plant(reports, spool_mode)
    p = upload("--dsn", server.dsn, os.path.join(reports, STEM + ".json"))
    assert p.returncode == 1, p.stderr
    assert "refused" in p.stderr and ".faultline-spool" in p.stderr, p.stderr
    assert unchanged(secret, theirs)
    assert server.envelopes == []


@needs_root
def test_a_sticky_spool_is_used_without_following_planted_links(server, reports):
    # Writable by all with the sticky bit (as /tmp): nobody's links and a
    # fake "sent" marker of theirs are neither followed nor believed.
    secret, theirs = plant(reports, 0o1777)
    spool = os.path.join(reports, ".faultline-spool")
    as_nobody("sh", "-c", f"echo '{{}}' > {spool}/{STEM}.sent")
    p = upload("--dsn", server.dsn, os.path.join(reports, STEM + ".json"))
    assert p.returncode == 0, p.stderr
    assert len(server.envelopes) == 1 and server.errors == []
    assert unchanged(secret, theirs)
    assert os.path.islink(f"{spool}/{STEM}.envelope.tmp")


# --- redirects and refusals ---------------------------------------------------------------

def test_a_redirect_is_followed_not_taken_for_a_refusal(server, reports):
    # A proxy or a moved server answers 307 (or 301, 308) with the new place:
    # before, the report was marked refused for good.
    moved = FakeSentry()
    try:
        server.fail_with = [(307, {"Location": moved.envelope_url}),
                            (301, {"Location": moved.envelope_url})]
        for name in (STEM, "faultline-real-threads"):
            p = upload("--dsn", server.dsn, os.path.join(reports, name + ".json"))
            assert p.returncode == 0, p.stderr
        assert len(moved.envelopes) == 2 and moved.errors == []
        assert [e.path for e in moved.envelopes] == ["/api/42/envelope/"] * 2
    finally:
        moved.close()


def test_a_redirect_loop_or_nowhere_to_go_is_retried_later(server, reports):
    path = os.path.join(reports, STEM + ".json")
    server.fail_with = [(302, {"Location": server.envelope_url})] * 10 + [303]
    p = upload("--retries", "0", "--dsn", server.dsn, path)
    assert p.returncode == 1 and "kept in" in p.stderr, p.stderr
    p = upload("--retries", "0", "--dsn", server.dsn, path)
    assert p.returncode == 1 and "kept in" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(reports, ".faultline-spool", STEM + ".rejected"))
    p = upload("--dsn", server.dsn, path)
    assert p.returncode == 0 and len(server.envelopes) == 1, p.stderr


def test_a_refusal_is_remembered_for_its_dsn_only(server, reports):
    path = os.path.join(reports, STEM + ".json")
    server.fail_with = [403]
    assert upload("--dsn", server.dsn, path).returncode == 1
    p = upload("--dsn", server.dsn, path)
    assert p.returncode == 1 and "refused by the server before" in p.stderr
    assert server.requests == 1
    other = FakeSentry(project="7")
    try:
        p = upload("--dsn", other.dsn, path)
        assert p.returncode == 0, p.stderr
        assert len(other.envelopes) == 1 and other.errors == []
    finally:
        other.close()
