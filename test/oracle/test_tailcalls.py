"""Tail-call frames against gdb: the programs of programs/tailcalls.c and
programs/tailcalls.cpp (GCC and Clang 14 at -O2 -g) crash under the preload
with core dumps on, gdb reads each core, and `faultline symbolize` of the
same run's report must have every frame gdb marks as a tail call, marked
"tail_call": true on the frame it follows, and none where gdb shows none.
The scenarios: `dispatch` (a call through a constant function table to a
function that tail-calls another), `indirect` (the same through a volatile
table: the call-site record names no target, gdb shows nothing), `chain`
(a -> b -> c, all tail calls), `ambiguous` (two ways of tail calls lead to
the crash: nothing is guessed), `direct`, glibc's `qsort` tail-calling
`__qsort_r`, and an `assert` failure (`__pthread_kill_internal`, libc6-dbg)."""
import json
import os
import subprocess

import pytest

import fltest
import oracle

usable, why = oracle.core_pattern_usable()
pytestmark = pytest.mark.skipif(not usable, reason=why)

PROGRAMS = oracle.PROGRAMS
VARIANTS = {
    "tail-c-gcc": ("gcc", "tailcalls.c"),
    "tail-c-clang": ("clang-14", "tailcalls.c"),
    "tail-cpp-gcc": ("g++", "tailcalls.cpp"),
    "tail-cpp-clang": ("clang++-14", "tailcalls.cpp"),
}
C_SCENARIOS = ["dispatch", "indirect", "chain", "ambiguous", "direct", "qsort", "assert"]
CPP_SCENARIOS = ["chain", "ambiguous"]


@pytest.fixture(scope="module")
def corpus(request, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tailcalls"))
    cases = []
    for variant, (cc, src) in VARIANTS.items():
        subprocess.run([cc, "-O2", "-g", "-o", os.path.join(out, variant),
                        os.path.join(PROGRAMS, src)], check=True)
        for scenario in (C_SCENARIOS if src.endswith(".c") else CPP_SCENARIOS):
            cases.append(oracle.Case(variant, scenario, out))
    res = oracle.run_and_compare(cases, out)
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + res.summary())
    return res, {c.id: c for c in cases}


def test_every_case_ran_and_gdb_read_it(corpus):
    res, cases = corpus
    assert res.cases == len(cases)
    assert not res.errors, res.summary()


def test_every_tail_call_frame_gdb_shows_is_in_the_symbolized_report(corpus):
    res, _ = corpus
    assert not res.tail_misses, res.summary()
    # GCC's records give gdb these frames: dispatch (1), chain (2), qsort (1),
    # assert (1) in C, chain (2) in C++.
    assert len(res.synthetic) >= 7, res.summary()
    assert res.tail_agree == len(res.synthetic), res.summary()


def test_no_tail_call_frame_where_gdb_shows_none(corpus):
    res, cases = corpus
    assert not res.tail_extra, res.summary()
    for case_id in ("tail-c-gcc:ambiguous", "tail-c-gcc:indirect", "tail-cpp-gcc:ambiguous"):
        frames = fltest.crashed_thread(cases[case_id].symbolized)["frames"]
        assert not any(f.get("tail_calls") for f in frames), case_id


def test_the_real_frames_still_agree_with_gdb(corpus):
    res, _ = corpus
    assert not res.gaps and not res.extra, res.summary()
    assert res.sym_agree == res.sym_named, res.summary()


def test_show_markdown_and_sentry_mark_tail_calls(corpus, tmp_path):
    _, cases = corpus
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(cases["tail-c-gcc:chain"].symbolized))
    show = fltest.cli("show", str(path), check=True).stdout
    lines = [ln for ln in show.splitlines() if "(tail call)" in ln]
    assert len(lines) == 2 and "chain_b" in lines[0] and "chain_a" in lines[1], show
    md = fltest.cli("markdown", str(path), check=True).stdout
    assert sum("(tail call)" in ln for ln in md.splitlines()) == 2, md
    event = json.loads(fltest.cli("sentry", str(path), check=True).stdout)
    frames = [f for v in event["exception"]["values"] for f in v["stacktrace"]["frames"]] \
        if "exception" in event else event["threads"]["values"][0]["stacktrace"]["frames"]
    tails = [f["function"] for f in frames if f.get("data", {}).get("tail_call")]
    # Sentry lists frames oldest first.
    assert tails == ["chain_a", "chain_b"], frames
