"""The `faultline` console script of the Python package: runs the command
that the package carries (or FAULTLINE_CLI, or a source checkout's build).
It replaces this process, so exit statuses and signals are the command's."""
import os
import sys

from . import _native


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    cli = _native.cli_path()
    if cli is None:
        sys.stderr.write("faultline: the faultline command is not installed with this package "
                         "(set FAULTLINE_CLI to its path)\n")
        return 1
    # `python -m faultline run train.py`: the job is a Python script, so run it
    # with this interpreter, as `python -m faultline run -- python3 train.py`.
    if argv[:1] == ["run"]:
        argv = ["run"] + _python_job(argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(cli, [cli] + argv)
    except OSError as e:
        sys.stderr.write(f"faultline: cannot run {cli}: {e.strerror}\n")
        return 1


# The options of `faultline run` that take a value (src/cli/cmd_run.cpp).
_RUN_OPTIONS_WITH_VALUE = {"-d", "--dir", "--signals", "--max-frames", "--watchdog", "--dump-signal",
                           "--timeout", "-e", "--env", "--lib"}


def _python_job(args):
    """`run [OPTIONS] [--] SCRIPT.py ARGS`: puts this interpreter in front of a
    script given by its .py path; anything else is passed on unchanged."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 2 if args[i] in _RUN_OPTIONS_WITH_VALUE else 1
    j = i + 1 if i < len(args) and args[i] == "--" else i
    if j < len(args) and args[j].endswith(".py"):
        return args[:i] + ["--", sys.executable] + args[j:]
    return args
