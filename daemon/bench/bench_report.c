/* bench_report.c - "flashtrie bench": what it tells: the table (latency
 * percentiles and throughput per engine and beam, GPU/CPU and group
 * ratios, the answers' digests) and the report, a JSON file or a folder
 * with results.json and gnuplot plots (--report). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* ---- machine facts for the report ---- */

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + (p[1] == ' ');
                p[strcspn(p, "\n")] = 0;
                p[len - 1 < 200 ? len - 1 : 200] = 0;
                memcpy(out, p, strlen(p) + 1);
            }
            break;
        }
    }
    fclose(f);
}

/* gpu_model reads the first GPU's name from the NVIDIA driver's /proc
 * files, so the report names the GPU even in a build without CUDA. */
static void gpu_model(char *out, size_t len)
{
    out[0] = 0;
    FILE *p = popen("cat /proc/driver/nvidia/gpus/*/information 2>/dev/null", "r");
    if (p == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, p)) {
        if (!strncmp(line, "Model:", 6) && !out[0]) {
            char *s = line + 6;
            while (*s == ' ' || *s == '\t')
                s++;
            s[strcspn(s, "\n")] = 0;
            snprintf(out, len, "%.200s", s);
        }
    }
    pclose(p);
}

/* ---- the report ---- */

json_t *bench_stats_json(const run_stats *r, const char *engine,
                         const u32_list *batches)
{
    json_t *o = json_object();
    json_object_set_new(o, "engine", json_string(engine));
    json_object_set_new(o, "beam", json_integer(r->beam));
    json_object_set_new(o, "K", json_integer(r->K));
    json_object_set_new(o, "T", json_integer(r->T));
    json_object_set_new(o, "requests", json_integer((json_int_t)r->n));
    json_object_set_new(o, "rejected", json_integer((json_int_t)r->rejected));
    json_object_set_new(o, "hits_per_request", json_real(r->hits));
    json_t *l = json_object();
    json_object_set_new(l, "mean", json_real(r->mean));
    json_object_set_new(l, "p50", json_real(r->p50));
    json_object_set_new(l, "p90", json_real(r->p90));
    json_object_set_new(l, "p95", json_real(r->p95));
    json_object_set_new(l, "p99", json_real(r->p99));
    json_object_set_new(o, "latency_ms_b1", l);
    json_t *q = json_object();
    for (int b = 0; b < batches->n; b++) {
        char k[16];
        snprintf(k, sizeof k, "%u", batches->v[b]);
        json_object_set_new(q, k, json_real(r->qps[b]));
    }
    json_object_set_new(o, "throughput_qps", q);
    char d[24];
    snprintf(d, sizeof d, "%016" PRIx64, r->digest);
    json_object_set_new(o, "results_fnv1a64", json_string(d));
    return o;
}

/* ---- the report folder (--report DIR/) ---- */

/* report_is_dir tells what --report names: a path ending in ".json" is the
 * report file itself (the original form, kept as it was); an existing
 * folder, or a path ending in '/', is a folder that gets results.json, a
 * gnuplot script and the plots.  Any other path stays a file, as before. */
static int report_is_dir(const char *r)
{
    size_t n = strlen(r);
    struct stat sb;
    if (n >= 5 && !strcmp(r + n - 5, ".json"))
        return 0;
    if (stat(r, &sb) == 0)
        return S_ISDIR(sb.st_mode);
    return n > 0 && r[n - 1] == '/';
}

/* gp_str writes s as a gnuplot single-quoted string.  Inside those quotes
 * gnuplot knows one escape only, '' for a quote, so doubling quotes makes
 * any path safe; control characters (which would end the line) become
 * spaces, and report_prepare refuses a folder name holding any. */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s, f);
    }
    fputc('\'', f);
}

/* The plots see the run as st[row][set]: rows 0 cpu, 1 gpu, 2 + j the
 * group of shards->v[j] engines. */
typedef struct plot_in {
    const char *dir;
    run_stats (*st)[MAX_LIST];
    int nsets;
    const u32_list *batches, *shards;
    int shard_gpu; /* the groups are of GPU engines */
    size_t man_shards; /* rows 0 and 1 are groups over a manifest's shards */
    uint64_t keys, trie_bytes;
    const char *cpu, *gpu;
    long cores;
} plot_in;

/* gp_axis sets a log scale on an axis whose values span more than 20x
 * (a decade and more reads better on a log axis), else a linear one from
 * zero. */
static void gp_axis(FILE *f, const char *ax, double lo, double hi)
{
    if (lo > 0 && hi / lo > 20)
        fprintf(f, "set logscale %s\nset %srange [*:*]\n", ax, ax);
    else
        fprintf(f, "unset logscale %s\nset %srange [0:*]\n", ax, ax);
}

/* gp_beam_axis puts the x axis on the beam widths that ran, with a log
 * scale when they span 8x or more (100..1000 are then evenly spread). */
static void gp_beam_axis(FILE *f, const plot_in *p)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    fprintf(f, "set xlabel 'beam width (hypotheses kept per step)'\nset xtics (");
    for (int i = 0; i < p->nsets; i++) {
        uint32_t b = p->st[0][i].ran ? p->st[0][i].beam : p->st[1][i].beam;
        for (int e = 0; e < 2 + p->shards->n && !b; e++)
            b = p->st[e][i].beam;
        fprintf(f, "%s%u", i ? ", " : "", b);
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    fprintf(f, ")\n");
    if (lo > 0 && hi >= 8 * lo)
        fprintf(f, "set logscale x\nset xrange [%g:%g]\n", lo / 1.15, hi * 1.15);
    else
        fprintf(f, "unset logscale x\nset xrange [%g:%g]\n", lo * 0.9, hi * 1.1);
}

enum { PLOT_SPEEDUP = 1, PLOT_SHARDS = 2 };

static const char *row_title(const plot_in *p, int e, char *buf, size_t len)
{
    if (e < 2 && p->man_shards)
        snprintf(buf, len, "%zu %s shards", p->man_shards, e ? "GPU" : "CPU");
    else if (e < 2)
        snprintf(buf, len, "%s", e ? "GPU" : "CPU");
    else
        snprintf(buf, len, "%u %s shards", p->shards->v[e - 2], p->shard_gpu ? "GPU" : "CPU");
    return buf;
}

/* write_plot_script writes DIR/plots.gp: the numbers as inline data blocks
 * and one plot per PNG, so that 'gnuplot DIR/plots.gp' redraws them
 * without flashtrie.  *drawn gets PLOT_SPEEDUP and PLOT_SHARDS for the
 * optional plots it holds.  Returns 0, or -1 with errno set. */
static int write_plot_script(const plot_in *p, const char *path, int *drawn)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    char t[64];
    *drawn = 0;
    fprintf(f, "# plots.gp - the plots of a 'flashtrie bench --report' folder.\n"
               "# Redraw: gnuplot plots.gp (or gnuplot -e \"dir='OTHER'\" plots.gp\n"
               "# after moving the folder).  The data are the numbers of results.json.\n"
               "if (!exists(\"dir\")) dir = ");
    gp_str(f, p->dir);
    fprintf(f, "\nif (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size 900,520 font 'sans,10' noenhanced\n"
               "} else {\n"
               "    set terminal png size 900,520 noenhanced\n"
               "}\n"
               "set grid\nset key outside right top box Left reverse width 2\nset pointsize 1.2\n");
    fprintf(f, "sub = ");
    char sub[700], keys[32];
    if (p->keys >= 1000000)
        snprintf(keys, sizeof keys, "%.3gM", (double)p->keys / 1e6);
    else if (p->keys >= 1000)
        snprintf(keys, sizeof keys, "%.3gk", (double)p->keys / 1e3);
    else
        snprintf(keys, sizeof keys, "%" PRIu64, p->keys);
    snprintf(sub, sizeof sub, "index: %s keys, %.1f MB trie | %ld cores, %s | GPU: %s",
             keys, (double)p->trie_bytes / 1e6, p->cores, p->cpu,
             p->gpu[0] ? p->gpu : "none");
    gp_str(f, sub);
    fprintf(f, "\n\n");

    /* Latency per row: beam mean p99. */
    double lo = 0, hi = 0;
    for (int e = 0; e < 2 + p->shards->n; e++) {
        int any = 0;
        for (int i = 0; i < p->nsets; i++)
            any |= p->st[e][i].ran;
        if (!any)
            continue;
        fprintf(f, "$lat%d << EOD\n# beam mean_ms p99_ms\n", e);
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *r = &p->st[e][i];
            if (!r->ran)
                continue;
            fprintf(f, "%u %.6g %.6g\n", r->beam, r->mean, r->p99);
            if (e < 2) {
                lo = lo == 0 || r->mean < lo ? r->mean : lo;
                hi = r->p99 > hi ? r->p99 : hi;
            }
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f, "\nset output dir.'/latency.png'\n"
               "set title \"Latency of one request (batch 1) vs beam width\\n\".sub\n"
               "set ylabel 'latency (ms)'\n");
    gp_beam_axis(f, p);
    gp_axis(f, "y", lo, hi);
    fprintf(f, "plot");
    int first = 1;
    for (int e = 0; e < 2; e++) {
        if (!p->st[e][0].ran && !(p->nsets > 1 && p->st[e][1].ran))
            continue;
        row_title(p, e, t, sizeof t);
        fprintf(f, "%s $lat%d using 1:2 with linespoints lt %d pt 7 title '%s mean', \\\n"
                   "     $lat%d using 1:3 with linespoints lt %d dt 2 pt 6 title '%s p99'",
                first ? "" : ", \\\n    ", e, e + 1, t, e, e + 1, t);
        first = 0;
    }
    fprintf(f, "%s\n", first ? " NaN notitle" : "");

    /* GPU/CPU speed-up: beam mean p99 qps-at-each-batch. */
    int nr = 0;
    for (int i = 0; i < p->nsets; i++)
        nr += p->st[0][i].ran && p->st[1][i].ran && p->st[1][i].mean > 0;
    if (nr) {
        *drawn |= PLOT_SPEEDUP;
        fprintf(f, "\n$speedup << EOD\n# beam mean p99 qps ratio per batch size\n");
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *c = &p->st[0][i], *g = &p->st[1][i];
            if (!c->ran || !g->ran || g->mean <= 0)
                continue;
            fprintf(f, "%u %.6g %.6g", c->beam, c->mean / g->mean,
                    g->p99 > 0 ? c->p99 / g->p99 : 0);
            for (int b = 0; b < p->batches->n; b++)
                fprintf(f, " %.6g", c->qps[b] > 0 ? g->qps[b] / c->qps[b] : 0);
            fprintf(f, "\n");
        }
        fprintf(f, "EOD\nset output dir.'/speedup.png'\n"
                   "set title \"GPU speed-up over the CPU engine vs beam width\\n\".sub\n"
                   "set ylabel 'speed-up (CPU time / GPU time)'\n");
        gp_beam_axis(f, p);
        fprintf(f, "unset logscale y\nset yrange [0:*]\n"
                   "plot $speedup using 1:2 with linespoints lt 1 pt 7 title 'latency, mean', \\\n"
                   "     $speedup using 1:3 with linespoints lt 1 dt 2 pt 6 title 'latency, p99'");
        for (int b = 0; b < p->batches->n; b++)
            fprintf(f, ", \\\n     $speedup using 1:%d with linespoints lt %d pt 5 title 'throughput, batch %u'",
                    4 + b, b + 2, p->batches->v[b]);
        fprintf(f, ", \\\n     1 with lines lt -1 dt 3 title 'break-even'\n");
    }

    /* Throughput: batch qps, one block per row and beam. */
    lo = hi = 0;
    fprintf(f, "\n");
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *r = &p->st[e][i];
            if (!r->ran)
                continue;
            fprintf(f, "$tp%d_%d << EOD\n# batch qps\n", e, i);
            for (int b = 0; b < p->batches->n; b++) {
                fprintf(f, "%u %.6g\n", p->batches->v[b], r->qps[b]);
                if (r->qps[b] > 0) {
                    lo = lo == 0 || r->qps[b] < lo ? r->qps[b] : lo;
                    hi = r->qps[b] > hi ? r->qps[b] : hi;
                }
            }
            fprintf(f, "EOD\n");
        }
    uint32_t bmin = UINT32_MAX, bmax = 0;
    fprintf(f, "set output dir.'/throughput.png'\n"
               "set title \"Throughput vs batch size, per engine and beam width\\n\".sub\n"
               "set xlabel 'batch size (requests per call)'\nset ylabel 'throughput (queries/s)'\n"
               "set xtics (");
    for (int b = 0; b < p->batches->n; b++) {
        uint32_t v = p->batches->v[b];
        fprintf(f, "%s%u", b ? ", " : "", v);
        bmin = v < bmin ? v : bmin;
        bmax = v > bmax ? v : bmax;
    }
    fprintf(f, ")\n");
    if (bmax >= 4 * bmin)
        fprintf(f, "set logscale x 2\nset xrange [%g:%g]\n", bmin / 1.2, bmax * 1.2);
    else
        fprintf(f, "unset logscale x\nset xrange [%g:%g]\n", bmin - 0.5, bmax + 0.5);
    gp_axis(f, "y", lo, hi);
    fprintf(f, "plot");
    first = 1;
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *r = &p->st[e][i];
            if (!r->ran)
                continue;
            row_title(p, e, t, sizeof t);
            fprintf(f, "%s $tp%d_%d using 1:2 with linespoints lt %d dt %d pt %d title '%s, beam %u'",
                    first ? "" : ", \\\n    ", e, i, i + 1, e ? 2 : 1, e ? 9 : 7, t, r->beam);
            first = 0;
        }
    fprintf(f, "%s\n", first ? " NaN notitle" : "");

    /* Shards: per beam, shard-count mean p99. */
    int shards_ran = 0;
    for (int j = 0; j < p->shards->n; j++)
        for (int i = 0; i < p->nsets; i++)
            shards_ran |= p->st[2 + j][i].ran;
    if (shards_ran) {
        *drawn |= PLOT_SHARDS;
        lo = hi = 0;
        fprintf(f, "\n");
        for (int i = 0; i < p->nsets; i++) {
            /* The unsharded engine of the same kind is the point at 1. */
            const run_stats *u = &p->st[p->shard_gpu ? 1 : 0][i];
            fprintf(f, "$sh%d << EOD\n# shards mean_ms p99_ms (1: the unsharded engine)\n", i);
            if (u->ran)
                fprintf(f, "1 %.6g %.6g\n", u->mean, u->p99);
            for (int j = 0; j < p->shards->n; j++) {
                const run_stats *r = &p->st[2 + j][i];
                if (!r->ran)
                    continue;
                fprintf(f, "%u %.6g %.6g\n", p->shards->v[j], r->mean, r->p99);
                lo = lo == 0 || r->mean < lo ? r->mean : lo;
                hi = r->p99 > hi ? r->p99 : hi;
            }
            fprintf(f, "EOD\n");
        }
        fprintf(f, "set output dir.'/shards.png'\n"
                   "set title \"Latency of one request vs shard count (%s engines, one process)\\n\".sub\n"
                   "set xlabel 'shards (engines in the group)'\nset ylabel 'latency (ms)'\n"
                   "unset logscale x\nset xtics ('1 (unsharded)' 1",
                p->shard_gpu ? "GPU" : "CPU");
        uint32_t smax = 1;
        for (int j = 0; j < p->shards->n; j++) {
            fprintf(f, ", %u", p->shards->v[j]);
            smax = p->shards->v[j] > smax ? p->shards->v[j] : smax;
        }
        fprintf(f, ")\nset xrange [0.5:%u.5]\n", smax);
        gp_axis(f, "y", lo, hi);
        fprintf(f, "plot");
        for (int i = 0; i < p->nsets; i++) {
            uint32_t beam = 0;
            for (int e = 0; e < 2 + p->shards->n && !beam; e++)
                beam = p->st[e][i].beam;
            fprintf(f, "%s $sh%d using 1:2 with linespoints lt %d pt 7 title 'beam %u mean', \\\n"
                       "     $sh%d using 1:3 with linespoints lt %d dt 2 pt 6 title 'beam %u p99'",
                    i ? ", \\\n    " : "", i, i + 1, beam, i, i + 1, beam);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "unset output\n");
    return fclose(f) ? -1 : 0;
}

/* run_gnuplot runs "gnuplot SCRIPT" as a child, from an argument vector
 * (no shell sees the path).  Returns 0 when it drew, 1 when gnuplot is
 * not installed (a warning: the report stands without plots), -1 when it
 * failed. */
static int run_gnuplot(const char *script)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char *av[] = {"gnuplot", (char *)script, NULL};
        execvp(av[0], av);
        _exit(errno == ENOENT ? 127 : 126);
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
        return 1;
    return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

/* report_plots writes DIR/plots.gp and draws it: latency.png,
 * throughput.png, speedup.png (CPU and GPU both ran) and shards.png
 * (--shards).  Returns 0, or 1 after printing what failed. */
static int report_plots(const plot_in *p)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/plots.gp", p->dir);
    int drawn;
    if (write_plot_script(p, path, &drawn)) {
        fprintf(stderr, "flashtrie bench: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    int rc = run_gnuplot(path);
    if (rc == 1) {
        fprintf(stderr, "flashtrie bench: warning: gnuplot not found (Debian: gnuplot-nox); "
                        "%s/results.json and %s are written, the plots are not drawn\n",
                p->dir, path);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "flashtrie bench: gnuplot %s failed\n", path);
        return 1;
    }
    printf("plots: %s/{latency,throughput%s%s}.png (script %s)\n", p->dir,
           drawn & PLOT_SPEEDUP ? ",speedup" : "", drawn & PLOT_SHARDS ? ",shards" : "", path);
    return 0;
}

int bench_report_open(const bench_opts *opt, bench_state *bs)
{
    /* The report folder, made before the run so that a bad path fails
     * before minutes of measuring. */
    bs->report_dir = opt->report != NULL && report_is_dir(opt->report);
    if (opt->report != NULL) {
        for (const char *q = opt->report; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f) {
                fprintf(stderr, "flashtrie bench: --report: the path holds a control character\n");
                return 2;
            }
        if (strlen(opt->report) > 4000) {
            fprintf(stderr, "flashtrie bench: --report: path longer than 4000 bytes\n");
            return 2;
        }
        snprintf(bs->report_file, sizeof bs->report_file, "%s", opt->report);
        if (bs->report_dir) {
            if (mkdir(opt->report, 0777) && errno != EEXIST) {
                fprintf(stderr, "flashtrie bench: --report: cannot make the folder %s: %s\n",
                        opt->report, strerror(errno));
                return 1;
            }
            size_t n = strlen(opt->report);
            snprintf(bs->report_file, sizeof bs->report_file, "%s%sresults.json", opt->report,
                     opt->report[n - 1] == '/' ? "" : "/");
        }
    }
    return 0;
}

void bench_print_table(const bench_opts *opt, bench_state *bs)
{
    printf("\n%-6s %5s %5s %6s %9s %9s %9s %9s %9s", "engine", "beam", "K", "reqs",
           "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms");
    for (int b = 0; b < opt->batches.n; b++) {
        char h[24];
        snprintf(h, sizeof h, "qps@b%u", opt->batches.v[b]);
        printf(" %10s", h);
    }
    printf("\n");
    bs->ratios = json_array();
    for (int i = 0; i < bs->nsets; i++) {
        for (int e = 0; e < 2 + opt->shards.n; e++) {
            const run_stats *r = &bs->st[e][i];
            if (!r->ran)
                continue;
            printf("%-6s %5u %5u %6zu %9.3f %9.3f %9.3f %9.3f %9.3f", bs->row_names[e],
                   r->beam, r->K, r->n, r->mean, r->p50, r->p90, r->p95, r->p99);
            for (int b = 0; b < opt->batches.n; b++)
                printf(" %10.1f", r->qps[b]);
            printf("%s\n", r->rejected ? "  (some requests rejected)" : "");
        }
        const run_stats *cr = &bs->st[0][i], *gr = &bs->st[1][i];
        if (cr->ran && gr->ran && gr->mean > 0 && cr->qps[0] > 0) {
            printf("%-6s %5u %5u %6s %9.2fx %9.2fx %8s %9.2fx %9.2fx", "cpu/gpu", cr->beam, cr->K, "",
                   cr->mean / gr->mean, cr->p50 / gr->p50, "", cr->p95 / gr->p95,
                   cr->p99 / gr->p99);
            json_t *o = json_object();
            json_object_set_new(o, "beam", json_integer(cr->beam));
            json_object_set_new(o, "latency_speedup_mean", json_real(cr->mean / gr->mean));
            json_object_set_new(o, "latency_speedup_p50", json_real(cr->p50 / gr->p50));
            json_object_set_new(o, "latency_speedup_p95", json_real(cr->p95 / gr->p95));
            json_object_set_new(o, "latency_speedup_p99", json_real(cr->p99 / gr->p99));
            json_t *q = json_object();
            for (int b = 0; b < opt->batches.n; b++) {
                char k[16];
                snprintf(k, sizeof k, "%u", opt->batches.v[b]);
                double x = cr->qps[b] > 0 ? gr->qps[b] / cr->qps[b] : 0;
                printf(" %9.2fx", x);
                json_object_set_new(q, k, json_real(x));
            }
            json_object_set_new(o, "throughput_gpu_over_cpu", q);
            json_array_append_new(bs->ratios, o);
            printf("\n");
        }
        /* A group against the same run's unsharded GPU engine: > 1 means
         * the group is slower (latency) or faster (throughput). */
        for (int e = 2; e < 2 + opt->shards.n; e++) {
            const run_stats *sr = &bs->st[e][i];
            const run_stats *ur = opt->use_gpu ? gr : cr;
            if (!sr->ran || !ur->ran || ur->mean <= 0)
                continue;
            char nm[32];
            snprintf(nm, sizeof nm, "s%u/%s", opt->shards.v[e - 2], opt->use_gpu ? "gpu" : "cpu");
            printf("%-6s %5u %5u %6s %9.2fx %9.2fx %8s %9.2fx %9.2fx", nm, sr->beam, sr->K, "",
                   sr->mean / ur->mean, sr->p50 / ur->p50, "", sr->p95 / ur->p95,
                   sr->p99 / ur->p99);
            for (int b = 0; b < opt->batches.n; b++)
                printf(" %9.2fx", ur->qps[b] > 0 ? sr->qps[b] / ur->qps[b] : 0);
            printf("\n");
        }
    }

    /* The answers' digests (FNV-1a of every b=1 result): rows that answer
     * alike, a group and its unsharded engine among them, print the same. */
    printf("\n");
    for (int i = 0; i < bs->nsets; i++)
        for (int e = 0; e < 2 + opt->shards.n; e++)
            if (bs->st[e][i].ran)
                printf("results %-6s beam %5u: fnv1a64 %016" PRIx64 "\n", bs->row_names[e],
                       bs->st[e][i].beam, bs->st[e][i].digest);
}

void bench_write_report(const bench_opts *opt, bench_state *bs)
{
    if (opt->report != NULL) {
        json_t *rep = json_object();
        json_t *cmd = json_array();
        json_array_append_new(cmd, json_string("flashtrie"));
        for (int i = 0; i < opt->argc; i++)
            json_array_append_new(cmd, json_string(opt->argv[i]));
        json_object_set_new(rep, "command", cmd);
        char cpu[256], gpu[256];
        cpu_model(cpu, sizeof cpu);
        gpu_model(gpu, sizeof gpu);
        json_t *m = json_object();
        json_object_set_new(m, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
        json_object_set_new(m, "cpu_model", json_string(cpu));
        json_object_set_new(m, "gpu", gpu[0] ? json_string(gpu) : json_null());
        json_object_set_new(m, "flashtrie_version", json_string(FT_VERSION_STRING));
        json_object_set_new(rep, "machine", m);
        json_t *ix = json_object();
        json_object_set_new(ix, "path", json_string(opt->keys || opt->gen_keys ? "(temporary)" : opt->index));
        json_object_set_new(ix, "keys", json_integer((json_int_t)bs->info.keys));
        json_object_set_new(ix, "nodes", json_integer((json_int_t)bs->info.nodes));
        json_object_set_new(ix, "trie_bytes", json_integer((json_int_t)bs->info.trie_bytes));
        json_object_set_new(ix, "value_bytes", json_integer((json_int_t)bs->info.value_bytes));
        if (bs->man_shards)
            json_object_set_new(ix, "manifest_shards", json_integer((json_int_t)bs->man_shards));
        json_object_set_new(ix, "trie_bytes_per_key",
                            json_real((double)bs->info.trie_bytes / (double)(bs->info.keys ? bs->info.keys : 1)));
        if (bs->build)
            json_object_set_new(ix, "build", bs->build);
        bs->build = NULL;
        json_object_set_new(rep, "index", ix);
        json_t *wl = json_object();
        json_object_set_new(wl, "source", json_string(opt->requests ? opt->requests : "generated"));
        if (!opt->requests) {
            json_object_set_new(wl, "seed", json_integer((json_int_t)opt->seed));
            json_object_set_new(wl, "requests_per_beam", json_integer((json_int_t)opt->ro.n));
            json_object_set_new(wl, "T", json_integer(opt->ro.T));
            json_object_set_new(wl, "head", opt->ro.head_set ? json_integer(opt->ro.head) : json_string("K/10"));
        }
        json_object_set_new(wl, "warmup", json_integer(opt->warmup));
        json_object_set_new(wl, "threads", json_integer(opt->threads));
        json_object_set_new(rep, "workload", wl);
        json_object_set_new(rep, "runs", bs->runs);
        json_object_set_new(rep, "skipped", bs->skipped);
        json_object_set_new(rep, "ratios", bs->ratios);
        bs->runs = bs->skipped = bs->ratios = NULL;
        if (json_dump_file(rep, bs->report_file, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6))) {
            fprintf(stderr, "flashtrie bench: cannot write %s\n", bs->report_file);
            bs->status = 1;
        }
        json_decref(rep);
        if (bs->report_dir && bs->status == 0) {
            /* The folder name without its trailing slashes, for DIR/name. */
            char dir[4200];
            snprintf(dir, sizeof dir, "%s", opt->report);
            for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
                dir[n - 1] = 0;
            plot_in pin = {dir, bs->st, bs->nsets, &opt->batches, &opt->shards, opt->use_gpu,
                           bs->man_shards, bs->info.keys, bs->info.trie_bytes, cpu, gpu,
                           sysconf(_SC_NPROCESSORS_ONLN)};
            bs->status = report_plots(&pin);
        }
    }
}
