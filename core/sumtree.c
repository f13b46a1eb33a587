/* 16-way sum tree and min tree over float64 priorities, for prioritized replay sampling. */
#include "sumtree-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define FAN CRL__SUMTREE_FANOUT
/* 16^16 = 2^64 leaves: deeper trees cannot be indexed by size_t anyway. */
#define MAX_DEPTH 16

struct crl__sumtree {
    size_t capacity;
    int depth;                     /* levels below the root */
    double root_sum, root_min;
    /* level d (1..depth) holds size[d] entries: the sums / mins of the nodes
     * at depth d, grouped in blocks of 16 siblings; level `depth` is the
     * leaves.  Entries past the last real node are padding (0 / +inf). */
    double *sum[MAX_DEPTH + 1];
    double *min[MAX_DEPTH + 1];
    size_t size[MAX_DEPTH + 1];
    double *block;                 /* the one allocation behind sum[] and min[] */
};

/* Parent values are recomputed from all 16 children in a fixed order (never
 * updated by adding a delta), so the tree never drifts from its leaves.  The
 * order is four sums of 4 contiguous children (independent, so they overlap
 * in the pipeline) chained left to right; a descent forms its running sums
 * with the very same expressions, so the last running sum of a block is
 * bit-identical to the parent's stored sum. */
static inline void group4(const double *c, double g[4])
{
    for (int q = 0; q < 4; q++)
        g[q] = ((c[4 * q] + c[4 * q + 1]) + c[4 * q + 2]) + c[4 * q + 3];
}

static inline double sum16(const double *c)
{
    double g[4];
    group4(c, g);
    return ((g[0] + g[1]) + g[2]) + g[3];
}

static inline double min2(double a, double b)
{
    return b < a ? b : a;
}

static inline double min16(const double *c)
{
    double m[4] = { c[0], c[1], c[2], c[3] };
    for (int j = 4; j < FAN; j += 4)
        for (int q = 0; q < 4; q++)
            m[q] = min2(m[q], c[j + q]);
    return min2(min2(m[0], m[1]), min2(m[2], m[3]));
}

crl__sumtree *crl__sumtree_new(size_t capacity, crl_error *err)
{
    if (capacity == 0) {
        crl_error_set(err, CRL_E_INVALID, "sum tree: capacity is 0; give a capacity of at least 1");
        return NULL;
    }
    int depth = 1;
    size_t span = FAN;   /* leaves under the root at this depth */
    while (span < capacity) {
        depth++;
        span = span > SIZE_MAX / FAN ? SIZE_MAX : span * FAN;
    }
    if (depth > MAX_DEPTH) {
        crl_error_set(err, CRL_E_RANGE, "sum tree: capacity %zu is too large", capacity);
        return NULL;
    }
    crl__sumtree *t = g_try_new0(crl__sumtree, 1);
    if (!t) {
        crl_error_set(err, CRL_E_NOMEM, "sum tree: out of memory for capacity %zu", capacity);
        return NULL;
    }
    t->capacity = capacity;
    t->depth = depth;
    /* nodes at depth d: ceil(capacity / 16^(depth - d)); level d stores the
     * 16-child blocks of depth d - 1's nodes. */
    size_t nodes[MAX_DEPTH + 1];
    nodes[depth] = capacity;
    for (int d = depth - 1; d >= 0; d--)
        nodes[d] = nodes[d + 1] / FAN + (nodes[d + 1] % FAN != 0);
    size_t total = 0;
    bool overflow = false;
    for (int d = 1; d <= depth; d++) {
        t->size[d] = nodes[d - 1] * FAN;
        if (t->size[d] > (SIZE_MAX / sizeof(double)) / 2 - total)
            overflow = true;
        total += t->size[d];
    }
    t->block = overflow ? NULL : g_try_new(double, 2 * total);
    if (!t->block) {
        g_free(t);
        crl_error_set(err, CRL_E_NOMEM, "sum tree: out of memory for capacity %zu (%zu nodes)",
                      capacity, total);
        return NULL;
    }
    double *p = t->block;
    for (int d = 1; d <= depth; d++) {
        t->sum[d] = p;
        p += t->size[d];
        t->min[d] = p;
        p += t->size[d];
    }
    crl__sumtree_clear(t);
    return t;
}

void crl__sumtree_free(crl__sumtree *t)
{
    if (!t)
        return;
    g_free(t->block);
    g_free(t);
}

size_t crl__sumtree_capacity(const crl__sumtree *t)
{
    return t->capacity;
}

int crl__sumtree_depth(const crl__sumtree *t)
{
    return t->depth;
}

void crl__sumtree_clear(crl__sumtree *t)
{
    for (int d = 1; d <= t->depth; d++) {
        memset(t->sum[d], 0, t->size[d] * sizeof(double));
        for (size_t k = 0; k < t->size[d]; k++)
            t->min[d][k] = INFINITY;
    }
    t->root_sum = 0.0;
    t->root_min = INFINITY;
}

/* Write a leaf and recompute its ancestors. */
static void put_leaf(crl__sumtree *t, size_t i, double s, double m)
{
    t->sum[t->depth][i] = s;
    t->min[t->depth][i] = m;
    size_t node = i;
    for (int d = t->depth; d >= 1; d--) {
        size_t parent = node / FAN;
        double ps = sum16(t->sum[d] + parent * FAN);
        double pm = min16(t->min[d] + parent * FAN);
        if (d > 1) {
            t->sum[d - 1][parent] = ps;
            t->min[d - 1][parent] = pm;
        } else {
            t->root_sum = ps;
            t->root_min = pm;
        }
        node = parent;
    }
}


int crl__sumtree_set(crl__sumtree *t, size_t i, double p, crl_error *err)
{
    if (i >= t->capacity)
        return crl_error_set(err, CRL_E_RANGE, "sum tree: index %zu is out of range [0, %zu)", i,
                             t->capacity);
    if (isnan(p) || isinf(p) || p < 0.0)
        return crl_error_set(err, CRL_E_INVALID,
                             "sum tree: priority %g for index %zu is not a finite number >= 0; "
                             "priorities must be finite and non-negative",
                             p, i);
    put_leaf(t, i, p, p);
    return CRL_OK;
}

int crl__sumtree_set_batch(crl__sumtree *t, const int64_t *idx, const double *p, size_t n,
                           crl_error *err)
{
    if (n > 0 && (!idx || !p))
        return crl_error_set(err, CRL_E_INVALID, "sum tree: batch set of %zu items got a NULL array", n);
    for (size_t k = 0; k < n; k++) {
        if (idx[k] < 0 || (uint64_t)idx[k] >= t->capacity)
            return crl_error_set(err, CRL_E_RANGE,
                                 "sum tree: index %" PRId64 " at position %zu is out of range [0, %zu); "
                                 "nothing was updated",
                                 idx[k], k, t->capacity);
        if (isnan(p[k]) || isinf(p[k]) || p[k] < 0.0)
            return crl_error_set(err, CRL_E_INVALID,
                                 "sum tree: priority %g at position %zu (index %" PRId64 ") is not a "
                                 "finite number >= 0; nothing was updated",
                                 p[k], k, idx[k]);
    }
    for (size_t k = 0; k < n; k++)
        crl__sumtree_prefetch(t, (size_t)idx[k]);
    for (size_t k = 0; k < n; k++)
        put_leaf(t, (size_t)idx[k], p[k], p[k]);
    return CRL_OK;
}

int crl__sumtree_clear_leaf(crl__sumtree *t, size_t i, crl_error *err)
{
    if (i >= t->capacity)
        return crl_error_set(err, CRL_E_RANGE, "sum tree: index %zu is out of range [0, %zu)", i,
                             t->capacity);
    put_leaf(t, i, 0.0, INFINITY);
    return CRL_OK;
}

int crl__sumtree_get(const crl__sumtree *t, size_t i, double *out, crl_error *err)
{
    if (i >= t->capacity)
        return crl_error_set(err, CRL_E_RANGE, "sum tree: index %zu is out of range [0, %zu)", i,
                             t->capacity);
    *out = t->sum[t->depth][i];
    return CRL_OK;
}

bool crl__sumtree_is_set(const crl__sumtree *t, size_t i)
{
    return i < t->capacity && isfinite(t->min[t->depth][i]);
}

double crl__sumtree_total(const crl__sumtree *t)
{
    return t->root_sum;
}

double crl__sumtree_min(const crl__sumtree *t)
{
    return t->root_min;
}

/* Index of the last non-zero entry of c[0..n) whose sum is > 0. */
static inline int last_nonzero(const double *c, int n)
{
    int j = n - 1;
    while (j > 0 && c[j] == 0.0)
        j--;
    return j;
}

/* One level of a descent for u in [0, block sum]: the child whose running
 * sum first exceeds *u, with *u made relative to it.  When rounding leaves u
 * at or past a running total (u == total at the root, or a child sum a
 * rounding step below u - prefix), take the last non-zero child from here
 * all the way down (*past_end): the draw stays on a leaf of positive
 * priority. */
static inline int descend_step(const double *c, double *u, bool *past_end)
{
    if (*past_end)
        return last_nonzero(c, FAN);
    double g[4];
    group4(c, g);
    double v = *u;
    double run[4];
    run[0] = g[0];
    run[1] = run[0] + g[1];
    run[2] = run[1] + g[2];
    run[3] = run[2] + g[3];
    int q = (run[0] <= v) + (run[1] <= v) + (run[2] <= v) + (run[3] <= v);
    if (q == 4) {
        *past_end = true;
        return last_nonzero(c, FAN);
    }
    if (q > 0)
        v -= run[q - 1];
    const double *cq = c + 4 * q;
    double r0 = cq[0], r1 = r0 + cq[1], r2 = r1 + cq[2], r3 = r2 + cq[3];
    int j = (r0 <= v) + (r1 <= v) + (r2 <= v) + (r3 <= v);
    if (j == 4) {
        *past_end = true;
        return 4 * q + last_nonzero(cq, 4);
    }
    if (j == 1)
        v -= r0;
    else if (j == 2)
        v -= r1;
    else if (j == 3)
        v -= r2;
    *u = v;
    return 4 * q + j;
}

static size_t descend(const crl__sumtree *t, double u)
{
    size_t node = 0;
    bool past_end = false;
    for (int d = 1; d <= t->depth; d++)
        node = node * FAN + (size_t)descend_step(t->sum[d] + node * FAN, &u, &past_end);
    return node;
}

/* Bring leaf i's sum and min blocks (two cache lines each) and its parent's
 * blocks towards the cache ahead of an update. */
void crl__sumtree_prefetch(const crl__sumtree *t, size_t i)
{
    if (i >= t->capacity)
        return;
    size_t b = i / FAN * FAN;
    int d = t->depth;
    __builtin_prefetch(t->sum[d] + b, 1);
    __builtin_prefetch(t->sum[d] + b + 8, 1);
    __builtin_prefetch(t->min[d] + b, 1);
    __builtin_prefetch(t->min[d] + b + 8, 1);
    if (d > 1) {
        b = i / (FAN * FAN) * FAN;
        __builtin_prefetch(t->sum[d - 1] + b, 1);
        __builtin_prefetch(t->min[d - 1] + b, 1);
    }
}

int crl__sumtree_find_prefix(const crl__sumtree *t, double u, size_t *out, crl_error *err)
{
    if (!(t->root_sum > 0.0))
        return crl_error_set(err, CRL_E_RANGE,
                             "sum tree: prefix search in a tree whose total is 0; set a positive "
                             "priority first");
    if (!(u >= 0.0 && u < t->root_sum))
        return crl_error_set(err, CRL_E_RANGE, "sum tree: prefix %g is outside [0, total = %g)", u,
                             t->root_sum);
    *out = descend(t, u);
    return CRL_OK;
}

/* Draws run level by level over chunks of LANES, prefetching each draw's next
 * block before moving on, so the cache misses of a chunk overlap instead of
 * following one another down a single path. */
#define LANES 32

int crl__sumtree_sample(const crl__sumtree *t, crl_rng *rng, size_t n, int64_t *out, crl_error *err)
{
    if (!(t->root_sum > 0.0))
        return crl_error_set(err, CRL_E_INVALID,
                             "sum tree: cannot sample: every priority is 0 (nothing was added, or "
                             "all items have zero priority)");
    const double total = t->root_sum;
    double u[LANES];
    size_t node[LANES];
    bool past_end[LANES];
    for (size_t start = 0; start < n; start += LANES) {
        size_t m = n - start < LANES ? n - start : LANES;
        for (size_t k = 0; k < m; k++) {
            u[k] = crl_rng_uniform(rng) * total;
            node[k] = 0;
            past_end[k] = false;
        }
        for (int d = 1; d <= t->depth; d++) {
            const double *level = t->sum[d];
            for (size_t k = 0; k < m; k++) {
                node[k] = node[k] * FAN + (size_t)descend_step(level + node[k] * FAN, &u[k], &past_end[k]);
                if (d < t->depth) {
                    __builtin_prefetch(t->sum[d + 1] + node[k] * FAN);
                    __builtin_prefetch(t->sum[d + 1] + node[k] * FAN + 8);
                }
            }
        }
        for (size_t k = 0; k < m; k++)
            out[start + k] = (int64_t)node[k];
    }
    return CRL_OK;
}
