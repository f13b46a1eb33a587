/* Per-env counters: RewardSum, StepCounter, InitTracker, TrajCounter (TorchRL semantics, reset per env). */
#include "config.h"
#include "state_common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The [batch..., 1] column a counter writes into td. */
static crl_tensor *col_out(crl_td *td, const char *key, crl_dtype dt, crl_error *err)
{
    int bn = crl_td_batch_ndim(td);
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, crl_td_batch_shape(td), (size_t)bn * sizeof(int64_t));
    shape[bn] = 1;
    return crl_transform_output(td, key, dt, bn + 1, shape, err);
}

/* A [batch..., 1] bool or integer column at key, as a new contiguous reference, or NULL when absent. */
static crl_tensor *col_in(const crl_td *td, const char *key, int64_t rows)
{
    crl_tensor *t = crl_td_get(td, key);
    if (!t || crl_tensor_numel(t) != rows)
        return NULL;
    return crl_tensor_contiguous(t, NULL);
}

static int check_rows(const crl_td *td, int64_t num, const char *who, crl_error *err)
{
    int64_t rows = st_rows(td);
    if (rows == num)
        return CRL_OK;
    return crl_error_set(err, CRL_E_SHAPE, "%s: the TensorDict holds %lld envs but the transform was bound to %lld",
                         who, (long long)rows, (long long)num);
}

static void *grow(void *p, size_t n, size_t size)
{
    void *q = realloc(p, (n ? n : 1) * size);
    if (q)
        memset(q, 0, (n ? n : 1) * size);
    return q;
}

/* ---- RewardSum: episode_reward = sum of rewards since the env's reset ---- */

typedef struct rsum {
    tf_keys k;
    int64_t num;
    crl_dtype *dt;       /* per key, from the specs */
    int *fnd;            /* feature ndim per key */
    int64_t (*fshape)[CRL_MAX_DIMS];
    int64_t *F;
    double **sum;        /* per key, num * F */
    bool specs_known;
    st_scratch a, b;
} rsum;

static void rsum_destroy(void *p)
{
    rsum *t = p;
    if (!t)
        return;
    for (size_t i = 0; t->sum && i < t->k.n; i++)
        free(t->sum[i]);
    free(t->sum);
    free(t->dt);
    free(t->fnd);
    free(t->fshape);
    free(t->F);
    st_scratch_free(&t->a);
    st_scratch_free(&t->b);
    tf_keys_free(&t->k);
    free(t);
}

/* "reward" -> "episode_reward", "agent.reward" -> "agent.episode_reward" (TorchRL's episode_{in_key}). */
static char *episode_key(const char *in)
{
    const char *dot = strrchr(in, '.');
    size_t pre = dot ? (size_t)(dot - in) + 1 : 0;
    size_t n = strlen(in) + sizeof "episode_";
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%.*sepisode_%s", (int)pre, in, in + pre);
    return s;
}

static int rsum_create(const crl_opts *o, void **out, crl_error *err)
{
    rsum *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "RewardSum: out of memory");
    size_t nout = 0;
    const char *const *outs = NULL;
    int rc;
    if ((rc = tf_keys_read(o, "in_keys", "out_keys", false, "RewardSum", &t->k, err)) ||
        (rc = crl_opts_list(o, "out_keys", &nout, &outs, err))) {
        rsum_destroy(t);
        return rc;
    }
    for (size_t i = 0; nout == 0 && i < t->k.n; i++) {
        char *e = episode_key(t->k.in[i]);
        if (!e) {
            rsum_destroy(t);
            return crl_error_set(err, CRL_E_NOMEM, "RewardSum: out of memory");
        }
        free(t->k.out[i]);
        t->k.out[i] = e;
    }
    for (size_t i = 0; i < t->k.n; i++)
        if (strcmp(t->k.in[i], t->k.out[i]) == 0) {
            st_bad_option(err, o, "out_keys", t->k.out[i],
                          "RewardSum cannot write the running sum over its input; name another key");
            rsum_destroy(t);
            return CRL_E_CONFIG;
        }
    size_t n = t->k.n;
    t->dt = calloc(n, sizeof *t->dt);
    t->fnd = calloc(n, sizeof *t->fnd);
    t->fshape = calloc(n, sizeof *t->fshape);
    t->F = calloc(n, sizeof *t->F);
    t->sum = calloc(n, sizeof *t->sum);
    if (!t->dt || !t->fnd || !t->fshape || !t->F || !t->sum) {
        rsum_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "RewardSum: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int rsum_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    rsum *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], "RewardSum", &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_numeric(leaf, t->k.in[i], "RewardSum", err)))
            return rc;
        int nd = crl_spec_ndim(leaf);
        t->dt[i] = crl_spec_dtype(leaf);
        t->fnd[i] = nd - s->batch_ndim;
        memcpy(t->fshape[i], crl_spec_shape(leaf) + s->batch_ndim, (size_t)t->fnd[i] * sizeof(int64_t));
        t->F[i] = st_numel_from(nd, crl_spec_shape(leaf), s->batch_ndim);
        /* TorchRL registers episode_reward in the observation spec, unbounded, with the reward's shape. */
        crl_spec *ns = crl_spec_unbounded(t->dt[i], nd, crl_spec_shape(leaf), &e);
        if (!ns)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = crl_spec_composite_set(s->observation, t->k.out[i], ns, err))) {
            crl_spec_unref(ns);
            return rc;
        }
        crl_spec_unref(ns);
    }
    t->specs_known = true;
    return CRL_OK;
}

static int rsum_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    rsum *t = p;
    if (!t->specs_known)
        return crl_error_set(err, CRL_E_INVALID, "%s: bound before its specs were transformed",
                             crl_transform_ctx_name(ctx));
    t->num = crl_transform_ctx_num(ctx);
    for (size_t i = 0; i < t->k.n; i++) {
        double *q = grow(t->sum[i], (size_t)(t->num * t->F[i]), sizeof(double));
        if (!q)
            return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", crl_transform_ctx_name(ctx));
        t->sum[i] = q;
    }
    return CRL_OK;
}

static crl_tensor *rsum_out(rsum *t, size_t i, crl_td *td, crl_error *err)
{
    int bn = crl_td_batch_ndim(td);
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, crl_td_batch_shape(td), (size_t)bn * sizeof(int64_t));
    memcpy(shape + bn, t->fshape[i], (size_t)t->fnd[i] * sizeof(int64_t));
    return crl_transform_output(td, t->k.out[i], t->dt[i], bn + t->fnd[i], shape, err);
}

static int rsum_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    rsum *t = p;
    const char *who = crl_transform_ctx_name(ctx);
    if (check_rows(td, t->num, who, err))
        return CRL_E_SHAPE;
    for (size_t i = 0; i < t->k.n; i++) {
        int64_t F = t->F[i];
        for (int64_t e = 0; e < t->num; e++)
            if (!mask || mask[e])
                memset(t->sum[i] + e * F, 0, (size_t)F * sizeof(double));
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *out = rsum_out(t, i, td, &le);
        if (!out)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        st_store(crl_tensor_data(out), t->dt[i], 0, t->num * F, t->sum[i]);
    }
    return CRL_OK;
}

static int rsum_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    rsum *t = p;
    const char *who = crl_transform_ctx_name(ctx);
    const bool *restarted = crl_transform_ctx_step_resets(ctx);
    if (check_rows(next, t->num, who, err))
        return CRL_E_SHAPE;
    for (size_t i = 0; i < t->k.n; i++) {
        int64_t F = t->F[i], n = t->num * F;
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *r = st_input(next, t->k.in[i], who, false, false, &le);
        if (!r)
            return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
        double *rv = st_scratch_get(&t->a, (size_t)n, who, err);
        if (!rv || crl_tensor_numel(r) != n) {
            crl_tensor_unref(r);
            return rv ? crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' holds %lld values, the specs say %lld", who,
                                      t->k.in[i], (long long)crl_tensor_numel(r), (long long)n)
                      : CRL_E_NOMEM;
        }
        st_load(crl_tensor_data(r), crl_tensor_dtype(r), 0, n, rv);
        crl_tensor_unref(r);
        /* TorchRL carries the root's episode_reward into next; our own copy stands in when it is absent. */
        const double *prev = t->sum[i];
        crl_tensor *root = crl_td_get(td, t->k.out[i]);
        if (root && crl_tensor_numel(root) == n) {
            crl_tensor *c = crl_tensor_contiguous(root, &le);
            double *pv = c ? st_scratch_get(&t->b, (size_t)n, who, &le) : NULL;
            if (!pv) {
                crl_tensor_unref(c);
                return crl_error_pass(err, &le, CRL_E_NOMEM);
            }
            st_load(crl_tensor_data(c), crl_tensor_dtype(c), 0, n, pv);
            crl_tensor_unref(c);
            prev = pv;
        }
        for (int64_t e = 0; e < t->num; e++)
            for (int64_t j = 0; j < F; j++) {
                int64_t q = e * F + j;
                t->sum[i][q] = (restarted && restarted[e]) ? rv[q] : prev[q] + rv[q];
            }
        crl_tensor *out = rsum_out(t, i, next, &le);
        if (!out)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        st_store(crl_tensor_data(out), t->dt[i], 0, n, t->sum[i]);
    }
    return CRL_OK;
}

const crl_option st_rsum_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "reward", 0, 0, NULL, "reward keys to sum over each episode" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where the sums go (empty: episode_<in key>)" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_rsum_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = rsum_create,
    .transform_specs = rsum_specs,
    .bind = rsum_bind,
    .reset = rsum_reset,
    .step = rsum_step,
    .destroy = rsum_destroy,
};

/* ---- StepCounter: step_count since reset; max_steps sets truncated (and done) ---- */

typedef struct stepc {
    char *count_key, *trunc_key;
    int64_t max_steps;   /* 0: none */
    bool update_done;
    int64_t num;
    int64_t *count;
    uint8_t *flags, *prev;   /* num each: scratch of a step */
} stepc;

static void stepc_destroy(void *p)
{
    stepc *t = p;
    if (!t)
        return;
    free(t->count_key);
    free(t->trunc_key);
    free(t->count);
    free(t->flags);
    free(t->prev);
    free(t);
}

static int stepc_create(const crl_opts *o, void **out, crl_error *err)
{
    stepc *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "StepCounter: out of memory");
    const char *ck = NULL, *tk = NULL;
    int rc;
    if ((rc = crl_opts_string(o, "step_count_key", &ck, err)) || (rc = crl_opts_string(o, "truncated_key", &tk, err)) ||
        (rc = crl_opts_bool(o, "update_done", &t->update_done, err)) ||
        (crl_opts_is_set(o, "max_steps") && (rc = crl_opts_int(o, "max_steps", &t->max_steps, err)))) {
        stepc_destroy(t);
        return rc;
    }
    if (crl_opts_is_set(o, "max_steps") && t->max_steps < 1) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)t->max_steps);
        stepc_destroy(t);
        return st_bad_option(err, o, "max_steps", v, "must be at least 1 (leave it unset for no limit)");
    }
    if (!*ck || !*tk) {
        const char *name = !*ck ? "step_count_key" : "truncated_key";
        stepc_destroy(t);
        return st_bad_option(err, o, name, "''", "name a key");
    }
    t->count_key = tf_strdup(ck);
    t->trunc_key = tf_strdup(tk);
    if (!t->count_key || !t->trunc_key) {
        stepc_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "StepCounter: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static crl_spec *flag_spec(const crl_transform_specs *s, crl_error *err)
{
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, s->batch_shape, (size_t)s->batch_ndim * sizeof(int64_t));
    shape[s->batch_ndim] = 1;
    return crl_spec_categorical(2, CRL_BOOL, s->batch_ndim + 1, shape, err);
}

/* Make sure the done Composite declares key (a bool flag), as TorchRL's StepCounter adds truncated. */
static int ensure_flag(crl_transform_specs *s, const char *key, crl_error *err)
{
    if (crl_spec_composite_get(s->done, key))
        return CRL_OK;
    crl_error le;
    crl_error_clear(&le);
    crl_spec *f = flag_spec(s, &le);
    if (!f)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    int rc = crl_spec_composite_set(s->done, key, f, err);
    crl_spec_unref(f);
    return rc;
}

static int stepc_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    stepc *t = p;
    int64_t shape[CRL_MAX_DIMS];
    int rc;
    memcpy(shape, s->batch_shape, (size_t)s->batch_ndim * sizeof(int64_t));
    shape[s->batch_ndim] = 1;
    crl_error e;
    crl_error_clear(&e);
    crl_spec *c = crl_spec_bounded(CRL_I64, s->batch_ndim + 1, shape, 0, (double)INT64_MAX, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    if ((rc = crl_spec_composite_set(s->observation, t->count_key, c, err))) {
        crl_spec_unref(c);
        return rc;
    }
    crl_spec_unref(c);
    if (t->max_steps > 0) {
        if ((rc = ensure_flag(s, t->trunc_key, err)) || (t->update_done && (rc = ensure_flag(s, "done", err))))
            return rc;
    }
    return CRL_OK;
}

static int stepc_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    stepc *t = p;
    t->num = crl_transform_ctx_num(ctx);
    int64_t *q = grow(t->count, (size_t)t->num, sizeof(int64_t));
    if (!q)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", crl_transform_ctx_name(ctx));
    t->count = q;
    uint8_t *f = grow(t->flags, (size_t)t->num, 1);
    if (f)
        t->flags = f;
    uint8_t *pv = f ? grow(t->prev, (size_t)t->num, 1) : NULL;
    if (!pv)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", crl_transform_ctx_name(ctx));
    t->prev = pv;
    return CRL_OK;
}

/* OR flags into the bool column at key (created when absent, keeping existing values); pv is scratch. */
static int or_flags(crl_td *td, const char *key, const uint8_t *flags, uint8_t *pv, int64_t num, crl_error *err)
{
    crl_tensor *old = col_in(td, key, num);
    for (int64_t e = 0; e < num; e++)
        pv[e] = old ? crl_tensor_flat_get(old, e) != 0 : 0;
    crl_tensor_unref(old);
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *out = col_out(td, key, CRL_BOOL, &le);
    if (!out)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    uint8_t *d = crl_tensor_data(out);
    for (int64_t e = 0; e < num; e++)
        d[e] = pv[e] | flags[e];
    return CRL_OK;
}

static int stepc_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    stepc *t = p;
    if (check_rows(td, t->num, crl_transform_ctx_name(ctx), err))
        return CRL_E_SHAPE;
    for (int64_t e = 0; e < t->num; e++)
        if (!mask || mask[e])
            t->count[e] = 0;
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *out = col_out(td, t->count_key, CRL_I64, &le);
    if (!out)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    memcpy(crl_tensor_data(out), t->count, (size_t)t->num * sizeof(int64_t));
    if (t->max_steps > 0 && !crl_td_get(td, t->trunc_key)) {
        crl_tensor *tr = col_out(td, t->trunc_key, CRL_BOOL, &le);
        if (!tr)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        crl_tensor_fill(tr, 0);
    }
    return CRL_OK;
}

static int stepc_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    stepc *t = p;
    const bool *restarted = crl_transform_ctx_step_resets(ctx);
    if (check_rows(next, t->num, crl_transform_ctx_name(ctx), err))
        return CRL_E_SHAPE;
    crl_tensor *root = col_in(td, t->count_key, t->num);
    for (int64_t e = 0; e < t->num; e++) {
        int64_t prev = root ? (int64_t)crl_tensor_flat_get(root, e) : t->count[e];
        t->count[e] = (restarted && restarted[e]) ? 0 : prev + 1;
    }
    crl_tensor_unref(root);
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *out = col_out(next, t->count_key, CRL_I64, &le);
    if (!out)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    memcpy(crl_tensor_data(out), t->count, (size_t)t->num * sizeof(int64_t));
    if (t->max_steps <= 0)
        return CRL_OK;
    for (int64_t e = 0; e < t->num; e++)
        t->flags[e] = t->count[e] >= t->max_steps;
    int rc = or_flags(next, t->trunc_key, t->flags, t->prev, t->num, err);
    if (rc == CRL_OK && t->update_done)
        rc = or_flags(next, "done", t->flags, t->prev, t->num, err);
    return rc;
}

const crl_option st_stepcount_options[] = {
    { "max_steps", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 9.2e18, NULL,
      "steps after which truncated is set (unset: count only)" },
    { "truncated_key", CRL_OPT_STRING, 0, "truncated", 0, 0, NULL, "the flag max_steps sets" },
    { "step_count_key", CRL_OPT_STRING, 0, "step_count", 0, 0, NULL, "where the count goes (int64 [..., 1])" },
    { "update_done", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "also set done when max_steps truncates" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_stepcount_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = stepc_create,
    .transform_specs = stepc_specs,
    .bind = stepc_bind,
    .reset = stepc_reset,
    .step = stepc_step,
    .destroy = stepc_destroy,
};

/* ---- InitTracker: is_init true on the reset step only ---- */

typedef struct initt {
    char *key;
    int64_t num;
} initt;

static void initt_destroy(void *p)
{
    initt *t = p;
    if (t)
        free(t->key);
    free(t);
}

static int initt_create(const crl_opts *o, void **out, crl_error *err)
{
    const char *k = NULL;
    int rc;
    if ((rc = crl_opts_string(o, "init_key", &k, err)))
        return rc;
    if (!*k)
        return st_bad_option(err, o, "init_key", "''", "name a key");
    initt *t = calloc(1, sizeof *t);
    if (!t || !(t->key = tf_strdup(k))) {
        free(t);
        return crl_error_set(err, CRL_E_NOMEM, "InitTracker: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int initt_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    initt *t = p;
    crl_error e;
    crl_error_clear(&e);
    crl_spec *f = flag_spec(s, &e);
    if (!f)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int rc = crl_spec_composite_set(s->observation, t->key, f, err);
    if (rc) {
        crl_spec_unref(f);
        return rc;
    }
    crl_spec_unref(f);
    return CRL_OK;
}

static int initt_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    (void)err;
    ((initt *)p)->num = crl_transform_ctx_num(ctx);
    return CRL_OK;
}

static int initt_write(initt *t, crl_td *td, const bool *which, const char *who, crl_error *err)
{
    if (check_rows(td, t->num, who, err))
        return CRL_E_SHAPE;
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *out = col_out(td, t->key, CRL_BOOL, &le);
    if (!out)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    uint8_t *d = crl_tensor_data(out);
    for (int64_t e = 0; e < t->num; e++)
        d[e] = which ? which[e] : 0;
    return CRL_OK;
}

static int initt_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    initt *t = p;
    if (!mask) {
        int rc = initt_write(t, td, NULL, crl_transform_ctx_name(ctx), err);
        if (rc == CRL_OK)
            crl_tensor_fill(crl_td_get(td, t->key), 1);
        return rc;
    }
    return initt_write(t, td, mask, crl_transform_ctx_name(ctx), err);
}

static int initt_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    return initt_write(p, next, crl_transform_ctx_step_resets(ctx), crl_transform_ctx_name(ctx), err);
}

const crl_option st_inittracker_options[] = {
    { "init_key", CRL_OPT_STRING, 0, "is_init", 0, 0, NULL, "the flag set on the first step of each episode" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_inittracker_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = initt_create,
    .transform_specs = initt_specs,
    .bind = initt_bind,
    .reset = initt_reset,
    .step = initt_step,
    .destroy = initt_destroy,
};

/* ---- TrajCounter: a new id for every trajectory started, counted across envs ---- */

typedef struct trajc {
    char *key;
    int64_t num;
    int64_t next_id;     /* survives rebinding: ids never repeat within one transform */
    int64_t *id;
    bool *primed;
} trajc;

static void trajc_destroy(void *p)
{
    trajc *t = p;
    if (!t)
        return;
    free(t->key);
    free(t->id);
    free(t->primed);
    free(t);
}

static int trajc_create(const crl_opts *o, void **out, crl_error *err)
{
    const char *k = NULL;
    int rc;
    if ((rc = crl_opts_string(o, "out_key", &k, err)))
        return rc;
    if (!*k)
        return st_bad_option(err, o, "out_key", "''", "name a key");
    trajc *t = calloc(1, sizeof *t);
    if (!t || !(t->key = tf_strdup(k))) {
        free(t);
        return crl_error_set(err, CRL_E_NOMEM, "TrajCounter: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int trajc_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    trajc *t = p;
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, s->batch_shape, (size_t)s->batch_ndim * sizeof(int64_t));
    shape[s->batch_ndim] = 1;
    crl_error e;
    crl_error_clear(&e);
    crl_spec *c = crl_spec_unbounded(CRL_I64, s->batch_ndim + 1, shape, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int rc = crl_spec_composite_set(s->observation, t->key, c, err);
    if (rc) {
        crl_spec_unref(c);
        return rc;
    }
    crl_spec_unref(c);
    return CRL_OK;
}

static int trajc_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    trajc *t = p;
    t->num = crl_transform_ctx_num(ctx);
    int64_t *id = grow(t->id, (size_t)t->num, sizeof *id);
    if (id)
        t->id = id;
    bool *pr = id ? grow(t->primed, (size_t)t->num, sizeof *pr) : NULL;
    if (!pr)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", crl_transform_ctx_name(ctx));
    t->primed = pr;
    return CRL_OK;
}

/* Envs in `which` (NULL: none) and envs never started get new ids, in env order. */
static int trajc_write(trajc *t, crl_td *td, const bool *which, bool all, const char *who, crl_error *err)
{
    if (check_rows(td, t->num, who, err))
        return CRL_E_SHAPE;
    for (int64_t e = 0; e < t->num; e++)
        if (all || (which && which[e]) || !t->primed[e]) {
            t->id[e] = t->next_id++;
            t->primed[e] = true;
        }
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *out = col_out(td, t->key, CRL_I64, &le);
    if (!out)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    memcpy(crl_tensor_data(out), t->id, (size_t)t->num * sizeof(int64_t));
    return CRL_OK;
}

static int trajc_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    return trajc_write(p, td, mask, mask == NULL, crl_transform_ctx_name(ctx), err);
}

static int trajc_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    return trajc_write(p, next, crl_transform_ctx_step_resets(ctx), false, crl_transform_ctx_name(ctx), err);
}

const crl_option st_trajcount_options[] = {
    { "out_key", CRL_OPT_STRING, 0, "traj_count", 0, 0, NULL, "where the trajectory id goes (int64 [..., 1])" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_trajcount_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = trajc_create,
    .transform_specs = trajc_specs,
    .bind = trajc_bind,
    .reset = trajc_reset,
    .step = trajc_step,
    .destroy = trajc_destroy,
};
