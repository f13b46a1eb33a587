/* Replay-buffer samplers: uniform, without replacement (epochs), prioritized (sum/min tree). */
#include "sampler-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

int crl__sampler_uniform(crl_rng *rng, size_t len, size_t n, int64_t *out, crl_error *err)
{
    if (len == 0)
        return crl_error_set(err, CRL_E_INVALID,
                             "uniform sampler: the storage is empty; add data before sampling");
    for (size_t k = 0; k < n; k++)
        out[k] = (int64_t)crl_rng_below(rng, len);
    return CRL_OK;
}

/* ---- without replacement ------------------------------------------------ */

struct crl__sampler_norepl {
    size_t capacity;
    bool drop_last, shuffle;
    bool have_epoch;
    size_t len;       /* storage length the current epoch was made for */
    size_t pos;       /* next unused position of perm */
    int64_t *perm;    /* capacity entries; the first len are the epoch */
};

crl__sampler_norepl *crl__sampler_norepl_new(size_t capacity, bool drop_last, bool shuffle, crl_error *err)
{
    if (capacity == 0) {
        crl_error_set(err, CRL_E_INVALID,
                      "sampler without replacement: capacity is 0; give a capacity of at least 1");
        return NULL;
    }
    crl__sampler_norepl *s = g_try_new0(crl__sampler_norepl, 1);
    int64_t *perm = capacity > SIZE_MAX / sizeof(int64_t) ? NULL : g_try_new(int64_t, capacity);
    if (!s || !perm) {
        g_free(s);
        g_free(perm);
        crl_error_set(err, CRL_E_NOMEM, "sampler without replacement: out of memory for capacity %zu",
                      capacity);
        return NULL;
    }
    s->capacity = capacity;
    s->drop_last = drop_last;
    s->shuffle = shuffle;
    s->perm = perm;
    return s;
}

void crl__sampler_norepl_free(crl__sampler_norepl *s)
{
    if (!s)
        return;
    g_free(s->perm);
    g_free(s);
}

static void new_epoch(crl__sampler_norepl *s, crl_rng *rng, size_t len)
{
    for (size_t i = 0; i < len; i++)
        s->perm[i] = (int64_t)i;
    if (s->shuffle) {
        /* Fisher-Yates: every permutation equally likely */
        for (size_t i = len - 1; i > 0; i--) {
            size_t j = (size_t)crl_rng_below(rng, (uint64_t)i + 1);
            int64_t tmp = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = tmp;
        }
    }
    s->len = len;
    s->pos = 0;
    s->have_epoch = true;
}

int crl__sampler_norepl_sample(crl__sampler_norepl *s, crl_rng *rng, size_t len, size_t batch,
                               int64_t *out, size_t *n_out, bool *ran_out, crl_error *err)
{
    if (len == 0)
        return crl_error_set(err, CRL_E_INVALID,
                             "sampler without replacement: the storage is empty; add data before sampling");
    if (len > s->capacity)
        return crl_error_set(err, CRL_E_RANGE,
                             "sampler without replacement: storage length %zu exceeds the sampler's "
                             "capacity %zu",
                             len, s->capacity);
    if (batch == 0)
        return crl_error_set(err, CRL_E_INVALID, "sampler without replacement: batch size is 0");
    if (s->drop_last && batch > len)
        return crl_error_set(err, CRL_E_INVALID,
                             "sampler without replacement: batch size %zu is greater than the storage "
                             "length %zu, so no batch can be drawn without repeating indices; lower the "
                             "batch size or set drop_last=false",
                             batch, len);
    if (!s->have_epoch || s->len != len)
        new_epoch(s, rng, len);
    size_t left = s->len - s->pos;
    size_t take = batch < left ? batch : left;
    for (size_t k = 0; k < take; k++)
        out[k] = s->perm[s->pos + k];
    s->pos += take;
    left -= take;
    bool done = left == 0 || (s->drop_last && left < batch);
    if (done)
        new_epoch(s, rng, len);
    if (n_out)
        *n_out = take;
    if (ran_out)
        *ran_out = done;
    return CRL_OK;
}

size_t crl__sampler_norepl_remaining(const crl__sampler_norepl *s)
{
    return s->have_epoch ? s->len - s->pos : 0;
}

void crl__sampler_norepl_state(const crl__sampler_norepl *s, bool *have_epoch, size_t *len, size_t *pos,
                               const int64_t **perm)
{
    *have_epoch = s->have_epoch;
    *len = s->have_epoch ? s->len : 0;
    *pos = s->have_epoch ? s->pos : 0;
    *perm = s->perm;
}

int crl__sampler_norepl_restore(crl__sampler_norepl *s, bool have_epoch, size_t len, size_t pos, const int64_t *perm,
                                crl_error *err)
{
    if (!have_epoch) {
        s->have_epoch = false;
        s->len = 0;
        s->pos = 0;
        return CRL_OK;
    }
    if (len == 0 || len > s->capacity || pos > len)
        return crl_error_set(err, CRL_E_CORRUPT,
                             "sampler without replacement: epoch of length %zu at position %zu does not fit "
                             "capacity %zu",
                             len, pos, s->capacity);
    uint8_t *seen = g_new0(uint8_t, len);
    for (size_t i = 0; i < len; i++) {
        if (perm[i] < 0 || (uint64_t)perm[i] >= len || seen[perm[i]]) {
            g_free(seen);
            return crl_error_set(err, CRL_E_CORRUPT,
                                 "sampler without replacement: entry %zu (%" PRId64 ") of the epoch is %s", i,
                                 perm[i], perm[i] < 0 || (uint64_t)perm[i] >= len ? "out of range" : "repeated");
        }
        seen[perm[i]] = 1;
    }
    g_free(seen);
    memcpy(s->perm, perm, len * sizeof *perm);
    s->have_epoch = true;
    s->len = len;
    s->pos = pos;
    return CRL_OK;
}

/* ---- prioritized -------------------------------------------------------- */

struct crl__sampler_prio {
    crl__sumtree *tree;
    double alpha, beta, eps;
    double max_priority;   /* largest raw priority seen; starts at 1 as in TorchRL */
};

static int check_param(const char *name, double v, bool strictly_positive, crl_error *err)
{
    if (!isfinite(v) || v < 0.0 || (strictly_positive && v == 0.0))
        return crl_error_set(err, CRL_E_INVALID, "prioritized sampler: %s = %g; give a finite number %s",
                             name, v, strictly_positive ? "> 0" : ">= 0");
    return CRL_OK;
}

crl__sampler_prio *crl__sampler_prio_new(size_t capacity, double alpha, double beta, double eps,
                                         crl_error *err)
{
    if (check_param("alpha", alpha, true, err) || check_param("beta", beta, false, err) ||
        check_param("eps", eps, false, err))
        return NULL;
    crl__sumtree *tree = crl__sumtree_new(capacity, err);
    if (!tree) {
        crl_error_prefix(err, "prioritized sampler: ");
        return NULL;
    }
    crl__sampler_prio *s = g_try_new0(crl__sampler_prio, 1);
    if (!s) {
        crl__sumtree_free(tree);
        crl_error_set(err, CRL_E_NOMEM, "prioritized sampler: out of memory");
        return NULL;
    }
    s->tree = tree;
    s->alpha = alpha;
    s->beta = beta;
    s->eps = eps;
    s->max_priority = 1.0;
    return s;
}

void crl__sampler_prio_free(crl__sampler_prio *s)
{
    if (!s)
        return;
    crl__sumtree_free(s->tree);
    g_free(s);
}

const crl__sumtree *crl__sampler_prio_tree(const crl__sampler_prio *s)
{
    return s->tree;
}

double crl__sampler_prio_max_priority(const crl__sampler_prio *s)
{
    return s->max_priority;
}

int crl__sampler_prio_set_beta(crl__sampler_prio *s, double beta, crl_error *err)
{
    if (check_param("beta", beta, false, err))
        return CRL_E_INVALID;
    s->beta = beta;
    return CRL_OK;
}

static int check_index(const crl__sampler_prio *s, const int64_t *idx, size_t k, crl_error *err)
{
    size_t cap = crl__sumtree_capacity(s->tree);
    if (idx[k] < 0 || (uint64_t)idx[k] >= cap)
        return crl_error_set(err, CRL_E_RANGE,
                             "prioritized sampler: index %" PRId64 " at position %zu is out of range "
                             "[0, %zu); nothing was updated",
                             idx[k], k, cap);
    return CRL_OK;
}

int crl__sampler_prio_add(crl__sampler_prio *s, const int64_t *idx, size_t n, crl_error *err)
{
    for (size_t k = 0; k < n; k++)
        if (check_index(s, idx, k, err))
            return CRL_E_RANGE;
    double p = pow(s->max_priority + s->eps, s->alpha);
    for (size_t k = 0; k < n; k++)
        crl__sumtree_set(s->tree, (size_t)idx[k], p, NULL);
    return CRL_OK;
}

int crl__sampler_prio_remove(crl__sampler_prio *s, size_t i, crl_error *err)
{
    if (crl__sumtree_clear_leaf(s->tree, i, err)) {
        crl_error_prefix(err, "prioritized sampler: ");
        return CRL_E_RANGE;
    }
    return CRL_OK;
}

int crl__sampler_prio_update(crl__sampler_prio *s, const int64_t *idx, const double *priority, size_t n,
                             crl_error *err)
{
    return crl__sampler_prio_update_held(s, idx, priority, n, NULL, err);
}

int crl__sampler_prio_update_held(crl__sampler_prio *s, const int64_t *idx, const double *priority, size_t n,
                                  const bool *held, crl_error *err)
{
    /* pow is the costliest step: each tree value is computed once, during
     * the checks, and kept for the writes (nothing changes on error). */
    double stackv[256];
    double *v = n <= 256 ? stackv : g_new(double, n);
    double new_max = s->max_priority;
    for (size_t k = 0; k < n; k++) {
        if (check_index(s, idx, k, err)) {
            if (v != stackv)
                g_free(v);
            return CRL_E_RANGE;
        }
        double p = priority[k];
        v[k] = isfinite(p) && p >= 0.0 ? pow(p + s->eps, s->alpha) : NAN;
        if (!isfinite(v[k])) {
            if (v != stackv)
                g_free(v);
            return crl_error_set(err, CRL_E_INVALID,
                                 "prioritized sampler: priority %g at position %zu (index %" PRId64 ") "
                                 "is not a finite number >= 0 (or overflows when raised to alpha = %g); "
                                 "nothing was updated",
                                 p, k, idx[k], s->alpha);
        }
        if (p > new_max)
            new_max = p;
    }
    for (size_t k = 0; k < n; k++)
        if (!held || held[k])
            crl__sumtree_prefetch(s->tree, (size_t)idx[k]);
    for (size_t k = 0; k < n; k++)
        if (!held || held[k])
            crl__sumtree_set(s->tree, (size_t)idx[k], v[k], NULL);
    s->max_priority = new_max;
    if (v != stackv)
        g_free(v);
    return CRL_OK;
}

int crl__sampler_prio_restore(crl__sampler_prio *s, const int64_t *idx, const double *leaves, size_t n,
                              double max_priority, crl_error *err)
{
    if (!isfinite(max_priority) || !(max_priority > 0.0))
        return crl_error_set(err, CRL_E_CORRUPT, "prioritized sampler: max priority %g is not a finite number > 0",
                             max_priority);
    for (size_t k = 0; k < n; k++) {
        if (idx[k] < 0 || (uint64_t)idx[k] >= crl__sumtree_capacity(s->tree))
            return crl_error_set(err, CRL_E_CORRUPT, "prioritized sampler: slot %" PRId64 " is out of range [0, %zu)",
                                 idx[k], crl__sumtree_capacity(s->tree));
        if (!isfinite(leaves[k]) || leaves[k] < 0.0)
            return crl_error_set(err, CRL_E_CORRUPT,
                                 "prioritized sampler: priority %g of slot %" PRId64 " is not a finite number >= 0",
                                 leaves[k], idx[k]);
    }
    crl__sumtree_clear(s->tree);
    for (size_t k = 0; k < n; k++)
        crl__sumtree_set(s->tree, (size_t)idx[k], leaves[k], NULL);
    s->max_priority = max_priority;
    return CRL_OK;
}

int crl__sampler_prio_sample(const crl__sampler_prio *s, crl_rng *rng, size_t n, int64_t *idx,
                             double *weight, crl_error *err)
{
    double p_min = crl__sumtree_min(s->tree);
    if (!(crl__sumtree_total(s->tree) > 0.0) || !(p_min > 0.0))
        return crl_error_set(err, CRL_E_INVALID,
                             "prioritized sampler: cannot sample: %s",
                             isinf(p_min) ? "no item has been added; add data before sampling"
                                          : "an item has priority 0 (eps = 0 and a zero priority); "
                                            "use eps > 0 or positive priorities");
    int rc = crl__sumtree_sample(s->tree, rng, n, idx, err);
    if (rc)
        return rc;
    if (weight) {
        /* (N P(i))^-beta / (N P_min)^-beta: N and the total cancel */
        for (size_t k = 0; k < n; k++) {
            double p;
            crl__sumtree_get(s->tree, (size_t)idx[k], &p, NULL);
            weight[k] = pow(p / p_min, -s->beta);
        }
    }
    return CRL_OK;
}
