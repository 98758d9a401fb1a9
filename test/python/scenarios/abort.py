# abort() from Python code.
import os


def give_up():
    os.abort()


give_up()
