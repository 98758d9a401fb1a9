"""The aarch64 hold-out measure: programs nobody wrote for faultline (Debian
bookworm's lua5.4, bzip2 and tinyxml2, fetched by tools/holdout-sources),
cross-built at -O2 without frame pointers, with and without pointer
authentication, interrupted by SIGSEGV or SIGABRT sent at varied moments of
a deep computation under the preload. Each report's crashing-thread frames
are compared, pc and name, with gdb-multiarch's reading of the core qemu
writes for the same run (test/oracle/oracle.py's comparison).

qemu runs with QEMU_SINGLESTEP=1: one instruction per translation block, so
a signal from outside lands at any instruction (prologues and epilogues
included), not only at the start of a block.

Two things qemu's cores lack are added before gdb reads them, the way a
Linux core has them: the PAC-mask note (NT_ARM_PAC_MASK, without which gdb
stops at the first signed return address) and the executable's own pages
(without its program headers gdb cannot relocate a PIE executable). The
mask is the one Linux reports for 48-bit user addresses (bits 48-54).

Used by test_aarch64_holdout.py; by hand, to see every miss:
    FAULTLINE_SOURCE=. FAULTLINE_BUILD=build python3 test/aarch64/holdout.py
"""
import concurrent.futures
import fcntl
import glob
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Run directly, this script finds its helpers itself (conftest.py does it
# for pytest): test/lib and the x86-64 frame oracle.
for _d in (os.path.join(HERE, "..", "lib"), os.path.join(HERE, "..", "oracle")):
    if _d not in sys.path:
        sys.path.insert(0, _d)
import arm64  # noqa: E402
import fltest  # noqa: E402
import oracle  # noqa: E402

CACHE = os.environ.get("FAULTLINE_HOLDOUT_CACHE", "/var/cache/faultline/holdout")
COMMON = ["-g", "-O2", "-fomit-frame-pointer"]
VARIANTS = {"nopac": [], "pac": ["-mbranch-protection=standard"]}
# What Linux reports in NT_ARM_PAC_MASK for 48-bit user addresses with the
# top byte ignored: the code sits in bits 48-54.
PAC_MASK = 0x007F000000000000
# FAULTLINE_HOLDOUT_PAC_NOTE=0 leaves the note out, to see how far gdb gets
# without it (by hand; the test always adds it).
PAC_NOTE = os.environ.get("FAULTLINE_HOLDOUT_PAC_NOTE", "1") != "0"
JOBS = 2


class Unavailable(Exception):
    """The corpus cannot be had here (the reason is the message)."""


def sources():
    """The folder of unpacked source packages; fetched on first use."""
    tool = os.path.join(arm64.SOURCE, "tools", "holdout-sources")
    p = subprocess.run([tool, "fetch"], capture_output=True, text=True)
    if p.returncode != 0:
        raise Unavailable(p.stderr.strip() or f"{tool} failed")
    return p.stdout.strip()


# ---------------------------------------------------------------- programs

def _lua(src, cxx):
    s = os.path.join(src, "lua5.4", "src")
    files = sorted(f for f in glob.glob(os.path.join(s, "*.c")) if not f.endswith("luac.c"))
    # Debian's build writes this header (luaconf.h includes it).
    header = ('lua5.4-deb-multiarch.h', f'#define DEB_HOST_MULTIARCH "{arm64.TRIPLE}"\n')
    lang = ["-x", "c++"] if cxx else []
    return ["-DLUA_USE_POSIX", "-I.", *lang, *files, "-x", "none", "-lm"], [header]


def _bzip2(src):
    s = os.path.join(src, "bzip2")
    names = ["bzip2", "blocksort", "huffman", "crctable", "randtable", "compress", "decompress",
             "bzlib"]
    return ["-D_FILE_OFFSET_BITS=64", *[os.path.join(s, n + ".c") for n in names]], []


def _xmltest(src):
    s = os.path.join(src, "tinyxml2")
    return [os.path.join(s, "tinyxml2.cpp"), os.path.join(s, "xmltest.cpp")], []


# name: (compiler, recipe). lua-c++ is Lua built as C++ (Debian ships that
# build too, liblua5.4-c++): its errors are C++ exceptions, its names mangled.
PROGRAMS = {
    "lua": (arm64.CC, lambda src: _lua(src, False)),
    "lua-c++": (arm64.TRIPLE + "-g++", lambda src: _lua(src, True)),
    "bzip2": (arm64.CC, _bzip2),
    "xmltest": (arm64.TRIPLE + "-g++", _xmltest),
}


def _compiler_id(cc):
    return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout


def build(src, name, variant):
    """The program built for variant, cached under CACHE/build by a hash of
    everything that makes it (compiler, flags, sources' versions)."""
    cc, recipe = PROGRAMS[name]
    args, headers = recipe(src)
    flags = COMMON + VARIANTS[variant]
    dscs = "".join(open(f).read()
                   for f in sorted(glob.glob(os.path.join(src, "*", ".faultline-dsc"))))
    key = hashlib.sha256(json.dumps([cc, _compiler_id(cc), flags, args, headers, dscs])
                         .encode()).hexdigest()[:16]
    out_dir = os.path.join(CACHE, "build", f"{name}-{variant}-{key}")
    exe = os.path.join(out_dir, name)
    if os.path.exists(exe):
        return exe
    os.makedirs(os.path.join(CACHE, "build"), exist_ok=True)
    with open(os.path.join(CACHE, "build", ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(exe):
            return exe
        work = tempfile.mkdtemp(dir=os.path.join(CACHE, "build"), prefix=".partial-")
        for hname, text in headers:
            with open(os.path.join(work, hname), "w") as f:
                f.write(text)
        p = subprocess.run(["nice", cc, *flags, *args, "-o", name], cwd=work, capture_output=True,
                           text=True)
        if p.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            raise RuntimeError(f"building {name} ({variant}) failed:\n{p.stderr[-3000:]}")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.rename(work, out_dir)
    return exe


# ---------------------------------------------------------------- inputs

def make_inputs(src, workdir):
    """The programs' inputs, the same each run: text for bzip2 to compress
    (its own word lists, shuffled) and a nested XML document for tinyxml2
    to parse (60 levels, under its depth limit of 100)."""
    r = random.Random(35)
    words = open(os.path.join(src, "bzip2", "words3")).read().split()
    text = os.path.join(workdir, "text")
    with open(text, "w") as f:
        for _ in range(60000):
            f.write(" ".join(r.choice(words) for _ in range(12)) + f" {r.randrange(10 ** 6)}\n")
    xml = os.path.join(workdir, "deep.xml")
    with open(xml, "w") as f:
        f.write('<?xml version="1.0"?><root>')
        for i in range(2000):
            for d in range(60):
                f.write(f'<n{d % 10} id="{i}.{d}" k="v&amp;{d}">')
            f.write("<leaf a='1'>text &lt; more</leaf>")
            for d in reversed(range(60)):
                f.write(f"</n{d % 10}>")
        f.write("</root>")
    return {"lua": [os.path.join(HERE, "holdout", "deep.lua"), "20"],
            "lua-c++": [os.path.join(HERE, "holdout", "deep.lua"), "20"],
            "bzip2": ["-9", "-c", text],
            "xmltest": [xml]}


# ---------------------------------------------------------------- cases

# Moments (CPU seconds the program has used under qemu: the same point of
# its work on a busy machine as on an idle one) and signals. The first is
# past faultline's start-up (a signal before faultline is installed leaves
# no report, rightly); the others fall in the computation.
MOMENTS = [(1.0, signal.SIGSEGV), (2.0, signal.SIGABRT), (3.0, signal.SIGSEGV)]
# bzip2 catches SIGSEGV and SIGBUS itself (it says so and exits 3, with
# faultline as without): it gets signals it leaves alone.
SIGNALS = {"bzip2": {signal.SIGSEGV: signal.SIGILL}}


class Case:
    def __init__(self, name, variant, exe, args, moment, sig, workdir):
        self.name, self.variant, self.exe = name, variant, exe
        self.id = f"{name}-{variant}@{moment}s:{signal.Signals(sig).name}"
        self.argv = [exe, *args]
        self.moment, self.sig = moment, sig
        self.dir = os.path.join(workdir, "run", f"{name}-{variant}-{moment}")
        self.report = self.symbolized = self.gdb = self.core = self.error = None


def cases(src, workdir, only=None):
    inputs = make_inputs(src, workdir)
    out = []
    for name in PROGRAMS:
        for variant in VARIANTS:
            exe = build(src, name, variant)
            for moment, sig in MOMENTS:
                sig = SIGNALS.get(name, {}).get(sig, sig)
                c = Case(name, variant, exe, inputs[name], moment, sig, workdir)
                if only is None or only in c.id:
                    out.append(c)
    return out


def _cores_on():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _wait_for_cpu(p, seconds):
    """Waits until process p has used `seconds` of CPU time; False if it
    ended first."""
    tick = os.sysconf("SC_CLK_TCK")
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            break
        if (int(fields[11]) + int(fields[12])) / tick >= seconds:
            return True
        time.sleep(0.02)
    return p.poll() is None


def run_case(case, lib):
    os.makedirs(case.dir)
    # qemu writes the guest's core (qemu_*.core) and then dies of the
    # signal itself: a folder named "core" keeps the kernel from writing
    # qemu's own, which is far larger and of no use here.
    os.mkdir(os.path.join(case.dir, "core"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FAULTLINE_") and k != "LD_PRELOAD"}
    env.update(QEMU_LD_PREFIX=arm64.SYSROOT, QEMU_SINGLESTEP="1", LD_PRELOAD=lib,
               FAULTLINE_DIR=case.dir, FAULTLINE_STDERR="0")
    p = subprocess.Popen([arm64.QEMU, *case.argv], cwd=case.dir, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=_cores_on)
    if not _wait_for_cpu(p, case.moment):
        case.error = f"ended (status {p.returncode}) before the signal"
        return
    p.send_signal(case.sig)
    _, err = p.communicate(timeout=300)
    if p.returncode != -case.sig:
        case.error = f"status {p.returncode}, not the signal: {err.decode(errors='replace')[-500:]}"
        return
    reports = glob.glob(os.path.join(case.dir, "faultline-*.json"))
    cores = glob.glob(os.path.join(case.dir, "qemu_*.core"))
    if len(reports) != 1 or len(cores) != 1:
        case.error = f"reports {reports}, cores {cores}"
        return
    with open(reports[0]) as f:
        case.report = json.load(f)
    case.core = cores[0]
    complete_core(case.core, case.exe)


# ---------------------------------------------------------------- the core

NT_PRSTATUS, NT_AUXV, NT_ARM_PAC_MASK = 1, 6, 0x406
PT_LOAD, PT_NOTE = 1, 4
AT_PHDR = 3
PHDR = struct.Struct("<IIQQQQQQ")  # type flags offset vaddr paddr filesz memsz align


def _notes(data):
    """(type, the whole note, its descriptor) of each note in data."""
    i = 0
    while i + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from("<III", data, i)
        desc = i + 12 + ((namesz + 3) & ~3)
        end = desc + ((descsz + 3) & ~3)
        yield kind, data[i:end], data[desc:desc + descsz]
        i = end


def _note(name, kind, desc):
    def pad(b):
        return b + b"\0" * (-len(b) % 4)
    n = name.encode() + b"\0"
    return struct.pack("<III", len(n), len(desc), kind) + pad(n) + pad(desc)


def _phdrs(blob):
    off, = struct.unpack_from("<Q", blob, 0x20)
    size, count = struct.unpack_from("<HH", blob, 0x36)
    return off, size, [list(PHDR.unpack_from(blob, off + k * size)) for k in range(count)]


def complete_core(core, exe):
    """Adds to qemu's core what a Linux core has and gdb needs: after each
    thread's NT_PRSTATUS a PAC-mask note, and the executable's read-only
    pages qemu leaves out (its program headers among them: gdb finds a PIE
    executable's load address by them). Both are appended to the file and
    the existing program headers pointed at them."""
    with open(core, "r+b") as f:
        blob = f.read()
        phoff, phsize, phdrs = _phdrs(blob)
        tail = bytearray()

        def append(data):
            tail.extend(b"\0" * (-(len(blob) + len(tail)) % 16))
            at = len(blob) + len(tail)
            tail.extend(data)
            return at

        auxv = b""
        for ph in phdrs:
            if ph[0] != PT_NOTE:
                continue
            notes = bytearray()
            for kind, whole, desc in _notes(blob[ph[2]:ph[2] + ph[5]]):
                notes += whole
                if kind == NT_AUXV:
                    auxv = desc
                if kind == NT_PRSTATUS and PAC_NOTE:
                    notes += _note("LINUX", NT_ARM_PAC_MASK, struct.pack("<QQ", PAC_MASK, PAC_MASK))
            ph[2], ph[5] = append(bytes(notes)), len(notes)
        with open(exe, "rb") as e:
            image = e.read()
        e_phoff, _, eph = _phdrs(image)
        loads = [p for p in eph if p[0] == PT_LOAD]
        # The program headers sit in the first segment, at their file offset.
        base = dict(struct.iter_unpack("<QQ", auxv))[AT_PHDR] - e_phoff - loads[0][3]
        for p in loads:
            start = base + p[3] - p[3] % 4096
            for ph in phdrs:
                if ph[0] == PT_LOAD and ph[3] == start and ph[5] == 0 and not ph[1] & 2:
                    data = image[p[2] - p[2] % 4096:][:ph[6]]
                    ph[2], ph[5] = append(data), len(data)
        f.seek(len(blob))
        f.write(tail)
        for k, ph in enumerate(phdrs):
            f.seek(phoff + k * phsize)
            f.write(PHDR.pack(*ph))


# ---------------------------------------------------------------- measure

class GuestAliases(oracle.Aliases):
    """The oracle's aliases, for modules named by their paths in the guest:
    the loader's prefix first, as qemu opens them."""

    def same(self, module, a, b):
        if module:
            inside = os.path.join(arm64.SYSROOT, module.lstrip("/"))
            module = inside if os.path.exists(inside) else module
        return super().same(module, a, b)


def run_all(lib, only=None, keep=None):
    """Builds, crashes and compares; returns ({variant: oracle.Result}, cases)."""
    src = sources()
    workdir = keep or tempfile.mkdtemp(prefix="faultline-holdout-")
    try:
        all_cases = cases(src, workdir, only)
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            list(pool.map(lambda c: run_case(c, lib), all_cases))
        # Past main: the report goes on to _start, and so should gdb.
        oracle.gdb_batches(all_cases, workdir, gdb="gdb-multiarch",
                           setup=["set sysroot " + arm64.SYSROOT, "set backtrace past-main on"])
        results = {v: oracle.Result() for v in VARIANTS}
        aliases = GuestAliases()
        for c in all_cases:
            oracle.compare_case(c, results[c.variant], aliases)
        return results, all_cases
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def share(result):
    """(share, agreeing, counted): the report's frames that agree with gdb,
    pc and name, over every frame gdb names (whether the report has its pc
    or skips it) and every frame the report has and gdb not. The oracle's
    own raw share counts only the frames whose pcs match."""
    named_gaps = sum(1 for g in result.gaps if g.split(" ", 4)[4] != "None")
    counted = result.raw_named + named_gaps + len(result.extra)
    return (result.raw_agree / counted if counted else 0.0), result.raw_agree, counted


def reach(cases_, variant):
    """(cases where gdb unwound as far as the report, cases compared): gdb
    stops early where it cannot follow, and frames past that point are not
    measured."""
    done = [c for c in cases_ if c.variant == variant and c.gdb and c.report]
    full = 0
    for c in done:
        ours = [f for f in fltest.crashed_thread(c.report)["frames"] if f["kind"] == "native"]
        theirs = [f for f in c.gdb["frames"] if f["type"] != "inline"]
        full += bool(ours and theirs) and theirs[-1]["pc"] == int(ours[-1]["pc"], 16)
    return full, len(done)


if __name__ == "__main__":
    res, done = run_all(arm64.library(), sys.argv[1] if len(sys.argv) > 1 else None)
    for v, r in res.items():
        for c in done:
            if c.variant == v and c.report:
                f = fltest.crashed_thread(c.report)["frames"][0]
                print(f"{c.id}: #0 {f.get('symbol')}+{f.get('symbol_offset')}")
        full, count = reach(done, v)
        part, agree, counted = share(r)
        print(f"== {v}\n{r.summary()}\ngdb as deep as the report: {full} of {count} cases\n"
              f"frames agreeing: {agree} of {counted} ({100 * part:.1f}%)")
