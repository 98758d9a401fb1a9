"""faultline show / markdown / sentry / explain on checked-in reports.

Golden files in test/cli/golden/<report>.<mode> hold the expected output;
FAULTLINE_UPDATE_GOLDEN=1 rewrites them (review the diff before committing).
"""

import json
import os
import re
import shutil
import subprocess

import pytest

from clitest import DATA, GOLDEN, UPDATE_GOLDEN, data_reports, run

MODES = {
    "show.txt": ["show", "--color=never"],
    "show-color.txt": ["show", "--color=always"],
    "faulthandler.txt": ["show", "--faulthandler"],
    "md": ["markdown"],
    "sentry.json": ["sentry"],
    "envelope.txt": ["sentry", "--envelope"],
    "explain.txt": ["explain"],
}


def render(report, mode):
    r = run(*MODES[mode], report, cwd=DATA)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout
    return r.stdout


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("report", data_reports())
def test_golden(report, mode):
    out = render(report, mode)
    golden = os.path.join(GOLDEN, os.path.splitext(report)[0] + "." + mode)
    if UPDATE_GOLDEN:
        with open(golden, "w") as f:
            f.write(out)
    if not os.path.exists(golden):
        pytest.skip("no golden file yet: run with FAULTLINE_UPDATE_GOLDEN=1 and review " + golden)
    with open(golden) as f:
        assert out == f.read(), "output differs from " + golden


# --- show: header, thread order, colors ------------------------------------------------


def test_show_header_and_threads_crashed_first():
    out = render("cli-native-abort.json", "show.txt")
    lines = out.splitlines()
    assert lines[0] == "SIGABRT (SI_TKILL: sent by tkill or tgkill)"
    assert "uncaught C++ exception" in out
    # The crashed thread (778) comes first although the report lists 777 first.
    assert out.index('Thread 778 "loader" (crashed)') < out.index('Thread 777')
    # Native frames as module!symbol+0x12, demangled; cut stacks said so.
    assert "libstdc++.so.6!std::terminate()+0x1a" in out
    assert "inference-server+0x2000" in out
    assert "34 more frames not captured" in out
    assert "Capture errors" in out


def test_show_python_frames_interleaved_with_origins():
    out = render("cli-python-segv.json", "show.txt")
    assert re.search(r"#4  python\s+File \"/work/job/données.py\", line 12, in Loader.load", out)
    assert re.search(r"#5  dynamo\s+File \".*eval_frame.py\", line 451, in _fn", out)
    assert re.search(r"#1  aten\s+libtorch_cpu.so!at::native::", out)
    assert re.search(r"^Fault address: +0x0$", out, re.M)
    assert "python3 train.py --config 'a b.yaml'" in out


def test_colors_only_when_asked_or_on_a_terminal():
    report = "cli-python-segv.json"
    assert "\x1b[" in run("show", "--color=always", report, cwd=DATA).stdout
    assert "\x1b[" not in run("show", "--color=never", report, cwd=DATA).stdout
    # auto: stdout is a pipe here, so no colors.
    assert "\x1b[" not in run("show", report, cwd=DATA).stdout
    # NO_COLOR turns auto off even on a terminal; `script` gives us one.
    if shutil.which("script"):
        from clitest import CLI
        cmd = f"{CLI} show --color=auto {report}"
        tty = subprocess.run(["script", "-qec", cmd, "/dev/null"], cwd=DATA, capture_output=True,
                             text=True, env={**os.environ, "TERM": "xterm"})
        assert "\x1b[" in tty.stdout
        no_color = subprocess.run(["script", "-qec", cmd, "/dev/null"], cwd=DATA,
                                  capture_output=True, text=True,
                                  env={**os.environ, "TERM": "xterm", "NO_COLOR": "1"})
        assert "\x1b[" not in no_color.stdout
    # --color=always wins over NO_COLOR.
    assert "\x1b[" in run("show", "--color=always", report, cwd=DATA, env={"NO_COLOR": "1"}).stdout


def test_partial_report_shows_unknowns():
    out = render("cli-partial.json", "show.txt")
    assert "Diagnosis:      unknown" in out
    assert "Executable:     unknown" in out
    assert 'File "a.py", line ???, in f' in out


# --- --faulthandler: CPython's own regexes (Lib/test/test_faulthandler.py) -------------


def cpython_check_error_regex(fatal_error, lineno, function, filename='<string>',
                              know_current_thread=True):
    # FaultHandlerTests.check_error of CPython 3.12, with the file name a parameter.
    header = 'Current thread 0x[0-9a-f]+' if know_current_thread else 'Thread 0x[0-9a-f]+'
    regex = [f'^{fatal_error}', '', fr'{header} \(most recent call first\):',
             fr'  File "{filename}", line {lineno} in {function}']
    return '(?m)' + '\n'.join(regex)


def test_faulthandler_layout_matches_cpython_regexes(tmp_path):
    # CPython's check_error runs one thread: so does this copy of the report.
    with open(os.path.join(DATA, "cli-python-segv.json")) as f:
        doc = json.load(f)
    doc["threads"] = [t for t in doc["threads"] if t["crashed"]]
    (tmp_path / "one.json").write_text(json.dumps(doc))
    out = run("show", "--faulthandler", str(tmp_path / "one.json")).stdout
    assert re.search(cpython_check_error_regex('Fatal Python error: Segmentation fault', 12, 'load',
                                               filename=r'/work/job/donn\\xe9es\.py'), out), out
    out = render("cli-python-segv.json", "faulthandler.txt")
    # Other threads before the current one (newest first), as in test_dump_traceback_threads.
    regex = r"""
        ^Fatal Python error: Segmentation fault

        Thread 0x[0-9a-f]+ \(most recent call first\):
          File "/work/job/prefetch.py", line 20 in run
          File ".*threading.py", line [0-9]+ in _bootstrap_inner
          File ".*threading.py", line [0-9]+ in _bootstrap

        Current thread 0x[0-9a-f]+ \(most recent call first\):
          File ".*", line 12 in load
        (?:  File ".*", line [0-9]+ in .*
        )*  File "/work/job/train.py", line 88 in <module>"""
    import textwrap
    assert re.fullmatch(textwrap.dedent(regex).strip() + "\n", out), out


def test_faulthandler_dump_has_no_fatal_header():
    out = render("cli-dump.json", "faulthandler.txt")
    assert out.startswith("Thread 0x")
    assert "Fatal Python error" not in out
    assert out.count("(most recent call first):") == 4


def test_faulthandler_no_python_frames():
    out = render("cli-native-abort.json", "faulthandler.txt")
    assert out == ("Fatal Python error: Aborted\n\nCurrent thread 0x000000000000030a "
                   "(most recent call first):\n  <no Python frame>\n")


# --- markdown: renders with cmark-gfm, bounded size -------------------------------------


def cmark(md):
    exe = shutil.which("cmark-gfm")
    if not exe:
        pytest.skip("cmark-gfm not installed")
    r = subprocess.run([exe, "--unsafe", "-e", "table", "-e", "autolink", "-e", "strikethrough"],
                       input=md, capture_output=True, text=True, check=True)
    return r.stdout


@pytest.mark.parametrize("report", data_reports())
def test_markdown_renders(report):
    md = render(report, "md")
    assert len(md.encode()) < 60000
    html = cmark(md)
    assert "<table>" in html and "<th>Field</th>" in html
    # Every table row kept its two cells (a stray '|' would add a third).
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        assert len(re.findall(r"<t[dh]", row)) == 2, row
    assert '<pre><code class="language-text">' in html
    assert html.count("<details>") == html.count("</details>")


def test_markdown_collapses_other_threads():
    html = cmark(render("cli-python-segv.json", "md"))
    assert "<summary>Other threads (2)</summary>" in html
    crashing = html.index("Crashing thread")
    details = html.index("<details>")
    assert crashing < details
    assert html.index("Loader.load") < details  # the crashing stack is outside the fold


def huge_report(tmp_path, threads=300, frames=200):
    with open(os.path.join(DATA, "cli-python-segv.json")) as f:
        doc = json.load(f)
    base = doc["threads"][1]
    doc["threads"] = doc["threads"][:1]
    for i in range(threads):
        t = json.loads(json.dumps(base))
        t["tid"] = 10000 + i
        t["name"] = f"worker|{i}`x`"
        t["frames"] = [dict(base["frames"][0], symbol="_ZN5torch8autograd6Engine11thread_mainERKSt10shared_ptrINS0_9GraphTaskEE" + str(j))
                       for j in range(frames)]
        t["frames_total"] = frames
        doc["threads"].append(t)
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_markdown_stays_under_60kb_and_says_what_was_cut(tmp_path):
    md = run("markdown", huge_report(tmp_path)).stdout
    assert len(md.encode()) < 60000
    assert re.search(r"Cut to stay under 60 KB: \d+ frames, \d+ threads", md)
    html = cmark(md)
    assert "Loader.load" in html  # the crashing thread survives the cut
    assert html.count("<details>") == html.count("</details>")


# --- sentry: the documented event shape --------------------------------------------------

HEX = re.compile(r"^0x[0-9a-f]+$")
DEBUG_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def sentry_debug_id(build_id):
    # Sentry (symbolic/debugid): first 16 bytes as a little-endian GUID.
    b = bytes.fromhex(build_id)[:16].ljust(16, b"\0")
    b = b[3::-1] + b[5:3:-1] + b[7:5:-1] + b[8:]
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def test_debug_id_matches_sentry_documentation_example():
    # From Sentry's NativeDebugImage docs: this code_id has this debug_id.
    assert sentry_debug_id("68220ae2c65d65c1b6aaa12fa6765a6ec2f5f434") == \
        "e20a2268-5dc6-c165-b6aa-a12fa6765a6e"
    event = json.loads(render("cli-python-segv.json", "sentry.json"))
    ids = {i["code_id"]: i["debug_id"] for i in event["debug_meta"]["images"]}
    assert ids["68220ae2c65d65c1b6aaa12fa6765a6ec2f5f434"] == "e20a2268-5dc6-c165-b6aa-a12fa6765a6e"


def check_frame(frame):
    assert frame["platform"] in ("native", "python")
    assert isinstance(frame["in_app"], bool)
    if frame["platform"] == "native":
        assert HEX.match(frame["instruction_addr"])
        if "symbol_addr" in frame:
            assert HEX.match(frame["symbol_addr"])
    else:
        assert isinstance(frame["filename"], str) and isinstance(frame["function"], str)
        assert isinstance(frame.get("lineno", 0), int)


@pytest.mark.parametrize("report", data_reports())
def test_sentry_event_shape(report):
    with open(os.path.join(DATA, report)) as f:
        doc = json.load(f)
    event = json.loads(render(report, "sentry.json"))
    assert re.fullmatch(r"[0-9a-f]{32}", event["event_id"])
    assert event["platform"] == "native"
    assert event["level"] in ("fatal", "error", "warning", "info", "debug")
    assert event.get("timestamp") == doc.get("timestamp")  # missing: Sentry uses receive time
    assert event["sdk"]["name"] == "faultline"
    threads = event["threads"]["values"]
    for t in threads:
        assert isinstance(t["id"], int) and isinstance(t["crashed"], bool)
        for frame in t.get("stacktrace", {}).get("frames", []):
            check_frame(frame)
    if doc.get("kind") != "dump":
        exc = event["exception"]["values"][0]
        mech = exc["mechanism"]
        assert mech["type"] == "signalhandler" and mech["handled"] is False
        for key in ("number", "name", "code", "code_name"):
            assert mech["meta"]["signal"].get(key) == doc["signal"].get(key)
        frames = exc["stacktrace"]["frames"]
        for frame in frames:
            check_frame(frame)
        crashed = [t for t in doc["threads"] if t.get("crashed")]
        if crashed:
            assert exc["thread_id"] == crashed[0]["tid"]
            innermost = crashed[0]["frames"][0]
            # Oldest first: the frame that faulted is last.
            if innermost.get("kind") == "native":
                assert frames[-1]["instruction_addr"] == innermost["pc"]
            assert len(frames) == len(crashed[0]["frames"])
            # The crashed thread's stack lives in the exception only.
            assert "stacktrace" not in [t for t in threads if t["id"] == crashed[0]["tid"]][0]
    for image in event["debug_meta"]["images"]:
        assert image["type"] == "elf"
        assert HEX.match(image["image_addr"])
        assert isinstance(image["image_size"], int)
        assert DEBUG_ID.match(image["debug_id"])
        assert image["debug_id"] == sentry_debug_id(image["code_id"])
    with_build_id = [m for m in doc.get("modules", []) if m.get("build_id")]
    assert len(event["debug_meta"]["images"]) == len(with_build_id)


@pytest.mark.parametrize("report", data_reports())
def test_sentry_envelope(report):
    out = render(report, "envelope.txt").encode()
    header, item, payload, rest = out.split(b"\n", 3)
    assert rest == b""
    header, item = json.loads(header), json.loads(item)
    assert item["type"] == "event" and item["length"] == len(payload)
    assert json.loads(payload)["event_id"] == header["event_id"]


def test_explain_prints_diagnosis():
    out = render("cli-python-segv.json", "explain.txt")
    assert out.splitlines()[0].startswith("SIGSEGV (address not mapped")
    assert "category:  null-deref" in out
