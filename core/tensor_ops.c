/* crl_tensor operations: clone, contiguous, reshape, cast, broadcasting copy, fill, element access, equal. */
#include "tensor-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ---- element readers and writers --------------------------------------- */

/* Integers read as int64 (exact), floats as double; _Generic on the reader's
 * return type picks the matching writer, so int->int stays exact. */
static inline int64_t rd_b8(const char *p) { return *(const uint8_t *)p != 0; }
static inline int64_t rd_u8(const char *p) { return *(const uint8_t *)p; }
static inline int64_t rd_i8(const char *p) { return *(const int8_t *)p; }
static inline int64_t rd_i16(const char *p) { int16_t v; memcpy(&v, p, sizeof v); return v; }
static inline int64_t rd_i32(const char *p) { int32_t v; memcpy(&v, p, sizeof v); return v; }
static inline int64_t rd_i64(const char *p) { int64_t v; memcpy(&v, p, sizeof v); return v; }
static inline double rd_f16(const char *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return crl__half_to_float(h);
}
static inline double rd_f32(const char *p) { float v; memcpy(&v, p, sizeof v); return v; }
static inline double rd_f64(const char *p) { double v; memcpy(&v, p, sizeof v); return v; }

/* Float to integer truncates toward zero as C does; NaN and out-of-range
 * values, undefined in C, become 0 and the int64 limits. */
static inline int64_t f2i(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static inline void wr_b8_i(char *p, int64_t v) { *(uint8_t *)p = v != 0; }
static inline void wr_b8_f(char *p, double v) { *(uint8_t *)p = v != 0; }
#define WR_INT(name, type)                                                                  \
    static inline void wr_##name##_i(char *p, int64_t v)                                    \
    {                                                                                       \
        type x = (type)v;                                                                   \
        memcpy(p, &x, sizeof x);                                                            \
    }                                                                                       \
    static inline void wr_##name##_f(char *p, double v)                                     \
    {                                                                                       \
        type x = (type)f2i(v);                                                              \
        memcpy(p, &x, sizeof x);                                                            \
    }
WR_INT(u8, uint8_t)
WR_INT(i8, int8_t)
WR_INT(i16, int16_t)
WR_INT(i32, int32_t)
WR_INT(i64, int64_t)
static inline void wr_f16_i(char *p, int64_t v)
{
    uint16_t h = crl__double_to_half((double)v);
    memcpy(p, &h, sizeof h);
}
static inline void wr_f16_f(char *p, double v)
{
    uint16_t h = crl__double_to_half(v);
    memcpy(p, &h, sizeof h);
}
static inline void wr_f32_i(char *p, int64_t v) { float x = (float)v; memcpy(p, &x, sizeof x); }
static inline void wr_f32_f(char *p, double v) { float x = (float)v; memcpy(p, &x, sizeof x); }
static inline void wr_f64_i(char *p, int64_t v) { double x = (double)v; memcpy(p, &x, sizeof x); }
static inline void wr_f64_f(char *p, double v) { memcpy(p, &v, sizeof v); }

/* Inner-row kernels: n elements with byte strides; false stops the walk. */
typedef bool (*row_fn)(char *d, ptrdiff_t ds, const char *s, ptrdiff_t ss, int64_t n);

/* In crl_dtype order. */
#define DTYPES(X) X(b8) X(u8) X(i8) X(i16) X(i32) X(i64) X(f16) X(f32) X(f64)
#define DTYPES2(X, S) X(S, b8) X(S, u8) X(S, i8) X(S, i16) X(S, i32) X(S, i64) X(S, f16) X(S, f32) X(S, f64)

#define DEF_CONV(S, D)                                                                      \
    static bool conv_##S##_##D(char *d, ptrdiff_t ds, const char *s, ptrdiff_t ss, int64_t n) \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++, d += ds, s += ss)                                   \
            _Generic(rd_##S(s), int64_t: wr_##D##_i, double: wr_##D##_f)(d, rd_##S(s));    \
        return true;                                                                        \
    }
#define DEF_CONV_ROW(S) DTYPES2(DEF_CONV, S)
DTYPES(DEF_CONV_ROW)

#define CONV_ENTRY(S, D) conv_##S##_##D,
#define CONV_ROW(S) {DTYPES2(CONV_ENTRY, S)},
static const row_fn conv_table[CRL_DTYPE_COUNT][CRL_DTYPE_COUNT] = {DTYPES(CONV_ROW)};

/* Same-dtype rows move bytes: exact for every dtype, NaN payloads included. */
#define DEF_COPY(N)                                                                         \
    static bool copy##N(char *d, ptrdiff_t ds, const char *s, ptrdiff_t ss, int64_t n)      \
    {                                                                                       \
        if (ds == N && ss == N) {                                                           \
            memmove(d, s, (size_t)n * N);                                                   \
            return true;                                                                    \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++, d += ds, s += ss)                                   \
            memcpy(d, s, N);                                                                \
        return true;                                                                        \
    }
DEF_COPY(1)
DEF_COPY(2)
DEF_COPY(4)
DEF_COPY(8)

static row_fn copy_fn(size_t size)
{
    switch (size) {
    case 1: return copy1;
    case 2: return copy2;
    case 4: return copy4;
    default: return copy8;
    }
}

/* Equality rows (same dtype): values compare, so NaN != NaN and -0 == 0. */
#define DEF_EQ(S)                                                                           \
    static bool eq_##S(char *a, ptrdiff_t as, const char *b, ptrdiff_t bs, int64_t n)       \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++, a += as, b += bs)                                   \
            if (!(rd_##S(a) == rd_##S(b)))                                                  \
                return false;                                                               \
        return true;                                                                        \
    }
DTYPES(DEF_EQ)
#define EQ_ENTRY(S) eq_##S,
static const row_fn eq_table[CRL_DTYPE_COUNT] = {DTYPES(EQ_ENTRY)};

static double load(crl_dtype dt, const char *p)
{
    switch (dt) {
    case CRL_BOOL: return (double)rd_b8(p);
    case CRL_U8: return (double)rd_u8(p);
    case CRL_I8: return (double)rd_i8(p);
    case CRL_I16: return (double)rd_i16(p);
    case CRL_I32: return (double)rd_i32(p);
    case CRL_I64: return (double)rd_i64(p);
    case CRL_F16: return rd_f16(p);
    case CRL_F32: return rd_f32(p);
    case CRL_F64: return rd_f64(p);
    default: return NAN;
    }
}

static void store(crl_dtype dt, char *p, double v)
{
    switch (dt) {
    case CRL_BOOL: wr_b8_f(p, v); break;
    case CRL_U8: wr_u8_f(p, v); break;
    case CRL_I8: wr_i8_f(p, v); break;
    case CRL_I16: wr_i16_f(p, v); break;
    case CRL_I32: wr_i32_f(p, v); break;
    case CRL_I64: wr_i64_f(p, v); break;
    case CRL_F16: wr_f16_f(p, v); break;
    case CRL_F32: wr_f32_f(p, v); break;
    case CRL_F64: wr_f64_f(p, v); break;
    default: break;
    }
}

/* ---- strided walk ------------------------------------------------------ */

/* Visit every element of `shape` with two byte-stride sets, one row at a
 * time.  Size-1 dims are dropped and dims that are contiguous with their
 * inner neighbour in both operands merged, so a contiguous copy is one row. */
static bool walk2(int ndim, const int64_t *shape, char *d, const int64_t *dstr, const char *s,
                  const int64_t *sstr, row_fn fn)
{
    int64_t sh[CRL_MAX_DIMS], a[CRL_MAX_DIMS], b[CRL_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return true;
        if (shape[i] == 1)
            continue;
        if (n > 0 && a[n - 1] == dstr[i] * shape[i] && b[n - 1] == sstr[i] * shape[i]) {
            sh[n - 1] *= shape[i];
            a[n - 1] = dstr[i];
            b[n - 1] = sstr[i];
            continue;
        }
        sh[n] = shape[i];
        a[n] = dstr[i];
        b[n] = sstr[i];
        n++;
    }
    if (n == 0)
        return fn(d, 0, s, 0, 1);
    int64_t idx[CRL_MAX_DIMS] = {0};
    for (;;) {
        if (!fn(d, (ptrdiff_t)a[n - 1], s, (ptrdiff_t)b[n - 1], sh[n - 1]))
            return false;
        int k = n - 2;
        for (; k >= 0; k--) {
            d += a[k];
            s += b[k];
            if (++idx[k] < sh[k])
                break;
            d -= a[k] * sh[k];
            s -= b[k] * sh[k];
            idx[k] = 0;
        }
        if (k < 0)
            return true;
    }
}

static void byte_strides(const crl_tensor *t, int64_t *out)
{
    int64_t es = (int64_t)crl_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++)
        out[i] = t->strides[i] * es;
}

/* ---- copies ------------------------------------------------------------ */

int crl_tensor_copy(crl_tensor *dst, const crl_tensor *src, crl_error *err)
{
    if (!dst || !src)
        return crl_error_set(err, CRL_E_INVALID, "copy: %s tensor is NULL",
                             dst ? "source" : "destination");
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    int64_t ds[CRL_MAX_DIMS], ss[CRL_MAX_DIMS];
    int lead = dst->ndim - src->ndim;
    int64_t ses = (int64_t)crl_dtype_size(src->dtype);
    bool ok = lead >= 0;
    for (int i = 0; ok && i < dst->ndim; i++) {
        if (i < lead) {
            ss[i] = 0;
            continue;
        }
        int j = i - lead;
        if (src->shape[j] == dst->shape[i])
            ss[i] = src->strides[j] * ses;
        else if (src->shape[j] == 1)
            ss[i] = 0;
        else
            ok = false;
    }
    if (!ok)
        return crl_error_set(err, CRL_E_SHAPE,
                             "copy: expected shape %s (or one that broadcasts to it) but got %s",
                             crl__shape_fmt(b, dst->ndim, dst->shape),
                             crl__shape_fmt(c, src->ndim, src->shape));
    if (src->dtype == dst->dtype && crl_tensor_same_shape(src, dst) &&
        crl_tensor_is_contiguous(src) && crl_tensor_is_contiguous(dst)) {
        size_t n = crl_tensor_nbytes(dst);
        if (n && dst->data != src->data)
            memmove(dst->data, src->data, n);
        return CRL_OK;
    }
    byte_strides(dst, ds);
    row_fn fn = src->dtype == dst->dtype ? copy_fn(crl_dtype_size(dst->dtype))
                                         : conv_table[src->dtype][dst->dtype];
    walk2(dst->ndim, dst->shape, dst->data, ds, src->data, ss, fn);
    return CRL_OK;
}

void crl_tensor_fill(crl_tensor *t, double value)
{
    if (!t)
        return;
    char one[8];
    size_t es = crl_dtype_size(t->dtype);
    store(t->dtype, one, value);
    bool same_bytes = true;
    for (size_t i = 1; i < es; i++)
        same_bytes &= one[i] == one[0];
    if (same_bytes && crl_tensor_is_contiguous(t)) {
        memset(t->data, one[0], crl_tensor_nbytes(t));
        return;
    }
    int64_t ds[CRL_MAX_DIMS], zero[CRL_MAX_DIMS] = {0};
    byte_strides(t, ds);
    walk2(t->ndim, t->shape, t->data, ds, one, zero, copy_fn(es));
}

crl_tensor *crl_tensor_clone(const crl_tensor *t, crl_error *err)
{
    return crl_tensor_cast(t, t ? t->dtype : CRL_F32, err);
}

crl_tensor *crl_tensor_contiguous(crl_tensor *t, crl_error *err)
{
    if (!t) {
        crl_error_set(err, CRL_E_INVALID, "contiguous: tensor is NULL");
        return NULL;
    }
    if (crl_tensor_is_contiguous(t))
        return crl_tensor_ref(t);
    return crl_tensor_clone(t, err);
}

/* A view when the strides allow one, else a view of a contiguous copy (here, not in tensor.c: it copies). */
crl_tensor *crl_tensor_reshape(crl_tensor *t, int ndim, const int64_t *shape, crl_error *err)
{
    if (!t) {
        crl_error_set(err, CRL_E_INVALID, "crl_tensor_reshape: tensor is NULL");
        return NULL;
    }
    int64_t s[CRL_MAX_DIMS], st[CRL_MAX_DIMS];
    if (crl__tensor_infer_shape("reshape", t, ndim, shape, s, err))
        return NULL;
    if (crl__tensor_view_strides(t, ndim, s, st))
        return crl__tensor_view_of(t, ndim, s, st, t->data);
    crl_tensor *c = crl_tensor_clone(t, err);
    if (!c)
        return NULL;
    crl_tensor *v = crl_tensor_view(c, ndim, s, err);
    crl_tensor_unref(c);
    return v;
}

crl_tensor *crl_tensor_cast(const crl_tensor *t, crl_dtype dt, crl_error *err)
{
    if (!t) {
        crl_error_set(err, CRL_E_INVALID, "cast: tensor is NULL");
        return NULL;
    }
    if ((unsigned)dt >= CRL_DTYPE_COUNT) {
        crl_error_set(err, CRL_E_INVALID, "cast: invalid dtype %d (expected 0..%d)", (int)dt,
                      CRL_DTYPE_COUNT - 1);
        return NULL;
    }
    crl_tensor *out = crl_tensor_new(dt, t->ndim, t->shape, err);
    if (!out)
        return NULL;
    if (crl_tensor_copy(out, t, err)) {
        crl_tensor_unref(out);
        return NULL;
    }
    return out;
}

/* ---- element access ---------------------------------------------------- */

/* Byte offset of a full index, or false when it is out of range. */
static bool index_offset(const crl_tensor *t, const int64_t *idx, ptrdiff_t *off)
{
    if (t->ndim > 0 && !idx)
        return false;
    int64_t o = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t j = idx[i] < 0 ? idx[i] + t->shape[i] : idx[i];
        if (j < 0 || j >= t->shape[i])
            return false;
        o += j * t->strides[i];
    }
    *off = (ptrdiff_t)(o * (int64_t)crl_dtype_size(t->dtype));
    return true;
}

static bool flat_offset(const crl_tensor *t, int64_t pos, ptrdiff_t *off)
{
    if (pos < 0 || pos >= crl_tensor_numel(t))
        return false;
    int64_t o = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        o += (pos % t->shape[i]) * t->strides[i];
        pos /= t->shape[i];
    }
    *off = (ptrdiff_t)(o * (int64_t)crl_dtype_size(t->dtype));
    return true;
}

double crl_tensor_get_f64(const crl_tensor *t, const int64_t *idx)
{
    ptrdiff_t off;
    if (!t || !index_offset(t, idx, &off))
        return NAN;
    return load(t->dtype, t->data + off);
}

void crl_tensor_set_f64(crl_tensor *t, const int64_t *idx, double v)
{
    ptrdiff_t off;
    if (t && index_offset(t, idx, &off))
        store(t->dtype, t->data + off, v);
}

double crl_tensor_flat_get(const crl_tensor *t, int64_t pos)
{
    ptrdiff_t off;
    if (!t || !flat_offset(t, pos, &off))
        return NAN;
    return load(t->dtype, t->data + off);
}

void crl_tensor_flat_set(crl_tensor *t, int64_t pos, double v)
{
    ptrdiff_t off;
    if (t && flat_offset(t, pos, &off))
        store(t->dtype, t->data + off, v);
}

bool crl_tensor_equal(const crl_tensor *a, const crl_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !crl_tensor_same_shape(a, b))
        return false;
    bool integer = !crl_dtype_is_float(a->dtype) && a->dtype != CRL_BOOL;
    if (integer && crl_tensor_is_contiguous(a) && crl_tensor_is_contiguous(b))
        return memcmp(a->data, b->data, crl_tensor_nbytes(a)) == 0;
    int64_t as[CRL_MAX_DIMS], bs[CRL_MAX_DIMS];
    byte_strides(a, as);
    byte_strides(b, bs);
    return walk2(a->ndim, a->shape, a->data, as, b->data, bs, eq_table[a->dtype]);
}
