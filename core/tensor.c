/* crl_tensor: storage (heap, shared memfd, mmap file, external), refcounts, accessors, views, repr. */
#define _GNU_SOURCE
#include "tensor-private.h"
#include "file-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- dtypes ------------------------------------------------------------ */

static const size_t dtype_sizes[CRL_DTYPE_COUNT] = {1, 1, 1, 2, 4, 8, 2, 4, 8};
static const char *const dtype_names[CRL_DTYPE_COUNT] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
};

size_t crl_dtype_size(crl_dtype dt)
{
    return (unsigned)dt < CRL_DTYPE_COUNT ? dtype_sizes[dt] : 0;
}

const char *crl_dtype_name(crl_dtype dt)
{
    return (unsigned)dt < CRL_DTYPE_COUNT ? dtype_names[dt] : NULL;
}

bool crl_dtype_is_float(crl_dtype dt)
{
    return dt == CRL_F16 || dt == CRL_F32 || dt == CRL_F64;
}

bool crl_dtype_from_name(const char *name, crl_dtype *out)
{
    static const struct { const char *name; crl_dtype dt; } aliases[] = {
        {"bool", CRL_BOOL},     {"b8", CRL_BOOL},
        {"uint8", CRL_U8},      {"u8", CRL_U8},      {"byte", CRL_U8},
        {"int8", CRL_I8},       {"i8", CRL_I8},      {"char", CRL_I8},
        {"int16", CRL_I16},     {"i16", CRL_I16},    {"short", CRL_I16},
        {"int32", CRL_I32},     {"i32", CRL_I32},    {"int", CRL_I32},
        {"int64", CRL_I64},     {"i64", CRL_I64},    {"long", CRL_I64},
        {"float16", CRL_F16},   {"f16", CRL_F16},    {"half", CRL_F16},
        {"float32", CRL_F32},   {"f32", CRL_F32},    {"float", CRL_F32},
        {"float64", CRL_F64},   {"f64", CRL_F64},    {"double", CRL_F64},
    };
    if (!name)
        return false;
    if (g_ascii_strncasecmp(name, "torch.", 6) == 0)
        name += 6;
    for (size_t i = 0; i < G_N_ELEMENTS(aliases); i++) {
        if (g_ascii_strcasecmp(name, aliases[i].name) == 0) {
            if (out)
                *out = aliases[i].dt;
            return true;
        }
    }
    return false;
}

/* ---- shapes ------------------------------------------------------------ */

char *crl__shape_fmt(char *buf, int ndim, const int64_t *shape)
{
    size_t n = 0;
    buf[n++] = '[';
    for (int i = 0; i < ndim && i < CRL_MAX_DIMS; i++)
        n += (size_t)snprintf(buf + n, CRL__SHAPE_BUF - n, "%s%" PRId64, i ? ", " : "",
                              shape[i]);
    buf[n++] = ']';
    buf[n] = '\0';
    return buf;
}

char *crl_shape_repr(int ndim, const int64_t *shape)
{
    char buf[CRL__SHAPE_BUF];
    if (ndim < 0 || ndim > CRL_MAX_DIMS || (ndim > 0 && !shape))
        return g_strdup("torch.Size(<invalid>)");
    return g_strdup_printf("torch.Size(%s)", crl__shape_fmt(buf, ndim, shape));
}

/* Checks dtype/ndim/dims and computes the element count. */
static int check_layout(const char *what, crl_dtype dt, int ndim, const int64_t *shape,
                        int64_t *numel, crl_error *err)
{
    if ((unsigned)dt >= CRL_DTYPE_COUNT)
        return crl_error_set(err, CRL_E_INVALID, "%s: invalid dtype %d (expected 0..%d)", what,
                             (int)dt, CRL_DTYPE_COUNT - 1);
    if (ndim < 0 || ndim > CRL_MAX_DIMS)
        return crl_error_set(err, CRL_E_INVALID, "%s: ndim %d is out of range (0..%d)", what,
                             ndim, CRL_MAX_DIMS);
    if (ndim > 0 && !shape)
        return crl_error_set(err, CRL_E_INVALID, "%s: shape is NULL but ndim is %d", what, ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char b[CRL__SHAPE_BUF];
            return crl_error_set(err, CRL_E_INVALID,
                                 "%s: dim %d of shape %s is negative (%" PRId64 ")", what, i,
                                 crl__shape_fmt(b, ndim, shape), shape[i]);
        }
        if (__builtin_mul_overflow(n, shape[i], &n)) {
            char b[CRL__SHAPE_BUF];
            return crl_error_set(err, CRL_E_INVALID, "%s: shape %s has too many elements", what,
                                 crl__shape_fmt(b, ndim, shape));
        }
    }
    int64_t bytes;
    if (__builtin_mul_overflow(n, (int64_t)dtype_sizes[dt], &bytes) || (uint64_t)bytes > SIZE_MAX / 2) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_INVALID, "%s: shape %s is too large", what,
                             crl__shape_fmt(b, ndim, shape));
    }
    *numel = n;
    return CRL_OK;
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

/* ---- storage ----------------------------------------------------------- */

static void storage_unref(crl__storage *s)
{
    if (!s || !g_atomic_int_dec_and_test(&s->refcount))
        return;
    switch (s->kind) {
    case CRL_STORAGE_HEAP:
        free(s->base);
        break;
    case CRL_STORAGE_SHARED:
    case CRL_STORAGE_MMAP:
        if (s->map_len)
            munmap(s->base, s->map_len);
        else
            g_free(s->base);
        if (s->kind == CRL_STORAGE_SHARED && s->fd >= 0)
            close(s->fd);
        break;
    case CRL_STORAGE_EXTERNAL:
        if (s->release)
            s->release(s->user);
        break;
    }
    g_free(s);
}

/* A contiguous tensor over a fresh storage record (the caller fills it). */
static crl_tensor *tensor_over(crl__storage *s, crl_dtype dt, int ndim, const int64_t *shape,
                               const int64_t *strides, char *data)
{
    crl_tensor *t = g_new0(crl_tensor, 1);
    t->refcount = 1;
    t->dtype = dt;
    t->ndim = ndim;
    t->device.type = CRL_DEVICE_CPU;
    t->device.index = 0;
    if (ndim > 0) {
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
        if (strides)
            memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
        else
            contiguous_strides(ndim, shape, t->strides);
    }
    t->data = data;
    t->storage = s;
    return t;
}

crl_tensor *crl__tensor_view_of(crl_tensor *t, int ndim, const int64_t *shape,
                                const int64_t *strides, char *data)
{
    g_atomic_int_inc(&t->storage->refcount);
    return tensor_over(t->storage, t->dtype, ndim, shape, strides, data);
}

crl_tensor *crl__tensor_carve(crl_tensor *t, crl_dtype dt, int ndim, const int64_t *shape, char *data)
{
    g_atomic_int_inc(&t->storage->refcount);
    return tensor_over(t->storage, dt, ndim, shape, NULL, data);
}

crl_tensor *crl_tensor_new(crl_dtype dt, int ndim, const int64_t *shape, crl_error *err)
{
    int64_t numel;
    if (check_layout("crl_tensor_new", dt, ndim, shape, &numel, err))
        return NULL;
    size_t bytes = (size_t)numel * dtype_sizes[dt];
    /* 64-byte alignment suits SIMD loops and cache lines. */
    size_t alloc = (bytes + 63) & ~(size_t)63;
    if (alloc == 0)
        alloc = 64;
    void *p = aligned_alloc(64, alloc);
    if (!p) {
        char b[CRL__SHAPE_BUF];
        crl_error_set(err, CRL_E_NOMEM, "crl_tensor_new: cannot allocate %zu bytes for a %s tensor of shape %s",
                      bytes, dtype_names[dt], crl__shape_fmt(b, ndim, shape));
        return NULL;
    }
    memset(p, 0, alloc);
    crl__storage *s = g_new0(crl__storage, 1);
    s->refcount = 1;
    s->kind = CRL_STORAGE_HEAP;
    s->base = p;
    return tensor_over(s, dt, ndim, shape, NULL, p);
}

crl_tensor *crl_tensor_new_shared(crl_dtype dt, int ndim, const int64_t *shape, crl_error *err)
{
    int64_t numel;
    if (check_layout("crl_tensor_new_shared", dt, ndim, shape, &numel, err))
        return NULL;
    size_t bytes = (size_t)numel * dtype_sizes[dt];
    size_t len = bytes ? bytes : 1;
    void *p = MAP_FAILED;
    int fd = memfd_create("crl-tensor", MFD_CLOEXEC);
    if (fd >= 0) {
        if (ftruncate(fd, (off_t)len) == 0)
            p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        /* Forked children inherit the mapping; the fd stays open for workers that exec a program of their
         * own (the processes executor's Python workers), which map it again. */
        if (p == MAP_FAILED) {
            int saved = errno;
            close(fd);
            fd = -1;
            errno = saved;
        }
    } else if (errno == ENOSYS) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    }
    if (p == MAP_FAILED) {
        int e = errno;
        char b[CRL__SHAPE_BUF];
        crl_error_set(err, e == ENOMEM || e == ENOSPC ? CRL_E_NOMEM : CRL_E_IO,
                      "crl_tensor_new_shared: cannot map %zu bytes of shared memory for shape %s: %s",
                      bytes, crl__shape_fmt(b, ndim, shape), g_strerror(e));
        return NULL;
    }
    crl__storage *s = g_new0(crl__storage, 1);
    s->refcount = 1;
    s->kind = CRL_STORAGE_SHARED;
    s->base = p;
    s->map_len = len;
    s->fd = fd;
    return tensor_over(s, dt, ndim, shape, NULL, p);
}

int crl__tensor_shared_fd(const crl_tensor *t, size_t *offset, size_t *map_len)
{
    if (!t || t->storage->kind != CRL_STORAGE_SHARED || t->storage->fd < 0)
        return -1;
    if (offset)
        *offset = (size_t)(t->data - (char *)t->storage->base);
    if (map_len)
        *map_len = t->storage->map_len;
    return t->storage->fd;
}

crl_tensor *crl_tensor_new_mmap(const char *path, bool create, crl_dtype dt, int ndim,
                                const int64_t *shape, crl_error *err)
{
    if (!path || !*path) {
        crl_error_set(err, CRL_E_INVALID, "crl_tensor_new_mmap: path is NULL or empty");
        return NULL;
    }
    int64_t numel;
    if (check_layout("crl_tensor_new_mmap", dt, ndim, shape, &numel, err)) {
        crl_error_prefix(err, "%s: ", path);
        return NULL;
    }
    size_t bytes = (size_t)numel * dtype_sizes[dt];
    char b[CRL__SHAPE_BUF];
    /* An existing file must be a regular one (a FIFO or device is refused without blocking). */
    struct stat st;
    crl_error oe;
    crl_error_clear(&oe);
    int fd = create ? open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                    : crl__file_open(path, CRL_FILE_RDWR, 0, &st, &oe);
    if (fd < 0) {
        if (create)
            crl_error_set(err, CRL_E_IO, "%s: cannot create memory-mapped tensor file: %s", path, g_strerror(errno));
        else
            crl_error_set(err, oe.code, "%s: cannot open memory-mapped tensor file: %s%s", path, oe.message,
                          oe.code == CRL_E_NOT_FOUND ? " (pass create=true to make a new one)" : "");
        return NULL;
    }
    if (create) {
        if (bytes > 0) {
            int rc = posix_fallocate(fd, 0, (off_t)bytes);
            if (rc == EOPNOTSUPP || rc == EINVAL)
                rc = ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
            if (rc != 0) {
                if (rc == ENOSPC)
                    crl_error_set(err, CRL_E_IO,
                                  "%s: not enough disk space for %zu bytes (%s tensor of shape %s); "
                                  "free space or put the file on another filesystem",
                                  path, bytes, dtype_names[dt], crl__shape_fmt(b, ndim, shape));
                else
                    crl_error_set(err, CRL_E_IO, "%s: cannot size file to %zu bytes: %s", path,
                                  bytes, g_strerror(rc));
                close(fd);
                unlink(path);
                return NULL;
            }
        }
    } else {
        if ((uint64_t)st.st_size != (uint64_t)bytes) {
            crl_error_set(err, CRL_E_SHAPE,
                          "%s: file holds %jd bytes but a %s tensor of shape %s needs %zu bytes; "
                          "check the shape and dtype, or recreate the file",
                          path, (intmax_t)st.st_size, dtype_names[dt],
                          crl__shape_fmt(b, ndim, shape), bytes);
            close(fd);
            return NULL;
        }
    }
    void *p;
    size_t map_len = bytes;
    if (bytes > 0) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            crl_error_set(err, e == ENOMEM ? CRL_E_NOMEM : CRL_E_IO, "%s: cannot mmap %zu bytes: %s",
                          path, bytes, g_strerror(e));
            close(fd);
            return NULL;
        }
    } else {
        p = g_malloc0(8); /* mmap rejects length 0; an empty tensor never reads it */
    }
    close(fd);
    crl__storage *s = g_new0(crl__storage, 1);
    s->refcount = 1;
    s->kind = CRL_STORAGE_MMAP;
    s->base = p;
    s->map_len = map_len;
    return tensor_over(s, dt, ndim, shape, NULL, p);
}

crl_tensor *crl_tensor_wrap(void *data, crl_dtype dt, int ndim, const int64_t *shape,
                            const int64_t *strides, void (*release)(void *user), void *user,
                            crl_error *err)
{
    int64_t numel;
    if (check_layout("crl_tensor_wrap", dt, ndim, shape, &numel, err))
        return NULL;
    if (!data && numel > 0) {
        crl_error_set(err, CRL_E_INVALID, "crl_tensor_wrap: data is NULL for %" PRId64 " elements",
                      numel);
        return NULL;
    }
    if (strides) {
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0) {
                crl_error_set(err, CRL_E_INVALID,
                              "crl_tensor_wrap: stride %" PRId64 " of dim %d is negative; "
                              "negative strides are not supported",
                              strides[i], i);
                return NULL;
            }
        }
    }
    crl__storage *s = g_new0(crl__storage, 1);
    s->refcount = 1;
    s->kind = CRL_STORAGE_EXTERNAL;
    s->base = data;
    s->release = release;
    s->user = user;
    return tensor_over(s, dt, ndim, shape, strides, data);
}

crl_tensor *crl_tensor_ref(crl_tensor *t)
{
    if (t)
        g_atomic_int_inc(&t->refcount);
    return t;
}

void crl_tensor_unref(crl_tensor *t)
{
    if (!t || !g_atomic_int_dec_and_test(&t->refcount))
        return;
    storage_unref(t->storage);
    g_free(t);
}

/* ---- accessors --------------------------------------------------------- */

crl_dtype crl_tensor_dtype(const crl_tensor *t) { return t ? t->dtype : CRL_DTYPE_COUNT; }
int crl_tensor_ndim(const crl_tensor *t) { return t ? t->ndim : 0; }
const int64_t *crl_tensor_shape(const crl_tensor *t) { return t ? t->shape : NULL; }
const int64_t *crl_tensor_strides(const crl_tensor *t) { return t ? t->strides : NULL; }
void *crl_tensor_data(const crl_tensor *t) { return t ? t->data : NULL; }

int64_t crl_tensor_numel(const crl_tensor *t)
{
    if (!t)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

size_t crl_tensor_nbytes(const crl_tensor *t)
{
    return t ? (size_t)crl_tensor_numel(t) * dtype_sizes[t->dtype] : 0;
}

bool crl_tensor_is_contiguous(const crl_tensor *t)
{
    return t && crl__tensor_contiguous(t);
}

crl_device crl_tensor_device(const crl_tensor *t)
{
    crl_device d = {CRL_DEVICE_CPU, 0};
    return t ? t->device : d;
}

crl_storage_kind crl_tensor_storage_kind(const crl_tensor *t)
{
    return t ? t->storage->kind : CRL_STORAGE_HEAP;
}

bool crl_tensor_is_shared(const crl_tensor *t)
{
    return t && (t->storage->kind == CRL_STORAGE_SHARED || t->storage->kind == CRL_STORAGE_MMAP);
}

bool crl_tensor_same_shape(const crl_tensor *a, const crl_tensor *b)
{
    if (!a || !b || a->ndim != b->ndim)
        return false;
    return memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* ---- views ------------------------------------------------------------- */

#define CHECK_T(fn)                                                                         \
    do {                                                                                    \
        if (!t) {                                                                           \
            crl_error_set(err, CRL_E_INVALID, fn ": tensor is NULL");                       \
            return NULL;                                                                    \
        }                                                                                   \
    } while (0)

static char *elem_ptr(const crl_tensor *t, int dim, int64_t i)
{
    return t->data + (ptrdiff_t)(i * t->strides[dim]) * (ptrdiff_t)dtype_sizes[t->dtype];
}

crl_tensor *crl_tensor_index(crl_tensor *t, int dim, int64_t i, crl_error *err)
{
    CHECK_T("crl_tensor_index");
    char b[CRL__SHAPE_BUF];
    int d = dim;
    if (!crl__norm_dim(&d, t->ndim)) {
        crl_error_set(err, CRL_E_RANGE,
                      "index: dim %d is out of range for a tensor of shape %s (valid: %d..%d)", dim,
                      crl__shape_fmt(b, t->ndim, t->shape), -t->ndim, t->ndim - 1);
        return NULL;
    }
    int64_t n = t->shape[d];
    int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) {
        crl_error_set(err, CRL_E_RANGE,
                      "index %" PRId64 " is out of range for dim %d of size %" PRId64
                      " (tensor shape %s)",
                      i, d, n, crl__shape_fmt(b, t->ndim, t->shape));
        return NULL;
    }
    int64_t shape[CRL_MAX_DIMS], strides[CRL_MAX_DIMS];
    int k = 0;
    for (int a = 0; a < t->ndim; a++) {
        if (a == d)
            continue;
        shape[k] = t->shape[a];
        strides[k++] = t->strides[a];
    }
    return crl__tensor_view_of(t, k, shape, strides, elem_ptr(t, d, j));
}

crl_tensor *crl_tensor_slice(crl_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
                             crl_error *err)
{
    CHECK_T("crl_tensor_slice");
    char b[CRL__SHAPE_BUF];
    int d = dim;
    if (!crl__norm_dim(&d, t->ndim)) {
        crl_error_set(err, CRL_E_RANGE,
                      "slice: dim %d is out of range for a tensor of shape %s (valid: %d..%d)", dim,
                      crl__shape_fmt(b, t->ndim, t->shape), -t->ndim, t->ndim - 1);
        return NULL;
    }
    if (step <= 0) {
        crl_error_set(err, CRL_E_INVALID, "slice: step %" PRId64 " of dim %d must be positive",
                      step, d);
        return NULL;
    }
    int64_t len = crl__slice_norm(t->shape[d], &start, &stop, step);
    int64_t shape[CRL_MAX_DIMS], strides[CRL_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[d] = len;
    strides[d] = t->strides[d] * step;
    return crl__tensor_view_of(t, t->ndim, shape, strides, len ? elem_ptr(t, d, start) : t->data);
}

int crl__tensor_infer_shape(const char *what, const crl_tensor *t, int ndim, const int64_t *in,
                            int64_t *out, crl_error *err)
{
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    if (ndim < 0 || ndim > CRL_MAX_DIMS)
        return crl_error_set(err, CRL_E_INVALID, "%s: ndim %d is out of range (0..%d)", what, ndim,
                             CRL_MAX_DIMS);
    if (ndim > 0 && !in)
        return crl_error_set(err, CRL_E_INVALID, "%s: shape is NULL but ndim is %d", what, ndim);
    int infer = -1;
    int64_t prod = 1;
    for (int i = 0; i < ndim; i++) {
        if (in[i] == -1) {
            if (infer >= 0)
                return crl_error_set(err, CRL_E_INVALID,
                                     "%s: shape %s has more than one -1 (dims %d and %d)", what,
                                     crl__shape_fmt(b, ndim, in), infer, i);
            infer = i;
        } else if (in[i] < 0) {
            return crl_error_set(err, CRL_E_INVALID, "%s: dim %d of shape %s is negative", what, i,
                                 crl__shape_fmt(b, ndim, in));
        } else if (__builtin_mul_overflow(prod, in[i], &prod)) {
            return crl_error_set(err, CRL_E_SHAPE, "%s: shape %s is too large", what,
                                 crl__shape_fmt(b, ndim, in));
        }
        out[i] = in[i];
    }
    int64_t numel = crl_tensor_numel(t);
    if (infer >= 0) {
        if (prod == 0 || numel % prod != 0)
            return crl_error_set(err, CRL_E_SHAPE,
                                 "%s: shape %s is invalid for a tensor of shape %s (%" PRId64
                                 " elements)",
                                 what, crl__shape_fmt(b, ndim, in),
                                 crl__shape_fmt(c, t->ndim, t->shape), numel);
        out[infer] = numel / prod;
    } else if (prod != numel) {
        return crl_error_set(err, CRL_E_SHAPE,
                             "%s: shape %s is invalid for a tensor of shape %s (%" PRId64
                             " elements)",
                             what, crl__shape_fmt(b, ndim, in), crl__shape_fmt(c, t->ndim, t->shape),
                             numel);
    }
    return CRL_OK;
}

bool crl__tensor_view_strides(const crl_tensor *t, int ndim, const int64_t *shape, int64_t *out)
{
    if (crl_tensor_numel(t) == 0 || t->ndim == 0) {
        contiguous_strides(ndim, shape, out);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = t->strides[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tensor_numel *= t->shape[td];
        if (td == 0 ||
            (t->shape[td - 1] != 1 && t->strides[td - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                out[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (td > 0) {
                chunk_base = t->strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

crl_tensor *crl_tensor_view(crl_tensor *t, int ndim, const int64_t *shape, crl_error *err)
{
    CHECK_T("crl_tensor_view");
    int64_t s[CRL_MAX_DIMS], st[CRL_MAX_DIMS];
    if (crl__tensor_infer_shape("view", t, ndim, shape, s, err))
        return NULL;
    if (!crl__tensor_view_strides(t, ndim, s, st)) {
        char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
        crl_error_set(err, CRL_E_SHAPE,
                      "view: a tensor of shape %s with these strides cannot be viewed as %s; "
                      "use crl_tensor_reshape (copies) or make it contiguous first",
                      crl__shape_fmt(b, t->ndim, t->shape), crl__shape_fmt(c, ndim, s));
        return NULL;
    }
    return crl__tensor_view_of(t, ndim, s, st, t->data);
}

crl_tensor *crl_tensor_permute(crl_tensor *t, const int *dims, crl_error *err)
{
    CHECK_T("crl_tensor_permute");
    if (t->ndim > 0 && !dims) {
        crl_error_set(err, CRL_E_INVALID, "permute: dims is NULL for a tensor with %d dims", t->ndim);
        return NULL;
    }
    int64_t shape[CRL_MAX_DIMS], strides[CRL_MAX_DIMS];
    bool seen[CRL_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = dims[i];
        if (!crl__norm_dim(&d, t->ndim)) {
            crl_error_set(err, CRL_E_RANGE, "permute: dim %d (position %d) is out of range for %d dims",
                          dims[i], i, t->ndim);
            return NULL;
        }
        if (seen[d]) {
            crl_error_set(err, CRL_E_INVALID,
                          "permute: dim %d appears more than once; pass each of the %d dims once", d,
                          t->ndim);
            return NULL;
        }
        seen[d] = true;
        shape[i] = t->shape[d];
        strides[i] = t->strides[d];
    }
    return crl__tensor_view_of(t, t->ndim, shape, strides, t->data);
}

crl_tensor *crl_tensor_expand(crl_tensor *t, int ndim, const int64_t *shape, crl_error *err)
{
    CHECK_T("crl_tensor_expand");
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    if (ndim < t->ndim || ndim > CRL_MAX_DIMS || (ndim > 0 && !shape)) {
        crl_error_set(err, CRL_E_SHAPE,
                      "expand: cannot expand a tensor of shape %s to %d dims (need %d..%d)",
                      crl__shape_fmt(b, t->ndim, t->shape), ndim, t->ndim, CRL_MAX_DIMS);
        return NULL;
    }
    int64_t s[CRL_MAX_DIMS], st[CRL_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        if (i < lead) {
            if (shape[i] < 0) {
                crl_error_set(err, CRL_E_SHAPE,
                              "expand: size %" PRId64 " at new leading dim %d of %s must be >= 0 "
                              "(-1 only keeps an existing dim)",
                              shape[i], i, crl__shape_fmt(b, ndim, shape));
                return NULL;
            }
            s[i] = shape[i];
            st[i] = 0;
            continue;
        }
        int j = i - lead;
        if (shape[i] == -1 || shape[i] == t->shape[j]) {
            s[i] = t->shape[j];
            st[i] = t->strides[j];
        } else if (t->shape[j] == 1 && shape[i] >= 0) {
            s[i] = shape[i];
            st[i] = 0;
        } else {
            crl_error_set(err, CRL_E_SHAPE,
                          "expand: size %" PRId64 " at dim %d of %s must match the existing size %" PRId64
                          " of tensor shape %s (only size-1 dims stretch)",
                          shape[i], i, crl__shape_fmt(b, ndim, shape), t->shape[j],
                          crl__shape_fmt(c, t->ndim, t->shape));
            return NULL;
        }
    }
    return crl__tensor_view_of(t, ndim, s, st, t->data);
}

crl_tensor *crl_tensor_unsqueeze(crl_tensor *t, int dim, crl_error *err)
{
    CHECK_T("crl_tensor_unsqueeze");
    char b[CRL__SHAPE_BUF];
    if (t->ndim >= CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_SHAPE, "unsqueeze: tensor of shape %s already has %d dims (max %d)",
                      crl__shape_fmt(b, t->ndim, t->shape), t->ndim, CRL_MAX_DIMS);
        return NULL;
    }
    int d = dim;
    if (!crl__norm_dim(&d, t->ndim + 1)) {
        crl_error_set(err, CRL_E_RANGE, "unsqueeze: dim %d is out of range for a tensor of shape %s (valid: %d..%d)",
                      dim, crl__shape_fmt(b, t->ndim, t->shape), -t->ndim - 1, t->ndim);
        return NULL;
    }
    int64_t s[CRL_MAX_DIMS], st[CRL_MAX_DIMS];
    for (int i = 0, k = 0; i <= t->ndim; i++) {
        if (i == d) {
            s[i] = 1;
            st[i] = d < t->ndim ? t->shape[d] * t->strides[d] : 1;
        } else {
            s[i] = t->shape[k];
            st[i] = t->strides[k++];
        }
    }
    return crl__tensor_view_of(t, t->ndim + 1, s, st, t->data);
}

crl_tensor *crl_tensor_squeeze(crl_tensor *t, int dim, crl_error *err)
{
    CHECK_T("crl_tensor_squeeze");
    char b[CRL__SHAPE_BUF];
    int d = dim;
    if (!crl__norm_dim(&d, t->ndim)) {
        crl_error_set(err, CRL_E_RANGE,
                      "squeeze: dim %d is out of range for a tensor of shape %s (valid: %d..%d)", dim,
                      crl__shape_fmt(b, t->ndim, t->shape), -t->ndim, t->ndim - 1);
        return NULL;
    }
    if (t->shape[d] != 1) {
        crl_error_set(err, CRL_E_SHAPE, "squeeze: dim %d of shape %s has size %" PRId64 ", not 1", d,
                      crl__shape_fmt(b, t->ndim, t->shape), t->shape[d]);
        return NULL;
    }
    int64_t s[CRL_MAX_DIMS], st[CRL_MAX_DIMS];
    for (int i = 0, k = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        s[k] = t->shape[i];
        st[k++] = t->strides[i];
    }
    return crl__tensor_view_of(t, t->ndim - 1, s, st, t->data);
}

/* ---- repr -------------------------------------------------------------- */

char *crl_tensor_repr(const crl_tensor *t)
{
    if (!t)
        return g_strdup("None");
    char b[CRL__SHAPE_BUF];
    char dev[32];
    if (t->device.type == CRL_DEVICE_CUDA)
        snprintf(dev, sizeof dev, "cuda:%d", (int)t->device.index);
    else
        snprintf(dev, sizeof dev, "cpu");
    return g_strdup_printf("Tensor(shape=torch.Size(%s), device=%s, dtype=torch.%s, is_shared=%s)",
                           crl__shape_fmt(b, t->ndim, t->shape), dev, dtype_names[t->dtype],
                           crl_tensor_is_shared(t) ? "True" : "False");
}
