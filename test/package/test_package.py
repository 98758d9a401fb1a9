"""`cmake --install` gives a usable package: a consumer project builds against
the installed tree with find_package(faultline) and with pkg-config, runs,
and its crash is reported. Only the public API is exported."""
import os
import shutil
import signal
import subprocess

import pytest

import fltest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", fltest.BUILD, "--prefix", str(p)], check=True,
                   capture_output=True)
    return p


def crash_and_check(exe, prefix, tmp_path):
    env = {"LD_LIBRARY_PATH": str(prefix / "lib"), "FAULTLINE_DIR": str(tmp_path)}
    ok = fltest.run([exe], preload=False, env=env, report_dir=str(tmp_path))
    assert ok.returncode == 0 and ok.stdout.startswith("faultline 0.")
    r = fltest.run([exe, "crash"], preload=False, env=env, report_dir=str(tmp_path))
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert rep["annotations"]["consumer"] == "yes"
    assert fltest.crashed_thread(rep)["frames"][0]["symbol"] == "main"


def test_installed_tree_layout(prefix):
    for rel in ["include/faultline/faultline.h", "include/faultline/faultline.hpp",
                "lib/libfaultline.so", "lib/cmake/faultline/faultlineConfig.cmake",
                "lib/pkgconfig/faultline.pc", "share/faultline/faultline-1.schema.json"]:
        assert (prefix / rel).exists(), rel
    if os.path.exists(fltest.CLI):
        assert (prefix / "bin" / "faultline").exists()


def test_find_package_consumer(prefix, tmp_path):
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", os.path.join(HERE, "consumer"), "-B", str(build),
                    f"-DCMAKE_PREFIX_PATH={prefix}"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    out = tmp_path / "reports"
    out.mkdir()
    crash_and_check(str(build / "consumer"), prefix, out)


def test_pkg_config_consumer(prefix, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "faultline"], env=env,
                           check=True, capture_output=True, text=True).stdout.split()
    exe = tmp_path / "consumer_pc"
    subprocess.run(["g++", "-std=c++17", "-O1", os.path.join(HERE, "consumer", "main.cpp"),
                    "-o", str(exe)] + flags, check=True)
    out = tmp_path / "reports"
    out.mkdir()
    crash_and_check(str(exe), prefix, out)


def test_only_the_public_api_is_exported():
    syms = subprocess.run(["nm", "-D", "--defined-only", fltest.LIB], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    names = sorted({l.split()[-1] for l in syms if l.strip()} - {"FAULTLINE"})
    interposed = {"pthread_create", "sigaction", "signal", "dlopen", "syscall", "prctl"}
    assert names and all(n.startswith("faultline_") or n in interposed for n in names), names
    # Read by `faultline dump` by ptrace: where the crash keys are.
    assert "faultline_remote_tables" in names, names
