# Fuzz targets (tests/fuzz): without FT_FUZZ each runs as a deterministic
# regression test over its seed corpus and a fixed number of mutations; with
# -DFT_FUZZ=ON (clang) they are also built as libFuzzer binaries
# (fuzz_<target>_libfuzzer) for open-ended runs.
option(FT_FUZZ "Build libFuzzer binaries of the fuzz targets (clang)" OFF)
set(FT_FUZZ_MUTATIONS_request 50000)
set(FT_FUZZ_MUTATIONS_keys 2000)
set(FT_FUZZ_MUTATIONS_index 20000)
set(FT_FUZZ_MUTATIONS_frame 300000)
foreach(target request keys index frame)
  ft_test(fuzz_${target} SOURCES fuzz/fuzz_${target}.c fuzz/driver.c
          ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${target} ${FT_FUZZ_MUTATIONS_${target}} 1
          TIMEOUT 300)
  if(FT_FUZZ)
    add_executable(fuzz_${target}_libfuzzer fuzz/fuzz_${target}.c)
    target_include_directories(fuzz_${target}_libfuzzer PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(fuzz_${target}_libfuzzer PRIVATE ft_router ft_shard ft_shard_internal)
    target_compile_options(fuzz_${target}_libfuzzer PRIVATE -fsanitize=fuzzer,address)
    target_link_options(fuzz_${target}_libfuzzer PRIVATE -fsanitize=fuzzer,address)
  endif()
endforeach()
