/*
 * frame.h - the binary wire protocol of the FlashTrie daemon: one codec
 * over byte buffers, used by the server and the client alike.  The sockets
 * live elsewhere (daemon/); this file only turns messages into bytes and
 * back.  docs/protocol.md draws every byte; in short:
 *
 *   header (32 bytes, little-endian)
 *     0  magic "FTRP"       4  u16 version (1)     6  u16 type
 *     8  u32 flags         12  u32 deadline_ms (relative to receipt, 0 none)
 *    16  u64 id (echoed)   24  u32 payload length  28  u32 checksum
 *   payload (payload length bytes, typed by the header's type)
 *
 * Using it.
 *  - Server: for each received message, ft_frame_is_binary() tells a frame
 *    from a JSON line.  ft_frame_decode() fills one ft_frame_msg (init once,
 *    decode many: its storage is reused).  On FT_EPROTO answer
 *    ft_frame_encode_error(out, m.hdr.id, FT_EPROTO, errbuf) and keep the
 *    connection; m.hdr.id is the offending frame's id when its header could
 *    be read that far, else 0.  ft_frame_check_request() turns away reply
 *    types.  For SEARCH, call ft_frame_search_fault() and
 *    then ft_request_validate() on each m.reqs[i]; answer with
 *    ft_frame_encode_result() (same order, same count).
 *  - Client: ft_frame_encode_search() (or _ping, _info, _reload), send;
 *    on the reply, ft_frame_decode() into an ft_frame_msg (results in
 *    m.res, owned by m), or ft_frame_decode_header() and, for RESULT,
 *    ft_frame_decode_result_into() to fill ft_result buffers of one's own.
 *
 * Decoders never read past len, check every count against the bytes left
 * and the limits below, and never point into the input buffer: grids,
 * hits, tokens and texts are copied into storage owned by the ft_frame_msg
 * (aligned, valid until the next decode into it or ft_frame_msg_free).
 * They do not validate requests beyond framing (T <= 64, K <= 4096 bound
 * the memory a frame can make us take): ft_request_validate does that and
 * produces the docs/specification.md section 3 messages.  A malformed frame
 * returns FT_EPROTO with "<field>: <reason> at byte <offset>" in errbuf.
 *
 * Encoders append one whole frame to an ft_buf and always set the checksum
 * flag.  On failure they return the error (FT_ENOMEM; FT_EINVAL for bad
 * arguments; FT_ELIMIT when a size limit of the protocol would be broken)
 * and leave the buffer as it was.  A frame they write is one the decoders
 * accept, and decoding then re-encoding (ft_frame_encode) gives it back
 * byte for byte.
 */
#ifndef FT_FRAME_H
#define FT_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie.h"

#define FT_FRAME_MAGIC "FTRP"
#define FT_FRAME_VERSION 1     /* the only version this code speaks */
#define FT_FRAME_HDR_SIZE 32u

/* Frame types.  A reply has bit 15 set; its low bits name the request type
 * it answers.  ERROR may answer any request. */
enum {
    FT_FRAME_SEARCH = 0x0001,
    FT_FRAME_INFO = 0x0002,
    FT_FRAME_PING = 0x0003,
    FT_FRAME_RELOAD = 0x0004,
    FT_FRAME_ERROR = 0x8000,
    FT_FRAME_RESULT = 0x8001,
    FT_FRAME_INFO_REPLY = 0x8002,
    FT_FRAME_PONG = 0x8003,
    FT_FRAME_RELOAD_REPLY = 0x8004
};

/* FT_FRAME_IS_REPLY tells a reply type from a request type. */
#define FT_FRAME_IS_REPLY(type) (((type) & 0x8000u) != 0)

/* Header flags.  Unknown bits are rejected, so a later version can give
 * them a meaning safely. */
#define FT_FRAME_F_CHECKSUM 0x1u /* checksum field holds XXH32, see below */
#define FT_FRAME_F_ALL 0x1u

/* Field mask of one SEARCH request: which optional docs/specification.md
 * section 3 fields were given.  A field left out takes the default of
 * ft_request_init and must be zero on the wire. */
#define FT_FRAME_HAS_BEAM 0x01u
#define FT_FRAME_HAS_RESULTS 0x02u
#define FT_FRAME_HAS_THETA_TOK 0x04u
#define FT_FRAME_HAS_THETA_SENT 0x08u
#define FT_FRAME_HAS_ALPHA 0x10u
#define FT_FRAME_HAS_ALL 0x1fu

/* Limits of protocol version 1. */
#define FT_FRAME_MAX_BATCH 1024u    /* requests per SEARCH when the caller
                                     * passes max_batch 0 */
#define FT_FRAME_MAX_MSG 1024u      /* ERROR and RELOAD_REPLY message bytes */
#define FT_FRAME_MAX_RESULT_MSG 159u /* a RESULT's per-request message: what
                                      * ft_result.error holds */
#define FT_FRAME_MAX_PATH 4095u     /* RELOAD path bytes */
#define FT_FRAME_MAX_TEXT (1u << 20) /* INFO_REPLY text bytes */
#define FT_FRAME_SEARCH_REQ_SIZE 40u /* fixed part of one SEARCH request */
#define FT_FRAME_RESULT_REQ_SIZE 16u /* fixed part of one RESULT entry */
#define FT_FRAME_HIT_SIZE 24u        /* fixed part of one hit */

/* ft_frame_hdr is a decoded header. */
typedef struct ft_frame_hdr {
    uint16_t version;
    uint16_t type;
    uint32_t flags;
    uint32_t deadline_ms; /* SEARCH: ms after receipt; 0 = no deadline */
    uint64_t id;          /* chosen by the client, echoed in the reply */
    uint32_t payload_len;
    uint32_t checksum;
} ft_frame_hdr;

/* ft_frame_msg is one decoded frame of any type, with the storage that
 * backs it.  Which members are meaningful depends on hdr.type:
 *   SEARCH        count, reqs[count], masks[count]
 *   RESULT        count, res[count] (hits and tokens owned by the msg: do
 *                 not ft_result_free them)
 *   ERROR         status (the ft_err code, never 0), text (message)
 *   INFO_REPLY    text
 *   RELOAD        text (index path; empty = the configured one)
 *   RELOAD_REPLY  status (0 = reloaded), text (message)
 *   INFO, PING, PONG  nothing
 * text is NUL-terminated (never NULL after a decode) and holds no NUL. */
typedef struct ft_frame_msg {
    ft_frame_hdr hdr;
    uint32_t count;
    ft_request *reqs;
    uint32_t *masks;
    ft_result *res;
    int status;
    char *text;
    size_t text_len;
    /* 1 when the last SEARCH's grids point into the decoded frame (see
     * ft_frame_decode), 0 when they were copied into grid_tok/grid_logp */
    int inplace;
    /* storage, grown as needed and kept for the next decode (up to
     * ft_frame_msg_trim's bound) */
    uint32_t req_cap;
    uint32_t res_cap;
    uint32_t *grid_tok;
    float *grid_logp;
    size_t grid_cap; /* elements of grid_tok and grid_logp */
    ft_hit *hit_pool;
    size_t hit_cap;
    uint32_t *tok_pool;
    size_t tok_cap;
    size_t text_cap;
} ft_frame_msg;

/* ft_frame_is_binary tells a binary frame from a JSON line by its first
 * byte: 'F' (the magic's first byte), which no JSON text starts with. */
int ft_frame_is_binary(const void *buf, size_t len);

/* ft_frame_type_name returns "SEARCH", "RESULT", ... or "unknown". */
const char *ft_frame_type_name(uint16_t type);

void ft_frame_msg_init(ft_frame_msg *m);
void ft_frame_msg_free(ft_frame_msg *m);
/* ft_frame_msg_trim gives back the storage m kept from earlier decodes
 * beyond keep bytes per array (the decoded contents are gone after it):
 * one large frame must not pin its memory for the rest of a connection. */
void ft_frame_msg_trim(ft_frame_msg *m, size_t keep);

/* ft_frame_decode_header checks and decodes the header of the frame in
 * buf: magic, version, a known type, known flags, a payload length equal to
 * the bytes after the header, and the checksum.  It does not look at the
 * payload's contents.  On FT_EPROTO, h->id is still set when at least 24
 * bytes with the right magic were given (else 0). */
int ft_frame_decode_header(ft_frame_hdr *h, const void *buf, size_t len,
                           char *errbuf, size_t errlen);

/* ft_frame_decode decodes a whole frame of any type into m.  max_batch
 * bounds the count of a SEARCH or RESULT (0 = FT_FRAME_MAX_BATCH).
 * FT_EPROTO for a malformed frame, FT_ENOMEM when out of memory.
 * A SEARCH's grids are decoded in place when buf is 4-byte aligned on a
 * little-endian host (m->inplace): the requests' tokens and logp then
 * point into buf, which must outlive them (the server keeps the received
 * nng message until its answer is sent); otherwise they are copied into
 * m's own storage. */
int ft_frame_decode(ft_frame_msg *m, const void *buf, size_t len,
                    uint32_t max_batch, char *errbuf, size_t errlen);

/* ft_frame_decode_result_into decodes a RESULT frame into the caller's
 * nres results (sized with ft_result_alloc), setting *count to the results
 * filled.  FT_EPROTO for a malformed frame or one of another type,
 * FT_ELIMIT when it does not fit (more results than nres, more hits or
 * tokens than a result's capacity).  h may be NULL. */
int ft_frame_decode_result_into(ft_frame_hdr *h, ft_result *res, size_t nres,
                                uint32_t *count, const void *buf, size_t len,
                                char *errbuf, size_t errlen);

/* ft_frame_check_request returns FT_OK for a header of a request type,
 * else FT_EPROTO with "type: RESULT is a reply, not a request at byte 6":
 * what a server answers (in an ERROR) to a well-formed reply sent to it. */
int ft_frame_check_request(const ft_frame_hdr *h, char *errbuf,
                           size_t errlen);

/* ft_frame_search_fault checks the one docs/specification.md section 3 rule
 * that only the wire form can break: "results" given as 0 (ft_request carries 0
 * as "not given, as many as beam").  It returns FT_EREQUEST with "results: must
 * be 1..4096, got 0" for request i of a decoded SEARCH, else FT_OK.  Servers
 * call it before ft_request_validate. */
int ft_frame_search_fault(const ft_frame_msg *m, uint32_t i, char *errbuf,
                          size_t errlen);

/* ft_frame_mask_of returns the field mask that leaves out every field of
 * req equal to its default (bit for bit): what ft_frame_encode_search uses
 * when masks is NULL. */
uint32_t ft_frame_mask_of(const ft_request *req);

/* ft_frame_encode_search appends a SEARCH of n >= 1 requests.  masks
 * (n entries, or NULL for ft_frame_mask_of) say which optional fields are
 * sent; fields left out are sent as zero and decode to their defaults.
 * Requests are not validated (the server does it), but T and K must be
 * within the wire limits (FT_ELIMIT) and tokens/logp non-NULL when T*K > 0
 * (FT_EINVAL). */
int ft_frame_encode_search(ft_buf *b, uint64_t id, uint32_t deadline_ms,
                           const ft_request *reqs, const uint32_t *masks,
                           size_t n);

/* ft_frame_search_size checks n requests as ft_frame_encode_search does
 * (the same errors) and sets *size to the exact bytes of the SEARCH frame
 * it would append; ft_frame_encode_search_to writes that frame, byte for
 * byte, into dst of exactly size bytes (FT_EINVAL for another size): the
 * client writes its request straight into the nng message it sends.
 * flags: FT_FRAME_F_CHECKSUM to set the checksum (the encoders that
 * append to an ft_buf always set it), 0 for a frame without one (the
 * client on ipc://: docs/protocol.md); other bits are FT_EINVAL. */
int ft_frame_search_size(const ft_request *reqs, const uint32_t *masks,
                         size_t n, size_t *size);
int ft_frame_encode_search_to(void *dst, size_t size, uint64_t id,
                              uint32_t deadline_ms, uint32_t flags,
                              const ft_request *reqs, const uint32_t *masks,
                              size_t n);

/* ft_frame_encode_result appends a RESULT answering n >= 1 requests in
 * order.  A result with status != FT_OK carries its error text (at most
 * FT_FRAME_MAX_RESULT_MSG bytes of it) and no hits; one with FT_OK its
 * hits (key lengths 1..255, tokens within cap_tokens, else FT_EINVAL). */
int ft_frame_encode_result(ft_buf *b, uint64_t id, const ft_result *res,
                           size_t n);

/* ft_frame_result_size checks n results as ft_frame_encode_result does
 * (the same errors) and sets *size to the exact bytes of the RESULT frame
 * it would append: a caller sizes its own buffer (the server: the reply's
 * nng message) and writes the frame there with ft_frame_encode_result_to,
 * with no intermediate copy. */
int ft_frame_result_size(const ft_result *res, size_t n, size_t *size);

/* ft_frame_encode_result_to writes the RESULT frame ft_frame_encode_result
 * would append, byte for byte, into dst, which holds exactly size bytes
 * (ft_frame_result_size's; FT_EINVAL for another size), with the flags
 * given (the server mirrors its request's FT_FRAME_F_CHECKSUM). */
int ft_frame_encode_result_to(void *dst, size_t size, uint64_t id,
                              uint32_t flags, const ft_result *res, size_t n);

/* ft_frame_encode_result_sized is ft_frame_encode_result_to for a size
 * that ft_frame_result_size gave for the same results, unchanged since
 * (the caller's promise): it writes them without measuring them again.
 * The server's reply takes this way: the second walk over every hit was
 * 2% of its work per request outside the engine (issue 35). */
int ft_frame_encode_result_sized(void *dst, size_t size, uint64_t id,
                                 uint32_t flags, const ft_result *res,
                                 size_t n);

/* ft_frame_encode_error appends an ERROR: code (not FT_OK) and a message in
 * the style "<field>: <reason>".  A message longer than FT_FRAME_MAX_MSG is
 * cut to fit and ends with "..." so that the cut shows. */
int ft_frame_encode_error(ft_buf *b, uint64_t id, int code, const char *msg);

int ft_frame_encode_info(ft_buf *b, uint64_t id);
/* ft_frame_encode_info_reply appends the INFO text (len bytes, no NUL,
 * at most FT_FRAME_MAX_TEXT). */
int ft_frame_encode_info_reply(ft_buf *b, uint64_t id, const char *text,
                               size_t len);
int ft_frame_encode_ping(ft_buf *b, uint64_t id);
int ft_frame_encode_pong(ft_buf *b, uint64_t id);
/* ft_frame_encode_reload asks for a reload of path (NULL or "" = the path
 * the server was configured with); at most FT_FRAME_MAX_PATH bytes. */
int ft_frame_encode_reload(ft_buf *b, uint64_t id, const char *path);
/* ft_frame_encode_reload_reply: status FT_OK or the error of the reload,
 * and a message (NULL = none), cut like ft_frame_encode_error's. */
int ft_frame_encode_reload_reply(ft_buf *b, uint64_t id, int status,
                                 const char *msg);

/* ft_frame_encode re-encodes a decoded message exactly: same flags,
 * deadline, masks and contents, so that decode then encode gives the
 * original bytes back. */
int ft_frame_encode(ft_buf *b, const ft_frame_msg *m);

#endif /* FT_FRAME_H */
