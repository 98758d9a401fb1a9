"""faulthandler's traceback text, for dump_traceback() called through
faultline: written here, from the caller's frame, so that no frame of
faultline's own is on it. The rules are faulthandler's: strings as ASCII
(other characters as \\xNN, \\uNNNN or \\UNNNNNNNN), at most 500 characters
then "...", at most 100 frames then "  ...", at most 100 threads then
"...", the calling thread marked "Current thread", from 3.14 each
thread's kernel name in brackets."""
import sys

MAX_STRING_LENGTH = 500
MAX_FRAME_DEPTH = 100
MAX_NTHREADS = 100


def ascii_text(text):
    """A string as faulthandler writes it."""
    if not isinstance(text, str):
        return "???"
    cut = text[:MAX_STRING_LENGTH]
    out = []
    for ch in cut:
        o = ord(ch)
        if 32 <= o <= 126:
            out.append(ch)
        elif o <= 0xff:
            out.append("\\x%02x" % o)
        elif o <= 0xffff:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    if len(text) > MAX_STRING_LENGTH:
        out.append("...")
    return "".join(out)


def _frame_line(frame):
    code = frame.f_code
    filename = code.co_filename
    where = '"%s"' % ascii_text(filename) if isinstance(filename, str) else "???"
    lineno = frame.f_lineno
    line = str(lineno) if lineno is not None and lineno >= 0 else "???"
    return "  File %s, line %s in %s\n" % (where, line, ascii_text(code.co_name))


def _stack(frame, out):
    if frame is None:
        out.append("  <no Python frame>\n")
        return
    depth = 0
    while frame is not None:
        if depth >= MAX_FRAME_DEPTH:
            out.append("  ...\n")
            break
        out.append(_frame_line(frame))
        frame = frame.f_back
        depth += 1


def _thread_names():
    """3.14 prints each thread's kernel name: ident -> name."""
    if sys.version_info < (3, 14):
        return {}
    import threading
    names = {}
    for t in threading.enumerate():
        native = getattr(t, "native_id", None)
        if t.ident is None or native is None:
            continue
        try:
            with open("/proc/self/task/%d/comm" % native, "rb") as f:
                # Written as its bytes are (kept through surrogateescape).
                name = f.read().rstrip(b"\n").decode("ascii", "surrogateescape")
        except OSError:
            continue
        if name:
            names[t.ident] = name
    return names


def _thread_header(ident, current, names):
    name = " [%s]" % names[ident] if ident in names else ""
    return "%s 0x%016x%s (most recent call first):\n" % (
        "Current thread" if current else "Thread", ident, name)


def traceback(frame, all_threads):
    """faulthandler.dump_traceback()'s text as bytes, the calling thread's
    stack starting at frame."""
    out = []
    if not all_threads:
        out.append("Stack (most recent call first):\n")
        _stack(frame, out)
        return "".join(out).encode("ascii")
    import threading
    me = threading.get_ident()
    frames = sys._current_frames()
    frames[me] = frame
    names = _thread_names()
    for n, ident in enumerate(frames):
        if n:
            out.append("\n")
        if n >= MAX_NTHREADS:
            out.append("...\n")
            break
        out.append(_thread_header(ident, ident == me, names))
        _stack(frames[ident], out)
    return "".join(out).encode("ascii", "surrogateescape")
