"""The frame oracle: builds the corpus (test/oracle/programs) in several
variants, crashes every scenario under the preload with core dumps on, reads
each core file with gdb and compares the crashing thread's frames, one by one,
with the raw report and with the report after `faultline symbolize`.

Used by test_frames.py; also runnable by hand to see every frame:
    FAULTLINE_BUILD=build FAULTLINE_SOURCE=. python3 test/oracle/oracle.py [filter]
"""
import concurrent.futures
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

# Run directly (outside pytest), this script puts test/lib, the tests' shared
# helpers, on sys.path itself; test/conftest.py does it for pytest.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import fltest  # noqa: E402
import symtools  # noqa: E402

SOURCE = fltest.SOURCE
HERE = os.path.join(SOURCE, "test", "oracle")
PROGRAMS = os.path.join(HERE, "programs")
JOBS = max(1, min(2, os.cpu_count() or 1))

# Variants: (language, compiler, flags). Every C scenario runs in every C
# variant, every C++ scenario in every C++ variant.
VARIANTS = {
    "c-O0-fp": ("c", "gcc", ["-O0", "-fno-omit-frame-pointer"]),
    "c-O2": ("c", "gcc", ["-O2", "-fomit-frame-pointer"]),
    "c-O2-fp": ("c", "gcc", ["-O2", "-fno-omit-frame-pointer"]),
    "c-O3": ("c", "gcc", ["-O3", "-fomit-frame-pointer"]),
    "c-clang-O2": ("c", "clang-14", ["-O2", "-fomit-frame-pointer"]),
    "cpp-O0-fp": ("cpp", "g++", ["-O0", "-fno-omit-frame-pointer"]),
    "cpp-O2": ("cpp", "g++", ["-O2", "-fomit-frame-pointer"]),
    "cpp-O3": ("cpp", "g++", ["-O3", "-fomit-frame-pointer"]),
    "cpp-clang-O2": ("cpp", "clang++-14", ["-O2", "-fomit-frame-pointer"]),
}
C_SCENARIOS = ["null-read", "bad-fnptr", "null-fnptr", "weak-missing", "inline", "tail", "abort", "assert", "libc-fault", "vdso",
               "sighandler", "qsort", "bsearch", "pthread-once", "dlopen-call", "dlopen-ctor", "jit",
               "overflow", "thread", "deep"]
CPP_SCENARIOS = ["template", "lambda", "virtual", "anon", "cold", "terminate", "noexcept",
                 "pure-virtual"]
# Frames compared per case: the report keeps 256 by default (a stack
# overflow has thousands).
MAX_FRAMES = 256


def core_pattern_usable():
    """Core files land in the crashing process's working directory only when
    core_pattern is a plain relative name (not a pipe to a collector, not an
    absolute directory)."""
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
    except OSError:
        return False, "no /proc/sys/kernel/core_pattern"
    if pattern.startswith("|") or pattern.startswith("/") or not pattern:
        return False, f"core_pattern is {pattern!r}: cores do not land in a directory the test controls"
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        return False, "the hard RLIMIT_CORE is 0: no core files can be written"
    return True, pattern


def build(outdir):
    """Compiles every variant (and the dlopened library per variant), in parallel."""
    cmds = []
    for name, (lang, cc, flags) in VARIANTS.items():
        exe = os.path.join(outdir, name)
        if not shutil.which(cc):
            raise RuntimeError(f"{cc} is not installed (tools/install-deps.sh)")
        if lang == "c":
            cmds.append([cc, "-g", *flags, "-o", exe, os.path.join(PROGRAMS, "corpus.c"),
                         "-ldl", "-lpthread"])
            cmds.append([cc, "-g", *flags, "-shared", "-fPIC", "-o", exe + "-lib.so",
                         os.path.join(PROGRAMS, "corpus_lib.c")])
        else:
            cmds.append([cc, "-g", "-std=c++17", *flags, "-o", exe,
                         os.path.join(PROGRAMS, "corpus.cpp")])
    with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
        for cmd, p in zip(cmds, pool.map(lambda c: subprocess.run(c, capture_output=True, text=True),
                                         cmds)):
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr}")


class Case:
    def __init__(self, variant, scenario, outdir):
        self.variant, self.scenario = variant, scenario
        self.id = f"{variant}:{scenario}"
        self.exe = os.path.join(outdir, variant)
        self.dir = os.path.join(outdir, "run", variant, scenario)
        self.argv = [self.exe, scenario]
        self.env = {}
        if scenario.startswith("dlopen"):
            self.argv.append(self.exe + "-lib.so")
        if scenario == "dlopen-ctor":
            self.env["CORPUS_CTOR_CRASH"] = "1"
        self.report = self.symbolized = self.gdb = None
        self.core = None
        self.error = None


def cases(outdir, only=None):
    out = []
    for variant, (lang, _, _) in VARIANTS.items():
        for scenario in (C_SCENARIOS if lang == "c" else CPP_SCENARIOS):
            c = Case(variant, scenario, outdir)
            if only is None or re.search(only, c.id):
                out.append(c)
    return out


def _core_rlimit():
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


def run_case(case):
    os.makedirs(case.dir, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FAULTLINE_") and k != "LD_PRELOAD"}
    env.update(case.env, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=case.dir, FAULTLINE_STDERR="0",
               FAULTLINE_WATCHDOG="60")
    p = subprocess.run(case.argv, cwd=case.dir, env=env, capture_output=True, timeout=120,
                       preexec_fn=_core_rlimit)
    if p.returncode >= 0:
        case.error = f"exited {p.returncode}, no crash: {p.stderr.decode(errors='replace')[-500:]}"
        return
    reports = sorted(f for f in os.listdir(case.dir) if f.startswith("faultline-"))
    cores = sorted(f for f in os.listdir(case.dir) if f.startswith("core"))
    if not reports or not cores:
        case.error = f"reports {reports}, cores {cores}"
        return
    # A terminate report comes first; anything after it is not this crash.
    path = os.path.join(case.dir, reports[0])
    with open(path) as f:
        case.report = json.load(f)
    case.core = os.path.join(case.dir, cores[0])
    out = path + ".sym.json"
    p = subprocess.run([fltest.CLI, "symbolize", path, "-o", out], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        case.error = f"faultline symbolize failed: {p.stderr[-500:]}"
        return
    with open(out) as f:
        case.symbolized = json.load(f)


def gdb_batches(cases_, workdir, gdb="gdb", setup=()):
    """gdb reads the cores, JOBS batches in parallel (one gdb per core).
    setup: gdb commands run before the jobs (another architecture's sysroot)."""
    ready = [c for c in cases_ if c.core]
    batches = [ready[i::JOBS] for i in range(JOBS)]

    def one(i, batch):
        jobs = os.path.join(workdir, f"gdb-jobs-{i}.json")
        out = os.path.join(workdir, f"gdb-out-{i}.json")
        with open(jobs, "w") as f:
            json.dump([{"id": c.id, "exe": c.exe, "core": c.core, "limit": MAX_FRAMES}
                       for c in batch], f)
        env = dict(os.environ, ORACLE_JOBS=jobs, ORACLE_OUT=out)
        env.pop("LD_PRELOAD", None)
        setup_args = [a for command in setup for a in ("-ex", command)]
        p = subprocess.run([gdb, "-batch", "-nx", *setup_args, "-x", os.path.join(HERE, "gdb_frames.py")],
                           env=env, capture_output=True, text=True, timeout=1200)
        results = {}
        if os.path.exists(out):
            with open(out) as f:
                for line in f:
                    rec = json.loads(line)
                    results[rec["id"]] = rec
        return results, p.stderr[-2000:]

    with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
        for results, err in pool.map(lambda a: one(*a), enumerate(batches)):
            for c in ready:
                if c.id in results:
                    c.gdb = results[c.id]
    for c in ready:
        if c.gdb is None:
            c.error = "gdb gave no result"
        os.unlink(c.core)  # cores are large; the frames are all we keep


# ---------------------------------------------------------------- names

_OPERATOR = re.compile(r"operator\s*(\(\)|\[\]|<=>|<<=|>>=|<<|>>|->\*|->|&&|\|\||\+\+|--|"
                       r"new\[\]|delete\[\]|new|delete|[-+*/%^&|~!=<>,]=?)")


def _strip_groups(s, open_c, close_c):
    out, depth = [], 0
    for ch in s:
        if ch == open_c:
            depth += 1
        elif ch == close_c and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _top_level_tokens(s):
    tokens, cur, depth = [], [], 0
    for ch in s:
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]" and depth > 0:
            depth -= 1
        if ch == " " and depth == 0:
            tokens.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    tokens.append("".join(cur))
    return [t for t in tokens if t]


def name_key(name):
    """A spelling-independent key of a function name: clone suffixes, parameter
    lists, return types, cv-qualifiers and white space removed, lambdas and
    anonymous namespaces spelt one way. gdb and the demangler spell the same
    function differently ("main(int, char**)::<lambda(Tensor&)>" and
    "main::{lambda(Tensor&)#1}"); the key keeps what identifies it: every
    scope, template arguments and the function's own name."""
    n = name.strip()
    n = re.sub(r"( \[clone \.[^\]]*\])+$", "", n)
    n = re.sub(r"(\.(cold|part\.\d+|isra\.\d+|constprop\.\d+|lto_priv\.\d+|\d+))+$", "", n)
    n = n.replace("(anonymous namespace)", "@anon")
    n = _OPERATOR.sub(lambda m: "operator@" + "".join(f"{ord(ch):x}" for ch in m.group(1)), n)
    n = _strip_groups(n, "(", ")")
    toks = _top_level_tokens(n)
    if len(toks) > 1:
        n = toks[-1] if toks[-1] not in ("const", "volatile", "&", "&&") else toks[-2]
    n = re.sub(r"\{lambda#\d+\}|<lambda>", "@lambda", n)
    n = re.sub(r"\{unnamed type#\d+\}|<unnamed[^>]*>", "@unnamed", n)
    n = re.sub(r"\b(const|volatile)\b", "", n)
    return re.sub(r"\s+", "", n)


def names_agree(gdb_name, ours):
    """True when `ours` names the function gdb names: the same key, or gdb's
    key is a scope-suffix of ours (gdb prints some scopes short, a lambda's
    call operator as plain "operator()")."""
    if not ours or not gdb_name:
        return False
    a, b = name_key(gdb_name), name_key(ours)
    if a == b or b.endswith("::" + a):
        return True
    # The vDSO exports each function twice (clock_gettime, __vdso_clock_gettime).
    return a.removeprefix("__vdso_") == b.removeprefix("__vdso_")


def demangle(names):
    names = sorted({n for n in names if n and n.startswith("_Z")})
    if not names:
        return {}
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True,
                       check=True)
    return dict(zip(names, p.stdout.splitlines()))


class Aliases:
    """Names of one address in a module's symbol tables (the module's own and
    its separate debug file's): glibc gives one function several names
    (raise, gsignal, __GI_raise), and gdb prints the DWARF linkage name."""

    def __init__(self):
        self.tables = {}

    def table(self, path):
        if path not in self.tables:
            by_name = {}
            files = [path]
            dbg = _debug_file(path)
            if dbg:
                files.append(dbg)
            for f in files:
                p = subprocess.run(["nm", "--defined-only", f], capture_output=True, text=True)
                dp = subprocess.run(["nm", "-D", "--defined-only", f], capture_output=True, text=True)
                for line in (p.stdout + dp.stdout).splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[1] in "tTwWi":
                        by_name.setdefault(parts[2].split("@")[0], int(parts[0], 16))
            self.tables[path] = by_name
        return self.tables[path]

    def same(self, module, a, b):
        if not module or not os.path.exists(module):
            return False
        t = self.table(module)
        return a in t and b in t and t[a] == t[b]


def _debug_file(path):
    p = subprocess.run(["readelf", "-n", path], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if "Build ID:" in line:
            bid = line.split("Build ID:")[1].strip()
            f = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
            return f if os.path.exists(f) else None
    return None


# ---------------------------------------------------------------- comparison

def physical_frames(gdb_frames):
    """gdb's frames grouped by the real frame they belong to: the inlined
    frames before a frame share its pc. Each group: {pc, names (innermost
    first, the real function last), kind, synthetic}. gdb's tail-call frames
    (made from DWARF call-site records, absent from the stack) are groups
    marked synthetic."""
    groups, pending = [], []
    for f in gdb_frames:
        if f["type"] == "inline":
            pending.append(f)
            continue
        groups.append({"pc": f["pc"], "names": [p["name"] for p in pending] + [f["name"]],
                       "kind": f["type"], "solib": f.get("solib"),
                       "synthetic": f["type"] == "tailcall"})
        pending = []
    if pending:
        groups.append({"pc": pending[-1]["pc"], "names": [p["name"] for p in pending],
                       "kind": "inline", "solib": None, "synthetic": False})
    return groups


class Result:
    def __init__(self):
        self.raw_named = self.raw_agree = 0
        self.sym_named = self.sym_agree = 0
        self.aliases = 0
        self.gaps = []       # (case, gdb frame index, name): frames gdb shows that the report skips
        self.extra = []      # (case, report frame index, symbol): frames the report has and gdb not
        self.synthetic = []  # (case, name): gdb's tail-call frames, not on the stack
        self.tail_agree = 0  # gdb's tail-call frames the symbolized report has, marked
        self.tail_misses = []  # gdb's tail-call frames the symbolized report lacks or misnames
        self.tail_extra = []  # the symbolized report's tail-call frames gdb does not show
        self.raw_misses = []
        self.sym_misses = []
        self.inconsistent = []  # the raw symbol and the symbolized function differ
        self.real_frames = 0
        self.errors = []
        self.cases = 0

    def share(self, which):
        named, agree = ((self.raw_named, self.raw_agree) if which == "raw"
                        else (self.sym_named, self.sym_agree))
        return agree / named if named else 0.0

    def summary(self):
        lines = [f"cases: {self.cases}",
                 f"raw report: {self.raw_agree}/{self.raw_named} gdb-named real frames agree "
                 f"({100 * self.share('raw'):.1f}%)",
                 f"symbolized: {self.sym_agree}/{self.sym_named} gdb-named frames (inlined "
                 f"included) agree ({100 * self.share('sym'):.1f}%)",
                 f"names agreeing only as aliases of one address: {self.aliases}",
                 f"gaps (frames gdb shows, the report skips): {len(self.gaps)}",
                 f"extra frames (the report has, gdb not): {len(self.extra)}",
                 f"gdb tail-call frames (not on the stack): {len(self.synthetic)}, "
                 f"{self.tail_agree} in the symbolized report",
                 f"tail-call frames gdb does not show: {len(self.tail_extra)}",
                 f"real frames whose raw and symbolized names differ: {len(self.inconsistent)} "
                 f"of {self.real_frames}"]
        for title, items in (("errors", self.errors), ("gaps", self.gaps),
                             ("extra", self.extra), ("raw misses", self.raw_misses),
                             ("symbolized misses", self.sym_misses),
                             ("raw and symbolized names differ", self.inconsistent),
                             ("tail-call frames", self.synthetic),
                             ("tail-call frames missed", self.tail_misses),
                             ("tail-call frames gdb does not show", self.tail_extra)):
            if items:
                lines.append(f"-- {title}:")
                lines += [f"   {i}" for i in items]
        return "\n".join(lines)


def compare_case(case, res, aliases):
    res.cases += 1
    if case.error:
        res.errors.append(f"{case.id}: {case.error}")
        return
    if case.gdb.get("error"):
        res.errors.append(f"{case.id}: gdb: {case.gdb['error']}")
    groups = physical_frames(case.gdb["frames"])
    raw_thread = fltest.crashed_thread(case.report)
    raw = [f for f in raw_thread["frames"] if f["kind"] == "native"]
    # Without a symbolized report (case.symbolized None) the raw one alone is compared.
    sym = None
    if case.symbolized is not None:
        sym = [f for f in fltest.crashed_thread(case.symbolized)["frames"] if f["kind"] == "native"]
    names = demangle([f.get("symbol") for f in raw])
    truncated = len(case.gdb["frames"]) >= MAX_FRAMES or len(raw) >= MAX_FRAMES
    j = 0
    # gdb's tail-call frames by the report frame they follow (the callee).
    expected_tails, last_found, pending_tails = {}, None, []
    for gi, g in enumerate(groups):
        if g["synthetic"]:
            res.synthetic.append(f"{case.id} #{gi} {g['names'][-1]}")
            pending_tails.append(g)
            continue
        found = None
        for k in range(j, min(j + 4, len(raw))):
            if int(raw[k]["pc"], 16) == g["pc"]:
                found = k
                break
        if found is None:
            if not (truncated and j >= len(raw)):
                res.gaps.append(f"{case.id} gdb #{gi} {g['pc']:#x} {g['names'][-1]}")
            continue
        for k in range(j, found):
            res.extra.append(f"{case.id} report #{k} {raw[k]['pc']} {raw[k].get('symbol')}")
        if pending_tails and last_found is not None:
            expected_tails[last_found] = pending_tails
        pending_tails, last_found = [], found
        j = found + 1
        rf = raw[found]
        module = rf.get("module")
        outer = g["names"][-1]
        # The raw report names real frames only: its symbol against gdb's
        # name of the real function.
        if outer:
            res.raw_named += 1
            mine = names.get(rf.get("symbol"), rf.get("symbol"))
            if names_agree(outer, mine):
                res.raw_agree += 1
            elif mine and aliases.same(module, outer, rf.get("symbol")):
                res.raw_agree += 1
                res.aliases += 1
            else:
                res.raw_misses.append(f"{case.id} #{gi}: gdb {outer!r}, report {mine!r}")
        if sym is None:
            continue
        sf = sym[found]
        # One function, one name: the raw report and the symbolized one agree.
        raw_name = names.get(rf.get("symbol"), rf.get("symbol"))
        if raw_name and sf.get("function"):
            res.real_frames += 1
            if name_key(raw_name) != name_key(sf["function"]):
                res.inconsistent.append(f"{case.id} #{gi}: raw {raw_name!r}, symbolized "
                                        f"{sf['function']!r}")
        # After symbolize: the inline chain and the real function.
        chain = [i.get("function") for i in sf.get("inlined", [])] + [sf.get("function")]
        if len(chain) != len(g["names"]) and any(g["names"]):
            res.sym_misses.append(f"{case.id} #{gi}: gdb chain {g['names']}, symbolized {chain}")
        for n_i, gname in enumerate(g["names"]):
            if not gname:
                continue
            res.sym_named += 1
            # Align from the real function outwards-in: the last of each is the real one.
            k = len(chain) - len(g["names"]) + n_i
            mine = chain[k] if 0 <= k < len(chain) else None
            if names_agree(gname, mine):
                res.sym_agree += 1
            elif mine and n_i == len(g["names"]) - 1 and aliases.same(module, gname, mine):
                res.sym_agree += 1
                res.aliases += 1
            elif len(chain) == len(g["names"]):
                res.sym_misses.append(f"{case.id} #{gi}.{n_i}: gdb {gname!r}, symbolized {mine!r}")
    if sym is not None:
        compare_tail_calls(case, sym, expected_tails, res, aliases)


def compare_tail_calls(case, sym, expected, res, aliases):
    """Tail-call frames: every one gdb shows after a real frame is in that
    frame's `tail_calls` (innermost first, marked), named as gdb names it
    (gdb names the innermost function at the site: an inlined one, if any);
    and no frame has tail calls where gdb shows none."""
    for k, f in enumerate(sym):
        mine = f.get("tail_calls", [])
        want = expected.get(k, [])
        for t in mine:
            if t.get("tail_call") is not True:
                res.tail_misses.append(f"{case.id} report #{k}: tail call not marked: {t}")
        for n_i, g in enumerate(want):
            gname = g["names"][-1]
            t = mine[n_i] if n_i < len(mine) else None
            ours = None
            if t:
                ours = (t.get("inlined") or [t])[0].get("function")
            if ours and (names_agree(gname, ours) or aliases.same(f.get("module"), gname, ours)
                         or aliases.same(f.get("module"), gname, t.get("function"))):
                res.tail_agree += 1
            else:
                res.tail_misses.append(f"{case.id} report #{k}: gdb tail call {gname!r}, "
                                       f"symbolized {ours!r}")
        for t in mine[len(want):]:
            res.tail_extra.append(f"{case.id} report #{k}: {t.get('function')!r}")


def run_and_compare(cases_, workdir):
    """Runs every case, has gdb read the cores and compares: the Result."""
    for c in cases_:
        run_case(c)
    gdb_batches(cases_, workdir)
    res = Result()
    aliases = Aliases()
    for c in cases_:
        compare_case(c, res, aliases)
    return res


def corpus_addresses(cases_):
    """{module: {address}} of every native frame of the crashing threads, as
    `faultline symbolize` looks them up (a return address minus one; the
    first frame and signal frames exact)."""
    out = {}
    for c in cases_:
        if not c.report:
            continue
        frames = [f for f in fltest.crashed_thread(c.report)["frames"] if f["kind"] == "native"]
        for i, f in enumerate(frames):
            if not f.get("module") or "module_offset" not in f or not os.path.exists(f["module"]):
                continue
            offset = int(f["module_offset"], 16)
            exact = i == 0 or f.get("signal_frame")
            out.setdefault(f["module"], set()).add(offset if exact else offset - 1)
    return out


def llvm_compare(cases_):
    """The corpus's frames symbolized by faultline and by llvm-symbolizer-14:
    function, file, line, column and inline chain. Returns (compared,
    disagreements)."""
    compared, disagreements = 0, []
    for module, addresses in sorted(corpus_addresses(cases_).items()):
        addresses = sorted(addresses)
        names = symtools.symbol_names(_debug_file(module) or module)
        bad, _ = symtools.compare_with_llvm(module, addresses, names)
        compared += len(addresses)
        disagreements += [f"{module} {d}" for d in bad]
    return compared, disagreements


def run_all(only=None, keep=None):
    workdir = keep or tempfile.mkdtemp(prefix="faultline-oracle-")
    try:
        build(workdir)
        all_cases = cases(workdir, only)
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            list(pool.map(run_case, all_cases))
        gdb_batches(all_cases, workdir)
        res = Result()
        aliases = Aliases()
        for c in all_cases:
            compare_case(c, res, aliases)
        return res, all_cases
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    ok, why = core_pattern_usable()
    if not ok:
        sys.exit(why)
    result, _ = run_all(sys.argv[1] if len(sys.argv) > 1 else None)
    print(result.summary())
