#!/bin/sh
# Makes the real torch 2.x reports kept in test/data (real-torch2-*.json) again:
# jobs.py's scenarios run inside tools/torch-root's root with this build's
# library. The job runs from /tmp/job so the reports' paths are short and the
# same on every machine. Review the golden diffs afterwards
# (FAULTLINE_UPDATE_GOLDEN=1 ctest -R cli_render).
#   usage: test/torch2/make-data.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
work=/tmp/job
for scenario in inductor_kernel resume backward recompile; do
  job="jobs.py $scenario"
  # The repeated-compile pattern is the example's (compiled with backend=eager: faster, same recompiles).
  [ "$scenario" = recompile ] && job="modulelist_recompile.py --steps 5 --backend eager --static --crash"
  rm -rf "$work"
  mkdir -p "$work"
  cp "$here/jobs.py" "$top/examples/torch-compile/modulelist_recompile.py" "$work/"
  status=0
  "$top/tools/torch-root" run --bind "$build" --rw "$work" --cd "$work" -- env -i \
    PATH=/usr/bin:/bin HOME="$work" LANG=C.UTF-8 PYTHONPATH="$top/python" PYTHONDONTWRITEBYTECODE=1 \
    OMP_NUM_THREADS=1 TORCHINDUCTOR_CACHE_DIR="$work/inductor-cache" FAULTLINE_DIR="$work" \
    LD_PRELOAD="$build/lib/libfaultline.so" python3 $job || status=$?
  [ "$status" -eq 139 ] || { echo "make-data: $scenario ended with status $status, not SIGSEGV" >&2; exit 1; }
  name=$(echo "$scenario" | tr _ -)
  cp "$work"/faultline-*.json "$top/test/data/real-torch2-$name.json"
  "$build/bin/faultline" validate "$top/test/data/real-torch2-$name.json"
done
# With FAULTLINE_TRIXIE_ROOT (a root made by `FAULTLINE_TORCH_ROOT=DIR
# FAULTLINE_TORCH_ROOT_SUITE=trixie tools/torch-root make`: torch 2.6, Python
# 3.13, whose torch loads UCX): the Inductor kernel crash there, where UCX's
# error handler runs first, re-raises and returns (real-torch26-ucx-reraise).
if [ -n "${FAULTLINE_TRIXIE_ROOT:-}" ]; then
  rm -rf "$work"
  mkdir -p "$work"
  cp "$here/jobs.py" "$work/"
  status=0
  FAULTLINE_TORCH_ROOT=$FAULTLINE_TRIXIE_ROOT "$top/tools/torch-root" run --bind "$build" --rw "$work" \
    --cd "$work" -- env -i PATH=/usr/bin:/bin HOME="$work" LANG=C.UTF-8 PYTHONPATH="$top/python" \
    PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 TORCHINDUCTOR_CACHE_DIR="$work/inductor-cache" \
    FAULTLINE_DIR="$work" LD_PRELOAD="$build/lib/libfaultline.so" python3 jobs.py inductor_kernel || status=$?
  [ "$status" -eq 139 ] || { echo "make-data: trixie inductor_kernel ended with status $status" >&2; exit 1; }
  cp "$work"/faultline-*.json "$top/test/data/real-torch26-ucx-reraise.json"
  "$build/bin/faultline" validate "$top/test/data/real-torch26-ucx-reraise.json"
fi
rm -rf "$work"
