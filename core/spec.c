/* Specs: constructors with argument checks, refcounting, Composite children, accessors, expand, clone, equal. */
#include "spec-private.h"

#include <float.h>
#include <math.h>
#include <string.h>

static const char *const dtype_names[CRL_DTYPE_COUNT] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
};
static const char *const torch_dtype_names[CRL_DTYPE_COUNT] = {
    "torch.bool", "torch.uint8", "torch.int8", "torch.int16", "torch.int32",
    "torch.int64", "torch.float16", "torch.float32", "torch.float64",
};

const char *crl__spec_dtype_name(crl_dtype dt)
{
    return (unsigned)dt < CRL_DTYPE_COUNT ? dtype_names[dt] : NULL;
}

const char *crl__spec_torch_dtype(crl_dtype dt)
{
    return (unsigned)dt < CRL_DTYPE_COUNT ? torch_dtype_names[dt] : NULL;
}

void crl__spec_append_dims(GString *s, int ndim, const int64_t *shape)
{
    g_string_append_c(s, '[');
    for (int i = 0; i < ndim; i++)
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i ? ", " : "", (gint64)shape[i]);
    g_string_append_c(s, ']');
}

void crl__spec_append_device(GString *s, crl_device d)
{
    if (d.type == CRL_DEVICE_CUDA)
        g_string_append_printf(s, "cuda:%d", (int)d.index);
    else
        g_string_append(s, "cpu");
}

bool crl__spec_dtype_is_int(crl_dtype dt)
{
    return dt == CRL_BOOL || dt == CRL_U8 || dt == CRL_I8 || dt == CRL_I16 || dt == CRL_I32 ||
           dt == CRL_I64;
}

void crl__spec_int_range(crl_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case CRL_BOOL: *lo = 0; *hi = 1; break;
    case CRL_U8: *lo = 0; *hi = UINT8_MAX; break;
    case CRL_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case CRL_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case CRL_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    default: *lo = -0x1p63; *hi = 0x1p63 - 1024.0; break;
    }
}

/* ---- construction ------------------------------------------------------ */

static int check_dtype(const char *fn, crl_dtype dt, crl_error *err)
{
    if ((unsigned)dt >= CRL_DTYPE_COUNT)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: dtype %d is not a crl_dtype (use CRL_BOOL .. CRL_F64)", fn,
                             (int)dt);
    return CRL_OK;
}

static int check_shape(const char *fn, int ndim, const int64_t *shape, crl_error *err)
{
    if (ndim < 0 || ndim > CRL_MAX_DIMS)
        return crl_error_set(err, CRL_E_INVALID, "%s: ndim %d is outside [0, %d]", fn, ndim,
                             CRL_MAX_DIMS);
    if (ndim > 0 && !shape)
        return crl_error_set(err, CRL_E_INVALID, "%s: shape is NULL but ndim is %d", fn, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return crl_error_set(err, CRL_E_INVALID,
                                 "%s: shape[%d] = %" G_GINT64_FORMAT " is negative", fn, i,
                                 (gint64)shape[i]);
    return CRL_OK;
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

static crl_spec *spec_alloc(crl_spec_kind kind, crl_dtype dt, int ndim, const int64_t *shape)
{
    crl_spec *s = g_new0(crl_spec, 1);
    s->refcount = 1;
    s->kind = kind;
    s->dtype = dt;
    s->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        s->shape[i] = shape[i];
    s->device.type = CRL_DEVICE_CPU;
    s->device.index = 0;
    if (kind == CRL_SPEC_COMPOSITE)
        s->children = g_array_new(FALSE, FALSE, sizeof(crl__spec_entry));
    return s;
}

crl_spec *crl_spec_unbounded(crl_dtype dt, int ndim, const int64_t *shape, crl_error *err)
{
    const char *fn = "crl_spec_unbounded";
    if (check_dtype(fn, dt, err) || check_shape(fn, ndim, shape, err))
        return NULL;
    return spec_alloc(CRL_SPEC_UNBOUNDED, dt, ndim, shape);
}

/* Round a bound to a value the dtype can hold: floats to the nearest
 * representable value (finite bounds beyond the range clamp to the largest
 * finite value; infinities stay, meaning "no bound on that side"), integers
 * inward (ceil for low, floor for high) and clamped to the dtype's range. */
static double round_bound(crl_dtype dt, double v, bool is_low)
{
    if (crl__spec_dtype_is_int(dt)) {
        double lo, hi;
        crl__spec_int_range(dt, &lo, &hi);
        /* Clamp only towards the inside: a pair entirely outside the
         * range keeps low > high and is rejected. */
        if (is_low) {
            v = ceil(v);
            return v < lo ? lo : v;
        }
        v = floor(v);
        return v > hi ? hi : v;
    }
    if (isinf(v) || dt == CRL_F64)
        return v;
    if (dt == CRL_F32) {
        if (v > FLT_MAX)
            return FLT_MAX;
        if (v < -FLT_MAX)
            return -FLT_MAX;
        return (double)(float)v;
    }
    /* float16: largest finite value 65504 */
    if (v > 65504.0)
        return 65504.0;
    if (v < -65504.0)
        return -65504.0;
    return (double)crl_half_to_float(crl_float_to_half((float)v));
}

/* Why the bound pair (a, b) is unusable for dtype dt, or CRL_OK.  `where`
 * is the element index ("[2]") or "" for scalar bounds. */
static int check_pair(const char *fn, crl_dtype dt, const char *where, double a, double b,
                      crl_error *err)
{
    if (isnan(a) || isnan(b))
        return crl_error_set(err, CRL_E_INVALID, "%s: %s%s is NaN; bounds must be numbers", fn,
                             isnan(a) ? "low" : "high", where);
    if (a > b)
        return crl_error_set(err, CRL_E_INVALID, "%s: low%s = %g is greater than high%s = %g", fn,
                             where, a, where, b);
    if (a == INFINITY || b == -INFINITY)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: %s%s = %g leaves no values (low must be < +inf, high > -inf)",
                             fn, a == INFINITY ? "low" : "high", where, a == INFINITY ? a : b);
    if (round_bound(dt, a, true) > round_bound(dt, b, false))
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: no %s value lies in [low%s, high%s] = [%g, %g]; widen the "
                             "bounds or use a float dtype",
                             fn, crl__spec_dtype_name(dt), where, where, a, b);
    return CRL_OK;
}

/* Fill s->low/high from tensors (lo_t, hi_t) or scalars, checking each pair. */
static int set_bounds(crl_spec *s, const char *fn, const crl_tensor *lo_t, const crl_tensor *hi_t,
                      double lo_v, double hi_v, crl_error *err)
{
    crl_error local;
    s->low = crl_tensor_new(CRL_F64, s->ndim, s->shape, &local);
    s->high = s->low ? crl_tensor_new(CRL_F64, s->ndim, s->shape, &local) : NULL;
    if (!s->low || !s->high)
        return crl_error_set(err, local.code, "%s: cannot allocate the bounds: %s", fn,
                             local.message);
    double *lo = crl_tensor_data(s->low), *hi = crl_tensor_data(s->high);
    int64_t n = numel_of(s->ndim, s->shape);
    crl__elems le = {0}, he = {0};
    if (lo_t) {
        le = crl__elems_of(lo_t);
        he = crl__elems_of(hi_t);
    }
    for (int64_t i = 0; i < n; i++) {
        double a = lo_t ? crl__elem_get(&le, i) : lo_v;
        double b = hi_t ? crl__elem_get(&he, i) : hi_v;
        lo[i] = round_bound(s->dtype, a, true);
        hi[i] = round_bound(s->dtype, b, false);
        if (isnan(a) || isnan(b) || !(lo[i] <= hi[i]) || a == INFINITY || b == -INFINITY) {
            /* Only now build the index for the message. */
            int64_t idx[CRL_MAX_DIMS];
            int64_t rem = i;
            for (int d = s->ndim - 1; d >= 0; d--) {
                idx[d] = rem % s->shape[d];
                rem /= s->shape[d];
            }
            GString *where = g_string_new("");
            if (lo_t)
                crl__spec_append_dims(where, s->ndim, idx);
            int rc = check_pair(fn, s->dtype, where->str, a, b, err);
            g_string_free(where, TRUE);
            return rc ? rc : crl_error_set(err, CRL_E_INVALID, "%s: bad bounds", fn);
        }
    }
    return CRL_OK;
}

crl_spec *crl_spec_bounded(crl_dtype dt, int ndim, const int64_t *shape, double low, double high,
                           crl_error *err)
{
    const char *fn = "crl_spec_bounded";
    /* Scalar bounds are checked once, before allocating the bound tensors. */
    if (check_dtype(fn, dt, err) || check_shape(fn, ndim, shape, err) ||
        check_pair(fn, dt, "", low, high, err))
        return NULL;
    crl_spec *s = spec_alloc(CRL_SPEC_BOUNDED, dt, ndim, shape);
    if (set_bounds(s, fn, NULL, NULL, low, high, err)) {
        crl_spec_unref(s);
        return NULL;
    }
    return s;
}

crl_spec *crl_spec_bounded_t(crl_dtype dt, const crl_tensor *low, const crl_tensor *high,
                             crl_error *err)
{
    const char *fn = "crl_spec_bounded_t";
    if (check_dtype(fn, dt, err))
        return NULL;
    if (!low || !high) {
        crl_error_set(err, CRL_E_INVALID, "%s: %s tensor is NULL", fn, !low ? "low" : "high");
        return NULL;
    }
    if (!crl_tensor_same_shape(low, high)) {
        GString *a = g_string_new(""), *b = g_string_new("");
        crl__spec_append_dims(a, crl_tensor_ndim(low), crl_tensor_shape(low));
        crl__spec_append_dims(b, crl_tensor_ndim(high), crl_tensor_shape(high));
        crl_error_set(err, CRL_E_INVALID,
                      "%s: high has shape %s but low has shape %s; they must match", fn, b->str,
                      a->str);
        g_string_free(a, TRUE);
        g_string_free(b, TRUE);
        return NULL;
    }
    crl_spec *s = spec_alloc(CRL_SPEC_BOUNDED, dt, crl_tensor_ndim(low), crl_tensor_shape(low));
    if (set_bounds(s, fn, low, high, 0, 0, err)) {
        crl_spec_unref(s);
        return NULL;
    }
    return s;
}

/* Categories 0..n-1 must fit the dtype; bool holds n <= 2 (TorchRL's done
 * flags are DiscreteTensorSpec(n=2, dtype=bool)). */
static int check_category_dtype(const char *fn, const char *what, int64_t n, crl_dtype dt,
                                crl_error *err)
{
    if (!crl__spec_dtype_is_int(dt))
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: dtype %s is not an integer dtype; categories need bool, uint8, "
                             "int8, int16, int32 or int64 (TorchRL uses int64)",
                             fn, crl__spec_dtype_name(dt));
    double lo, hi;
    crl__spec_int_range(dt, &lo, &hi);
    if ((double)(n - 1) > hi)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: %s = %" G_GINT64_FORMAT " categories do not fit dtype %s "
                             "(largest value %.0f)",
                             fn, what, (gint64)n, crl__spec_dtype_name(dt), hi);
    return CRL_OK;
}

static int check_last_dim(const char *fn, int ndim, const int64_t *shape, int64_t want,
                          const char *what, crl_error *err)
{
    if (ndim < 1)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: shape has no dims; the last dim must hold the %s", fn, what);
    if (shape[ndim - 1] != want)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: shape[%d] = %" G_GINT64_FORMAT " must equal %" G_GINT64_FORMAT
                             " (the last dim holds the %s)",
                             fn, ndim - 1, (gint64)shape[ndim - 1], (gint64)want, what);
    return CRL_OK;
}

crl_spec *crl_spec_categorical(int64_t n, crl_dtype dt, int ndim, const int64_t *shape,
                               crl_error *err)
{
    const char *fn = "crl_spec_categorical";
    if (n <= 0) {
        crl_error_set(err, CRL_E_INVALID, "%s: n = %" G_GINT64_FORMAT " must be > 0", fn,
                      (gint64)n);
        return NULL;
    }
    if (check_dtype(fn, dt, err) || check_category_dtype(fn, "n", n, dt, err) ||
        check_shape(fn, ndim, shape, err))
        return NULL;
    crl_spec *s = spec_alloc(CRL_SPEC_CATEGORICAL, dt, ndim, shape);
    s->n = n;
    return s;
}

crl_spec *crl_spec_onehot(int64_t n, crl_dtype dt, int ndim, const int64_t *shape, crl_error *err)
{
    const char *fn = "crl_spec_onehot";
    if (n <= 0) {
        crl_error_set(err, CRL_E_INVALID, "%s: n = %" G_GINT64_FORMAT " must be > 0", fn,
                      (gint64)n);
        return NULL;
    }
    if (check_dtype(fn, dt, err) || check_shape(fn, ndim, shape, err) ||
        check_last_dim(fn, ndim, shape, n, "n one-hot classes", err))
        return NULL;
    crl_spec *s = spec_alloc(CRL_SPEC_ONEHOT, dt, ndim, shape);
    s->n = n;
    return s;
}

static int check_nvec(const char *fn, const int64_t *nvec, size_t k, crl_error *err)
{
    if (!nvec)
        return crl_error_set(err, CRL_E_INVALID, "%s: nvec is NULL", fn);
    for (size_t i = 0; i < k; i++)
        if (nvec[i] <= 0)
            return crl_error_set(err, CRL_E_INVALID,
                                 "%s: nvec[%zu] = %" G_GINT64_FORMAT " must be > 0", fn, i,
                                 (gint64)nvec[i]);
    return CRL_OK;
}

crl_spec *crl_spec_multi_categorical(const int64_t *nvec, crl_dtype dt, int ndim,
                                     const int64_t *shape, crl_error *err)
{
    const char *fn = "crl_spec_multi_categorical";
    if (check_dtype(fn, dt, err) || check_shape(fn, ndim, shape, err))
        return NULL;
    if (ndim < 1) {
        crl_error_set(err, CRL_E_INVALID,
                      "%s: shape has no dims; the last dim must hold one entry per nvec element",
                      fn);
        return NULL;
    }
    size_t k = (size_t)shape[ndim - 1];
    if (k == 0) {
        crl_error_set(err, CRL_E_INVALID,
                      "%s: shape[%d] = 0; the last dim is the number of categorical variables "
                      "(the length of nvec) and must be > 0",
                      fn, ndim - 1);
        return NULL;
    }
    if (check_nvec(fn, nvec, k, err))
        return NULL;
    for (size_t i = 0; i < k; i++) {
        char what[32];
        g_snprintf(what, sizeof what, "nvec[%zu]", i);
        if (check_category_dtype(fn, what, nvec[i], dt, err))
            return NULL;
    }
    crl_spec *s = spec_alloc(CRL_SPEC_MULTI_CATEGORICAL, dt, ndim, shape);
    s->nvec_len = k;
    s->nvec = g_memdup2(nvec, k * sizeof *nvec);
    return s;
}

crl_spec *crl_spec_multi_onehot(const int64_t *nvec, size_t k, crl_dtype dt, int ndim,
                                const int64_t *shape, crl_error *err)
{
    const char *fn = "crl_spec_multi_onehot";
    if (k == 0) {
        crl_error_set(err, CRL_E_INVALID, "%s: k = 0; nvec needs at least one group", fn);
        return NULL;
    }
    if (check_nvec(fn, nvec, k, err) || check_dtype(fn, dt, err) ||
        check_shape(fn, ndim, shape, err))
        return NULL;
    int64_t sum = 0;
    for (size_t i = 0; i < k; i++) {
        if (nvec[i] > INT64_MAX - sum) {
            crl_error_set(err, CRL_E_INVALID, "%s: sum(nvec) overflows int64", fn);
            return NULL;
        }
        sum += nvec[i];
    }
    if (check_last_dim(fn, ndim, shape, sum, "sum(nvec) one-hot columns", err))
        return NULL;
    crl_spec *s = spec_alloc(CRL_SPEC_MULTI_ONEHOT, dt, ndim, shape);
    s->nvec_len = k;
    s->nvec = g_memdup2(nvec, k * sizeof *nvec);
    return s;
}

crl_spec *crl_spec_binary(int64_t n, crl_dtype dt, int ndim, const int64_t *shape, crl_error *err)
{
    const char *fn = "crl_spec_binary";
    if (n <= 0) {
        crl_error_set(err, CRL_E_INVALID, "%s: n = %" G_GINT64_FORMAT " must be > 0", fn,
                      (gint64)n);
        return NULL;
    }
    if (check_dtype(fn, dt, err) || check_shape(fn, ndim, shape, err) ||
        check_last_dim(fn, ndim, shape, n, "n binary values", err))
        return NULL;
    crl_spec *s = spec_alloc(CRL_SPEC_BINARY, dt, ndim, shape);
    s->n = n;
    return s;
}

crl_spec *crl_spec_composite(int ndim, const int64_t *shape, crl_error *err)
{
    if (check_shape("crl_spec_composite", ndim, shape, err))
        return NULL;
    return spec_alloc(CRL_SPEC_COMPOSITE, CRL_DTYPE_COUNT, ndim, shape);
}

crl_spec *crl_spec_ref(crl_spec *s)
{
    if (s)
        g_atomic_int_inc(&s->refcount);
    return s;
}

void crl_spec_unref(crl_spec *s)
{
    if (!s || !g_atomic_int_dec_and_test(&s->refcount))
        return;
    if (s->children) {
        for (guint i = 0; i < s->children->len; i++) {
            crl__spec_entry *e = &g_array_index(s->children, crl__spec_entry, i);
            g_free(e->key);
            crl_spec_unref(e->spec);
        }
        g_array_free(s->children, TRUE);
    }
    crl_tensor_unref(s->low);
    crl_tensor_unref(s->high);
    crl_tensor_unref(s->mask);
    g_free(s->nvec);
    g_free(s);
}

/* ---- Composite children ------------------------------------------------ */

/* Index of key among the direct children, or -(insertion point) - 1. */
static long child_find(const crl_spec *comp, const char *key, size_t len)
{
    guint lo = 0, hi = comp->children->len;
    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        const char *k = g_array_index(comp->children, crl__spec_entry, mid).key;
        int c = strncmp(k, key, len);
        if (c == 0 && k[len] != '\0')
            c = 1;
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

static bool spec_contains(const crl_spec *tree, const crl_spec *needle)
{
    if (tree == needle)
        return true;
    if (tree->kind != CRL_SPEC_COMPOSITE)
        return false;
    for (guint i = 0; i < tree->children->len; i++)
        if (spec_contains(g_array_index(tree->children, crl__spec_entry, i).spec, needle))
            return true;
    return false;
}

static bool key_valid(const char *key)
{
    if (!key || !*key || key[0] == '.')
        return false;
    size_t n = strlen(key);
    return key[n - 1] != '.' && !strstr(key, "..");
}

const char *crl_spec_kind_name(crl_spec_kind kind)
{
    switch (kind) {
    case CRL_SPEC_UNBOUNDED: return "Unbounded";
    case CRL_SPEC_BOUNDED: return "Bounded";
    case CRL_SPEC_CATEGORICAL: return "Categorical";
    case CRL_SPEC_ONEHOT: return "OneHot";
    case CRL_SPEC_MULTI_CATEGORICAL: return "MultiCategorical";
    case CRL_SPEC_MULTI_ONEHOT: return "MultiOneHot";
    case CRL_SPEC_BINARY: return "Binary";
    case CRL_SPEC_COMPOSITE: return "Composite";
    }
    return NULL;
}

static const char *kind_label(const crl_spec *s)
{
    const char *name = crl_spec_kind_name(s->kind);
    return name ? name : "spec";
}

static void insert_child(crl_spec *comp, long pos, const char *key, size_t len, crl_spec *child)
{
    crl__spec_entry e = {g_strndup(key, len), child};
    if (pos >= 0) {
        crl__spec_entry *old = &g_array_index(comp->children, crl__spec_entry, pos);
        g_free(e.key);
        crl_spec_unref(old->spec);
        old->spec = child;
    } else {
        g_array_insert_val(comp->children, (guint)(-pos - 1), e);
    }
}

int crl_spec_composite_set(crl_spec *comp, const char *key, crl_spec *child, crl_error *err)
{
    if (!comp || comp->kind != CRL_SPEC_COMPOSITE)
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_spec_composite_set: key '%s': the target is %s, not a Composite",
                             key ? key : "(null)", comp ? kind_label(comp) : "NULL");
    if (!key_valid(key))
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_spec_composite_set: key '%s' is empty or has an empty "
                             "component (write 'a.b', not 'a..b' or '.a')",
                             key ? key : "(null)");
    if (!child)
        return crl_error_set(err, CRL_E_INVALID, "crl_spec_composite_set: key '%s': child is NULL",
                             key);
    if (spec_contains(child, comp))
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_spec_composite_set: key '%s': the child contains the Composite "
                             "itself (a spec cannot be nested in itself)",
                             key);
    if (child->ndim < comp->ndim ||
        memcmp(child->shape, comp->shape, (size_t)comp->ndim * sizeof(int64_t)) != 0) {
        GString *a = g_string_new(""), *b = g_string_new("");
        crl__spec_append_dims(a, child->ndim, child->shape);
        crl__spec_append_dims(b, comp->ndim, comp->shape);
        crl_error_set(err, CRL_E_SHAPE,
                      "crl_spec_composite_set: key '%s': shape %s does not start with the "
                      "Composite's shape %s (leaf shapes include the batch dims)",
                      key, a->str, b->str);
        g_string_free(a, TRUE);
        g_string_free(b, TRUE);
        return CRL_E_SHAPE;
    }
    /* Walk (and create) the intermediate Composites of a dotted key; check
     * the whole path before changing anything. */
    crl_spec *node = comp;
    const char *p = key;
    const char *dot;
    while ((dot = strchr(p, '.')) != NULL) {
        long i = child_find(node, p, (size_t)(dot - p));
        if (i < 0)
            break;   /* the rest of the path is created below */
        crl_spec *next = g_array_index(node->children, crl__spec_entry, i).spec;
        if (next->kind != CRL_SPEC_COMPOSITE)
            return crl_error_set(err, CRL_E_EXISTS,
                                 "crl_spec_composite_set: key '%s': '%.*s' is a %s leaf, not a "
                                 "Composite; delete it first to nest specs under it",
                                 key, (int)(dot - key), key, kind_label(next));
        node = next;
        p = dot + 1;
    }
    while ((dot = strchr(p, '.')) != NULL) {
        long i = child_find(node, p, (size_t)(dot - p));
        crl_spec *sub = spec_alloc(CRL_SPEC_COMPOSITE, CRL_DTYPE_COUNT, comp->ndim, comp->shape);
        insert_child(node, i, p, (size_t)(dot - p), sub);
        node = sub;
        p = dot + 1;
    }
    insert_child(node, child_find(node, p, strlen(p)), p, strlen(p), crl_spec_ref(child));
    return CRL_OK;
}

/* Resolve a dotted key to (parent Composite, index in it); false if absent. */
static bool lookup(const crl_spec *comp, const char *key, const crl_spec **parent, long *idx)
{
    if (!comp || comp->kind != CRL_SPEC_COMPOSITE || !key_valid(key))
        return false;
    const crl_spec *node = comp;
    const char *p = key;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        long i = child_find(node, p, len);
        if (i < 0)
            return false;
        if (!dot) {
            *parent = node;
            *idx = i;
            return true;
        }
        node = g_array_index(node->children, crl__spec_entry, i).spec;
        if (node->kind != CRL_SPEC_COMPOSITE)
            return false;
        p = dot + 1;
    }
}

crl_spec *crl_spec_composite_get(const crl_spec *comp, const char *key)
{
    const crl_spec *parent;
    long i;
    if (!lookup(comp, key, &parent, &i))
        return NULL;
    return g_array_index(parent->children, crl__spec_entry, i).spec;
}

int crl_spec_composite_del(crl_spec *comp, const char *key, crl_error *err)
{
    if (!comp || comp->kind != CRL_SPEC_COMPOSITE)
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_spec_composite_del: key '%s': the target is %s, not a Composite",
                             key ? key : "(null)", comp ? kind_label(comp) : "NULL");
    const crl_spec *parent;
    long i;
    if (!lookup(comp, key, &parent, &i)) {
        GString *present = g_string_new("");
        for (guint j = 0; j < comp->children->len; j++)
            g_string_append_printf(present, "%s%s", j ? ", " : "",
                                   g_array_index(comp->children, crl__spec_entry, j).key);
        crl_error_set(err, CRL_E_NOT_FOUND,
                      "crl_spec_composite_del: key '%s' is not in the Composite (present: %s)",
                      key ? key : "(null)", present->len ? present->str : "none");
        g_string_free(present, TRUE);
        return CRL_E_NOT_FOUND;
    }
    crl_spec *pm = (crl_spec *)parent;
    crl__spec_entry *e = &g_array_index(pm->children, crl__spec_entry, i);
    g_free(e->key);
    crl_spec_unref(e->spec);
    g_array_remove_index(pm->children, (guint)i);
    return CRL_OK;
}

size_t crl_spec_composite_len(const crl_spec *comp)
{
    return comp && comp->kind == CRL_SPEC_COMPOSITE ? comp->children->len : 0;
}

const char *crl_spec_composite_key_at(const crl_spec *comp, size_t i)
{
    if (i >= crl_spec_composite_len(comp))
        return NULL;
    return g_array_index(comp->children, crl__spec_entry, i).key;
}

crl_spec *crl_spec_composite_at(const crl_spec *comp, size_t i)
{
    if (i >= crl_spec_composite_len(comp))
        return NULL;
    return g_array_index(comp->children, crl__spec_entry, i).spec;
}

/* ---- accessors --------------------------------------------------------- */

/* NULL-safe like the tensor accessors: a NULL spec reads as an empty
 * Composite with no dtype. */
crl_spec_kind crl_spec_get_kind(const crl_spec *s) { return s ? s->kind : CRL_SPEC_COMPOSITE; }
crl_dtype crl_spec_dtype(const crl_spec *s) { return s ? s->dtype : CRL_DTYPE_COUNT; }
int crl_spec_ndim(const crl_spec *s) { return s ? s->ndim : 0; }
const int64_t *crl_spec_shape(const crl_spec *s) { return s ? s->shape : NULL; }

crl_device crl_spec_device(const crl_spec *s)
{
    crl_device cpu = {CRL_DEVICE_CPU, 0};
    return s ? s->device : cpu;
}

int64_t crl_spec_n(const crl_spec *s)
{
    if (!s)
        return 0;
    switch (s->kind) {
    case CRL_SPEC_CATEGORICAL:
    case CRL_SPEC_ONEHOT:
    case CRL_SPEC_BINARY:
        return s->n;
    default:
        return 0;
    }
}

size_t crl_spec_nvec_len(const crl_spec *s) { return s ? s->nvec_len : 0; }
const int64_t *crl_spec_nvec(const crl_spec *s) { return s ? s->nvec : NULL; }
const crl_tensor *crl_spec_low(const crl_spec *s) { return s ? s->low : NULL; }
const crl_tensor *crl_spec_high(const crl_spec *s) { return s ? s->high : NULL; }

/* ---- expand, clone, equal ---------------------------------------------- */

/* New f64 tensor of `shape` repeating src's data (src's shape is a suffix
 * of shape, so row-major order repeats src's block). */
static crl_tensor *tile_bounds(const crl_tensor *src, int ndim, const int64_t *shape,
                               crl_error *err)
{
    crl_tensor *t = crl_tensor_new(CRL_F64, ndim, shape, err);
    if (!t)
        return NULL;
    int64_t block = crl_tensor_numel(src), total = crl_tensor_numel(t);
    const double *s = crl_tensor_data(src);
    double *d = crl_tensor_data(t);
    for (int64_t i = 0; block > 0 && i < total; i += block)
        memcpy(d + i, s, (size_t)block * sizeof(double));
    return t;
}

/* Copy of s with a new shape (batch dims prepended); children expanded. */
static crl_spec *spec_copy(const crl_spec *s, int batch_ndim, const int64_t *batch, crl_error *err)
{
    int64_t shape[CRL_MAX_DIMS];
    for (int i = 0; i < batch_ndim; i++)
        shape[i] = batch[i];
    for (int i = 0; i < s->ndim; i++)
        shape[batch_ndim + i] = s->shape[i];
    int ndim = batch_ndim + s->ndim;
    crl_spec *c = spec_alloc(s->kind, s->dtype, ndim, shape);
    c->device = s->device;
    c->n = s->n;
    c->nvec_len = s->nvec_len;
    if (s->nvec)
        c->nvec = g_memdup2(s->nvec, s->nvec_len * sizeof *s->nvec);
    if (s->low) {
        c->low = tile_bounds(s->low, ndim, shape, err);
        c->high = c->low ? tile_bounds(s->high, ndim, shape, err) : NULL;
        if (!c->high) {
            crl_spec_unref(c);
            return NULL;
        }
    }
    if (s->mask) {
        int64_t mshape[CRL_MAX_DIMS + 1];
        int mnd = crl_tensor_ndim(s->mask) + batch_ndim;
        for (int i = 0; i < batch_ndim; i++)
            mshape[i] = batch[i];
        memcpy(mshape + batch_ndim, crl_tensor_shape(s->mask), sizeof(int64_t) * (size_t)crl_tensor_ndim(s->mask));
        c->mask = mnd <= CRL_MAX_DIMS ? crl_tensor_new(CRL_BOOL, mnd, mshape, err) : NULL;
        if (!c->mask) {
            if (mnd > CRL_MAX_DIMS)
                crl_error_set(err, CRL_E_SHAPE, "crl_spec_expand: the mask would have %d dims (max %d)", mnd,
                              CRL_MAX_DIMS);
            crl_spec_unref(c);
            return NULL;
        }
        size_t block = crl_tensor_nbytes(s->mask), total = crl_tensor_nbytes(c->mask);
        for (size_t i = 0; block && i < total; i += block)
            memcpy((char *)crl_tensor_data(c->mask) + i, crl_tensor_data(s->mask), block);
    }
    if (s->children) {
        for (guint i = 0; i < s->children->len; i++) {
            const crl__spec_entry *e = &g_array_index(s->children, crl__spec_entry, i);
            crl_spec *sub = spec_copy(e->spec, batch_ndim, batch, err);
            if (!sub) {
                crl_spec_unref(c);
                return NULL;
            }
            crl__spec_entry ne = {g_strdup(e->key), sub};
            g_array_append_val(c->children, ne);
        }
    }
    return c;
}

static int max_ndim(const crl_spec *s)
{
    int m = s->ndim;
    if (s->children)
        for (guint i = 0; i < s->children->len; i++) {
            int k = max_ndim(g_array_index(s->children, crl__spec_entry, i).spec);
            if (k > m)
                m = k;
        }
    return m;
}

crl_spec *crl_spec_expand(const crl_spec *s, int batch_ndim, const int64_t *batch,
                          crl_error *err)
{
    const char *fn = "crl_spec_expand";
    if (!s) {
        crl_error_set(err, CRL_E_INVALID, "%s: spec is NULL", fn);
        return NULL;
    }
    if (check_shape(fn, batch_ndim, batch, err))
        return NULL;
    int deepest = max_ndim(s);
    if (batch_ndim + deepest > CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_SHAPE,
                      "%s: %d batch dims on a spec with %d dims exceed CRL_MAX_DIMS (%d)", fn,
                      batch_ndim, deepest, CRL_MAX_DIMS);
        return NULL;
    }
    return spec_copy(s, batch_ndim, batch, err);
}

crl_spec *crl_spec_clone(const crl_spec *s, crl_error *err)
{
    if (!s) {
        crl_error_set(err, CRL_E_INVALID, "crl_spec_clone: spec is NULL");
        return NULL;
    }
    return spec_copy(s, 0, NULL, err);
}

bool crl_spec_equal(const crl_spec *a, const crl_spec *b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    if (a->kind != b->kind || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->device.type != b->device.type || a->device.index != b->device.index || a->n != b->n ||
        a->nvec_len != b->nvec_len)
        return false;
    if (memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) != 0)
        return false;
    if (a->nvec_len && memcmp(a->nvec, b->nvec, a->nvec_len * sizeof(int64_t)) != 0)
        return false;
    if (a->low) {
        int64_t n = crl_tensor_numel(a->low);
        const double *al = crl_tensor_data(a->low), *ah = crl_tensor_data(a->high);
        const double *bl = crl_tensor_data(b->low), *bh = crl_tensor_data(b->high);
        for (int64_t i = 0; i < n; i++)
            if (al[i] != bl[i] || ah[i] != bh[i])
                return false;
    }
    if ((a->mask == NULL) != (b->mask == NULL) ||
        (a->mask && memcmp(crl_tensor_data(a->mask), crl_tensor_data(b->mask), crl_tensor_nbytes(a->mask)) != 0))
        return false;
    if (a->children) {
        if (a->children->len != b->children->len)
            return false;
        for (guint i = 0; i < a->children->len; i++) {
            const crl__spec_entry *x = &g_array_index(a->children, crl__spec_entry, i);
            const crl__spec_entry *y = &g_array_index(b->children, crl__spec_entry, i);
            if (strcmp(x->key, y->key) != 0 || !crl_spec_equal(x->spec, y->spec))
                return false;
        }
    }
    return true;
}

crl_spec *crl_spec_composite_of(int64_t num, const char *key, crl_spec *leaf, crl_error *err)
{
    if (!leaf)
        return NULL;
    crl_spec *c = crl_spec_composite(1, &num, err);
    if (c && crl_spec_composite_set(c, key, leaf, err) != CRL_OK) {
        crl_spec_unref(c);
        c = NULL;
    }
    crl_spec_unref(leaf);
    return c;
}

/* ---- masks ------------------------------------------------------------- */

int crl_spec_update_mask(crl_spec *s, const crl_tensor *mask, crl_error *err)
{
    const char *fn = "crl_spec_update_mask";
    if (!s)
        return crl_error_set(err, CRL_E_INVALID, "%s: spec is NULL", fn);
    if (s->kind != CRL_SPEC_CATEGORICAL && s->kind != CRL_SPEC_ONEHOT)
        return crl_error_set(err, CRL_E_INVALID, "%s: a %s spec takes no mask (only Categorical and OneHot do)", fn,
                             crl_spec_kind_name(s->kind));
    if (!mask) {
        crl_tensor_unref(s->mask);
        s->mask = NULL;
        return CRL_OK;
    }
    if (crl_tensor_dtype(mask) != CRL_BOOL)
        return crl_error_set(err, CRL_E_DTYPE, "%s: the mask must be bool, not %s", fn,
                             crl_dtype_name(crl_tensor_dtype(mask)));
    int64_t want[CRL_MAX_DIMS + 1];
    int wnd = s->ndim;
    memcpy(want, s->shape, sizeof(int64_t) * (size_t)s->ndim);
    if (s->kind == CRL_SPEC_CATEGORICAL)
        want[wnd++] = s->n;
    if (crl_tensor_ndim(mask) != wnd || memcmp(crl_tensor_shape(mask), want, sizeof(int64_t) * (size_t)wnd) != 0) {
        GString *a = g_string_new(NULL), *b = g_string_new(NULL);
        crl__spec_append_dims(a, wnd, want);
        crl__spec_append_dims(b, crl_tensor_ndim(mask), crl_tensor_shape(mask));
        crl_error_set(err, CRL_E_SHAPE, "%s: the mask must have shape %s (one row of %" G_GINT64_FORMAT
                      " flags per value) but has %s", fn, a->str, (gint64)s->n, b->str);
        g_string_free(a, TRUE);
        g_string_free(b, TRUE);
        return CRL_E_SHAPE;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *m = crl_tensor_new(CRL_BOOL, wnd, want, &e);
    if (!m)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_tensor_copy(m, mask, err);
    if (rc) {
        crl_tensor_unref(m);
        return rc;
    }
    const uint8_t *f = crl_tensor_data(m);
    int64_t rows = s->n ? crl_tensor_numel(m) / s->n : 0;
    for (int64_t r = 0; r < rows; r++) {
        bool any = false;
        for (int64_t c = 0; c < s->n && !any; c++)
            any = f[r * s->n + c] != 0;
        if (!any) {
            crl_tensor_unref(m);
            return crl_error_set(err, CRL_E_INVALID, "%s: row %" G_GINT64_FORMAT " of the mask allows no value; "
                                 "at least one of the %" G_GINT64_FORMAT " must be true", fn, (gint64)r, (gint64)s->n);
        }
    }
    crl_tensor_unref(s->mask);
    s->mask = m;
    return CRL_OK;
}

const crl_tensor *crl_spec_mask(const crl_spec *s)
{
    return s ? s->mask : NULL;
}
