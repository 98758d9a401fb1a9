# 150 Python frames of recursion, then a crash.
import ctypes


def recurse(n):
    if n == 0:
        ctypes.string_at(0)
    recurse(n - 1)


recurse(147)
