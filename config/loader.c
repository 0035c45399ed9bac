/*
 * loader.c - reads a libconfig file into an ft_config, driven by the
 * settings table: every member of every group is looked up in the table
 * (nested groups by dotted name), so an unknown key anywhere, a wrong type
 * or a bad value is refused with the line libconfig recorded for it.
 */
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"
#include "ft_config.h"

/* libconfig 1.5 reads an integer literal without an L suffix into an int
 * and silently wraps one that does not fit (5000000000 becomes 705032704).
 * Before parsing, scan_wide finds every such literal, so that the setting
 * it belongs to is refused with the number as written. */
typedef struct wide {
    int line;
    char text[40];
} wide;

static int ident_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*';
}

/* skip_plain steps *pp over what at it is no setting's text for the
 * scans below: a newline, a string (escapes included), a line comment
 * or a block comment, counting *line; 1 if it stepped.  A block comment
 * the text never closes sets *open_at to its line (libconfig ends one at
 * the end of the file without a word, which would drop every setting
 * after it silently). */
static int skip_plain(const char **pp, int *line, int *open_at)
{
    const char *p = *pp;
    if (*p == '\n') {
        (*line)++;
        p++;
    } else if (*p == '"') {
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && p[1])
                p++;
            if (*p == '\n')
                (*line)++;
        }
        if (*p)
            p++;
    } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
        while (*p && *p != '\n')
            p++;
    } else if (p[0] == '/' && p[1] == '*') {
        int at = *line;
        for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
            if (*p == '\n')
                (*line)++;
        if (*p)
            p += 2;
        else if (*open_at == 0)
            *open_at = at;
    } else {
        return 0;
    }
    *pp = p;
    return 1;
}

/* scan_wide collects the 32-bit-overflowing integer literals of text
 * and the line of a block comment it never closes (*open_at, else 0);
 * FT_ENOMEM if the list cannot grow. */
static int scan_wide(const char *text, wide **out, size_t *n, int *open_at)
{
    size_t cap = 0;
    int line = 1;
    *out = NULL;
    *n = 0;
    *open_at = 0;
    for (const char *p = text; *p;) {
        if (skip_plain(&p, &line, open_at)) {
            continue;
        } else if (*p >= '0' && *p <= '9' && (p == text || !ident_char(p[-1]) ||
                                               p[-1] == '-')) {
            const char *q = p;
            while (*q && (ident_char(*q) || *q == '.' || *q == '+') &&
                   !(*q == '-' && q[-1] != 'e' && q[-1] != 'E'))
                q++;
            size_t len = (size_t)(q - p);
            int hex = len > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
            size_t i = hex ? 2 : 0;
            unsigned long long v = 0;
            int big = 0;
            for (; i < len; i++) {
                int c = p[i], d;
                if (c >= '0' && c <= '9')
                    d = c - '0';
                else if (hex && c >= 'a' && c <= 'f')
                    d = c - 'a' + 10;
                else if (hex && c >= 'A' && c <= 'F')
                    d = c - 'A' + 10;
                else
                    break;
                if (v > 0xffffffffULL)
                    big = 1;
                else
                    v = v * (hex ? 16 : 10) + (unsigned)d;
            }
            /* Only a whole integer without L counts: floats and int64
             * literals are read correctly. */
            if (i == len && (big || v > 0x7fffffffULL)) {
                if (*n == cap) {
                    size_t nc = cap ? cap * 2 : 8;
                    wide *w = realloc(*out, nc * sizeof *w);
                    if (w == NULL)
                        return FT_ENOMEM;
                    *out = w;
                    cap = nc;
                }
                wide *w = &(*out)[(*n)++];
                int neg = p > text && p[-1] == '-';
                w->line = line;
                snprintf(w->text, sizeof w->text, "%s%.*s", neg ? "-" : "",
                         len > 36 ? 36 : (int)len, p);
            }
            p = q;
        } else {
            p++;
        }
    }
    return FT_OK;
}

/* A walk over one table: the top-level settings, or one listener. */
typedef struct walk {
    ft_config *cfg;
    const ft_config_row *rows;
    int nrows;
    void *base;              /* the struct the rows' offsets point into */
    ft_config_source *src;   /* one per row */
    int seen[FT_CONFIG_NSETTINGS];
    char *errbuf;
    size_t errlen;
    const struct wide *wide; /* integers libconfig truncated, by line */
    size_t nwide;
} walk;

static const char *type_name(int t)
{
    switch (t) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    }
    return "nothing";
}

static const char *want_name(ft_config_type t)
{
    switch (t) {
    case FT_CONFIG_INT: return "an integer";
    case FT_CONFIG_BOOL: return "true or false";
    case FT_CONFIG_STRING:
    case FT_CONFIG_ENUM: return "a string";
    case FT_CONFIG_INT_LIST: return "a list of integers like [0, 1]";
    case FT_CONFIG_LISTENERS: return "a list of groups like ( { url = ...; } )";
    }
    return "?";
}

/* wide_at returns the overflowing literal on line, or NULL. */
static const char *wide_at(const walk *w, int line)
{
    for (size_t i = 0; i < w->nwide; i++)
        if (w->wide[i].line == line)
            return w->wide[i].text;
    return NULL;
}

static int line_of(const config_setting_t *s)
{
    return (int)config_setting_source_line(s);
}

static int is_int(const config_setting_t *s)
{
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static int walk_group(walk *w, const config_setting_t *g, const char *show,
                      const char *look);

/* load_listeners reads the listeners list s into cfg. */
static int load_listeners(walk *w, const config_setting_t *s, const char *who)
{
    ft_config *cfg = w->cfg;
    int n = config_setting_length(s);
    if (config_setting_type(s) != CONFIG_TYPE_LIST) {
        fti_cfg_errf(w->errbuf, w->errlen, "%s: expected %s, got %s", who,
                     want_name(FT_CONFIG_LISTENERS),
                     type_name(config_setting_type(s)));
        return FT_ECONFIG;
    }
    if (n < 1 || n > FT_CONFIG_MAX_LISTENERS) {
        fti_cfg_errf(w->errbuf, w->errlen, "%s: must hold 1..%d listeners, got %d",
                     who, FT_CONFIG_MAX_LISTENERS, n);
        return FT_ECONFIG;
    }
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        ft_config_listener *l = &cfg->listeners[i];
        ft_config_source at = {FT_CONFIG_SRC_FILE, line_of(e)};
        char show[64];
        snprintf(show, sizeof show, "listeners[%d]", i);
        if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
            fti_cfg_errf(w->errbuf, w->errlen,
                         "%s:%d: %s: expected a group, got %s", cfg->path,
                         at.line, show, type_name(config_setting_type(e)));
            return FT_ECONFIG;
        }
        /* Fields left out keep their defaults, reported as such. */
        fti_cfg_listener_init(l, (ft_config_source){FT_CONFIG_SRC_DEFAULT, 0});
        l->at = at;
        walk lw = {cfg, ft_config_listener_rows, FT_CONFIG_L_NFIELDS, l, l->src,
                   {0}, w->errbuf, w->errlen, w->wide, w->nwide};
        strcat(show, ".");
        int rc = walk_group(&lw, e, show, "");
        if (rc != FT_OK)
            return rc;
        l->tls_given = config_setting_get_member(e, "tls") != NULL;
        if (l->url[0] == 0) {
            fti_cfg_errf(w->errbuf, w->errlen, "%s:%d: %surl: required",
                         cfg->path, at.line, show);
            return FT_ECONFIG;
        }
    }
    cfg->n_listeners = (uint32_t)n;
    return FT_OK;
}

/* load_value stores setting s as row r. */
static int load_value(walk *w, const ft_config_row *r, const config_setting_t *s,
                      const char *who)
{
    int t = config_setting_type(s);
    const char *big;
    switch (r->type) {
    case FT_CONFIG_INT:
        if (!is_int(s))
            break;
        if (t == CONFIG_TYPE_INT && (big = wide_at(w, line_of(s))) != NULL) {
            char *end;
            errno = 0;
            long long v = strtoll(big, &end, 0);
            if (errno == 0 && *end == 0 && v >= r->min && v <= r->max)
                fti_cfg_errf(w->errbuf, w->errlen,
                             "%s: write %s as %sL: without L libconfig reads "
                             "a 32-bit integer", who, big, big);
            else
                fti_cfg_errf(w->errbuf, w->errlen,
                             "%s: must be %lld..%lld, got %s", who, r->min,
                             r->max, big);
            return FT_ECONFIG;
        }
        return fti_cfg_store_int(r, w->base, config_setting_get_int64(s), who,
                                 w->errbuf, w->errlen);
    case FT_CONFIG_BOOL:
        if (t != CONFIG_TYPE_BOOL)
            break;
        return fti_cfg_store_bool(r, w->base, config_setting_get_bool(s), who,
                                  w->errbuf, w->errlen);
    case FT_CONFIG_STRING:
    case FT_CONFIG_ENUM:
        if (t != CONFIG_TYPE_STRING)
            break;
        return fti_cfg_store_string(r, w->base, config_setting_get_string(s),
                                    who, w->errbuf, w->errlen);
    case FT_CONFIG_INT_LIST: {
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            break;
        long long v[FT_CONFIG_MAX_DEVICES];
        int n = config_setting_length(s);
        if (n < 1 || (size_t)n > r->max_count ||
            (size_t)n > sizeof v / sizeof v[0]) {
            fti_cfg_errf(w->errbuf, w->errlen,
                         "%s: must hold 1..%zu integers, got %d", who,
                         r->max_count, n);
            return FT_ECONFIG;
        }
        for (int i = 0; i < n; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            if (!is_int(e)) {
                fti_cfg_errf(w->errbuf, w->errlen,
                             "%s: element %d: expected an integer, got %s",
                             who, i, type_name(config_setting_type(e)));
                return FT_ECONFIG;
            }
            if (config_setting_type(e) == CONFIG_TYPE_INT &&
                (big = wide_at(w, line_of(e))) != NULL) {
                /* The literal is known by line only, not by element. */
                fti_cfg_errf(w->errbuf, w->errlen,
                             "%s: elements must be %lld..%lld, got %s", who,
                             r->min, r->max, big);
                return FT_ECONFIG;
            }
            v[i] = config_setting_get_int64(e);
        }
        return fti_cfg_store_int_list(r, w->base, v, (size_t)n, who, w->errbuf,
                                      w->errlen);
    }
    case FT_CONFIG_LISTENERS:
        return load_listeners(w, s, who);
    }
    fti_cfg_errf(w->errbuf, w->errlen, "%s: expected %s, got %s", who,
                 want_name(r->type), type_name(t));
    return FT_ECONFIG;
}

/* walk_group applies the members of group g; show is the prefix of names
 * in messages ("listeners[0]."), look the prefix of names in the table
 * ("caps.", or "" at the top of a table). */
static int walk_group(walk *w, const config_setting_t *g, const char *show,
                      const char *look)
{
    int n = config_setting_length(g);
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        char full[128], who[FT_CONFIG_PATH_MAX + 192];
        int line = line_of(s);
        snprintf(full, sizeof full, "%s%s", look, config_setting_name(s));
        snprintf(who, sizeof who, "%s:%d: %s%s", w->cfg->path, line, show,
                 full);
        /* Included files would need their own names in every message;
         * one file per configuration keeps "FILE:LINE" true. */
        if (config_setting_source_file(s) != NULL) {
            fti_cfg_errf(w->errbuf, w->errlen,
                         "%s: @include is not supported", who);
            return FT_ECONFIG;
        }
        int row = -1, group = 0;
        size_t fl = strlen(full);
        for (int j = 0; j < w->nrows; j++) {
            if (strcmp(w->rows[j].name, full) == 0)
                row = j;
            else if (strncmp(w->rows[j].name, full, fl) == 0 &&
                     w->rows[j].name[fl] == '.')
                group = 1;
        }
        if (row >= 0) {
            /* libconfig 1.5 already refuses a name twice in one group;
             * this keeps the rule whatever the library version. */
            if (w->seen[row]) {
                fti_cfg_errf(w->errbuf, w->errlen,
                             "%s: given twice (first at line %d)", who,
                             w->src[row].line);
                return FT_ECONFIG;
            }
            int rc = load_value(w, &w->rows[row], s, who);
            if (rc != FT_OK)
                return rc;
            w->seen[row] = 1;
            w->src[row] = (ft_config_source){FT_CONFIG_SRC_FILE, line};
        } else if (group) {
            if (config_setting_type(s) != CONFIG_TYPE_GROUP) {
                fti_cfg_errf(w->errbuf, w->errlen,
                             "%s: expected a group, got %s", who,
                             type_name(config_setting_type(s)));
                return FT_ECONFIG;
            }
            char sub[sizeof full + 1];
            snprintf(sub, sizeof sub, "%s.", full);
            int rc = walk_group(w, s, show, sub);
            if (rc != FT_OK)
                return rc;
        } else {
            fti_cfg_errf(w->errbuf, w->errlen, "%s: unknown setting", who);
            return FT_ECONFIG;
        }
    }
    return FT_OK;
}

/* FTI_CONFIG_FILE_MAX bounds the size of a configuration file, so that a
 * wrong path (a device, an index) is refused rather than read whole. */
#define FTI_CONFIG_FILE_MAX (16u << 20)

/* line_quote writes ", at 'TEXT'" for line n (from 1) of text, its
 * blanks at either end left out, control bytes shown as '?' and a line
 * longer than 60 bytes cut with "..." shown; ", at the end of the file"
 * for a line past the end (libconfig names the line after the last for
 * a group or list never closed); "" for a blank line. */
static void line_quote(const char *text, int n, char *out, size_t outlen)
{
    out[0] = 0;
    const char *p = text;
    for (int i = 1; i < n && p; i++)
        if ((p = strchr(p, '\n')) != NULL)
            p++;
    if (n < 1)
        return;
    if (!p || *p == 0) {
        snprintf(out, outlen, ", at the end of the file");
        return;
    }
    size_t len = strcspn(p, "\n");
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t' ||
                       p[len - 1] == '\r'))
        len--;
    while (len > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        len--;
    }
    if (len == 0)
        return;
    char q[64];
    size_t m = len > 60 ? 60 : len;
    /* cut between characters: not inside a UTF-8 sequence */
    while (m < len && m > 0 && ((unsigned char)p[m] & 0xC0) == 0x80)
        m--;
    for (size_t i = 0; i < m; i++)
        q[i] = (unsigned char)p[i] < 0x20 || p[i] == 0x7f ? '?' : p[i];
    q[m] = 0;
    snprintf(out, outlen, ", at '%s%s'", q, len > m ? "..." : "");
}

/* load parses text (the whole file, NUL-terminated) and applies it. */
static int load(ft_config *cfg, const char *text, char *errbuf, size_t errlen)
{
    wide *wd;
    size_t nwide;
    int open_at;
    if (scan_wide(text, &wd, &nwide, &open_at) != FT_OK) {
        free(wd);
        fti_cfg_errf(errbuf, errlen, "%s: out of memory", cfg->path);
        return FT_ENOMEM;
    }
    if (open_at > 0) {
        free(wd);
        fti_cfg_errf(errbuf, errlen,
                     "%s:%d: syntax error: a /* comment is never closed",
                     cfg->path, open_at);
        return FT_ECONFIG;
    }
    config_t lc;
    config_init(&lc);
    if (!config_read_string(&lc, text)) {
        char at[96];
        const char *why = config_error_text(&lc);
        line_quote(text, config_error_line(&lc), at, sizeof at);
        fti_cfg_errf(errbuf, errlen, "%s:%d: %s%s%s", cfg->path,
                     config_error_line(&lc), why,
                     strcmp(why, "mismatched element type in array") == 0
                         ? " (the values of an array [...] must all be "
                           "of one type)"
                         : "",
                     at);
        config_destroy(&lc);
        free(wd);
        return FT_ECONFIG;
    }
    walk w = {cfg, ft_config_rows, FT_CONFIG_NSETTINGS, cfg, cfg->src,
              {0}, errbuf, errlen, wd, nwide};
    int rc = walk_group(&w, config_root_setting(&lc), "", "");
    config_destroy(&lc);
    /* Every literal belongs to some setting the walk has refused or
     * accepted; one the walk let through unseen must not pass silently. */
    if (rc == FT_OK && nwide > 0) {
        fti_cfg_errf(errbuf, errlen, "%s:%d: integer %s does not fit in 32 bits",
                     cfg->path, wd[0].line, wd[0].text);
        rc = FT_ECONFIG;
    }
    free(wd);
    return rc;
}

static int set_path(ft_config *cfg, const char *name, char *errbuf,
                    size_t errlen)
{
    ft_config_init(cfg);
    if (strlen(name) >= sizeof cfg->path) {
        fti_cfg_errf(errbuf, errlen, "config file name longer than %zu bytes",
                     sizeof cfg->path - 1);
        return FT_ECONFIG;
    }
    strcpy(cfg->path, name);
    return FT_OK;
}

int ft_config_load(ft_config *cfg, const char *path, char *errbuf,
                   size_t errlen)
{
    int rc = set_path(cfg, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fti_cfg_errf(errbuf, errlen, "%s: cannot open: %s", path,
                     strerror(errno));
        return FT_EIO;
    }
    char *text = malloc(FTI_CONFIG_FILE_MAX + 1);
    if (text == NULL) {
        fclose(f);
        fti_cfg_errf(errbuf, errlen, "%s: out of memory", path);
        return FT_ENOMEM;
    }
    errno = 0;
    size_t n = fread(text, 1, FTI_CONFIG_FILE_MAX + 1, f);
    int bad = ferror(f), err = errno;
    fclose(f);
    if (bad) {
        /* a directory opens, and fails here: EISDIR */
        free(text);
        fti_cfg_errf(errbuf, errlen, "%s: read failed: %s", path,
                     err ? strerror(err) : "I/O error");
        return FT_EIO;
    }
    if (n > FTI_CONFIG_FILE_MAX) {
        free(text);
        fti_cfg_errf(errbuf, errlen, "%s: larger than %u bytes", path,
                     FTI_CONFIG_FILE_MAX);
        return FT_ECONFIG;
    }
    if (memchr(text, 0, n) != NULL) {
        free(text);
        fti_cfg_errf(errbuf, errlen, "%s: holds a NUL byte: not a text file",
                     path);
        return FT_ECONFIG;
    }
    text[n] = 0;
    rc = load(cfg, text, errbuf, errlen);
    free(text);
    return rc;
}

int ft_config_load_string(ft_config *cfg, const char *text, const char *name,
                          char *errbuf, size_t errlen)
{
    int rc = set_path(cfg, name, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    return load(cfg, text, errbuf, errlen);
}
