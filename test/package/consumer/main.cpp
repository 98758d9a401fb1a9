#include <cstdio>
#include <faultline/faultline.hpp>

volatile int* volatile target = nullptr;

int main(int argc, char**) {
  faultline::Options opts;
  if (faultline::install(opts) != 0) return 3;
  faultline::annotate("consumer", "yes");
  std::printf("faultline %s\n", faultline::version());
  std::fflush(stdout);
  if (argc > 1) *target = 1;
  return 0;
}
