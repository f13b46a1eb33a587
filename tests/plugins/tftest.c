/* tftest: fixture transforms for the transform host tests (test_transform).
 *
 *   AddOne    observation: out = in * scale + amount (float in_keys; the
 *             out spec becomes Unbounded).  Only call.
 *   Counter   per-env counter "count" int64 [batch..., 1]: 0 after a reset
 *             (only the envs in the mask), +1 per step, 0 for envs the
 *             parent reset inside the step (step_resets).
 *   ActShift  inverse on float actions: the parent gets a * scale - shift;
 *             the action spec outside is the parent's bounds mapped back.
 *             No call (so it cannot be applied standalone).
 *   TwoSteps  steps the parent once more inside every step (parent_step)
 *             and sums the two rewards.
 *   DoneAt    sets truncated and done in next when observation[..., 0] >= at.
 *   Noops     on reset: parent_reset again, then `noops` random parent steps
 *             (parent_rand_action + parent_step; with random = true a count
 *             in [0, noops] drawn from the transform's rng), the last
 *             "next" (minus reward) becoming the root (NoopResetEnv's shape).
 *   BadSpecs  transform_specs fails unless option ok = true. */
#include <crl/crl.h>
#include <crl/transform_backend.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers -------------------------------------------------------------------------- */

static int key_list(const crl_opts *o, const char *name, size_t *n, char ***out, crl_error *err)
{
    const char *const *items;
    int rc = crl_opts_list(o, name, n, &items, err);
    if (rc)
        return rc;
    *out = calloc(*n + 1, sizeof(char *));
    for (size_t i = 0; i < *n; i++)
        (*out)[i] = strdup(items[i]);
    return CRL_OK;
}

static void free_list(char **l)
{
    for (size_t i = 0; l && l[i]; i++)
        free(l[i]);
    free(l);
}

/* ---- AddOne ------------------------------------------------------------------------------ */

typedef struct addone {
    char **in, **out;
    size_t n;
    double amount, scale;
} addone;

static const crl_option addone_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "observation", 0, 0, NULL, "float keys to transform" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write (empty: in place)" },
    { "amount", CRL_OPT_DOUBLE, 0, "1", 0, 0, NULL, "added" },
    { "scale", CRL_OPT_DOUBLE, 0, "1", 0, 0, NULL, "multiplied first" },
    CRL_OPTIONS_END
};

static void addone_destroy(void *p)
{
    addone *a = p;
    if (!a)
        return;
    free_list(a->in);
    free_list(a->out);
    free(a);
}

static int addone_create(const crl_opts *o, void **t, crl_error *err)
{
    addone *a = calloc(1, sizeof *a);
    size_t nout = 0;
    int rc = key_list(o, "in_keys", &a->n, &a->in, err);
    if (!rc)
        rc = key_list(o, "out_keys", &nout, &a->out, err);
    if (!rc)
        rc = crl_opts_double(o, "amount", &a->amount, err);
    if (!rc)
        rc = crl_opts_double(o, "scale", &a->scale, err);
    if (!rc && nout && nout != a->n)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: out_keys has %zu keys but in_keys %zu", crl_opts_origin(o, "out_keys"),
                           nout, a->n);
    if (!rc && !nout) {
        free_list(a->out);
        a->out = calloc(a->n + 1, sizeof(char *));
        for (size_t i = 0; i < a->n; i++)
            a->out[i] = strdup(a->in[i]);
    }
    if (rc) {
        addone_destroy(a);
        return rc;
    }
    *t = a;
    return CRL_OK;
}

static int addone_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    addone *a = p;
    for (size_t i = 0; i < a->n; i++) {
        crl_spec *in = crl_spec_composite_get(s->observation, a->in[i]);
        if (!in)
            return crl_transform_missing_key(err, "AddOne", a->in[i], s->observation, "observation spec");
        if (!crl_dtype_is_float(crl_spec_dtype(in)))
            return crl_error_set(err, CRL_E_DTYPE, "AddOne: key '%s' is %s; it needs a float key", a->in[i],
                                 crl_dtype_name(crl_spec_dtype(in)));
        crl_spec *u = crl_spec_unbounded(crl_spec_dtype(in), crl_spec_ndim(in), crl_spec_shape(in), err);
        if (!u)
            return err->code;
        int rc = crl_spec_composite_set(s->observation, a->out[i], u, err);
        crl_spec_unref(u);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int addone_call(void *p, crl_td *td, crl_error *err)
{
    addone *a = p;
    for (size_t i = 0; i < a->n; i++) {
        crl_tensor *in = crl_td_get(td, a->in[i]);
        if (!in)
            return crl_transform_missing_td_key(err, "AddOne", a->in[i], td);
        if (!crl_dtype_is_float(crl_tensor_dtype(in)))
            return crl_error_set(err, CRL_E_DTYPE, "AddOne: key '%s' is %s; it needs a float key", a->in[i],
                                 crl_dtype_name(crl_tensor_dtype(in)));
        crl_tensor_ref(in); /* the output may replace it */
        crl_tensor *out = crl_transform_output(td, a->out[i], crl_tensor_dtype(in), crl_tensor_ndim(in),
                                               crl_tensor_shape(in), err);
        if (out) {
            int64_t n = crl_tensor_numel(in);
            for (int64_t k = 0; k < n; k++)
                crl_tensor_flat_set(out, k, crl_tensor_flat_get(in, k) * a->scale + a->amount);
        }
        crl_tensor_unref(in);
        if (!out)
            return err->code;
    }
    return CRL_OK;
}

static const crl_transform_ops addone_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = addone_create,
    .transform_specs = addone_specs,
    .call = addone_call,
    .destroy = addone_destroy,
};

/* ---- Counter ------------------------------------------------------------------------------ */

typedef struct counter {
    char *key;
    int64_t num;
    int64_t *count;
    int binds;
} counter;

static const crl_option counter_options[] = {
    { "key", CRL_OPT_STRING, 0, "count", 0, 0, NULL, "the counter's key" },
    CRL_OPTIONS_END
};

static void counter_destroy(void *p)
{
    counter *c = p;
    if (!c)
        return;
    free(c->key);
    free(c->count);
    free(c);
}

static int counter_create(const crl_opts *o, void **t, crl_error *err)
{
    const char *k;
    int rc = crl_opts_string(o, "key", &k, err);
    if (rc)
        return rc;
    counter *c = calloc(1, sizeof *c);
    c->key = strdup(k);
    *t = c;
    return CRL_OK;
}

static int counter_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    counter *c = p;
    int64_t shape[2];
    int nd = s->batch_ndim;
    if (nd)
        shape[0] = s->batch_shape[0];
    shape[nd] = 1;
    crl_spec *u = crl_spec_unbounded(CRL_I64, nd + 1, shape, err);
    if (!u)
        return err->code;
    int rc = crl_spec_composite_set(s->observation, c->key, u, err);
    crl_spec_unref(u);
    return rc;
}

static int counter_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    (void)err;
    counter *c = p;
    free(c->count);
    c->num = crl_transform_ctx_num(ctx);
    c->count = calloc((size_t)c->num, sizeof(int64_t));
    c->binds++;
    return CRL_OK;
}

static int counter_write(counter *c, const crl_transform_ctx *ctx, crl_td *td, crl_error *err)
{
    int nd;
    const int64_t *b = crl_transform_ctx_batch(ctx, &nd);
    int64_t shape[2];
    if (nd)
        shape[0] = b[0];
    shape[nd] = 1;
    crl_tensor *t = crl_transform_output(td, c->key, CRL_I64, nd + 1, shape, err);
    if (!t)
        return err->code;
    memcpy(crl_tensor_data(t), c->count, sizeof(int64_t) * (size_t)c->num);
    return CRL_OK;
}

static int counter_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    counter *c = p;
    for (int64_t i = 0; i < c->num; i++)
        if (!mask || mask[i])
            c->count[i] = 0;
    return counter_write(c, ctx, td, err);
}

static int counter_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    counter *c = p;
    const bool *r = crl_transform_ctx_step_resets(ctx);
    for (int64_t i = 0; i < c->num; i++)
        c->count[i] = r && r[i] ? 0 : c->count[i] + 1;
    return counter_write(c, ctx, next, err);
}

static const crl_transform_ops counter_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = counter_create,
    .transform_specs = counter_specs,
    .bind = counter_bind,
    .reset = counter_reset,
    .step = counter_step,
    .destroy = counter_destroy,
};

/* ---- ActShift ------------------------------------------------------------------------------ */

typedef struct actshift {
    char *key;
    double shift, scale;
} actshift;

static const crl_option actshift_options[] = {
    { "in_keys_inv", CRL_OPT_LIST, 0, "action", 0, 0, NULL, "the float action key (one)" },
    { "shift", CRL_OPT_DOUBLE, 0, "1", 0, 0, NULL, "subtracted on the way to the parent" },
    { "scale", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1", 0.001, 1000, NULL, "multiplied first" },
    CRL_OPTIONS_END
};

static void actshift_destroy(void *p)
{
    actshift *a = p;
    if (a)
        free(a->key);
    free(a);
}

static int actshift_create(const crl_opts *o, void **t, crl_error *err)
{
    size_t n;
    const char *const *keys;
    actshift *a = calloc(1, sizeof *a);
    int rc = crl_opts_list(o, "in_keys_inv", &n, &keys, err);
    if (!rc && n != 1)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: in_keys_inv needs exactly one key", crl_opts_origin(o, "in_keys_inv"));
    if (!rc)
        rc = crl_opts_double(o, "shift", &a->shift, err);
    if (!rc)
        rc = crl_opts_double(o, "scale", &a->scale, err);
    if (rc) {
        free(a);
        return rc;
    }
    a->key = strdup(keys[0]);
    *t = a;
    return CRL_OK;
}

static int actshift_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    actshift *a = p;
    crl_spec *in = crl_spec_composite_get(s->action, a->key);
    if (!in)
        return crl_transform_missing_key(err, "ActShift", a->key, s->action, "action spec");
    if (crl_spec_get_kind(in) != CRL_SPEC_BOUNDED || !crl_dtype_is_float(crl_spec_dtype(in)))
        return crl_error_set(err, CRL_E_DTYPE, "ActShift: key '%s' must be a Bounded float action", a->key);
    crl_tensor *lo = crl_tensor_clone(crl_spec_low(in), err);
    crl_tensor *hi = crl_tensor_clone(crl_spec_high(in), err);
    for (int64_t k = 0; k < crl_tensor_numel(lo); k++) {
        crl_tensor_flat_set(lo, k, (crl_tensor_flat_get(lo, k) + a->shift) / a->scale);
        crl_tensor_flat_set(hi, k, (crl_tensor_flat_get(hi, k) + a->shift) / a->scale);
    }
    crl_spec *out = crl_spec_bounded_t(crl_spec_dtype(in), lo, hi, err);
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    if (!out)
        return err->code;
    int rc = crl_spec_composite_set(s->action, a->key, out, err);
    crl_spec_unref(out);
    return rc;
}

static int actshift_inv(void *p, crl_td *td, crl_error *err)
{
    actshift *a = p;
    crl_tensor *in = crl_td_get(td, a->key);
    if (!in)
        return crl_transform_missing_td_key(err, "ActShift", a->key, td);
    crl_tensor_ref(in);
    crl_tensor *out = crl_transform_output(td, a->key, crl_tensor_dtype(in), crl_tensor_ndim(in), crl_tensor_shape(in),
                                           err);
    if (out)
        for (int64_t k = 0; k < crl_tensor_numel(in); k++)
            crl_tensor_flat_set(out, k, crl_tensor_flat_get(in, k) * a->scale - a->shift);
    crl_tensor_unref(in);
    return out ? CRL_OK : err->code;
}

static const crl_transform_ops actshift_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = actshift_create,
    .transform_specs = actshift_specs,
    .inv = actshift_inv,
    .destroy = actshift_destroy,
};

/* ---- TwoSteps ------------------------------------------------------------------------------ */

typedef struct twosteps {
    float *acc;
    int64_t n;
} twosteps;

static int twosteps_create(const crl_opts *o, void **t, crl_error *err)
{
    (void)o;
    (void)err;
    *t = calloc(1, sizeof(twosteps));
    return CRL_OK;
}

static void twosteps_destroy(void *p)
{
    twosteps *s = p;
    if (s)
        free(s->acc);
    free(s);
}

static int twosteps_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    twosteps *s = p;
    crl_tensor *r = crl_td_get(next, "reward");
    if (!r)
        return crl_transform_missing_td_key(err, crl_transform_ctx_name(ctx), "reward", next);
    int64_t n = crl_tensor_numel(r);
    if (n != s->n) {
        free(s->acc);
        s->acc = calloc((size_t)n, sizeof(float));
        s->n = n;
    }
    for (int64_t k = 0; k < n; k++)
        s->acc[k] = (float)crl_tensor_flat_get(r, k);
    int rc = crl_transform_ctx_parent_step(ctx, td, err);
    if (rc)
        return rc;
    next = crl_td_get_td(td, "next");
    r = next ? crl_td_get(next, "reward") : NULL;
    if (!r || crl_tensor_numel(r) != n)
        return crl_error_set(err, CRL_E_RUNTIME, "%s: no reward after parent_step", crl_transform_ctx_name(ctx));
    for (int64_t k = 0; k < n; k++)
        crl_tensor_flat_set(r, k, crl_tensor_flat_get(r, k) + s->acc[k]);
    return CRL_OK;
}

static const crl_transform_ops twosteps_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = twosteps_create,
    .step = twosteps_step,
    .destroy = twosteps_destroy,
};

/* ---- DoneAt ------------------------------------------------------------------------------ */

static const crl_option doneat_options[] = {
    { "at", CRL_OPT_DOUBLE, 0, "3", 0, 0, NULL, "truncate when observation[..., 0] >= at" },
    CRL_OPTIONS_END
};

static int doneat_create(const crl_opts *o, void **t, crl_error *err)
{
    double *at = calloc(1, sizeof *at);
    int rc = crl_opts_double(o, "at", at, err);
    if (rc) {
        free(at);
        return rc;
    }
    *t = at;
    return CRL_OK;
}

static int doneat_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    double at = *(double *)p;
    crl_tensor *obs = crl_td_get(next, "observation");
    crl_tensor *done = crl_td_get(next, "done"), *trunc = crl_td_get(next, "truncated");
    if (!obs || !done || !trunc)
        return crl_transform_missing_td_key(err, crl_transform_ctx_name(ctx), !obs ? "observation" : "done", next);
    int64_t num = crl_transform_ctx_num(ctx), per = crl_tensor_numel(obs) / num;
    for (int64_t i = 0; i < num; i++)
        if (crl_tensor_flat_get(obs, i * per) >= at) {
            crl_tensor_flat_set(done, i, 1);
            crl_tensor_flat_set(trunc, i, 1);
        }
    return CRL_OK;
}

static const crl_transform_ops doneat_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = doneat_create,
    .step = doneat_step,
    .destroy = free,
};

/* ---- Noops ------------------------------------------------------------------------------ */

typedef struct noops {
    int64_t n;
    bool random;
} noops;

static const crl_option noops_options[] = {
    { "noops", CRL_OPT_INT, CRL_OPT_RANGE, "2", 0, 100, NULL, "random steps after each reset" },
    { "random", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "draw the count in [0, noops]" },
    CRL_OPTIONS_END
};

static int noops_create(const crl_opts *o, void **t, crl_error *err)
{
    noops *n = calloc(1, sizeof *n);
    int rc = crl_opts_int(o, "noops", &n->n, err);
    if (!rc)
        rc = crl_opts_bool(o, "random", &n->random, err);
    if (rc) {
        free(n);
        return rc;
    }
    *t = n;
    return CRL_OK;
}

static int noops_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    noops *n = p;
    int rc = crl_transform_ctx_parent_reset(ctx, td, mask, err);
    if (rc)
        return rc;
    int64_t k = n->random ? (int64_t)crl_rng_below(crl_transform_ctx_rng(ctx), (uint64_t)n->n + 1) : n->n;
    int nd;
    const int64_t *b = crl_transform_ctx_batch(ctx, &nd);
    crl_td *tmp = crl_td_new(nd, b, err);
    if (!tmp)
        return err->code;
    for (int64_t i = 0; i < k && !rc; i++) {
        rc = crl_transform_ctx_parent_rand_action(ctx, tmp, err);
        if (!rc)
            rc = crl_transform_ctx_parent_step(ctx, tmp, err);
        if (!rc) {
            const char *drop[] = { "reward", NULL };
            crl_td *keep = crl_td_exclude(crl_td_get_td(tmp, "next"), drop, err);
            rc = keep ? crl_td_update(td, keep, err) : err->code;
            crl_td_unref(keep);
        }
    }
    crl_td_unref(tmp);
    return rc;
}

static const crl_transform_ops noops_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = noops_create,
    .reset = noops_reset,
    .destroy = free,
};

/* ---- BadSpecs ------------------------------------------------------------------------------ */

static const crl_option badspecs_options[] = {
    { "ok", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "let transform_specs pass" },
    { "repr", CRL_OPT_INT, CRL_OPT_RANGE, "0", -1, 4000, NULL,
      "the repr op: -1 fails, else BadSpecs(N x's)" },
    CRL_OPTIONS_END
};

typedef struct badspecs {
    bool ok;                /* first: badspecs_specs reads it as a bool */
    int64_t repr;
} badspecs;

static int badspecs_create(const crl_opts *o, void **t, crl_error *err)
{
    badspecs *b = calloc(1, sizeof *b);
    int rc = crl_opts_bool(o, "ok", &b->ok, err);
    if (!rc)
        rc = crl_opts_int(o, "repr", &b->repr, err);
    if (rc) {
        free(b);
        return rc;
    }
    *t = b;
    return CRL_OK;
}

static int badspecs_repr(void *p, char *buf, size_t size)
{
    const badspecs *b = p;
    if (b->repr < 0)
        return -1;
    if (b->repr == 0)
        return snprintf(buf, size, "BadSpecs()");
    int64_t n = b->repr;
    size_t len = strlen("BadSpecs()") + (size_t)n;
    for (size_t i = 0; i < size && i < len; i++)
        buf[i] = i < 9 ? "BadSpecs("[i] : i + 1 == len ? ')' : 'x';
    if (size)
        buf[len < size ? len : size - 1] = '\0';
    return (int)len;
}

static int badspecs_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    (void)s;
    return ((const badspecs *)p)->ok ? CRL_OK : crl_error_set(err, CRL_E_SHAPE, "BadSpecs: refusing the specs on purpose");
}

static const crl_transform_ops badspecs_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = badspecs_create,
    .transform_specs = badspecs_specs,
    .destroy = free,
    .repr = badspecs_repr,
};

/* ---- registration ---------------------------------------------------------------------------- */

static const crl_option no_options[] = { CRL_OPTIONS_END };

static const crl_component components[] = {
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "AddOne", "out = in * scale + amount", addone_options, &addone_ops },
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "Counter", "per-env step counter", counter_options, &counter_ops },
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "ActShift", "inverse action shift", actshift_options, &actshift_ops },
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "TwoSteps", "two parent steps per step", no_options, &twosteps_ops },
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "DoneAt", "truncates at a threshold", doneat_options, &doneat_ops },
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "Noops", "random steps after reset", noops_options, &noops_ops },
    { sizeof(crl_component), CRL_KIND_TRANSFORM, "BadSpecs", "fails transform_specs", badspecs_options, &badspecs_ops },
};

static int tftest_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    for (size_t i = 0; i < sizeof components / sizeof components[0]; i++) {
        int rc = crl_host_register(host, &components[i], err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(tftest, "tftest", "1.0.0", "MIT", "fixture transforms for test_transform", NULL, tftest_init, NULL)
