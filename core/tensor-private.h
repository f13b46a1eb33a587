/* Tensor internals shared by tensor.c, tensor_ops.c, half.c and the TensorDict code. */
#ifndef CRL_TENSOR_PRIVATE_H
#define CRL_TENSOR_PRIVATE_H

#include "crl-private.h"

/* A refcounted block of memory that views point into. */
typedef struct crl__storage {
    gint refcount;              /* atomic: tensors cross threads in executors */
    crl_storage_kind kind;
    void *base;                 /* start of the allocation / mapping */
    size_t map_len;             /* bytes mapped (shared, mmap); 0 when not a mapping */
    void (*release)(void *user);/* external storage */
    void *user;
    int fd;                     /* shared: the memfd behind the mapping (a re-exec'd worker maps it), else -1 */
} crl__storage;

struct crl_tensor {
    gint refcount;              /* atomic */
    crl_dtype dtype;
    int ndim;
    crl_device device;
    int64_t shape[CRL_MAX_DIMS];
    int64_t strides[CRL_MAX_DIMS];  /* elements */
    char *data;                 /* first element of the view (storage + offset) */
    crl__storage *storage;
};

/* The memfd behind a shared tensor's storage and the byte offset of its data in it, or -1 (not shared, or
 * mapped without memfd).  Borrowed: valid while the tensor lives. */
CRL_INTERNAL int crl__tensor_shared_fd(const crl_tensor *t, size_t *offset, size_t *map_len);

/* Room for "[a, b, ...]" with CRL_MAX_DIMS int64 dims. */
#define CRL__SHAPE_BUF 224

/* Format a shape as "[2, 3]" into buf (CRL__SHAPE_BUF bytes); returns buf. */
CRL_INTERNAL char *crl__shape_fmt(char *buf, int ndim, const int64_t *shape);

/* Normalise a possibly negative dim against ndim (dims valid in [-n, n)).
 * Returns false when out of range. */
static inline bool crl__norm_dim(int *dim, int n)
{
    int d = *dim < 0 ? *dim + n : *dim;
    if (d < 0 || d >= n)
        return false;
    *dim = d;
    return true;
}

/* Python slice bounds for a dim of size n (step > 0): clamps start/stop
 * and returns the slice length. */
static inline int64_t crl__slice_norm(int64_t n, int64_t *start, int64_t *stop, int64_t step)
{
    int64_t a = *start, b = *stop;
    if (a < 0)
        a = a + n < 0 ? 0 : a + n;
    if (a > n)
        a = n;
    if (b < 0)
        b = b + n < 0 ? 0 : b + n;
    if (b > n)
        b = n;
    *start = a;
    *stop = b;
    return b > a ? (b - a - 1) / step + 1 : 0;
}

/* A view over t's storage with the given layout (no checks). */
CRL_INTERNAL crl_tensor *crl__tensor_view_of(crl_tensor *t, int ndim, const int64_t *shape,
                                             const int64_t *strides, char *data);
/* A contiguous tensor of dtype dt at data inside t's storage, sharing it (no checks: the layout must lie
 * within the storage).  One allocation carved into several tensors (async recv's outputs). */
CRL_INTERNAL crl_tensor *crl__tensor_carve(crl_tensor *t, crl_dtype dt, int ndim, const int64_t *shape, char *data);
/* Shapes of views (tensor.c), shared with reshape (tensor_ops.c): resolve one -1 in `in` into `out` and
 * check the element count (errors name `what`); PyTorch's computeStride, the strides for viewing t as
 * `shape`, or false when its strides allow no view. */
CRL_INTERNAL int crl__tensor_infer_shape(const char *what, const crl_tensor *t, int ndim, const int64_t *in,
                                         int64_t *out, crl_error *err);
CRL_INTERNAL bool crl__tensor_view_strides(const crl_tensor *t, int ndim, const int64_t *shape, int64_t *out);

/* IEEE binary16 conversions, hidden so hot loops call them directly.
 * Doubles round to nearest even in one step (no double rounding). */
/* Row-major contiguity of a view (size-1 and empty dims are ignored).
 * Inline because the env step path asks on every cached step. */
static inline bool crl__tensor_contiguous(const crl_tensor *t)
{
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0)
            return true;
        if (t->shape[i] != 1 && t->strides[i] != expect)
            return false;
        expect *= t->shape[i];
    }
    return true;
}

CRL_INTERNAL float crl__half_to_float(uint16_t h);
CRL_INTERNAL uint16_t crl__double_to_half(double d);

#endif
