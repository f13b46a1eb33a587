/* crl plugin SDK: tensors.
 *
 * A crl_tensor is a strided, refcounted view of a storage (heap, shared
 * memory, memory-mapped file, or caller-owned memory).  Views share the
 * storage; the storage is freed when the last tensor referencing it is
 * released.  Strides are counted in elements, as in PyTorch. */
#ifndef CRL_TENSOR_H
#define CRL_TENSOR_H

#include <crl/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRL_MAX_DIMS 8

typedef enum crl_dtype {
    CRL_BOOL = 0, CRL_U8 = 1, CRL_I8 = 2, CRL_I16 = 3, CRL_I32 = 4,
    CRL_I64 = 5, CRL_F16 = 6, CRL_F32 = 7, CRL_F64 = 8,
    CRL_DTYPE_COUNT = 9
} crl_dtype;

typedef enum crl_device_type { CRL_DEVICE_CPU = 0, CRL_DEVICE_CUDA = 1 } crl_device_type;

typedef struct crl_device {
    int32_t type;   /* crl_device_type */
    int32_t index;  /* cuda:N; 0 for cpu */
} crl_device;

typedef enum crl_storage_kind {
    CRL_STORAGE_HEAP = 0,
    CRL_STORAGE_SHARED = 1,   /* anonymous shared memory (memfd), survives fork */
    CRL_STORAGE_MMAP = 2,     /* memory-mapped file */
    CRL_STORAGE_EXTERNAL = 3  /* caller-owned memory wrapped by crl_tensor_wrap */
} crl_storage_kind;

typedef struct crl_tensor crl_tensor;

/* Bytes per element; 0 for an invalid dtype. */
CRL_API size_t crl_dtype_size(crl_dtype dt);
/* "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
 * "float64"; NULL for an invalid dtype. */
CRL_API const char *crl_dtype_name(crl_dtype dt);
/* Parse a dtype name (also accepts "torch.float32", "f32", "float", "double",
 * "long", "int").  Returns false (and leaves *out alone) when unknown. */
CRL_API bool crl_dtype_from_name(const char *name, crl_dtype *out);
CRL_API bool crl_dtype_is_float(crl_dtype dt);

/* New zero-filled contiguous tensor on the heap.  `shape` may be NULL when
 * ndim == 0 (a scalar).  Returns a new reference (release with
 * crl_tensor_unref) or NULL with err set (CRL_E_INVALID for a bad dtype,
 * ndim or negative dim, CRL_E_NOMEM). */
CRL_API crl_tensor *crl_tensor_new(crl_dtype dt, int ndim, const int64_t *shape, crl_error *err);

/* Like crl_tensor_new, but in anonymous shared memory that stays shared
 * with processes forked after the call. */
CRL_API crl_tensor *crl_tensor_new_shared(crl_dtype dt, int ndim, const int64_t *shape, crl_error *err);

/* A tensor over a memory-mapped file.  With `create`, the file is created
 * (or truncated) and sized with posix_fallocate; otherwise it must exist and
 * hold exactly numel * dtype size bytes (CRL_E_SHAPE otherwise).  Errors name
 * the path.  Writes go to the file (MAP_SHARED). */
CRL_API crl_tensor *crl_tensor_new_mmap(const char *path, bool create, crl_dtype dt, int ndim,
                                        const int64_t *shape, crl_error *err);

/* Wrap caller-owned memory without copying.  `strides` may be NULL for a
 * contiguous layout.  `release(user)` is called when the last reference goes
 * (may be NULL when the caller keeps the memory alive longer than every
 * tensor over it). */
CRL_API crl_tensor *crl_tensor_wrap(void *data, crl_dtype dt, int ndim, const int64_t *shape,
                                    const int64_t *strides, void (*release)(void *user),
                                    void *user, crl_error *err);

/* Take another reference (returns t; NULL-safe). */
CRL_API crl_tensor *crl_tensor_ref(crl_tensor *t);
/* Drop a reference (NULL-safe). */
CRL_API void crl_tensor_unref(crl_tensor *t);

/* Accessors: borrowed, valid while the tensor lives.  `data` points at the
 * first element of the view (storage + offset). */
CRL_API crl_dtype crl_tensor_dtype(const crl_tensor *t);
CRL_API int crl_tensor_ndim(const crl_tensor *t);
CRL_API const int64_t *crl_tensor_shape(const crl_tensor *t);
CRL_API const int64_t *crl_tensor_strides(const crl_tensor *t);
CRL_API int64_t crl_tensor_numel(const crl_tensor *t);
CRL_API size_t crl_tensor_nbytes(const crl_tensor *t);  /* numel * dtype size */
CRL_API void *crl_tensor_data(const crl_tensor *t);
CRL_API bool crl_tensor_is_contiguous(const crl_tensor *t);
CRL_API crl_device crl_tensor_device(const crl_tensor *t);
CRL_API crl_storage_kind crl_tensor_storage_kind(const crl_tensor *t);
/* True when the storage is shared memory or a shared file mapping. */
CRL_API bool crl_tensor_is_shared(const crl_tensor *t);
/* True when a and b have the same shape (same ndim and dims). */
CRL_API bool crl_tensor_same_shape(const crl_tensor *a, const crl_tensor *b);

/* Views (new references sharing storage; NULL + err on bad arguments).
 * Negative dims and indices count from the end, as in Python. */
CRL_API crl_tensor *crl_tensor_index(crl_tensor *t, int dim, int64_t i, crl_error *err);
/* Python slice semantics (start/stop clamped; step > 0). */
CRL_API crl_tensor *crl_tensor_slice(crl_tensor *t, int dim, int64_t start, int64_t stop,
                                     int64_t step, crl_error *err);
/* A view with a new shape; one dim may be -1.  Fails with CRL_E_SHAPE when
 * the element count differs or the strides do not allow a view. */
CRL_API crl_tensor *crl_tensor_view(crl_tensor *t, int ndim, const int64_t *shape, crl_error *err);
/* Like view, but copies when a view is impossible. */
CRL_API crl_tensor *crl_tensor_reshape(crl_tensor *t, int ndim, const int64_t *shape, crl_error *err);
CRL_API crl_tensor *crl_tensor_permute(crl_tensor *t, const int *dims, crl_error *err);
/* Broadcast to a bigger shape with zero strides (PyTorch expand rules:
 * leading new dims, size-1 dims stretch, -1 keeps a dim). */
CRL_API crl_tensor *crl_tensor_expand(crl_tensor *t, int ndim, const int64_t *shape, crl_error *err);
/* Insert / remove a size-1 dim. */
CRL_API crl_tensor *crl_tensor_unsqueeze(crl_tensor *t, int dim, crl_error *err);
CRL_API crl_tensor *crl_tensor_squeeze(crl_tensor *t, int dim, crl_error *err);

/* New contiguous heap copy (clone) / contiguous version (a new reference to
 * t itself when already contiguous). */
CRL_API crl_tensor *crl_tensor_clone(const crl_tensor *t, crl_error *err);
CRL_API crl_tensor *crl_tensor_contiguous(crl_tensor *t, crl_error *err);
/* New contiguous tensor of another dtype (floats to ints truncate toward
 * zero as C does; to bool is != 0). */
CRL_API crl_tensor *crl_tensor_cast(const crl_tensor *t, crl_dtype dt, crl_error *err);

/* Copy src into dst elementwise, casting dtypes.  src must have dst's
 * shape or broadcast to it (CRL_E_SHAPE otherwise).  Overlap is the
 * caller's problem. */
CRL_API int crl_tensor_copy(crl_tensor *dst, const crl_tensor *src, crl_error *err);
/* Set every element to `value` (cast to the dtype). */
CRL_API void crl_tensor_fill(crl_tensor *t, double value);

/* Element access by a full index (ndim entries); for tests and slow paths. */
CRL_API double crl_tensor_get_f64(const crl_tensor *t, const int64_t *idx);
CRL_API void crl_tensor_set_f64(crl_tensor *t, const int64_t *idx, double v);
/* Element access by flat row-major position in the view (0..numel-1). */
CRL_API double crl_tensor_flat_get(const crl_tensor *t, int64_t pos);
CRL_API void crl_tensor_flat_set(crl_tensor *t, int64_t pos, double v);

/* Same dtype, same shape, same values (NaN != NaN, as torch.equal). */
CRL_API bool crl_tensor_equal(const crl_tensor *a, const crl_tensor *b);

/* IEEE half conversions used for CRL_F16. */
CRL_API float crl_half_to_float(uint16_t h);
CRL_API uint16_t crl_float_to_half(float f);

/* "Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32,
 * is_shared=False)" as TorchRL prints a TensorDict leaf.  Free with crl_free. */
CRL_API char *crl_tensor_repr(const crl_tensor *t);
/* "torch.Size([2, 3])"; free with crl_free. */
CRL_API char *crl_shape_repr(int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
