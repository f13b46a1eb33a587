/* Spec operations: is_in, check (with messages naming key and element), project, rand, zero. */
#include "spec-private.h"

#include <math.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

static void append_flat_index(GString *s, int ndim, const int64_t *shape, int64_t pos)
{
    int64_t idx[CRL_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? pos % shape[d] : 0;
        pos = shape[d] ? pos / shape[d] : 0;
    }
    crl__spec_append_dims(s, ndim, idx);
}

/* "key 'a.b': " or "" */
static char *key_prefix(const char *key)
{
    return key ? g_strdup_printf("key '%s': ", key) : g_strdup("");
}

/* The dtype, shape and device agree; err (may be NULL) says what differs. */
static int match_meta(const crl_spec *s, const crl_tensor *t, const char *prefix, crl_error *err)
{
    if (s->kind == CRL_SPEC_COMPOSITE)
        return crl_error_set(err, CRL_E_INVALID,
                             "%sthe spec is a Composite; check a TensorDict with "
                             "crl_spec_check_td (or use crl_spec_rand_td/zero_td)",
                             prefix);
    if (!t)
        return crl_error_set(err, CRL_E_INVALID, "%sno tensor given (NULL)", prefix);
    crl_dtype dt = crl_tensor_dtype(t);
    if (dt != s->dtype)
        return crl_error_set(err, CRL_E_DTYPE, "%sexpected dtype %s but got %s", prefix,
                             crl__spec_dtype_name(s->dtype),
                             crl__spec_dtype_name(dt) ? crl__spec_dtype_name(dt) : "(invalid)");
    int nd = crl_tensor_ndim(t);
    const int64_t *sh = crl_tensor_shape(t);
    if (nd != s->ndim || memcmp(sh, s->shape, (size_t)nd * sizeof(int64_t)) != 0) {
        if (!err)
            return CRL_E_SHAPE;
        GString *a = g_string_new(""), *b = g_string_new("");
        crl__spec_append_dims(a, s->ndim, s->shape);
        crl__spec_append_dims(b, nd, sh);
        crl_error_set(err, CRL_E_SHAPE, "%sexpected shape %s but got %s", prefix, a->str, b->str);
        g_string_free(a, TRUE);
        g_string_free(b, TRUE);
        return CRL_E_SHAPE;
    }
    crl_device d = crl_tensor_device(t);
    if (d.type != s->device.type || d.index != s->device.index) {
        if (!err)
            return CRL_E_INVALID;
        GString *a = g_string_new(""), *b = g_string_new("");
        crl__spec_append_device(a, s->device);
        crl__spec_append_device(b, d);
        crl_error_set(err, CRL_E_INVALID, "%sexpected device %s but got %s", prefix, a->str,
                      b->str);
        g_string_free(a, TRUE);
        g_string_free(b, TRUE);
        return CRL_E_INVALID;
    }
    return CRL_OK;
}

/* Report element `pos` of t as out of the domain: "<prefix>value V at index
 * [i, j] <why>".  Formats only when err is non-NULL. */
static int bad_value(crl_error *err, const char *prefix, const crl_tensor *t, int64_t pos,
                     double v, const char *why)
{
    if (!err)
        return CRL_E_RANGE;
    GString *idx = g_string_new("");
    append_flat_index(idx, crl_tensor_ndim(t), crl_tensor_shape(t), pos);
    crl_error_set(err, CRL_E_RANGE, "%svalue %g at index %s %s", prefix, v, idx->str, why);
    g_string_free(idx, TRUE);
    return CRL_E_RANGE;
}

/* A row (all dims but the last) whose one-hot group is wrong. */
static int bad_group(crl_error *err, const char *prefix, const crl_tensor *t, int64_t row,
                     int64_t first_col, int64_t ncols, int ones, bool multi, size_t group)
{
    if (!err)
        return CRL_E_RANGE;
    GString *idx = g_string_new("");
    append_flat_index(idx, crl_tensor_ndim(t) - 1, crl_tensor_shape(t), row);
    if (multi)
        crl_error_set(err, CRL_E_RANGE,
                      "%sgroup %zu (columns %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                      ") of the row at index %s has %d ones; multi-one-hot needs exactly one "
                      "per group",
                      prefix, group, (gint64)first_col, (gint64)(first_col + ncols - 1), idx->str,
                      ones);
    else
        crl_error_set(err, CRL_E_RANGE,
                      "%sthe row at index %s has %d ones; one-hot needs exactly one (n = %" G_GINT64_FORMAT
                      ")",
                      prefix, idx->str, ones, (gint64)ncols);
    g_string_free(idx, TRUE);
    return CRL_E_RANGE;
}

/* Check one-hot groups along the last dim: `groups` of sizes `sizes`. */
static int check_onehot_rows(const crl__elems *e, const crl_tensor *t, int64_t last,
                             const int64_t *sizes, size_t groups, bool multi, const char *prefix,
                             crl_error *err)
{
    int64_t rows = last ? e->numel / last : 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t col = 0;
        for (size_t g = 0; g < groups; g++) {
            int ones = 0;
            for (int64_t c = 0; c < sizes[g]; c++) {
                int64_t pos = r * last + col + c;
                double v = crl__elem_get(e, pos);
                if (v == 1.0)
                    ones++;
                else if (v != 0.0)
                    return bad_value(err, prefix, t, pos, v,
                                     multi ? "is not 0 or 1 (multi-one-hot)"
                                           : "is not 0 or 1 (one-hot)");
            }
            if (ones != 1)
                return bad_group(err, prefix, t, r, col, sizes[g], ones, multi, g);
            col += sizes[g];
        }
    }
    return CRL_OK;
}

/* Masked Categorical / OneHot (crl_spec_update_mask): row r of the mask
 * holds the n flags of value r. */
static inline bool mask_allows(const crl_spec *s, int64_t row, int64_t v)
{
    return !s->mask || ((const uint8_t *)crl_tensor_data(s->mask))[row * s->n + v] != 0;
}

/* The allowed value nearest to v in row (ties go to the lower one). */
static int64_t nearest_allowed(const crl_spec *s, int64_t row, int64_t v)
{
    for (int64_t d = 0; d < s->n; d++) {
        if (v - d >= 0 && mask_allows(s, row, v - d))
            return v - d;
        if (v + d < s->n && mask_allows(s, row, v + d))
            return v + d;
    }
    return v;
}

/* A uniform draw among the allowed values of row. */
static int64_t rand_allowed(const crl_spec *s, crl_rng *rng, int64_t row)
{
    if (!s->mask)
        return (int64_t)crl_rng_below(rng, (uint64_t)s->n);
    int64_t count = 0;
    for (int64_t c = 0; c < s->n; c++)
        count += mask_allows(s, row, c) ? 1 : 0;
    int64_t k = (int64_t)crl_rng_below(rng, (uint64_t)count);
    for (int64_t c = 0; c < s->n; c++)
        if (mask_allows(s, row, c) && k-- == 0)
            return c;
    return 0;
}

/* Masked values of t (a valid Categorical or OneHot value otherwise). */
static int check_mask(const crl_spec *s, const crl__elems *e, const crl_tensor *t, const char *prefix, crl_error *err)
{
    int64_t rows = s->kind == CRL_SPEC_CATEGORICAL ? e->numel : (s->n ? e->numel / s->n : 0);
    for (int64_t r = 0; r < rows; r++) {
        int64_t v = 0, pos = r;
        if (s->kind == CRL_SPEC_CATEGORICAL) {
            v = (int64_t)crl__elem_get(e, r);
        } else {
            for (int64_t c = 0; c < s->n; c++)
                if (crl__elem_get(e, r * s->n + c) == 1.0)
                    v = c;
            pos = r * s->n + v;
        }
        if (!mask_allows(s, r, v)) {
            char why[96];
            g_snprintf(why, sizeof why, "is masked out (value %" G_GINT64_FORMAT " is not allowed by the spec's mask)",
                       (gint64)v);
            return bad_value(err, prefix, t, pos, crl__elem_get(e, pos), why);
        }
    }
    return CRL_OK;
}

/* Values of t (whose dtype and shape already match) are in s's domain. */
static int check_domain(const crl_spec *s, const crl_tensor *t, const char *prefix,
                        crl_error *err)
{
    crl__elems e = crl__elems_of(t);
    char why[160];
    switch (s->kind) {
    case CRL_SPEC_UNBOUNDED:
    case CRL_SPEC_COMPOSITE:
        return CRL_OK;
    case CRL_SPEC_BOUNDED: {
        const double *lo = crl_tensor_data(s->low), *hi = crl_tensor_data(s->high);
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            if (!(v >= lo[i] && v <= hi[i])) {
                g_snprintf(why, sizeof why, "is outside [%g, %g]", lo[i], hi[i]);
                return bad_value(err, prefix, t, i, v, why);
            }
        }
        return CRL_OK;
    }
    case CRL_SPEC_CATEGORICAL:
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            if (!(v >= 0 && v < (double)s->n && v == floor(v))) {
                g_snprintf(why, sizeof why, "is outside [0, %" G_GINT64_FORMAT "] (categorical, n = %" G_GINT64_FORMAT ")",
                           (gint64)(s->n - 1), (gint64)s->n);
                return bad_value(err, prefix, t, i, v, why);
            }
        }
        return s->mask ? check_mask(s, &e, t, prefix, err) : CRL_OK;
    case CRL_SPEC_MULTI_CATEGORICAL: {
        int64_t k = (int64_t)s->nvec_len;
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            int64_t n = s->nvec[i % k];
            if (!(v >= 0 && v < (double)n && v == floor(v))) {
                g_snprintf(why, sizeof why, "is outside [0, %" G_GINT64_FORMAT "] (nvec[%" G_GINT64_FORMAT "] = %" G_GINT64_FORMAT ")",
                           (gint64)(n - 1), (gint64)(i % k), (gint64)n);
                return bad_value(err, prefix, t, i, v, why);
            }
        }
        return CRL_OK;
    }
    case CRL_SPEC_BINARY:
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            if (v != 0.0 && v != 1.0)
                return bad_value(err, prefix, t, i, v, "is not 0 or 1 (binary)");
        }
        return CRL_OK;
    case CRL_SPEC_ONEHOT: {
        int rc = check_onehot_rows(&e, t, s->n, &s->n, 1, false, prefix, err);
        return rc || !s->mask ? rc : check_mask(s, &e, t, prefix, err);
    }
    case CRL_SPEC_MULTI_ONEHOT:
        return check_onehot_rows(&e, t, s->shape[s->ndim - 1], s->nvec, s->nvec_len, true,
                                 prefix, err);
    }
    return CRL_OK;
}

/* ---- is_in, check ------------------------------------------------------- */

bool crl_spec_is_in(const crl_spec *s, const crl_tensor *t)
{
    if (!s || !t)
        return false;
    return match_meta(s, t, "", NULL) == CRL_OK && check_domain(s, t, "", NULL) == CRL_OK;
}

int crl_spec_check(const crl_spec *s, const crl_tensor *t, const char *key, crl_error *err)
{
    if (!s)
        return crl_error_set(err, CRL_E_INVALID, "crl_spec_check: %s%s%sspec is NULL",
                             key ? "key '" : "", key ? key : "", key ? "': " : "");
    char *prefix = key_prefix(key);
    int rc = match_meta(s, t, prefix, err);
    if (rc == CRL_OK)
        rc = check_domain(s, t, prefix, err);
    g_free(prefix);
    return rc;
}

static int missing_key(const crl_td *level, const char *parent, const char *full, crl_error *err)
{
    GString *present = g_string_new("");
    size_t n = crl_td_len(level);
    for (size_t i = 0; i < n; i++)
        g_string_append_printf(present, "%s%s%s%s", i ? ", " : "", parent ? parent : "",
                               parent ? "." : "", crl_td_key_at(level, i));
    crl_error_set(err, CRL_E_NOT_FOUND, "key '%s' is missing (present: %s)", full,
                  n ? present->str : "none");
    g_string_free(present, TRUE);
    return CRL_E_NOT_FOUND;
}

static int check_level(const crl_spec *comp, const crl_td *level, const char *parent,
                       crl_error *err)
{
    for (guint i = 0; i < comp->children->len; i++) {
        const crl__spec_entry *e = &g_array_index(comp->children, crl__spec_entry, i);
        char *full = parent ? g_strdup_printf("%s.%s", parent, e->key) : g_strdup(e->key);
        int rc = CRL_OK;
        crl_tensor *t = crl_td_get(level, e->key);
        crl_td *sub = t ? NULL : crl_td_get_td(level, e->key);
        if (!t && !sub)
            rc = missing_key(level, parent, full, err);
        else if (e->spec->kind == CRL_SPEC_COMPOSITE && !sub)
            rc = crl_error_set(err, CRL_E_INVALID,
                               "key '%s': expected a nested TensorDict (the spec is a "
                               "Composite) but got a tensor",
                               full);
        else if (e->spec->kind != CRL_SPEC_COMPOSITE && !t)
            rc = crl_error_set(err, CRL_E_INVALID,
                               "key '%s': expected a tensor but got a nested TensorDict", full);
        else if (sub)
            rc = check_level(e->spec, sub, full, err);
        else
            rc = crl_spec_check(e->spec, t, full, err);
        g_free(full);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

int crl_spec_check_td(const crl_spec *comp, const crl_td *td, crl_error *err)
{
    if (!comp || comp->kind != CRL_SPEC_COMPOSITE)
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_spec_check_td: the spec is %s, not a Composite; check a "
                             "tensor with crl_spec_check",
                             comp ? "a leaf spec" : "NULL");
    if (!td)
        return crl_error_set(err, CRL_E_INVALID, "crl_spec_check_td: the TensorDict is NULL");
    return check_level(comp, td, NULL, err);
}

/* ---- project ------------------------------------------------------------ */

/* Set each one-hot group of each row to the first maximum (NaN ignored). */
static void project_onehot_rows(const crl__elems *e, int64_t last, const int64_t *sizes,
                                size_t groups)
{
    int64_t rows = last ? e->numel / last : 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t col = r * last;
        for (size_t g = 0; g < groups; g++) {
            int64_t best = 0;
            double bestv = NAN;
            for (int64_t c = 0; c < sizes[g]; c++) {
                double v = crl__elem_get(e, col + c);
                if (!isnan(v) && (isnan(bestv) || v > bestv)) {
                    bestv = v;
                    best = c;
                }
            }
            for (int64_t c = 0; c < sizes[g]; c++)
                crl__elem_set(e, col + c, c == best ? 1.0 : 0.0);
            col += sizes[g];
        }
    }
}

/* Round to the nearest integer and clamp to [0, n - 1]; NaN becomes 0. */
static double project_category(double v, int64_t n)
{
    if (isnan(v))
        return 0;
    v = round(v);
    if (v < 0)
        return 0;
    if (v > (double)(n - 1))
        return (double)(n - 1);
    return v;
}

int crl_spec_project(const crl_spec *s, crl_tensor *t, crl_error *err)
{
    if (!s)
        return crl_error_set(err, CRL_E_INVALID, "crl_spec_project: spec is NULL");
    int rc = match_meta(s, t, "crl_spec_project: ", err);
    if (rc)
        return rc;
    crl__elems e = crl__elems_of(t);
    switch (s->kind) {
    case CRL_SPEC_UNBOUNDED:
    case CRL_SPEC_COMPOSITE:
        break;
    case CRL_SPEC_BOUNDED: {
        const double *lo = crl_tensor_data(s->low), *hi = crl_tensor_data(s->high);
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            if (isnan(v))
                crl__elem_set(&e, i, lo[i]);
            else if (v < lo[i])
                crl__elem_set(&e, i, lo[i]);
            else if (v > hi[i])
                crl__elem_set(&e, i, hi[i]);
        }
        break;
    }
    case CRL_SPEC_CATEGORICAL:
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            double p = project_category(v, s->n);
            if (s->mask)
                p = (double)nearest_allowed(s, i, (int64_t)p);
            if (p != v)
                crl__elem_set(&e, i, p);
        }
        break;
    case CRL_SPEC_MULTI_CATEGORICAL:
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            double p = project_category(v, s->nvec[i % (int64_t)s->nvec_len]);
            if (p != v)
                crl__elem_set(&e, i, p);
        }
        break;
    case CRL_SPEC_BINARY:
        for (int64_t i = 0; i < e.numel; i++) {
            double v = crl__elem_get(&e, i);
            double p = v > 0.5 ? 1.0 : 0.0;
            if (p != v)
                crl__elem_set(&e, i, p);
        }
        break;
    case CRL_SPEC_ONEHOT:
        project_onehot_rows(&e, s->n, &s->n, 1);
        for (int64_t r = 0; s->mask && s->n && r < e.numel / s->n; r++) {
            int64_t hot = 0;
            for (int64_t c = 0; c < s->n; c++)
                if (crl__elem_get(&e, r * s->n + c) == 1.0)
                    hot = c;
            int64_t to = nearest_allowed(s, r, hot);
            if (to != hot) {
                crl__elem_set(&e, r * s->n + hot, 0.0);
                crl__elem_set(&e, r * s->n + to, 1.0);
            }
        }
        break;
    case CRL_SPEC_MULTI_ONEHOT:
        project_onehot_rows(&e, s->shape[s->ndim - 1], s->nvec, s->nvec_len);
        break;
    }
    return CRL_OK;
}

/* ---- rand, zero --------------------------------------------------------- */

/* Uniform integer in [lo, hi] (inclusive; the full int64 range works). */
static int64_t rand_int(crl_rng *rng, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    uint64_t x = span == UINT64_MAX ? crl_rng_u64(rng) : crl_rng_below(rng, span + 1);
    return (int64_t)((uint64_t)lo + x);
}

static double rand_bounded_float(crl_rng *rng, double lo, double hi)
{
    double v;
    if (isinf(lo) && isinf(hi))
        return crl_rng_normal(rng);
    if (isinf(hi))
        return lo + fabs(crl_rng_normal(rng));
    if (isinf(lo))
        return hi - fabs(crl_rng_normal(rng));
    /* Convex combination: no overflow even for [-DBL_MAX, DBL_MAX]. */
    double u = crl_rng_uniform(rng);
    v = lo * (1.0 - u) + hi * u;
    return v < lo ? lo : v > hi ? hi : v;
}

static void fill_onehot_rows(const crl__elems *e, crl_rng *rng, int64_t last, const int64_t *sizes,
                             size_t groups)
{
    int64_t rows = last ? e->numel / last : 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t col = r * last;
        for (size_t g = 0; g < groups; g++) {
            int64_t hot = (int64_t)crl_rng_below(rng, (uint64_t)sizes[g]);
            for (int64_t c = 0; c < sizes[g]; c++)
                crl__elem_set(e, col + c, c == hot ? 1.0 : 0.0);
            col += sizes[g];
        }
    }
}

int crl_spec_rand_into(const crl_spec *s, crl_rng *rng, crl_tensor *t, crl_error *err)
{
    if (!s || !rng)
        return crl_error_set(err, CRL_E_INVALID, "crl_spec_rand_into: %s is NULL",
                             !s ? "spec" : "rng");
    int rc = match_meta(s, t, "crl_spec_rand_into: ", err);
    if (rc)
        return rc;
    crl__elems e = crl__elems_of(t);
    bool is_int = crl__spec_dtype_is_int(s->dtype);
    switch (s->kind) {
    case CRL_SPEC_COMPOSITE:
        break;
    case CRL_SPEC_UNBOUNDED:
        if (!is_int) {
            for (int64_t i = 0; i < e.numel; i++)
                crl__elem_set(&e, i, crl_rng_normal(rng));
        } else {
            /* See spec.h: bool a fair coin, 8-bit ints their full range,
             * wider ints [-100, 100]. */
            int64_t lo = -100, hi = 100;
            if (s->dtype == CRL_BOOL) {
                lo = 0;
                hi = 1;
            } else if (s->dtype == CRL_U8) {
                lo = 0;
                hi = 255;
            } else if (s->dtype == CRL_I8) {
                lo = -128;
                hi = 127;
            }
            for (int64_t i = 0; i < e.numel; i++)
                crl__elem_set_i64(&e, i, rand_int(rng, lo, hi));
        }
        break;
    case CRL_SPEC_BOUNDED: {
        const double *lo = crl_tensor_data(s->low), *hi = crl_tensor_data(s->high);
        if (s->dtype == CRL_F32 && crl_tensor_is_contiguous(t)) {
            /* Hot path (random actions): a float32 value needs only 24
             * random bits, one rng word instead of the two a double takes. */
            float *out = crl_tensor_data(t);
            for (int64_t i = 0; i < e.numel; i++) {
                if (isinf(lo[i]) || isinf(hi[i])) {
                    out[i] = (float)rand_bounded_float(rng, lo[i], hi[i]);
                    continue;
                }
                float l = (float)lo[i], h = (float)hi[i];
                float v = l + (h - l) * crl_rng_uniform_f32(rng);
                out[i] = v < l ? l : v > h ? h : v;
            }
            break;
        }
        for (int64_t i = 0; i < e.numel; i++) {
            if (is_int)
                crl__elem_set_i64(&e, i, rand_int(rng, (int64_t)lo[i], (int64_t)hi[i]));
            else
                crl__elem_set(&e, i, rand_bounded_float(rng, lo[i], hi[i]));
        }
        break;
    }
    case CRL_SPEC_CATEGORICAL:
        for (int64_t i = 0; i < e.numel; i++)
            crl__elem_set_i64(&e, i, rand_allowed(s, rng, i));
        break;
    case CRL_SPEC_MULTI_CATEGORICAL:
        for (int64_t i = 0; i < e.numel; i++)
            crl__elem_set_i64(&e, i,
                              (int64_t)crl_rng_below(rng, (uint64_t)s->nvec[i % (int64_t)s->nvec_len]));
        break;
    case CRL_SPEC_BINARY:
        for (int64_t i = 0; i < e.numel; i++)
            crl__elem_set(&e, i, (double)(crl_rng_u32(rng) >> 31));
        break;
    case CRL_SPEC_ONEHOT:
        if (!s->mask) {
            fill_onehot_rows(&e, rng, s->n, &s->n, 1);
            break;
        }
        for (int64_t r = 0; s->n && r < e.numel / s->n; r++) {
            int64_t hot = rand_allowed(s, rng, r);
            for (int64_t c = 0; c < s->n; c++)
                crl__elem_set(&e, r * s->n + c, c == hot ? 1.0 : 0.0);
        }
        break;
    case CRL_SPEC_MULTI_ONEHOT:
        fill_onehot_rows(&e, rng, s->shape[s->ndim - 1], s->nvec, s->nvec_len);
        break;
    }
    return CRL_OK;
}

static crl_tensor *new_leaf(const crl_spec *s, const char *fn, crl_error *err)
{
    if (!s) {
        crl_error_set(err, CRL_E_INVALID, "%s: spec is NULL", fn);
        return NULL;
    }
    if (s->kind == CRL_SPEC_COMPOSITE) {
        crl_error_set(err, CRL_E_INVALID,
                      "%s: the spec is a Composite; use crl_spec_rand_td or crl_spec_zero_td", fn);
        return NULL;
    }
    return crl_tensor_new(s->dtype, s->ndim, s->shape, err);
}

crl_tensor *crl_spec_rand(const crl_spec *s, crl_rng *rng, crl_error *err)
{
    crl_tensor *t = new_leaf(s, "crl_spec_rand", err);
    if (t && crl_spec_rand_into(s, rng, t, err)) {
        crl_tensor_unref(t);
        return NULL;
    }
    return t;
}

crl_tensor *crl_spec_zero(const crl_spec *s, crl_error *err)
{
    return new_leaf(s, "crl_spec_zero", err);
}

/* A TensorDict for Composite `comp`; leaves drawn from rng, or zeros when
 * rng is NULL. */
static crl_td *build_td(const crl_spec *comp, crl_rng *rng, const char *parent, crl_error *err)
{
    crl_td *td = crl_td_new(comp->ndim, comp->shape, err);
    if (!td)
        return NULL;
    for (guint i = 0; i < comp->children->len; i++) {
        const crl__spec_entry *e = &g_array_index(comp->children, crl__spec_entry, i);
        char *full = parent ? g_strdup_printf("%s.%s", parent, e->key) : g_strdup(e->key);
        int rc = CRL_OK;
        if (e->spec->kind == CRL_SPEC_COMPOSITE) {
            /* a failing sub-level already named its own key */
            crl_td *sub = build_td(e->spec, rng, full, err);
            if (!sub)
                rc = CRL_E_INVALID;
            else if ((rc = crl_td_set_td(td, e->key, sub, err)) != CRL_OK)
                crl_error_prefix(err, "key '%s': ", full);
            crl_td_unref(sub);
        } else {
            crl_tensor *t = rng ? crl_spec_rand(e->spec, rng, err) : crl_spec_zero(e->spec, err);
            rc = t ? crl_td_set(td, e->key, t, err) : CRL_E_INVALID;
            if (rc)
                crl_error_prefix(err, "key '%s': ", full);
            crl_tensor_unref(t);
        }
        g_free(full);
        if (rc) {
            crl_td_unref(td);
            return NULL;
        }
    }
    return td;
}

crl_td *crl_spec_rand_td(const crl_spec *comp, crl_rng *rng, crl_error *err)
{
    if (!comp || comp->kind != CRL_SPEC_COMPOSITE || !rng) {
        crl_error_set(err, CRL_E_INVALID, "crl_spec_rand_td: %s",
                      !comp ? "spec is NULL"
                      : !rng ? "rng is NULL"
                             : "the spec is a leaf, not a Composite; use crl_spec_rand");
        return NULL;
    }
    return build_td(comp, rng, NULL, err);
}

crl_td *crl_spec_zero_td(const crl_spec *comp, crl_error *err)
{
    if (!comp || comp->kind != CRL_SPEC_COMPOSITE) {
        crl_error_set(err, CRL_E_INVALID, "crl_spec_zero_td: %s",
                      !comp ? "spec is NULL"
                            : "the spec is a leaf, not a Composite; use crl_spec_zero");
        return NULL;
    }
    return build_td(comp, NULL, NULL, err);
}
