#!/usr/bin/env python3
"""Client for the example server: sends N good requests from several threads,
checks every answer, then sends one poisoned request.

    client.py SOCKET [--requests 1000] [--clients 4] [--poison]
Prints a JSON summary: {"sent": N, "answered": N, "poisoned": "ID" or null}.
"""
import argparse
import json
import socket
import threading


def good_requests(path, ids, answers):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall("".join(f"{i} payload-{i}\n" for i in ids).encode())
    buf = b""
    while len(answers_for(answers, ids)) < len(ids):
        data = s.recv(65536)
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            rid, status, _ = line.decode().split(" ", 2)
            if status == "ok":
                answers[rid] = True
    s.close()


def answers_for(answers, ids):
    return [i for i in ids if answers.get(i)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--poison", action="store_true")
    a = ap.parse_args()
    ids = [f"r{i:05d}" for i in range(a.requests)]
    answers = {}
    threads = [threading.Thread(target=good_requests, args=(a.socket, ids[k::a.clients], answers))
               for k in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    poisoned = None
    if a.poison:
        poisoned = "poison-0001"
        s = socket.socket(socket.AF_UNIX)
        s.connect(a.socket)
        s.sendall(f"{poisoned} poison\n".encode())
        s.settimeout(10)
        try:
            s.recv(100)  # the server dies: EOF
        except OSError:
            pass
    print(json.dumps({"sent": len(ids), "answered": len(answers_for(answers, ids)), "poisoned": poisoned}))


if __name__ == "__main__":
    main()
