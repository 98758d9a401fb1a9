#!/usr/bin/env bash
# The main job, from a fresh checkout: install dependencies, build, then run a
# Python job that crashes under LD_PRELOAD=libfaultline.so and render its report.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tools/install-deps.sh"
cmake -S "$top" -B "$top/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$top/build" -j"$(nproc)"
"$top/examples/python-crash/run.sh" "$top/build"
