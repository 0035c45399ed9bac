/* cmd_search.c - "flashtrie search": answers a JSON Lines file of requests
 * offline (docs/specification.md section 7).
 *
 * Every input line gets exactly one output line, in input order, so that
 * line N of the output answers line N of the input: a rejected request, a
 * JSON syntax error and an empty line ("json: empty line") all answer with
 * an {"error": ...} line.  The exit status is 0 however many lines were
 * rejected; 2 for unusable arguments; 1 when the index cannot be used, the
 * asked engine cannot start, the input cannot be read (the lines read
 * before the error are answered first) or the output cannot be written.
 * A line longer than --max-line-bytes is answered with an error without
 * being held in memory whole: only its first bytes are kept (for the id). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie/internal/buf.h"
#include "commands.h"
#include "flashtrie.h"
#include "jsonl.h"

typedef struct slot {
    ft_jsonl_req q;
    int ok;          /* parsed; its answer is res[ri] */
    size_t ri;
    char error[256]; /* parse error when !ok */
} slot;

/* ensure_result makes res hold n hits of up to T tokens each. */
static int ensure_result(ft_result *res, uint32_t n, uint32_t T)
{
    if (res->hits != NULL && res->cap_hits >= n && res->cap_tokens >= n * T)
        return FT_OK;
    uint32_t hits = res->cap_hits > n ? res->cap_hits : n;
    ft_result_free(res);
    return ft_result_alloc(res, hits, FT_MAX_T);
}

/* read_line reads one line (its '\n' dropped) into *buf, keeping at most
 * keep bytes of it and discarding the rest, so that memory stays bounded
 * whatever the input.  1 for a line, 0 at the end of the input, -1 when
 * out of memory, -2 when the input cannot be read (errno set; the part of
 * a line read before the error is dropped). */
static int read_line(FILE *f, char **buf, size_t *cap, size_t keep,
                     size_t *len)
{
    size_t n = 0;
    int c, any = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (n >= keep)
            continue;
        if (n + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            if (nc > keep + 1)
                nc = keep + 1;
            char *p = realloc(*buf, nc);
            if (p == NULL)
                return -1;
            *buf = p;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && ferror(f))
        return -2;
    *len = n;
    return any;
}

static const char *usage_text =
    "usage: flashtrie search --index INDEX [--engine auto|cpu|gpu]\n"
    "         [--threads N] [--batch N] [--max-beam N] [--no-verify]\n"
    "         [--max-line-bytes N] [--ar [sparse|dense]]\n"
    "         < requests.jsonl > results.jsonl\n"
    "  answers one JSON request per input line with one result line, in\n"
    "  input order (docs/specification.md section 7).  INDEX is an index\n"
    "  file or a shard manifest (flashtrie split).  --engine auto (default)\n"
    "  uses the GPU when one is usable, else the CPU; --threads sets the\n"
    "  CPU workers (0 = all cores); --batch sets how many lines go to the\n"
    "  engine at once (default 32); --max-beam caps the beam (default\n"
    "  4096); --max-line-bytes rejects longer request lines (default\n"
    "  67108864).  Exit 0 even when some lines were rejected, 1 for an\n"
    "  unusable index, 2 for unusable arguments.\n"
    "  --ar answers through the autoregressive step API, one decode step\n"
    "  at a time, each beam given row t of its grid as a sparse row (the\n"
    "  default) or a dense row over the grid's tokens (--ar dense); the\n"
    "  answers are the same bytes (a plain index only, not a manifest);\n"
    "  --threads there sets the CPU step's threads (0..256).\n";

static int parse_num(const char *opt, const char *s, unsigned long long min,
                     unsigned long long max, unsigned long long *out)
{
    if (ft_cli_parse_u64(s, out) || *out < min || *out > max) {
        fprintf(stderr, "flashtrie search: %s: expected %llu..%llu, got "
                "'%s'\n", opt, min, max, s);
        return -1;
    }
    return 0;
}

int cmd_search(int argc, char **argv)
{
    static const struct option opts[] = {
        {"index", required_argument, 0, 'i'},
        {"engine", required_argument, 0, 'e'},
        {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'b'},
        {"max-beam", required_argument, 0, 'm'},
        {"no-verify", no_argument, 0, 'n'},
        {"max-line-bytes", required_argument, 0, 'L'},
        {"ar", optional_argument, 0, 'a'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *index = NULL, *engine = NULL;
    ft_engine_kind kind = FT_ENGINE_AUTO;
    unsigned long long threads = 0, batch = 32, max_beam = 0;
    unsigned long long max_line = FT_JSONL_MAX_LINE_DEFAULT;
    int no_verify = 0, c, ar = 0; /* 1 sparse, 2 dense */
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'i': index = optarg; break;
        case 'e': engine = optarg; break;
        case 't':
            if (parse_num("--threads", optarg, 0, 1024, &threads))
                return 2;
            break;
        case 'b':
            if (parse_num("--batch", optarg, 1, 65536, &batch))
                return 2;
            break;
        case 'm':
            if (parse_num("--max-beam", optarg, 1, FT_MAX_BEAM, &max_beam))
                return 2;
            break;
        case 'n': no_verify = 1; break;
        case 'a': {
            const char *form = optarg;
            /* "--ar dense" as well as "--ar=dense" */
            if (form == NULL && optind < argc &&
                (!strcmp(argv[optind], "sparse") ||
                 !strcmp(argv[optind], "dense")))
                form = argv[optind++];
            if (form == NULL || !strcmp(form, "sparse"))
                ar = 1;
            else if (!strcmp(form, "dense"))
                ar = 2;
            else {
                fprintf(stderr, "flashtrie search: --ar: expected sparse or "
                        "dense, got '%s'\n", form);
                return 2;
            }
            break;
        }
        case 'L':
            if (parse_num("--max-line-bytes", optarg, 1, 1ull << 40,
                          &max_line))
                return 2;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "flashtrie search: unexpected argument '%s'\n",
                argv[optind]);
        fputs(usage_text, stderr);
        return 2;
    }
    if (index == NULL) {
        fprintf(stderr, "flashtrie search: --index is required\n");
        fputs(usage_text, stderr);
        return 2;
    }
    if (engine != NULL && ft_engine_kind_parse(engine, &kind) != FT_OK) {
        fprintf(stderr,
                "flashtrie search: --engine: expected auto, cpu or gpu, got "
                "'%s'\n", engine);
        return 2;
    }

    char err[512];
    ft_library *lib;
    if (ft_library_open(&lib, index, no_verify ? FT_OPEN_NO_VERIFY : 0, err,
                        sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie search: %s\n", err);
        return 1;
    }
    ft_searcher *eng = NULL;
    ft_cli_ar *cli_ar = NULL;
    int rc;
    if (ar) {
        if (ft_library_shards(lib) != 1 || ft_library_is_manifest(lib)) {
            fprintf(stderr, "flashtrie search: --ar: %s is a shard manifest; "
                    "the step API takes a plain index\n", index);
            ft_library_close(lib);
            return 2;
        }
        if (threads > 256) {
            fprintf(stderr, "flashtrie search: --threads: --ar takes 0..256 "
                    "threads, got %llu\n", threads);
            ft_library_close(lib);
            return 2;
        }
        rc = ft_cli_ar_open(&cli_ar, ft_library_shard(lib, 0), ar == 2, kind,
                            (uint32_t)threads, err, sizeof err);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie search: --ar: %s\n", err);
            ft_library_close(lib);
            return 1;
        }
        FT_LOGF(FT_LOG_INFO, "search: %s", ft_cli_ar_note(cli_ar));
        goto opened;
    }
    ft_searcher_opts so;
    ft_searcher_opts_init(&so);
    so.engine.kind = kind;
    so.engine.threads = (int)threads;
    so.engine.max_beam = (uint32_t)max_beam;
    so.engine.max_batch = (uint32_t)(batch < 1024 ? batch : 1024);
    rc = ft_searcher_open(&eng, lib, &so, err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "flashtrie search: %s engine: %s\n",
                so.engine.kind == FT_ENGINE_GPU ? "GPU" : "CPU", err);
        ft_library_close(lib);
        return 1;
    }
    FT_LOGF(FT_LOG_INFO, "search: %s", ft_searcher_note(eng));

opened:;
    int status = 0;
    slot *slots = calloc(batch, sizeof *slots);
    ft_request *reqs = calloc(batch, sizeof *reqs);
    ft_result *res = calloc(batch, sizeof *res);
    if (!slots || !reqs || !res) {
        fprintf(stderr, "flashtrie search: out of memory\n");
        status = 1;
        goto done;
    }
    for (size_t i = 0; i < batch; i++) {
        ft_jsonl_req_init(&slots[i].q);
        slots[i].q.max_line = (size_t)max_line;
    }
    char *line = NULL;
    size_t cap = 0;
    /* Two bytes past the cap: even after the parser drops a trailing
     * "\r", a cut line is still longer than the cap and rejected. */
    size_t keep = (size_t)max_line + 2;
    ft_buf out;
    ft_buf_init(&out);
    int eof = 0, read_errno = 0;
    while (!eof) {
        size_t n = 0, m = 0;
        while (n < batch) {
            size_t len;
            int got = read_line(stdin, &line, &cap, keep, &len);
            if (got == -1) {
                fprintf(stderr, "flashtrie search: out of memory\n");
                status = 1;
                eof = 1;
                break;
            }
            if (got == -2) {
                /* The lines read so far are answered, then exit 1: a
                 * read error is never taken for the end of the input. */
                read_errno = errno ? errno : EIO;
                eof = 1;
                break;
            }
            if (got == 0) {
                eof = 1;
                break;
            }
            slot *s = &slots[n++];
            rc = ft_jsonl_parse(&s->q, line, len, s->error, sizeof s->error);
            s->ok = rc == FT_OK;
            if (s->ok) {
                uint32_t nres = s->q.req.results ? s->q.req.results
                                                 : s->q.req.beam;
                if (ensure_result(&res[m], nres, s->q.req.T) != FT_OK) {
                    s->ok = 0;
                    snprintf(s->error, sizeof s->error,
                             "request: out of memory");
                    continue;
                }
                s->ri = m;
                reqs[m++] = s->q.req;
            }
        }
        if (status != 0)
            break;
        for (size_t i = 0; cli_ar && i < m; i++) {
            rc = ft_cli_ar_search(cli_ar, &reqs[i], (uint32_t)max_beam,
                                  &res[i]);
            if (rc != FT_OK) {
                fprintf(stderr, "flashtrie search: %s failed: %s (%s)\n",
                        ft_cli_ar_note(cli_ar), ft_strerror(rc),
                        res[i].error);
                status = 1;
                break;
            }
        }
        if (status != 0)
            break;
        if (m > 0 && !cli_ar) {
            rc = ft_searcher_search_batch(eng, reqs, m, res);
            if (rc != FT_OK) {
                fprintf(stderr, "flashtrie search: %s failed: %s\n",
                        ft_searcher_note(eng), ft_strerror(rc));
                status = 1;
                break;
            }
        }
        out.len = 0;
        for (size_t i = 0; i < n; i++) {
            slot *s = &slots[i];
            int wrc = s->ok ? ft_jsonl_encode_result(&out, &s->q, &res[s->ri])
                            : ft_jsonl_encode_error(&out, &s->q, s->error);
            if (wrc != FT_OK) {
                fprintf(stderr, "flashtrie search: out of memory\n");
                status = 1;
                eof = 1;
                break;
            }
        }
        if (status == 0 && out.len > 0 &&
            fwrite(out.data, 1, out.len, stdout) != out.len) {
            fprintf(stderr, "flashtrie search: cannot write the output\n");
            status = 1;
            eof = 1;
        }
    }
    free(line);
    ft_buf_free(&out);
    if (fflush(stdout) != 0 && status == 0) {
        fprintf(stderr, "flashtrie search: cannot write the output\n");
        status = 1;
    }
    if (read_errno != 0 && status == 0) {
        fprintf(stderr, "flashtrie search: cannot read the input: %s\n",
                strerror(read_errno));
        status = 1;
    }
done:
    if (slots)
        for (size_t i = 0; i < batch; i++)
            ft_jsonl_req_free(&slots[i].q);
    if (res)
        for (size_t i = 0; i < batch; i++)
            ft_result_free(&res[i]);
    free(slots);
    free(reqs);
    free(res);
    ft_searcher_close(eng);
    ft_cli_ar_close(cli_ar);
    ft_library_close(lib);
    return status;
}
