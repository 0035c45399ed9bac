# The synthetic workload generator and the benchmark tools.
ft_test(workload_test SOURCES workload_test.c TIMEOUT 300)
target_link_libraries(workload_test PRIVATE ft_workload)
