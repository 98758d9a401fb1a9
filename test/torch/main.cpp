// doctest main of torch_unit_tests, plus one mode for the pytest side:
//   torch_unit_tests --elastic-file PATH   writes a sample TORCHELASTIC_ERROR_FILE
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>

int write_sample_elastic_file(const char* path);  // torchelastic_test.cpp

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--elastic-file") == 0) {
    return write_sample_elastic_file(argv[2]);
  }
  doctest::Context context(argc, argv);
  return context.run();
}
