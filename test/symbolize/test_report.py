"""`faultline symbolize REPORT.json`: a report whose native frames point into
a test program (unstripped, stripped with its debug file in each place the
search order covers, another build) and into libc; the symbolized report is
checked against llvm-symbolizer-14 on the unstripped program, against the
pc-1 rule, for idempotence, and bad input must fail cleanly."""
import json
import os
import shutil
import stat
import subprocess

import pytest

import symtools

PROGRAM = os.path.join(symtools.BUILD, "test", "symbolize", "symbolize_inline_heavy")


@pytest.fixture(scope="module")
def program():
    assert os.path.exists(PROGRAM), "build the symbolize_inline_heavy target first"
    return PROGRAM


@pytest.fixture(scope="module")
def addresses(program):
    """Three addresses in the program's functions, with llvm-symbolizer's answer."""
    funcs = [f for f in symtools.function_symbols(program) if f[1] > 32]
    _, addrs = symtools.random_addresses(funcs, 3, seed=11)
    return addrs, symtools.llvm_addresses(program, addrs)


def write_report(tmp_path, modules, threads, name="report.json"):
    path = tmp_path / name
    path.write_text(json.dumps(symtools.report(modules, threads), indent=2))
    return path


def symbolize(path, *extra, env=None):
    p = symtools.run_cli("symbolize", str(path), *extra, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def split_debug(program, tmp_path, debuglink=True):
    """A stripped copy of the program and its debug file, as a distro splits them."""
    debug = tmp_path / "inline_heavy.debug"
    stripped = tmp_path / "inline_heavy"
    subprocess.run(["objcopy", "--only-keep-debug", program, str(debug)], check=True)
    args = ["objcopy", "--strip-debug", "--strip-unneeded"]
    if debuglink:
        args.append(f"--add-gnu-debuglink={debug}")
    subprocess.run(args + [program, str(stripped)], check=True)
    return stripped, debug


def assert_lines_match_llvm(frames, addrs, oracle):
    """Each frame (exact pc, as frame 0 / signal frames) has llvm's outermost file:line
    and llvm's inline chain, innermost first."""
    for frame, a in zip(frames, addrs):
        expected = oracle[a]
        assert expected and expected[0]["line"] > 0
        assert (frame["file"], frame["line"]) == (expected[-1]["file"], expected[-1]["line"]), frame
        inlined = frame.get("inlined", [])
        assert [(i["file"], i["line"]) for i in inlined] == \
            [(e["file"], e["line"]) for e in expected[:-1]]
        assert frame["function"]


def exact_frames(module, addrs):
    return [symtools.native_frame(module, a, signal_frame=True) for a in addrs]


def test_unstripped_program_gets_lines_from_the_module_itself(program, addresses, tmp_path):
    addrs, oracle = addresses
    bid = symtools.build_id(program)
    out = symbolize(write_report(tmp_path, [(program, bid)], [exact_frames(program, addrs)]))
    assert out["modules"][0]["debug_source"] == "module"
    assert_lines_match_llvm(out["threads"][0]["frames"], addrs, oracle)


@pytest.mark.parametrize("where", ["next-to-it", ".debug-subdir"])
def test_stripped_program_finds_its_debuglink(program, addresses, tmp_path, where):
    addrs, oracle = addresses
    stripped, debug = split_debug(program, tmp_path)
    if where == ".debug-subdir":
        (tmp_path / ".debug").mkdir()
        shutil.move(str(debug), str(tmp_path / ".debug" / debug.name))
    bid = symtools.build_id(str(stripped))
    out = symbolize(write_report(tmp_path, [(str(stripped), bid)],
                                 [exact_frames(str(stripped), addrs)]))
    assert out["modules"][0]["debug_source"] == "debuglink"
    assert_lines_match_llvm(out["threads"][0]["frames"], addrs, oracle)


def test_debug_dir_with_a_build_id_tree(program, addresses, tmp_path):
    addrs, oracle = addresses
    stripped, debug = split_debug(program, tmp_path, debuglink=False)
    bid = symtools.build_id(str(stripped))
    tree = tmp_path / "symbols" / ".build-id" / bid[:2]
    tree.mkdir(parents=True)
    shutil.move(str(debug), str(tree / (bid[2:] + ".debug")))
    report = write_report(tmp_path, [(str(stripped), bid)], [exact_frames(str(stripped), addrs)])

    without = symbolize(report)
    assert without["modules"][0]["debug_source"] == "none"
    assert all("line" not in f for f in without["threads"][0]["frames"])

    out = symbolize(report, "--debug-dir", str(tmp_path / "nowhere"),
                    "--debug-dir", str(tmp_path / "symbols"))
    assert out["modules"][0]["debug_source"] == "debug-dir"
    assert_lines_match_llvm(out["threads"][0]["frames"], addrs, oracle)
    # The missing one is looked past, and said (a mistyped directory found
    # nothing in silence).
    p = symtools.run_cli("symbolize", str(report), "--debug-dir", str(tmp_path / "nowhere"))
    assert p.returncode == 0
    assert f"--debug-dir {tmp_path / 'nowhere'}: not a directory; looked past" in p.stderr


def test_libc_gets_lines_from_the_build_id_directory(tmp_path):
    if symtools.system_debug_file(symtools.LIBC) is None:
        pytest.skip("libc6-dbg is not installed")
    names = symtools.symbol_names(symtools.system_debug_file(symtools.LIBC))
    malloc = next(a for a, n in names.items() if "__libc_malloc" in n)
    oracle = symtools.llvm_addresses(symtools.LIBC, [malloc + 4])
    bid = symtools.build_id(symtools.LIBC)
    out = symbolize(write_report(tmp_path, [(symtools.LIBC, bid)],
                                 [[symtools.native_frame(symtools.LIBC, malloc + 4)]]))
    assert out["modules"][0]["debug_source"] == "build-id-dir"
    frame = out["threads"][0]["frames"][0]
    assert frame["function"] == "__libc_malloc"
    assert (frame["file"], frame["line"]) == (oracle[malloc + 4][-1]["file"],
                                              oracle[malloc + 4][-1]["line"])


def test_another_build_of_the_module_is_never_used_for_lines(program, addresses, tmp_path):
    addrs, _ = addresses
    report = write_report(tmp_path, [(program, "00" * 20)], [exact_frames(program, addrs)])
    p = symtools.run_cli("symbolize", str(report))
    assert p.returncode == 0, p.stderr
    assert "build-id" in p.stderr
    out = json.loads(p.stdout)
    assert out["modules"][0]["debug_source"] == "build-id mismatch"
    for frame in out["threads"][0]["frames"]:
        assert not {"function", "file", "line", "inlined"} & frame.keys(), frame


def test_another_build_here_but_the_right_debug_file_in_a_debug_dir(program, addresses, tmp_path):
    """The crash happened on another machine: the file here is a different
    build, but the debug file for the report's build-id is available."""
    addrs, oracle = addresses
    stripped, debug = split_debug(program, tmp_path, debuglink=False)
    bid = symtools.build_id(program)
    symbols = tmp_path / "symbols"
    symbols.mkdir()
    shutil.move(str(debug), str(symbols / "inline_heavy.debug"))
    # Flip one byte of the build-id note: same code, another build as far as anyone can tell.
    data = bytearray(stripped.read_bytes())
    at = data.find(bytes.fromhex(bid))
    data[at] ^= 0xff
    stripped.write_bytes(bytes(data))
    assert symtools.build_id(str(stripped)) != bid
    out = symbolize(write_report(tmp_path, [(str(stripped), bid)],
                                 [exact_frames(str(stripped), addrs)]),
                    "--debug-dir", str(symbols))
    assert out["modules"][0]["debug_source"] == "debug-dir"
    assert_lines_match_llvm(out["threads"][0]["frames"], addrs, oracle)


def test_return_addresses_are_looked_up_one_byte_earlier(program, tmp_path):
    # The first byte of each function: as a return address (pc-1) it falls
    # into whatever precedes the function, as an exact pc into the function.
    funcs = [f for f in symtools.function_symbols(program) if f[1] > 16]
    starts = [a for a, _, _ in funcs][:8]
    exact = symtools.faultline_addresses(program, starts)
    before = symtools.faultline_addresses(program, [a - 1 for a in starts])
    assert any(exact[a] != before[a - 1] for a in starts)
    bid = symtools.build_id(program)

    frames = [symtools.native_frame(program, a) for a in starts]
    # libunwind marks the sigreturn trampoline as the signal frame; the frame
    # after it is the one the signal interrupted.
    frames[3]["signal_frame"] = True
    frames[6]["symbol"] = "__restore_rt"  # a trampoline known by name only
    out = symbolize(write_report(tmp_path, [(program, bid)], [frames]))
    got = [f.get("function") for f in out["threads"][0]["frames"]]
    want_exact = {0, 3, 4, 7}
    for i, a in enumerate(starts):
        want = exact[a] if i in want_exact else before[a - 1]
        assert got[i] == ((want[-1]["function"] or None) if want else None), (i, got[i])


def test_output_is_idempotent_and_the_input_untouched(program, addresses, tmp_path):
    addrs, _ = addresses
    bid = symtools.build_id(program)
    frames = [symtools.native_frame(program, a) for a in addrs]
    report = write_report(tmp_path, [(program, bid), (symtools.LIBC, symtools.build_id(symtools.LIBC))],
                          [frames, [{"kind": "python", "file": "job.py", "line": 3, "function": "f"}]
                           + frames[:1]])
    original = report.read_bytes()
    first = tmp_path / "first.json"
    second = tmp_path / "second.json"
    symtools.run_cli("symbolize", str(report), "-o", str(first), check=True)
    assert report.read_bytes() == original
    symtools.run_cli("symbolize", str(first), "-o", str(second), check=True)
    assert first.read_bytes() == second.read_bytes()
    out = json.loads(first.read_text())
    assert out["threads"][1]["frames"][0] == {"kind": "python", "file": "job.py", "line": 3,
                                              "function": "f"}
    assert "debug_source" not in out["modules"][1]  # no frame points into libc


def test_in_place_only_when_asked_and_keeps_the_mode(program, addresses, tmp_path):
    addrs, _ = addresses
    report = write_report(tmp_path, [(program, symtools.build_id(program))],
                          [exact_frames(program, addrs)])
    os.chmod(report, 0o600)
    symtools.run_cli("symbolize", str(report), "--in-place", check=True)
    out = json.loads(report.read_text())
    assert out["modules"][0]["debug_source"] == "module"
    assert stat.S_IMODE(os.stat(report).st_mode) == 0o600
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


@pytest.mark.parametrize("content, message", [
    ("", "not JSON"),
    ("{\"schema\": \"faultline/1\", \"threads\": [", "not JSON"),
    ("\x7fELF\x02\x01\x01\x00binary", "not JSON"),
    ("[1, 2, 3]", "not an object"),
    ("{\"schema\": \"faultline/2\"}", "faultline/2"),
    ("{\"threads\": []}", "schema"),
    ("{\"schema\": \"faultline/1\", \"threads\": {}}", "threads"),
])
def test_bad_reports_fail_with_a_message(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    p = symtools.run_cli("symbolize", str(path))
    assert p.returncode == 1
    assert message in p.stderr
    assert p.stdout == ""


def test_missing_and_unreadable_reports(tmp_path):
    p = symtools.run_cli("symbolize", str(tmp_path / "absent.json"))
    assert p.returncode == 1 and "No such file" in p.stderr
    p = symtools.run_cli("symbolize", str(tmp_path))
    assert p.returncode == 1 and "directory" in p.stderr.lower()
    if os.geteuid() != 0:
        locked = tmp_path / "locked.json"
        locked.write_text("{}")
        os.chmod(locked, 0)
        p = symtools.run_cli("symbolize", str(locked))
        assert p.returncode == 1 and "Permission denied" in p.stderr


def test_usage_errors_exit_2(tmp_path):
    assert symtools.run_cli("symbolize").returncode == 2
    assert symtools.run_cli("symbolize", "a.json", "b.json").returncode == 2
    assert symtools.run_cli("symbolize", "a.json", "-o", "x", "--in-place").returncode == 2


def test_odd_frames_and_modules_do_not_stop_the_rest(program, addresses, tmp_path):
    addrs, oracle = addresses
    bid = symtools.build_id(program)
    odd = [
        {"kind": "native", "pc": 12, "module": program, "module_offset": "not hex"},
        {"kind": "native", "module": program, "module_offset": "0xffffffffffffffff"},
        {"kind": "native", "module": "/nonexistent/lib.so", "module_offset": "0x10"},
        {"kind": "native", "module": ["not", "a", "string"]},
        "a string where a frame should be",
    ]
    good = symtools.native_frame(program, addrs[0], signal_frame=True)
    report = symtools.report([(program, bid), ("/nonexistent/lib.so", "ab" * 20)], [odd + [good]])
    report["modules"].append("not a module")
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(report))
    out = symbolize(path)
    frames = out["threads"][0]["frames"]
    assert_lines_match_llvm([frames[-1]], addrs[:1], oracle)
    assert out["modules"][1]["debug_source"] == "none"
    assert "No such file" in out["modules"][1]["debug_error"]


def test_module_mode_prints_blocks_and_rejects_bad_files(program, addresses, tmp_path):
    addrs, oracle = addresses
    p = symtools.run_cli("symbolize", "--module", program, hex(addrs[0]), check=True)
    lines = p.stdout.splitlines()
    assert lines[0] == hex(addrs[0])
    assert lines[-2] == f"{oracle[addrs[0]][-1]['file']}:{oracle[addrs[0]][-1]['line']}:" \
                        f"{lines[-2].rsplit(':', 1)[1]}"
    p = symtools.run_cli("symbolize", "--module", program, "0xzz", hex(addrs[0]))
    assert p.returncode == 1 and "not an address" in p.stderr and hex(addrs[0]) in p.stdout

    data = open(program, "rb").read()
    truncated = tmp_path / "truncated"
    truncated.write_bytes(data[: len(data) * 2 // 3])
    p = symtools.run_cli("symbolize", "--module", str(truncated), hex(addrs[0]))
    assert p.returncode == 1 and "truncated" in p.stderr

    not_elf = tmp_path / "not_elf"
    not_elf.write_text("hello\n")
    p = symtools.run_cli("symbolize", "--module", str(not_elf), "0x10")
    assert p.returncode == 1 and "not an ELF file" in p.stderr

    p = symtools.run_cli("symbolize", "--module", str(tmp_path / "absent"), "0x10")
    assert p.returncode == 1 and "No such file" in p.stderr


def test_corrupted_dwarf_never_crashes(program, addresses, tmp_path):
    addrs, _ = addresses
    out = subprocess.run(["readelf", "-S", "-W", program], capture_output=True, text=True).stdout
    data = bytearray(open(program, "rb").read())
    for line in out.splitlines():
        if ".debug_info" in line or ".debug_line " in line or ".debug_abbrev" in line:
            fields = line.split("]", 1)[1].split()
            off, size = int(fields[3], 16), int(fields[4], 16)
            for i in range(off + 7, off + size, 13):  # garbage every 13th byte
                data[i] ^= 0x5a
    broken = tmp_path / "broken"
    broken.write_bytes(bytes(data))
    p = symtools.run_cli("symbolize", "--module", str(broken), *[hex(a) for a in addrs])
    assert p.returncode in (0, 1), p.stderr  # never a signal
    assert p.stdout.count("\n\n") == len(addrs)
