/* TensorDict internals shared by td.c and td_ops.c. */
#ifndef CRL_TD_PRIVATE_H
#define CRL_TD_PRIVATE_H

#include "tensor-private.h"

#include <string.h>

/* Keys are interned with g_intern_string, so within entries and key
 * handles pointer equality is string equality. */
typedef struct crl__td_entry {
    const char *key;
    crl_tensor *tensor; /* exactly one of tensor / td is set */
    crl_td *td;
    /* A fresh stamp whenever this entry is made or its tensor or sub-td
     * pointer changes: an unchanged entry stamp means the entry held the
     * same object all along (so it was never freed). */
    uint64_t stamp;
} crl__td_entry;

struct crl_td {
    gint refcount;  /* atomic */
    int batch_ndim;
    int64_t batch_shape[CRL_MAX_DIMS];
    crl_device device;
    size_t len, cap;
    crl__td_entry *entries; /* sorted by strcmp(key) */
    /* Structural stamps (see crl__td_stamp): `stamp` changes on every
     * structural change, `layout` only on those that move entries or swap
     * a sub-td (not when one entry's tensor is swapped). */
    uint64_t stamp, layout;
};

/* A stamp never handed out before in this process (never 0).  Stamps come
 * from one process-global atomic counter that only grows; each thread
 * takes them in blocks, so the hot path is a thread-local increment. */
CRL_INTERNAL uint64_t crl__td_fresh_stamp(void);

/* A td's structural stamp.  It is set from the process-global counter when
 * the td is made and again on every structural change: an entry inserted,
 * deleted or renamed, or an entry's tensor or sub-td replaced by a
 * different pointer (storing the pointer already there changes nothing).
 * Values are never reused, not even by a td allocated where a freed one
 * lived, so an unchanged (td pointer, stamp) pair means the very same td
 * with the same keys, the same entry array and the same tensor and sub-td
 * pointers in it.  Tensors never change dtype, shape, strides or data
 * pointer after creation, so everything derived from those entries is
 * still valid.  Writing into a tensor's data is not structural. */
static inline uint64_t crl__td_stamp(const crl_td *td)
{
    return td->stamp;
}

/* The layout stamp: like crl__td_stamp but left alone when an entry's
 * tensor is replaced by another tensor.  An unchanged (td, layout) pair
 * means the same keys in the same entry array (so crl__td_entry pointers
 * into it stay valid) and the same sub-td pointers; the tensors held may
 * differ, so read them again (or check crl__td_stamp). */
static inline uint64_t crl__td_layout(const crl_td *td)
{
    return td->layout;
}

/* Entry e of td had its tensor replaced by a different one. */
static inline void crl__td_touch_entry(crl_td *td, crl__td_entry *e)
{
    td->stamp = e->stamp = crl__td_fresh_stamp();
}

/* Entries were inserted, removed or moved, or a sub-td was replaced (e: the
 * entry made or changed, if any). */
static inline void crl__td_touch_layout(crl_td *td, crl__td_entry *e)
{
    td->stamp = td->layout = crl__td_fresh_stamp();
    if (e)
        e->stamp = td->stamp;
}

/* Deepest nesting a dotted key may have. */
#define CRL__TD_MAX_DEPTH 64

struct crl_td_key {
    char *str;
    size_t n;
    /* Per component, the entry index where it was last found: a handle is
     * usually used on tds of one layout, so most lookups are one compare.
     * Read and written with relaxed atomics, as handles cross threads. */
    uint32_t *hint;
    const char *comp[]; /* n interned components */
};

/* The chain of parent keys while recursing, kept on the stack so error
 * messages can name the full dotted key without allocating on success. */
typedef struct crl__td_path {
    const struct crl__td_path *up;
    const char *key;
} crl__td_path;

/* "a.b.leaf" into buf (truncated to n bytes); leaf may be NULL. */
CRL_INTERNAL const char *crl__td_path_str(const crl__td_path *p, const char *leaf, char *buf,
                                          size_t n);

/* Entry for an interned key, or NULL.  Short tds (the common case) scan
 * pointers; long ones binary-search. */
static inline crl__td_entry *crl__td_find_interned(const crl_td *td, const char *ikey)
{
    crl__td_entry *e = td->entries;
    size_t n = td->len;
    if (n <= 16) {
        for (size_t i = 0; i < n; i++)
            if (e[i].key == ikey)
                return &e[i];
        return NULL;
    }
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e[mid].key == ikey)
            return &e[mid];
        if (strcmp(e[mid].key, ikey) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* crl__td_find_interned, trying the handle's remembered index first. */
static inline crl__td_entry *crl__td_find_hinted(const crl_td *td, const char *ikey, uint32_t *hint)
{
    uint32_t h = __atomic_load_n(hint, __ATOMIC_RELAXED);
    if (h < td->len && td->entries[h].key == ikey)
        return &td->entries[h];
    crl__td_entry *e = crl__td_find_interned(td, ikey);
    if (e)
        __atomic_store_n(hint, (uint32_t)(e - td->entries), __ATOMIC_RELAXED);
    return e;
}

/* True when a tensor's leading dims equal the td's batch shape. */
static inline bool crl__td_leads(const crl_td *td, int ndim, const int64_t *shape)
{
    if (ndim < td->batch_ndim)
        return false;
    for (int i = 0; i < td->batch_ndim; i++)
        if (shape[i] != td->batch_shape[i])
            return false;
    return true;
}

/* New empty td with a batch shape (no checks). */
CRL_INTERNAL crl_td *crl__td_alloc(int ndim, const int64_t *shape);
/* Insert an entry with an interned key that is not present yet; takes
 * ownership of the references in t / sub. */
CRL_INTERNAL void crl__td_insert(crl_td *td, const char *ikey, crl_tensor *t, crl_td *sub);
/* Entry at a dotted key by string (no interning), or NULL. */
CRL_INTERNAL crl__td_entry *crl__td_lookup(const crl_td *td, const char *key);
/* Remove the entry at a dotted key; false when absent. */
CRL_INTERNAL bool crl__td_remove(crl_td *td, const char *key);
/* Set a tensor (t) or sub-td (sub) at a path of interned components, with
 * every check crl_td_set / crl_td_set_td make.  `key` names it in errors. */
CRL_INTERNAL int crl__td_set_path(crl_td *td, const char *const *comps, size_t n, const char *key,
                                  crl_tensor *t, crl_td *sub, crl_error *err);
/* Split and intern a dotted key; CRL_E_INVALID for empty components. */
CRL_INTERNAL int crl__td_split(const char *key, const char **comps, size_t *n, crl_error *err);
/* "a, b, next, next.done" (every key, nested ones dotted) for messages;
 * free with g_free. */
CRL_INTERNAL char *crl__td_keys_list(const crl_td *td);
/* New td tree with the same structure sharing every tensor. */
CRL_INTERNAL crl_td *crl__td_shallow(const crl_td *td);

#endif
