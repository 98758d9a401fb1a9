"""Every torch2 test's output names the torch and Python it ran with (the root's)."""

import pytest

import rootrun

_versions = None


@pytest.fixture(scope="session", autouse=True)
def root_versions():
    global _versions
    _versions = rootrun.versions()
    return _versions


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"torch2: ran with {_versions or 'no root (see the errors above)'}")
