/*
 * ft_profile.cu - the host side of the search kernel's profile marks
 * (FT_GK_PROFILE builds; empty otherwise): the selection's finer marks
 * (ft_gk_prof_sub) and the chain profile of fused launches, reset before
 * a launch, taken after it and printed at engine close.
 *
 * Host code only: the marks' device buffers are defined in
 * search/profile.cuh (part of kernels/ft_search.cu) and reached through
 * search/entry.h.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "ft_kernels.h"
#include "search/entry.h"

#ifdef FT_GK_PROFILE
/* The host's copies of the chain profile's device buffers, shaped like
 * gk_chc and gk_chw (search/profile.cuh). */
typedef unsigned long long gk_chc_host[GK_CH_T][GK_CH_CTAS][6];
typedef unsigned long long gk_chw_host[GK_CH_T][GK_CH_WARPS][8];

extern "C" int ft_gk_prof_sub(uint64_t *out, size_t n)
{
    if (n > FT_GK_MAX_T * 12)
        n = FT_GK_MAX_T * 12;
    return (int)cudaMemcpyFromSymbol(out, gk_entry_get()->sub,
                                     n * sizeof *out);
}

/* ---- the chain profile's host side (profile builds) ------------------- */

#define GK_CHS_N 24
static double gk_chs_sum[GK_CH_T][GK_CHS_N];
static double gk_chs_cnt[GK_CH_T];
static unsigned gk_chs_slow[GK_CH_T][GK_CH_CTAS];
static double gk_chs_pre[GK_CH_T][4]; /* selection end -> cut stored,
                                       * -> r1 setup, -> the items' loop */
static double gk_chs_pp[GK_CH_T][4]; /* warps' start after the CTA's
                                      * selection: median, max; the CTA's
                                      * end after the warp's: median */

extern "C" int ft_gk_prof_chain_reset(void *stream)
{
    void *a, *b;
    const gk_entry *e = gk_entry_get();
    if (cudaGetSymbolAddress(&a, e->chc) != cudaSuccess ||
        cudaGetSymbolAddress(&b, e->chw) != cudaSuccess)
        return 1;
    cudaMemsetAsync(a, 0, sizeof(gk_chc_host), (cudaStream_t)stream);
    cudaMemsetAsync(b, 0, sizeof(gk_chw_host), (cudaStream_t)stream);
    return 0;
}

static int gk_cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double gk_med(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, gk_cmp_d);
    return v[n / 2];
}

static double gk_max(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* After a fused launch of T steps on grid CTAs, ne of them expanding. */
extern "C" int ft_gk_prof_chain_take(uint32_t T, uint32_t ne, uint32_t grid)
{
    static gk_chc_host c;
    static gk_chw_host w;
    const gk_entry *e = gk_entry_get();
    if (cudaMemcpyFromSymbol(c, e->chc, sizeof c) != cudaSuccess ||
        cudaMemcpyFromSymbol(w, e->chw, sizeof w) != cudaSuccess)
        return 1;
    if (grid > GK_CH_CTAS)
        grid = GK_CH_CTAS;
    if (T > GK_CH_T)
        T = GK_CH_T;
    static double v[6][GK_CH_WARPS];
    for (uint32_t t = 0; t < T; t++) {
        double *S = gk_chs_sum[t];
        size_t n = 0, nt = 0;
        double tmax = 0, twmin = 1e30;
        uint32_t slow = 0;
        double slowv = -1;
        for (uint32_t i = 0; i < grid; i++) {
            double A = (double)c[t][i][0];
            double C = (double)c[t][i][2];
            if (t == 0) {
                if (C == 0 || A == 0)
                    continue;
                v[3][n++] = A - C;
                continue;
            }
            double A0 = (double)c[t - 1][i][0], B0 = (double)c[t - 1][i][1];
            if (i < ne) {
                if (A0 == 0 || B0 == 0 || C == 0 || A == 0)
                    continue;
                v[0][n] = B0 - A0;
                v[1][n] = C - B0;
                v[2][n] = C - A0;
                v[3][n] = A - C;
                if (C - A0 > slowv) {
                    slowv = C - A0;
                    slow = i;
                }
                n++;
            } else {
                if (A0 == 0 || B0 == 0 || A == 0)
                    continue;
                tmax = B0 - A0 > tmax ? B0 - A0 : tmax;
                twmin = A - B0 < twmin ? A - B0 : twmin;
                nt++;
            }
        }
        if (n == 0)
            continue;
        gk_chs_cnt[t] += 1;
        if (t > 0) {
            S[0] += gk_max(v[0], n);
            S[1] += gk_med(v[0], n);
            S[2] += gk_max(v[1], n);
            S[3] += gk_med(v[1], n);
            S[4] += gk_max(v[2], n);
            S[5] += gk_med(v[2], n);
            gk_chs_slow[t][slow]++;
        }
        double wmin = 1e30;
        for (size_t i = 0; i < n; i++)
            wmin = v[3][i] < wmin ? v[3][i] : wmin;
        S[6] += wmin;
        S[7] += gk_med(v[3], n);
        S[8] += nt ? tmax : 0;
        S[9] += nt ? twmin : 0;
        /* warps */
        size_t m = 0;
        double best = -1;
        uint32_t bw = 0;
        static double pre[GK_CH_WARPS], post[GK_CH_WARPS];
        size_t npp = 0;
        for (uint32_t j = 0; j < GK_CH_WARPS; j++) {
            const unsigned long long *x = w[t][j];
            if (x[7] != 1)
                continue;
            uint32_t ct = t == 0 ? j % grid : j % ne;
            if (t > 0 && ct < grid && c[t - 1][ct][1] && c[t][ct][2] &&
                x[0] >= c[t - 1][ct][1] && c[t][ct][2] >= x[4]) {
                pre[npp] = (double)(x[0] - c[t - 1][ct][1]);
                post[npp++] = (double)(c[t][ct][2] - x[4]);
            }
            for (int k = 0; k < 4; k++)
                v[k][m] = (double)(x[k + 1] - x[k]);
            v[4][m] = (double)(x[4] - x[0]);
            if (v[4][m] > best) {
                best = v[4][m];
                bw = j;
            }
            m++;
        }
        S[10] += (double)m;
        if (m) {
            const unsigned long long *x = w[t][bw];
            for (int k = 0; k < 4; k++)
                S[16 + k] += (double)(x[k + 1] - x[k]);
            S[20] += (double)x[5];
            S[21] += (double)(x[6] & 0xffu);
            static double mx[5], md[5];
            for (int k = 0; k < 5; k++) {
                mx[k] = gk_max(v[k], m);
                md[k] = gk_med(v[k], m);
            }
            /* medians 11..15 (range, lookup, append, store, total); the
             * maxima of each phase in the second half of the row */
            for (int k = 0; k < 5; k++)
                S[11 + k] += md[k];
            S[22] += mx[4];
            S[23] += mx[2];
        }
        if (t > 0) {
            size_t k3 = 0;
            for (uint32_t i = 0; i < ne && i < grid; i++) {
                unsigned long long b0 = c[t - 1][i][1], m3 = c[t][i][3],
                                   m4 = c[t][i][4], m5 = c[t][i][5];
                if (!b0 || !m3 || !m4 || !m5 || m3 < b0 || m4 < m3 || m5 < m4)
                    continue;
                v[0][k3] = (double)(m3 - b0);
                v[1][k3] = (double)(m4 - m3);
                v[2][k3] = (double)(m5 - m4);
                k3++;
            }
            if (k3) {
                gk_chs_pre[t][0] += gk_med(v[0], k3);
                gk_chs_pre[t][1] += gk_med(v[1], k3);
                gk_chs_pre[t][2] += gk_med(v[2], k3);
                gk_chs_pre[t][3] += 1;
            }
        }
        if (npp) {
            gk_chs_pp[t][0] += gk_med(pre, npp);
            gk_chs_pp[t][1] += gk_max(pre, npp);
            gk_chs_pp[t][2] += gk_med(post, npp);
            gk_chs_pp[t][3] += 1;
        }
    }
    return 0;
}

extern "C" void ft_gk_prof_chain_print(int khz, void (*emit)(const char *line))
{
    double us = khz ? 1e3 / khz : 0;
    char line[512];
    snprintf(line, sizeof line,
             "gpu chain profile of fused launches (us, clock64 at %d MHz; "
             "CTA = expanding CTAs; per launch, then mean):",
             khz / 1000);
    emit(line);
    for (uint32_t t = 0; t < GK_CH_T; t++) {
        double n = gk_chs_cnt[t];
        if (n == 0)
            continue;
        const double *S = gk_chs_sum[t];
        unsigned bs = 0, bc = 0;
        for (uint32_t i = 0; i < GK_CH_CTAS; i++)
            if (gk_chs_slow[t][i] > bc) {
                bc = gk_chs_slow[t][i];
                bs = i;
            }
        double u = us / n;
        snprintf(line, sizeof line,
                 "  step %2u: CTA sel max %.2f med %.2f | exp max %.2f med "
                 "%.2f | sel+exp max %.2f med %.2f (slowest most often CTA "
                 "%u, %u of %.0f) | wait min %.2f med %.2f | term merge max "
                 "%.2f, its wait min %.2f",
                 t, S[0] * u, S[1] * u, S[2] * u, S[3] * u, S[4] * u, S[5] * u,
                 bs, bc, n, S[6] * u, S[7] * u, S[8] * u, S[9] * u);
        emit(line);
        snprintf(line, sizeof line,
                 "           warps %.0f: median range %.2f lookup %.2f "
                 "append %.2f store %.2f total %.2f | max total %.2f, max "
                 "append %.2f | slowest warp: range %.2f lookup %.2f append "
                 "%.2f store %.2f (children %.0f, path %.2f)",
                 S[10] / n, S[11] * u, S[12] * u, S[13] * u, S[14] * u,
                 S[15] * u, S[22] * u, S[23] * u, S[16] * u, S[17] * u,
                 S[18] * u, S[19] * u, S[20] / n, S[21] / n);
        emit(line);
        if (gk_chs_pp[t][3] > 0) {
            double pu = us / gk_chs_pp[t][3];
            snprintf(line, sizeof line,
                     "           a warp's first item starts after its CTA's "
                     "selection: median %.2f max %.2f; the CTA's expansion "
                     "ends after the item: median %.2f",
                     gk_chs_pp[t][0] * pu, gk_chs_pp[t][1] * pu,
                     gk_chs_pp[t][2] * pu);
            emit(line);
        }
        if (gk_chs_pre[t][3] > 0) {
            double pu = us / gk_chs_pre[t][3];
            snprintf(line, sizeof line,
                     "           after the selection (median CTA): cut "
                     "stored %.2f, r1 setup %.2f, to the items' loop %.2f",
                     gk_chs_pre[t][0] * pu, gk_chs_pre[t][1] * pu,
                     gk_chs_pre[t][2] * pu);
            emit(line);
        }
    }
}
#endif
