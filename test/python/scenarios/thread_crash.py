# A non-main Python thread crashes while 8 other threads wait, each in a
# function of its own.
import ctypes
import threading

ready = threading.Barrier(10)
never = threading.Event()


def wait_0(): ready.wait(); never.wait()
def wait_1(): ready.wait(); never.wait()
def wait_2(): ready.wait(); never.wait()
def wait_3(): ready.wait(); never.wait()
def wait_4(): ready.wait(); never.wait()
def wait_5(): ready.wait(); never.wait()
def wait_6(): ready.wait(); never.wait()
def wait_7(): ready.wait(); never.wait()


def worker_crash():
    ready.wait()
    # Give the others time to reach never.wait().
    import time
    time.sleep(0.3)
    ctypes.string_at(0)


for f in (wait_0, wait_1, wait_2, wait_3, wait_4, wait_5, wait_6, wait_7):
    threading.Thread(target=f, daemon=True).start()
t = threading.Thread(target=worker_crash)
t.start()
ready.wait()
t.join()
