# The synthetic workload generator and the benchmark tools.
ft_test(workload_test SOURCES workload_test.c TIMEOUT 300)
target_link_libraries(workload_test PRIVATE ft_workload)

# The CLI end to end, and (with libmarisa) the MARISA-Int baseline checked
# equal to the CPU engine.
if(TARGET ft_marisa_bench)
  add_test(NAME bench_cli_test COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bench_cli_test.sh
           $<TARGET_FILE:flashtrie> $<TARGET_FILE:ft_marisa_bench>)
else()
  add_test(NAME bench_cli_test COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bench_cli_test.sh
           $<TARGET_FILE:flashtrie>)
endif()
set_tests_properties(bench_cli_test PROPERTIES TIMEOUT 300)
