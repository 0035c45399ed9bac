/*
 * queue_test.c - the request queue (router/queue.c): items come out oldest
 * first; a full queue answers FT_EBUSY and a closed one FT_ESHUTDOWN; the
 * batching window counts from the oldest item's push (an item that waited
 * the window already goes at once, a fresh one waits for the batch to
 * fill or the window to pass, a batch that fills goes before it); close
 * wakes a waiting pop.  The lanes (issue 39): a light item pushed after
 * heavy ones is popped before them, a pop never mixes the lanes, a heavy
 * pop takes at most heavy_batch items, a heavy pop is due after
 * heavy_every light pops in a row pass waiting heavy items (no
 * starvation), a light item ends a heavy batch's window, both lanes
 * share the one bound, and with heavy_limit no more heavy pops run at once
 * (a pop waits for a light item or a heavy pop's end; a drain ignores it).
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "ft_test.h"
#include "queue.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int items[64];

static void *push_later(void *arg)
{
    ft_queue *q = arg;
    sleep_ms(20);
    void *three[3] = {&items[11], &items[12], &items[13]};
    FT_PASS(ft_queue_push_n(q, three, 3));
    return NULL;
}

static void *push_light_later(void *arg)
{
    ft_queue *q = arg;
    sleep_ms(20);
    void *one[1] = {&items[40]};
    FT_PASS(ft_queue_push_n(q, one, 1));
    return NULL;
}

static void *heavy_done_later(void *arg)
{
    sleep_ms(20);
    ft_queue_heavy_done(arg);
    return NULL;
}

/* heavy_limit: one heavy pop at a time, as the server keeps a replica
 * for light requests. */
static void heavy_limit(void)
{
    ft_queue q;
    void *out[16];
    int lane;
    FT_PASS(ft_queue_init(&q, 8));
    ft_queue_set_heavy_limit(&q, 1);
    void *hv[3] = {&items[20], &items[21], &items[22]};
    const unsigned char all_heavy[3] = {1, 1, 1};
    FT_PASS(ft_queue_push_lanes(&q, hv, all_heavy, 3));
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, 0, 0, &lane), 1);
    FT_CHECK_EQ_U64(lane, FT_QUEUE_HEAVY);
    FT_CHECK(out[0] == &items[20]);
    FT_CHECK_EQ_U64(q.heavy_running, 1);
    /* one runs: the heavy ones wait, though nothing else is queued */
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, 0, 0, &lane), 0);
    /* a light one goes at once */
    void *one[1] = {&items[30]};
    FT_PASS(ft_queue_push_n(&q, one, 1));
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, -1, 0, &lane), 1);
    FT_CHECK_EQ_U64(lane, FT_QUEUE_LIGHT);
    FT_CHECK(out[0] == &items[30]);
    /* a pop that waits is woken by the heavy pop's end */
    pthread_t th;
    FT_CHECK(pthread_create(&th, NULL, heavy_done_later, &q) == 0);
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, -1, 0, &lane), 1);
    pthread_join(th, NULL);
    FT_CHECK_EQ_U64(lane, FT_QUEUE_HEAVY);
    FT_CHECK(out[0] == &items[21]);
    FT_CHECK_EQ_U64(q.heavy_running, 1);
    /* ft_queue_pop counts nothing: done at once */
    ft_queue_heavy_done(&q);
    FT_PASS(ft_queue_push_lanes(&q, hv, all_heavy, 1));
    /* 22 and 20 wait: ft_queue_pop takes 22, and 20 is free to go next */
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, 0, 0), 1);
    FT_CHECK(out[0] == &items[22]);
    FT_CHECK_EQ_U64(q.heavy_running, 0);
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, 0, 0, &lane), 1);
    FT_CHECK(out[0] == &items[20]);
    /* a drain ignores the limit: the closed queue gives the rest */
    FT_PASS(ft_queue_push_lanes(&q, hv, all_heavy, 2));
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, 0, 0, &lane), 0);
    ft_queue_close(&q);
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, -1, 0, &lane), 1);
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, -1, 0, &lane), 1);
    FT_CHECK_EQ_U64(ft_queue_pop_lane(&q, out, 16, -1, 0, &lane), 0);
    ft_queue_destroy(&q);
}

/* lanes checks the two lanes on a queue of its own. */
static void lanes(void)
{
    ft_queue q;
    void *out[16];
    FT_PASS(ft_queue_init(&q, 8));
    FT_CHECK_EQ_U64(q.heavy_batch, FT_QUEUE_HEAVY_BATCH);
    FT_CHECK_EQ_U64(q.heavy_every, FT_QUEUE_HEAVY_EVERY);

    /* Five heavy items, then two light ones, in one push: the light ones
     * go first, together, and no heavy one rides with them; then the
     * heavy ones one per pop (heavy_batch 1), oldest first. */
    void *mix[7] = {&items[20], &items[21], &items[22], &items[23],
                    &items[24], &items[30], &items[31]};
    const unsigned char heavy[7] = {1, 1, 1, 1, 1, 0, 0};
    FT_PASS(ft_queue_push_lanes(&q, mix, heavy, 7));
    size_t hl;
    uint64_t hp, hpops, ahead;
    ft_queue_lane_stats(&q, &hl, &hp, &hpops, &ahead);
    FT_CHECK_EQ_U64(hl, 5);
    FT_CHECK_EQ_U64(hp, 5);
    /* both lanes share the bound: 7 of 8 taken, 2 more are refused whole */
    const unsigned char two_light[2] = {0, 0};
    FT_FAIL(ft_queue_push_lanes(&q, mix, two_light, 2), FT_EBUSY);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, 0, 0), 2);
    FT_CHECK(out[0] == &items[30] && out[1] == &items[31]);
    for (int i = 0; i < 5; i++) {
        FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, 0, 0), 1);
        FT_CHECK(out[0] == &items[20 + i]);
    }
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, 0, 0), 0);
    ft_queue_lane_stats(&q, &hl, &hp, &hpops, &ahead);
    FT_CHECK_EQ_U64(hl, 0);
    FT_CHECK_EQ_U64(hpops, 5);
    FT_CHECK_EQ_U64(ahead, 1);

    /* No starvation: with heavy_every 3 and a light item always waiting,
     * every fourth pop is heavy; heavy pops of heavy_batch 2. */
    ft_queue_set_lanes(&q, 2, 3);
    void *hv[4] = {&items[20], &items[21], &items[22], &items[23]};
    const unsigned char all_heavy[4] = {1, 1, 1, 1};
    FT_PASS(ft_queue_push_lanes(&q, hv, all_heavy, 4));
    /* what each pop takes: L1 a light item, H2 two heavy ones; the light
     * item pushed before a heavy pop waits for the next light one */
    const char *want = "LLLHLLLH";
    const size_t want_n[8] = {1, 1, 1, 2, 2, 1, 1, 2};
    int light_i = 0, heavy_i = 0;
    for (int k = 0; want[k]; k++) {
        void *one[1] = {&items[32 + k]};
        FT_PASS(ft_queue_push_n(&q, one, 1));
        size_t n = ft_queue_pop(&q, out, 16, 0, 0);
        FT_CHECK_EQ_U64(n, want_n[k]);
        for (size_t i = 0; i < n; i++)
            FT_CHECK(out[i] == (want[k] == 'L' ? &items[32 + light_i++]
                                               : &items[20 + heavy_i++]));
    }
    FT_CHECK_EQ_U64(heavy_i, 4);
    /* the light item pushed with the last heavy pop goes next */
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, 0, 0), 1);
    FT_CHECK(out[0] == &items[39]);

    /* A heavy batch waiting to fill (window 10 s, heavy_batch 4) ends its
     * wait when a light item comes, and the light one goes, alone. */
    ft_queue_set_lanes(&q, 4, 8);
    FT_PASS(ft_queue_push_lanes(&q, hv, all_heavy, 1));
    pthread_t th;
    FT_CHECK(pthread_create(&th, NULL, push_light_later, &q) == 0);
    double t0 = ft_test_now();
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, -1, 10000 * 1000000LL), 1);
    double dt = ft_test_now() - t0;
    pthread_join(th, NULL);
    FT_CHECK(out[0] == &items[40]);
    FT_CHECK(dt < 5.0);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 16, 0, 0), 1);
    FT_CHECK(out[0] == &items[20]);

    /* heavy_batch 0: a heavy pop takes up to the pop's max */
    ft_queue_set_lanes(&q, 0, 8);
    FT_PASS(ft_queue_push_lanes(&q, hv, all_heavy, 4));
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 3, 0, 0), 3);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 3, 0, 0), 1);
    FT_CHECK(out[0] == &items[23]);
    ft_queue_destroy(&q);
}

static void *close_later(void *arg)
{
    sleep_ms(50);
    ft_queue_close(arg);
    return NULL;
}

int main(void)
{
    ft_queue q;
    void *out[8];
    FT_FAIL(ft_queue_init(&q, 0), FT_EINVAL);
    FT_PASS(ft_queue_init(&q, 4));

    /* order, bound, busy count */
    void *a[4] = {&items[0], &items[1], &items[2], &items[3]};
    FT_PASS(ft_queue_push_n(&q, a, 3));
    FT_FAIL(ft_queue_push_n(&q, a, 2), FT_EBUSY);
    FT_FAIL(ft_queue_push_n(&q, a, 5), FT_EINVAL);
    FT_PASS(ft_queue_push_n(&q, a + 3, 1));
    size_t len, cap, hw;
    uint64_t busy, pushed;
    ft_queue_stats(&q, &len, &cap, &busy, &pushed, &hw);
    FT_CHECK_EQ_U64(len, 4);
    FT_CHECK_EQ_U64(cap, 4);
    FT_CHECK_EQ_U64(busy, 1);
    FT_CHECK_EQ_U64(pushed, 4);
    FT_CHECK_EQ_U64(hw, 4);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 3, 0, 0), 3);
    FT_CHECK(out[0] == &items[0] && out[1] == &items[1] &&
             out[2] == &items[2]);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 8, 0, 0), 1);
    FT_CHECK(out[0] == &items[3]);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 8, 0, 0), 0); /* empty, no wait */

    /* An item queued longer than the window goes at once: the window
     * (300 ms) counts from its push, 350 ms ago.  (Counted from the pop,
     * it would wait 300 ms.) */
    FT_PASS(ft_queue_push_n(&q, a, 1));
    sleep_ms(350);
    double t0 = ft_test_now();
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 4, -1, 300 * 1000000LL), 1);
    double dt = ft_test_now() - t0;
    fprintf(stderr, "queue_test: an item 350 ms old, window 300 ms: popped "
            "after %.1f ms\n", dt * 1e3);
    FT_CHECK(dt < 0.150);

    /* A fresh item waits for the window (100 ms) to pass. */
    FT_PASS(ft_queue_push_n(&q, a + 1, 1));
    t0 = ft_test_now();
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 4, -1, 100 * 1000000LL), 1);
    dt = ft_test_now() - t0;
    FT_CHECK(out[0] == &items[1]);
    FT_CHECK(dt >= 0.090);

    /* A batch that fills goes before its window (10 s). */
    FT_PASS(ft_queue_push_n(&q, a + 2, 1));
    pthread_t th;
    FT_CHECK(pthread_create(&th, NULL, push_later, &q) == 0);
    t0 = ft_test_now();
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 4, -1, 10000 * 1000000LL), 4);
    dt = ft_test_now() - t0;
    pthread_join(th, NULL);
    FT_CHECK(out[0] == &items[2] && out[1] == &items[11] &&
             out[2] == &items[12] && out[3] == &items[13]);
    FT_CHECK(dt < 5.0);

    /* close wakes a pop that waits forever; pushes are refused after */
    FT_CHECK(pthread_create(&th, NULL, close_later, &q) == 0);
    FT_CHECK_EQ_U64(ft_queue_pop(&q, out, 4, -1, 0), 0);
    pthread_join(th, NULL);
    FT_FAIL(ft_queue_push_n(&q, a, 1), FT_ESHUTDOWN);
    ft_queue_destroy(&q);
    lanes();
    heavy_limit();
    printf("queue_test: ok\n");
    return 0;
}
