"""tools/torch-root itself: mounts never reach the host's mount table (each
run is a private mount namespace), whatever way the command ends; a missing
or unmakeable root is a clear error, never a silent skip."""
import os
import signal
import subprocess
import time

import rootrun

ROOT = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")


def host_mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if line.split()[4].startswith(os.path.realpath(path))]


def test_commands_see_their_mounts_and_the_host_does_not(tmp_path):
    assert not host_mounts_under(ROOT)
    r = rootrun.run(["sh", "-c", "grep -c ' /tmp ' /proc/self/mountinfo; cat /etc/hosts; touch written"],
                    tmp_path, preload=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] != "0"  # the tmpfs /tmp, inside only
    assert os.uname().nodename in r.stdout  # torchrun resolves the host name
    assert (tmp_path / "written").exists()  # the bound directory is the host's
    assert not host_mounts_under(ROOT)


def test_crash_and_kill_leave_no_mounts(tmp_path):
    r = rootrun.run(["sh", "-c", "kill -SEGV $$"], tmp_path, preload=False)
    assert r.returncode == -signal.SIGSEGV  # the command's own status comes back
    # A command killed from outside (as ctest does on a timeout).
    p = subprocess.Popen([rootrun.TOOL, "run", "--", "sleep", "600"], start_new_session=True)
    time.sleep(3)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not host_mounts_under(ROOT)


def test_missing_root_is_an_error(tmp_path):
    env = dict(os.environ, FAULTLINE_TORCH_ROOT=str(tmp_path / "none"))
    r = subprocess.run([rootrun.TOOL, "run", "--", "true"], env=env, capture_output=True, text=True)
    assert r.returncode == 1
    assert "is not made" in r.stderr and "tools/torch-root make" in r.stderr, r.stderr


def test_root_that_cannot_be_made_is_an_error(tmp_path):
    env = dict(os.environ, FAULTLINE_TORCH_ROOT=str(tmp_path / "root"),
               FAULTLINE_TORCH_ROOT_MIRROR="file://" + str(tmp_path / "no-mirror"))
    r = subprocess.run([rootrun.TOOL, "make"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert "debootstrap failed" in r.stderr and "cannot run without the root" in r.stderr, r.stderr
    assert not (tmp_path / "root").exists()
