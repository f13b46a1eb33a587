/* The threads executor (sync): a fixed pool of worker threads, each owning worker blocks, woken per step. */
#define _GNU_SOURCE 1  /* pthread_setaffinity_np, CPU_SET */
#include "exec-private.h"
#include "spin-private.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

/* How it works.  The caller and min(blocks, cores) - 1 helper threads are
 * the participants (so no more threads are busy than there are cores);
 * participant p owns blocks p, p + P, p + 2P...  A run publishes the job
 * (set in x by the common layer) with a bump of `gen`, which helpers spin
 * on for a while and then futex-wait on.  Each participant claims its own
 * blocks first and then any block still unclaimed (a compare-and-swap of
 * the block's stamp from gen - 1 to gen, so each block runs exactly once
 * per run, and a helper that wakes late for an old run claims nothing),
 * and counts `done` up per block.  The caller, after its sweep, spins and
 * then futex-waits for done == blocks; a helper that is slow to wake (a
 * busy machine) costs no wait, the caller has run its blocks.  DESIGN.md's
 * figures: a futex round trip is ~100 us, a spin round trip ~0.1-0.2 us, a
 * CartPole step 0.04 us, hence blocks of envs per wake-up and spinning
 * before sleeping.  Nothing is allocated per run. */

/* Spin budgets: a helper keeps spinning for the next job this long (the
 * caller's bookkeeping between steps takes microseconds), the caller waits
 * for the helpers' blocks this long before it sleeps. */
#define HELPER_SPIN_NS 50000
#define CALLER_SPIN_NS 200000

typedef struct tpool tpool;

typedef struct tworker {
    tpool *p;
    int id;                     /* participant index, 1..nparts-1 */
    pthread_t th;
    bool running;
} tworker;

struct tpool {
    crl__exec *x;
    int nparts, nhelpers;
    tworker *w;
    _Atomic uint32_t *claimed;  /* nblocks: the run that claimed block b */
    _Alignas(64) _Atomic uint32_t gen;
    _Atomic int sleepers;       /* helpers in futex wait on gen */
    _Atomic bool quit;
    _Alignas(64) _Atomic uint32_t done;
    _Atomic int caller_waiting; /* the caller is in futex wait on done */
};

/* Spin (then sleep) until *addr != val; returns the new value. */
static uint32_t wait_change(_Atomic uint32_t *addr, uint32_t val, _Atomic int *flag, int64_t spin_ns)
{
    uint32_t v;
    crl__spin sp = { 0, 0 };
    for (;;) {
        if ((v = atomic_load_explicit(addr, memory_order_acquire)) != val)
            return v;
        if (crl__spin_on(&sp, spin_ns))
            continue;
        /* Announce the sleep, then re-check inside the futex call. */
        atomic_fetch_add(flag, 1);
        crl__futex_wait(addr, val);
        atomic_fetch_sub(flag, 1);
    }
}

static void run_if_unclaimed(tpool *p, size_t b, uint32_t g)
{
    uint32_t expect = g - 1;
    if (!atomic_compare_exchange_strong(&p->claimed[b], &expect, g))
        return;
    crl__exec_run_block(p->x, b, &p->x->block_err[b]);
    if (atomic_fetch_add(&p->done, 1) + 1 == (uint32_t)p->x->nblocks && atomic_load(&p->caller_waiting) > 0)
        crl__futex_wake(&p->done, 1);
}

/* Participant part's own blocks, then any left (helpers forward, the caller backward). */
static void run_share(tpool *p, int part, uint32_t g)
{
    size_t n = p->x->nblocks;
    for (size_t b = (size_t)part; b < n; b += (size_t)p->nparts)
        run_if_unclaimed(p, b, g);
    for (size_t k = 0; k < n; k++)
        run_if_unclaimed(p, part ? k : n - 1 - k, g);
}

static void *helper_main(void *arg)
{
    tworker *w = arg;
    tpool *p = w->p;
    uint32_t seen = 0;  /* gen before the first run (set before the thread started) */
    for (;;) {
        seen = wait_change(&p->gen, seen, &p->sleepers, HELPER_SPIN_NS);
        if (atomic_load_explicit(&p->quit, memory_order_acquire))
            break;
        run_share(p, w->id, seen);
    }
    return NULL;
}

static void threads_stop(crl__exec *x)
{
    tpool *p = x->kstate;
    if (!p)
        return;
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->gen, 1);
    crl__futex_wake(&p->gen, INT_MAX);
    for (int i = 0; i < p->nhelpers; i++)
        if (p->w[i].running)
            pthread_join(p->w[i].th, NULL);
    g_free(p->w);
    g_free((void *)p->claimed);
    g_free(p);
    x->kstate = NULL;
}

int crl__exec_pin_thread(pthread_t th, int i, int *cpu)
{
    cpu_set_t allowed, set;
    *cpu = -1;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return errno;
    int n = CPU_COUNT(&allowed);
    if (n < 1)
        return EINVAL;
    for (int c = 0, k = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed) && k++ == i % n) {
            *cpu = c;
            break;
        }
    CPU_ZERO(&set);
    CPU_SET(*cpu, &set);
    return pthread_setaffinity_np(th, sizeof set, &set);
}

static int threads_start(crl__exec *x, crl_error *err)
{
    /* Async envs step on exec_async.c's own pool, made by the first async_reset. */
    if (crl__exec_is_async(x))
        return CRL_OK;
    int64_t cores = g_get_num_processors();
    int64_t nparts = (int64_t)x->nblocks < cores ? (int64_t)x->nblocks : cores;
    if (nparts < 1)
        nparts = 1;
    tpool *p = g_new0(tpool, 1);
    p->x = x;
    p->nparts = (int)nparts;
    p->nhelpers = (int)nparts - 1;
    p->w = g_new0(tworker, (gsize)p->nhelpers + 1);
    atomic_init(&p->gen, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->done, 0);
    atomic_init(&p->caller_waiting, 0);
    p->claimed = g_new0(_Atomic uint32_t, x->nblocks);
    for (size_t b = 0; b < x->nblocks; b++)
        atomic_init(&p->claimed[b], 0);
    x->kstate = p;
    for (int i = 0; i < p->nhelpers; i++) {
        tworker *w = &p->w[i];
        w->p = p;
        w->id = i + 1;
        int e = pthread_create(&w->th, NULL, helper_main, w);
        if (e) {
            threads_stop(x);
            return crl_error_set(err, CRL_E_RUNTIME, "cannot start worker thread %d of %d: %s; lower [env] "
                                 "num_workers", i + 1, (int)nparts - 1, g_strerror(e));
        }
        w->running = true;
        if (x->o.pin_threads) {
            int cpu = -1;
            e = crl__exec_pin_thread(w->th, w->id, &cpu);
            if (e) {
                threads_stop(x);
                return crl_error_set(err, CRL_E_RUNTIME, "pin_threads: cannot pin worker thread %d to core %d: %s; set "
                                     "[env] pin_threads = false", w->id, cpu, g_strerror(e));
            }
        }
    }
    return CRL_OK;
}

static int threads_run(crl__exec *x, crl_error *err)
{
    tpool *p = x->kstate;
    if (!p)
        return crl_error_set(err, CRL_E_INVALID, "threads executor: run before start (the env was not bound)");
    for (size_t b = 0; b < x->nblocks; b++)
        x->block_err[b].code = CRL_OK;
    /* Only the caller writes gen, so its value is known here. */
    uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    /* The bump publishes the job (x->job, mask, seeds) and the reset count. */
    atomic_store(&p->gen, g);
    if (p->nhelpers > 0 && atomic_load(&p->sleepers) > 0)
        crl__futex_wake(&p->gen, INT_MAX);
    run_share(p, 0, g);
    uint32_t v;
    crl__spin sp = { 0, 0 };
    while ((v = atomic_load_explicit(&p->done, memory_order_acquire)) != (uint32_t)x->nblocks) {
        if (crl__spin_on(&sp, CALLER_SPIN_NS))
            continue;
        atomic_fetch_add(&p->caller_waiting, 1);
        if ((v = atomic_load(&p->done)) != (uint32_t)x->nblocks)
            crl__futex_wait(&p->done, v);
        atomic_fetch_sub(&p->caller_waiting, 1);
    }
    for (size_t b = 0; b < x->nblocks; b++)
        if (x->block_err[b].code)
            return crl_error_pass(err, &x->block_err[b], CRL_E_RUNTIME);
    return CRL_OK;
}

const crl__exec_kind crl__exec_kind_threads = {
    .name = "threads",
    .start = threads_start,
    .run = threads_run,
    .stop = threads_stop,
};
