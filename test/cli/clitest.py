"""Shared helpers of the CLI tests: the checked-in reports and goldens, running `faultline`."""

import functools
import glob
import os

import fltest
from fltest import CLI, LIB, SCHEMA, SOURCE  # noqa: F401 (the CLI tests take them from here)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(SOURCE, "test", "data")
GOLDEN = os.path.join(HERE, "golden")
# Set FAULTLINE_UPDATE_GOLDEN=1 to rewrite the expected files from the current output.
UPDATE_GOLDEN = os.environ.get("FAULTLINE_UPDATE_GOLDEN") == "1"


def run(*args, cwd=None, env=None, input=None, timeout=60):
    """Runs faultline; returns the CompletedProcess (text unless input is
    bytes; never raises on status)."""
    return fltest.cli(*args, cwd=cwd, env=env, input=input, timeout=timeout,
                      text=isinstance(input, str) or input is None)


def data_reports():
    """Every checked-in report: hand-made ones (cli-*) and real ones from the crash tests."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(DATA, "*.json")))


def valid_data_reports():
    """The reports meant to be valid faultline/1 (cli-partial* are deliberately not)."""
    return [r for r in data_reports() if not r.startswith("cli-partial")]


@functools.lru_cache(maxsize=None)
def _schema_validator():
    """jsonschema's validator for the shipped schema, built once: building it
    per document cost more than validating."""
    import json
    import jsonschema
    with open(SCHEMA) as f:
        schema = json.load(f)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(doc):
    return sorted(_schema_validator().iter_errors(doc), key=lambda e: list(e.path))
