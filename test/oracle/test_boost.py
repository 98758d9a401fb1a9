"""Boost.Stacktrace as a third, independent oracle, in process: a C++ program
takes boost::stacktrace::stacktrace() and faultline::dump_now() at the same
point (test/oracle/programs/boost_compare.cpp). The calling thread's frames in
the dump report, from that point outwards, must be Boost's frames: the same
return addresses, and names that agree (Boost names them from DWARF with
libbacktrace, the raw report from the ELF symbol tables)."""
import json
import os
import subprocess

import fltest
import oracle

PROGRAM = fltest.program("oracle_boost_compare")


def run_program(report_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_") and k != "LD_PRELOAD"}
    env.update(FAULTLINE_DIR=report_dir, FAULTLINE_STDERR="0")
    p = subprocess.run([PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "dump 0", p.stdout
    tid = int(lines[1].split()[1])
    frames = []
    for line in lines[2:]:
        addr, _, name = line.partition(" ")
        frames.append((int(addr, 16), name))
    reports = [f for f in os.listdir(report_dir) if f.startswith("faultline-")]
    assert len(reports) == 1, reports
    with open(os.path.join(report_dir, reports[0])) as f:
        report = json.load(f)
    return tid, frames, report


def test_dump_now_frames_match_boost_stacktrace(tmp_path):
    assert os.path.exists(PROGRAM), "build the oracle_boost_compare target first"
    tid, boost, report = run_program(str(tmp_path))
    assert report["kind"] == "dump"
    thread = [t for t in report["threads"] if t["tid"] == tid]
    assert len(thread) == 1, f"no thread {tid} in the report"
    ours = [f for f in thread[0]["frames"] if f["kind"] == "native"]
    names = oracle.demangle([f.get("symbol") for f in ours])
    named = [names.get(f.get("symbol"), f.get("symbol")) or "" for f in ours]
    # Boost's first frame is the function that took both stacks; faultline's
    # frames before it are its own (dump_now and the capture).
    assert boost and "probe::Layer<int>::capture" in boost[0][1], boost
    start = next((i for i, n in enumerate(named) if oracle.names_agree(boost[0][1], n)), None)
    assert start is not None, f"no frame of the report is {boost[0][1]!r}:\n{named}"
    misses = []
    # Boost stops where libbacktrace's unwinding ends (_start); compare up to there.
    for i, (addr, bname) in enumerate(boost):
        k = start + i
        if k >= len(ours):
            misses.append(f"boost #{i} {addr:#x} {bname}: the report has no frame here")
            continue
        if i > 0 and int(ours[k]["pc"], 16) != addr:
            misses.append(f"boost #{i} {addr:#x} {bname}: report pc {ours[k]['pc']} ({named[k]})")
            continue
        if bname and not oracle.names_agree(bname, named[k]):
            misses.append(f"boost #{i} {bname!r}: report {named[k]!r}")
    print(f"{len(boost) - len(misses)}/{len(boost)} Boost frames agree")
    for m in misses:
        print("  " + m)
    assert len(boost) >= 6, boost  # capture, hidden, through_function, main, libc start, _start
    assert not misses, "\n".join(misses)
