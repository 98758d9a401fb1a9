"""A pc in a PLT stub, against gdb. programs/plt.c makes its own PLT pages
unexecutable and calls strlen through the PLT: the fault is taken at the
stub's first byte, which gdb names `strlen@plt`. Built with GCC and Clang 14
at -O2, PIE and not, with the IBT PLT (-fcf-protection -z ibtplt: the stub
is in .plt.sec) and with -z now; the raw report's symbol and the symbolized
function of the crashing frame must be gdb's name, at gdb's pc, and every
other frame must agree as in the frame oracle. Before, the report named the
frame after the last symbol before the PLT (`_init+0x40`).

The PLT stubs of a library (libc's own .plt and .plt.got, whose IFUNC
stubs gdb names `*ABS*+0xADDR@plt`) are checked through `faultline
symbolize --module` against gdb's `info symbol`: the same naming code as the
crash path's (core/modules/elf_plt.cpp)."""
import os
import re
import subprocess

import pytest

import fltest
import oracle
import symtools

usable, why = oracle.core_pattern_usable()
pytestmark = pytest.mark.skipif(not usable, reason=why)

FLAGS = {
    "pie": [],
    "nopie": ["-no-pie"],
    "ibt": ["-fcf-protection", "-Wl,-z,ibtplt"],
    "ibt-nopie": ["-fcf-protection", "-Wl,-z,ibtplt", "-no-pie"],
    "now": ["-Wl,-z,now"],
}
COMPILERS = {"gcc": "gcc", "clang": "clang-14"}


@pytest.fixture(scope="module")
def corpus(request, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("plt"))
    cases = []
    for cname, cc in COMPILERS.items():
        for fname, flags in FLAGS.items():
            variant = f"plt-{cname}-{fname}"
            subprocess.run([cc, "-O2", "-g", *flags, "-o", os.path.join(out, variant),
                            os.path.join(oracle.PROGRAMS, "plt.c")], check=True)
            cases.append(oracle.Case(variant, "strlen", out))
    res = oracle.run_and_compare(cases, out)
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + res.summary())
    return res, cases


def test_every_case_ran_and_gdb_read_it(corpus):
    res, cases = corpus
    assert res.cases == len(cases) == 10
    assert not res.errors, res.summary()


def test_the_stub_is_named_as_gdb_names_it(corpus):
    res, cases = corpus
    for c in cases:
        gdb0 = c.gdb["frames"][0]
        assert gdb0["name"] == "strlen@plt", (c.id, gdb0)
        raw0 = [f for f in fltest.crashed_thread(c.report)["frames"] if f["kind"] == "native"][0]
        sym0 = [f for f in fltest.crashed_thread(c.symbolized)["frames"]
                if f["kind"] == "native"][0]
        assert int(raw0["pc"], 16) == gdb0["pc"], c.id
        assert raw0.get("symbol") == "strlen@plt", (c.id, raw0)
        assert raw0.get("symbol_offset") in (0, "0x0"), (c.id, raw0)
        assert sym0.get("function") == "strlen@plt", (c.id, sym0)


def test_every_frame_agrees_with_gdb(corpus):
    res, _ = corpus
    assert not res.gaps and not res.extra, res.summary()
    assert not res.raw_misses and not res.sym_misses, res.summary()
    assert res.raw_named >= 30, res.summary()


def _gdb_info_symbol(path, addresses):
    """gdb's name of each address in a file ("" where it has none)."""
    args = ["gdb", "-batch", "-nx"]
    for a in addresses:
        args += ["-ex", f"info symbol {a:#x}"]
    p = subprocess.run(args + [path], capture_output=True, text=True, check=True)
    names = []
    for line in p.stdout.splitlines():
        m = re.match(r"(\S+?)(?: \+ \d+)? in section ", line)
        names.append(m.group(1) if m else "")
    assert len(names) == len(addresses), p.stdout + p.stderr
    return names


def _plt_addresses(path):
    """Every 4th byte of the file's PLT sections (headers and stubs)."""
    p = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True)
    out = []
    for m in re.finditer(r"\] (\.plt(?:\.sec|\.got)?)\s+PROGBITS\s+([0-9a-f]+) [0-9a-f]+ "
                         r"([0-9a-f]+)", p.stdout):
        start, size = int(m.group(2), 16), int(m.group(3), 16)
        out += range(start, start + size, 4)
    return out


def test_library_plt_stubs_are_named_as_gdb_names_them(tmp_path):
    libc = os.path.realpath(subprocess.run(
        ["gcc", "-print-file-name=libc.so.6"], capture_output=True, text=True).stdout.strip())
    exe = str(tmp_path / "ibt")
    subprocess.run(["gcc", "-O2", "-fcf-protection", "-Wl,-z,ibtplt", "-o", exe,
                    os.path.join(oracle.PROGRAMS, "plt.c")], check=True)
    checked = named = 0
    for path in (libc, exe):
        addresses = _plt_addresses(path)
        assert addresses, path
        gdb_names = _gdb_info_symbol(path, addresses)
        ours = symtools.faultline_addresses(path, addresses)
        for a, want in zip(addresses, gdb_names):
            frames = ours.get(a, [])
            mine = frames[-1]["function"] if frames else ""
            assert mine == want, f"{path} {a:#x}: gdb {want!r}, faultline {mine!r}"
            checked += 1
            named += bool(want)
    assert checked >= 200 and named >= 100, (checked, named)
