"""Crashes CPython in ctypes three Python frames deep (the aarch64 Python
test runs it under the arm64 python3, with and without faultline)."""
import ctypes
import faulthandler
import sys


def leaf():
    ctypes.string_at(0)


def middle():
    leaf()


def outer():
    middle()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "faulthandler":
        faulthandler.enable()
    outer()
