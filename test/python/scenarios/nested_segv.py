# Segfault via ctypes three Python calls deep, GIL held (string_at is a PYFUNCTYPE).
import ctypes


def leaf():
    ctypes.string_at(0)


def middle():
    leaf()


def top():
    middle()


top()
