"""A process that goes on after its crash (its own handler, chained behind
faultline, recovers): later captures must be whole. Real processes."""

import fltest


def test_live_dump_after_a_crash_cut_short_by_the_watchdog_is_complete():
    # The crash's watchdog fires (libunwind waits for the loader's lock that
    # another thread holds). Before: the watchdog stayed "fired", and the
    # later live dump skipped every phase (no modules, no frames).
    r = fltest.run([fltest.program("recover")],
                   env={"FAULTLINE_UNWINDER": "libunwind", "FAULTLINE_CHAIN_ORDER": "report-first",
                        "FAULTLINE_WATCHDOG": "1", "FAULTLINE_DUMP": "1", "FAULTLINE_STDERR": "0"},
                   timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "recovered", (r.returncode, r.stdout, r.stderr)
    kinds = sorted(rep["kind"] for rep in r.reports)
    assert kinds == ["crash", "dump"], kinds
    crash = [rep for rep in r.reports if rep["kind"] == "crash"][0]
    dump = [rep for rep in r.reports if rep["kind"] == "dump"][0]
    fltest.validate(crash)
    fltest.validate(dump)
    assert any("watchdog" in e for e in crash["faultline"]["errors"]), crash["faultline"]["errors"]
    assert not any("watchdog" in e for e in dump["faultline"]["errors"]), dump["faultline"]["errors"]
    assert dump["modules"], "the dump has a module table"
    main = [t for t in dump["threads"] if t["tid"] == dump["process"]["pid"]][0]
    syms = fltest.native_symbols(main)
    i = syms.index("dump_after_recovery")
    assert syms[i + 1] == "main", syms
