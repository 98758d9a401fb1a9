# Non-ASCII file name (UCS1 and UCS2 characters) and function names (UCS2 and UCS4).
import ctypes


def функция_крах():
    ctypes.string_at(0)


def émoji_𝔣𝔲𝔫𝔠():
    функция_крах()


émoji_𝔣𝔲𝔫𝔠()
