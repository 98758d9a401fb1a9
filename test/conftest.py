"""What every pytest suite under test/ shares: test/lib, the helpers more than
one suite (or a benchmark) uses, on sys.path, so a test file imports them by
name wherever ctest runs it from:

- fltest: running crashing programs under the preload, collecting and
  validating their reports, running the `faultline` command;
- pyenvs: the interpreters under test;
- faulthandler_text, interleave_oracle: CPython's own faulthandler text, and
  gdb and faulthandler as oracles of a report's merged stacks;
- symtools: llvm-symbolizer and ELF helpers;
- lldb_minidump: lldb-14 reading a minidump (the minidump suites, x86-64's
  and aarch64's);
- reportgen: synthetic reports (also for bench/triage_bench.py).

A helper only one suite uses stays beside that suite: a suite's own folder is
on sys.path already (pytest's default import mode). A script run directly,
outside pytest, puts test/lib on sys.path itself, before its imports.
"""
import os
import sys

_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)
