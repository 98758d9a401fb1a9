"""Shared helpers of the CLI tests: where the build is, running `faultline`."""

import functools
import glob
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("FAULTLINE_SOURCE", os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(SOURCE, "build-cli"))
CLI = os.environ.get("FAULTLINE_CLI", os.path.join(BUILD, "bin", "faultline"))
LIB = os.environ.get("FAULTLINE_LIB", os.path.join(BUILD, "lib", "libfaultline.so"))
DATA = os.path.join(SOURCE, "test", "data")
GOLDEN = os.path.join(HERE, "golden")
SCHEMA = os.path.join(SOURCE, "schema", "faultline-1.schema.json")
# Set FAULTLINE_UPDATE_GOLDEN=1 to rewrite the expected files from the current output.
UPDATE_GOLDEN = os.environ.get("FAULTLINE_UPDATE_GOLDEN") == "1"


def run(*args, cwd=None, env=None, input=None, timeout=60):
    """Runs faultline; returns the CompletedProcess (text, never raises on status)."""
    full_env = dict(os.environ)
    full_env.pop("NO_COLOR", None)
    if env:
        full_env.update(env)
    return subprocess.run([CLI, *args], cwd=cwd, env=full_env, input=input, capture_output=True,
                          timeout=timeout, text=isinstance(input, str) or input is None)


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
