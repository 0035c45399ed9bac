/*
 * rng.c - the workload generator's random numbers (see workload.h):
 * xoshiro256** seeded through splitmix64, the uniform, Zipf, normal, gamma
 * and beta draws the key and request generators take, and the jump that
 * advances a stream by n draws in time independent of n.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "workload_impl.h"

/* ---- random numbers ---- */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ft_wl_rng_seed(ft_wl_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t ft_wl_next(ft_wl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double ft_wl_u01(ft_wl_rng *r)
{
    return (double)(ft_wl_next(r) >> 11) * 0x1.0p-53;
}

uint64_t ft_wl_mix(uint64_t a, uint64_t b)
{
    uint64_t x = a ^ (b * 0xd6e8feb86659fd93ull);
    return splitmix(&x);
}

uint32_t ft_wl_zipf_token(ft_wl_rng *r, uint32_t vocab)
{
    /* P(rank >= x) = 1 - ln(1+x)/ln(1+V): the density of Zipf(1). */
    double x = exp(ft_wl_u01(r) * log((double)vocab + 1.0)) - 1.0;
    uint32_t t = (uint32_t)x;
    return t < vocab ? t : vocab - 1;
}

double wl_normal(ft_wl_rng *r)
{
    double u1 = ft_wl_u01(r), u2 = ft_wl_u01(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* gamma_draw is Marsaglia and Tsang's method, boosted for shape < 1. */
static double gamma_draw(ft_wl_rng *r, double shape)
{
    double boost = 1.0;
    if (shape < 1.0) {
        boost = pow(1.0 - ft_wl_u01(r), 1.0 / shape);
        shape += 1.0;
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = wl_normal(r), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = 1.0 - ft_wl_u01(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v * boost;
    }
}

double wl_beta_draw(ft_wl_rng *r, double a, double b)
{
    double x = gamma_draw(r, a), y = gamma_draw(r, b);
    return x + y > 0 ? x / (x + y) : 0.0;
}

/* ---- jumping a random stream ahead ----
 *
 * The state transition of xoshiro256 is linear over GF(2), so n steps are
 * a polynomial in the one-step map: x^n reduced modulo the map's
 * characteristic polynomial P (degree 256), applied to the state.  P is
 * found once by Berlekamp-Massey from 512 bits of one state bit's
 * sequence (P is primitive, so the minimal polynomial of any one bit's
 * non-zero sequence is all of P).  A jump then costs 256 steps and at
 * most 64 products of polynomials, whatever n. */

typedef struct wl_poly {
    uint64_t w[4]; /* coefficients of x^0 .. x^255 */
} wl_poly;

static wl_poly jp_low;     /* P without its x^256 term */
static wl_poly jp_pow[64]; /* x^(2^i) mod P */
static int jp_ok;          /* P was found (else jumps step one by one) */
static pthread_once_t jp_once = PTHREAD_ONCE_INIT;

static void xo_step(uint64_t *s)
{
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
}

static void poly_mulx(wl_poly *a)
{
    uint64_t top = a->w[3] >> 63;
    a->w[3] = a->w[3] << 1 | a->w[2] >> 63;
    a->w[2] = a->w[2] << 1 | a->w[1] >> 63;
    a->w[1] = a->w[1] << 1 | a->w[0] >> 63;
    a->w[0] <<= 1;
    if (top)
        for (int k = 0; k < 4; k++)
            a->w[k] ^= jp_low.w[k];
}

static wl_poly poly_mulmod(const wl_poly *a, const wl_poly *b)
{
    wl_poly r = {{0, 0, 0, 0}};
    for (int i = 255; i >= 0; i--) {
        poly_mulx(&r);
        if (b->w[i >> 6] >> (i & 63) & 1)
            for (int k = 0; k < 4; k++)
                r.w[k] ^= a->w[k];
    }
    return r;
}

static void jp_init(void)
{
    enum { N = 512 };
    uint8_t seq[N], c[N + 1], b[N + 1], tmp[N + 1];
    uint64_t s[4] = {1, 2, 3, 4};
    for (int k = 0; k < N; k++) {
        seq[k] = (uint8_t)(s[0] & 1);
        xo_step(s);
    }
    memset(c, 0, sizeof c);
    memset(b, 0, sizeof b);
    c[0] = b[0] = 1;
    int L = 0, m = 1;
    for (int n = 0; n < N; n++) {
        uint8_t d = seq[n];
        for (int i = 1; i <= L; i++)
            d ^= c[i] & seq[n - i];
        if (!d) {
            m++;
            continue;
        }
        memcpy(tmp, c, sizeof c);
        for (int i = 0; i + m <= N; i++)
            c[i + m] ^= b[i];
        if (2 * L <= n) {
            L = n + 1 - L;
            memcpy(b, tmp, sizeof b);
            m = 1;
        } else {
            m++;
        }
    }
    if (L != 256)
        return;
    /* s_n = sum c_i s_(n-i): P(x) = x^256 + sum c_i x^(256-i). */
    for (int i = 1; i <= 256; i++)
        if (c[i])
            jp_low.w[(256 - i) >> 6] |= 1ull << ((256 - i) & 63);
    memset(&jp_pow[0], 0, sizeof jp_pow[0]);
    jp_pow[0].w[0] = 2; /* x */
    for (int i = 1; i < 64; i++)
        jp_pow[i] = poly_mulmod(&jp_pow[i - 1], &jp_pow[i - 1]);
    jp_ok = 1;
}

void ft_wl_rng_jump(ft_wl_rng *r, uint64_t n)
{
    pthread_once(&jp_once, jp_init);
    if (n < 512 || !jp_ok) {
        while (n--)
            xo_step(r->s);
        return;
    }
    wl_poly p = {{1, 0, 0, 0}};
    for (int i = 0; n; i++, n >>= 1)
        if (n & 1)
            p = poly_mulmod(&p, &jp_pow[i]);
    uint64_t acc[4] = {0, 0, 0, 0}, cur[4];
    memcpy(cur, r->s, sizeof cur);
    for (int i = 0; i < 256; i++) {
        if (p.w[i >> 6] >> (i & 63) & 1)
            for (int k = 0; k < 4; k++)
                acc[k] ^= cur[k];
        xo_step(cur);
    }
    memcpy(r->s, acc, sizeof acc);
}
