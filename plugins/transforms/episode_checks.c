/* FiniteTensorDictCheck (NaN/Inf guard), TerminateTransform (end on a condition), RandomTruncationTransform. */
#include "config.h"
#include "action_group.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- FiniteTensorDictCheck --------------------------------------------------- */

typedef struct finite_t {
    char **keys;            /* NULL-terminated; empty: every float leaf */
} finite_t;

static void finite_destroy(void *p)
{
    finite_t *t = p;
    if (!t)
        return;
    tfa_strv_free(t->keys);
    free(t);
}

static int finite_create(const crl_opts *o, void **out, crl_error *err)
{
    size_t n = 0;
    int rc;
    const char *const *items = NULL;
    if ((rc = crl_opts_list(o, "in_keys", &n, &items, err)))
        return rc;
    finite_t *t = calloc(1, sizeof *t);
    if (t)
        t->keys = calloc(n + 1, sizeof *t->keys);
    for (size_t i = 0; t && t->keys && i < n; i++)
        if (!(t->keys[i] = tf_strdup(items[i]))) {
            finite_destroy(t);
            t = NULL;
        }
    if (!t || !t->keys) {
        finite_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "FiniteTensorDictCheck: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int finite_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    finite_t *t = p;
    crl_error e;
    crl_error_clear(&e);
    for (size_t i = 0; t->keys[i]; i++)
        if (!tf_specs_need(s, t->keys[i], "FiniteTensorDictCheck", &e))
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    return CRL_OK;
}

static int check_tensor(const crl_tensor *x, const crl_td *td, const char *prefix, const char *key, crl_error *err)
{
    if (!crl_dtype_is_float(crl_tensor_dtype(x)))
        return CRL_OK;
    int64_t n = crl_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double v = crl_tensor_flat_get(x, i);
        if (isfinite(v))
            continue;
        int64_t num = 1;
        for (int d = 0; d < crl_td_batch_ndim(td); d++)
            num *= crl_td_batch_shape(td)[d];
        char lab[64];
        int64_t env = num > 1 ? i / (n / num) : 0;
        return crl_error_set(err, CRL_E_RANGE, "FiniteTensorDictCheck: key '%s%s' holds %s at %s (element %lld); "
                             "the env or the policy produced a non-finite value", prefix, key,
                             isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", tfa_env_label(lab, sizeof lab, env, num),
                             (long long)i);
    }
    return CRL_OK;
}

static int finite_check(finite_t *t, crl_td *td, const char *prefix, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    if (t->keys[0]) {
        for (size_t i = 0; t->keys[i]; i++) {
            crl_tensor *x = tf_td_need(td, t->keys[i], "FiniteTensorDictCheck", &e);
            if (!x)
                return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
            int rc = check_tensor(x, td, prefix, t->keys[i], err);
            if (rc)
                return rc;
        }
        return CRL_OK;
    }
    char **keys = crl_td_leaf_keys(td, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = CRL_OK;
    for (size_t i = 0; keys[i] && !rc; i++)
        rc = check_tensor(crl_td_get(td, keys[i]), td, prefix, keys[i], err);
    crl_free(keys);
    return rc;
}

static int finite_call(void *p, crl_td *td, crl_error *err)
{
    return finite_check(p, td, "", err);
}

static int finite_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    (void)ctx, (void)mask;
    return finite_check(p, td, "", err);
}

static int finite_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)ctx, (void)td;
    return finite_check(p, next, "next.", err);
}

static const crl_transform_ops finite_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = finite_create,
    .transform_specs = finite_specs,
    .call = finite_call,
    .reset = finite_reset,
    .step = finite_step,
    .destroy = finite_destroy,
};

static const crl_option finite_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "keys to check; empty: every float leaf" },
    CRL_OPTIONS_END
};

/* ---- TerminateTransform ------------------------------------------------------ */

enum { OP_GT, OP_LT, OP_GE, OP_LE, OP_ABS_GT };

typedef struct term {
    char *key;
    int64_t index;
    int op;
    double value;
    int64_t num;
} term;

static void term_destroy(void *p)
{
    term *t = p;
    if (!t)
        return;
    free(t->key);
    free(t);
}

static int term_create(const crl_opts *o, void **out, crl_error *err)
{
    const char *key = NULL, *op = NULL;
    term *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "TerminateTransform: out of memory");
    int rc;
    if ((rc = crl_opts_string(o, "key", &key, err)) || (rc = crl_opts_int(o, "index", &t->index, err)) ||
        (rc = crl_opts_string(o, "op", &op, err)) || (rc = crl_opts_double(o, "value", &t->value, err))) {
        free(t);
        return rc;
    }
    static const char *const ops[] = { "gt", "lt", "ge", "le", "abs_gt" };
    for (int i = 0; i < 5; i++)
        if (strcmp(op, ops[i]) == 0)
            t->op = i;
    if (!(t->key = tf_strdup(key))) {
        free(t);
        return crl_error_set(err, CRL_E_NOMEM, "TerminateTransform: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int need_flag(crl_transform_specs *s, const char *k, const char *who, crl_error *err)
{
    crl_spec *f = crl_spec_composite_get(s->done, k);
    if (!f)
        return crl_transform_missing_key(err, who, k, s->done, "done spec");
    if (crl_spec_dtype(f) != CRL_BOOL)
        return crl_error_set(err, CRL_E_DTYPE, "%s: done flag '%s' is %s; it must be bool", who, k,
                             crl_dtype_name(crl_spec_dtype(f)));
    return CRL_OK;
}

static int term_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    term *t = p;
    crl_error e;
    crl_error_clear(&e);
    crl_spec *leaf = tf_specs_need(s, t->key, "TerminateTransform", &e);
    int rc;
    if (!leaf)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    if (crl_spec_dtype(leaf) == CRL_BOOL)
        return crl_error_set(err, CRL_E_DTYPE, "TerminateTransform: key '%s' is bool; compare a numeric key",
                             t->key);
    int64_t numel = 1;
    for (int d = 0; d < crl_spec_ndim(leaf); d++)
        numel *= crl_spec_shape(leaf)[d];
    int64_t num = 1;
    for (int d = 0; d < s->batch_ndim; d++)
        num *= s->batch_shape[d];
    int64_t row = num ? numel / num : 0;
    if (t->index < 0 || t->index >= row)
        return crl_error_set(err, CRL_E_RANGE, "TerminateTransform: index = %lld is out of range for key '%s', "
                             "which has %lld values per env; give 0..%lld", (long long)t->index, t->key,
                             (long long)row, (long long)(row - 1));
    if ((rc = need_flag(s, "terminated", "TerminateTransform", err)) ||
        (rc = need_flag(s, "done", "TerminateTransform", err)))
        return rc;
    return CRL_OK;
}

static bool holds(const term *t, double v)
{
    switch (t->op) {
    case OP_GT: return v > t->value;
    case OP_LT: return v < t->value;
    case OP_GE: return v >= t->value;
    case OP_LE: return v <= t->value;
    default: return fabs(v) > t->value;
    }
}

/* Set flag k of env e in next (through crl_transform_output). */
static crl_tensor *flag_out(crl_td *next, const char *k, const char *who, crl_error *err)
{
    crl_tensor *f = tf_td_need(next, k, who, err);
    if (!f)
        return NULL;
    return crl_transform_output(next, k, CRL_BOOL, crl_tensor_ndim(f), crl_tensor_shape(f), err);
}

static int term_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    term *t = p;
    const char *who = crl_transform_ctx_name(ctx);
    int64_t num = crl_transform_ctx_num(ctx);
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *x = tf_td_need(next, t->key, who, &le);
    if (!x)
        return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
    int64_t r = tfa_row_elems(x, num);
    crl_tensor *termf = flag_out(next, "terminated", who, &le);
    crl_tensor *done = termf ? flag_out(next, "done", who, &le) : NULL;
    if (!done)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    for (int64_t e = 0; e < num; e++)
        if (holds(t, crl_tensor_flat_get(x, e * r + t->index))) {
            tfa_set_flag(termf, e, true);
            tfa_set_flag(done, e, true);
        }
    return CRL_OK;
}

static const crl_transform_ops term_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = term_create,
    .transform_specs = term_specs,
    .step = term_step,
    .destroy = term_destroy,
};

static const crl_option term_options[] = {
    { "key", CRL_OPT_STRING, 0, "observation", 0, 0, NULL, "the output key the condition reads" },
    { "index", CRL_OPT_INT, 0, "0", 0, 0, NULL, "which value of the env's row of key (flattened)" },
    { "op", CRL_OPT_ENUM, 0, "gt", 0, 0, "gt|lt|ge|le|abs_gt", "the comparison: key[index] OP value" },
    { "value", CRL_OPT_DOUBLE, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "the threshold" },
    CRL_OPTIONS_END
};

/* ---- RandomTruncationTransform ---------------------------------------------- */

typedef struct rtrunc {
    double p;
} rtrunc;

static void rtrunc_destroy(void *p)
{
    free(p);
}

static int rtrunc_create(const crl_opts *o, void **out, crl_error *err)
{
    rtrunc *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "RandomTruncationTransform: out of memory");
    int rc = crl_opts_double(o, "p", &t->p, err);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

static int rtrunc_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    int rc;
    (void)p;
    if ((rc = need_flag(s, "truncated", "RandomTruncationTransform", err)) ||
        (rc = need_flag(s, "done", "RandomTruncationTransform", err)))
        return rc;
    return CRL_OK;
}

static int rtrunc_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    rtrunc *t = p;
    const char *who = crl_transform_ctx_name(ctx);
    int64_t num = crl_transform_ctx_num(ctx);
    crl_rng *rng = crl_transform_ctx_rng(ctx);
    crl_error le;
    crl_error_clear(&le);
    crl_tensor *tr = flag_out(next, "truncated", who, &le);
    crl_tensor *done = tr ? flag_out(next, "done", who, &le) : NULL;
    if (!done)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    /* One draw per env and step, whatever its state, so the stream depends on the seed alone. */
    for (int64_t e = 0; e < num; e++) {
        bool cut = crl_rng_uniform(rng) < t->p;
        if (cut && !tfa_flag(done, e)) {
            tfa_set_flag(tr, e, true);
            tfa_set_flag(done, e, true);
        }
    }
    return CRL_OK;
}

static const crl_transform_ops rtrunc_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = rtrunc_create,
    .transform_specs = rtrunc_specs,
    .step = rtrunc_step,
    .destroy = rtrunc_destroy,
};

static const crl_option rtrunc_options[] = {
    { "p", CRL_OPT_DOUBLE, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 0, 1, NULL,
      "probability that a step truncates the episode" },
    CRL_OPTIONS_END
};

int tfa_register_checks(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register(host, "FiniteTensorDictCheck", "fail on NaN or Inf in the env's output", finite_options,
                          &finite_ops, err)) ||
        (rc = tf_register(host, "TerminateTransform", "set terminated when key[index] OP value holds", term_options,
                          &term_ops, err)))
        return rc;
    return tf_register(host, "RandomTruncationTransform", "truncate each step with probability p", rtrunc_options,
                       &rtrunc_ops, err);
}
