"""One spelling for C++ names (doc/symbolize.md#how-functions-are-spelt).

programs/cxx_names.cpp (lambdas plain and generic, in a class template, in
namespaces, through std::function; an inlined member of a class in an
anonymous namespace; templates) is built with GCC and Clang 14 at -O2 -g.

- Every byte of its functions: `faultline symbolize` names each frame of the
  inline chain as llvm-symbolizer-14 does, its raw linkage names demangled
  with the demangler of c++filt and of the raw report (__cxa_demangle). The
  one difference allowed: where DWARF has no linkage name on the function
  (GCC's lambdas), llvm-symbolizer prints the bare DW_AT_name; faultline
  prints the demangled symbol of an out-of-line copy of the same function,
  else its DWARF name with the declaration's scopes. Either must end in
  llvm's bare name.
- "One spelling": every frame of a function that has an out-of-line copy
  carries that copy's demangled symbol (`nm`, then c++filt: an oracle of its
  own), inlined frames included, and no frame spells a function in DWARF's
  way when a symbol names it.
- Real crashes inside inlined code (an inlined lambda with an out-of-line
  copy, a generic lambda in a template, an inlined member, a lambda through
  std::function): the raw report's symbol and the symbolized name of every
  frame of the program read alike, and match llvm-symbolizer's names.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

import fltest
import symtools

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "cxx_names.cpp")
COMPILERS = {"gcc": "g++", "clang": "clang++-14"}
SCENARIOS = ["lambda", "generic", "member", "function"]


@pytest.fixture(scope="module", params=sorted(COMPILERS))
def program(request, tmp_path_factory):
    cxx = COMPILERS[request.param]
    if shutil.which(cxx) is None:
        pytest.skip(f"{cxx} is not installed")
    out = str(tmp_path_factory.mktemp(request.param) / f"cxx_names_{request.param}")
    subprocess.run([cxx, "-std=c++17", "-O2", "-g", "-o", out, SOURCE], check=True)
    return out


def cxxfilt(names):
    """GNU c++filt, the independent demangler the names must match."""
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True,
                       check=True)
    return p.stdout.splitlines()


def own_functions(program):
    """[(address, size, mangled name)] of the program's C++ functions."""
    return [f for f in symtools.function_symbols(program) if f[2].startswith("_Z")]


def copies(program):
    """{demangled name without clone suffix} of every function symbol."""
    names = [n for _, _, n in own_functions(program)]
    return {symtools.CLONE_SUFFIX.sub("", d) for d in cxxfilt(names)}


def outside_templates(name):
    """The name with template arguments left out: "f<a::b(c)>" -> "f"."""
    out, depth = "", 0
    for c in name.replace("operator<", "operator\0"):
        depth += c == "<"
        if depth == 0:
            out += c
        depth -= c == ">" and depth > 0
    return out.replace("\0", "<")


def bare(name):
    """llvm-symbolizer prints DW_AT_name alone where DWARF has no linkage name."""
    plain = outside_templates(name)
    return "(" not in plain.replace("operator()", "") and "::" not in plain


def names_function(symbol, scope, base):
    """Whether a demangled symbol names function `base` in `scope`, a scope
    spelt DWARF's way (GCC's closure classes as <lambda>)."""
    pattern = re.escape(scope + "::" if scope else "").replace(
        re.escape("<lambda>"), r"\{lambda\(.*?\)#\d+\}")
    return re.match(r"(.* )?" + pattern + re.escape(base) + r"[<(]", symbol) is not None


def check_frames(mine, theirs, symbols, where):
    """Compares one address's inline chains; returns the problems as text."""
    if mine is None or theirs is None or len(mine) != len(theirs):
        return [f"{where}: frames differ\n  faultline: {mine}\n  llvm:      {theirs}"]
    problems = []
    for i, (m, t) in enumerate(zip(mine, theirs)):
        f, want = m["function"], t["function"]
        if i == len(mine) - 1:
            want = symtools.CLONE_SUFFIX.sub("", want)
        if f == want and not bare(want):
            continue
        base = outside_templates(want).replace("operator()", "operator\0").split("(")[0]
        base = base.replace("operator\0", "operator()")
        if bare(want) and f in symbols and (
                f.startswith(base + "(") or ("::" + base + "(") in outside_templates(f)):
            continue  # no linkage name in DWARF: spelt as its out-of-line copy
        if bare(want) and (f == want or f.endswith("::" + want)):
            # No linkage name in DWARF and, unless a symbol names the function
            # (then faultline must use it: one spelling), none anywhere.
            scope = f[:-len(want) - 2] if f != want else ""
            named = [s for s in symbols if names_function(s, scope, base)]
            if named:
                problems.append(f"{where}: {f!r} is spelt from DWARF, but symbols name it: {named}")
            continue
        problems.append(f"{where} frame {i}: faultline {f!r}, llvm {want!r}")
    return problems


def test_every_address_agrees_with_llvm_symbolizer(program):
    funcs = own_functions(program)
    addresses = [a + i for a, size, _ in funcs for i in range(size)]
    ours = symtools.faultline_addresses(program, addresses)
    oracle = symtools.demangle_all(symtools.llvm_addresses(program, addresses, ["--no-demangle"]))
    symbols = copies(program)
    problems, inlined, from_symbols = [], 0, 0
    for a in addresses:
        problems += check_frames(ours.get(a), oracle.get(a), symbols, hex(a))
        inlined += len(ours.get(a) or []) > 1
        from_symbols += any(bare(t["function"]) and m["function"] in symbols
                            for m, t in zip(ours.get(a) or [], oracle.get(a) or []))
    print(f"{program}: {len(addresses) - len(set(p.split(':')[0] for p in problems))}"
          f"/{len(addresses)} addresses agree; {inlined} with inlined frames; "
          f"{from_symbols} name a function DWARF leaves without linkage name by its symbol")
    assert not problems, "\n".join(problems[:40])
    assert inlined > len(addresses) // 5
    if program.endswith("_gcc"):  # Clang gives every function a linkage name
        assert from_symbols > 0


def test_inlined_lambda_is_spelt_as_its_out_of_line_copy(program):
    """The lambda of ml::crash_in_lambda is inlined into the loop and has an
    out-of-line copy; c++filt spells the copy's symbol. Every address where
    faultline names that lambda must use exactly that spelling."""
    symbols = copies(program)
    lambdas = [s for s in symbols if s.startswith("ml::crash_in_lambda(") and "::operator()" in s]
    assert len(lambdas) == 1, lambdas
    funcs = own_functions(program)
    addresses = [a + i for a, size, _ in funcs for i in range(size)]
    ours = symtools.faultline_addresses(program, addresses)
    names = {f["function"] for frames in ours.values() for f in frames
             if f["function"].startswith("ml::crash_in_lambda(") and "operator()" in f["function"]}
    inlined = sum(1 for frames in ours.values()
                  if len(frames) > 1 and frames[0]["function"] in lambdas)
    assert names == set(lambdas), names
    assert inlined > 0, "the lambda was not inlined anywhere"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_crash_raw_and_symbolized_names_agree(program, scenario, tmp_path):
    run = fltest.run([program, scenario])
    assert run.signal == 11, run.stderr
    raw_path = tmp_path / "raw.json"
    raw_path.write_text(json.dumps(run.report))
    p = fltest.cli("symbolize", str(raw_path), check=True)
    symbolized = json.loads(p.stdout)
    real = os.path.realpath(program)
    frames = [f for f in fltest.crashed_thread(symbolized)["frames"]
              if f["kind"] == "native" and os.path.realpath(f.get("module", "")) == real]
    assert frames, "no frame in the program"
    first = fltest.crashed_thread(symbolized)["frames"][0]
    # Raw: the crash path's ELF symbol, demangled as c++filt does, is the
    # symbolized (outermost) function, clone suffixes aside.
    raw = cxxfilt([f["symbol"] for f in frames])
    for f, r in zip(frames, raw):
        assert f["function"] == symtools.CLONE_SUFFIX.sub("", r), (f["function"], r)
    # Symbolized: every frame, inlined ones first, as llvm-symbolizer names them.
    addresses = [int(f["module_offset"], 16) - (0 if f is first else 1) for f in frames]
    oracle = symtools.demangle_all(symtools.llvm_addresses(program, addresses, ["--no-demangle"]))
    symbols = copies(program)
    problems = []
    for f, a in zip(frames, addresses):
        mine = [dict(function=i["function"]) for i in f.get("inlined", [])] + [
            dict(function=f["function"])]
        theirs = [dict(function=t["function"]) for t in oracle.get(a, [])]
        problems += check_frames(mine, theirs, symbols, hex(a))
    assert not problems, "\n".join(problems)
    if scenario == "lambda":
        assert frames[0].get("inlined"), "the crash is not in the inlined lambda"
        assert frames[0]["inlined"][0]["function"] in symbols
