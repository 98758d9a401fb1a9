"""What the preload brings into a process: no C++ runtime into a C program,
no libunwind unless FAULTLINE_UNWINDER chooses it, no heap and no pipe at
start, and the std::terminate hook still installed in a C++ runtime loaded
late."""
import os
import signal
import subprocess

import fltest

LATECXX = fltest.program("latecxx")
LATECXX_LIB = fltest.program("liblatecxx_lib.so")


def dynamic_section():
    return subprocess.run(["readelf", "-d", os.environ["FAULTLINE_LIB"]], capture_output=True,
                          text=True, check=True).stdout


def maps_of_cat(**env):
    """A C program under the preload: cat reading its own maps."""
    r = fltest.run(["/bin/cat", "/proc/self/maps"], env=env)
    assert r.returncode == 0, r.stderr
    assert "libfaultline" in r.stdout  # the preload is there
    return r


def test_library_needs_no_cxx_runtime():
    needed = [line for line in dynamic_section().splitlines() if "(NEEDED)" in line]
    assert needed and not any("libstdc++" in line or "libgcc_s" in line for line in needed), needed


def test_c_program_maps_no_cxx_runtime():
    assert "libstdc++" not in maps_of_cat().stdout  # the preload brought no C++ runtime


def test_library_needs_no_libunwind():
    out = dynamic_section()
    assert "libunwind" not in out and "liblzma" not in out, out


def test_libunwind_is_loaded_only_when_chosen():
    r = maps_of_cat(FAULTLINE_UNWINDER="cfi")
    assert "libunwind" not in r.stdout and "liblzma" not in r.stdout
    for choice in ("libunwind", "cfi+libunwind"):
        r = maps_of_cat(FAULTLINE_UNWINDER=choice)
        assert "libunwind.so" in r.stdout, choice
        assert "faultline:" not in r.stderr, r.stderr


def test_a_libunwind_that_cannot_be_used_falls_back_to_cfi(tmp_path):
    # A libunwind.so.8 without its functions comes first on the search path:
    # a warning, then the crash is unwound by the CFI unwinder.
    fake = tmp_path / "libunwind.so.8"
    src = tmp_path / "fake.c"
    src.write_text("int faultline_test_not_libunwind;\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), str(src)], check=True)
    d = tmp_path / "reports"
    d.mkdir()
    r = fltest.run([fltest.program("crasher"), "null-read"], report_dir=str(d),
                   env={"FAULTLINE_UNWINDER": "libunwind", "LD_LIBRARY_PATH": str(tmp_path),
                        "FAULTLINE_DIR": str(d)})
    assert "FAULTLINE_UNWINDER=libunwind: libunwind could not be loaded (libunwind.so.8 lacks " \
        "the local-unwinding functions); using the CFI unwinder" in r.stderr, r.stderr
    rep = fltest.validate(r.report)
    assert fltest.crashed_thread(rep)["unwinder"] == "cfi"


def test_terminate_in_cxx_runtime_loaded_late():
    r = fltest.run([LATECXX, LATECXX_LIB, "thread"])
    assert r.returncode == -signal.SIGABRT, r.stderr
    rep = fltest.validate(r.report)
    assert rep["kind"] == "terminate"
    assert rep["exception"]["type"] == "St13runtime_error"
    assert rep["exception"]["message"] == "thrown by a library loaded late"
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    assert "throw_late" in syms


def test_terminate_in_cxx_runtime_loaded_by_a_constructor_before_ours():
    # A library of the program loads the C++ runtime (RTLD_LOCAL, out of the
    # weak reference's reach) in its constructor, which runs before the
    # preload's: the install still hooks std::terminate, with no thread start.
    r = fltest.run([fltest.program("latecxx_ctor")], env={"LATECXX_CTOR_LIB": LATECXX_LIB})
    assert r.returncode == -signal.SIGABRT, r.stderr
    rep = fltest.validate(r.report)
    assert rep["kind"] == "terminate"
    assert rep["exception"]["type"] == "St13runtime_error"


def test_abort_reported_when_cxx_runtime_loaded_after_last_thread_start():
    # No thread start after the load: no hook, but the abort is reported.
    r = fltest.run([LATECXX, LATECXX_LIB])
    assert r.returncode == -signal.SIGABRT, r.stderr
    rep = fltest.validate(r.report)
    assert rep["signal"]["name"] == "SIGABRT"
    assert "throw_late" in fltest.native_symbols(fltest.crashed_thread(rep))


def test_library_has_no_dynamic_initialisers():
    # A global with a non-constant initialiser (a struct gaining a default
    # member initialiser is enough) runs at load in every process and
    # touches all of it: the module snapshot's buffers are megabytes.
    syms = subprocess.run(["nm", os.environ["FAULTLINE_LIB"]], capture_output=True, text=True,
                          check=True).stdout
    assert "_GLOBAL__sub_I" not in syms, [s for s in syms.splitlines() if "_GLOBAL__sub_I" in s]


def start_state(preload, report_dir):
    """heap bytes and {fd: target} as the startup program saw them in main()."""
    r = fltest.run([fltest.program("startup")], preload=preload, report_dir=report_dir,
                   env={"FAULTLINE_DIR": report_dir})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("heap ")
    fds = {}
    for line in lines[1:]:
        _, fd, target = line.split(" ", 2)
        fds[int(fd)] = target
    return int(lines[0].split()[1]), fds


def test_c_program_start_takes_no_heap_and_no_reader_pipe(tmp_path):
    # What the install takes from a C program that never crashes: no heap
    # (a realpath or a failed dlsym would set up malloc's arena), and of
    # descriptors only the report directory, a copy of stderr and three
    # spares kept for a crash with none left (the safe reader's pipe, a
    # symbol table, the report): one pipe's two ends and a duplicate. The
    # safe reader's own pipe is made by the first read that needs it.
    d = str(tmp_path)
    heap, plain = start_state(False, d)
    assert heap == 0
    heap, fds = start_state(True, d)
    assert heap == 0, "the install called malloc"
    extra = sorted(t for fd, t in fds.items() if fd not in plain)
    assert len(extra) == 5, extra
    spares = [t for t in extra if t.startswith("pipe:") and t != fds[2]]
    assert len(spares) == 3 and len(set(spares)) == 1, extra
    assert sorted(set(extra) - set(spares)) == sorted({d, fds[2]}), extra


def test_library_has_almost_nothing_to_relocate():
    # Every pointer in a table is a relocation the loader applies at each
    # start, and each page of them a copy-on-write in every process under
    # the preload (~50 us a page on a small VM). The tables hold their text
    # instead; what is left is the loader's own (init arrays, __dso_handle)
    # and the addresses of the crash-key tables in the descriptor a ptrace
    # dump reads them through (faultline_remote_tables), on the same pages.
    out = subprocess.run(["readelf", "-rW", os.environ["FAULTLINE_LIB"]], capture_output=True,
                         text=True, check=True).stdout
    relative = [line for line in out.splitlines() if "R_X86_64_RELATIVE" in line]
    pages = {int(line.split()[0], 16) >> 12 for line in relative}
    listing = f"{len(relative)} relative relocations:\n" + "\n".join(relative)
    assert len(relative) <= 24, listing
    assert len(pages) <= 2, listing


def test_start_and_fork_child_write_few_pages_of_the_library():
    # Each page of the library's memory a process writes is a page fault
    # (~10 us on a virtual machine): at start-up the install's variables are
    # packed on a few pages, and a fork child (every process a shell or
    # `make` starts) writes only what its fork handlers must change. The
    # fork child wrote all 1024 thread-state entries' ids, 208 pages, ~2.7 ms
    # of every fork; the start-up's pages were 13 before they were packed.
    # At least g_crash's first page in main(): a count of 0 means the
    # library was not found in /proc/self/smaps, not that it wrote nothing.
    # Bounds with room for a long command line and FAULTLINE_UNWINDER=libunwind.
    r = fltest.run([fltest.program("startup"), "pages"])
    assert r.returncode == 0, r.stderr
    kb = dict(line.split() for line in r.stdout.splitlines())
    assert 4 <= int(kb["main"]) <= 8 * 4, r.stdout
    assert 4 <= int(kb["child"]) <= 8 * 4, r.stdout
    # The same program without the preload writes nothing of it: the count
    # is faultline's.
    r = fltest.run([fltest.program("startup"), "pages"], preload=False)
    assert r.stdout.split() == ["main", "0", "child", "0"], r.stdout
