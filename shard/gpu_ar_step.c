/*
 * gpu_ar_step.c - the GPU step's host side (include/flashtrie.h,
 * "Autoregressive steps"): the trie and values on the device, the step's
 * scratch sized at open, and launches of kernels/ft_ar_step.cu on the
 * caller's stream with no host wait.  Without CUDA every call answers
 * FT_ENOTSUP.
 */
#include "ar_step.h"

#ifndef FT_HAVE_CUDA

int ft_gpu_ar_open(ft_ar *ar, char *errbuf, size_t errlen)
{
    (void)ar;
    fti_errf(errbuf, errlen, "GPU step: this build has no CUDA");
    return FT_ENOTSUP;
}
void ft_gpu_ar_close(ft_ar *ar) { (void)ar; }
int ft_gpu_ar_params(ft_ar *ar)
{
    (void)ar;
    return FT_ENOTSUP;
}
int ft_gpu_ar_memcpy(ft_ar *ar, void *dst, const void *src, size_t bytes,
                     int to_session)
{
    (void)ar, (void)dst, (void)src, (void)bytes, (void)to_session;
    return FT_ENOTSUP;
}
int ft_gpu_ar_alloc(ft_ar *ar, void **p, size_t bytes)
{
    (void)ar, (void)bytes;
    *p = NULL;
    return FT_ENOTSUP;
}
void ft_gpu_ar_free(ft_ar *ar, void *p) { (void)ar, (void)p; }
int ft_gpu_ar_reset(ft_ar *ar, ft_ar_beams *b, void *stream)
{
    (void)ar, (void)b, (void)stream;
    return FT_ENOTSUP;
}
int ft_gpu_ar_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   ft_ar_beams *next, ft_ar_hits *hits, void *stream)
{
    (void)ar, (void)cur, (void)in, (void)next, (void)hits, (void)stream;
    return FT_ENOTSUP;
}
int ft_gpu_ar_mask(ft_ar *ar, const ft_ar_beams *cur, uint32_t width,
                   const uint32_t *vocab, uint32_t eos, uint32_t *mask,
                   void *stream)
{
    (void)ar, (void)cur, (void)width, (void)vocab, (void)eos, (void)mask,
        (void)stream;
    return FT_ENOTSUP;
}
int ft_gpu_ar_constrain(ft_ar *ar, const ft_ar_input *in, uint32_t rows,
                        const uint32_t *mask, void *out, void *stream)
{
    (void)ar, (void)in, (void)rows, (void)mask, (void)out, (void)stream;
    return FT_ENOTSUP;
}
int ft_gpu_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   uint32_t k, uint32_t *out_entry, uint32_t *out_token,
                   float *out_logp, void *stream)
{
    (void)ar, (void)cur, (void)in, (void)k, (void)out_entry, (void)out_token,
        (void)out_logp, (void)stream;
    return FT_ENOTSUP;
}
int ft_gpu_ar_walk(ft_ar *ar, const int64_t *ids, uint32_t rows, uint32_t len,
                   uint64_t stride, const uint32_t *lens, const int64_t *from,
                   const uint32_t *vocab, uint32_t vocab_len, int64_t eos,
                   int64_t *state, void *stream)
{
    (void)ar, (void)ids, (void)rows, (void)len, (void)stride, (void)lens,
        (void)from, (void)vocab, (void)vocab_len, (void)eos, (void)state,
        (void)stream;
    return FT_ENOTSUP;
}

#else /* FT_HAVE_CUDA */

#include "ft_ar_kernels.h"
#include "flashtrie/internal/check.h"
#include "trie.h"

/* ark_state is a GPU session's device side. */
typedef struct ark_state {
    void *dsec[FT_SEC_COUNT]; /* the sections the step reads */
    double *F;                /* [FT_ARK_F_LEN] */
    uint32_t *counts;         /* [2], then the selection's heads[2] */
    ft_ark_surv *surv;        /* [2] */
    void *beamscr;            /* per-beam scratch (ft_ark_params b_*) */
    ft_ark_list lists[2];
    ft_ark_params base;       /* trie, scratch and parameters filled */
    uint64_t *ctab;           /* the child table, or NULL */
} ark_state;

_Static_assert(FT_ARK_F_LEN == FT_AR_F_LEN, "F table length");

static int fail(ft_ar *ar, int e, const char *what)
{
    FT_ERROR("GPU step: %s: %s", what, cudaGetErrorString((cudaError_t)e));
    (void)cudaGetLastError();
    fti_errf(ar->err, sizeof ar->err, "GPU step: %s: %s", what,
             cudaGetErrorString((cudaError_t)e));
    ar->failed = 1;
    return FT_ECUDA;
}

static void free_list(ft_ark_list *L)
{
    cudaFree(L->k1);
    cudaFree(L->k2);
    cudaFree(L->node);
    cudaFree(L->score);
    cudaFree(L->sigma);
    cudaFree(L->token);
    cudaFree(L->len);
    memset(L, 0, sizeof *L);
}

static int alloc_list(ft_ark_list *L, uint64_t cap, int scores)
{
    L->cap = cap;
    FT_CUDA_CHECK(cudaMalloc((void **)&L->k1, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&L->k2, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&L->node, cap * 8));
    if (scores)
        FT_CUDA_CHECK(cudaMalloc((void **)&L->score, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&L->sigma, cap * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&L->token, cap * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&L->len, cap * 4));
    return FT_OK;
}

void ft_gpu_ar_close(ft_ar *ar)
{
    ark_state *g = ar->gpu;
    if (g == NULL)
        return;
    (void)cudaSetDevice(ar->o.device);
    for (int s = 0; s < FT_SEC_COUNT; s++)
        cudaFree(g->dsec[s]);
    cudaFree(g->F);
    cudaFree(g->counts);
    cudaFree(g->surv);
    cudaFree(g->beamscr);
    cudaFree(g->ctab);
    free_list(&g->lists[0]);
    free_list(&g->lists[1]);
    free(g);
    ar->gpu = NULL;
}

static int open_dev(ft_ar *ar, ark_state *g)
{
    const ft_trie *t = &ar->idx->trie;
    static const int need[] = {FT_SEC_LOUDS,     FT_SEC_LOUDS_RANK,
                               FT_SEC_LOUDS_SEL0, FT_SEC_LABEL_LO,
                               FT_SEC_HIGH,      FT_SEC_HIGH_RANK,
                               FT_SEC_LABEL_HI,  FT_SEC_FLAGS,
                               FT_SEC_TERM_RANK, FT_SEC_VALUES};
    ft_ark_params *p = &g->base;
    memset(p, 0, sizeof *p);
    int urc = fti_gpu_upload_trie(t, need, sizeof need / sizeof need[0],
                                  g->dsec, &p->view);
    if (urc != FT_OK)
        return urc;
    p->term_rank = g->dsec[FT_SEC_TERM_RANK];
    p->values = g->dsec[FT_SEC_VALUES];
    size_t ctab_bytes;
    g->ctab = fti_gpu_child_table(&p->view, NULL, "GPU step", &ctab_bytes);
    p->ctab = g->ctab;
    p->n_keys = t->n_keys;
    p->value_bits = t->value_bits;
    p->cap_beam = ar->cap_beam;
    FT_CUDA_CHECK(cudaMalloc((void **)&g->F, FT_ARK_F_LEN * 8));
    /* the counters and the selection's heads (ft_ark_kernels.h
     * FT_ARK_CLEAR_BYTES): the launches' set, cleared by the step's first
     * kernel, then the one-launch step's set, cleared here once and left
     * cleared by every such step's last CTA */
    FT_CUDA_CHECK(cudaMalloc((void **)&g->counts, 2 * FT_ARK_CLEAR_BYTES));
    FT_CUDA_CHECK(cudaMemset(g->counts, 0, 2 * FT_ARK_CLEAR_BYTES));
    FT_CUDA_CHECK(cudaMalloc((void **)&g->surv, 2 * sizeof(ft_ark_surv)));
    FT_CUDA_CHECK(cudaMemset(g->surv, 0, 2 * sizeof(ft_ark_surv)));
    /* A beam adds at most one candidate per entry of its row. */
    uint64_t cap = (uint64_t)ar->cap_beam * ar->o.max_width;
    int rc = alloc_list(&g->lists[0], cap, 0);
    if (rc == FT_OK)
        rc = alloc_list(&g->lists[1], cap, 1);
    if (rc != FT_OK)
        return rc;
    uint32_t ctas = 1, flat = 1, fused = 0, split = 0, msplit = 0, pdl = 0;
    FT_CUDA_CHECK((cudaError_t)ft_ark_init(&ctas, &flat, &fused, &split, &msplit,
                                           &pdl));
    size_t cb = ar->cap_beam;
    size_t fl = ft_ar_parts(ar->o.max_width);
    size_t per = sizeof(ft_child_range) + 8 + fl * 8 + 4 + 4 + fl * 4 + 4;
    FT_CUDA_CHECK(cudaMalloc(&g->beamscr, cb * per));
    p->b_rng = (ft_child_range *)g->beamscr;
    p->b_lse = (double *)(p->b_rng + cb);
    p->b_fsum = p->b_lse + cb;
    p->b_work = (uint32_t *)(p->b_fsum + cb * fl);
    p->b_cd = p->b_work + cb;
    p->b_fmax = (float *)(p->b_cd + cb);
    p->b_ftick = (uint32_t *)(p->b_fmax + cb * fl);
    FT_CUDA_CHECK(cudaMemset(p->b_ftick, 0, cb * 4));
    p->fl_stride = (uint32_t)fl;
    p->flat_ctas = flat;
    p->F = g->F;
    p->counts = g->counts;
    p->heads = (ft_ark_sel_head *)(g->counts + 16);
    p->surv = g->surv;
    p->sel_ctas = ctas;
    p->fused_ctas = fused;
    p->fused_split = split;
    p->fused_mask_split = msplit;
    p->fused_pdl = pdl;
    p->fcounts = g->counts + FT_ARK_CLEAR_BYTES / 4;
    p->fheads = (ft_ark_sel_head *)(p->fcounts + 16);
    p->lists[0] = g->lists[0];
    p->lists[1] = g->lists[1];
    return ft_gpu_ar_params(ar);
}

int ft_gpu_ar_open(ft_ar *ar, char *errbuf, size_t errlen)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        fti_errf(errbuf, errlen, "GPU step: no usable GPU");
        return FT_ENODEV;
    }
    FT_RETURN_ERROR_IF(ar->o.device < 0 || ar->o.device >= n, FT_ENODEV,
                       "GPU step: no device %d (%d found)", ar->o.device, n);
    if (cudaSetDevice(ar->o.device) != cudaSuccess) {
        (void)cudaGetLastError();
        fti_errf(errbuf, errlen, "GPU step: device %d unusable", ar->o.device);
        return FT_ENODEV;
    }
    ark_state *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FT_ENOMEM;
    ar->gpu = g;
    int rc = open_dev(ar, g);
    if (rc != FT_OK) {
        fti_errf(errbuf, errlen, "GPU step: %s while copying the trie and "
                 "sizing the scratch (%u beams x %u entries)", ft_strerror(rc),
                 ar->cap_beam, ar->o.max_width);
        ft_gpu_ar_close(ar);
        return rc;
    }
    return FT_OK;
}

int ft_gpu_ar_params(ft_ar *ar)
{
    ark_state *g = ar->gpu;
    g->base.beam = ar->o.beam;
    g->base.results = ar->o.results;
    g->base.theta_tok = ar->o.theta_tok;
    g->base.theta_sent = ar->o.theta_sent;
    cudaError_t e = cudaMemcpy(g->F, ar->F, FT_ARK_F_LEN * 8,
                               cudaMemcpyHostToDevice);
    return e == cudaSuccess ? FT_OK : fail(ar, e, "F table copy");
}

int ft_gpu_ar_memcpy(ft_ar *ar, void *dst, const void *src, size_t bytes,
                     int to_session)
{
    if (bytes == 0)
        return FT_OK;
    cudaError_t e = cudaMemcpy(dst, src, bytes,
                               to_session ? cudaMemcpyHostToDevice
                                          : cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? FT_OK : fail(ar, e, "copy");
}

int ft_gpu_ar_alloc(ft_ar *ar, void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaSuccess)
        e = cudaMemset(*p, 0, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fti_errf(ar->err, sizeof ar->err, "GPU step: cudaMalloc of %zu "
                 "bytes: %s", bytes, cudaGetErrorString(e));
        *p = NULL;
        return FT_ECUDA;
    }
    return FT_OK;
}

void ft_gpu_ar_free(ft_ar *ar, void *p)
{
    (void)ar;
    cudaFree(p);
}

int ft_gpu_ar_reset(ft_ar *ar, ft_ar_beams *b, void *stream)
{
    int e = ft_ark_reset(b->count, b->node, b->sigma, b->len, b->parent,
                         b->entry, b->token, stream);
    return e == 0 ? FT_OK : fail(ar, e, "reset launch");
}

static void set_input(ft_ark_params *p, const ft_ar_input *in)
{
    p->form = in->form;
    p->dtype = in->dtype;
    p->norm = in->norm;
    p->width = in->width;
    p->stride = in->stride;
    p->ids = in->ids;
    p->logp = in->logp;
    p->vocab = in->vocab;
}

static void set_cur(ft_ark_params *p, const ft_ar_beams *cur)
{
    p->cur_count = cur->count;
    p->cur_node = cur->node;
    p->cur_sigma = cur->sigma;
    p->cur_len = cur->len;
}

int ft_gpu_ar_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   ft_ar_beams *next, ft_ar_hits *hits, void *stream)
{
    ark_state *g = ar->gpu;
    ft_ark_params p = g->base;
    set_input(&p, in);
    set_cur(&p, cur);
    p.nx_count = next->count;
    p.nx_node = next->node;
    p.nx_sigma = next->sigma;
    p.nx_len = next->len;
    p.nx_parent = next->parent;
    p.nx_entry = next->entry;
    p.nx_token = next->token;
    if (hits) {
        p.h_count = hits->count;
        p.h_parent = hits->parent;
        p.h_entry = hits->entry;
        p.h_token = hits->token;
        p.h_len = hits->len;
        p.h_key_index = hits->key_index;
        p.h_value = hits->value;
        p.h_score = hits->score;
        p.h_sigma = hits->sigma;
    }
    int e = ft_ark_step(&p, stream);
    return e == 0 ? FT_OK : fail(ar, e, "step launch");
}

int ft_gpu_ar_mask(ft_ar *ar, const ft_ar_beams *cur, uint32_t width,
                   const uint32_t *vocab, uint32_t eos, uint32_t *mask,
                   void *stream)
{
    ft_ark_params p = ((ark_state *)ar->gpu)->base;
    set_cur(&p, cur);
    p.width = width;
    p.vocab = vocab;
    int e = ft_ark_mask(&p, eos, mask, stream);
    return e == 0 ? FT_OK : fail(ar, e, "mask launch");
}

int ft_gpu_ar_constrain(ft_ar *ar, const ft_ar_input *in, uint32_t rows,
                        const uint32_t *mask, void *out, void *stream)
{
    int e = ft_ark_constrain(mask, rows, in->width,
                             in->stride ? in->stride : in->width, in->dtype,
                             in->logp, out, stream);
    return e == 0 ? FT_OK : fail(ar, e, "constrain launch");
}

int ft_gpu_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   uint32_t k, uint32_t *out_entry, uint32_t *out_token,
                   float *out_logp, void *stream)
{
    ft_ark_params p = ((ark_state *)ar->gpu)->base;
    set_input(&p, in);
    set_cur(&p, cur);
    int e = ft_ark_topk(&p, k, out_entry, out_token, out_logp, stream);
    return e == 0 ? FT_OK : fail(ar, e, "top-k launch");
}

int ft_gpu_ar_walk(ft_ar *ar, const int64_t *ids, uint32_t rows, uint32_t len,
                   uint64_t stride, const uint32_t *lens, const int64_t *from,
                   const uint32_t *vocab, uint32_t vocab_len, int64_t eos,
                   int64_t *state, void *stream)
{
    const ft_ark_params *p = &((ark_state *)ar->gpu)->base;
    int e = ft_ark_walk(&p->view, p->ctab, ids, rows, len, stride, lens, from, vocab,
                        vocab_len, eos, state, stream);
    return e == 0 ? FT_OK : fail(ar, e, "walk launch");
}

#endif /* FT_HAVE_CUDA */
