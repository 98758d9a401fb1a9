"""The linked C++ API: crash keys, uncaught exceptions, install/uninstall,
dump_now while serving, and the user callback. The driver links
libfaultline.so (no preload)."""
import json
import os
import signal
import time

import fltest

DRIVER = fltest.program("api_driver")


def run(mode, **kw):
    d = fltest.run(["true"], preload=False).report_dir
    return fltest.run([DRIVER, mode], preload=False, env={"FAULTLINE_DIR": d}, report_dir=d, **kw)


def test_annotations_process_wide_and_per_thread_from_16_threads():
    r = run("annotate16", timeout=120)
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert rep["annotations"]["model"] == "resnet50"
    assert rep["annotations"]["build"] == rep["faultline"]["version"]
    t = fltest.crashed_thread(rep)
    assert t["annotations"] == {"request_id": "req-11-500"}
    assert fltest.native_symbols(t)[0] == "_ZN12_GLOBAL__N_116crash_in_requestEi"
    assert len(rep["threads"]) == 17


def test_thread_key_follows_the_forking_thread_into_the_child(tmp_path):
    # The child's thread has another id, whose home in the key table is
    # elsewhere: the crash must still find the set the parent's thread used.
    r = fltest.run([DRIVER, "fork-key"], preload=False, report_dir=str(tmp_path),
                   env={"FAULTLINE_DIR": str(tmp_path)}, timeout=60)
    assert r.returncode == 0, r.stderr
    deadline = time.time() + 30
    while time.time() < deadline and not list(tmp_path.glob("faultline-*.json")):
        time.sleep(0.1)
    (path,) = tmp_path.glob("faultline-*.json")
    rep = fltest.validate(json.loads(path.read_text()))
    t = fltest.crashed_thread(rep)
    assert t["annotations"] == {"request_id": "req-before-fork", "phase": "child"}, t


def check_terminate(mode, type_name, message):
    r = run(mode)
    assert r.returncode == -signal.SIGABRT
    rep = fltest.validate(r.report)
    assert rep["kind"] == "terminate"
    assert rep["exception"]["type"] == type_name
    assert rep["exception"].get("message") == message
    assert rep["exception"]["stack"] == "throw site"
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    assert "__cxa_throw" in syms
    thrower = syms[syms.index("__cxa_throw") + 1]
    assert "throw_it" in thrower
    assert rep["diagnosis"]["category"] == "uncaught-exception"
    assert "throw_it" in rep["diagnosis"]["summary"]
    # libstdc++'s own message still appears.
    assert "terminate called after throwing" in r.stderr
    return rep


def test_terminate_with_runtime_error():
    rep = check_terminate("terminate-runtime", "St13runtime_error", "bad tensor shape [3, 224]")
    assert "bad tensor shape" in rep["diagnosis"]["summary"]


def test_terminate_with_custom_type():
    check_terminate("terminate-custom", "N12_GLOBAL__N_111CustomErrorE", None)


def test_terminate_with_non_std_exception():
    check_terminate("terminate-int", "i", None)


def test_install_uninstall_install():
    r = run("reinstall")
    assert r.returncode == -signal.SIGSEGV
    assert len(r.reports) == 1
    r = run("uninstalled")
    assert r.returncode == -signal.SIGSEGV
    assert r.reports == []


def test_a_second_install_keeps_the_live_arena_and_directory_descriptor():
    # Before, a bigger arena_bytes unmapped the arena and mapped a new one,
    # and the report directory was closed and opened again, under a crash or
    # dump another thread might be writing.
    r = run("install-twice")
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.startswith("arenas kept: ") and r.stdout.split()[2] != "0", r.stdout
    kinds = sorted(rep["kind"] for rep in r.reports)
    assert kinds == ["crash", "dump"], kinds


def test_dump_now_while_serving():
    r = run("dump-serving", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("dumps=5 ")
    served_after = int(r.stdout.split()[1].split("=")[1])
    assert served_after > 0  # still serving after the dumps
    assert len(r.reports) == 5
    for rep in r.reports:
        fltest.validate(rep)
        assert rep["kind"] == "dump" and rep["crashed_tid"] is None
        assert len(rep["threads"]) == 9
        assert all(t["captured"] for t in rep["threads"])
    last = r.stdout.split("last=")[1].strip()
    assert os.path.exists(last)


def test_user_callback_adds_to_the_report():
    r = run("callback")
    rep = fltest.validate(r.report)
    assert rep["callback"] == {"queue_depth": "17", "phase": "serving"}


def test_watchdog_first_stage_reaches_the_owner_on_a_worker_thread():
    import time
    t0 = time.monotonic()
    d = fltest.run(["true"], preload=False).report_dir
    r = fltest.run([DRIVER, "slow-callback-worker"], preload=False,
                   env={"FAULTLINE_DIR": d, "FAULTLINE_WATCHDOG": "2"}, report_dir=d, timeout=60)
    elapsed = time.monotonic() - t0
    assert r.returncode == -signal.SIGSEGV
    assert elapsed < 5.5, elapsed  # the callback alone would take 6 s
    rep = fltest.validate(r.report)
    assert 'capture phase "callback" took too long' in r.stderr
    assert "another thread" not in r.stderr  # the owner wrote it, not a stand-in
    errors = rep["faultline"]["errors"]
    assert any(e.startswith("callback:") for e in errors) and any("watchdog" in e for e in errors)
    t = fltest.crashed_thread(rep)
    assert t["tid"] != rep["process"]["pid"]
    assert rep["diagnosis"]["summary"].startswith("SIGSEGV")
