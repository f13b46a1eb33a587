/* crl bench replay: prioritized sampling and priority updates on 1M items, 16-way tree vs a plain binary sum tree. */
#include "config.h"
#include "cli-private.h"
#include "../sampler-private.h"

#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ITEMS 1000000
#define BATCH 256
#define RING 64   /* pre-drawn update batches, so the rng is not what is timed */

static volatile int64_t sink;

/* The baseline: a textbook binary sum tree, node k's children at 2k, 2k+1,
 * leaves at [size, 2 size), updated by walking up one parent at a time. */
typedef struct {
    size_t size;
    double *node;
} bintree;

static void bin_set(bintree *t, size_t i, double p)
{
    size_t k = i + t->size;
    t->node[k] = p;
    for (k /= 2; k >= 1; k /= 2)
        t->node[k] = t->node[2 * k] + t->node[2 * k + 1];
}

static size_t bin_find(const bintree *t, double u)
{
    size_t k = 1;
    while (k < t->size) {
        double left = t->node[2 * k];
        if (u < left) {
            k = 2 * k;
        } else {
            u -= left;
            k = 2 * k + 1;
        }
    }
    return k - t->size;
}

typedef struct {
    crl__sampler_prio *prio;
    bintree bin;
    crl_rng rng;
    double alpha, beta, eps;
    int64_t idx[BATCH];
    double weight[BATCH];
    int64_t ring_idx[RING][BATCH];
    double ring_p[RING][BATCH];
    unsigned ring_pos;
} replay_state;

static void run_prio_sample(void *p, uint64_t n)
{
    replay_state *s = p;
    for (uint64_t i = 0; i < n; i++)
        crl__sampler_prio_sample(s->prio, &s->rng, BATCH, s->idx, s->weight, NULL);
    sink = s->idx[0];
}

/* The same work on the binary tree: draw, descend, weight from a stored min. */
static void run_bin_sample(void *p, uint64_t n)
{
    replay_state *s = p;
    const double total = s->bin.node[1];
    const double p_min = crl__sumtree_min(crl__sampler_prio_tree(s->prio));
    for (uint64_t i = 0; i < n; i++) {
        for (int k = 0; k < BATCH; k++) {
            size_t leaf = bin_find(&s->bin, crl_rng_uniform(&s->rng) * total);
            if (leaf >= ITEMS)
                leaf = ITEMS - 1;
            s->idx[k] = (int64_t)leaf;
            s->weight[k] = pow(s->bin.node[s->bin.size + leaf] / p_min, -s->beta);
        }
    }
    sink = s->idx[0];
}

static void run_prio_update(void *p, uint64_t n)
{
    replay_state *s = p;
    for (uint64_t i = 0; i < n; i++) {
        unsigned r = s->ring_pos++ % RING;
        crl__sampler_prio_update(s->prio, s->ring_idx[r], s->ring_p[r], BATCH, NULL);
    }
}

/* Baseline update: the same (p + eps)^alpha into the sum tree (no min tree). */
static void run_bin_update(void *p, uint64_t n)
{
    replay_state *s = p;
    for (uint64_t i = 0; i < n; i++) {
        unsigned r = s->ring_pos++ % RING;
        for (int k = 0; k < BATCH; k++)
            bin_set(&s->bin, (size_t)s->ring_idx[r][k], pow(s->ring_p[r][k] + s->eps, s->alpha));
    }
}

static void report(const char *what, crl_bench_result r, const char *unit)
{
    printf("  %-52s %9.1f ns/batch  %7.2f M %s/s\n", what, r.ns_per_op, BATCH * 1e3 / r.ns_per_op, unit);
}

int crl__bench_replay(double seconds)
{
    crl_error err;
    crl_error_clear(&err);
    replay_state *s = g_new0(replay_state, 1);
    s->alpha = 0.6;
    s->beta = 0.4;
    s->eps = 1e-8;
    s->bin.size = 1;
    while (s->bin.size < ITEMS)
        s->bin.size *= 2;
    s->bin.node = g_new0(double, 2 * s->bin.size);
    crl_rng_init(&s->rng, 0, 0);
    int rc = CRL_EXIT_RUNTIME;
    if (!(s->prio = crl__sampler_prio_new(ITEMS, s->alpha, s->beta, s->eps, &err)))
        goto out;
    /* fill: every item added, then given a random priority */
    for (size_t start = 0; start < ITEMS; start += BATCH) {
        size_t n = ITEMS - start < BATCH ? ITEMS - start : BATCH;
        for (size_t k = 0; k < n; k++) {
            s->idx[k] = (int64_t)(start + k);
            s->weight[k] = crl_rng_uniform(&s->rng) * 10.0;
            bin_set(&s->bin, start + k, pow(s->weight[k] + s->eps, s->alpha));
        }
        if (crl__sampler_prio_add(s->prio, s->idx, n, &err) ||
            crl__sampler_prio_update(s->prio, s->idx, s->weight, n, &err))
            goto out;
    }
    for (int r = 0; r < RING; r++)
        for (int k = 0; k < BATCH; k++) {
            s->ring_idx[r][k] = (int64_t)crl_rng_below(&s->rng, ITEMS);
            s->ring_p[r][k] = crl_rng_uniform(&s->rng) * 10.0;
        }
    printf("crl bench replay (%.2f s per measurement; %d items, batches of %d, alpha %.1f, beta %.1f)\n",
           seconds, ITEMS, BATCH, s->alpha, s->beta);
    crl_bench_result ps = crl__bench_measure(run_prio_sample, s, seconds, 16);
    crl_bench_result bs = crl__bench_measure(run_bin_sample, s, seconds, 16);
    crl_bench_result pu = crl__bench_measure(run_prio_update, s, seconds, 16);
    crl_bench_result bu = crl__bench_measure(run_bin_update, s, seconds, 16);
    report("prioritized sample + weights, 16-way sum/min tree", ps, "samples");
    report("baseline: binary sum tree sample + weights", bs, "samples");
    report("prioritized update, 16-way sum + min tree", pu, "updates");
    report("baseline: binary sum tree update (no min tree)", bu, "updates");
    printf("  16-way vs binary: sample %.2fx, update %.2fx the binary tree's speed\n",
           bs.ns_per_op / ps.ns_per_op, bu.ns_per_op / pu.ns_per_op);
    rc = CRL_EXIT_OK;
out:
    if (rc != CRL_EXIT_OK)
        crl__cli_print_error("bench replay", &err);
    crl__sampler_prio_free(s->prio);
    g_free(s->bin.node);
    g_free(s);
    return rc;
}
