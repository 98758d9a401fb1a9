#!/usr/bin/env bash
# The main example: a Python job crashes under the preload; faultline writes a
# report and the faultline command renders it.
#   examples/python-crash/run.sh [BUILD_DIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
out=${FAULTLINE_EXAMPLE_OUT:-$here/../../out/python-crash}
mkdir -p "$out"
rm -f "$out"/faultline-*.json
echo "== running examples/python-crash/train.py under LD_PRELOAD=libfaultline.so"
LD_PRELOAD="$build/lib/libfaultline.so" FAULTLINE_DIR="$out" /usr/bin/python3 "$here/train.py"
status=$?
echo "== the job exited with status $status (139 = killed by SIGSEGV, as without faultline)"
report=$(ls -t "$out"/faultline-*.json 2>/dev/null | head -n 1)
if [ -z "$report" ]; then
  echo "no report was written" >&2
  exit 1
fi
echo "== report: $report"
if [ -x "$build/bin/faultline" ]; then
  echo "== faultline show"
  "$build/bin/faultline" show --color=never "$report"
  echo "== faultline symbolize | faultline show (files and lines from DWARF)"
  "$build/bin/faultline" symbolize "$report" -o "$out/symbolized.json" &&
    "$build/bin/faultline" show --color=never "$out/symbolized.json" | head -n 40
else
  python3 -m json.tool "$report" | head -n 60
fi
[ "$status" -eq 139 ]
