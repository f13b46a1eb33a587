/* FunctionTransform: an observation transform whose forward is a C function from a library, described in
 * INI with the ffi backend's signature language (plugins/ffi/README.md) and called through libffi.
 *
 *   [transform.filter]
 *   type = FunctionTransform
 *   library = ./libfilters.so
 *   forward = int32 lowpass(const double *in[4], double *out[4], double=0.5) ok=0
 *   in_keys = observation
 *
 * Everything is parsed, looked up and prepared in create, so a bad description is CRL_E_CONFIG with the
 * key's FILE:LINE.  The function sees one row (one env, one sample) per call, or with calls = batch every
 * row of the TensorDict at once (`count` says how many). */
#include "config.h"
#include "transforms.h"

#include "../ffi/ffi-sig.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FN_MAKE, FN_FORWARD, FN_FREE, FN_COUNT };
static const char *const fn_keys[FN_COUNT] = { "make", "forward", "free" };
enum { LEAF_IN, LEAF_OUT };
static const char *const leaf_names[] = { "in", "out", NULL };

static const crl_option fn_options[] = {
    { "library", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: the library holding the function, a path (checked like a plugin path) or a soname" },
    { "forward", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: C signature of the function from in to out, e.g. void lowpass(const double *in, double *out)" },
    { "make", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of a function called once to create the handle forward may take, e.g. handle f_new(int32=4)" },
    { "free", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "C signature of the function that frees the handle" },
    { "in_keys", CRL_OPT_LIST, 0, "observation", 0, 0, NULL, "keys read (each transformed the same way)" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "keys written; empty: the in_keys" },
    { "out_shape", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "per-row shape of what forward writes; empty: the shape of the input row" },
    { "out_dtype", CRL_OPT_STRING, 0, "float32", 0, 0, NULL, "dtype of the output entries" },
    { "out_low", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "lower bound of the output spec (unset: unbounded)" },
    { "out_high", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "upper bound of the output spec (unset: unbounded)" },
    { "calls", CRL_OPT_ENUM, 0, "per_row", 0, 0, "per_row|batch",
      "per_row = forward is called once per row of the batch (index = the row); batch = once for every row "
      "(count = the rows, in and out point at all of them)" },
    { "check_nan", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "report a NaN forward writes as an error naming the row" },
    CRL_OPTIONS_END
};

typedef struct fnt {
    char name[160];            /* "FunctionTransform [transform.filter]" */
    char *lib_name;
    void *lib;
    fn fns[FN_COUNT];
    bool have[FN_COUNT];
    void *handle;
    tf_keys keys;
    crl_dtype out_dtype;
    int out_ndim;              /* -1: as the input row */
    int64_t out_shape[FFI_MAX_DIMS];
    double out_low, out_high;
    bool bounded, batch, check_nan;
    int in_arg, out_arg;       /* forward's arguments bound to in and out */
    /* Staging for rows whose crl dtype is not the C type (or when out overwrites in): grown, never shrunk. */
    void *in_stage, *out_stage;
    size_t in_cap, out_cap;
} fnt;

static int call_fn(fnt *t, fn *f, int64_t index, int64_t count, ffi_retval *rv, crl_error *err)
{
    for (int k = 0; k < f->nargs; k++) {
        arg *a = &f->args[k];
        if (a->kind == A_HANDLE)
            a->value.p = t->handle;
        else if (a->kind == A_INDEX)
            a->value.i64 = index;
        else if (a->kind == A_COUNT)
            a->value.i64 = count;
    }
    memset(rv, 0, sizeof *rv);
    ffi_call(&f->cif, f->addr, rv, f->avalues);
    if (f->has_ok && ffi_sig_ret_double(f, rv) != f->ok)
        return crl_error_set(err, CRL_E_RUNTIME, "%s: %s returned %g for %s %lld (declared ok=%g): the library "
                             "reported an error", t->name, f->symbol, ffi_sig_ret_double(f, rv),
                             count > 1 || t->batch ? "the rows 0 to" : "row",
                             (long long)(t->batch ? count - 1 : index), f->ok);
    return CRL_OK;
}

static void fnt_destroy(void *p)
{
    fnt *t = p;
    if (!t)
        return;
    if (t->handle && t->have[FN_FREE]) {
        ffi_retval rv;
        call_fn(t, &t->fns[FN_FREE], 0, 1, &rv, NULL);
    }
    if (t->lib)
        dlclose(t->lib);
    tf_keys_free(&t->keys);
    free(t->lib_name);
    free(t->in_stage);
    free(t->out_stage);
    free(t);
}

static ffi_sig_rules fn_rules(int j)
{
    static const int64_t any[2][FFI_MAX_DIMS + 1] = { { -1 }, { -1 } };
    ffi_sig_rules r = { .leaves = leaf_names, .leaf_list = "in or out", .shape = any, .returns_handle = j == FN_MAKE };
    r.word_only_in[A_SEED] = r.word_only_in[A_SEEDS] = r.word_only_in[A_MASK] = "the ffi env backend's functions";
    r.word_only_in[A_RGB] = "the ffi env backend's render function";
    if (j != FN_FORWARD)
        r.word_only_in[A_INDEX] = r.word_only_in[A_COUNT] = "forward";
    if (j == FN_MAKE)
        r.word_only_in[A_HANDLE] = "forward and free";
    return r;
}

/* What each function may take, beyond what the grammar says. */
static int check_fns(fnt *t, const crl_opts *o, crl_error *err)
{
    t->in_arg = t->out_arg = -1;
    for (int j = 0; j < FN_COUNT; j++) {
        fn *f = &t->fns[j];
        for (int k = 0; t->have[j] && k < f->nargs; k++) {
            arg *a = &f->args[k];
            if (a->kind == A_HANDLE && !t->have[FN_MAKE])
                return ffi_sig_error(o, fn_keys[j], err, "an argument is the handle, but no make function creates "
                                     "one: set make (e.g. handle f_new())");
            if (a->kind == A_INDEX && t->batch)
                return ffi_sig_error(o, fn_keys[j], err, "with calls = batch one call serves every row: use count, "
                                     "not index");
            if (a->kind != A_BUFFER)
                continue;
            if (j != FN_FORWARD)
                return ffi_sig_error(o, fn_keys[j], err, "only forward takes the in and out buffers (got %s)",
                                     leaf_names[a->leaf]);
            int *which = a->leaf == LEAF_IN ? &t->in_arg : &t->out_arg;
            if (*which >= 0)
                return ffi_sig_error(o, "forward", err, "%s appears twice: forward takes one in and one out buffer",
                                     leaf_names[a->leaf]);
            if (a->leaf == LEAF_IN && !a->is_const)
                return ffi_sig_error(o, "forward", err, "in is read only: declare it const (const %s *in)",
                                     ffi_ctypes[a->type].name);
            if (a->leaf == LEAF_OUT && a->is_const)
                return ffi_sig_error(o, "forward", err, "out is written by forward: it cannot be const");
            *which = k;
        }
    }
    if (t->in_arg < 0 || t->out_arg < 0)
        return ffi_sig_error(o, "forward", err, "forward must take the input and the output buffers, e.g. void "
                             "f(const double *in, double *out)");
    return CRL_OK;
}

static int read_out_shape(fnt *t, const crl_opts *o, crl_error *err)
{
    size_t n;
    const char *const *items;
    int rc = crl_opts_list(o, "out_shape", &n, &items, err);
    if (rc)
        return rc;
    t->out_ndim = n ? (int)n : -1;
    if (n > FFI_MAX_DIMS)
        return ffi_sig_error(o, "out_shape", err, "at most %d sizes", FFI_MAX_DIMS);
    for (size_t k = 0; k < n; k++)
        if (!crl_parse_int(items[k], &t->out_shape[k]) || t->out_shape[k] <= 0 || t->out_shape[k] > (1 << 24))
            return ffi_sig_error(o, "out_shape", err, "'%s' is not a positive size", items[k]);
    const arg *out = &t->fns[FN_FORWARD].args[t->out_arg];
    if (out->ndims && t->out_ndim >= 0) {
        bool same = out->ndims == t->out_ndim;
        for (int k = 0; same && k < out->ndims; k++)
            same = out->dims[k] == t->out_shape[k];
        if (!same)
            return ffi_sig_error(o, "forward", err, "out's declared shape differs from out_shape: write the same "
                                 "sizes in both, or drop one");
    } else if (out->ndims) {
        /* The signature alone says what forward writes. */
        t->out_ndim = out->ndims;
        memcpy(t->out_shape, out->dims, sizeof out->dims);
    }
    return CRL_OK;
}

static int fnt_create(const crl_opts *o, void **out, crl_error *err)
{
    *out = NULL;
    fnt *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "FunctionTransform: out of memory");
    snprintf(t->name, sizeof t->name, "FunctionTransform [%s]", crl_opts_section(o));
    const char *lib = NULL, *calls = "per_row", *dt = "float32";
    int rc = crl_opts_string(o, "library", &lib, err);
    if (!rc && !crl_opts_is_set(o, "library"))
        rc = ffi_sig_error(o, "library", err, "required: the library holding the function (a path or a soname)");
    if (!rc)
        rc = crl_opts_string(o, "calls", &calls, err);
    if (!rc)
        rc = crl_opts_bool(o, "check_nan", &t->check_nan, err);
    if (!rc)
        rc = crl_opts_string(o, "out_dtype", &dt, err);
    if (!rc && (!crl_dtype_from_name(dt, &t->out_dtype) || t->out_dtype == CRL_F16))
        rc = ffi_sig_error(o, "out_dtype", err, "'%s' is not a dtype forward can write: use float32, float64, int8, "
                           "int16, int32, int64, uint8 or bool", dt);
    t->batch = !rc && !strcmp(calls, "batch");
    for (int j = 0; j < FN_COUNT && !rc; j++) {
        if (!crl_opts_is_set(o, fn_keys[j])) {
            if (j == FN_FORWARD)
                rc = ffi_sig_error(o, "forward", err, "required: the C signature of the function from in to out");
            continue;
        }
        const char *sig;
        ffi_sig_rules rules = fn_rules(j);
        rc = crl_opts_string(o, fn_keys[j], &sig, err);
        if (!rc)
            rc = ffi_sig_parse(o, fn_keys[j], sig, &rules, &t->fns[j], err);
        t->have[j] = !rc;
    }
    if (!rc && t->have[FN_FREE] && !t->have[FN_MAKE])
        rc = ffi_sig_error(o, "free", err, "free without make: there is no handle to free");
    if (!rc)
        rc = check_fns(t, o, err);
    if (!rc)
        rc = read_out_shape(t, o, err);
    t->bounded = crl_opts_is_set(o, "out_low") || crl_opts_is_set(o, "out_high");
    t->out_low = -INFINITY;
    t->out_high = INFINITY;
    if (!rc && crl_opts_is_set(o, "out_low"))
        rc = crl_opts_double(o, "out_low", &t->out_low, err);
    if (!rc && crl_opts_is_set(o, "out_high"))
        rc = crl_opts_double(o, "out_high", &t->out_high, err);
    if (!rc && !(t->out_low < t->out_high))
        rc = ffi_sig_error(o, "out_high", err, "out_low (%g) must be below out_high (%g)", t->out_low, t->out_high);
    if (!rc)
        rc = tf_keys_read(o, "in_keys", "out_keys", false, "FunctionTransform", &t->keys, err);
    if (!rc && !(t->lib_name = tf_strdup(lib)))
        rc = crl_error_set(err, CRL_E_NOMEM, "FunctionTransform: out of memory");
    if (!rc)
        rc = ffi_sig_open(o, "library", lib, &t->lib, err);
    for (int j = 0; j < FN_COUNT && !rc; j++)
        if (t->have[j])
            rc = ffi_sig_bind(o, t->lib, lib, &t->fns[j], err);
    if (!rc && t->have[FN_MAKE]) {
        ffi_retval rv;
        rc = call_fn(t, &t->fns[FN_MAKE], 0, 1, &rv, err);
        if (!rc && !rv.p)
            rc = crl_error_set(err, CRL_E_RUNTIME, "%s: %s returned a NULL handle", t->name, t->fns[FN_MAKE].symbol);
        t->handle = rc ? NULL : rv.p;
    }
    if (rc) {
        fnt_destroy(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

/* The output row's shape for an input row of `ndim` sizes `shape`. */
static const int64_t *out_row(const fnt *t, int ndim, const int64_t *shape, int *ondim)
{
    *ondim = t->out_ndim >= 0 ? t->out_ndim : ndim;
    return t->out_ndim >= 0 ? t->out_shape : shape;
}

static int64_t prod(int n, const int64_t *s)
{
    int64_t p = 1;
    for (int k = 0; k < n; k++)
        p *= s[k];
    return p;
}

static int check_in_row(const fnt *t, const char *key, int ndim, const int64_t *shape, crl_error *err)
{
    const arg *in = &t->fns[FN_FORWARD].args[t->in_arg];
    if (!in->ndims)
        return CRL_OK;
    bool same = in->ndims == ndim;
    for (int k = 0; same && k < ndim; k++)
        same = in->dims[k] == shape[k];
    if (same)
        return CRL_OK;
    char got[96] = "", want[96] = "";
    for (int k = 0; k < ndim; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)shape[k]);
    for (int k = 0; k < in->ndims; k++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k ? ", " : "", (long long)in->dims[k]);
    return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' has per-row shape [%s], but forward declares in[%s]; fix "
                         "the signature or in_keys", t->name, key, got, want);
}

static int fnt_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    fnt *t = p;
    crl_error e;
    crl_error_clear(&e);
    for (size_t i = 0; i < t->keys.n; i++) {
        crl_spec *leaf = tf_specs_need(s, t->keys.in[i], t->name, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        if (crl_spec_dtype(leaf) == CRL_DTYPE_COUNT || crl_spec_dtype(leaf) == CRL_F16)
            return crl_error_set(err, CRL_E_DTYPE, "%s: key '%s' is not a tensor of a type forward can read",
                                 t->name, t->keys.in[i]);
        int nd = crl_spec_ndim(leaf) - s->batch_ndim;
        if (nd < 0)
            return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' has fewer dims than the batch", t->name,
                                 t->keys.in[i]);
        const int64_t *row = crl_spec_shape(leaf) + s->batch_ndim;
        int rc = check_in_row(t, t->keys.in[i], nd, row, err);
        if (rc)
            return rc;
        int ond;
        const int64_t *orow = out_row(t, nd, row, &ond);
        int64_t full[2 * FFI_MAX_DIMS + 8];
        if (s->batch_ndim + ond > (int)(sizeof full / sizeof full[0]))
            return crl_error_set(err, CRL_E_SHAPE, "%s: too many dims", t->name);
        memcpy(full, s->batch_shape, (size_t)s->batch_ndim * sizeof *full);
        memcpy(full + s->batch_ndim, orow, (size_t)ond * sizeof *full);
        crl_spec *c = t->bounded ? crl_spec_bounded(t->out_dtype, s->batch_ndim + ond, full, t->out_low, t->out_high,
                                                    &e)
                                 : crl_spec_unbounded(t->out_dtype, s->batch_ndim + ond, full, &e);
        if (!c)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        if ((rc = tf_specs_put(s, t->keys.out[i], c, err)))
            return rc;
    }
    return CRL_OK;
}

static int grow(void **buf, size_t *cap, size_t need, const char *who, crl_error *err)
{
    if (need <= *cap)
        return CRL_OK;
    void *n = realloc(*buf, need);
    if (!n)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory (%zu bytes of staging)", who, need);
    *buf = n;
    *cap = need;
    return CRL_OK;
}

/* td[out_key] = forward(td[in_key]) row by row (or in one call). */
static int apply(fnt *t, crl_td *td, const char *in_key, const char *out_key, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, in_key, t->name, &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    crl_dtype xdt = crl_tensor_dtype(x);
    if (xdt == CRL_F16)
        return crl_error_set(err, CRL_E_DTYPE, "%s: key '%s' is float16, which forward cannot read", t->name, in_key);
    int bnd = crl_td_batch_ndim(td);
    const int64_t *bshape = crl_td_batch_shape(td);
    int nd = crl_tensor_ndim(x) - bnd;
    if (nd < 0)
        return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' has fewer dims than the TensorDict's batch", t->name,
                             in_key);
    const int64_t *row = crl_tensor_shape(x) + bnd;
    int rc = check_in_row(t, in_key, nd, row, err);
    if (rc)
        return rc;
    int ond;
    const int64_t *orow = out_row(t, nd, row, &ond);
    const int64_t rows = prod(bnd, bshape), in_n = prod(nd, row), out_n = prod(ond, orow);
    int64_t full[2 * FFI_MAX_DIMS + 8];
    if (bnd + ond > (int)(sizeof full / sizeof full[0]))
        return crl_error_set(err, CRL_E_SHAPE, "%s: too many dims", t->name);
    memcpy(full, bshape, (size_t)bnd * sizeof *full);
    memcpy(full + bnd, orow, (size_t)ond * sizeof *full);

    /* Keep x alive and readable even when the output replaces or overwrites it. */
    crl_tensor *xc = crl_tensor_contiguous(x, &e);
    if (!xc)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    arg *ia = &t->fns[FN_FORWARD].args[t->in_arg], *oa = &t->fns[FN_FORWARD].args[t->out_arg];
    crl_tensor *y = crl_transform_output(td, out_key, t->out_dtype, bnd + ond, full, &e);
    if (!y) {
        crl_tensor_unref(xc);
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    const char *xd = crl_tensor_data(xc);
    char *yd = crl_tensor_data(y);
    const bool alias = (const void *)xd == (void *)yd;
    const bool stage_in = alias || !ffi_same_repr(xdt, ia->type);
    const bool stage_out = !ffi_same_repr(t->out_dtype, oa->type);
    const size_t isz = ffi_ctypes[ia->type].size, osz = ffi_ctypes[oa->type].size;
    if (stage_in)
        rc = grow(&t->in_stage, &t->in_cap, (size_t)(rows * in_n) * isz, t->name, err);
    if (!rc && stage_out)
        rc = grow(&t->out_stage, &t->out_cap, (size_t)(rows * out_n) * osz, t->name, err);
    if (!rc && stage_in)
        ffi_to_c(xdt, xd, ia->type, t->in_stage, rows * in_n);
    const char *ibase = stage_in ? t->in_stage : xd;
    char *obase = stage_out ? t->out_stage : yd;
    const int64_t calls = t->batch ? 1 : rows, span = t->batch ? rows : 1;
    for (int64_t r = 0; r < calls && !rc; r++) {
        ia->value.p = (void *)(uintptr_t)(ibase + (size_t)(r * in_n) * isz);
        oa->value.p = obase + (size_t)(r * out_n) * osz;
        ffi_retval rv;
        rc = call_fn(t, &t->fns[FN_FORWARD], r, span, &rv, err);
    }
    if (!rc) {
        int64_t m = ffi_from_c(oa->type, obase, t->out_dtype, yd, rows * out_n, t->check_nan);
        if (m >= 0)
            rc = crl_error_set(err, CRL_E_RUNTIME, "%s: %s wrote NaN into %s[%lld] of row %lld", t->name,
                               t->fns[FN_FORWARD].symbol, out_key, (long long)(m % out_n), (long long)(m / out_n));
    }
    crl_tensor_unref(xc);
    return rc;
}

static int fnt_call(void *p, crl_td *td, crl_error *err)
{
    fnt *t = p;
    for (size_t i = 0; i < t->keys.n; i++) {
        int rc = apply(t, td, t->keys.in[i], t->keys.out[i], err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static const crl_transform_ops fnt_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = fnt_create,
    .transform_specs = fnt_specs,
    .call = fnt_call,
    .destroy = fnt_destroy,
};

int tf_register_function(crl_host *host, crl_error *err)
{
    return tf_register(host, "FunctionTransform",
                       "an observation transform whose forward is a C function from a library, described like the "
                       "ffi env backend's functions and called through libffi",
                       fn_options, &fnt_ops, err);
}
