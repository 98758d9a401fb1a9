"""Agreement with llvm-symbolizer-14: 1,000 random addresses inside the
functions of an -O2 -g program full of inlining, 1,000 inside libc with
Debian's libc6-dbg, 1,000 inside libstdc++ with libstdc++6-12-dbg, and 1,000
inside libtorch_cpu (symbols only). Function, file, line and column of every
frame of the inline chain must agree for at least 99% of the addresses, and
every aliased function address of libc must be named alike; every
disagreement is printed (pytest shows it when the test fails, -s shows it
always). The naming differences by design are listed in
symtools.compare_with_llvm.
"""
import os

import pytest

import symtools

PROGRAM = os.path.join(symtools.BUILD, "test", "symbolize", "symbolize_inline_heavy")
SEED = int(os.environ.get("FAULTLINE_SYM_SEED", "4"))
COUNT = 1000


def compare(module, functions_from):
    funcs = symtools.function_symbols(functions_from)
    assert len(funcs) > 20, f"too few functions in {functions_from}"
    picked, addresses = symtools.random_addresses(funcs, COUNT, SEED)
    origins = {a: faddr for a, (faddr, _, _) in zip(addresses, picked)}
    disagreements, oracle = symtools.compare_with_llvm(
        module, addresses, symtools.symbol_names(functions_from), origins)
    print(f"{module}: {COUNT - len(disagreements)}/{COUNT} agree")
    for d in disagreements:
        print(d)
    return disagreements, oracle


def check_lines(oracle):
    # An oracle that resolves nothing would agree with a symbolizer that
    # resolves nothing: insist that the addresses really got lines.
    with_lines = sum(1 for frames in oracle.values() if frames and frames[0]["line"] > 0)
    assert with_lines >= len(oracle) * 0.9, f"only {with_lines} of {len(oracle)} addresses have lines"
    return sum(1 for frames in oracle.values() if len(frames) > 1) / len(oracle)


def test_inline_heavy_program_agrees_with_llvm_symbolizer():
    assert os.path.exists(PROGRAM), "build the symbolize_inline_heavy target first"
    disagreements, oracle = compare(PROGRAM, PROGRAM)
    inlined = check_lines(oracle)
    assert inlined >= 0.2, f"only {inlined:.0%} of the addresses are in inlined code"
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)


def test_libc_with_libc6_dbg_agrees_with_llvm_symbolizer():
    debug = symtools.system_debug_file(symtools.LIBC)
    if debug is None:
        pytest.skip("libc6-dbg is not installed")
    disagreements, oracle = compare(symtools.LIBC, debug)
    check_lines(oracle)
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)


LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
LIBSTDCXX_DEBUG = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
LIBTORCH = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"


def test_libstdcxx_debug_build_agrees_with_llvm_symbolizer():
    """libstdc++'s debug build (libstdc++6-12-dbg): C++ names, templates, inlining."""
    if not os.path.exists(LIBSTDCXX_DEBUG):
        pytest.skip("libstdc++6-12-dbg is not installed")
    disagreements, oracle = compare(LIBSTDCXX_DEBUG, LIBSTDCXX_DEBUG)
    check_lines(oracle)
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)


def test_libstdcxx_symbols_agree_with_llvm_symbolizer():
    """The system's libstdc++: no debug file, names from .dynsym only."""
    module = os.path.realpath(LIBSTDCXX)
    disagreements, _ = compare(module, module)
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)


def test_libtorch_symbols_agree_with_llvm_symbolizer():
    """A large C++ library without debug information (Debian has no
    -dbgsym for it): names from .dynsym only, mangled C++ demangled."""
    if not os.path.exists(LIBTORCH):
        pytest.skip("python3-torch (libtorch1.13) is not installed")
    disagreements, oracle = compare(LIBTORCH, LIBTORCH)
    named = sum(1 for frames in oracle.values() if frames and frames[0]["function"])
    assert named >= COUNT * 0.9, f"llvm-symbolizer named only {named} addresses"
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)


def test_libc_aliases_are_named_as_llvm_symbolizer_names_them():
    """Every libc address that several function symbols name (glibc's aliases:
    clock_gettime and __clock_gettime, clone and __clone, GLOBAL and WEAK,
    versioned, internal __GI_ names): the outermost frame's function is
    exactly llvm-symbolizer's where it takes the name from libc's own symbol
    table (.dynsym), and its --functions=short name (DW_AT_name) where it
    prints DWARF's linkage name, glibc's internal alias (__GI___clone3), the
    one naming difference by design."""
    debug = symtools.system_debug_file(symtools.LIBC)
    if debug is None:
        pytest.skip("libc6-dbg is not installed")
    own = symtools.symbol_names(symtools.LIBC)
    aliased = {a for a, names in symtools.symbol_names(debug).items() if len(names) > 1}
    addresses = sorted(aliased | {a for a, names in own.items() if len(names) > 1})
    assert len(addresses) > 300, f"only {len(addresses)} aliased addresses in libc"
    ours = symtools.faultline_addresses(symtools.LIBC, addresses)
    full = symtools.llvm_addresses(symtools.LIBC, addresses, ["--no-demangle"])
    short = symtools.llvm_addresses(symtools.LIBC, addresses, ["--functions=short"])
    named = [a for a in addresses if full.get(a) and short.get(a)]
    assert len(named) >= len(addresses) * 0.9, "llvm-symbolizer named too few of them"
    differ = []
    for a in named:
        mine, theirs = ours.get(a, [{}])[-1].get("function"), full[a][-1]["function"]
        if theirs not in own.get(a, set()):
            theirs = short[a][-1]["function"]
        if mine != theirs:
            differ.append(f"{a:#x}: faultline {mine!r}, llvm-symbolizer {theirs!r}")
    print(f"libc aliases: {len(named) - len(differ)}/{len(named)} named as llvm-symbolizer does")
    assert not differ, "\n".join(differ)
