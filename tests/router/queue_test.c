/*
 * queue_test.c - the request queue (router/queue.c): items come out oldest
 * first; a full queue answers FT_EBUSY and a closed one FT_ESHUTDOWN; the
 * batching window counts from the oldest item's push (an item that waited
 * the window already goes at once, a fresh one waits for the batch to
 * fill or the window to pass, a batch that fills goes before it); close
 * wakes a waiting pop.
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
    printf("queue_test: ok\n");
    return 0;
}
