"""lldb-14 as the oracle of faultline's minidumps (x86-64's and aarch64's):
it opens a .dmp as a core file with the program as its main module, and
read() parses what it prints: the threads in lldb's order with their
backtraces, the modules with their UUIDs, and the registers of the thread
lldb stops on (the crashing one)."""
import re
import shutil
import subprocess
from dataclasses import dataclass

LLDB = shutil.which("lldb-14")

FRAME_RE = re.compile(r"^\s*\*?\s*frame #(\d+): (0x[0-9a-f]+) (.*)$")
IMAGE_RE = re.compile(r"^\[\s*\d+\] ([0-9A-F-]+) (0x[0-9a-f]+) ")
THREAD_RE = re.compile(r"^\s*\*?\s*thread #(\d+): tid = (\d+)")
REGISTER_RE = re.compile(r"^\s*(\w+) = (?:(0x[0-9a-f]+)|\{((?:0x[0-9a-f]{2} ?)+)\})")
COMMANDS = ["thread list", "thread backtrace all", "image list", "register read --all"]


@dataclass
class Dump:
    threads: list  # [(tid, [(pc, text), ...])], lldb's order: the stopped thread first
    modules: dict  # {base: uuid as lower-case hex}
    registers: dict  # {name: int} (vectors: bytes), the stopped thread's
    out: str  # what lldb printed, for assertion messages


def is_subsequence(small, big):
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def read(dump, exe, search_paths=()):
    """What lldb makes of dump; search_paths: folders where lldb looks for the
    modules the dump names (an aarch64 dump names the guest's /lib/...)."""
    settings = []
    for path in search_paths:
        settings += ["-O", "settings append target.exec-search-paths " + path]
    commands = [arg for c in COMMANDS + ["version"] for arg in ("-o", c)]
    p = subprocess.run([LLDB, "--batch", *settings, "-c", dump, exe, *commands],
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    out = p.stdout
    # "version" last: lldb has written everything before it.
    assert "(lldb) version" in out, out + p.stderr
    sections = {}
    for command, following in zip(COMMANDS, COMMANDS[1:] + ["version"]):
        sections[command] = out.split("(lldb) " + command, 1)[1].split("(lldb) " + following)[0]
    tids = [int(m.group(2)) for m in map(THREAD_RE.match, sections["thread list"].splitlines()) if m]
    backtraces = []
    for line in sections["thread backtrace all"].splitlines():
        if re.match(r"^\s*\*?\s*thread #\d+", line):
            backtraces.append([])
        elif (m := FRAME_RE.match(line)) and backtraces:
            backtraces[-1].append((int(m.group(2), 16), m.group(3)))
    assert len(tids) == len(backtraces), out
    modules = {}
    for line in sections["image list"].splitlines():
        if m := IMAGE_RE.match(line):
            modules[int(m.group(2), 16)] = m.group(1).replace("-", "").lower()
    registers = {}
    for line in sections["register read --all"].splitlines():
        if m := REGISTER_RE.match(line):
            registers[m.group(1)] = (int(m.group(2), 16) if m.group(2)
                                     else bytes(int(b, 16) for b in m.group(3).split()))
    return Dump(list(zip(tids, backtraces)), modules, registers, out)


def function_names(frames):
    """The function names of lldb's frames that name one, in order."""
    return [re.sub(r"^\(anonymous namespace\)::", "", text.split("`", 1)[1]).split("(")[0].split(" ")[0]
            for _, text in frames if "`" in text]
