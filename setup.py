"""Builds the native parts of the faultline wheel with CMake.

`pip wheel --no-build-isolation .` (or `pip install .`) runs this: build_py
configures and builds the `faultline` library and `faultline_cli` targets
(Release, no tests) in build-wheel/, or in FAULTLINE_BUILD_DIR when that
names an already configured build tree, and copies libfaultline.so and the
`faultline` command into the package as faultline/_bundle/{lib,bin}, and
faultline-boot.pth (the start-up hook) to the wheel's root. The
wheel is tagged py3-none-<platform>: nothing in it depends on the Python
version. CMAKE_ARGS adds arguments to the configure step."""
import os
import re
import shlex
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # building without the wheel package (e.g. a plain install)
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(HERE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(faultline VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("no project(faultline VERSION ...) in CMakeLists.txt")
    return m.group(1)


def cmake_build():
    """Builds the library and the command; returns the build directory."""
    build = os.environ.get("FAULTLINE_BUILD_DIR")
    if not build:
        build = os.path.join(HERE, "build-wheel")
        args = ["cmake", "-S", HERE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                "-DFAULTLINE_TESTS=OFF", "-DFAULTLINE_WERROR=OFF"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(args, check=True)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    subprocess.run(["cmake", "--build", build, "--target", "faultline", "faultline_cli",
                    "-j", jobs], check=True)
    return build


class BuildPyWithNative(build_py):
    def run(self):
        super().run()
        build = cmake_build()
        bundle = os.path.join(self.build_lib, "faultline", "_bundle")
        for sub in ("lib", "bin"):
            os.makedirs(os.path.join(bundle, sub), exist_ok=True)
        # The real file under the plain name: wheels keep no symbolic links.
        lib = os.path.realpath(os.path.join(build, "lib", "libfaultline.so"))
        shutil.copyfile(lib, os.path.join(bundle, "lib", "libfaultline.so"))
        cli = os.path.join(bundle, "bin", "faultline")
        shutil.copyfile(os.path.join(build, "bin", "faultline"), cli)
        os.chmod(cli, 0o755)
        # At the wheel's root, so it lands in site-packages, where site runs
        # it at start-up: torch.compile history without `import faultline`
        # (python/_faultline_boot.py).
        shutil.copyfile(os.path.join(HERE, "python", "faultline-boot.pth"),
                        os.path.join(self.build_lib, "faultline-boot.pth"))


class NativeDistribution(Distribution):
    """Platform-specific: installed to platlib, and the wheel's root too."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPyWithNative}

if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """Native code, but no Python extension: py3-none-<platform>."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(version=project_version(), cmdclass=cmdclass, distclass=NativeDistribution)
