/* client_main.c - a client program outside the tree: links an installed
 * libflashtrie_client (and nothing of libflashtrie), then pings and
 * searches a "flashtrie serve" of the index main.c built (the keys 4 2
 * -> 42 and 1 -> 1).  usage: client URL VERSION */
#include <stdio.h>
#include <string.h>

#include <flashtrie_client.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return fprintf(stderr, "usage: client URL VERSION\n"), 2;
    /* The calls of flashtrie.h the client library carries. */
    if (strcmp(ft_err_name(FT_ECONN), "FT_ECONN") != 0 ||
        strcmp(ft_strerror(FT_OK), "ok") != 0 ||
        strcmp(FT_VERSION_STRING, argv[2]) != 0)
        return fprintf(stderr, "names or version wrong\n"), 1;
    char err[256] = "";
    ft_client_opts o;
    ft_client_opts_init(&o);
    o.connect_wait_ms = 1; /* the server may still be starting */
    o.timeout_ms = 20000;
    ft_client *c;
    if (ft_client_connect(&c, argv[1], &o, err, sizeof err))
        return fprintf(stderr, "connect: %s\n", err), 1;
    if (ft_client_ping(c, err, sizeof err))
        return fprintf(stderr, "ping: %s\n", err), 1;
    const uint32_t tok[] = {4, 2};
    const float logp[] = {-0.5f, -0.25f};
    ft_request req;
    ft_request_init(&req);
    req.T = 2;
    req.K = 1;
    req.tokens = tok;
    req.logp = logp;
    req.beam = 4;
    if (ft_request_validate(&req, 0, err, sizeof err))
        return fprintf(stderr, "validate: %s\n", err), 1;
    ft_client_results *res;
    int rc = ft_client_search(c, &req, 1, &res, err, sizeof err);
    if (rc)
        return fprintf(stderr, "search: %s: %s\n", ft_err_name(rc), err), 1;
    const ft_result *r = ft_client_results_get(res, 0);
    int ok = ft_client_results_count(res) == 1 && r->status == FT_OK &&
             r->n == 1 && r->hits[0].value == 42 && r->hits[0].len == 2;
    ft_client_results_free(res);
    ft_client_close(c);
    if (!ok)
        return fprintf(stderr, "search: not the hit 4 2 -> 42\n"), 1;
    printf("flashtrie_client %s ok\n", argv[2]);
    return 0;
}
