"""The aarch64 side of the tests: the cross toolchain, the cross-built
library (built on first use), and running aarch64 programs under
qemu-aarch64-static, launched explicitly so binfmt_misc is not needed."""
import os
import resource
import shutil
import subprocess

import pytest

TRIPLE = "aarch64-linux-gnu"
CC = TRIPLE + "-gcc"
SYSROOT = "/usr/" + TRIPLE
QEMU = "qemu-aarch64-static"
SOURCE = os.environ["FAULTLINE_SOURCE"]
BUILD = os.environ.get("FAULTLINE_ARM64_BUILD") or os.environ["FAULTLINE_BUILD"] + "-arm64"


def require_tools():
    """Skips the test, saying why, where the cross tools are not installed."""
    for tool, package in ((CC, "gcc-aarch64-linux-gnu"), (QEMU, "qemu-user-static")):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (apt-get install {package}; tools/install-deps.sh)")


def library():
    """The cross-built libfaultline.so, built first if it is not there."""
    require_tools()
    lib = os.path.join(BUILD, "lib", "libfaultline.so")
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", SOURCE, "-B", BUILD, "-DFAULTLINE_TESTS=OFF",
                        "-DCMAKE_TOOLCHAIN_FILE=" + os.path.join(
                            SOURCE, "cmake", "toolchains", "aarch64-linux-gnu.cmake")],
                       check=True, capture_output=True)
    # Always: an up-to-date build is a no-op.
    subprocess.run(["cmake", "--build", BUILD, "--target", "faultline", "-j2"], check=True,
                   capture_output=True)
    return lib


# The crash programs' builds: -O2 without frame pointers, without and with
# pointer authentication.
VARIANTS = {
    "nofp": ["-O2", "-fomit-frame-pointer"],
    "pac": ["-O2", "-fomit-frame-pointer", "-mbranch-protection=standard"],
}


def compile_variants(tmp_path_factory, source, extra=()):
    """source (a file of test/aarch64) built in each of VARIANTS: {variant: path}."""
    require_tools()
    d = tmp_path_factory.mktemp("arm64-programs")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), source)
    stem = os.path.splitext(source)[0]
    return {v: compile_program(src, str(d / f"{stem}-{v}"), flags + list(extra))
            for v, flags in VARIANTS.items()}


def compile_program(src, out, flags):
    require_tools()
    subprocess.run([CC, "-g", "-no-pie", "-pthread", *flags, src, "-o", out], check=True)
    return out


def _core_limit():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def run(argv, cwd, preload=None, env=None, core=False, timeout=120):
    """Runs an aarch64 program under qemu (its sysroot as the loader's
    prefix); returns the CompletedProcess. preload: a library to preload."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e["QEMU_LD_PREFIX"] = SYSROOT
    if preload:
        e["LD_PRELOAD"] = preload  # qemu-aarch64-static is static: only the guest reads it
    e.update(env or {})
    return subprocess.run([QEMU, *argv], cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_core_limit if core else None)
