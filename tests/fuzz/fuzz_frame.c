/*
 * fuzz_frame.c - bytes through the binary frame decoder (router/frame.h):
 * whatever they are, nothing may crash or read out of bounds, a rejection
 * is FT_EPROTO with a message that names a byte offset, and a frame that
 * decodes must re-encode to exactly the same bytes.  A decoded SEARCH goes
 * on through the request checks, a RESULT also through the decoder into
 * caller buffers.  Mutations almost never keep the checksum right, so every
 * input is also tried with its length and checksum fields made to agree,
 * which lets the mutations reach the payload decoders.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "flashtrie.h"
#include "frame.h"
#include "fuzz.h"

static ft_frame_msg g_m;
static ft_buf g_out;
static ft_result g_res[8];
static int g_ready;

static void setup(void)
{
    ft_frame_msg_init(&g_m);
    ft_buf_init(&g_out);
    for (int i = 0; i < 8; i++)
        if (ft_result_alloc(&g_res[i], 64, 16) != FT_OK)
            abort();
    g_ready = 1;
}

static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void one(const uint8_t *data, size_t size)
{
    char err[512];
    err[0] = 0;
    int rc = ft_frame_decode(&g_m, data, size, 8, err, sizeof err);
    if (rc != FT_OK) {
        if (rc != FT_EPROTO || strstr(err, " at byte ") == NULL)
            abort();
        return;
    }
    g_out.len = 0;
    if (ft_frame_encode(&g_out, &g_m) != FT_OK || g_out.len != size ||
        memcmp(g_out.data, data, size) != 0)
        abort(); /* the round trip must give the same bytes back */
    if (g_m.hdr.type == FT_FRAME_SEARCH) {
        for (uint32_t i = 0; i < g_m.count; i++) {
            rc = ft_frame_search_fault(&g_m, i, err, sizeof err);
            if (rc == FT_OK)
                rc = ft_request_validate(&g_m.reqs[i], 0, err, sizeof err);
            if (rc != FT_OK && rc != FT_EREQUEST)
                abort();
        }
    } else if (g_m.hdr.type == FT_FRAME_RESULT) {
        uint32_t n = 0;
        rc = ft_frame_decode_result_into(NULL, g_res, 8, &n, data, size, err,
                                         sizeof err);
        if (rc == FT_OK) {
            if (n != g_m.count)
                abort();
            for (uint32_t i = 0; i < n; i++)
                if (g_res[i].n != g_m.res[i].n ||
                    g_res[i].status != g_m.res[i].status)
                    abort();
        } else if (rc != FT_ELIMIT) {
            abort(); /* only the buffers' size may differ */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ready)
        setup();
    one(data, size);
    if (size < FT_FRAME_HDR_SIZE || size - FT_FRAME_HDR_SIZE > UINT32_MAX)
        return 0;
    uint8_t *p = malloc(size);
    if (p == NULL)
        return 0;
    memcpy(p, data, size);
    st32(p + 24, (uint32_t)(size - FT_FRAME_HDR_SIZE));
    if (p[8] & FT_FRAME_F_CHECKSUM)
        st32(p + 28, XXH32(p + FT_FRAME_HDR_SIZE, size - FT_FRAME_HDR_SIZE,
                           XXH32(p, 28, 0)));
    one(p, size);
    free(p);
    return 0;
}
