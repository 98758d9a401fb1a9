"""The signal-safety proof on the aarch64 objects: the cross build's crash
path calls only allowed functions (tools/check-signal-safety with
aarch64-linux-gnu-nm)."""
import os
import shutil
import subprocess

import arm64


def test_aarch64_crash_objects_are_signal_safe():
    arm64.library()
    nm = arm64.TRIPLE + "-nm"
    assert shutil.which(nm), nm + " missing (binutils-aarch64-linux-gnu)"
    tools = os.path.join(arm64.SOURCE, "tools")
    objects = os.path.join(arm64.BUILD, "crash-objects.txt")
    first = open(objects).readline().strip()
    arch = subprocess.run(["file", "-L", first], capture_output=True, text=True).stdout
    assert "aarch64" in arch, arch
    r = subprocess.run([os.path.join(tools, "check-signal-safety"),
                        os.path.join(tools, "signal-safe-allowlist.txt"), "@" + objects],
                       env={**os.environ, "NM": nm}, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
