# Tests of the CPU engine, the request validator, the JSON Lines codec and
# the search command.
ft_test(search_ref_test SOURCES search_ref_test.c TIMEOUT 300)
target_compile_options(search_ref_test PRIVATE -ffp-contract=off)
