#!/usr/bin/python3
"""Benchmark: `faultline symbolize --module` against llvm-symbolizer-14,
eu-addr2line and GNU addr2line. Not a test; nothing fails.

How to run (from the repository root, after building faultline):

    cmake --build build --target faultline_cli
    /usr/bin/python3 bench/symbolize_bench.py --faultline build/bin/faultline
    # options: --binary PATH (symbolize another ELF file with DWARF instead of the
    #          generated one), --addresses N (default 10000), --runs N (default 5),
    #          --skip addr2line (repeatable), --workdir DIR (default /tmp/faultline-symbench)

What it measures, per tool, each a median over --runs runs:
- cold: one fresh process symbolizing N random addresses (each inside a
  function, with inline frames and demangling on in every tool), from exec to
  exit: start-up, opening and indexing the debug info, and the lookups.
- warm: the rate of lookups once the tool has loaded the binary, measured as
  N / (time for 2N addresses - time for N addresses) in the same way for
  every tool (the second N repeat the first, in the same order).
- peak RSS of the cold run (ru_maxrss).
Then the ratios faultline / tool (> 1 means faultline is faster).

The default binary is generated: a C++ program of --units translation units
with --functions each, heavy on inlining and on the standard library, built
with g++ -O2 -g into --workdir (once; it is reused while the source is the
same).
"""
import argparse
import hashlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

UNIT_TEMPLATE = r"""
#include <algorithm>
#include <map>
#include <string>
#include <vector>
namespace unit{u} {{
static inline int mix(int a, int b) {{ return (a * 31) ^ (b + {u}); }}
template <typename T> inline T clampv(T v, T lo, T hi) {{ return std::min(std::max(v, lo), hi); }}
struct Acc {{
  std::map<std::string, int> seen;
  int add(const std::string& s) {{ return ++seen[s]; }}
}};
{functions}
}}
int unit{u}_entry(int n) {{
  int s = 0;
{calls}
  return s;
}}
"""

FUNCTION_TEMPLATE = r"""
__attribute__((noinline)) int f{i}(int n) {{
  std::vector<int> v(static_cast<size_t>(clampv(n, 1, 64)), {i});
  Acc acc;
  int s = 0;
  for (size_t k = 0; k < v.size(); ++k) s = mix(s, v[k] + acc.add(std::to_string(k % {m})));
  std::sort(v.begin(), v.end());
  return s + v.front();
}}
"""


def generate_program(workdir, units, functions):
    src = os.path.join(workdir, "src")
    os.makedirs(src, exist_ok=True)
    files = []
    for u in range(units):
        body = "".join(FUNCTION_TEMPLATE.format(i=i, m=i % 7 + 2) for i in range(functions))
        calls = "".join(f"  s += unit{u}::f{i}(n + {i});\n" for i in range(functions))
        text = UNIT_TEMPLATE.format(u=u, functions=body, calls=calls)
        path = os.path.join(src, f"unit{u}.cpp")
        if not os.path.exists(path) or open(path).read() != text:
            open(path, "w").write(text)
        files.append(path)
    decls = "".join(f"int unit{u}_entry(int);\n" for u in range(units))
    calls = "".join(f"  s += unit{u}_entry(argc);\n" for u in range(units))
    main = os.path.join(src, "main.cpp")
    text = f"#include <cstdio>\n{decls}int main(int argc, char**) {{\n  int s = 0;\n{calls}" \
           "  std::printf(\"%d\\n\", s);\n}\n"
    if not os.path.exists(main) or open(main).read() != text:
        open(main, "w").write(text)
    files.append(main)
    return files


def build_program(workdir, units, functions):
    files = generate_program(workdir, units, functions)
    key = hashlib.sha256("".join(open(f).read() for f in files).encode()).hexdigest()[:12]
    binary = os.path.join(workdir, f"bench-{key}")
    if os.path.exists(binary):
        return binary
    objs = []
    procs = []
    print(f"building {len(files)} translation units with g++ -O2 -g (once) ...", file=sys.stderr)
    for f in files:
        obj = f[:-4] + ".o"
        objs.append(obj)
        procs.append(subprocess.Popen(["g++", "-O2", "-g", "-c", f, "-o", obj]))
        if len(procs) >= 2:  # two compilers at a time
            assert procs.pop(0).wait() == 0
    for p in procs:
        assert p.wait() == 0
    subprocess.run(["g++", "-o", binary, *objs], check=True)
    return binary


def functions_of(binary):
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True,
                         text=True).stdout
    funcs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW" and int(parts[1], 16) > 0:
            funcs.append((int(parts[0], 16), int(parts[1], 16)))
    return funcs


def run_once(cmd, stdin_text):
    """(wall seconds, peak RSS KiB, output lines) of one run."""
    with tempfile.TemporaryFile("w+") as inp, tempfile.TemporaryFile() as out:
        inp.write(stdin_text)
        inp.flush()
        inp.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=inp, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().count(b"\n")
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
    return wall, usage.ru_maxrss, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--faultline", default="build/bin/faultline")
    ap.add_argument("--binary", help="an ELF file with DWARF (default: a generated program)")
    ap.add_argument("--addresses", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--units", type=int, default=24)
    ap.add_argument("--functions", type=int, default=120)
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "faultline-symbench"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    binary = args.binary or build_program(args.workdir, args.units, args.functions)
    funcs = functions_of(binary)
    rng = random.Random(args.seed)
    addrs = [a + rng.randrange(s) for a, s in (rng.choice(funcs) for _ in range(args.addresses))]
    once = "".join(f"{a:#x}\n" for a in addrs)
    twice = once + once

    tools = {
        "faultline": [os.path.abspath(args.faultline), "symbolize", "--module", binary],
        "llvm-symbolizer-14": ["llvm-symbolizer-14", "--obj=" + binary, "--inlining",
                               "--demangle"],
        "eu-addr2line": ["eu-addr2line", "-e", binary, "-f", "-i", "-C"],
        "addr2line": ["addr2line", "-e", binary, "-f", "-i", "-C"],
    }
    size_mib = os.path.getsize(binary) / 2**20
    print(f"binary: {binary} ({size_mib:.1f} MiB, {len(funcs)} functions); "
          f"{args.addresses} addresses; median of {args.runs} runs")
    results = {}
    for name, cmd in tools.items():
        if name in args.skip:
            continue
        cold, warm2, rss, lines = [], [], [], 0
        for _ in range(args.runs):
            t1, r1, lines = run_once(cmd, once)
            t2, _, _ = run_once(cmd, twice)
            cold.append(t1)
            warm2.append(t2 - t1)
            rss.append(r1)
        c = statistics.median(cold)
        w = statistics.median(warm2)
        results[name] = (args.addresses / c, args.addresses / w if w > 0 else float("inf"),
                         statistics.median(rss) / 1024, lines)
        print(f"  {name:20s} cold {results[name][0]:>10.0f} addr/s   warm {results[name][1]:>10.0f}"
              f" addr/s   peak RSS {results[name][2]:7.1f} MiB   ({lines} output lines)",
              flush=True)
    if "faultline" in results:
        f = results["faultline"]
        print("faultline relative to each tool (x > 1: faultline faster):")
        for name, r in results.items():
            if name != "faultline":
                print(f"  vs {name:20s} cold x{f[0] / r[0]:.2f}   warm x{f[1] / r[1]:.2f}   "
                      f"RSS x{f[2] / r[2]:.2f}")


if __name__ == "__main__":
    main()
