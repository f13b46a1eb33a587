/* crl plugin SDK: TensorDict.
 *
 * A crl_td maps string keys to tensors or nested TensorDicts, all sharing a
 * leading batch shape.  A dotted key names a nested path: "next.observation"
 * is ("next", "observation").  Entries are kept sorted by key, which is the
 * order iteration and printing use (as TorchRL prints). */
#ifndef CRL_TD_H
#define CRL_TD_H

#include <crl/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_td crl_td;
/* A pre-parsed key for hot paths (no string splitting or hashing per use). */
typedef struct crl_td_key crl_td_key;

/* New empty TensorDict with the given batch shape (batch_shape may be NULL
 * when batch_ndim == 0).  New reference, or NULL with err set. */
CRL_API crl_td *crl_td_new(int batch_ndim, const int64_t *batch_shape, crl_error *err);
CRL_API crl_td *crl_td_ref(crl_td *td);
CRL_API void crl_td_unref(crl_td *td);

CRL_API int crl_td_batch_ndim(const crl_td *td);
CRL_API const int64_t *crl_td_batch_shape(const crl_td *td);
CRL_API crl_device crl_td_device(const crl_td *td);

/* Store a tensor under key (the td takes its own reference; the caller keeps
 * theirs).  The tensor's leading dims must equal the batch shape
 * (CRL_E_SHAPE names the key and both shapes).  Intermediate TensorDicts of
 * a dotted key are created.  Replaces an existing tensor; replacing a nested
 * TensorDict by a tensor is CRL_E_EXISTS. */
CRL_API int crl_td_set(crl_td *td, const char *key, crl_tensor *t, crl_error *err);
/* Store a nested TensorDict (the td takes a reference).  Its batch shape must
 * start with the parent's. */
CRL_API int crl_td_set_td(crl_td *td, const char *key, crl_td *sub, crl_error *err);
/* Borrowed tensor at key, or NULL when absent or when key names a nested
 * TensorDict. */
CRL_API crl_tensor *crl_td_get(const crl_td *td, const char *key);
/* Borrowed nested TensorDict at key, or NULL. */
CRL_API crl_td *crl_td_get_td(const crl_td *td, const char *key);
CRL_API bool crl_td_has(const crl_td *td, const char *key);
/* Remove an entry (tensor or sub-TensorDict).  CRL_E_NOT_FOUND names the
 * key and the keys present. */
CRL_API int crl_td_del(crl_td *td, const char *key, crl_error *err);

/* Key handles: parse once, use on hot paths.  crl_td_key_new returns a new
 * handle (free with crl_td_key_free) or NULL for an empty key or empty path
 * component.  Lookups through a handle never allocate. */
CRL_API crl_td_key *crl_td_key_new(const char *key, crl_error *err);
CRL_API void crl_td_key_free(crl_td_key *k);
CRL_API const char *crl_td_key_str(const crl_td_key *k);
CRL_API crl_tensor *crl_td_get_k(const crl_td *td, const crl_td_key *k);
CRL_API int crl_td_set_k(crl_td *td, const crl_td_key *k, crl_tensor *t, crl_error *err);

/* Direct entries (not recursive), in sorted key order.  Borrowed. */
CRL_API size_t crl_td_len(const crl_td *td);
CRL_API const char *crl_td_key_at(const crl_td *td, size_t i);
/* Exactly one of the two is non-NULL for a valid i. */
CRL_API crl_tensor *crl_td_tensor_at(const crl_td *td, size_t i);
CRL_API crl_td *crl_td_td_at(const crl_td *td, size_t i);

/* All leaf keys, dotted ("next.reward"), in sorted depth-first order, as a
 * NULL-terminated array.  Free the array with crl_free (one block). */
CRL_API char **crl_td_leaf_keys(const crl_td *td, crl_error *err);

/* New TensorDict sharing tensors with td (no data copy).  `keys` is a
 * NULL-terminated list of (dotted) keys.  select: a missing key is
 * CRL_E_NOT_FOUND unless `strict` is false.  exclude ignores missing keys. */
CRL_API crl_td *crl_td_select(const crl_td *td, const char *const *keys, bool strict, crl_error *err);
CRL_API crl_td *crl_td_exclude(const crl_td *td, const char *const *keys, crl_error *err);
/* Move an entry to a new key in place (CRL_E_EXISTS if new_key exists). */
CRL_API int crl_td_rename(crl_td *td, const char *old_key, const char *new_key, crl_error *err);
/* Set every leaf of src into dst (recursively, sharing tensors). */
CRL_API int crl_td_update(crl_td *dst, const crl_td *src, crl_error *err);
/* Deep copy: new contiguous heap tensors. */
CRL_API crl_td *crl_td_clone(const crl_td *td, crl_error *err);
/* Copy values of src's leaves into dst's existing tensors of the same keys
 * and shapes (no allocation when they match).  Missing keys in dst are
 * created by cloning. */
CRL_API int crl_td_copy_into(crl_td *dst, const crl_td *src, crl_error *err);

/* Batch indexing: views (sharing storage) with one batch dim removed or
 * sliced.  dim counts batch dims only. */
CRL_API crl_td *crl_td_index(crl_td *td, int dim, int64_t i, crl_error *err);
CRL_API crl_td *crl_td_slice(crl_td *td, int dim, int64_t start, int64_t stop, int64_t step,
                             crl_error *err);
/* TensorDict.reshape: the same entries with batch shape `shape` (ndim dims, the same number of
 * elements; the feature dims follow unchanged), views sharing storage where the strides allow, copies
 * otherwise.  E.g. a slice sampler's [num_slices * slice_len] batch as [num_slices, slice_len] for a
 * recurrent module.  New reference, or NULL with CRL_E_SHAPE naming both shapes.  Since ABI 1.2. */
CRL_API crl_td *crl_td_reshape(crl_td *td, int ndim, const int64_t *shape, crl_error *err);
/* New TensorDicts with copied data.  All inputs need the same keys and
 * shapes (stack) or the same keys and shapes apart from batch dim `dim`
 * (cat); a mismatch names the key. */
CRL_API crl_td *crl_td_stack(crl_td *const *tds, size_t n, int dim, crl_error *err);
CRL_API crl_td *crl_td_cat(crl_td *const *tds, size_t n, int dim, crl_error *err);

/* Same batch shape, same keys, equal tensors (crl_tensor_equal). */
CRL_API bool crl_td_equal(const crl_td *a, const crl_td *b);

/* TorchRL's printed layout ("TensorDict(\n    fields={...},\n
 * batch_size=torch.Size([]),\n    device=cpu,\n    is_shared=False)").
 * Free with crl_free. */
CRL_API char *crl_td_repr(const crl_td *td);

#ifdef __cplusplus
}
#endif
#endif
