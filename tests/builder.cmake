# The index builder (ft_build, flashtrie build) and the >2^32-bit trie.
ft_test(builder_test SOURCES builder_test.c TIMEOUT 300)
ft_test(big_trie_test SOURCES big_trie_test.c TIMEOUT 900 LABELS big)
