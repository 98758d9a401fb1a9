"""The source tree keeps its shape: every include runs downward in the
declared layer order (and the check says so when one does not), no source
file passes 600 lines, no file name is used twice under src/, and
doc/design.md's table names every file of the crash path."""
import os
import re
import shutil
import subprocess

import pytest

SRC = os.environ.get("FAULTLINE_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CHECK = os.path.join(SRC, "tools", "check-layers")
MAX_LINES = 600


def sources():
    for dirpath, _, files in os.walk(os.path.join(SRC, "src")):
        for f in files:
            if f.endswith((".cpp", ".h", ".inc")):
                yield os.path.join(dirpath, f)


def check(root):
    return subprocess.run([CHECK, "--root", str(root)], capture_output=True, text=True, timeout=60)


@pytest.fixture
def tree(tmp_path):
    """A copy of src/ and the layer order, to break on purpose."""
    shutil.copytree(os.path.join(SRC, "src"), tmp_path / "src")
    (tmp_path / "tools").mkdir()
    shutil.copy(os.path.join(SRC, "tools", "layers.txt"), tmp_path / "tools" / "layers.txt")
    return tmp_path


def test_the_tree_includes_downward_only():
    r = check(SRC)
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_upward_include_fails(tree):
    # The string helpers (base) reaching for the signal handler (the top).
    path = tree / "src" / "core" / "base" / "str.cpp"
    path.write_text('#include "core/signal/handler.h"\n' + path.read_text())
    r = check(tree)
    assert r.returncode == 1
    assert "src/core/base/str.cpp:1: includes core/signal/handler.h (core/signal), above core/base" in r.stdout


def test_a_data_record_may_not_include_a_layer_above_it(tree):
    path = tree / "src" / "core" / "frames.h"
    path.write_text(path.read_text().replace("#pragma once\n", '#pragma once\n#include "core/modules/modules.h"\n'))
    r = check(tree)
    assert r.returncode == 1 and "src/core/frames.h" in r.stdout, r.stdout


def test_the_crash_path_may_not_reach_into_the_offline_side(tree):
    path = tree / "src" / "core" / "write" / "report_writer.cpp"
    path.write_text('#include "report/report.h"\n' + path.read_text())
    r = check(tree)
    assert r.returncode == 1
    assert "src/core/write/report_writer.cpp:1: includes report/report.h (report), above core/write" in r.stdout


def test_a_folder_outside_the_order_fails(tree):
    (tree / "src" / "core" / "misc").mkdir()
    (tree / "src" / "core" / "misc" / "thing.cpp").write_text("int x;\n")
    r = check(tree)
    assert r.returncode == 1 and "src/core/misc/thing.cpp: its folder is not in the layer order" in r.stdout


def test_a_bad_order_file_is_a_usage_error(tree):
    (tree / "tools" / "layers.txt").write_text("core/base\ncore/base\n")
    r = check(tree)
    assert r.returncode == 2 and "named twice" in r.stderr


def test_no_source_file_over_600_lines():
    long = {os.path.relpath(p, SRC): n for p in sources()
            if (n := sum(1 for _ in open(p, encoding="utf-8", errors="replace"))) > MAX_LINES}
    assert not long, long


def test_no_file_name_used_twice_under_src():
    seen = {}
    for p in sources():
        seen.setdefault(os.path.basename(p), []).append(os.path.relpath(p, SRC))
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, twice


def test_design_md_names_every_crash_path_file():
    # The file tables of doc/design.md (rows "| `a.h`, `a.cpp` | what |",
    # paths relative to src/core) against the folders: nothing missing,
    # nothing stale.
    text = open(os.path.join(SRC, "doc", "design.md"), encoding="utf-8").read()
    named = set()
    for cell in re.findall(r"^\| ((?:`[\w/]+\.(?:h|cpp)`(?:, )?)+) \|", text, re.M):
        named |= {n for n in re.findall(r"`([\w/]+\.(?:h|cpp))`", cell) if not n.startswith("src/")}
    core = os.path.join(SRC, "src", "core")
    actual = {os.path.relpath(p, core) for p in sources() if p.startswith(core + os.sep)}
    assert named, "no file table in doc/design.md"
    assert not actual - named, ("not in doc/design.md", sorted(actual - named))
    assert not named - actual, ("in doc/design.md but gone", sorted(named - actual))
