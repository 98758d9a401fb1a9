# Runs inside gdb (gdb -batch -nx -x gdb_frames.py): reads JOBS, a JSON list
# of {"id", "exe", "core", "limit"}, loads each executable with its core file
# and writes one JSON line per job to OUT: the frames of the thread that took
# the signal, innermost first, as gdb unwinds them.
import json
import os

import gdb

KINDS = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.SIGTRAMP_FRAME: "sigtramp",
         gdb.DUMMY_FRAME: "dummy", gdb.TAILCALL_FRAME: "tailcall", gdb.ARCH_FRAME: "arch"}


def frames(limit):
    out = []
    try:
        f = gdb.newest_frame()
    except gdb.error as e:
        return out, str(e)
    while f is not None and len(out) < limit:
        rec = {"pc": f.pc(), "type": KINDS.get(f.type(), str(f.type())), "name": f.name()}
        try:
            rec["solib"] = gdb.solib_name(f.pc())
        except gdb.error:
            rec["solib"] = None
        out.append(rec)
        try:
            f = f.older()
        except gdb.error as e:
            return out, str(e)
    return out, None


def main():
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    gdb.execute("set print frame-info short-location")
    with open(os.environ["ORACLE_JOBS"]) as f:
        jobs = json.load(f)
    with open(os.environ["ORACLE_OUT"], "w") as out:
        for job in jobs:
            rec = {"id": job["id"]}
            try:
                gdb.execute("file " + job["exe"], to_string=True)
                gdb.execute("core-file " + job["core"], to_string=True)
                rec["frames"], rec["error"] = frames(job.get("limit", 1000))
            except gdb.error as e:
                rec["frames"], rec["error"] = [], str(e)
            try:
                gdb.execute("core-file", to_string=True)
            except gdb.error:
                pass
            out.write(json.dumps(rec) + "\n")
            out.flush()


main()
