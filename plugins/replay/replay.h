/* plugins/replay internals: item layouts, index checks and the three storages' ops, shared by replay.so's files. */
#ifndef CRL_PLUGIN_REPLAY_H
#define CRL_PLUGIN_REPLAY_H

#include <crl/crl.h>
#include <crl/storage_backend.h>
#include <crl/plugin.h>

#include <stdio.h>

/* One leaf of an item: its dotted key, dtype and per-item shape (the
 * tensor's shape without the leading item dim). */
typedef struct rp_leaf {
    char *key;
    crl_td_key *handle;
    crl_dtype dtype;
    int ndim;
    int64_t shape[CRL_MAX_DIMS];
    size_t row_bytes;  /* bytes of one item's value */
} rp_leaf;

/* What every item of a tensor or memmap storage looks like, fixed by the
 * first item written.  Leaves are in crl_td_leaf_keys order. */
typedef struct rp_layout {
    int batch_ndim;  /* the item's own batch dims (0 for a plain item) */
    int64_t batch_shape[CRL_MAX_DIMS];
    size_t nleaves;
    rp_leaf *leaves;
    size_t item_bytes;  /* sum of row_bytes */
} rp_layout;

/* Items given to set(): batch ndim >= 1 and first batch dim == n. */
int rp_check_items(const char *who, const crl_td *items, size_t n, crl_error *err);
/* Every idx[k] in [0, capacity). */
int rp_check_indices(const char *who, const int64_t *idx, size_t n, int64_t capacity, crl_error *err);

/* The layout of the items of `items` (a batch).  New, free with rp_layout_free. */
rp_layout *rp_layout_from_items(const char *who, const crl_td *items, crl_error *err);
/* The layout of one item (no leading dim dropped; no leaves allowed). */
rp_layout *rp_layout_from_item(const char *who, const crl_td *item, crl_error *err);
void rp_layout_free(rp_layout *l);
rp_layout *rp_layout_dup(const rp_layout *l, crl_error *err);
bool rp_layout_equal(const rp_layout *a, const rp_layout *b);
/* "{action: int64[2], next.reward: float32[]}" (plus " batch [4]" for
 * items with their own batch dims).  malloc'd. */
char *rp_layout_str(const rp_layout *l);
/* The first difference between two layouts, e.g. "key 'obs' is float32[4]
 * in DIR but float32[5] in the new item".  malloc'd. */
char *rp_layout_diff(const rp_layout *stored, const rp_layout *item, const char *where);

/* Match a batch against the layout; on success cols[i] is a contiguous
 * reference to leaf i's tensor (release with rp_cols_release).  A mismatch is
 * CRL_E_NOT_FOUND (missing or extra key), CRL_E_DTYPE or CRL_E_SHAPE naming
 * the key and both layouts; *mismatch (may be NULL) receives the item's
 * layout then (free it). */
int rp_layout_match(const char *who, const rp_layout *l, const crl_td *items, crl_tensor **cols,
                    rp_layout **mismatch, crl_error *err);
void rp_cols_release(crl_tensor **cols, size_t n);

/* A new TensorDict of batch [n, item batch...] with a zeroed tensor for
 * every leaf; cols[i] borrows leaf i's tensor. */
crl_td *rp_layout_new_batch(const rp_layout *l, size_t n, crl_tensor **cols, crl_error *err);

/* Length r >= 1 of the run idx[k], idx[k] + 1, ..., idx[k] + r - 1. */
size_t rp_run_length(const int64_t *idx, size_t n, size_t k);
/* memcpy for writes into a storage: large blocks go out with streaming
 * (non-temporal) stores, since stored items are not read back soon and a
 * normal store first reads every destination line; call rp_stream_fence
 * once the writes are done. */
void rp_stream_copy(void *dst, const void *src, size_t n);
void rp_stream_fence(void);
/* A new batch [n] of the rows idx[0..n) of the columns base[i] (row-major
 * [capacity, ...] per leaf).  Indices must have been checked. */
crl_td *rp_gather(const rp_layout *l, uint8_t *const *base, const int64_t *idx, size_t n, crl_error *err);
/* get() of a dense storage (tensor, memmap): checks every slot is in range
 * and filled (CRL_E_RANGE naming the slot), then gathers; an empty layout
 * (nothing written yet) gives an empty batch. */
crl_td *rp_dense_get(const char *who, const rp_layout *l, uint8_t *const *base, const uint8_t *filled,
                     int64_t capacity, const int64_t *idx, size_t n, crl_error *err);

/* Portable bytes of a layout (little-endian) and back.  Decode validates
 * every count, size, dtype, shape and key; problems are CRL_E_CORRUPT
 * "WHAT: offset N: ...". */
void *rp_layout_encode(const rp_layout *l, size_t *len);
rp_layout *rp_layout_decode(const char *what, const void *data, size_t len, size_t base_offset,
                            bool allow_empty, crl_error *err);
/* A TensorDict of batch [len, item batch...] whose leaves are views of rows
 * [0, len) of the full columns cols[i] ([capacity, ...]). */
crl_td *rp_layout_view_td(const rp_layout *l, int64_t len, crl_tensor *const *cols, crl_error *err);

/* Little-endian helpers. */
void rp_put_u32(uint8_t *p, uint32_t v);
void rp_put_u64(uint8_t *p, uint64_t v);
uint32_t rp_get_u32(const uint8_t *p);
uint64_t rp_get_u64(const uint8_t *p);

/* The dump format shared by the tensor and memmap storages (kind
 * "crl.storage.tensor"): sections "meta", "layout", "filled" and the
 * TensorDict "data" of batch [len]. */
#define RP_DENSE_KIND "crl.storage.tensor"
#define RP_DENSE_KIND_VERSION 1u
#define RP_LIST_KIND "crl.storage.list"
#define RP_LIST_KIND_VERSION 1u

/* A dense image of a storage: what dump writes and load reads. */
typedef struct rp_dense {
    int64_t capacity;
    int64_t len;
    uint64_t write_count;
    rp_layout *layout;   /* NULL when nothing was ever written */
    uint8_t *filled;     /* capacity bytes, 0/1 */
    crl_td *data;        /* batch [len, item batch...]; NULL when len == 0 */
} rp_dense;

/* Write a dense image into DIR/storage.ckpt. */
int rp_dense_dump(const char *who, const char *dir, const rp_dense *d, crl_error *err);
/* Read and validate DIR/storage.ckpt for a storage of `capacity` slots.
 * Fills *d (free with rp_dense_clear). */
int rp_dense_load(const char *who, const char *dir, int64_t capacity, rp_dense *d, crl_error *err);
void rp_dense_clear(rp_dense *d);

extern const crl_storage_ops rp_list_ops;
extern const crl_storage_ops rp_tensor_ops;
extern const crl_storage_ops rp_memmap_ops;
extern const crl_option rp_memmap_options[];

#endif
