"""The Python package as a user gets it: `pip wheel --no-build-isolation`
from a clean copy of the source (offline, Debian's setuptools/wheel/pip),
installed into a fresh virtual environment; then the crashing example with
faultline.enable() and with `python -m faultline run`, and the installed
`faultline` command renders the report.

The wheel reuses this build tree's compiled library and command
(FAULTLINE_BUILD_DIR), so the test does not compile everything again;
setup.py's own CMake configure-and-build is the same code path with a fresh
directory."""
import json
import os
import shutil
import signal
import subprocess
import zipfile

import pytest

import fltest
from pkgtest import SYSTEM_PYTHON, python_frames

EXAMPLE = os.path.join(fltest.SOURCE, "examples", "python-crash", "train.py")


def clean_copy(dest):
    """The files a clean checkout has: git's tracked and untracked-not-ignored
    files, or (no git) the tree without build folders."""
    try:
        files = subprocess.run(["git", "-C", fltest.SOURCE, "ls-files", "-z", "--cached",
                                "--others", "--exclude-standard"], capture_output=True,
                               check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(fltest.SOURCE, dest, ignore=shutil.ignore_patterns("build*", ".git"))
        return
    for rel in filter(None, files):
        src = os.path.join(fltest.SOURCE, rel)
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    clean_copy(str(src))
    out = tmp_path_factory.mktemp("wheels")
    env = dict(os.environ, FAULTLINE_BUILD_DIR=fltest.BUILD, PIP_NO_INDEX="1")
    p = subprocess.run([SYSTEM_PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                        "-w", str(out), str(src)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    (whl,) = out.glob("faultline-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(root)], check=True, capture_output=True)
    py = root / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return root


def venv_env(root):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FAULTLINE_", "PYTHON")) and k != "LD_PRELOAD"}
    env["PATH"] = str(root / "bin") + os.pathsep + env.get("PATH", "")
    return env


def test_wheel_contents(wheel):
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = {i.filename: i for i in z.infolist()}
    for rel in ["faultline/__init__.py", "faultline/__main__.py", "faultline/_torch.py",
                "faultline/_bundle/lib/libfaultline.so", "faultline/_bundle/bin/faultline",
                "_faultline_boot.py", "faultline-boot.pth"]:
        assert rel in names, rel
    assert info["faultline/_bundle/bin/faultline"].external_attr >> 16 & 0o111
    entry = [n for n in names if n.endswith("entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        assert "faultline = faultline._launcher:main" in z.read(entry[0]).decode()


def test_startup_hook_waits_for_torch(venv, tmp_path):
    # Installed, faultline-boot.pth runs _faultline_boot at start-up: under the
    # preload it watches for torch and imports faultline then, not before.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("__version__ = '2.99.0'\n")
    code = ("import sys; before = 'faultline' in sys.modules; import torch; "
            "print(before, 'faultline' in sys.modules)")
    env = venv_env(venv)
    env["PYTHONPATH"] = str(tmp_path)
    lib = subprocess.run([str(venv / "bin" / "python"), "-c", "import faultline._native as n; print(n.library_path())"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()

    def imports(**extra):
        p = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=dict(env, **extra),
                           capture_output=True, text=True, cwd="/", timeout=60)
        return p.stdout.split(), p.stdout + p.stderr

    got, out = imports(LD_PRELOAD=lib)
    assert got == ["False", "True"], out
    got, out = imports()
    assert got == ["False", "False"], out
    # Preloaded under another name (a copy, as /etc/ld.so.preload setups and
    # bundles name it): the hook finds the library by its symbols.
    renamed = tmp_path / "crashreport.so"
    shutil.copyfile(lib, renamed)
    got, out = imports(LD_PRELOAD=str(renamed), FAULTLINE_DIR=str(tmp_path))
    assert got == ["False", "True"], out
    # Another library preloaded: faultline is not imported.
    other = next(c for c in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6")
                 if os.path.exists(c))
    got, out = imports(LD_PRELOAD=other)
    assert got == ["False", "False"], out


def test_installed_package_uses_its_own_library(venv):
    code = ("import faultline, faultline._native as n; "
            "print(n.library_path()); print(n.cli_path())")
    p = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=venv_env(venv),
                       capture_output=True, text=True, cwd="/", check=True)
    lib, cli = p.stdout.split()
    assert lib.startswith(str(venv)) and cli.startswith(str(venv))


def run_example(venv, tmp_path, args):
    reports = tmp_path / "reports"
    reports.mkdir()
    env = venv_env(venv)
    env["FAULTLINE_DIR"] = str(reports)
    p = subprocess.run([str(venv / "bin" / "python"), *args], env=env, capture_output=True,
                       text=True, cwd=str(tmp_path), timeout=120)
    paths = sorted(reports.glob("faultline-*.json"))
    return p, paths


def check_example_report(venv, path):
    rep = fltest.validate(json.loads(path.read_text()))
    names = [f[2] for f in python_frames(fltest.crashed_thread(rep))]
    assert names[:4] == ["native_kernel", "train_step", "train", "<module>"], names
    assert any(t.get("name") == "data-loader" or len(t["frames"]) for t in rep["threads"]
               if not t["crashed"])
    # The installed command renders it.
    show = subprocess.run([str(venv / "bin" / "faultline"), "show", str(path)],
                          env=venv_env(venv), capture_output=True, text=True)
    assert show.returncode == 0, show.stderr
    assert "native_kernel" in show.stdout and "SIGSEGV" in show.stdout
    return rep


def test_example_with_enable(venv, tmp_path):
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import ctypes, faultline._native as n; ctypes.CDLL(n.library_path())"],
                       env=venv_env(venv), capture_output=True, text=True)
    if r.returncode != 0 and "static TLS" in r.stderr:
        pytest.xfail("this libfaultline.so cannot be loaded after start-up")
    p, paths = run_example(venv, tmp_path, [EXAMPLE, "--faultline"])
    assert p.returncode == -signal.SIGSEGV, p.stderr
    assert len(paths) == 1, p.stderr
    rep = check_example_report(venv, paths[0])
    assert "/_bundle/lib/libfaultline.so" in " ".join(m["path"] for m in rep["modules"])


def test_example_with_python_m_faultline_run(venv, tmp_path):
    p, paths = run_example(venv, tmp_path, ["-m", "faultline", "run", EXAMPLE])
    assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), p.stderr
    assert len(paths) == 1, p.stderr
    check_example_report(venv, paths[0])


def test_faultline_console_script(venv):
    p = subprocess.run([str(venv / "bin" / "faultline"), "--version"], env=venv_env(venv),
                       capture_output=True, text=True)
    assert p.returncode == 0 and "0." in p.stdout + p.stderr, p.stdout + p.stderr
