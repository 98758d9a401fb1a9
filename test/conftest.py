"""What every pytest suite under test/ shares: the helper folders on sys.path,
so a test file imports its helpers by name, wherever ctest runs it from.

- test/lib: fltest, running crashing programs under the preload, collecting
  and validating their reports, running the `faultline` command;
- test/python: the interpreters under test (pyenvs) and CPython's own
  faulthandler text (faulthandler_text, interleave_oracle);
- test/symbolize: symtools, llvm-symbolizer and ELF helpers.

A suite's own folder is on sys.path already (pytest's default import mode).
"""
import os
import sys

_TEST = os.path.dirname(os.path.abspath(__file__))
for _folder in ("symbolize", "python", "lib"):  # test/lib ends up first
    _path = os.path.join(_TEST, _folder)
    if _path not in sys.path:
        sys.path.insert(0, _path)
