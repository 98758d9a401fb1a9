"""The faultline/1 JSON Schema: Python's jsonschema is the oracle, and
`faultline validate` (C++) must reach the same verdict on every document."""

import copy
import json
import os
import random

import pytest

import reportgen
from clitest import DATA, SCHEMA, data_reports, run, schema_errors, valid_data_reports


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def test_builtin_schema_is_the_shipped_file():
    r = run("validate", "--print-schema")
    assert r.returncode == 0
    with open(SCHEMA) as f:
        assert json.loads(r.stdout) == json.load(f)


def test_schema_is_valid_draft_2020_12():
    import jsonschema
    with open(SCHEMA) as f:
        jsonschema.Draft202012Validator.check_schema(json.load(f))


@pytest.mark.parametrize("report", valid_data_reports())
def test_checked_in_reports_are_valid(report):
    assert [e.message for e in schema_errors(load(report))] == []
    r = run("validate", report, cwd=DATA)
    assert r.returncode == 0, r.stdout
    assert r.stdout == report + ": ok\n"


def test_partial_report_is_invalid_in_both():
    assert schema_errors(load("cli-partial.json"))
    r = run("validate", "cli-partial.json", cwd=DATA)
    assert r.returncode == 1
    assert 'missing required field "diagnosis"' in r.stdout


def mutations(doc, rng, count):
    """Small random edits of a valid report: delete a field, change a type or
    a value, add an unknown field. Some keep it valid, most do not."""
    paths = []

    def walk(v, path):
        paths.append(path)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [k])
        elif isinstance(v, list):
            for i, x in enumerate(v[:3]):
                walk(x, path + [i])
    walk(doc, [])
    replacements = [None, 0, -1, 1.5, 7.0, "", "0x", "0xZZ", "x", "0x7f00", "SIGFOO", "faultline/2",
                    [], {}, True, "2026-11-30T06:10:00Z", "2026-11-30 06:10", "abcdef0123456789",
                    "ABCDEF0123456789", 65, "crash", "dump", "native", "python", ["a", 1]]
    for _ in range(count):
        d = copy.deepcopy(doc)
        path = rng.choice(paths[1:])
        parent = d
        for p in path[:-1]:
            parent = parent[p]
        key = path[-1]
        op = rng.random()
        if op < 0.3 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.4 and isinstance(parent, dict):
            parent["unknown_" + str(rng.randrange(100))] = rng.choice(replacements)
        else:
            parent[key] = copy.deepcopy(rng.choice(replacements))
        yield d


def test_validate_agrees_with_jsonschema(tmp_path):
    rng = random.Random(20261130)
    docs = []
    for name in valid_data_reports():
        docs += list(mutations(load(name), rng, 150))
    gen_rng = random.Random(3)
    for crash in reportgen.CRASHES:
        docs.append(reportgen.make_report(crash, gen_rng))  # half lack a signature
        docs += list(mutations(reportgen.make_report(crash, gen_rng), rng, 20))
    paths, expected = [], {}
    for i, d in enumerate(docs):
        p = str(tmp_path / f"m{i:04d}.json")
        with open(p, "w") as f:
            json.dump(d, f)
        paths.append(p)
        expected[p] = not schema_errors(d)
    r = run("validate", "--quiet", *paths, timeout=600)  # sanitized builds are several times slower
    invalid = {line.split(": invalid")[0] for line in r.stdout.splitlines() if ": invalid" in line}
    got = {p: p not in invalid for p in paths}
    disagree = [(p, expected[p], got[p]) for p in paths if expected[p] != got[p]]
    assert not disagree, disagree[:5]
    # The mutations exercise both verdicts.
    assert 50 < sum(expected.values()) < len(paths) - 50
    assert r.returncode == (0 if all(expected.values()) else 1)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("threads"), 'missing required field "threads"'),
    (lambda d: d["signal"].update(number="11"), "/signal/number: expected integer, got string"),
    (lambda d: d["threads"][0]["frames"][0].update(pc="7f00"), "/threads/0/frames/0/pc:"),
    (lambda d: d["modules"][0].update(build_id="XYZ"), "/modules/0/build_id:"),
    (lambda d: d.update(kind="oops"), '/kind: must be one of ["crash","dump","terminate","shutdown","exception"]'),
])
def test_validate_says_where(tmp_path, edit, message):
    d = load("cli-python-segv.json")
    edit(d)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(d))
    r = run("validate", str(p))
    assert r.returncode == 1
    assert message in r.stdout, r.stdout


def test_unknown_fields_are_valid(tmp_path):
    d = load("cli-python-segv.json")
    d["from_the_future"] = {"x": 1}
    d["threads"][0]["frames"][0]["inlined"] = [{"function": "f"}]
    d["signal"]["extra"] = True
    assert not schema_errors(d)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(d))
    assert run("validate", str(p)).returncode == 0


def test_custom_schema_with_unsupported_keyword_is_refused(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"type": "object", "patternProperties": {"^x": {}}}))
    r = run("validate", "--schema", str(p), os.path.join(DATA, "cli-dump.json"))
    assert r.returncode == 1
    assert 'keyword "patternProperties" is not supported' in r.stderr
