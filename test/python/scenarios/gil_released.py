# Segfault in a C function that ctypes calls with the GIL released (memset is a CFUNCTYPE).
import ctypes


def write_nowhere():
    ctypes.memset(0, 1, 16)


def job():
    write_nowhere()


job()
