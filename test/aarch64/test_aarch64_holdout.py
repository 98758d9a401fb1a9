"""The aarch64 hold-out measure (holdout.py) as a test: programs nobody wrote
for faultline, cross-built with and without pointer authentication and
interrupted at varied moments under the preload, give reports whose
crashing-thread frames agree with gdb's reading of the same run's core on
at least 95% of the frames gdb names, each variant counted on its own.

The sources come from Debian (tools/holdout-sources, cached in
/var/cache/faultline/holdout); the test skips, saying why, where they are
neither cached nor fetchable."""
import resource
import re
import shutil
import subprocess

import pytest

import arm64
import holdout

SHARE = 0.95
# Fewer named frames than this and the share would say little.
ENOUGH = 200


@pytest.fixture(scope="module")
def measured():
    arm64.require_tools()
    if not shutil.which("gdb-multiarch"):
        pytest.skip("gdb-multiarch not installed (apt-get install gdb-multiarch)")
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        pytest.skip("the hard RLIMIT_CORE is 0: qemu cannot write the cores gdb reads")
    lib = arm64.library()
    try:
        return holdout.run_all(lib)
    except holdout.Unavailable as e:
        pytest.skip(f"hold-out sources unavailable: {e}")


def test_pac_builds_sign_return_addresses(measured):
    """The pac programs really sign return addresses (else their share
    would measure nothing new)."""
    _, cases = measured
    for exe in sorted({c.exe for c in cases if c.variant == "pac"}):
        out = subprocess.run([arm64.TRIPLE + "-objdump", "-d", exe], capture_output=True,
                             text=True, check=True).stdout
        assert re.search(r"\bpaciasp\b", out) and re.search(r"\bautiasp\b", out), exe


@pytest.mark.parametrize("variant", sorted(holdout.VARIANTS))
def test_named_frames_agree_with_gdb(variant, measured):
    results, cases = measured
    r = results[variant]
    part, agree, counted = holdout.share(r)
    summary = f"{r.summary()}\nframes agreeing: {agree} of {counted} ({100 * part:.1f}%)"
    print(summary)
    assert not r.errors, summary
    assert counted >= ENOUGH, summary
    # The oracle must see the whole stack, or the share would count only
    # what gdb reaches (without the PAC mask note, 0 or 1 frames).
    full, compared = holdout.reach(cases, variant)
    assert full >= compared * 3 // 4, f"gdb as deep as the report in {full} of {compared}"
    # A frame gdb names that the report skips, or one the report adds, is a
    # miss like a misnamed one.
    assert part >= SHARE, summary
