"""Helpers of the hostile suite: where the build is, reports to mutate, and
checks that output is safe for a terminal."""
import copy
import json
import os
import re
import subprocess

import fltest

SOURCE = fltest.SOURCE
CLI = fltest.CLI
LIB = fltest.LIB
DATA = os.path.join(SOURCE, "test", "data")


def cli(*args, input=None, timeout=120, env=None, cwd=None):
    """Runs faultline; bytes in, bytes out, never raises on status."""
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    if env:
        e.update(env)
    return subprocess.run([CLI, *args], input=input, capture_output=True, timeout=timeout, env=e,
                          cwd=cwd)


def base_report(name="real-python-segv.json"):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def write_report(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return str(path)


# What must never reach a terminal from a report: C0 controls other than the
# newline the renderer itself writes, DEL, C1 controls (UTF-8 C2 80..C2 9F),
# bidirectional overrides and isolates.
_UNSAFE = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def unsafe_bytes(out):
    return _UNSAFE.findall(out)


def copy_of(doc):
    return copy.deepcopy(doc)
