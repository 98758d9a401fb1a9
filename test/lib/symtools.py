"""Helpers shared by the symbolizer tests: running `faultline symbolize`,
llvm-symbolizer-14, listing functions of an ELF file, building reports."""
import ctypes
import json
import os
import random
import re
import subprocess

import fltest

CLI = fltest.CLI
BUILD = os.environ.get("FAULTLINE_BUILD", "")
LLVM_SYMBOLIZER = "llvm-symbolizer-14"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def run_cli(*args, stdin=None, env=None, check=False):
    """Runs the faultline command; returns the CompletedProcess (text mode)."""
    return fltest.cli(*args, input=stdin, env=env, check=check)


def faultline_addresses(module, addresses, extra=()):
    """{address: [frame dict, ...innermost first]} from `symbolize --module --json`."""
    p = run_cli("symbolize", "--module", module, "--json", *extra,
                stdin="\n".join(hex(a) for a in addresses) + "\n", check=True)
    out = {}
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        out[int(rec["address"], 16)] = [
            {"function": f["function"], "file": f["file"], "line": f["line"],
             "column": f.get("column", 0)}
            for f in rec["frames"]]
    return out


def llvm_addresses(module, addresses, extra=()):
    """The same, from llvm-symbolizer-14 (the independent oracle)."""
    p = subprocess.run([LLVM_SYMBOLIZER, "--obj=" + module, "--output-style=JSON", "--inlining",
                        *extra],
                       input="\n".join(hex(a) for a in addresses) + "\n",
                       capture_output=True, text=True, timeout=300, check=True)
    out = {}
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        frames = []
        for s in rec.get("Symbol", []):
            fn = s.get("FunctionName", "")
            frames.append({"function": "" if fn == "<invalid>" else fn,
                           "file": "" if s.get("FileName") == "<invalid>" else s.get("FileName", ""),
                           "line": s.get("Line", 0), "column": s.get("Column", 0)})
        # llvm-symbolizer prints one empty frame for an unknown address.
        if frames == [{"function": "", "file": "", "line": 0, "column": 0}]:
            frames = []
        out[int(rec["Address"], 16)] = frames
    return out


_cxa_demangle = None


def cxa_demangle(name):
    """Demangles with libstdc++'s abi::__cxa_demangle, the demangler faultline
    uses (GNU c++filt spells std::string out as std::basic_string<...>)."""
    global _cxa_demangle
    if _cxa_demangle is None:
        lib = ctypes.CDLL("libstdc++.so.6")
        _cxa_demangle = lib.__cxa_demangle
        _cxa_demangle.restype = ctypes.c_void_p
        _cxa_demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int(0)
    out = _cxa_demangle(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not out:
        return name
    text = ctypes.string_at(out).decode(errors="replace")
    ctypes.CDLL(None).free(ctypes.c_void_p(out))
    return text


def demangle_all(results):
    """Demangles every function name in llvm_addresses() output with the
    demangler faultline uses, in place. (llvm-symbolizer's own demangler writes
    "operator<<char" for "operator< <char" and gives up on some names that
    GNU's handles; the symbolizers are compared on which function they find,
    not on demanglers.)"""
    for frames in results.values():
        for f in frames:
            if f["function"].startswith("_Z"):
                f["function"] = cxa_demangle(f["function"])
    return results


def _nm(elf_path):
    p = subprocess.run(["nm", "-S", "--defined-only", elf_path], capture_output=True, text=True)
    if "no symbols" in p.stderr:  # stripped: the dynamic symbols are all there is
        p = subprocess.run(["nm", "-S", "-D", "--defined-only", elf_path], capture_output=True,
                           text=True)
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwWi":
            addr, size = int(parts[0], 16), int(parts[1], 16)
            if size > 0 and addr > 0:
                yield addr, size, parts[3].split("@")[0]


def function_symbols(elf_path):
    """[(address, size, name)] of the sized function symbols (nm -S), one per address."""
    funcs = {}
    for addr, size, name in _nm(elf_path):
        funcs.setdefault(addr, (addr, size, name))
    return sorted(funcs.values())


def symbol_names(elf_path):
    """{address: {every function symbol name at that address}} (aliases)."""
    names = {}
    for addr, _, name in _nm(elf_path):
        names.setdefault(addr, set()).add(name)
    return names


def random_addresses(funcs, count, seed):
    """`count` random functions and an address at a random byte inside each."""
    rng = random.Random(seed)
    picked = [rng.choice(funcs) for _ in range(count)]
    return picked, [a + rng.randrange(s) for a, s, _ in picked]


def build_id(elf_path):
    p = subprocess.run(["readelf", "-n", elf_path], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return ""


def report(modules, threads):
    """A minimal faultline/1 report; modules: [(path, build_id)], threads: [[frame, ...]]."""
    return {
        "schema": "faultline/1",
        "kind": "crash",
        "signal": {"number": 11, "name": "SIGSEGV"},
        "crashed_tid": 1,
        "threads": [{"tid": i + 1, "crashed": i == 0, "frames": frames}
                    for i, frames in enumerate(threads)],
        "modules": [{"path": p, "base": "0x0", "size": "0x0", "load_bias": "0x0", "build_id": b}
                    for p, b in modules],
    }


def native_frame(module, offset, **extra):
    f = {"kind": "native", "origin": "native", "pc": hex(offset), "module": module,
         "module_offset": hex(offset)}
    f.update(extra)
    return f


def system_debug_file(elf_path):
    """/usr/lib/debug/.build-id/xx/rest.debug for this file, if installed."""
    bid = build_id(elf_path)
    path = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
    return path if bid and os.path.exists(path) else None


CLONE_SUFFIX = re.compile(
    r"( \[clone \.[\w.]+\]| \(\.[\w.]+\)|\.(cold|part\.\d+|isra\.\d+|constprop\.\d+))+$")


def compare_with_llvm(module, addresses, aliases=None, origins=None):
    """Symbolizes `addresses` of `module` with faultline and llvm-symbolizer-14
    and compares every frame of each inline chain: function, file, line,
    column. Returns (disagreements as text, the oracle's results).

    Naming differences by design, each checked against llvm-symbolizer itself:
    - C++ names are compared after demangling llvm-symbolizer's raw names with
      GNU c++filt, the demangler faultline's output matches (libstdc++'s);
      LLVM's demangler spells some names differently.
    - C functions are named by DW_AT_name ("_IO_setb"), C++ ones by their
      demangled linkage name. llvm-symbolizer prefers the linkage name, which
      in glibc is an internal alias ("__GI__IO_setb"); its --functions=short
      mode prints DW_AT_name. A name agrees when it equals llvm's in either mode.
    - A C++ function DWARF gives no linkage name (a lambda, std::function's
      _M_invoke of one, a function in an anonymous namespace): llvm-symbolizer
      prints the bare DW_AT_name ("operator()", "__invoke_impl<...>"),
      faultline the demangled symbol of an out-of-line copy of it, else the
      name qualified with the declaration's scopes. It agrees when llvm's
      name is the last scope of faultline's, before the parameters if any.
    - For the outermost (not inlined) frame llvm-symbolizer prints the ELF
      symbol-table name: "main.cold" for the cold part of a split function,
      any alias for glibc's aliased functions ("srand" for __srandom).
      faultline names the source function, so llvm's name also agrees once the
      clone suffix is removed, or when both are names of one address
      (`aliases`: {address: {names}}).
    - Code without any DWARF: llvm-symbolizer prints nothing or a symbol-table
      name; faultline the symbol-table name with no file or line. That agrees
      when the name is the symbol the address was picked from (`origins`:
      {address: start of that symbol}) or an alias at the same address.
    """
    ours = faultline_addresses(module, addresses)
    oracle = demangle_all(llvm_addresses(module, addresses, ["--no-demangle"]))
    short = llvm_addresses(module, addresses, ["--functions=short"])
    aliases = aliases or {}
    origins = origins or {}
    disagreements = []
    for a in addresses:
        mine, theirs = ours.get(a), oracle.get(a)
        alias_names = {cxa_demangle(n) for n in aliases.get(origins.get(a), set())}
        no_dwarf = mine and len(mine) == 1 and not mine[0]["file"]
        if no_dwarf and (not theirs or not theirs[0]["file"]):
            if mine[0]["function"] in alias_names or (
                    theirs and CLONE_SUFFIX.sub("", theirs[0]["function"]) == mine[0]["function"]):
                continue
        if mine and theirs and len(mine) == len(theirs):
            adjusted = []
            for i, (m, t) in enumerate(zip(mine, theirs)):
                names = {t["function"]}
                if i < len(short.get(a, [])):
                    names.add(short[a][i]["function"])
                if i == len(mine) - 1:
                    names.add(CLONE_SUFFIX.sub("", t["function"]))
                    names |= alias_names if t["function"] in alias_names else set()
                names.discard("")
                f = m["function"]
                ok = f in names or any(
                    f.endswith("::" + n) or ("::" not in n and ("::" + n + "(") in f) for n in names)
                adjusted.append(dict(t, function=f) if ok else t)
            theirs = adjusted
        if mine != theirs:
            disagreements.append(f"{a:#x}:\n  faultline: {mine}\n  llvm:      {theirs}")
    return disagreements, oracle
