/*
 * config_impl.h - what settings.c (the table, text values, checks, dump)
 * and loader.c (the libconfig reader) share.  Private to config/.
 *
 * Every store function takes "who", the prefix of its error message
 * ("FILE:LINE: caps.max_beam" or "cli: caps.max_beam"), and on a bad value
 * writes "who: <reason>" and returns FT_ECONFIG.
 */
#ifndef FT_CONFIG_IMPL_H
#define FT_CONFIG_IMPL_H

#include <stddef.h>

#include "ft_config.h"

/* URL kinds a STRING row may be checked as (ft_config_row.url). */
enum { FTI_URL_NONE = 0, FTI_URL_NNG = 1, FTI_URL_HTTP = 2,
       FTI_URL_MODE = 3, /* not a URL: an octal file mode, "0660" */
       FTI_URL_CPUS = 4, /* not a URL: a CPU list, "0-3,8" */
       FTI_URL_PEER = 5 /* an nng URL, worded without tls+tcp:// (the
                         * cluster's coordinator: validation refuses it
                         * there with its own reason) */ };

/* fti_cfg_errf writes a formatted message into an optional error buffer,
 * control characters shown as '?' so that it stays one line. */
void fti_cfg_errf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* fti_cfg_where writes "FILE:LINE", "cli" or "default" for src. */
void fti_cfg_where(const ft_config *cfg, ft_config_source src, char *out,
                   size_t outlen);

/* fti_cfg_listener_init gives l the listener fields' defaults, all with
 * source at. */
void fti_cfg_listener_init(ft_config_listener *l, ft_config_source at);

int fti_cfg_store_int(const ft_config_row *r, void *base, long long v,
                      const char *who, char *errbuf, size_t errlen);
int fti_cfg_store_bool(const ft_config_row *r, void *base, int v,
                       const char *who, char *errbuf, size_t errlen);
/* fti_cfg_store_string stores a STRING or looks an ENUM's text up. */
int fti_cfg_store_string(const ft_config_row *r, void *base, const char *v,
                         const char *who, char *errbuf, size_t errlen);
int fti_cfg_store_int_list(const ft_config_row *r, void *base,
                           const long long *v, size_t n, const char *who,
                           char *errbuf, size_t errlen);

#endif /* FT_CONFIG_IMPL_H */
