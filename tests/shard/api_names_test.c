/*
 * api_names_test.c - the public name maps: ft_err_name for every ft_err
 * (exactly, from a table written out here, not from the library's), and
 * the engine-kind pair ft_engine_kind_name / ft_engine_kind_parse.
 */
#include <limits.h>

#include "ft_test.h"

static void test_err_names(void)
{
    static const struct {
        int err;
        const char *name;
    } want[] = {
        {FT_OK, "FT_OK"},
        {FT_ENOMEM, "FT_ENOMEM"},
        {FT_EINVAL, "FT_EINVAL"},
        {FT_EIO, "FT_EIO"},
        {FT_EPARSE, "FT_EPARSE"},
        {FT_EFORMAT, "FT_EFORMAT"},
        {FT_ECHECKSUM, "FT_ECHECKSUM"},
        {FT_EVERSION, "FT_EVERSION"},
        {FT_ETRUNC, "FT_ETRUNC"},
        {FT_ELIMIT, "FT_ELIMIT"},
        {FT_ENOTFOUND, "FT_ENOTFOUND"},
        {FT_EREQUEST, "FT_EREQUEST"},
        {FT_ENODEV, "FT_ENODEV"},
        {FT_ECUDA, "FT_ECUDA"},
        {FT_ENCCL, "FT_ENCCL"},
        {FT_ENOTSUP, "FT_ENOTSUP"},
        {FT_EBUSY, "FT_EBUSY"},
        {FT_EINTERNAL, "FT_EINTERNAL"},
        {FT_ESTATE, "FT_ESTATE"},
        {FT_EPROTO, "FT_EPROTO"},
        {FT_EDEADLINE, "FT_EDEADLINE"},
        {FT_ETIMEDOUT, "FT_ETIMEDOUT"},
        {FT_ECONN, "FT_ECONN"},
        {FT_EPERM, "FT_EPERM"},
        {FT_ECONFIG, "FT_ECONFIG"},
        {FT_ESHUTDOWN, "FT_ESHUTDOWN"},
        {FT_EMANIFEST, "FT_EMANIFEST"},
    };
    size_t n = sizeof want / sizeof want[0];
    /* Every value 0 .. FT_EMANIFEST is listed, once, in order. */
    FT_CHECK_EQ_U64(n, FT_EMANIFEST + 1);
    for (size_t i = 0; i < n; i++) {
        FT_CHECK_EQ_U64(want[i].err, i);
        const char *got = ft_err_name(want[i].err);
        FT_CHECK(got != NULL);
        FT_CHECK_STR(got, want[i].name);
        /* Static: the same pointer every time. */
        FT_CHECK(ft_err_name(want[i].err) == got);
        /* Every code has its own description too. */
        FT_CHECK(strcmp(ft_strerror(want[i].err), "unknown error") != 0);
    }
    const int bad[] = {-1, FT_EMANIFEST + 1, 100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FT_CHECK(ft_err_name(bad[i]) == NULL);
        FT_CHECK_STR(ft_strerror(bad[i]), "unknown error");
    }
}

static void test_engine_kinds(void)
{
    static const struct {
        ft_engine_kind kind;
        const char *name;
    } want[] = {
        {FT_ENGINE_CPU, "cpu"},
        {FT_ENGINE_GPU, "gpu"},
        {FT_ENGINE_AUTO, "auto"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        FT_CHECK_STR(ft_engine_kind_name(want[i].kind), want[i].name);
        ft_engine_kind k = (ft_engine_kind)99;
        FT_PASS(ft_engine_kind_parse(want[i].name, &k));
        FT_CHECK_EQ_U64(k, want[i].kind);
    }
    FT_CHECK(ft_engine_kind_name((ft_engine_kind)3) == NULL);
    FT_CHECK(ft_engine_kind_name((ft_engine_kind)-1) == NULL);
    /* Exact, lower-case names only; *kind is left as it was. */
    const char *bad[] = {"", "CPU", "Gpu", "gpu ", " cpu", "cp", "autox",
                         "shards", "0", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ft_engine_kind k = FT_ENGINE_GPU;
        FT_FAIL(ft_engine_kind_parse(bad[i], &k), FT_EINVAL);
        FT_CHECK_EQ_U64(k, FT_ENGINE_GPU);
    }
    ft_engine_kind k;
    FT_FAIL(ft_engine_kind_parse(NULL, &k), FT_EINVAL);
    FT_FAIL(ft_engine_kind_parse("cpu", NULL), FT_EINVAL);
}

int main(void)
{
    test_err_names();
    test_engine_kinds();
    printf("api_names_test: ok\n");
    return 0;
}
