"""A small 'training job' that dies the way real ones do: a native crash deep
under Python code, with other threads alive (a data loader, a logger).

Run it under faultline (see the README):
    LD_PRELOAD=build/lib/libfaultline.so FAULTLINE_DIR=out python3 examples/python-crash/train.py
"""
import ctypes
import threading
import time


class DataLoader(threading.Thread):
    def __init__(self):
        super().__init__(name="data-loader", daemon=True)
        self.ready = threading.Event()

    def run(self):
        self.ready.set()
        while True:
            time.sleep(0.05)


def native_kernel(batch):
    # Stands in for a buggy extension: reads through a (nearly) null pointer.
    return ctypes.c_int64.from_address(8 * batch).value


def train_step(step, batch):
    loss = native_kernel(batch) if step == 3 else float(step)
    return loss


def train(epochs):
    for step in range(epochs):
        train_step(step, 16)


if __name__ == "__main__":
    if "--faultline" in __import__("sys").argv[1:]:  # no preload: faultline.enable()
        __import__("faultline").enable()
    loader = DataLoader()
    loader.start()
    loader.ready.wait()
    train(10)
