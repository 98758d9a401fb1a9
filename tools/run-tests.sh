#!/usr/bin/env bash
# Builds everything and runs every test, from a fresh checkout:
#   1. dependencies (Debian packages),
#   2. clang-format check of the C++ sources,
#   3. the release build (warnings as errors) and all tests (ctest), including
#      the torch2 tests, whose Debian sid root (real PyTorch 2.x) tools/torch-root
#      makes first on a fresh machine (~5 min, cached afterwards),
#   4. the aarch64 stage: the cross build of libfaultline.so and its tests
#      under qemu-user (ctest -L aarch64, doc/aarch64.md),
#   5. an ASan+UBSan build of the offline code and its tests,
#   6. short libFuzzer runs of the report reader and the symbolizer (clang).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
started=$SECONDS

# ctest in DIR with ARGS; afterwards the five slowest tests of that stage, so a
# test that creeps towards its time limit is seen before it fails.
run_ctest() {
  local dir=$1 log rc
  shift
  log="$dir/ctest-output.log"
  set +e
  (cd "$dir" && ctest "$@") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "-- five slowest tests of this stage (seconds):"
  sed -nE 's/^.*Test +#[0-9]+: ([^ ]+) .*[^0-9]([0-9]+\.[0-9]+) sec$/\2 \1/p' "$log" | sort -rn | head -5 | sed 's/^/   /'
  return "$rc"
}
"$top/tools/install-deps.sh"

echo "== clang-format"
mapfile -t sources < <(cd "$top" && git ls-files '*.cpp' '*.h' '*.hpp' | grep -vE '^test/([^/]+/)?programs/')
(cd "$top" && clang-format --dry-run --Werror "${sources[@]}")

echo "== build"
cmake -S "$top" -B "$top/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFAULTLINE_WERROR=ON
cmake --build "$top/build" -j"$jobs"

echo "== tests"
run_ctest "$top/build" --output-on-failure -j"$jobs" --timeout 900 -LE aarch64

echo "== aarch64 (cross build, tests under qemu-user)"
"$top/tools/setup-qemu-aarch64" || echo "aarch64: binfmt_misc not set up; the tests launch qemu-aarch64-static themselves"
cmake -S "$top" -B "$top/build-arm64" -DFAULTLINE_TESTS=OFF \
  -DCMAKE_TOOLCHAIN_FILE="$top/cmake/toolchains/aarch64-linux-gnu.cmake"
cmake --build "$top/build-arm64" -j"$jobs" --target faultline
"$top/tools/arm64-root" make  # arm64 CPython for aarch64_python (cached; ~22 min the first time)
FAULTLINE_ARM64_BUILD="$top/build-arm64" run_ctest "$top/build" --output-on-failure -L aarch64 \
  --timeout 900

echo "== sanitizers (ASan+UBSan) on the offline code and its tests"
cmake -S "$top" -B "$top/build-asan" -DCMAKE_BUILD_TYPE=Debug -DFAULTLINE_SANITIZE=ON \
  -DFAULTLINE_WERROR=ON
cmake --build "$top/build-asan" -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 run_ctest "$top/build-asan" --output-on-failure -j"$jobs" \
  -L 'offline|cli|symbolize|torch' -LE torch2 --timeout 900

echo "== fuzzing (libFuzzer, short runs; doc/symbolize.md and doc/cli.md give the long ones)"
CC=clang-14 CXX=clang++-14 cmake -S "$top" -B "$top/build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFAULTLINE_FUZZ=ON -DFAULTLINE_WERROR=ON
cmake --build "$top/build-fuzz" -j"$jobs" --target symbolize_elf_fuzzer symbolize_report_fuzzer \
  symbolize_fuzz_seed report_fuzz crash_elf_fuzzer
run_ctest "$top/build-fuzz" --output-on-failure -L fuzz --timeout 300
mkdir -p "$top/build-fuzz/corpus-report"
"$top/build-fuzz/fuzz/report_fuzz" -seed=1 -runs=20000 -timeout=10 \
  "$top/build-fuzz/corpus-report" "$top/fuzz/report_corpus" "$top/test/data"
echo "fuzz: passed"
echo "run-tests: all stages passed in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
