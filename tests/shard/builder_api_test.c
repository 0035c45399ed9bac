/*
 * builder_api_test.c - the public incremental builder (ft_builder), the
 * node navigation calls and ft_version, against ft_build and
 * docs/specification.md section 2: keys in any order give the file a keys file
 * gives, duplicates keep their first value, bad keys fail with their number (or
 * are skipped and counted), thread count and memory budget change no byte.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "ft_test.h"

#define N_KEYS 60000
#define MAX_LEN 6

typedef struct tkey {
    uint32_t n;
    uint32_t t[70];
    int has_value;
    uint64_t value;
} tkey;

static char dir[256];

static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    FT_CHECK(fa && fb);
    int same = 1, ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        if (ca != cb)
            same = 0;
    } while (same && ca != EOF);
    fclose(fa);
    fclose(fb);
    return same;
}

/* make_keys draws keys over a small vocabulary (so that many repeat and
 * many share prefixes), a third with explicit values, every 97th one too
 * long for max_key_len 64 when bad is set. */
static tkey *make_keys(uint64_t seed, int bad)
{
    tkey *k = calloc(N_KEYS, sizeof *k);
    FT_CHECK(k != NULL);
    uint64_t s = seed;
    for (size_t i = 0; i < N_KEYS; i++) {
        k[i].n = 1 + (uint32_t)(ft_test_rand(&s) % MAX_LEN);
        if (bad && i % 97 == 5)
            k[i].n = 65;
        for (uint32_t j = 0; j < k[i].n; j++)
            k[i].t[j] = (uint32_t)(ft_test_rand(&s) % (j == 0 ? 70000 : 12));
        k[i].has_value = ft_test_rand(&s) % 3 == 0;
        k[i].value = ft_test_rand(&s);
    }
    return k;
}

static void write_text(const char *path, const tkey *k)
{
    FILE *f = fopen(path, "w");
    FT_CHECK(f != NULL);
    for (size_t i = 0; i < N_KEYS; i++) {
        for (uint32_t j = 0; j < k[i].n; j++)
            fprintf(f, j ? " %u" : "%u", k[i].t[j]);
        if (k[i].has_value)
            fprintf(f, "\t%" PRIu64, k[i].value);
        fputc('\n', f);
    }
    fclose(f);
}

static int build_api(ft_build_stats *st, const tkey *k, const char *out,
                     int threads, uint64_t max_memory, int skip)
{
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.threads = threads;
    o.max_memory = max_memory;
    o.skip_invalid = skip;
    o.tmp_dir = dir;
    char err[256];
    ft_builder *b;
    FT_PASS(ft_builder_create(&b, &o, err, sizeof err));
    for (size_t i = 0; i < N_KEYS; i++) {
        int rc = k[i].has_value ? ft_builder_add(b, k[i].t, k[i].n, k[i].value)
                                : ft_builder_add_auto(b, k[i].t, k[i].n);
        if (rc != FT_OK) {
            ft_builder_destroy(b);
            return rc;
        }
    }
    ft_build_stats_init(st);
    int rc = ft_builder_finish(b, st, out, err, sizeof err);
    ft_builder_destroy(b);
    return rc;
}

static void test_same_as_ft_build(void)
{
    char txt[300], ref[300], out[300], err[256];
    snprintf(txt, sizeof txt, "%s/keys.txt", dir);
    snprintf(ref, sizeof ref, "%s/ref.idx", dir);
    snprintf(out, sizeof out, "%s/api.idx", dir);
    for (int bad = 0; bad < 2; bad++) {
        tkey *k = make_keys(7 + (uint64_t)bad, bad);
        write_text(txt, k);
        ft_build_opts o;
        ft_build_opts_init(&o);
        o.input = txt;
        o.output = ref;
        o.skip_invalid = bad;
        ft_build_stats rs;
        ft_build_stats_init(&rs);
        FT_PASS(ft_build(&rs, &o, err, sizeof err));

        ft_build_stats st;
        /* One thread and all cores, in memory and through spilled runs. */
        int threads[] = {1, 3};
        uint64_t mem[] = {0, 1};
        for (int t = 0; t < 2; t++) {
            for (int m = 0; m < 2; m++) {
                FT_PASS(build_api(&st, k, out, threads[t], mem[m], bad));
                FT_CHECK(same_file(ref, out));
                FT_CHECK_EQ_U64(st.lines, N_KEYS);
                FT_CHECK_EQ_U64(st.keys, rs.keys);
                FT_CHECK_EQ_U64(st.keys_read, rs.keys_read);
                FT_CHECK_EQ_U64(st.skipped, rs.skipped);
                FT_CHECK_EQ_U64(st.nodes, rs.nodes);
                FT_CHECK_EQ_U64(st.index_bytes, rs.index_bytes);
                FT_CHECK(mem[m] ? st.runs > 0 : st.runs == 0);
            }
        }
        FT_CHECK(bad ? rs.skipped == (N_KEYS + 91) / 97 : rs.skipped == 0);
        FT_CHECK(rs.keys < rs.keys_read); /* there were duplicates */
        free(k);
    }
    unlink(txt);
    unlink(ref);
    unlink(out);
}

static void test_errors(void)
{
    char out[300], err[256];
    snprintf(out, sizeof out, "%s/err.idx", dir);
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.max_key_len = 4;
    ft_builder *b;
    FT_PASS(ft_builder_create(&b, &o, err, sizeof err));
    const uint32_t k1[] = {5, 6}, k2[] = {1, 2, 3, 4, 5}, k3[] = {5};
    FT_PASS(ft_builder_add_auto(b, k1, 2));               /* key 1 */
    FT_CHECK_STR(ft_builder_error(b), "");
    FT_FAIL(ft_builder_add_auto(b, k1, 0), FT_EPARSE);    /* key 2 */
    FT_CHECK_STR(ft_builder_error(b), "key 2: empty key");
    FT_FAIL(ft_builder_add(b, k2, 5, 9), FT_EPARSE);      /* key 3 */
    FT_CHECK_STR(ft_builder_error(b),
                 "key 3: key of 5 tokens is longer than max_key_len 4");
    FT_FAIL(ft_builder_add(b, NULL, 1, 9), FT_EINVAL);    /* key 4 */
    FT_CHECK_STR(ft_builder_error(b), "key 4: toks is NULL");
    /* The builder stays usable; automatic values count rejected keys. */
    FT_PASS(ft_builder_add_auto(b, k3, 1));               /* key 5 */
    FT_PASS(ft_builder_add(b, k1, 2, 77));                /* duplicate */
    ft_build_stats st;
    st.struct_size = 3;
    FT_FAIL(ft_builder_finish(b, &st, out, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "build stats: struct_size 3 is not the size of an "
                      "ft_build_stats (call ft_build_stats_init first)");
    ft_build_stats_init(&st);
    FT_PASS(ft_builder_finish(b, &st, out, err, sizeof err));
    FT_CHECK_EQ_U64(st.lines, 6);
    FT_CHECK_EQ_U64(st.keys_read, 3);
    FT_CHECK_EQ_U64(st.keys, 2);
    FT_CHECK_EQ_U64(st.skipped, 0);
    FT_FAIL(ft_builder_add_auto(b, k3, 1), FT_ESTATE);
    FT_CHECK_STR(ft_builder_error(b), "builder: already finished");
    FT_FAIL(ft_builder_finish(b, &st, out, err, sizeof err), FT_ESTATE);
    FT_CHECK_STR(err, "builder: already finished");
    ft_builder_destroy(b);

    ft_index *idx;
    FT_PASS(ft_index_open(&idx, out, 0, err, sizeof err));
    uint64_t v;
    FT_PASS(ft_index_lookup(&v, idx, k1, 2));
    FT_CHECK_EQ_U64(v, 0); /* the first value wins */
    FT_PASS(ft_index_lookup(&v, idx, k3, 1));
    FT_CHECK_EQ_U64(v, 4);
    ft_index_info info;
    info.struct_size = 0;
    FT_FAIL(ft_index_info_get(&info, idx), FT_EINVAL);
    ft_index_info_init(&info);
    FT_PASS(ft_index_info_get(&info, idx));
    FT_CHECK_EQ_U64(info.keys, 2);
    FT_CHECK_EQ_U64(info.max_key_len, 4);
    ft_index_close(idx);

    /* skip_invalid: bad keys are counted, not fatal. */
    o.skip_invalid = 1;
    FT_PASS(ft_builder_create(&b, &o, err, sizeof err));
    FT_PASS(ft_builder_add_auto(b, k1, 0));
    FT_PASS(ft_builder_add_auto(b, k2, 5));
    FT_PASS(ft_builder_add_auto(b, k3, 1));
    FT_PASS(ft_builder_finish(b, &st, out, err, sizeof err));
    FT_CHECK_EQ_U64(st.skipped, 2);
    FT_CHECK_EQ_U64(st.keys, 1);
    ft_builder_destroy(b);
    FT_PASS(ft_index_open(&idx, out, 0, err, sizeof err));
    FT_PASS(ft_index_lookup(&v, idx, k3, 1));
    FT_CHECK_EQ_U64(v, 2);
    ft_index_close(idx);

    /* Options: a struct_size that no ft_build_opts has, a bad limit. */
    o.struct_size = 0;
    FT_FAIL(ft_builder_create(&b, &o, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "build options: struct_size 0 is not the size of an "
                      "ft_build_opts (call ft_build_opts_init first)");
    FT_FAIL(ft_build(NULL, &o, err, sizeof err), FT_EINVAL);
    ft_build_opts_init(&o);
    o.max_key_len = 256;
    FT_FAIL(ft_builder_create(&b, &o, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "max_key_len 256 exceeds the hard limit 255");
    /* An empty builder makes an empty index. */
    FT_PASS(ft_builder_create(&b, NULL, err, sizeof err));
    FT_PASS(ft_builder_finish(b, NULL, out, err, sizeof err));
    ft_builder_destroy(b);
    FT_PASS(ft_index_open(&idx, out, 0, err, sizeof err));
    ft_node_children ch;
    FT_PASS(ft_index_children(&ch, idx, FT_NODE_ROOT));
    FT_CHECK_EQ_U64(ch.count, 0);
    ft_index_close(idx);
    unlink(out);
}

/* test_navigation walks a small index node by node. */
static void test_navigation(void)
{
    char out[300], err[256];
    snprintf(out, sizeof out, "%s/nav.idx", dir);
    const uint32_t keys[][3] = {{7, 0, 0}, {3, 70000, 0}, {3, 1, 2},
                                {3, 70000, 5}, {100000, 0, 0}};
    const uint32_t lens[] = {1, 2, 3, 3, 1};
    ft_builder *b;
    FT_PASS(ft_builder_create(&b, NULL, err, sizeof err));
    for (int i = 0; i < 5; i++)
        FT_PASS(ft_builder_add(b, keys[i], lens[i], 10 + (uint64_t)i));
    FT_PASS(ft_builder_finish(b, NULL, out, err, sizeof err));
    ft_builder_destroy(b);
    ft_index *idx;
    FT_PASS(ft_index_open(&idx, out, 0, err, sizeof err));
    ft_node_children root, c3, c3h;
    FT_PASS(ft_index_children(&root, idx, FT_NODE_ROOT));
    FT_CHECK_EQ_U64(root.first, 1);
    FT_CHECK_EQ_U64(root.count, 3);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, &root, 0), 3);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, &root, 1), 7);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, &root, 2), 100000);
    uint64_t i, v;
    FT_PASS(ft_index_child_find(&i, idx, &root, 100000));
    FT_CHECK_EQ_U64(i, 2);
    FT_FAIL(ft_index_child_find(&i, idx, &root, 4), FT_ENOTFOUND);
    FT_PASS(ft_index_node_value(&v, idx, root.first + 1));
    FT_CHECK_EQ_U64(v, 10);
    FT_FAIL(ft_index_node_value(&v, idx, root.first), FT_ENOTFOUND);
    FT_FAIL(ft_index_node_value(&v, idx, FT_NODE_ROOT), FT_ENOTFOUND);
    FT_PASS(ft_index_children(&c3, idx, root.first));
    FT_CHECK_EQ_U64(c3.count, 2);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, &c3, 0), 1);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, &c3, 1), 70000);
    FT_PASS(ft_index_node_value(&v, idx, c3.first + 1));
    FT_CHECK_EQ_U64(v, 11);
    FT_PASS(ft_index_children(&c3h, idx, c3.first + 1));
    FT_CHECK_EQ_U64(c3h.count, 1);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, &c3h, 0), 5);
    FT_PASS(ft_index_node_value(&v, idx, c3h.first));
    FT_CHECK_EQ_U64(v, 13);
    ft_node_children leaf;
    FT_PASS(ft_index_children(&leaf, idx, c3h.first));
    FT_CHECK_EQ_U64(leaf.count, 0);
    FT_FAIL(ft_index_child_find(&i, idx, &leaf, 5), FT_ENOTFOUND);
    ft_index_info info;
    ft_index_info_init(&info);
    FT_PASS(ft_index_info_get(&info, idx));
    FT_FAIL(ft_index_children(&leaf, idx, info.nodes), FT_EINVAL);
    FT_FAIL(ft_index_node_value(&v, idx, info.nodes), FT_EINVAL);
    ft_index_close(idx);
    unlink(out);
}

static void test_version(void)
{
    int major = -1, minor = -1, patch = -1;
    ft_version(&major, &minor, &patch);
    FT_CHECK_EQ_U64(major, FT_VERSION_MAJOR);
    FT_CHECK_EQ_U64(minor, FT_VERSION_MINOR);
    FT_CHECK_EQ_U64(patch, FT_VERSION_PATCH);
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", major, minor, patch);
    FT_CHECK_STR(ft_version_string(), want);
    FT_CHECK_STR(FT_VERSION_STRING, want);
    ft_version(NULL, NULL, NULL);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ft_builder_api_XXXXXX", tmp ? tmp : "/tmp");
    FT_CHECK(mkdtemp(dir) != NULL);
    test_version();
    test_errors();
    test_navigation();
    test_same_as_ft_build();
    FT_CHECK(rmdir(dir) == 0); /* no run file left behind */
    printf("builder_api_test: ok\n");
    return 0;
}
