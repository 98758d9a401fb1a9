"""AOTInductor: a model compiled ahead of time into a package (aoti_compile.py)
and served by a C++ program linking libtorch and libfaultline
(aoti_server.cpp). Two good requests, then a poisoned one whose index is far
out of range: the generated kernel reads unmapped memory. The report must
name the kernel, label the AOTInductor frames (the generated runtime in the
package's library, libtorch's runner), carry the request's crash key, and
`faultline symbolize` must point at the generated C++ source: the kernel's
line, and the wrapper's line that calls the kernel."""
import json
import os

import rootrun

import fltest

KERNEL = "cpp_fused_index_mul_relu_0"


def source_line(path, line):
    with open(path) as f:
        return f.read().splitlines()[line - 1]


def test_aoti_server_crash_in_generated_kernel(tmp_path):
    pkg = str(tmp_path / "gather.pt2")
    c = rootrun.run(["python3", os.path.join(rootrun.HERE, "aoti_compile.py"), pkg], tmp_path, preload=False,
                    timeout=600)
    assert c.returncode == 0 and os.path.exists(pkg), c.stdout + c.stderr
    print(c.stdout.strip().splitlines()[-1])

    exe = str(tmp_path / "aoti_server")
    b = rootrun.run(["g++", "-O1", "-g", "-fno-omit-frame-pointer", "-std=c++20",
                     "-I", os.path.join(fltest.SOURCE, "include"), "-o", exe,
                     os.path.join(rootrun.HERE, "aoti_server.cpp"), fltest.LIB,
                     "-Wl,-rpath," + os.path.dirname(fltest.LIB), "-ltorch", "-ltorch_cpu", "-lc10"],
                    tmp_path, preload=False, timeout=600)
    assert b.returncode == 0, b.stderr

    (tmp_path / "requests").write_text("r1 1 2\nr2 3 4\npoison-7 1099511627776 2\nr4 5 6\n")
    # TMPDIR: the loader extracts the package's library there (kept, for symbolize).
    r = rootrun.run(["sh", "-c", 'exec "$0" "$1" < "$2"', exe, pkg, str(tmp_path / "requests")], tmp_path,
                    preload=False, env={"TMPDIR": str(tmp_path)})
    assert r.signal == 11, (r.returncode, r.stdout, r.stderr)
    # x = 0..15: relu(2*x[1]) + relu(2*x[2]) = 6, then 2*3 + 2*4 = 14; r4 never runs.
    assert r.stdout.splitlines()[1:] == ["r1 6", "r2 14"], r.stdout
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    assert t["annotations"].get("request") == "poison-7", t["annotations"]

    native = [f for f in t["frames"] if f["kind"] == "native"]
    top = native[0]
    assert top["symbol"] == KERNEL and top["origin"] == "inductor", top
    assert "/data/aotinductor/" in top["module"] and top["module"].startswith(str(tmp_path)), top
    assert KERNEL in rep["diagnosis"]["summary"] and "Inductor-generated C++ kernel" in rep["diagnosis"]["summary"]

    def frame(part):
        found = [i for i, f in enumerate(native) if part in (f.get("symbol") or "")]
        assert found, (part, [f.get("symbol") for f in native])
        return found[0], native[found[0]]

    # Call order and labels: kernel, the generated runtime, libtorch's runner, the server.
    order = []
    for part, origin in [("AOTInductorModel8run_impl", "inductor"), ("AOTInductorModelContainerRun", "inductor"),
                         ("AOTIModelPackageLoader3run", "torch"), ("serve", "native"), ("main", "native")]:
        i, f = frame(part)
        assert f["origin"] == origin, (part, f)
        order.append(i)
    assert order == sorted(order) and order[0] > 0, order

    explain = rootrun.cli("explain", rootrun.report_path(r))
    assert "torch.generated-code" in explain, explain

    out = str(tmp_path / "symbolized.json")
    rootrun.cli("symbolize", rootrun.report_path(r), "-o", out)
    with open(out) as f:
        sym = json.load(f)
    st = fltest.crashed_thread(sym)
    snative = [f for f in st["frames"] if f["kind"] == "native"]
    k = snative[0]
    assert k["file"].endswith(".kernel.cpp") and k.get("line", 0) > 0, k
    kernel_src = open(k["file"]).read().splitlines()
    definition = next(n for n, line in enumerate(kernel_src, 1) if KERNEL + "(" in line)
    assert k["line"] > definition and "tmp" in kernel_src[k["line"] - 1], (k, kernel_src[k["line"] - 1])
    run_impl = next(f for f in snative if "AOTInductorModel8run_impl" in (f.get("symbol") or ""))
    assert run_impl["file"].endswith(".wrapper.cpp"), run_impl
    assert KERNEL + "(" in source_line(run_impl["file"], run_impl["line"]), run_impl

    # Provenance: the kernel's ATen ops and the model's lines they came from
    # (aoti_compile.py sets comment_origin), shown by show, explain and markdown.
    ik = k["inductor_kernel"]
    assert ik["name"] == KERNEL and ik["call"] == f"{run_impl['file']}:{run_impl['line']}", ik
    index_mul, relu = origin_line("index, mul"), origin_line("relu")
    got = [(o["op"], os.path.basename(o["file"]), o["line"]) for o in ik["origins"]]
    assert sorted(got) == sorted([("aten.relu.default", "aoti_compile.py", relu),
                                  ("aten.mul.Tensor", "aoti_compile.py", index_mul),
                                  ("aten.index.Tensor", "aoti_compile.py", index_mul)]), got
    want = f"in {KERNEL} (from relu at aoti_compile.py:{relu}; mul, index at aoti_compile.py:{index_mul})"
    assert f"Kernel:         {want}" in rootrun.cli("show", out)
    assert f"kernel:    {want}" in rootrun.cli("explain", out)
    assert "| Kernel | in cpp\\_fused\\_index\\_mul\\_relu\\_0 (from relu at aoti\\_compile.py" in rootrun.cli("markdown", out)


def origin_line(ops):
    with open(os.path.join(rootrun.HERE, "aoti_compile.py")) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# ORIGIN: " + ops):
                return n
    raise AssertionError("no line marked " + ops)
