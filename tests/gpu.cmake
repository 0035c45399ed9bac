# Tests of the GPU engine: they need a GPU and exit 77 (skipped) without one.
ft_test(gpu_equal_test SOURCES gpu_equal_test.c LABELS gpu TIMEOUT 900)
target_compile_options(gpu_equal_test PRIVATE -ffp-contract=off)
add_test(NAME gpu_equal_quick_test COMMAND gpu_equal_test --quick)
set_tests_properties(gpu_equal_quick_test PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
# A throwaway latency driver (not a test): CPU vs GPU engine on ~1M keys.
add_executable(gpu_latency_bench gpu_latency_bench.c)
target_link_libraries(gpu_latency_bench PRIVATE ft_router ft_shard ft_shard_internal)
