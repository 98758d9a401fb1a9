"""The aarch64 crash path under qemu-user: cross-built programs at -O2
without frame pointers, with and without pointer authentication
(-mbranch-protection=standard), run with the cross-built preload. Each
report's crashing-thread frames are checked against gdb-multiarch's
backtrace of the core qemu writes for the same run (and against the known
call chain, which is also the oracle where gdb names nothing); the exit
status is the one the program has without faultline; every thread of a
multi-threaded program is captured, qemu's own helper thread (it blocks
every signal) listed as not captured without a wait.

What emulation cannot show is in doc/aarch64.md."""
import glob
import json
import os
import re
import shutil
import subprocess

import jsonschema
import pytest

import arm64

CHAIN = ["chain_leaf", "chain_middle", "chain_outer"]
SCHEMA = json.load(open(os.path.join(arm64.SOURCE, "schema", "faultline-1.schema.json")))


def the_report(directory):
    files = glob.glob(os.path.join(directory, "faultline-*.json"))
    assert len(files) == 1, files
    with open(files[0]) as f:
        report = json.load(f)
    jsonschema.validate(report, SCHEMA)
    return report


def crashed_thread(report):
    return next(t for t in report["threads"] if t["tid"] == report["crashed_tid"])


def ours(names):
    """The test program's own functions, in order."""
    return [n for n in names
            if n and (n.startswith("chain_") or n in ("main", "crasher", "on_usr1", "send_usr1"))]


def gdb_backtrace(program, core):
    """Function names of gdb-multiarch's backtrace of core; [] where gdb
    names none (then the known chain is the oracle)."""
    if not shutil.which("gdb-multiarch"):
        return []
    r = subprocess.run(["gdb-multiarch", "-batch", "-nx", "-ex", "set sysroot " + arm64.SYSROOT,
                        "-ex", "bt", program, core], capture_output=True, text=True, timeout=300)
    # gdb prints frame #0 once when it loads the core: the backtrace is
    # what follows the last "#0".
    out = r.stdout[r.stdout.rfind("\n#0 ") + 1:] if "\n#0 " in r.stdout else ""
    return re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\w+) \(", out, re.M)


def run_both(program, args, tmp_path, lib):
    """The program without faultline, then with it; returns (without, with,
    the report, the core of the run with faultline or None)."""
    plain = tmp_path / "plain"
    with_fl = tmp_path / "with"
    plain.mkdir()
    with_fl.mkdir()
    bare = arm64.run([program, *args], cwd=plain)
    withfl = arm64.run([program, *args], cwd=with_fl, preload=lib, core=True,
                       env={"FAULTLINE_DIR": str(with_fl)})
    cores = glob.glob(str(with_fl / "qemu_*.core"))
    return bare, withfl, the_report(str(with_fl)), cores[0] if cores else None


def test_pac_variant_signs_return_addresses(programs):
    """The pac program really has paciasp/autiasp (else the PAC cases
    would test nothing)."""
    out = subprocess.run([arm64.TRIPLE + "-objdump", "-d", programs["pac"]], capture_output=True,
                         text=True, check=True).stdout
    assert re.search(r"\bpaciasp\b", out) and re.search(r"\bautiasp\b", out)


@pytest.mark.parametrize("variant", sorted(arm64.VARIANTS))
@pytest.mark.parametrize("mode", ["segv", "abort"])
def test_crash_frames_match_gdb(variant, mode, programs, lib, tmp_path):
    program = programs[variant]
    bare, withfl, report, core = run_both(program, [mode], tmp_path, lib)
    # The first law: the same death with faultline as without.
    assert bare.returncode < 0
    assert withfl.returncode == bare.returncode, withfl.stderr
    assert report["process"]["arch"] == "aarch64"
    assert report["signal"]["number"] == -bare.returncode
    t = crashed_thread(report)
    names = [f.get("symbol") for f in t["frames"]]
    assert ours(names) == CHAIN + ["main"], names
    for f in t["frames"]:
        assert int(f["pc"], 16) < 1 << 48, f  # no pointer-authentication bits left
    regs = t["registers"]
    for r in [f"x{i}" for i in range(31)] + ["sp", "pc", "pstate"]:
        assert r in regs, r
    if mode == "segv":
        assert names[0] == "chain_leaf"
        assert regs["pc"] == t["frames"][0]["pc"]
        assert report["signal"]["fault_address"] == "0x0"
        assert regs["far"] == "0x0"
    else:
        assert "abort" in names[: names.index("chain_leaf")], names
    # gdb stops early where it cannot follow: through the signal frame of
    # abort(), and at the first PAC-signed return address (qemu's core has
    # no PAC mask note). Where it stops, the known chain above is the
    # oracle for the rest; where it reaches main, all must agree.
    gdb = ours(gdb_backtrace(program, core)) if core else []
    if variant == "nofp" and mode == "segv":
        assert gdb == CHAIN + ["main"], gdb  # gdb must work here, or the oracle is lost
    if gdb and gdb[-1] == "main":
        assert ours(names) == gdb, (names, gdb)
    else:
        assert ours(names)[: len(gdb)] == gdb, (names, gdb)


@pytest.mark.parametrize("variant", sorted(arm64.VARIANTS))
def test_through_the_signal_trampoline(variant, programs, lib, tmp_path):
    """A crash in a signal handler: the unwind crosses qemu's trampoline
    (an anonymous page, no tables, no symbol) by its instructions and goes
    on from the interrupted context in raise() to its callers."""
    bare, withfl, report, _ = run_both(programs[variant], ["handler"], tmp_path, lib)
    assert withfl.returncode == bare.returncode < 0, withfl.stderr
    frames = crashed_thread(report)["frames"]
    names = [f.get("symbol") for f in frames]
    assert ours(names) == CHAIN + ["on_usr1", "send_usr1", "main"], names


def test_threads_all_captured(programs, lib, tmp_path):
    program = programs["pac"]
    bare, withfl, report, _ = run_both(program, ["thread"], tmp_path, lib)
    assert withfl.returncode == bare.returncode < 0, withfl.stderr
    t = crashed_thread(report)
    assert ours([f.get("symbol") for f in t["frames"]]) == CHAIN + ["crasher"]
    captured = [x for x in report["threads"] if x["captured"]]
    missed = [x for x in report["threads"] if not x["captured"]]
    # main, two waiters and the crasher; qemu's helper thread blocks every
    # signal: listed, not asked, so not waited for.
    assert len(captured) == 4, report["threads"]
    assert sum("waiter" in [f.get("symbol") for f in x["frames"]] for x in captured) == 2
    assert any("main" in [f.get("symbol") for f in x["frames"]] for x in captured)
    assert len(missed) <= 1
    for x in missed:
        assert "blocks the thread-dump signal" in x.get("note", ""), x
    assert not any("time" in e for e in report["faultline"]["errors"]), report["faultline"]["errors"]


def test_cli_reads_the_report(programs, lib, tmp_path):
    """The x86-64 faultline command validates and shows an aarch64 report."""
    cli = os.environ.get("FAULTLINE_CLI", "")
    if not os.path.exists(cli):
        pytest.skip("the faultline command is not built in this tree")
    run_both(programs["nofp"], ["segv"], tmp_path, lib)
    path = glob.glob(str(tmp_path / "with" / "faultline-*.json"))[0]
    v = subprocess.run([cli, "validate", path], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr
    s = subprocess.run([cli, "show", path], capture_output=True, text=True)
    assert s.returncode == 0, s.stderr
    assert "chain_leaf" in s.stdout and "chain_outer" in s.stdout
