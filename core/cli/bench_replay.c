/* crl bench replay: extend vs memcpy, uniform sampling, prioritized sampling and updates on 1M items (vs a binary sum tree). */
#include "config.h"
#include "cli-private.h"
#include "../sampler-private.h"
#include <crl/replay.h>

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

/* ---- the buffer with the tensor storage (plugins/replay) ------------------------ */

#define EXTEND_BATCH 1024
#define OBS 8

/* A small transition: obs/next.obs float32[8], action float32[2], reward
 * float32[1], done and terminated bool[1]: 78 bytes. */
static crl_td *make_transitions(int64_t n, crl_rng *rng, crl_error *err)
{
    crl_td *td = crl_td_new(1, &n, err);
    if (!td)
        return NULL;
    static const struct { const char *key; crl_dtype dt; int64_t dim; } leaves[] = {
        { "obs", CRL_F32, OBS }, { "next.obs", CRL_F32, OBS }, { "action", CRL_F32, 2 },
        { "next.reward", CRL_F32, 1 }, { "next.done", CRL_BOOL, 1 }, { "next.terminated", CRL_BOOL, 1 },
    };
    for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) {
        int64_t shape[2] = { n, leaves[i].dim };
        crl_tensor *t = crl_tensor_new(leaves[i].dt, 2, shape, err);
        if (!t || crl_td_set(td, leaves[i].key, t, err)) {
            crl_tensor_unref(t);
            crl_td_unref(td);
            return NULL;
        }
        for (int64_t k = 0; k < crl_tensor_numel(t); k++)
            crl_tensor_flat_set(t, k, leaves[i].dt == CRL_BOOL ? (double)(crl_rng_u32(rng) & 1) : crl_rng_uniform(rng));
        crl_tensor_unref(t);
    }
    return td;
}

static size_t td_bytes(const crl_td *td)
{
    size_t n = 0;
    char **keys = crl_td_leaf_keys(td, NULL);
    for (size_t i = 0; keys && keys[i]; i++)
        n += crl_tensor_nbytes(crl_td_get(td, keys[i]));
    crl_free(keys);
    return n;
}

typedef struct {
    crl_replay *rb;
    crl_td *batch;
    size_t bytes;           /* of one extend */
    char *src, *dst;        /* memcpy of the same bytes into a buffer as large as the storage */
    size_t dst_size, dst_pos;
    crl_rng rng;
    int64_t idx[BATCH];
    crl_error err;
    bool failed;
} buffer_state;

static void run_extend(void *p, uint64_t n)
{
    buffer_state *b = p;
    for (uint64_t i = 0; i < n && !b->failed; i++)
        b->failed = crl_replay_extend(b->rb, b->batch, NULL, &b->err) != CRL_OK;
}

static void run_memcpy(void *p, uint64_t n)
{
    buffer_state *b = p;
    for (uint64_t i = 0; i < n; i++) {
        if (b->dst_pos + b->bytes > b->dst_size)
            b->dst_pos = 0;
        memcpy(b->dst + b->dst_pos, b->src, b->bytes);
        b->dst_pos += b->bytes;
    }
    sink = b->dst[b->dst_pos / 2];
}

static void run_uniform_index(void *p, uint64_t n)
{
    buffer_state *b = p;
    for (uint64_t i = 0; i < n; i++)
        crl__sampler_uniform(&b->rng, ITEMS, BATCH, b->idx, NULL);
    sink = b->idx[0];
}

static void run_uniform_sample(void *p, uint64_t n)
{
    buffer_state *b = p;
    for (uint64_t i = 0; i < n && !b->failed; i++) {
        crl_td *td = crl_replay_sample(b->rb, BATCH, &b->err);
        b->failed = td == NULL;
        crl_td_unref(td);
    }
}

/* Extend and uniform sampling through the host's buffer over the tensor
 * storage; figures printed next to memcpy of the same bytes. */
static int bench_buffer(double seconds, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_config *cfg = crl_config_new(&e);
    crl_host *host = cfg ? crl_host_new(cfg, &e) : NULL;
    buffer_state *b = g_new0(buffer_state, 1);
    int rc = CRL_OK;
    if (!host) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    if (!crl_host_find(host, CRL_KIND_STORAGE, "tensor") && crl_host_load_name(host, "replay", &e)) {
        printf("  (extend and uniform sample skipped: the tensor storage of plugins/replay is not loadable: %s)\n",
               e.message);
        goto out;
    }
    static const char *const kv[] = { "storage=tensor", "capacity=1000000", "sampler=random", NULL };
    if (!(b->rb = crl_replay_new(host, kv, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
        goto out;
    }
    crl_rng_init(&b->rng, 1, 1);
    if (!(b->batch = make_transitions(EXTEND_BATCH, &b->rng, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    b->bytes = td_bytes(b->batch);
    b->dst_size = b->bytes / EXTEND_BATCH * ITEMS;
    b->src = g_malloc(b->bytes);
    b->dst = g_malloc(b->dst_size);
    memset(b->src, 1, b->bytes);
    memset(b->dst, 0, b->dst_size);   /* both sides write to touched memory */
    /* fill the buffer once: sampling then sees 1M transitions */
    for (int64_t i = 0; i < ITEMS / EXTEND_BATCH + 1; i++)
        if ((rc = crl_replay_extend(b->rb, b->batch, NULL, err)))
            goto out;
    crl_bench_result ex = crl__bench_measure(run_extend, b, seconds, 4);
    crl_bench_result mc = crl__bench_measure(run_memcpy, b, seconds, 4);
    crl_bench_result ui = crl__bench_measure(run_uniform_index, b, seconds, 16);
    crl_bench_result us = crl__bench_measure(run_uniform_sample, b, seconds, 16);
    if (b->failed) {
        rc = crl_error_pass(err, &b->err, CRL_E_RUNTIME);
        goto out;
    }
    double gb_ex = (double)b->bytes / ex.ns_per_op, gb_mc = (double)b->bytes / mc.ns_per_op;
    printf("  %-52s %9.1f us/batch  %7.2f GB/s\n", "extend 1024 transitions (78 B each), tensor storage", ex.ns_per_op / 1e3,
           gb_ex);
    printf("  %-52s %9.1f us/batch  %7.2f GB/s\n", "memcpy of the same bytes (same run)", mc.ns_per_op / 1e3, gb_mc);
    printf("  extend vs memcpy: %.2fx memcpy's throughput (target >= 0.5x)\n", gb_ex / gb_mc);
    report("uniform index draw alone (256 of 1M, Philox)", ui, "samples");
    report("uniform sample: draw + gather into a new td [256]", us, "samples");
    printf("    (crl_replay_sample: 256 indices in [0, 1M), the tensor storage's gather of the 6 leaves,\n"
           "     a new TensorDict with \"index\"; target >= 11 M samples/s)\n");
out:
    if (b->rb)
        crl_replay_free(b->rb);
    crl_td_unref(b->batch);
    g_free(b->src);
    g_free(b->dst);
    g_free(b);
    crl_host_free(host);
    crl_config_free(cfg);
    return rc;
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
    printf("  16-way vs binary: sample %.2fx, update %.2fx the binary tree's speed (targets: 4 M samples/s, 5 M "
           "updates/s)\n",
           bs.ns_per_op / ps.ns_per_op, bu.ns_per_op / pu.ns_per_op);
    if (bench_buffer(seconds, &err))
        goto out;
    rc = CRL_EXIT_OK;
out:
    if (rc != CRL_EXIT_OK)
        crl__cli_print_error("bench replay", &err);
    crl__sampler_prio_free(s->prio);
    g_free(s->bin.node);
    g_free(s);
    return rc;
}
