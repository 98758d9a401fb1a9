"""Agreement with llvm-symbolizer-14: 1,000 random addresses inside the
functions of an -O2 -g program full of inlining, and 1,000 inside libc with
Debian's libc6-dbg. Function, file and line of every frame of the inline
chain must agree for at least 99% of the addresses; every disagreement is
printed (pytest shows it when the test fails, -s shows it always).

Naming differences by design, each checked against llvm-symbolizer itself:
- C++ names are compared after demangling llvm-symbolizer's raw names with
  GNU c++filt, the demangler faultline's output matches (libstdc++'s);
  LLVM's demangler spells some names differently.
- C functions are named by DW_AT_name ("_IO_setb"), C++ ones by their
  demangled linkage name. llvm-symbolizer prefers the linkage name, which in
  glibc is an internal alias ("__GI__IO_setb"); its --functions=short mode
  prints DW_AT_name. A frame's name agrees when it equals llvm's name in
  either mode.
- For the outermost (not inlined) frame llvm-symbolizer prints the ELF
  symbol-table name: "main.cold" for the cold part of a split function,
  any alias for glibc's aliased functions ("srand" for __srandom).
  faultline names the source function, so llvm's name also agrees once the
  clone suffix (".cold", " [clone .cold]", ".part.0", ...) is removed.
- Code without any DWARF (libgcc's soft-float helpers inside libc):
  llvm-symbolizer prints nothing, faultline the symbol-table name with no
  file or line. That agrees when the name is the symbol the address was
  picked from (or an alias at the same address).
"""
import os
import re

import pytest

import symtools

PROGRAM = os.path.join(symtools.BUILD, "test", "symbolize", "symbolize_inline_heavy")
SEED = int(os.environ.get("FAULTLINE_SYM_SEED", "4"))
COUNT = 1000
CLONE_SUFFIX = re.compile(
    r"( \[clone \.[\w.]+\]| \(\.[\w.]+\)|\.(cold|part\.\d+|isra\.\d+|constprop\.\d+))+$")


def compare(module, functions_from):
    funcs = symtools.function_symbols(functions_from)
    assert len(funcs) > 20, f"too few functions in {functions_from}"
    picked, addresses = symtools.random_addresses(funcs, COUNT, SEED)
    ours = symtools.faultline_addresses(module, addresses)
    oracle = symtools.demangle_all(symtools.llvm_addresses(module, addresses, ["--no-demangle"]))
    short = symtools.llvm_addresses(module, addresses, ["--functions=short"])
    aliases = symtools.symbol_names(functions_from)
    disagreements = []
    for a, (faddr, _, _) in zip(addresses, picked):
        mine, theirs = ours.get(a), oracle.get(a)
        if not theirs and mine and len(mine) == 1 and not mine[0]["file"]:
            if mine[0]["function"] in aliases[faddr]:
                continue
        if mine and theirs and len(mine) == len(theirs):
            adjusted = []
            for i, (m, t) in enumerate(zip(mine, theirs)):
                names = {t["function"]}
                if i < len(short.get(a, [])):
                    names.add(short[a][i]["function"])
                if i == len(mine) - 1:
                    names.add(CLONE_SUFFIX.sub("", t["function"]))
                adjusted.append(dict(t, function=m["function"]) if m["function"] in names - {""} else t)
            theirs = adjusted
        if mine != theirs:
            disagreements.append(f"{a:#x}:\n  faultline: {mine}\n  llvm:      {theirs}")
    print(f"{module}: {COUNT - len(disagreements)}/{COUNT} agree")
    for d in disagreements:
        print(d)
    # An oracle that resolves nothing would agree with a symbolizer that
    # resolves nothing: insist that the addresses really got lines.
    with_lines = sum(1 for a in addresses if oracle[a] and oracle[a][0]["line"] > 0)
    assert with_lines >= COUNT * 0.9, f"only {with_lines} addresses have lines"
    inlined = sum(1 for a in addresses if len(oracle[a]) > 1)
    return disagreements, inlined


def test_inline_heavy_program_agrees_with_llvm_symbolizer():
    assert os.path.exists(PROGRAM), "build the symbolize_inline_heavy target first"
    disagreements, inlined = compare(PROGRAM, PROGRAM)
    assert inlined >= COUNT * 0.2, f"only {inlined} addresses are in inlined code"
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)


def test_libc_with_libc6_dbg_agrees_with_llvm_symbolizer():
    debug = symtools.system_debug_file(symtools.LIBC)
    if debug is None:
        pytest.skip("libc6-dbg is not installed")
    disagreements, _ = compare(symtools.LIBC, debug)
    assert len(disagreements) <= COUNT // 100, "\n".join(disagreements)
