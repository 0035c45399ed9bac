/*
 * loader.c - reads a libconfig file into an ft_config, driven by the
 * settings table: every member of every group is looked up in the table
 * (nested groups by dotted name), so an unknown key anywhere, a wrong type
 * or a bad value is refused with the line libconfig recorded for it.
 */
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <string.h>

#include "config_impl.h"
#include "ft_config.h"

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
                   {0}, w->errbuf, w->errlen};
        strcat(show, ".");
        int rc = walk_group(&lw, e, show, "");
        if (rc != FT_OK)
            return rc;
        l->tls_given = config_setting_get_member(e, "tls") != NULL;
    }
    cfg->n_listeners = (uint32_t)n;
    return FT_OK;
}

/* load_value stores setting s as row r. */
static int load_value(walk *w, const ft_config_row *r, const config_setting_t *s,
                      const char *who)
{
    int t = config_setting_type(s);
    switch (r->type) {
    case FT_CONFIG_INT:
        if (!is_int(s))
            break;
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
        if (n < 1 || (size_t)n > r->max_count) {
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

/* load parses with read (config_read or config_read_string) and applies. */
static int load(ft_config *cfg, config_t *lc, int ok, char *errbuf,
                size_t errlen)
{
    if (!ok) {
        fti_cfg_errf(errbuf, errlen, "%s:%d: %s", cfg->path,
                     config_error_line(lc), config_error_text(lc));
        config_destroy(lc);
        return FT_ECONFIG;
    }
    walk w = {cfg, ft_config_rows, FT_CONFIG_NSETTINGS, cfg, cfg->src,
              {0}, errbuf, errlen};
    int rc = walk_group(&w, config_root_setting(lc), "", "");
    config_destroy(lc);
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
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fti_cfg_errf(errbuf, errlen, "%s: cannot open: %s", path,
                     strerror(errno));
        return FT_EIO;
    }
    config_t lc;
    config_init(&lc);
    int ok = config_read(&lc, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        config_destroy(&lc);
        fti_cfg_errf(errbuf, errlen, "%s: read failed", path);
        return FT_EIO;
    }
    return load(cfg, &lc, ok, errbuf, errlen);
}

int ft_config_load_string(ft_config *cfg, const char *text, const char *name,
                          char *errbuf, size_t errlen)
{
    int rc = set_path(cfg, name, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    config_t lc;
    config_init(&lc);
    return load(cfg, &lc, config_read_string(&lc, text), errbuf, errlen);
}
