"""The options ABI: programs built against older layouts of faultline_options
run against this tree's library. Layout 1's program installs, its settings
take effect and the field it does not know (minidump) gets its default, the
environment included; 0.1.0's unsized layout still works through its own
faultline_options_init; sizes that are no layout's are refused, and so is a
newer, bigger struct that sets fields this library does not know."""
import errno
import glob
import os
import signal

import pytest

import fltest

def consumer(layout):
    return fltest.program(f"abi_consumer_{layout}")


def crash(layout, tmp_path, env=None, mode="crash"):
    """The report of layout's consumer crashing; whether it wrote a minidump."""
    d = str(tmp_path)
    r = fltest.run([consumer(layout), mode, d], preload=False, env=env, report_dir=d)
    assert r.stdout == "install 0\n", r.stderr
    assert r.signal == signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)  # one report, in the report_dir the program set
    t = fltest.crashed_thread(rep)
    # max_frames = 7 took effect: the 40-deep stack is cut there.
    assert len(t["frames"]) == 7 and t["frames_truncated"] and t["frames_total"] > 40
    assert fltest.native_symbols(t)[0] == "consumer_recurse"
    dumps = [os.path.basename(p) for p in glob.glob(os.path.join(d, "*.dmp"))]
    assert dumps == ([rep["minidump"]] if rep["minidump"] else [])
    return rep["minidump"] is not None


@pytest.mark.parametrize("layout", ["v0", "v1"])
def test_older_layout_installs_and_unknown_fields_get_defaults(layout, tmp_path):
    assert not crash(layout, tmp_path)  # minidump's default: off


@pytest.mark.parametrize("layout", ["v0", "v1"])
def test_older_layout_defaults_come_from_the_environment(layout, tmp_path):
    assert crash(layout, tmp_path, env={"FAULTLINE_MINIDUMP": "1"})


def test_a_0_1_program_installs_a_copy_of_its_initialised_struct(tmp_path):
    # 0.1.0's struct has no size; the library knew it only by the address
    # faultline_options_init() filled, so a copy was refused with EINVAL.
    assert not crash("v0", tmp_path, mode="copy")


def test_a_newer_struct_left_uninitialised_is_refused_even_after_a_0_1_init(tmp_path):
    # Read in 0.1.0's layout it would be 8 bytes out of place (its report_dir
    # pointer taken for the signal set).
    rc, err = install_rc("v1", "zeroed-after-v0", str(tmp_path))
    assert rc == -errno.EINVAL and "faultline_options_init()" in err


def test_current_layout_sets_the_new_field(tmp_path):
    assert crash("current", tmp_path)


def install_rc(layout, *args):
    r = fltest.run([consumer(layout), *args], preload=False)
    assert r.returncode == 0, r.stderr
    what, rc = r.stdout.split()
    return int(rc), r.stderr


@pytest.mark.parametrize("size", [0, 8, 95, 100, 103, 5000, 1 << 40])
def test_a_size_that_is_no_layouts_is_refused(size):
    rc, err = install_rc("v1", "size", str(size))
    assert rc == -errno.EINVAL
    assert f"faultline_install: faultline_options.size is {size} (" in err


def test_an_init_with_a_bad_size_writes_nothing():
    rc, err = install_rc("v1", "init-size", "50")
    assert rc == -errno.EINVAL and "faultline_options.size is 50" in err


@pytest.mark.parametrize("size", [96, 104])
def test_each_published_layout_size_installs(size):
    assert install_rc("v1", "size", str(size))[0] == 0


def test_a_0_1_struct_not_from_options_init_is_refused(tmp_path):
    rc, err = install_rc("v0", "uninit", str(tmp_path))
    assert rc == -errno.EINVAL and "faultline_options_init()" in err


def test_a_bigger_struct_installs_when_its_new_fields_are_unset():
    assert install_rc("current", "bigger", "zero")[0] == 0
    rc, err = install_rc("current", "bigger", "set")
    assert rc == -errno.E2BIG and "too old" in err
