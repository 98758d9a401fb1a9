"""Helpers shared by the symbolizer tests: running `faultline symbolize`,
llvm-symbolizer-14, listing functions of an ELF file, building reports."""
import json
import os
import random
import subprocess

CLI = os.environ.get("FAULTLINE_CLI", "faultline")
BUILD = os.environ.get("FAULTLINE_BUILD", "")
LLVM_SYMBOLIZER = "llvm-symbolizer-14"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def run_cli(*args, stdin=None, env=None, check=False):
    """Runs the faultline command; returns the CompletedProcess (text mode)."""
    full_env = dict(os.environ)
    full_env.pop("DEBUGINFOD_URLS", None)  # tests opt in explicitly
    if env:
        full_env.update(env)
    p = subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True, errors="replace",
                       env=full_env, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"faultline {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def faultline_addresses(module, addresses, extra=()):
    """{address: [frame dict, ...innermost first]} from `symbolize --module --json`."""
    p = run_cli("symbolize", "--module", module, "--json", *extra,
                stdin="\n".join(hex(a) for a in addresses) + "\n", check=True)
    out = {}
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        out[int(rec["address"], 16)] = [
            {"function": f["function"], "file": f["file"], "line": f["line"]}
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
                           "line": s.get("Line", 0)})
        # llvm-symbolizer prints one empty frame for an unknown address.
        if frames == [{"function": "", "file": "", "line": 0}]:
            frames = []
        out[int(rec["Address"], 16)] = frames
    return out


def demangle_all(results):
    """Demangles every function name in llvm_addresses() output with GNU c++filt,
    in place. (llvm-symbolizer's own demangler writes "operator<<char" for
    "operator< <char" and gives up on some names that GNU's handles; the
    symbolizers are compared on which function they find, not on demanglers.)"""
    names = sorted({f["function"] for frames in results.values() for f in frames
                    if f["function"].startswith("_Z")})
    if not names:
        return results
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                       text=True, check=True)
    table = dict(zip(names, p.stdout.splitlines()))
    for frames in results.values():
        for f in frames:
            f["function"] = table.get(f["function"], f["function"])
    return results


def _nm(elf_path):
    p = subprocess.run(["nm", "-S", "--defined-only", elf_path], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwWi":
            addr, size = int(parts[0], 16), int(parts[1], 16)
            if size > 0 and addr > 0:
                yield addr, size, parts[3]


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
