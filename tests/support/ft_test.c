/* ft_test.c - the shared helpers of ft_test.h. */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ft_test.h"

uint64_t ft_test_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int ft_test_toks_cmp(const uint32_t *a, uint32_t na,
                     const uint32_t *b, uint32_t nb)
{
    uint32_t n = na < nb ? na : nb;
    for (uint32_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return na < nb ? -1 : na > nb;
}

double ft_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char tmpdirs[8][512];
static int n_tmpdirs;

static void remove_tmpdirs(void)
{
    for (int i = 0; i < n_tmpdirs; i++) {
        /* rm -rf, run directly: no shell to quote the path for */
        pid_t p = fork();
        if (p == 0) {
            execlp("rm", "rm", "-rf", tmpdirs[i], (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0)
            fprintf(stderr, "cannot remove %s\n", tmpdirs[i]);
    }
}

void ft_test_tmpdir(char *dir, size_t len, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, len, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp",
                     name);
    FT_CHECK(n > 0 && (size_t)n < len && (size_t)n < sizeof tmpdirs[0]);
    FT_CHECK(n_tmpdirs < 8);
    FT_CHECK(mkdtemp(dir) != NULL);
    if (n_tmpdirs == 0)
        atexit(remove_tmpdirs);
    snprintf(tmpdirs[n_tmpdirs++], sizeof tmpdirs[0], "%s", dir);
}
