// marisa_bench.cc - libmarisa baselines for FlashTrie (paper Appendix B.1).
//
//   ft_marisa_bench build  --keys FILE [--num-tries N]
//       builds a marisa trie of the keys and prints build seconds and bytes
//       per key, to compare with 'flashtrie build' + 'flashtrie info'.
//   ft_marisa_bench search --keys FILE (--requests FILE.jsonl |
//       --index INDEX --n-requests N --beam B [--K K] [--T T] [--head r]
//       [--seed S]) [--output RESULTS.jsonl] [--limit N]
//       answers requests with MARISA-Int: single-threaded, every (beam,
//       proposal) pair walks from the root on the full prefix (a marisa
//       predictive search for "exists / has children", a lookup for "is a
//       key"), std::partial_sort pruning, docs/specification.md section 4
//       semantics exactly. Prints per-request latency; writes results as
//       'flashtrie search'.
//
// Token encoding: marisa keys are byte strings, so every token becomes a
// prefix-free base-128 varint, most significant group first, high bit set
// on every byte but the last (tokens < 128: 1 byte, < 16384: 2, < 2^21: 3,
// else 4 or 5).  Being prefix-free, a token sequence is a prefix of a key
// exactly when its encoding is a byte prefix of the key's encoding, so
// byte-level lookups answer token-level questions.  Zipf-ranked tokens
// (2.2M vocabulary) take about 2.6 bytes each against 4 for fixed width.
#include <marisa.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flashtrie.h"
#include "workload.h"
extern "C" {
#include "jsonl.h" /* the router's one request parser and result writer */
}

namespace {

double now_s()
{
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void enc_token(std::string &s, uint32_t t)
{
    char b[5];
    int n = 0;
    do {
        b[n++] = (char)(t & 0x7f);
        t >>= 7;
    } while (t);
    for (int i = n - 1; i >= 0; i--)
        s.push_back((char)(b[i] | (i ? 0x80 : 0)));
}

// decode splits an encoded key back into tokens.
std::vector<uint32_t> dec_key(const char *p, size_t n)
{
    std::vector<uint32_t> out;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)p[i];
        v = (v << 7) | (c & 0x7f);
        if (!(c & 0x80)) {
            out.push_back(v);
            v = 0;
        }
    }
    return out;
}

[[noreturn]] void die(int code, const char *msg, const char *arg = "")
{
    std::fprintf(stderr, "ft_marisa_bench: %s%s\n", msg, arg);
    std::exit(code);
}

// Library holds the marisa trie and the value of every key
// (docs/specification.md section 2: explicit, or the 0-based line/record of
// first occurrence).
struct Library {
    marisa::Trie trie;
    std::vector<uint64_t> values; // by marisa key id
    uint64_t records = 0, enc_bytes = 0;
    double load_s = 0, build_s = 0;
};

void load_keys(const char *path, marisa::Keyset &ks, std::vector<uint64_t> &vals)
{
    FILE *f = std::fopen(path, "rb");
    if (!f)
        die(1, "cannot open keys file ", path);
    char magic[8];
    size_t got = std::fread(magic, 1, 8, f);
    bool ftk = std::strlen(path) > 4 && !std::strcmp(path + std::strlen(path) - 4, ".ftk");
    bool with_val = got == 8 && !std::memcmp(magic, "FTKEYSV1", 8);
    std::string key;
    if (ftk || with_val) {
        std::vector<uint8_t> buf(magic, magic + got);
        size_t pos = with_val ? 8 : 0;
        uint64_t rec = 0;
        std::vector<uint8_t> rd(1 << 20);
        auto need = [&](size_t n) {
            while (buf.size() - pos < n) {
                size_t m = std::fread(rd.data(), 1, rd.size(), f);
                if (m == 0)
                    return false;
                buf.erase(buf.begin(), buf.begin() + (long)pos);
                pos = 0;
                buf.insert(buf.end(), rd.begin(), rd.begin() + (long)m);
            }
            return true;
        };
        while (need(4)) {
            uint32_t n;
            std::memcpy(&n, &buf[pos], 4);
            pos += 4;
            if (n == 0 || !need(4ull * n + (with_val ? 8 : 0)))
                die(1, "bad .ftk record in ", path);
            key.clear();
            for (uint32_t i = 0; i < n; i++) {
                uint32_t t;
                std::memcpy(&t, &buf[pos + 4 * i], 4);
                enc_token(key, t);
            }
            pos += 4ull * n;
            uint64_t v = rec;
            if (with_val) {
                std::memcpy(&v, &buf[pos], 8);
                pos += 8;
            }
            ks.push_back(key.data(), key.size());
            vals.push_back(v);
            rec++;
        }
    } else {
        if (std::fseek(f, 0, SEEK_SET))
            die(2, "text keys must come from a file, not a pipe: ", path);
        char *line = nullptr;
        size_t cap = 0;
        ssize_t len;
        uint64_t ln = 0;
        while ((len = getline(&line, &cap, f)) > 0) {
            const char *p = line, *end = line + len;
            uint64_t v = ln++;
            while (p < end && *p == ' ')
                p++;
            if (p == end || *p == '#' || *p == '\n' || *p == '\r')
                continue;
            key.clear();
            while (p < end && *p != '\t' && *p != '\n' && *p != '\r') {
                char *q;
                unsigned long t = std::strtoul(p, &q, 10);
                if (q == p)
                    die(1, "bad token in keys file ", path);
                enc_token(key, (uint32_t)t);
                p = q;
                while (p < end && *p == ' ')
                    p++;
            }
            if (p < end && *p == '\t')
                v = std::strtoull(p + 1, nullptr, 10);
            ks.push_back(key.data(), key.size());
            vals.push_back(v);
        }
        std::free(line);
    }
    std::fclose(f);
}

void build_library(Library &lib, const char *keys, int num_tries)
{
    marisa::Keyset ks;
    std::vector<uint64_t> vals;
    double t0 = now_s();
    load_keys(keys, ks, vals);
    lib.records = vals.size();
    lib.enc_bytes = ks.total_length();
    double t1 = now_s();
    lib.trie.build(ks, num_tries);
    double t2 = now_s();
    lib.load_s = t1 - t0;
    lib.build_s = t2 - t1;
    lib.values.assign(lib.trie.num_keys(), UINT64_MAX);
    // Keys were pushed in file order, so the first occurrence wins.
    for (size_t i = 0; i < ks.size(); i++) {
        uint64_t &v = lib.values[ks[i].id()];
        if (v == UINT64_MAX)
            v = vals[i];
    }
}

// ---- MARISA-Int search (docs/specification.md section 4) ----

struct Beam {
    float sigma;
    uint32_t r, k;
    std::string enc; // the encoded prefix: walked from the root every time
};

struct Sel {
    double score;
    float sigma;
    uint32_t t, r, k;
    std::string enc;
    uint64_t value;
};

struct Hit {
    std::vector<uint32_t> toks;
    uint64_t value;
    double score;
    float sigma;
};

std::vector<Hit> search(const Library &lib, const ft_request &rq)
{
    uint32_t T = rq.T, K = rq.K;
    uint32_t B = rq.beam, n = rq.results ? rq.results : rq.beam;
    std::vector<double> F(T + 1);
    for (uint32_t d = 0; d <= T; d++)
        F[d] = std::pow(6.0 / (5.0 + d), rq.alpha);
    // Proposal order: stable sort by logp descending.
    std::vector<uint32_t> ord(K);
    std::vector<uint32_t> tok((size_t)T * K);
    std::vector<float> lp((size_t)T * K);
    for (uint32_t t = 0; t < T; t++) {
        for (uint32_t k = 0; k < K; k++)
            ord[k] = k;
        const float *row = rq.logp + (size_t)t * K;
        std::stable_sort(ord.begin(), ord.end(),
                         [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
        for (uint32_t k = 0; k < K; k++) {
            tok[(size_t)t * K + k] = rq.tokens[(size_t)t * K + ord[k]];
            lp[(size_t)t * K + k] = row[ord[k]];
        }
    }
    std::vector<Beam> cur(1), next;
    cur[0].sigma = 0.0f;
    cur[0].r = cur[0].k = 0;
    std::vector<Sel> selected;
    marisa::Agent ag;
    std::string q;
    for (uint32_t t = 0; t < T; t++) {
        next.clear();
        for (uint32_t r = 0; r < cur.size(); r++) {
            const Beam &s = cur[r];
            for (uint32_t k = 0; k < K; k++) {
                float rho = lp[(size_t)t * K + k];
                if (!(rho > rq.theta_tok))
                    continue;
                volatile float sig = s.sigma + rho; // one binary32 add
                if (!(sig > rq.theta_sent))
                    continue;
                q = s.enc;
                enc_token(q, tok[(size_t)t * K + k]);
                // Traversal 1: does a node spell q, and what lies below?
                ag.set_query(q.data(), q.size());
                if (!lib.trie.predictive_search(ag))
                    continue;
                bool terminal = false, children = false;
                if (ag.key().length() > q.size())
                    children = true;
                else
                    terminal = true;
                if (terminal)
                    children = lib.trie.predictive_search(ag);
                else {
                    // Traversal 2: is q itself a key?
                    ag.set_query(q.data(), q.size());
                    terminal = lib.trie.lookup(ag);
                }
                if (terminal) {
                    ag.set_query(q.data(), q.size());
                    lib.trie.lookup(ag);
                    Sel c;
                    c.sigma = sig;
                    c.score = (double)c.sigma * F[t + 1];
                    c.t = t;
                    c.r = r;
                    c.k = k;
                    c.enc = q;
                    c.value = lib.values[ag.key().id()];
                    selected.push_back(std::move(c));
                }
                if (children) {
                    Beam b;
                    b.sigma = sig;
                    b.r = r;
                    b.k = k;
                    b.enc = q;
                    next.push_back(std::move(b));
                }
            }
        }
        auto beam_less = [](const Beam &a, const Beam &b) {
            if (a.sigma != b.sigma)
                return a.sigma > b.sigma;
            if (a.r != b.r)
                return a.r < b.r;
            return a.k < b.k;
        };
        size_t keep = std::min<size_t>(B, next.size());
        std::partial_sort(next.begin(), next.begin() + (long)keep, next.end(), beam_less);
        next.resize(keep);
        cur.swap(next);
        if (cur.empty())
            break;
    }
    auto sel_less = [](const Sel &a, const Sel &b) {
        if (a.score != b.score)
            return a.score > b.score;
        if (a.t != b.t)
            return a.t < b.t;
        if (a.r != b.r)
            return a.r < b.r;
        return a.k < b.k;
    };
    size_t keep = std::min<size_t>(n, selected.size());
    std::partial_sort(selected.begin(), selected.begin() + (long)keep, selected.end(), sel_less);
    std::vector<Hit> out;
    for (size_t i = 0; i < keep; i++) {
        Hit h;
        h.toks = dec_key(selected[i].enc.data(), selected[i].enc.size());
        h.value = selected[i].value;
        h.score = selected[i].score;
        h.sigma = selected[i].sigma;
        out.push_back(std::move(h));
    }
    return out;
}

// print_hits writes the answer line exactly as 'flashtrie search' does,
// through the router's result writer, so the two files compare with cmp.
void print_hits(FILE *f, const ft_jsonl_req *q, const std::vector<Hit> &hits)
{
    ft_result res;
    std::memset(&res, 0, sizeof res);
    std::vector<ft_hit> h(hits.size() + 1);
    std::vector<uint32_t> toks;
    for (size_t i = 0; i < hits.size(); i++) {
        h[i].len = (uint32_t)hits[i].toks.size();
        h[i].tok_off = (uint32_t)toks.size();
        h[i].value = hits[i].value;
        h[i].score = hits[i].score;
        h[i].sigma = hits[i].sigma;
        toks.insert(toks.end(), hits[i].toks.begin(), hits[i].toks.end());
    }
    toks.push_back(0);
    res.n = (uint32_t)hits.size();
    res.cap_hits = (uint32_t)h.size();
    res.cap_tokens = (uint32_t)toks.size();
    res.hits = h.data();
    res.tokens = toks.data();
    res.status = FT_OK;
    ft_jsonl_write_result(f, q, &res);
}

double pct(std::vector<double> v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t i = (size_t)std::ceil(p / 100.0 * (double)v.size());
    return v[i ? i - 1 : 0];
}

const char *arg_of(int &i, int argc, char **argv)
{
    if (i + 1 >= argc)
        die(2, "missing value after ", argv[i]);
    return argv[++i];
}

uint64_t num(const char *opt, const char *s)
{
    char *e;
    unsigned long long v = std::strtoull(s, &e, 10);
    if (*s < '0' || *s > '9' || *e)
        die(2, "expected a non-negative integer after ", opt);
    return v;
}

const char *usage =
    "usage: ft_marisa_bench build --keys FILE [--num-tries N]\n"
    "       ft_marisa_bench search --keys FILE (--requests FILE.jsonl |\n"
    "           --index INDEX --n-requests N --beam B [--K K] [--T T] [--head r]\n"
    "           [--seed S]) [--output RESULTS.jsonl] [--limit N] [--num-tries N]\n";

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2 || (std::strcmp(argv[1], "build") && std::strcmp(argv[1], "search"))) {
        std::fputs(usage, argc >= 2 && !std::strcmp(argv[1], "--help") ? stdout : stderr);
        return argc >= 2 && !std::strcmp(argv[1], "--help") ? 0 : 2;
    }
    bool do_search = !std::strcmp(argv[1], "search");
    const char *keys = nullptr, *requests = nullptr, *index = nullptr, *output = nullptr;
    int num_tries = MARISA_DEFAULT_NUM_TRIES;
    uint64_t limit = 0;
    ft_wl_req_opts ro;
    ft_wl_req_opts_init(&ro);
    ro.n = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!std::strcmp(a, "--keys")) keys = arg_of(i, argc, argv);
        else if (!std::strcmp(a, "--requests")) requests = arg_of(i, argc, argv);
        else if (!std::strcmp(a, "--index")) index = arg_of(i, argc, argv);
        else if (!std::strcmp(a, "--output")) output = arg_of(i, argc, argv);
        else if (!std::strcmp(a, "--limit")) limit = num(a, arg_of(i, argc, argv));
        else if (!std::strcmp(a, "--num-tries")) {
            uint64_t v = num(a, arg_of(i, argc, argv));
            if (v < 1 || v > 127)
                die(2, "--num-tries: must be 1..127");
            num_tries = (int)v;
        }
        else if (!std::strcmp(a, "--n-requests")) ro.n = num(a, arg_of(i, argc, argv));
        else if (!std::strcmp(a, "--beam")) ro.beam = (uint32_t)num(a, arg_of(i, argc, argv));
        else if (!std::strcmp(a, "--K")) ro.K = (uint32_t)num(a, arg_of(i, argc, argv));
        else if (!std::strcmp(a, "--T")) ro.T = (uint32_t)num(a, arg_of(i, argc, argv));
        else if (!std::strcmp(a, "--seed")) ro.seed = num(a, arg_of(i, argc, argv));
        else if (!std::strcmp(a, "--head")) {
            ro.head = (uint32_t)num(a, arg_of(i, argc, argv));
            ro.head_set = 1;
        } else if (!std::strcmp(a, "--help")) {
            std::fputs(usage, stdout);
            return 0;
        } else
            die(2, "unknown option ", a);
    }
    if (!keys)
        die(2, "--keys is required");
    if (do_search && !requests && !(index && ro.n))
        die(2, "search needs --requests FILE, or --index INDEX with --n-requests N");
    Library lib;
    build_library(lib, keys, num_tries);
    std::printf("marisa.keys: %zu\n", lib.trie.num_keys());
    std::printf("marisa.records: %" PRIu64 "\n", lib.records);
    std::printf("marisa.num_tries: %d\n", num_tries);
    std::printf("marisa.encoded_bytes_per_key: %.3f\n",
                (double)lib.enc_bytes / (double)(lib.records ? lib.records : 1));
    std::printf("marisa.load_s: %.3f\n", lib.load_s);
    std::printf("marisa.build_s: %.3f\n", lib.build_s);
    std::printf("marisa.build_keys_per_s: %.0f\n",
                (double)lib.records / (lib.build_s > 0 ? lib.build_s : 1e-9));
    std::printf("marisa.io_bytes: %zu\n", lib.trie.io_size());
    std::printf("marisa.bytes_per_key: %.3f\n",
                (double)lib.trie.io_size() / (double)lib.trie.num_keys());
    if (!do_search)
        return 0;

    FILE *out = nullptr;
    if (output && !(out = std::fopen(output, "w")))
        die(1, "cannot open ", output);
    std::vector<double> lat;
    uint64_t done = 0, hits = 0;
    uint64_t rejected = 0;
    auto run_one = [&](const ft_jsonl_req *q, const ft_request &rq) {
        char err[160];
        if (ft_request_validate(&rq, 0, err, sizeof err) != FT_OK) {
            rejected++;
            if (out)
                ft_jsonl_write_error(out, q, err);
            return;
        }
        double t0 = now_s();
        std::vector<Hit> h = search(lib, rq);
        lat.push_back((now_s() - t0) * 1e3);
        hits += h.size();
        if (out)
            print_hits(out, q, h);
        done++;
    };
    if (requests) {
        FILE *rf = std::fopen(requests, "r");
        if (!rf)
            die(1, "cannot open ", requests);
        ft_jsonl_req q;
        ft_jsonl_req_init(&q);
        char *line = nullptr, err[192];
        size_t cap = 0;
        ssize_t len;
        uint64_t lines = 0;
        while ((len = getline(&line, &cap, rf)) > 0 && (!limit || lines < limit)) {
            lines++;
            if (ft_jsonl_parse(&q, line, (size_t)len, err, sizeof err) != FT_OK) {
                rejected++;
                if (out)
                    ft_jsonl_write_error(out, &q, err);
                continue;
            }
            if (q.req.results == 0)
                q.req.results = q.req.beam;
            run_one(&q, q.req);
        }
        std::free(line);
        ft_jsonl_req_free(&q);
        std::fclose(rf);
    } else {
        char err[512];
        ft_index *idx;
        if (ft_index_open(&idx, index, FT_OPEN_NO_VERIFY, err, sizeof err))
            die(1, err);
        ft_wl_reqs *g;
        if (ft_wl_reqs_open(&g, idx, &ro, err, sizeof err))
            die(2, err);
        uint64_t n = limit && limit < ro.n ? limit : ro.n;
        for (uint64_t i = 0; i < n; i++) {
            ft_request rq;
            if (ft_wl_reqs_make(g, i, 0, &rq))
                die(1, "out of memory");
            ft_jsonl_req q;
            std::memset(&q, 0, sizeof q);
            q.has_id = 1;
            q.id_int = (long long)i;
            run_one(&q, rq);
        }
        ft_wl_reqs_close(g);
        ft_index_close(idx);
    }
    if (out)
        std::fclose(out);
    double sum = 0;
    for (double v : lat)
        sum += v;
    std::printf("search.requests: %" PRIu64 "\n", done);
    std::printf("search.rejected: %" PRIu64 "\n", rejected);
    std::printf("search.hits_per_request: %.2f\n", done ? (double)hits / (double)done : 0.0);
    std::printf("search.latency_ms.mean: %.3f\n", done ? sum / (double)done : 0.0);
    std::printf("search.latency_ms.p50: %.3f\n", pct(lat, 50));
    std::printf("search.latency_ms.p90: %.3f\n", pct(lat, 90));
    std::printf("search.latency_ms.p95: %.3f\n", pct(lat, 95));
    std::printf("search.latency_ms.p99: %.3f\n", pct(lat, 99));
    return 0;
}
