# libFuzzer targets of the symbolizer, included from fuzz/CMakeLists.txt
# when FAULTLINE_FUZZ is on. Configure a separate build with clang:
#   CXX=clang++-14 CC=clang-14 cmake -S . -B build-fuzz -DFAULTLINE_FUZZ=ON
#   cmake --build build-fuzz --target symbolize_elf_fuzzer symbolize_report_fuzzer
# test/symbolize/CMakeLists.txt registers the short ctest runs (label: fuzz);
# doc/symbolize.md has the longer run.
get_target_property(FAULTLINE_SYMBOLIZE_SOURCES faultline_symbolize SOURCES)
set(FAULTLINE_SYM_FUZZ_DIR ${PROJECT_BINARY_DIR}/fuzz-symbolize)
set(FAULTLINE_SYM_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined)

# An instrumented copy of the library, so that the normal one stays plain.
# The PLT stub names it shares with the crash path are instrumented too.
add_library(faultline_symbolize_fuzzing STATIC ${FAULTLINE_SYMBOLIZE_SOURCES}
                                               ${PROJECT_SOURCE_DIR}/src/core/modules/elf_plt.cpp)
target_include_directories(faultline_symbolize_fuzzing PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(faultline_symbolize_fuzzing PUBLIC PkgConfig::LIBDW PkgConfig::LIBELF
                                                         fmt::fmt nlohmann_json::nlohmann_json)
target_compile_options(faultline_symbolize_fuzzing PRIVATE -fsanitize=fuzzer-no-link
                                                           ${FAULTLINE_SYM_FUZZ_FLAGS})
faultline_warnings(faultline_symbolize_fuzzing)

# The ELF seed: a small program with DWARF, copied into the seed corpus.
add_executable(symbolize_fuzz_seed ${PROJECT_SOURCE_DIR}/fuzz/symbolize_seed.c)
target_compile_options(symbolize_fuzz_seed PRIVATE -O2 -g)
file(MAKE_DIRECTORY ${FAULTLINE_SYM_FUZZ_DIR}/seed-elf ${FAULTLINE_SYM_FUZZ_DIR}/corpus-elf
     ${FAULTLINE_SYM_FUZZ_DIR}/corpus-report)
add_custom_command(TARGET symbolize_fuzz_seed POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:symbolize_fuzz_seed> ${FAULTLINE_SYM_FUZZ_DIR}/seed-elf/)

foreach(kind elf report)
  set(t symbolize_${kind}_fuzzer)
  add_executable(${t} ${PROJECT_SOURCE_DIR}/fuzz/${t}.cpp)
  set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FAULTLINE_SYM_FUZZ_DIR})
  target_link_libraries(${t} PRIVATE faultline_symbolize_fuzzing)
  target_compile_options(${t} PRIVATE -fsanitize=fuzzer ${FAULTLINE_SYM_FUZZ_FLAGS})
  target_link_options(${t} PRIVATE -fsanitize=fuzzer ${FAULTLINE_SYM_FUZZ_FLAGS})
  faultline_warnings(${t})
  add_dependencies(${t} symbolize_fuzz_seed)
endforeach()
