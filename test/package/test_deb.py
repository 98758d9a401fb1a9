"""`cpack -G DEB` gives a Debian package a server can install: the library,
headers, CMake and pkg-config files, the faultline command, its man page and
the schema, with its dependencies declared. The package is unpacked with
`dpkg -x` into a temporary root (the test machine is left as it was) and the
consumer example is built against it with find_package and pkg-config, run,
and its crash reported."""
import os
import signal
import subprocess

import pytest

import fltest
from test_package import crash_and_check

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    config = os.path.join(fltest.BUILD, "CPackConfig.cmake")
    if not os.path.exists(config):
        pytest.fail("no CPackConfig.cmake in the build tree (cmake/Packaging.cmake not included)")
    p = subprocess.run(["cpack", "-G", "DEB", "--config", config, "-B", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    (path,) = out.glob("faultline_*_amd64.deb")
    return path


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    r = tmp_path_factory.mktemp("root")
    subprocess.run(["dpkg", "-x", str(deb), str(r)], check=True)
    return r


def deb_field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_control_fields(deb):
    assert deb_field(deb, "Package") == "faultline"
    assert deb_field(deb, "Architecture") == "amd64"
    depends = deb_field(deb, "Depends")
    for lib in ("libstdc++6", "libc6", "libdw1"):
        assert lib in depends, depends
    # Nothing links libunwind (the CLI's ptrace dump unwinds with faultline's
    # own unwinder); the library loads it only when FAULTLINE_UNWINDER asks.
    assert "libunwind" not in depends, depends
    assert deb_field(deb, "Recommends") == "libunwind8"


def test_the_library_needs_libc_only(root):
    # The preload goes into every process: libunwind is loaded only when
    # FAULTLINE_UNWINDER chooses it, libstdc++ never (the program's own copy).
    dynamic = subprocess.run(["readelf", "-d", str(root / "usr/lib/libfaultline.so")],
                             capture_output=True, text=True, check=True).stdout
    needed = sorted(line.split("[")[1].rstrip("]") for line in dynamic.splitlines()
                    if "(NEEDED)" in line)
    assert all(n.startswith(("libc.so", "ld-linux")) for n in needed), needed


def test_contents(root):
    for rel in ["usr/lib/libfaultline.so", "usr/include/faultline/faultline.h",
                "usr/include/faultline/faultline.hpp", "usr/lib/cmake/faultline/faultlineConfig.cmake",
                "usr/lib/pkgconfig/faultline.pc", "usr/bin/faultline",
                "usr/share/man/man1/faultline.1", "usr/share/faultline/faultline-1.schema.json"]:
        assert (root / rel).exists(), rel
    # Nothing of the build or the tests leaks in.
    every = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
    assert all(p.startswith("usr/") for p in every), every
    assert not [p for p in every if "test" in os.path.basename(p)], every


def check_consumer(exe, root, reports):
    # The same checks as for `cmake --install`, with the package's /usr as prefix.
    crash_and_check(exe, root / "usr", reports)
    # The packaged command reads the report.
    (path,) = reports.glob("faultline-*.json")
    show = subprocess.run([str(root / "usr" / "bin" / "faultline"), "show", str(path)],
                          capture_output=True, text=True)
    assert show.returncode == 0 and "SIGSEGV" in show.stdout, show.stderr


def test_consumer_with_find_package(root, tmp_path):
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", os.path.join(HERE, "consumer"), "-B", str(build),
                    f"-DCMAKE_PREFIX_PATH={root / 'usr'}"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    reports = tmp_path / "reports"
    reports.mkdir()
    check_consumer(str(build / "consumer"), root, reports)


def test_consumer_with_pkg_config(root, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(root / "usr" / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "faultline"], env=env,
                           check=True, capture_output=True, text=True).stdout.split()
    exe = tmp_path / "consumer_pc"
    subprocess.run(["g++", "-std=c++17", "-O1", os.path.join(HERE, "consumer", "main.cpp"),
                    "-o", str(exe)] + flags, check=True)
    reports = tmp_path / "reports"
    reports.mkdir()
    check_consumer(str(exe), root, reports)


def test_packaged_run_preloads_the_packaged_library(root, tmp_path):
    cli = str(root / "usr" / "bin" / "faultline")
    p = subprocess.run([cli, "run", "--dir", str(tmp_path), "--", fltest.program("crasher"),
                        "null-read"], capture_output=True, text=True, timeout=60)
    assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), p.stderr
    (path,) = tmp_path.glob("faultline-*.json")
    import json
    rep = fltest.validate(json.loads(path.read_text()))
    libs = [m["path"] for m in rep["modules"] if "libfaultline" in m["path"]]
    assert libs and libs[0].startswith(str(root)), libs
