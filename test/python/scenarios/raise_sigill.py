# SIGILL raised by signal.raise_signal inside a function.
import signal


def raise_it():
    signal.raise_signal(signal.SIGILL)


def caller():
    raise_it()


caller()
