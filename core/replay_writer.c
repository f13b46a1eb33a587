/* Replay writers: round robin and max value (top-k by a rank key), the add/extend path that feeds the samplers,
 * and re-reading the index state (filled slots, samplers, writer heap) from the storage. */
#include "replay-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ---- max-value heap ------------------------------------------------------- */

int crl__maxheap_init(crl__maxheap *h, size_t capacity, crl_error *err)
{
    memset(h, 0, sizeof *h);
    h->heap = g_try_new(int64_t, capacity);
    h->pos = g_try_new(int64_t, capacity);
    h->rank = g_try_new0(double, capacity);
    if (!h->heap || !h->pos || !h->rank) {
        crl__maxheap_fini(h);
        return crl_error_set(err, CRL_E_NOMEM, "max-value writer: out of memory for capacity %zu", capacity);
    }
    h->capacity = capacity;
    crl__maxheap_clear(h);
    return CRL_OK;
}

void crl__maxheap_fini(crl__maxheap *h)
{
    g_free(h->heap);
    g_free(h->pos);
    g_free(h->rank);
    memset(h, 0, sizeof *h);
}

void crl__maxheap_clear(crl__maxheap *h)
{
    h->n = 0;
    for (size_t i = 0; i < h->capacity; i++)
        h->pos[i] = -1;
}

static void swap_at(crl__maxheap *h, size_t a, size_t b)
{
    int64_t sa = h->heap[a], sb = h->heap[b];
    h->heap[a] = sb;
    h->heap[b] = sa;
    h->pos[sb] = (int64_t)a;
    h->pos[sa] = (int64_t)b;
}

static void sift_up(crl__maxheap *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!(h->rank[h->heap[i]] < h->rank[h->heap[p]]))
            return;
        swap_at(h, i, p);
        i = p;
    }
}

static void sift_down(crl__maxheap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->rank[h->heap[l]] < h->rank[h->heap[m]])
            m = l;
        if (r < h->n && h->rank[h->heap[r]] < h->rank[h->heap[m]])
            m = r;
        if (m == i)
            return;
        swap_at(h, i, m);
        i = m;
    }
}

void crl__maxheap_set(crl__maxheap *h, int64_t slot, double rank)
{
    h->rank[slot] = rank;
    if (h->pos[slot] < 0) {
        h->heap[h->n] = slot;
        h->pos[slot] = (int64_t)h->n;
        h->n++;
        sift_up(h, h->n - 1);
        return;
    }
    size_t i = (size_t)h->pos[slot];
    sift_up(h, i);
    sift_down(h, (size_t)h->pos[slot]);
}

void crl__maxheap_remove(crl__maxheap *h, int64_t slot)
{
    if (h->pos[slot] < 0)
        return;
    size_t i = (size_t)h->pos[slot];
    size_t last = h->n - 1;
    if (i != last) {
        swap_at(h, i, last);
        h->n--;
        h->pos[slot] = -1;
        int64_t moved = h->heap[i];
        sift_up(h, i);
        sift_down(h, (size_t)h->pos[moved]);
    } else {
        h->n--;
        h->pos[slot] = -1;
    }
}

int64_t crl__maxheap_min_slot(const crl__maxheap *h)
{
    return h->n ? h->heap[0] : -1;
}

/* ---- per-item values -------------------------------------------------------- */

static size_t row_numel(const crl_tensor *t)
{
    int64_t n = 1;
    for (int d = 1; d < crl_tensor_ndim(t); d++)
        n *= crl_tensor_shape(t)[d];
    return (size_t)n;
}

/* Element j (row-major within the row) of row k. */
static const char *row_elem(const crl_tensor *t, int64_t k, size_t j)
{
    const int64_t *sh = crl_tensor_shape(t), *st = crl_tensor_strides(t);
    int nd = crl_tensor_ndim(t);
    int64_t off = k * st[0];
    for (int d = nd - 1; d >= 1; d--) {
        off += (int64_t)(j % (size_t)sh[d]) * st[d];
        j /= (size_t)sh[d];
    }
    return (const char *)crl_tensor_data(t) + off * (int64_t)crl_dtype_size(crl_tensor_dtype(t));
}

static double elem_f64(crl_dtype dt, const char *p)
{
    switch (dt) {
    case CRL_BOOL: case CRL_U8: return *(const uint8_t *)p;
    case CRL_I8: return *(const int8_t *)p;
    case CRL_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case CRL_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case CRL_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case CRL_F16: { uint16_t v; memcpy(&v, p, 2); return crl_half_to_float(v); }
    case CRL_F32: { float v; memcpy(&v, p, 4); return v; }
    case CRL_F64: { double v; memcpy(&v, p, 8); return v; }
    default: return NAN;
    }
}

int crl__row_i64(const crl_tensor *t, int64_t k, int64_t *out)
{
    crl_dtype dt = crl_tensor_dtype(t);
    const char *p = row_elem(t, k, 0);
    if (dt == CRL_I64) {
        memcpy(out, p, 8);
        return CRL_OK;
    }
    double v = elem_f64(dt, p);
    if (!isfinite(v))
        return CRL_E_INVALID;
    *out = (int64_t)v;
    return CRL_OK;
}

bool crl__row_any(const crl_tensor *t, int64_t k)
{
    size_t n = row_numel(t);
    for (size_t j = 0; j < n; j++)
        if (elem_f64(crl_tensor_dtype(t), row_elem(t, k, j)) != 0.0)
            return true;
    return false;
}

double crl__row_f64(const crl_tensor *t, int64_t k)
{
    return elem_f64(crl_tensor_dtype(t), row_elem(t, k, 0));
}

/* ---- what samplers learn of a write ------------------------------------------ */

static void mark_filled(crl_replay *rb, int64_t slot)
{
    if (!rb->filled[slot]) {
        rb->filled[slot] = 1;
        rb->nfilled++;
        rb->dense_dirty = true;
    }
    if (slot >= rb->high)
        rb->high = slot + 1;
    while (rb->next_free < rb->capacity && rb->filled[rb->next_free])
        rb->next_free++;
}

/* Items numbered w0.. (round robin) were written to slots[0..m). */
static void written(crl_replay *rb, const int64_t *slots, size_t m, uint64_t w0, const int64_t *keys,
                    const bool *ends)
{
    if (rb->nfilled == (size_t)rb->capacity) {
        /* Full: every slot stays filled; only the overwrite happened. */
    } else {
        for (size_t k = 0; k < m; k++)
            mark_filled(rb, slots[k]);
    }
    if (rb->prio)
        crl__sampler_prio_add(rb->prio, slots, m, NULL);
    if (rb->slice)
        for (size_t k = 0; k < m; k++)
            crl__slice_push(rb->slice, w0 + k, keys ? keys[k] : 0, ends ? ends[k] : false);
    rb->write_count = w0 + m;
}

/* The per-item values the sampler and writer need, read and checked before
 * anything is written. */
static int item_values(crl_replay *rb, const crl_td *items, int64_t n, int64_t **keys, bool **ends, double **ranks,
                       crl_error *err)
{
    *keys = NULL;
    *ends = NULL;
    *ranks = NULL;
    if (rb->slice) {
        const crl_td_key *k = rb->traj_k ? rb->traj_k : rb->end_k;
        const char *name = rb->traj_k ? rb->traj_key : rb->end_key;
        crl_tensor *t = crl_td_get_k(items, k);
        if (!t)
            return crl_error_set(err, CRL_E_NOT_FOUND,
                                 "replay: the slice sampler needs '%s' in every item (%s) and this data has "
                                 "none; add it or set %s in [%s]",
                                 name, rb->traj_k ? "the trajectory id, traj_key" : "the end-of-trajectory flag, end_key",
                                 rb->traj_k ? "traj_key" : "end_key", rb->section);
        if (rb->traj_k) {
            *keys = g_new(int64_t, (size_t)n);
            for (int64_t i = 0; i < n; i++)
                if (crl__row_i64(t, i, &(*keys)[i])) {
                    g_free(*keys);
                    *keys = NULL;
                    return crl_error_set(err, CRL_E_INVALID,
                                         "replay: trajectory id '%s' of item %" PRId64 " is not a finite number",
                                         name, i);
                }
        } else {
            *ends = g_new(bool, (size_t)n);
            for (int64_t i = 0; i < n; i++)
                (*ends)[i] = crl__row_any(t, i);
        }
    }
    if (rb->writer == CRL__WRITER_MAX_VALUE) {
        crl_tensor *t = crl_td_get_k(items, rb->rank_k);
        int rc = CRL_OK;
        if (!t)
            rc = crl_error_set(err, CRL_E_NOT_FOUND,
                               "replay: the max_value writer ranks items by '%s' and this data has none; add it "
                               "or set rank_key in [%s]",
                               rb->rank_key, rb->section);
        else if (row_numel(t) != 1)
            rc = crl_error_set(err, CRL_E_SHAPE,
                               "replay: rank key '%s' must hold one number per item, not %zu; reduce it first",
                               rb->rank_key, row_numel(t));
        if (!rc) {
            *ranks = g_new(double, (size_t)n);
            for (int64_t i = 0; i < n && !rc; i++) {
                (*ranks)[i] = crl__row_f64(t, i);
                if (isnan((*ranks)[i]))
                    rc = crl_error_set(err, CRL_E_INVALID, "replay: rank key '%s' of item %" PRId64 " is NaN",
                                       rb->rank_key, i);
            }
        }
        if (rc) {
            g_free(*keys);
            g_free(*ends);
            g_free(*ranks);
            *keys = NULL;
            *ends = NULL;
            *ranks = NULL;
            return rc;
        }
    }
    return CRL_OK;
}

/* After a failed storage write: learn what the storage really holds. */
static void after_failure(crl_replay *rb, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    if (crl__replay_sync_from_storage(rb, &e))
        crl_error_prefix(err, "(and the buffer could not re-read its storage: %s) ", e.message);
}

static int write_round_robin(crl_replay *rb, crl_td *items, int64_t n, int64_t *index, const int64_t *keys,
                             const bool *ends, crl_error *err)
{
    size_t cap = (size_t)rb->capacity;
    int64_t *slots = g_new(int64_t, (size_t)(n < rb->capacity ? n : rb->capacity));
    int64_t done = 0;
    int rc = CRL_OK;
    /* chunks of at most capacity items, so one set never names a slot twice */
    while (done < n && !rc) {
        int64_t m = n - done < rb->capacity ? n - done : rb->capacity;
        uint64_t w0 = rb->write_count;
        int64_t s0 = (int64_t)(w0 % cap);   /* one division, not one per item */
        for (int64_t k = 0; k < m; k++) {
            slots[k] = s0;
            if (++s0 == rb->capacity)
                s0 = 0;
        }
        crl_error e;
        crl_error_clear(&e);
        crl_td *chunk = (done == 0 && m == n) ? crl_td_ref(items) : crl_td_slice(items, 0, done, done + m, 1, &e);
        if (!chunk) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            break;
        }
        uint64_t wc0 = rb->ops.write_count ? rb->ops.write_count(rb->st) : 0;
        rc = rb->ops.set(rb->st, slots, (size_t)m, chunk, err);
        crl_td_unref(chunk);
        if (rc) {
            int64_t ok = 0;
            if (rb->ops.write_count) {
                uint64_t wc1 = rb->ops.write_count(rb->st);
                ok = wc1 > wc0 ? (int64_t)(wc1 - wc0) : 0;
                if (ok > m)
                    ok = m;
            }
            for (int64_t k = 0; index && k < ok; k++)
                index[done + k] = slots[k];
            crl_error_prefix(err, "replay: %" PRId64 " of %" PRId64 " items written: ", done + ok, n);
            after_failure(rb, err);
            break;
        }
        if (index)
            memcpy(index + done, slots, (size_t)m * sizeof *slots);
        written(rb, slots, (size_t)m, w0, keys ? keys + done : NULL, ends ? ends + done : NULL);
        done += m;
    }
    g_free(slots);
    return rc;
}

static int write_max_value(crl_replay *rb, crl_td *items, int64_t n, int64_t *index, const double *ranks,
                           crl_error *err)
{
    for (int64_t k = 0; k < n; k++) {
        int64_t slot;
        if (rb->next_free < rb->capacity) {
            slot = rb->next_free;
        } else {
            slot = crl__maxheap_min_slot(&rb->maxh);
            if (!(ranks[k] > rb->maxh.rank[slot])) {
                if (index)
                    index[k] = -1;
                continue;
            }
        }
        crl_error e;
        crl_error_clear(&e);
        crl_td *one = crl_td_slice(items, 0, k, k + 1, 1, &e);
        if (!one)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        int rc = rb->ops.set(rb->st, &slot, 1, one, err);
        crl_td_unref(one);
        if (rc) {
            crl_error_prefix(err, "replay: %" PRId64 " of %" PRId64 " items written: ", k, n);
            after_failure(rb, err);
            return rc;
        }
        crl__maxheap_set(&rb->maxh, slot, ranks[k]);
        written(rb, &slot, 1, rb->write_count, NULL, NULL);
        if (index)
            index[k] = slot;
    }
    return CRL_OK;
}

int crl_replay_extend(crl_replay *rb, const crl_td *items, int64_t *index, crl_error *err)
{
    if (!rb || !items)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_extend: %s is NULL", !rb ? "buffer" : "items");
    if (crl_td_batch_ndim(items) < 1)
        return crl_error_set(err, CRL_E_SHAPE,
                             "crl_replay_extend: items have batch shape []; extend takes a batch [n, ...] "
                             "(use crl_replay_add for one item)");
    int64_t n = crl_td_batch_shape(items)[0];
    if (n <= 0)
        return CRL_OK;
    int64_t *keys;
    bool *ends;
    double *ranks;
    int rc = item_values(rb, items, n, &keys, &ends, &ranks, err);
    if (rc)
        return rc;
    if (rb->writer == CRL__WRITER_MAX_VALUE)
        rc = write_max_value(rb, (crl_td *)items, n, index, ranks, err);
    else
        rc = write_round_robin(rb, (crl_td *)items, n, index, keys, ends, err);
    g_free(keys);
    g_free(ends);
    g_free(ranks);
    return rc;
}

int crl_replay_add(crl_replay *rb, const crl_td *item, int64_t *index, crl_error *err)
{
    if (!rb || !item)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_add: %s is NULL", !rb ? "buffer" : "item");
    if (crl_td_batch_ndim(item) >= CRL_MAX_DIMS)
        return crl_error_set(err, CRL_E_SHAPE, "crl_replay_add: the item has too many batch dims");
    /* one item = a batch of one: view it as [1, ...] */
    int64_t one = 1;
    crl_error e;
    crl_error_clear(&e);
    crl_td *batch = crl_td_new(1, &one, &e);
    if (!batch)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    char **leaves = crl_td_leaf_keys(item, &e);
    int rc = leaves ? CRL_OK : crl_error_pass(err, &e, CRL_E_NOMEM);
    for (size_t i = 0; !rc && leaves[i]; i++) {
        crl_tensor *t = crl_td_get(item, leaves[i]);
        crl_tensor *u = crl_tensor_unsqueeze(t, 0, &e);
        if (!u) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            break;
        }
        rc = crl_td_set(batch, leaves[i], u, err);
        crl_tensor_unref(u);
    }
    crl_free(leaves);
    if (!rc)
        rc = crl_replay_extend(rb, batch, index, err);
    crl_td_unref(batch);
    return rc;
}

/* ---- the index state from the storage ------------------------------------------- */

double crl__replay_current_beta(const crl_replay *rb)
{
    if (rb->beta_steps <= 0 || isnan(rb->beta_end))
        return rb->beta0;
    double f = rb->beta_count >= (uint64_t)rb->beta_steps ? 1.0 : (double)rb->beta_count / (double)rb->beta_steps;
    return rb->beta0 + (rb->beta_end - rb->beta0) * f;
}

/* Fetch the items of slots[0..n) in chunks and hand the per-item value of
 * `key` (row k) to fn. */
static int scan_items(crl_replay *rb, const int64_t *slots, size_t n, const crl_td_key *key, const char *what,
                      void (*fn)(crl_replay *rb, size_t i, const crl_tensor *t, int64_t row, void *user), void *user,
                      crl_error *err)
{
    enum { CHUNK = 1024 };
    for (size_t done = 0; done < n; done += CHUNK) {
        size_t m = n - done < CHUNK ? n - done : CHUNK;
        crl_error e;
        crl_error_clear(&e);
        crl_td *td = rb->ops.get(rb->st, slots + done, m, &e);
        if (!td) {
            crl_error_prefix(&e, "replay: reading the stored items' %s: ", what);
            return crl_error_pass(err, &e, CRL_E_IO);
        }
        crl_tensor *t = crl_td_get_k(td, key);
        if (!t) {
            crl_td_unref(td);
            return crl_error_set(err, CRL_E_NOT_FOUND,
                                 "replay: the stored items have no '%s' (%s); they were written without it, "
                                 "so this configuration cannot index them",
                                 crl_td_key_str(key), what);
        }
        for (size_t k = 0; k < m; k++)
            fn(rb, done + k, t, (int64_t)k, user);
        crl_td_unref(td);
    }
    return CRL_OK;
}

typedef struct {
    const uint64_t *wnum;
} slice_scan;

static void push_slice(crl_replay *rb, size_t i, const crl_tensor *t, int64_t row, void *user)
{
    slice_scan *sc = user;
    int64_t key = 0;
    bool end = false;
    if (rb->traj_k)
        crl__row_i64(t, row, &key);
    else
        end = crl__row_any(t, row);
    crl__slice_push(rb->slice, sc->wnum[i], key, end);
}

static void push_rank(crl_replay *rb, size_t i, const crl_tensor *t, int64_t row, void *user)
{
    const int64_t *slots = user;
    double r = crl__row_f64(t, row);
    crl__maxheap_set(&rb->maxh, slots[i], isnan(r) ? -INFINITY : r);
}

int crl__replay_sync_from_storage(crl_replay *rb, crl_error *err)
{
    size_t cap = (size_t)rb->capacity;
    int64_t len = rb->ops.len(rb->st);
    if (len < 0 || len > rb->capacity)
        return crl_error_set(err, CRL_E_RANGE,
                             "replay: storage '%s' reports %" PRId64 " items for capacity %" PRId64,
                             rb->storage_name, len, rb->capacity);
    memset(rb->filled, 0, cap);
    rb->nfilled = 0;
    rb->high = 0;
    rb->next_free = 0;
    rb->dense_dirty = true;
    rb->epoch_over = false;
    for (int64_t i = 0; i < len; i++)
        if (!rb->ops.has || rb->ops.has(rb->st, i)) {
            rb->filled[i] = 1;
            rb->nfilled++;
            rb->high = i + 1;
        }
    while (rb->next_free < rb->capacity && rb->filled[rb->next_free])
        rb->next_free++;
    rb->write_count = rb->ops.write_count ? rb->ops.write_count(rb->st) : (uint64_t)len;
    if (rb->write_count < (uint64_t)rb->high)
        return crl_error_set(err, CRL_E_RANGE,
                             "replay: storage '%s' holds items up to slot %" PRId64 " but reports only %" PRIu64
                             " writes",
                             rb->storage_name, rb->high - 1, rb->write_count);
    if (rb->norepl) {
        crl_error e;
        crl_error_clear(&e);
        crl__sampler_norepl *n = crl__sampler_norepl_new(cap, rb->drop_last, rb->shuffle, &e);
        if (!n)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        crl__sampler_norepl_free(rb->norepl);
        rb->norepl = n;
    }
    int64_t *slots = g_new(int64_t, rb->nfilled ? rb->nfilled : 1);
    size_t k = 0;
    for (size_t i = 0; i < cap; i++)
        if (rb->filled[i])
            slots[k++] = (int64_t)i;
    int rc = CRL_OK;
    if (rb->prio) {
        crl_error e;
        crl_error_clear(&e);
        crl__sampler_prio *p = crl__sampler_prio_new(cap, rb->alpha, crl__replay_current_beta(rb), rb->eps, &e);
        if (!p) {
            g_free(slots);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
        crl__sampler_prio_free(rb->prio);
        rb->prio = p;
        crl__sampler_prio_add(rb->prio, slots, rb->nfilled, NULL);
    }
    if (rb->writer == CRL__WRITER_MAX_VALUE) {
        crl__maxheap_clear(&rb->maxh);
        rc = scan_items(rb, slots, rb->nfilled, rb->rank_k, "rank key", push_rank, slots, err);
    }
    if (!rc && rb->slice) {
        /* items in write order: number w sits in slot w % capacity */
        crl__slice_clear(rb->slice);
        uint64_t W = rb->write_count, first = W > cap ? W - cap : 0;
        uint64_t *wnum = g_new(uint64_t, rb->nfilled ? rb->nfilled : 1);
        size_t m = 0;
        for (uint64_t w = first; w < W; w++)
            if (rb->filled[w % cap]) {
                slots[m] = (int64_t)(w % cap);
                wnum[m++] = w;
            }
        slice_scan sc = { wnum };
        rc = scan_items(rb, slots, m, rb->traj_k ? rb->traj_k : rb->end_k,
                        rb->traj_k ? "trajectory ids" : "end flags", push_slice, &sc, err);
        g_free(wnum);
    }
    g_free(slots);
    return rc;
}
