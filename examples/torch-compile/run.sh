#!/bin/sh
# Runs the repeated torch.compile ModuleList job under faultline and explains
# the report if it crashed. Usage: examples/torch-compile/run.sh [BUILD_DIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
LD_PRELOAD="$build/lib/libfaultline.so" FAULTLINE_DIR="$out" PYTHONPATH="$root/python" \
  python3 "$here/modulelist_recompile.py"
status=$?
for report in "$out"/faultline-*.json; do
  [ -e "$report" ] || break
  echo "report: $report"
  if [ -x "$build/bin/faultline" ]; then "$build/bin/faultline" explain "$report"; fi
done
exit $status
