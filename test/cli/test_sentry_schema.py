"""`faultline sentry` output validated against Sentry's own event schema
(Relay's event.schema.json, vendored in test/cli/sentry/) for every report in
test/data, and for each of them again with the parts that make events
richer — breadcrumbs as the library writes them, process-wide and thread
annotations, an uncaught-exception record — so an event Sentry would refuse
cannot pass."""

import copy
import json
import os

import pytest

from clitest import DATA, HERE, data_reports, run

SENTRY_SCHEMA = os.path.join(HERE, "sentry", "event.schema.json")
_validator = None


def sentry_errors(event):
    global _validator
    import jsonschema
    if _validator is None:
        with open(SENTRY_SCHEMA) as f:
            schema = json.load(f)
        _validator = jsonschema.Draft7Validator(schema)
    out = []
    for e in _validator.iter_errors(event):
        # The event is an anyOf of one object: report the inner errors.
        inner = e.context or [e]
        out += [f"{list(c.absolute_path)}: {c.message[:300]}" for c in inner]
    return out


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def enriched(doc):
    """doc with breadcrumbs in the library's own form ({"time", "message"}),
    annotations on the process and on every thread, and (for crashes) the
    exception record of an uncaught C++ exception."""
    doc = copy.deepcopy(doc)
    doc["breadcrumbs"] = [
        {"time": "2026-11-30T06:09:58.123Z", "message": "epoch 3 started"},
        {"time": "2026-11-30T06:09:59.456Z", "message": "dynamo: compiled forward (1)"},
    ]
    doc["annotations"] = dict(doc.get("annotations") or {}, run_id="exp-42", rank="3")
    for t in doc.get("threads", []):
        t["annotations"] = dict(t.get("annotations") or {}, request_id="r-17")
    if doc.get("kind") == "crash":
        doc["exception"] = {"type": "St13runtime_error", "message": "bad shape", "stack": "throw site"}
    return doc


def sentry(path, *flags):
    r = run("sentry", *flags, path)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_schema_is_draft7_and_catches_breadcrumb_time():
    import jsonschema
    with open(SENTRY_SCHEMA) as f:
        jsonschema.Draft7Validator.check_schema(json.load(f))
    # The oracle can fail: a breadcrumb with "time" (not "timestamp") is refused.
    bad = {"breadcrumbs": {"values": [{"time": "2026-11-30T06:09:58Z", "message": "x"}]}}
    assert sentry_errors(bad)
    assert not sentry_errors({"breadcrumbs": {"values": [{"timestamp": "2026-11-30T06:09:58Z"}]}})


@pytest.mark.parametrize("report", data_reports())
def test_event_of_checked_in_report_is_valid(report):
    event = json.loads(sentry(os.path.join(DATA, report)))
    assert sentry_errors(event) == []


@pytest.mark.parametrize("report", data_reports())
def test_event_with_breadcrumbs_annotations_threads_exception_is_valid(report, tmp_path):
    doc = enriched(load(report))
    path = tmp_path / report
    path.write_text(json.dumps(doc))
    event = json.loads(sentry(str(path)))
    assert sentry_errors(event) == []
    # Each part is really there, so the check covered it.
    crumbs = event["breadcrumbs"]["values"]
    assert [c["timestamp"] for c in crumbs] == [b["time"] for b in doc["breadcrumbs"]]
    assert [c["message"] for c in crumbs] == [b["message"] for b in doc["breadcrumbs"]]
    assert event["extra"]["annotations"]["run_id"] == "exp-42"
    assert event["threads"]["values"]
    if doc.get("kind") != "dump":
        assert event["exception"]["values"]
    # The envelope's payload is the same event.
    env = sentry(str(path), "--envelope").encode()
    payload = env.split(b"\n", 3)[2]
    assert sentry_errors(json.loads(payload)) == []


def test_breadcrumb_fields_beyond_time_and_message_go_to_data(tmp_path):
    doc = load("real-threads.json")
    doc["breadcrumbs"] = [{"time": "2026-11-30T06:09:58Z", "message": "m", "level": 3},
                          "a bare string"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    event = json.loads(sentry(str(path)))
    assert sentry_errors(event) == []
    first, second = event["breadcrumbs"]["values"]
    assert first["data"] == {"level": 3} and first["timestamp"] == "2026-11-30T06:09:58Z"
    assert second["message"] == "a bare string" and "timestamp" not in second


def test_dump_event_message_is_a_logentry():
    event = json.loads(sentry(os.path.join(DATA, "cli-dump.json")))
    assert event["logentry"]["formatted"].startswith("faultline dump of process")
    assert "message" not in event
