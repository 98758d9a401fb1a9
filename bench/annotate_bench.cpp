// Crash keys at high rate: nanoseconds per set, from 1 and 16 threads.
//   build/bench/bench_annotate --benchmark_repetitions=5 --benchmark_report_aggregates_only
// The baseline in the same run is a plain copy of the same bytes into a
// thread-local buffer (what a hand-rolled, unsafe-for-readers version costs).
#include <benchmark/benchmark.h>

#include <cstring>
#include <faultline/faultline.hpp>

namespace {

void BM_CopyBaseline(benchmark::State& state) {
  thread_local char buf[256];
  const char* v = "req-000123456";
  for (auto _ : state) {
    std::memcpy(buf, v, 14);
    benchmark::DoNotOptimize(buf);
  }
}
BENCHMARK(BM_CopyBaseline)->Threads(1)->Threads(16);

void BM_Annotate(benchmark::State& state) {
  for (auto _ : state) faultline::annotate("request", "req-000123456");
}
BENCHMARK(BM_Annotate)->Threads(1)->Threads(16);

void BM_ScopedAnnotation(benchmark::State& state) {
  for (auto _ : state) {
    faultline::ScopedAnnotation a("request_id", "req-000123456");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ScopedAnnotation)->Threads(1)->Threads(16);

void BM_Breadcrumb(benchmark::State& state) {
  for (auto _ : state) faultline::breadcrumb("step 123: loss 0.25");
}
BENCHMARK(BM_Breadcrumb)->Threads(1)->Threads(16);

}  // namespace

BENCHMARK_MAIN();
