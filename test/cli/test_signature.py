"""The crash signature, from its specification (doc/report-format.md, "Crash
signature") alone: this file implements the text again, in Python, without
looking at the C++ code. Its vectors (in the document) must come out as the
document says, every real report in test/data must carry the signature this
implementation computes from its frames, and `faultline triage` must group
reports without a signature by the same values.
"""

import glob
import json
import os
import re

import pytest

from clitest import DATA, SOURCE, run

SPEC = os.path.join(SOURCE, "doc", "report-format.md")

NATIVE_FRAMES = 6
PYTHON_FRAMES = 4
RAISE_PATH = {"raise", "abort", "__pthread_kill_implementation", "__pthread_kill_internal",
              "pthread_kill", "gsignal", "__GI_raise", "__GI_abort"}


def basename(path):
    return path.rsplit("/", 1)[-1]


def generated(frame, python):
    origin = frame.get("origin") or ""
    if python:
        file, function = frame.get("file") or "", frame.get("function") or ""
        return ((origin == "fx" and file.startswith("<eval_with_key>"))
                or (origin == "dynamo" and "torch_dynamo_resume_in_" in function)
                or (origin == "inductor" and "/torch/_inductor/" not in file))
    module, symbol = frame.get("module") or "", frame.get("symbol") or ""
    if origin == "inductor":
        return True
    if origin == "triton":
        return not basename(module).startswith("libtriton") or symbol.startswith("triton_")
    return False


def native_field(frame):
    module, symbol = frame.get("module"), frame.get("symbol")
    if generated(frame, False):
        return f"{frame['origin']}!{symbol or '?'}"
    if not module:
        return "?"
    if symbol:
        return f"{basename(module)}!{symbol}"
    return f"{basename(module)}+{hex(int(frame.get('module_offset') or '0', 16))}"


def crashed_frames(report):
    threads = report.get("threads") or []
    for t in threads:
        if t.get("crashed"):
            return t.get("frames") or []
    for t in threads:
        if t.get("tid") is not None and t.get("tid") == report.get("crashed_tid"):
            return t.get("frames") or []
    return []


def fields(report, frames=None):
    """The fields the signature hashes, in order."""
    if report.get("kind") == "dump":
        return ["dump"]
    signal = report.get("signal") or {}
    name = signal.get("name") or "UNKNOWN"
    out = ["?" if name == "UNKNOWN" else name, (report.get("diagnosis") or {}).get("category") or ""]
    if report.get("kind") == "terminate":
        out.append((report.get("exception") or {}).get("type") or "")
    code = signal.get("code")
    sent_by_process = code is not None and code <= 0
    native, python = [], []
    for f in crashed_frames(report) if frames is None else frames:
        if f.get("kind") == "python":
            if len(python) < 2 * PYTHON_FRAMES:
                python += [f.get("origin") if generated(f, True) else basename(f.get("file") or ""),
                           f.get("function") or ""]
            continue
        module, symbol = f.get("module") or "", f.get("symbol") or ""
        if symbol in RAISE_PATH:
            continue
        if sent_by_process and not symbol and basename(module).startswith("libc.so"):
            continue
        if len(native) < NATIVE_FRAMES:
            native.append(native_field(f)[:255])
    return out + native + python


def signature(field_list):
    h = 0x14650fb0739d0383  # the spec's start value (not FNV's usual offset basis)
    for field in field_list:
        for byte in field.encode() + b"\xff":
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h.to_bytes(8, "little").hex()


def vectors():
    with open(SPEC) as f:
        text = f.read()
    m = re.search(r"<!-- signature-vectors -->\s*```json\n(.*?)```", text, re.S)
    assert m, "doc/report-format.md has no signature test vectors"
    return json.loads(m.group(1))


def vector_report(v):
    """A vector as a whole report: its frames are the crashed thread's."""
    r = {k: v["report"][k] for k in v["report"] if k != "frames"}
    r.update({"schema": "faultline/1", "crashed_tid": 7, "process": {"pid": 7},
              "threads": [{"tid": 7, "crashed": True, "frames": v["report"]["frames"]}]})
    return r


@pytest.mark.parametrize("v", vectors(), ids=lambda v: v["name"][:40])
def test_vector(v):
    r = vector_report(v)
    assert fields(r) == v["fields"]
    assert signature(v["fields"]) == v["signature"]


def test_vectors_cover_the_spec():
    vs = vectors()
    assert len({v["signature"] for v in vs}) == len(vs) - 2  # two pairs group together
    assert {v["report"]["kind"] for v in vs} == {"crash", "terminate", "dump"}


def real_reports():
    return sorted(glob.glob(os.path.join(DATA, "real-*.json")))


@pytest.mark.parametrize("path", real_reports(), ids=os.path.basename)
def test_real_report_signature_follows_the_spec(path):
    with open(path) as f:
        report = json.load(f)
    assert report["diagnosis"]["signature"] == signature(fields(report))


def test_triage_groups_the_vectors(tmp_path):
    vs = vectors()
    for i, v in enumerate(vs):
        (tmp_path / f"faultline-vector-{i:02}.json").write_text(json.dumps(vector_report(v)))
    r = run("triage", "--json", str(tmp_path))
    assert r.returncode == 0, r.stderr
    groups = {g["signature"]: sorted(os.path.basename(p) for p in g["reports"])
              for g in json.loads(r.stdout)["groups"]}
    expected = {}
    for i, v in enumerate(vs):
        expected.setdefault(v["signature"], []).append(f"faultline-vector-{i:02}.json")
    assert groups == expected
    text = run("triage", str(tmp_path))
    assert text.returncode == 0, text.stderr
    for v in vs:
        assert v["signature"] in text.stdout


def test_triage_recomputes_real_signatures(tmp_path):
    """Real reports stripped of their signature group under the writer's value."""
    want = {}
    for path in real_reports():
        with open(path) as f:
            report = json.load(f)
        want.setdefault(report["diagnosis"].pop("signature"), []).append(os.path.basename(path))
        (tmp_path / os.path.basename(path)).write_text(json.dumps(report))
    r = run("triage", "--json", str(tmp_path))
    assert r.returncode == 0, r.stderr
    got = {g["signature"]: sorted(os.path.basename(p) for p in g["reports"])
           for g in json.loads(r.stdout)["groups"]}
    assert got == {k: sorted(v) for k, v in want.items()}
