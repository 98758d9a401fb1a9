# Crash inside __del__ while the cyclic garbage collector frees a cycle.
import ctypes
import gc


class Resource:
    def __del__(self):
        ctypes.string_at(0)


def make_cycle():
    a, b = Resource(), Resource()
    a.other, b.other = b, a


gc.disable()
make_cycle()
gc.collect()
