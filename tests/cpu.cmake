# Tests of the CPU engine, the request validator, the JSON Lines codec and
# the search command.
ft_test(search_ref_test SOURCES search_ref_test.c TIMEOUT 300)
target_compile_options(search_ref_test PRIVATE -ffp-contract=off)
add_executable(make_index make_index.c)
target_include_directories(make_index PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(make_index PRIVATE ft_shard ft_shard_internal)
add_test(NAME cli_search_test
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_search_test.sh
                 $<TARGET_FILE:flashtrie> $<TARGET_FILE:make_index>
                 ${CMAKE_CURRENT_SOURCE_DIR}/data)
set_tests_properties(cli_search_test PROPERTIES TIMEOUT 120)
ft_test(request_test SOURCES request_test.c TIMEOUT 60)
