# A crash in code run by exec() of a string (file "<string>").
import ctypes

SOURCE = """
def from_exec():
    ctypes.string_at(0)

from_exec()
"""


def run_it():
    exec(SOURCE, {"ctypes": ctypes})


run_it()
