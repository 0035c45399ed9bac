ft_test(trie_core_test SOURCES trie_core_test.c)
