"""The signal-safety check must fail when the crash path gains a malloc."""
import os
import subprocess
import tempfile

SRC = os.environ["FAULTLINE_SOURCE"]
BUILD = os.environ["FAULTLINE_BUILD"]
CHECK = os.path.join(SRC, "tools", "check-signal-safety")
ALLOW = os.path.join(SRC, "tools", "signal-safe-allowlist.txt")


def crash_objects():
    with open(os.path.join(BUILD, "crash-objects.txt")) as f:
        return [l.strip() for l in f if l.strip()]


def test_clean_crash_path_passes():
    r = subprocess.run([CHECK, ALLOW] + crash_objects(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_added_malloc_fails_the_check():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "leak.cpp")
        with open(src, "w") as f:
            f.write('#include <cstdlib>\n#include <cstdio>\n'
                    'void* crash_path_helper(unsigned n) { printf("%u", n); return malloc(n); }\n')
        obj = os.path.join(d, "leak.o")
        subprocess.run(["g++", "-c", "-O1", src, "-o", obj], check=True)
        r = subprocess.run([CHECK, ALLOW] + crash_objects() + [obj], capture_output=True, text=True)
        assert r.returncode == 1
        assert "malloc" in r.stdout and "leak.o" in r.stdout
        assert "printf" in r.stdout


def test_library_has_no_dynamic_initialisers():
    """A global with a dynamic constructor could run after the preload
    constructor and wipe the installed state (it did once: the arena)."""
    import subprocess
    lib = os.environ["FAULTLINE_LIB"]
    syms = subprocess.run(["nm", lib], capture_output=True, text=True, check=True).stdout
    assert "_GLOBAL__sub_I" not in syms
