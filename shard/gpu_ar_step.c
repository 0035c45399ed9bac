/*
 * gpu_ar_step.c - the GPU step's host side (include/flashtrie.h,
 * "Autoregressive steps"): the trie and values on the device, the step's
 * scratch sized at open, and launches of kernels/ft_ar_step.cu on the
 * caller's stream with no host wait.  Without CUDA every call answers
 * FT_ENOTSUP.
 */
#include "ar_step.h"

#if !defined(FT_HAVE_CUDA) || !defined(FT_AR_GPU_READY)

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
int ft_gpu_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   uint32_t k, uint32_t *out_entry, uint32_t *out_token,
                   float *out_logp, void *stream)
{
    (void)ar, (void)cur, (void)in, (void)k, (void)out_entry, (void)out_token,
        (void)out_logp, (void)stream;
    return FT_ENOTSUP;
}

#else /* FT_HAVE_CUDA */
#error "GPU AR step: not yet written"
#endif
