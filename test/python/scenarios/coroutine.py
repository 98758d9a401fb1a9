# A crash inside a coroutine run by asyncio.
import asyncio
import ctypes


async def inner():
    await asyncio.sleep(0)
    ctypes.string_at(0)


async def outer():
    await inner()


asyncio.run(outer())
