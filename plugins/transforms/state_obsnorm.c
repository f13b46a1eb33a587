/* ObservationNorm: obs * scale + loc (or (obs - loc) / scale), with loc/scale given or from a random rollout. */
#include "config.h"
#include "state_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct on_key {
    int64_t F;
    double *loc, *scale;   /* F each once resolved */
} on_key;

typedef struct onorm {
    tf_keys k;
    double *loc_opt, *scale_opt;
    size_t nloc, nscale;
    char *loc_origin, *scale_origin, *init_origin;
    bool standard_normal;
    double eps;
    int64_t init_stats;
    bool stats_done;
    on_key *keys;
    st_scratch sc;
} onorm;

static void onorm_destroy(void *p)
{
    onorm *t = p;
    if (!t)
        return;
    for (size_t i = 0; t->keys && i < t->k.n; i++) {
        free(t->keys[i].loc);
        free(t->keys[i].scale);
    }
    free(t->keys);
    free(t->loc_opt);
    free(t->scale_opt);
    free(t->loc_origin);
    free(t->scale_origin);
    free(t->init_origin);
    st_scratch_free(&t->sc);
    tf_keys_free(&t->k);
    free(t);
}

static double *dup_doubles(const double *v, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d && n)
        memcpy(d, v, n * sizeof *d);
    return d;
}

static int onorm_create(const crl_opts *o, void **out, crl_error *err)
{
    onorm *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "ObservationNorm: out of memory");
    const double *lv = NULL, *sv = NULL;
    int rc;
    if ((rc = tf_keys_read(o, "in_keys", "out_keys", false, "ObservationNorm", &t->k, err)) ||
        (rc = crl_opts_doubles(o, "loc", &t->nloc, &lv, err)) ||
        (rc = crl_opts_doubles(o, "scale", &t->nscale, &sv, err)) ||
        (rc = crl_opts_bool(o, "standard_normal", &t->standard_normal, err)) ||
        (rc = crl_opts_double(o, "eps", &t->eps, err)) || (rc = crl_opts_int(o, "init_stats", &t->init_stats, err))) {
        onorm_destroy(t);
        return rc;
    }
    if (t->nloc == 0 || t->nscale == 0) {
        const char *name = t->nloc == 0 ? "loc" : "scale";
        onorm_destroy(t);
        return st_bad_option(err, o, name, "''", "give one value, or one per element of the observation");
    }
    if (t->init_stats < 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)t->init_stats);
        onorm_destroy(t);
        return st_bad_option(err, o, "init_stats", v, "must be >= 0 (0: use loc and scale as given)");
    }
    if (!(t->eps > 0)) {
        char v[32];
        snprintf(v, sizeof v, "%g", t->eps);
        onorm_destroy(t);
        return st_bad_option(err, o, "eps", v, "must be > 0");
    }
    for (size_t i = 0; t->standard_normal && t->init_stats == 0 && i < t->nscale; i++)
        if (sv[i] == 0) {
            onorm_destroy(t);
            return st_bad_option(err, o, "scale", "0", "standard_normal divides by scale: every value must be non-zero");
        }
    t->loc_opt = dup_doubles(lv, t->nloc);
    t->scale_opt = dup_doubles(sv, t->nscale);
    t->loc_origin = tf_strdup(crl_opts_origin(o, "loc"));
    t->scale_origin = tf_strdup(crl_opts_origin(o, "scale"));
    t->init_origin = tf_strdup(crl_opts_origin(o, "init_stats"));
    t->keys = calloc(t->k.n, sizeof *t->keys);
    if (!t->loc_opt || !t->scale_opt || !t->loc_origin || !t->scale_origin || !t->init_origin || !t->keys) {
        onorm_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "ObservationNorm: out of memory");
    }
    *out = t;
    return CRL_OK;
}

/* Broadcast n option values over F elements whose last dim is `last` (1, last or F values). */
static int broadcast(const double *v, size_t n, int64_t F, int64_t last, double *dst, const char *name,
                     const char *origin, const char *key, crl_error *err)
{
    if (n == 1 || (int64_t)n == F || (last > 0 && (int64_t)n == last)) {
        for (int64_t j = 0; j < F; j++)
            dst[j] = v[n == 1 ? 0 : (int64_t)n == F ? j : j % last];
        return CRL_OK;
    }
    return crl_error_set(err, CRL_E_SHAPE,
                         "ObservationNorm: %s (%s) has %zu values but key '%s' has %lld elements per env (last dim "
                         "%lld); give 1, %lld or %lld values",
                         name, origin, n, key, (long long)F, (long long)last, (long long)last, (long long)F);
}

static int resolve(onorm *t, size_t i, int64_t F, int64_t last, crl_error *err)
{
    on_key *kk = &t->keys[i];
    if (kk->loc) {
        if (kk->F == F)
            return CRL_OK;
        if (t->stats_done)
            return crl_error_set(err, CRL_E_SHAPE,
                                 "ObservationNorm: key '%s' now has %lld elements per env but init_stats measured %lld",
                                 t->k.in[i], (long long)F, (long long)kk->F);
    }
    double *l = realloc(kk->loc, (size_t)(F ? F : 1) * sizeof *l);
    if (l)
        kk->loc = l;
    double *s = l ? realloc(kk->scale, (size_t)(F ? F : 1) * sizeof *s) : NULL;
    if (!s)
        return crl_error_set(err, CRL_E_NOMEM, "ObservationNorm: out of memory");
    kk->scale = s;
    kk->F = F;
    int rc;
    if ((rc = broadcast(t->loc_opt, t->nloc, F, last, kk->loc, "loc", t->loc_origin, t->k.in[i], err)) ||
        (rc = broadcast(t->scale_opt, t->nscale, F, last, kk->scale, "scale", t->scale_origin, t->k.in[i], err))) {
        free(kk->loc);
        free(kk->scale);
        kk->loc = kk->scale = NULL;
        return rc;
    }
    return CRL_OK;
}

typedef struct map_ctx {
    const onorm *t;
    const on_key *kk;
} map_ctx;

static double norm_one(const onorm *t, const on_key *kk, int64_t j, double x)
{
    return t->standard_normal ? (x - kk->loc[j]) / kk->scale[j] : x * kk->scale[j] + kk->loc[j];
}

static double onorm_map(double x, int64_t j, void *u)
{
    map_ctx *m = u;
    return norm_one(m->t, m->kk, j, x);
}

static int onorm_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    onorm *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], "ObservationNorm", &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_float(leaf, t->k.in[i], "ObservationNorm", err)))
            return rc;
        int nd = crl_spec_ndim(leaf);
        const int64_t *shape = crl_spec_shape(leaf);
        int64_t F = st_numel_from(nd, shape, s->batch_ndim);
        int64_t last = nd > s->batch_ndim ? shape[nd - 1] : 1;
        crl_spec *ns;
        if (t->init_stats > 0 && !t->stats_done) {
            /* loc and scale come from the rollout at bind, after the specs: the bounds are unknown. */
            ns = crl_spec_unbounded(crl_spec_dtype(leaf), nd, shape, &e);
        } else {
            if ((rc = resolve(t, i, F, last, err)))
                return rc;
            map_ctx m = { t, &t->keys[i] };
            ns = st_spec_map(leaf, s->batch_ndim, crl_spec_dtype(leaf), onorm_map, &m, &e);
        }
        if ((rc = st_spec_set(s, t->k.out[i], ns, &e, err)))
            return rc;
    }
    return CRL_OK;
}

/* Running mean and M2 per element (Welford), for the unbiased std TorchRL's init_stats takes. */
typedef struct welford {
    double *mean, *m2;
    int64_t n;
} welford;

static void welford_add(welford *w, int64_t F, const double *x, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++) {
        w->n++;
        for (int64_t j = 0; j < F; j++) {
            double d = x[r * F + j] - w->mean[j];
            w->mean[j] += d / (double)w->n;
            w->m2[j] += d * (x[r * F + j] - w->mean[j]);
        }
    }
}

static int collect(onorm *t, welford *w, const crl_td *td, const char *who, crl_error *err)
{
    int64_t rows = st_rows(td);
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *x = st_input(td, t->k.in[i], who, true, false, &le);
        if (!x)
            return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
        int64_t n = crl_tensor_numel(x);
        double *v = n == rows * t->keys[i].F ? st_scratch_get(&t->sc, (size_t)n, who, &le) : NULL;
        if (!v) {
            crl_tensor_unref(x);
            return le.code ? crl_error_pass(err, &le, CRL_E_NOMEM)
                           : crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' holds %lld values, expected %lld", who,
                                           t->k.in[i], (long long)n, (long long)(rows * t->keys[i].F));
        }
        st_load(crl_tensor_data(x), crl_tensor_dtype(x), 0, n, v);
        crl_tensor_unref(x);
        welford_add(&w[i], t->keys[i].F, v, rows);
    }
    return CRL_OK;
}

/* TorchRL's init_stats: roll the parent out with random actions, then loc = mean and scale = std
 * (clamped to eps) over batch and time, or scale = 1 / std and loc = -mean * scale without standard_normal. */
static int onorm_init_stats(onorm *t, crl_transform_ctx *ctx, crl_error *err)
{
    const char *who = crl_transform_ctx_name(ctx);
    int bn = 0;
    const int64_t *bs = crl_transform_ctx_batch(ctx, &bn);
    int64_t num = crl_transform_ctx_num(ctx);
    if (num * t->init_stats < 2)
        return crl_error_set(err, CRL_E_CONFIG,
                             "%s: [%s] init_stats = %lld with %lld env gives one sample, and a std needs two; use "
                             "init_stats >= 2",
                             t->init_origin, who, (long long)t->init_stats, (long long)num);
    welford *w = calloc(t->k.n, sizeof *w);
    if (!w)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    int rc = CRL_OK;
    for (size_t i = 0; i < t->k.n && rc == CRL_OK; i++) {
        int64_t F = t->keys[i].F;
        w[i].mean = calloc((size_t)(F ? F : 1), sizeof(double));
        w[i].m2 = calloc((size_t)(F ? F : 1), sizeof(double));
        if (!w[i].mean || !w[i].m2)
            rc = crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    }
    crl_error le;
    crl_error_clear(&le);
    crl_td *td = rc == CRL_OK ? crl_td_new(bn, bs, &le) : NULL;
    bool *mask = rc == CRL_OK ? calloc((size_t)num, sizeof *mask) : NULL;
    if (rc == CRL_OK && (!td || !mask))
        rc = !td ? crl_error_pass(err, &le, CRL_E_NOMEM) : crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    if (rc == CRL_OK)
        rc = crl_transform_ctx_parent_reset(ctx, td, NULL, err);
    for (int64_t it = 0; rc == CRL_OK && it < t->init_stats; it++) {
        rc = collect(t, w, td, who, err);
        if (rc || it == t->init_stats - 1)
            break;
        rc = crl_transform_ctx_parent_rand_action(ctx, td, err);
        if (rc == CRL_OK)
            rc = crl_transform_ctx_parent_step(ctx, td, err);
        if (rc)
            break;
        crl_td *next = crl_td_get_td(td, "next");
        crl_td *root = next ? crl_td_clone(next, &le) : NULL;
        if (!root) {
            rc = next ? crl_error_pass(err, &le, CRL_E_NOMEM)
                      : crl_error_set(err, CRL_E_RUNTIME, "%s: the parent's step wrote no 'next'", who);
            break;
        }
        crl_td_unref(td);
        td = root;
        crl_tensor *done = crl_td_get(td, "done");
        bool any = false;
        for (int64_t e = 0; done && e < num && crl_tensor_numel(done) == num; e++)
            any |= (mask[e] = crl_tensor_flat_get(done, e) != 0);
        if (any)
            rc = crl_transform_ctx_parent_reset(ctx, td, mask, err);
    }
    if (rc == CRL_OK) {
        for (size_t i = 0; i < t->k.n; i++) {
            on_key *kk = &t->keys[i];
            for (int64_t j = 0; j < kk->F; j++) {
                double mean = w[i].mean[j];
                double sd = sqrt(w[i].m2[j] / (double)(w[i].n - 1));
                if (!(sd > t->eps))
                    sd = t->eps;
                if (t->standard_normal) {
                    kk->loc[j] = mean;
                    kk->scale[j] = sd;
                } else {
                    kk->scale[j] = 1.0 / sd;
                    kk->loc[j] = -mean * kk->scale[j];
                }
            }
        }
        t->stats_done = true;
    } else {
        crl_error_prefix(err, "%s: init_stats = %lld: ", who, (long long)t->init_stats);
    }
    for (size_t i = 0; i < t->k.n; i++) {
        free(w[i].mean);
        free(w[i].m2);
    }
    free(w);
    free(mask);
    crl_td_unref(td);
    return rc;
}

static int onorm_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    onorm *t = p;
    int rc;
    if (t->init_stats == 0 || t->stats_done)
        return CRL_OK;
    /* The rollout needs each key's size: take it from the parent's specs. */
    const crl_transform_specs *ps = crl_transform_ctx_parent_specs(ctx);
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error le;
        crl_error_clear(&le);
        crl_spec *leaf = st_spec_leaf((crl_transform_specs *)ps, t->k.in[i], crl_transform_ctx_name(ctx), &le);
        if (!leaf)
            return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
        int nd = crl_spec_ndim(leaf);
        int64_t F = st_numel_from(nd, crl_spec_shape(leaf), ps->batch_ndim);
        if ((rc = resolve(t, i, F, nd > ps->batch_ndim ? crl_spec_shape(leaf)[nd - 1] : 1, err)))
            return rc;
    }
    return onorm_init_stats(t, ctx, err);
}

static int onorm_call(void *p, crl_td *td, crl_error *err)
{
    onorm *t = p;
    if (t->init_stats > 0 && !t->stats_done)
        return crl_error_set(err, CRL_E_INVALID,
                             "ObservationNorm: init_stats = %lld needs an env to roll out; use it in an env's "
                             "transforms, or give loc and scale",
                             (long long)t->init_stats);
    int64_t rows = st_rows(td);
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *x = st_input(td, t->k.in[i], "ObservationNorm", true, false, &le);
        if (!x)
            return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
        int64_t n = crl_tensor_numel(x), F = rows ? n / rows : 0;
        int nd = crl_tensor_ndim(x);
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_tensor_shape(x), (size_t)nd * sizeof(int64_t));
        crl_dtype dt = crl_tensor_dtype(x);
        int bn = crl_td_batch_ndim(td);
        double *v = NULL;
        int rc = resolve(t, i, F, nd > bn ? shape[nd - 1] : 1, err);
        if (!rc && !(v = st_scratch_get(&t->sc, (size_t)n, "ObservationNorm", err)))
            rc = CRL_E_NOMEM;   /* st_scratch_get's only failure */
        if (rc) {
            crl_tensor_unref(x);
            return rc;
        }
        st_load(crl_tensor_data(x), dt, 0, n, v);
        crl_tensor_unref(x);
        const on_key *kk = &t->keys[i];
        for (int64_t q = 0; q < n; q++)
            v[q] = norm_one(t, kk, q % (F ? F : 1), v[q]);
        crl_tensor *out = crl_transform_output(td, t->k.out[i], dt, nd, shape, &le);
        if (!out)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        st_store(crl_tensor_data(out), dt, 0, n, v);
    }
    return CRL_OK;
}

/* The statistics in use: "loc<i>" and "scale<i>" (float64, one per element) of each key i that has them. */
static int onorm_state(void *p, crl_td *out, crl_error *err)
{
    onorm *t = p;
    int rc = CRL_OK;
    for (size_t i = 0; i < t->k.n && !rc; i++) {
        const on_key *kk = &t->keys[i];
        char kl[40], ks[40];
        snprintf(kl, sizeof kl, "loc%zu", i);
        snprintf(ks, sizeof ks, "scale%zu", i);
        if (kk->loc && !(rc = st_state_put(out, kl, kk->loc, kk->F, err)))
            rc = st_state_put(out, ks, kk->scale, kk->F, err);
    }
    return rc;
}

/* Take loc and scale of a state (as measured by another instance's init_stats); nothing is learned later. */
static int onorm_load_state(void *p, const crl_td *state, bool freeze, crl_error *err)
{
    onorm *t = p;
    (void)freeze;
    const crl_tensor **x = calloc(2 * t->k.n + 1, sizeof *x);   /* loc, scale of key i at 2i, 2i + 1 */
    if (!x)
        return crl_error_set(err, CRL_E_NOMEM, "ObservationNorm: out of memory");
    int rc = CRL_OK;
    for (size_t i = 0; i < t->k.n && !rc; i++) {
        char kl[40], ks[40];
        snprintf(kl, sizeof kl, "loc%zu", i);
        snprintf(ks, sizeof ks, "scale%zu", i);
        if (!crl_td_has(state, kl) && !crl_td_has(state, ks))
            continue;
        int64_t F = t->keys[i].loc ? t->keys[i].F : -1;
        if ((rc = st_state_vector(state, kl, F, "ObservationNorm", &x[2 * i], err)) ||
            (rc = st_state_vector(state, ks, crl_tensor_numel(x[2 * i]), "ObservationNorm", &x[2 * i + 1], err)))
            break;
        const double *sc = crl_tensor_data(x[2 * i + 1]);
        for (int64_t j = 0; t->standard_normal && j < crl_tensor_numel(x[2 * i + 1]) && !rc; j++)
            if (sc[j] == 0.0)
                rc = crl_error_set(err, CRL_E_INVALID, "ObservationNorm: state entry '%s' has a zero scale, which "
                                   "standard_normal divides by", ks);
    }
    for (size_t i = 0; i < t->k.n && !rc; i++) {
        if (!x[2 * i])
            continue;
        on_key *kk = &t->keys[i];
        int64_t F = crl_tensor_numel(x[2 * i]);
        double *l = realloc(kk->loc, (size_t)(F ? F : 1) * sizeof *l);
        if (l)
            kk->loc = l;
        double *sv = l ? realloc(kk->scale, (size_t)(F ? F : 1) * sizeof *sv) : NULL;
        if (sv)
            kk->scale = sv;
        if (!l || !sv) {
            rc = crl_error_set(err, CRL_E_NOMEM, "ObservationNorm: out of memory");
            break;
        }
        memcpy(kk->loc, crl_tensor_data(x[2 * i]), (size_t)F * sizeof(double));
        memcpy(kk->scale, crl_tensor_data(x[2 * i + 1]), (size_t)F * sizeof(double));
        kk->F = F;
    }
    free(x);
    if (!rc)
        t->stats_done = true;
    return rc;
}

const crl_option st_obsnorm_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "observation", 0, 0, NULL, "keys to normalise (floating-point)" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write them (empty: in place)" },
    { "loc", CRL_OPT_DOUBLES, 0, "0", 0, 0, NULL, "one value, one per last-dim entry, or one per element" },
    { "scale", CRL_OPT_DOUBLES, 0, "1", 0, 0, NULL, "as loc; non-zero with standard_normal" },
    { "standard_normal", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "compute (obs - loc) / scale instead of obs * scale + loc" },
    { "eps", CRL_OPT_DOUBLE, 0, "1e-6", 0, 0, NULL, "smallest std init_stats divides by" },
    { "init_stats", CRL_OPT_INT, 0, "0", 0, 0, NULL,
      "steps of a random rollout of the parent, at bind, that loc and scale are computed from (0: off)" },
    CRL_OPTIONS_END
};

/* TorchRL's: loc and scale when they are set scalars, else the default Transform repr. */
static int onorm_repr(void *p, char *buf, size_t size)
{
    const onorm *t = p;
    char *keys = tf_pylist(t->k.n, t->k.in);
    if (!keys)
        return -1;
    int n = t->init_stats == 0 && t->nloc == 1 && t->nscale == 1
                ? snprintf(buf, size, "ObservationNorm(loc=%.4f, scale=%.4f, keys=%s)", t->loc_opt[0], t->scale_opt[0],
                           keys)
                : snprintf(buf, size, "ObservationNorm(keys=%s)", keys);
    free(keys);
    return n;
}

const crl_transform_ops st_obsnorm_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = onorm_create,
    .transform_specs = onorm_specs,
    .bind = onorm_bind,
    .call = onorm_call,
    .destroy = onorm_destroy,
    .repr = onorm_repr,
    .state = onorm_state,
    .load_state = onorm_load_state,
};
