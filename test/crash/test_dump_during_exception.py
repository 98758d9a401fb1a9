"""A live dump asked for (the dump signal, FAULTLINE_DUMP=1) while the same
thread writes an exception report is written after it, not dropped: the
thread holds the dump signal until its report is done. A real process: its
stderr pipe is full, so faultline's line about the exception report waits
(in poll) while the report is still claimed; a helper thread sees that wait
in /proc, sends the dump signal to the reporting thread, then drains the
pipe."""
import json
import os
import subprocess
import sys

import fltest

PROGRAM = r"""
import ctypes, fcntl, os, signal, sys, threading
lib = ctypes.CDLL(os.environ["LIB"])  # the preloaded library's handle
drain = int(sys.argv[1])  # the read end of this process's stderr pipe
main, tid = threading.get_ident(), threading.get_native_id()
flags = fcntl.fcntl(2, fcntl.F_GETFL)
fcntl.fcntl(2, fcntl.F_SETFL, flags | os.O_NONBLOCK)
try:
    while True:
        os.write(2, b"x" * 4096)
except BlockingIOError:
    pass
fcntl.fcntl(2, fcntl.F_SETFL, flags)
def helper():
    while True:
        with open(f"/proc/self/task/{tid}/syscall") as f:
            if f.read().split()[0] in ("7", "73"):  # poll, ppoll: the report waits for stderr
                break
    signal.pthread_kill(main, signal.SIGUSR2)  # a real dump signal, for this thread
    while os.read(drain, 65536):
        pass
threading.Thread(target=helper, daemon=True, name="helper").start()
rc = lib.faultline_exception_report(b"RuntimeError", b"boom", b"", b"RuntimeError: boom\n")
print("rc", rc, flush=True)
"""


def test_a_dump_signal_during_an_exception_report_is_written_after_it(tmp_path):
    r, w = os.pipe()
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update(LD_PRELOAD=fltest.LIB, LIB=fltest.LIB, FAULTLINE_DIR=str(tmp_path),
             FAULTLINE_DUMP="1")
    p = subprocess.Popen([sys.executable, "-c", PROGRAM, str(r)], env=e, stdout=subprocess.PIPE,
                         stderr=w, pass_fds=(r,), text=True)
    os.close(r)
    os.close(w)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0 and out == "rc 0\n", out
    reports = [json.load(open(tmp_path / n)) for n in sorted(os.listdir(tmp_path))
               if n.startswith("faultline-") and n.endswith(".json")]
    assert sorted(rep["kind"] for rep in reports) == ["dump", "exception"]
    for rep in reports:
        fltest.validate(rep)
