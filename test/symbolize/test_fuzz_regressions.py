"""Inputs that once crashed the fuzz targets (fuzz/symbolize_regressions/),
the report seed corpus, and a fixed set of byte-flipped copies of a real
program, all run through the `faultline symbolize` command of a normal
build: each must end with exit status 0 or 1, never with a signal."""
import glob
import os
import random

import pytest

import symtools

SOURCE = os.environ.get("FAULTLINE_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
PROGRAM = os.path.join(symtools.BUILD, "test", "symbolize", "symbolize_inline_heavy")


def inputs(kind):
    files = glob.glob(os.path.join(SOURCE, "fuzz", "symbolize_regressions", kind, "*"))
    if kind == "report":
        files += glob.glob(os.path.join(SOURCE, "fuzz", "symbolize_corpus", "report", "*"))
    return sorted(f for f in files if not f.endswith("README"))


def assert_no_crash(p):
    assert p.returncode in (0, 1), f"exit {p.returncode}\n{p.stderr}"


@pytest.mark.parametrize("path", inputs("elf"))
def test_elf_regression(path):
    assert_no_crash(symtools.run_cli("symbolize", "--module", path, "0x0", "0x1000", "0x1139"))


@pytest.mark.parametrize("path", inputs("report"))
def test_report_regression(path):
    assert_no_crash(symtools.run_cli("symbolize", path))


def test_byte_flipped_programs(tmp_path):
    data = open(PROGRAM, "rb").read()
    funcs = symtools.function_symbols(PROGRAM)
    _, addrs = symtools.random_addresses(funcs, 20, seed=5)
    rng = random.Random(7)
    for n in range(40):
        mutated = bytearray(data)
        # Headers most of the time (where one flip changes the most), anywhere else sometimes.
        for _ in range(rng.choice([1, 4, 32])):
            at = rng.randrange(256) if rng.random() < 0.5 else rng.randrange(len(data))
            mutated[at] = rng.randrange(256)
        path = tmp_path / f"mutant{n}"
        path.write_bytes(bytes(mutated))
        assert_no_crash(symtools.run_cli("symbolize", "--module", str(path),
                                         *[hex(a) for a in addrs]))
