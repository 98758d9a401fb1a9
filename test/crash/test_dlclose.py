"""A program that loads faultline with dlopen, installs it and closes it
again with dlclose() keeps faultline's signal handlers and its timed-dump
thread, which point into the library: the library is linked -z nodelete, so
it stays mapped, and a later crash is reported and ends by its signal as
without faultline (unmapped, the handler itself faulted: no report)."""
import os
import signal
import subprocess

import fltest

DLCLOSED = fltest.program("dlclosed")


def test_a_crash_after_dlclose_is_reported(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e["FAULTLINE_DIR"] = str(tmp_path)
    r = subprocess.run([DLCLOSED, fltest.LIB], env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert r.stdout == "closed\n"
    (report,) = fltest.reports_in(str(tmp_path))
    assert report["signal"]["name"] == "SIGSEGV", report["signal"]
