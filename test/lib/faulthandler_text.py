"""Parsing CPython faulthandler's dump, and writing a report's strings the way
faulthandler writes them, so the two can be compared frame by frame."""
import re

# faulthandler (Python/traceback.c): at most 100 frames per thread, strings
# cut at 500 characters with "..." appended, non-ASCII escaped.
MAX_FRAME_DEPTH = 100
MAX_STRING_LENGTH = 500

# 3.14 adds the thread's name: "Thread 0x... [name] (most recent call first):".
_HEADER = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)(?: \[.*\])? \(most recent call first\):$")
_FRAME = re.compile(r'^  File "(.*)", line (\d+|\?\?\?) in (.*)$')


def parse(text):
    """Returns [(is_current, [(file, line, function), ...], truncated)] in dump order."""
    threads = []
    cur = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            cur = [m.group(1) == "Current thread", [], False]
            threads.append(cur)
            continue
        if cur is None:
            continue
        m = _FRAME.match(line)
        if m:
            ln = -1 if m.group(2) == "???" else int(m.group(2))
            cur[1].append((m.group(1), ln, m.group(3)))
        elif line == "  ...":
            cur[2] = True
        elif line.strip() == "":
            cur = None
        elif not line.startswith("  "):
            cur = None
    return [tuple(t) for t in threads]


def escape(s):
    """A string as faulthandler's _Py_DumpASCII writes it."""
    out = []
    for ch in s[:MAX_STRING_LENGTH]:
        c = ord(ch)
        if 32 <= c < 127:
            out.append(ch)
        elif c <= 0xFF:
            out.append("\\x%02x" % c)
        elif c <= 0xFFFF:
            out.append("\\u%04x" % c)
        else:
            out.append("\\U%08x" % c)
    if len(s) > MAX_STRING_LENGTH:
        out.append("...")
    return "".join(out)


def as_faulthandler(frames):
    return [(escape(f), ln, escape(fn)) for f, ln, fn in frames][:MAX_FRAME_DEPTH]
