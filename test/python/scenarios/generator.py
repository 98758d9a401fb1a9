# A crash inside a generator driven by a for loop.
import ctypes


def produce():
    yield 1
    ctypes.string_at(0)
    yield 2


def consume():
    for _ in produce():
        pass


consume()
