/* Per-env frame buffers: CatFrames (stack the last N frames along a dim) and TimeMaxPool (max over the last T). */
#include "config.h"
#include "state_common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CatFrames ----
 *
 * Each env keeps its output directly: for every index `o` of the dims before
 * `dim`, N chunks (oldest first) of F[dim] * prod(F[dim+1:]) elements.  A new
 * frame shifts each group of chunks left by one and lands in the last one. */

typedef struct cf_key {
    crl_dtype dt;
    int fnd;
    int64_t fshape[CRL_MAX_DIMS];
    int d;                 /* dim inside the feature dims */
    int64_t outer;         /* prod(F[:d]) */
    size_t chunk;          /* bytes of one frame's slab per outer index */
    size_t frame;          /* bytes of one frame */
    uint8_t *buf;          /* num * N * frame */
    uint8_t *pad;          /* one chunk of padding_value */
} cf_key;

typedef struct catf {
    tf_keys k;
    int64_t N, dim;
    bool constant;
    double pad_value;
    cf_key *keys;
    bool specs_known;
    int64_t num;
    bool *primed;
} catf;

static void catf_destroy(void *p)
{
    catf *t = p;
    if (!t)
        return;
    for (size_t i = 0; t->keys && i < t->k.n; i++) {
        free(t->keys[i].buf);
        free(t->keys[i].pad);
    }
    free(t->keys);
    free(t->primed);
    tf_keys_free(&t->k);
    free(t);
}

static int catf_create(const crl_opts *o, void **out, crl_error *err)
{
    catf *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "CatFrames: out of memory");
    const char *padding = NULL;
    int rc;
    if ((rc = st_require(o, "N", "CatFrames", err)) ||
        (rc = tf_keys_read(o, "in_keys", "out_keys", false, "CatFrames", &t->k, err)) ||
        (rc = crl_opts_int(o, "N", &t->N, err)) || (rc = crl_opts_int(o, "dim", &t->dim, err)) ||
        (rc = crl_opts_string(o, "padding", &padding, err)) ||
        (rc = crl_opts_double(o, "padding_value", &t->pad_value, err))) {
        catf_destroy(t);
        return rc;
    }
    if (t->N < 1) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)t->N);
        catf_destroy(t);
        return st_bad_option(err, o, "N", v, "CatFrames stacks N >= 1 frames");
    }
    t->constant = strcmp(padding, "constant") == 0;
    t->keys = calloc(t->k.n, sizeof *t->keys);
    if (!t->keys) {
        catf_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "CatFrames: out of memory");
    }
    *out = t;
    return CRL_OK;
}

/* Copy a [R, outer, chunkE] f64 tensor into [R, outer, N, chunkE] repeating each chunk N times. */
static crl_tensor *repeat_bounds(const crl_tensor *src, int nd, const int64_t *shape, int64_t rows, int64_t outer,
                                 int64_t chunkE, int64_t N, double widen, bool lower, crl_error *err)
{
    crl_tensor *dst = crl_tensor_new(CRL_F64, nd, shape, err);
    if (!dst)
        return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < outer; o++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < chunkE; c++) {
                    double v = crl_tensor_flat_get(src, (r * outer + o) * chunkE + c);
                    if (!isnan(widen))
                        v = lower ? fmin(v, widen) : fmax(v, widen);
                    crl_tensor_flat_set(dst, ((r * outer + o) * N + n) * chunkE + c, v);
                }
    return dst;
}

static crl_spec *catf_spec(const catf *t, const cf_key *ck, const crl_spec *leaf, const crl_transform_specs *s,
                           crl_error *err)
{
    int bn = s->batch_ndim, nd = bn + ck->fnd;
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, crl_spec_shape(leaf), (size_t)nd * sizeof(int64_t));
    shape[bn + ck->d] *= t->N;
    bool last = ck->d == ck->fnd - 1;
    crl_dtype dt = ck->dt;
    switch (crl_spec_get_kind(leaf)) {
    case CRL_SPEC_BOUNDED: {
        int64_t rows = st_numel_from(bn, crl_spec_shape(leaf), 0);
        int64_t chunkE = (int64_t)(ck->chunk / crl_dtype_size(dt));
        double widen = t->constant && t->N > 1 ? t->pad_value : NAN;
        crl_tensor *lo = repeat_bounds(crl_spec_low(leaf), nd, shape, rows, ck->outer, chunkE, t->N, widen, true, err);
        crl_tensor *hi = lo ? repeat_bounds(crl_spec_high(leaf), nd, shape, rows, ck->outer, chunkE, t->N, widen,
                                            false, err)
                            : NULL;
        crl_spec *r = hi ? crl_spec_bounded_t(dt, lo, hi, err) : NULL;
        crl_tensor_unref(lo);
        crl_tensor_unref(hi);
        return r;
    }
    case CRL_SPEC_CATEGORICAL:
        return crl_spec_categorical(crl_spec_n(leaf), dt, nd, shape, err);
    case CRL_SPEC_BINARY:
        return crl_spec_binary(shape[nd - 1], dt, nd, shape, err);
    case CRL_SPEC_ONEHOT:
    case CRL_SPEC_MULTI_ONEHOT:
    case CRL_SPEC_MULTI_CATEGORICAL: {
        size_t k = crl_spec_get_kind(leaf) == CRL_SPEC_ONEHOT ? 1 : crl_spec_nvec_len(leaf);
        int64_t one = crl_spec_n(leaf);
        const int64_t *nv = crl_spec_get_kind(leaf) == CRL_SPEC_ONEHOT ? &one : crl_spec_nvec(leaf);
        size_t reps = last ? (size_t)t->N : 1;
        int64_t *nvec = malloc(k * reps * sizeof *nvec);
        if (!nvec) {
            crl_error_set(err, CRL_E_NOMEM, "CatFrames: out of memory");
            return NULL;
        }
        for (size_t r = 0; r < reps; r++)
            memcpy(nvec + r * k, nv, k * sizeof *nvec);
        crl_spec *r;
        if (crl_spec_get_kind(leaf) == CRL_SPEC_MULTI_CATEGORICAL)
            r = crl_spec_multi_categorical(nvec, dt, nd, shape, err);
        else if (k * reps == 1)
            r = crl_spec_onehot(one, dt, nd, shape, err);
        else
            r = crl_spec_multi_onehot(nvec, k * reps, dt, nd, shape, err);
        free(nvec);
        return r;
    }
    default:
        return crl_spec_unbounded(dt, nd, shape, err);
    }
}

static int catf_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    catf *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        const char *key = t->k.in[i];
        crl_error le;
        crl_error_clear(&le);
        crl_spec *leaf = st_spec_leaf(s, key, "CatFrames", &le);
        if (!leaf)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        cf_key *ck = &t->keys[i];
        ck->dt = crl_spec_dtype(leaf);
        ck->fnd = crl_spec_ndim(leaf) - s->batch_ndim;
        memcpy(ck->fshape, crl_spec_shape(leaf) + s->batch_ndim, (size_t)ck->fnd * sizeof(int64_t));
        int64_t d = t->dim < 0 ? ck->fnd + t->dim : t->dim;
        if (d < 0 || d >= ck->fnd) {
            char *r = crl_shape_repr(ck->fnd, ck->fshape);
            crl_error_set(err, CRL_E_SHAPE,
                          "CatFrames: dim = %lld does not fit key '%s' of shape %s (per env); use a dim between "
                          "%d and -1 (negative dims count from the end, as TorchRL)",
                          (long long)t->dim, key, r ? r : "?", -ck->fnd);
            crl_free(r);
            return CRL_E_SHAPE;
        }
        ck->d = (int)d;
        ck->outer = st_numel_from(ck->d, ck->fshape, 0);
        size_t es = crl_dtype_size(ck->dt);
        ck->chunk = (size_t)st_numel_from(ck->fnd, ck->fshape, ck->d) * es;
        ck->frame = (size_t)ck->outer * ck->chunk;
        if ((rc = st_spec_set(s, t->k.out[i], catf_spec(t, ck, leaf, s, &le), &le, err)))
            return rc;
    }
    t->specs_known = true;
    return CRL_OK;
}

static int catf_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    catf *t = p;
    const char *who = crl_transform_ctx_name(ctx);
    if (!t->specs_known)
        return crl_error_set(err, CRL_E_INVALID, "%s: bound before its specs were transformed", who);
    t->num = crl_transform_ctx_num(ctx);
    free(t->primed);
    t->primed = calloc((size_t)t->num, sizeof *t->primed);
    if (!t->primed)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    for (size_t i = 0; i < t->k.n; i++) {
        cf_key *ck = &t->keys[i];
        free(ck->buf);
        free(ck->pad);
        ck->pad = NULL;
        ck->buf = calloc((size_t)t->num * (size_t)t->N, ck->frame ? ck->frame : 1);
        ck->pad = malloc(ck->chunk ? ck->chunk : 1);
        if (!ck->buf || !ck->pad)
            return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory for %lld x %lld frames of '%s'", who,
                                 (long long)t->num, (long long)t->N, t->k.in[i]);
        size_t es = crl_dtype_size(ck->dt);
        double v = t->pad_value;
        for (size_t c = 0; c < ck->chunk / es; c++)
            st_store(ck->pad, ck->dt, (int64_t)c, 1, &v);
    }
    return CRL_OK;
}

/* Restart env e's stack from frame src: N copies (same) or padding then src (constant). */
static void cf_fill(const catf *t, const cf_key *ck, int64_t e, const uint8_t *src)
{
    uint8_t *base = ck->buf + (size_t)e * (size_t)t->N * ck->frame;
    for (int64_t o = 0; o < ck->outer; o++) {
        uint8_t *g = base + (size_t)o * (size_t)t->N * ck->chunk;
        for (int64_t n = 0; n < t->N; n++)
            memcpy(g + (size_t)n * ck->chunk,
                   (t->constant && n < t->N - 1) ? ck->pad : src + (size_t)o * ck->chunk, ck->chunk);
    }
}

static void cf_push(const catf *t, const cf_key *ck, int64_t e, const uint8_t *src)
{
    uint8_t *base = ck->buf + (size_t)e * (size_t)t->N * ck->frame;
    for (int64_t o = 0; o < ck->outer; o++) {
        uint8_t *g = base + (size_t)o * (size_t)t->N * ck->chunk;
        memmove(g, g + ck->chunk, (size_t)(t->N - 1) * ck->chunk);
        memcpy(g + (size_t)(t->N - 1) * ck->chunk, src + (size_t)o * ck->chunk, ck->chunk);
    }
}

/* On reset, envs in which (NULL: all) restart from their new frame and the others keep their stacks; on a
 * step, envs in which (those the parent auto-reset) restart and the others push.  Envs never started
 * restart either way.  Then every env's stack is written. */
static int catf_run(catf *t, crl_transform_ctx *ctx, crl_td *td, const bool *which, bool is_reset, crl_error *err)
{
    const char *who = crl_transform_ctx_name(ctx);
    if (st_rows(td) != t->num)
        return crl_error_set(err, CRL_E_SHAPE, "%s: the TensorDict holds %lld envs but the transform was bound to %lld",
                             who, (long long)st_rows(td), (long long)t->num);
    for (size_t i = 0; i < t->k.n; i++) {
        cf_key *ck = &t->keys[i];
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *in = st_input(td, t->k.in[i], who, false, false, &le);
        if (!in)
            return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
        if (crl_tensor_dtype(in) != ck->dt || crl_tensor_nbytes(in) != (size_t)t->num * ck->frame) {
            char *r = crl_shape_repr(crl_tensor_ndim(in), crl_tensor_shape(in));
            crl_error_set(err, crl_tensor_dtype(in) != ck->dt ? CRL_E_DTYPE : CRL_E_SHAPE,
                          "%s: key '%s' is %s %s but its spec says %s with %lld envs", who, t->k.in[i],
                          crl_dtype_name(crl_tensor_dtype(in)), r ? r : "?", crl_dtype_name(ck->dt),
                          (long long)t->num);
            crl_free(r);
            int code = crl_tensor_dtype(in) != ck->dt ? CRL_E_DTYPE : CRL_E_SHAPE;
            crl_tensor_unref(in);
            return code;
        }
        const uint8_t *src = crl_tensor_data(in);
        for (int64_t e = 0; e < t->num; e++) {
            const uint8_t *f = src + (size_t)e * ck->frame;
            bool restart = !t->primed[e] || (which ? which[e] : is_reset);
            if (restart)
                cf_fill(t, ck, e, f);
            else if (!is_reset)
                cf_push(t, ck, e, f);
        }
        crl_tensor_unref(in);
        int bn = crl_td_batch_ndim(td);
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_td_batch_shape(td), (size_t)bn * sizeof(int64_t));
        memcpy(shape + bn, ck->fshape, (size_t)ck->fnd * sizeof(int64_t));
        shape[bn + ck->d] *= t->N;
        crl_tensor *out = crl_transform_output(td, t->k.out[i], ck->dt, bn + ck->fnd, shape, &le);
        if (!out)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        memcpy(crl_tensor_data(out), ck->buf, (size_t)t->num * (size_t)t->N * ck->frame);
    }
    for (int64_t e = 0; e < t->num; e++)
        t->primed[e] = true;
    return CRL_OK;
}

static int catf_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    return catf_run(p, ctx, td, mask, true, err);
}

static int catf_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    return catf_run(p, ctx, next, crl_transform_ctx_step_resets(ctx), false, err);
}

const crl_option st_catframes_options[] = {
    { "N", CRL_OPT_INT, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 1e9, NULL, "number of frames to stack" },
    { "dim", CRL_OPT_INT, 0, "-3", 0, 0, NULL,
      "dim to concatenate along: negative from the end (TorchRL), or >= 0 counting the per-env dims" },
    { "padding", CRL_OPT_ENUM, 0, "same", 0, 0, "same|constant",
      "after a reset: repeat the first frame (same) or fill older slots with padding_value (constant)" },
    { "padding_value", CRL_OPT_DOUBLE, 0, "0", 0, 0, NULL, "value of the padding frames with padding = constant" },
    { "in_keys", CRL_OPT_LIST, 0, "pixels", 0, 0, NULL, "keys to stack" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write the stacks (empty: in place)" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_catframes_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = catf_create,
    .transform_specs = catf_specs,
    .bind = catf_bind,
    .reset = catf_reset,
    .step = catf_step,
    .destroy = catf_destroy,
};

/* ---- TimeMaxPool: elementwise max over each env's last T observations ----
 *
 * A ring of T frames per env, kept as doubles.  A reset fills the ring with
 * the reset observation, so the max runs over observations of the current
 * episode only (TorchRL pads with zeros instead, which biases the max of
 * negative observations upward). */

typedef struct tmp_key {
    crl_dtype dt;
    int64_t F;
    double *ring;          /* num * T * F */
} tmp_key;

typedef struct tmaxp {
    tf_keys k;
    int64_t T;
    tmp_key *keys;
    bool specs_known;
    int64_t num;
    int64_t *pos;
    bool *primed;
    st_scratch in, out;
} tmaxp;

static void tmaxp_destroy(void *p)
{
    tmaxp *t = p;
    if (!t)
        return;
    for (size_t i = 0; t->keys && i < t->k.n; i++)
        free(t->keys[i].ring);
    free(t->keys);
    free(t->pos);
    free(t->primed);
    st_scratch_free(&t->in);
    st_scratch_free(&t->out);
    tf_keys_free(&t->k);
    free(t);
}

static int tmaxp_create(const crl_opts *o, void **out, crl_error *err)
{
    tmaxp *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "TimeMaxPool: out of memory");
    int rc;
    if ((rc = tf_keys_read(o, "in_keys", "out_keys", false, "TimeMaxPool", &t->k, err)) ||
        (rc = crl_opts_int(o, "T", &t->T, err))) {
        tmaxp_destroy(t);
        return rc;
    }
    if (t->T < 1) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)t->T);
        tmaxp_destroy(t);
        return st_bad_option(err, o, "T", v, "TimeMaxPool pools over T >= 1 observations");
    }
    t->keys = calloc(t->k.n, sizeof *t->keys);
    if (!t->keys) {
        tmaxp_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "TimeMaxPool: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int tmaxp_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    tmaxp *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], "TimeMaxPool", &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_numeric(leaf, t->k.in[i], "TimeMaxPool", err)))
            return rc;
        t->keys[i].dt = crl_spec_dtype(leaf);
        t->keys[i].F = st_numel_from(crl_spec_ndim(leaf), crl_spec_shape(leaf), s->batch_ndim);
        /* A max of values inside the domain stays inside it: the spec carries over. */
        if (strcmp(t->k.in[i], t->k.out[i]) != 0 && (rc = st_spec_set(s, t->k.out[i], crl_spec_ref(leaf), &e, err)))
            return rc;
    }
    t->specs_known = true;
    return CRL_OK;
}

static int tmaxp_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    tmaxp *t = p;
    const char *who = crl_transform_ctx_name(ctx);
    if (!t->specs_known)
        return crl_error_set(err, CRL_E_INVALID, "%s: bound before its specs were transformed", who);
    t->num = crl_transform_ctx_num(ctx);
    free(t->pos);
    free(t->primed);
    t->pos = calloc((size_t)t->num, sizeof *t->pos);
    t->primed = calloc((size_t)t->num, sizeof *t->primed);
    if (!t->pos || !t->primed)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    for (size_t i = 0; i < t->k.n; i++) {
        free(t->keys[i].ring);
        t->keys[i].ring = calloc((size_t)(t->num * t->T * t->keys[i].F) + 1, sizeof(double));
        if (!t->keys[i].ring)
            return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    }
    return CRL_OK;
}

static int tmaxp_run(tmaxp *t, crl_transform_ctx *ctx, crl_td *td, const bool *which, bool is_reset, crl_error *err)
{
    const char *who = crl_transform_ctx_name(ctx);
    if (st_rows(td) != t->num)
        return crl_error_set(err, CRL_E_SHAPE, "%s: the TensorDict holds %lld envs but the transform was bound to %lld",
                             who, (long long)st_rows(td), (long long)t->num);
    for (size_t i = 0; i < t->k.n; i++) {
        tmp_key *kk = &t->keys[i];
        int64_t F = kk->F, n = t->num * F;
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *in = st_input(td, t->k.in[i], who, false, false, &le);
        if (!in)
            return crl_error_pass(err, &le, CRL_E_NOT_FOUND);
        if (crl_tensor_numel(in) != n) {
            crl_tensor_unref(in);
            return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' holds %lld values, the specs say %lld", who,
                                 t->k.in[i], (long long)crl_tensor_numel(in), (long long)n);
        }
        double *x = st_scratch_get(&t->in, (size_t)n, who, err);
        double *y = x ? st_scratch_get(&t->out, (size_t)n, who, err) : NULL;
        if (!y) {
            crl_tensor_unref(in);
            return CRL_E_NOMEM;
        }
        st_load(crl_tensor_data(in), crl_tensor_dtype(in), 0, n, x);
        int nd = crl_tensor_ndim(in);
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_tensor_shape(in), (size_t)nd * sizeof(int64_t));
        crl_tensor_unref(in);
        for (int64_t e = 0; e < t->num; e++) {
            double *ring = kk->ring + e * t->T * F;
            const double *xe = x + e * F;
            bool re = !t->primed[e] || (which ? which[e] : is_reset);
            if (re) {
                for (int64_t s = 0; s < t->T; s++)
                    memcpy(ring + s * F, xe, (size_t)F * sizeof(double));
            } else if (!is_reset) {
                memcpy(ring + t->pos[e] * F, xe, (size_t)F * sizeof(double));
            }
            double *ye = y + e * F;
            memcpy(ye, ring, (size_t)F * sizeof(double));
            for (int64_t s = 1; s < t->T; s++)
                for (int64_t j = 0; j < F; j++)
                    if (ring[s * F + j] > ye[j] || isnan(ring[s * F + j]))
                        ye[j] = ring[s * F + j];
        }
        crl_tensor *out = crl_transform_output(td, t->k.out[i], kk->dt, nd, shape, &le);
        if (!out)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        st_store(crl_tensor_data(out), kk->dt, 0, n, y);
    }
    /* Advance every ring once per step (all keys share the position). */
    for (int64_t e = 0; e < t->num; e++) {
        bool re = !t->primed[e] || (which ? which[e] : is_reset);
        if (re)
            t->pos[e] = 0;
        else if (!is_reset)
            t->pos[e] = (t->pos[e] + 1) % t->T;
        t->primed[e] = true;
    }
    return CRL_OK;
}

static int tmaxp_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    return tmaxp_run(p, ctx, td, mask, true, err);
}

static int tmaxp_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)td;
    return tmaxp_run(p, ctx, next, crl_transform_ctx_step_resets(ctx), false, err);
}

const crl_option st_timemaxpool_options[] = {
    { "T", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1e9, NULL, "number of recent observations to pool over" },
    { "in_keys", CRL_OPT_LIST, 0, "observation", 0, 0, NULL, "keys to pool" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write the maxima (empty: in place)" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_timemaxpool_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = tmaxp_create,
    .transform_specs = tmaxp_specs,
    .bind = tmaxp_bind,
    .reset = tmaxp_reset,
    .step = tmaxp_step,
    .destroy = tmaxp_destroy,
};
