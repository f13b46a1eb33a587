/* ring: a replay storage.  Keeps each item (a TensorDict of batch []) in memory, one per slot, and
 * writes them to one checkpoint file on dump.  The sampler and the round-robin writer are the host's.
 *
 * What it shows: open from validated options, set that checks every item against the layout before
 * writing any (so a mismatch changes nothing), get stacking the slots into a batch, and dump/load through
 * <crl/checkpoint.h>: little-endian fields, every size and index checked on load before anything
 * changes, CRL_E_CORRUPT naming the file and the field. */
#include "example.h"

#include <crl/checkpoint.h>
#include <crl/storage_backend.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_KIND "example.ring"
#define RING_VERSION 1u

typedef struct ring {
    int64_t capacity, len;
    uint64_t write_count;
    crl_td **slots;     /* capacity entries; NULL: empty */
} ring;

static void ring_clear_slots(ring *r)
{
    for (int64_t i = 0; i < r->capacity; i++) {
        crl_td_unref(r->slots[i]);
        r->slots[i] = NULL;
    }
    r->len = 0;
    r->write_count = 0;
}

static void ring_close(void *st)
{
    ring *r = st;
    if (!r)
        return;
    ring_clear_slots(r);
    free(r->slots);
    free(r);
}

static int ring_open(const crl_opts *opts, int64_t capacity, void **st, crl_error *err)
{
    int64_t max_capacity;
    int rc = crl_opts_int(opts, "max_capacity", &max_capacity, err);
    if (rc)
        return rc;
    if (capacity < 1 || capacity > max_capacity)
        return crl_error_set(err, CRL_E_CONFIG, "ring: capacity %lld is outside 1..%lld (raise [replay] "
                             "max_capacity, or lower capacity)", (long long)capacity, (long long)max_capacity);
    ring *r = calloc(1, sizeof *r);
    if (r)
        r->slots = calloc((size_t)capacity, sizeof *r->slots);
    if (!r || !r->slots) {
        free(r);
        return crl_error_set(err, CRL_E_NOMEM, "ring: out of memory for %lld slots", (long long)capacity);
    }
    r->capacity = capacity;
    *st = r;
    return CRL_OK;
}

/* CRL_OK when `item` has the keys, dtypes and shapes of `ref` (both batch []). */
static int same_layout(const crl_td *ref, const crl_td *item, crl_error *err)
{
    crl_error local = { 0 };
    char **a = crl_td_leaf_keys(ref, &local), **b = a ? crl_td_leaf_keys(item, &local) : NULL;
    int rc = CRL_OK;
    if (!a || !b) {
        rc = crl_error_pass(err, &local, CRL_E_NOMEM);
    } else {
        size_t i = 0;
        for (; !rc && a[i] && b[i]; i++) {
            const crl_tensor *x = crl_td_get(ref, a[i]), *y = crl_td_get(item, b[i]);
            if (strcmp(a[i], b[i]) != 0)
                rc = crl_error_set(err, CRL_E_NOT_FOUND, "ring: an item has key '%s' where the stored ones have "
                                   "'%s'", b[i], a[i]);
            else if (crl_tensor_dtype(x) != crl_tensor_dtype(y))
                rc = crl_error_set(err, CRL_E_DTYPE, "ring: '%s' is %s, stored items have %s", a[i],
                                   crl_dtype_name(crl_tensor_dtype(y)), crl_dtype_name(crl_tensor_dtype(x)));
            else if (!crl_tensor_same_shape(x, y))
                rc = crl_error_set(err, CRL_E_SHAPE, "ring: '%s' has another shape than in the stored items", a[i]);
        }
        if (!rc && (a[i] || b[i]))
            rc = crl_error_set(err, CRL_E_NOT_FOUND, "ring: key '%s' is in %s but not in %s",
                               a[i] ? a[i] : b[i], a[i] ? "the stored items" : "the new item",
                               a[i] ? "the new item" : "the stored items");
    }
    crl_free(a);
    crl_free(b);
    return rc;
}

static const crl_td *any_item(const ring *r)
{
    for (int64_t i = 0; i < r->len; i++)
        if (r->slots[i])
            return r->slots[i];
    return NULL;
}

static int ring_set(void *st, const int64_t *idx, size_t n, const crl_td *items, crl_error *err)
{
    ring *r = st;
    if (crl_td_batch_ndim(items) < 1 || crl_td_batch_shape(items)[0] != (int64_t)n)
        return crl_error_set(err, CRL_E_SHAPE, "ring: set of %zu items needs a batch of %zu", n, n);
    crl_td **copies = calloc(n ? n : 1, sizeof *copies);
    if (!copies)
        return crl_error_set(err, CRL_E_NOMEM, "ring: out of memory");
    const crl_td *ref = any_item(r);
    int rc = CRL_OK;
    crl_error local = { 0 };
    /* Check and copy everything first: a bad item leaves every slot as it was. */
    for (size_t k = 0; !rc && k < n; k++) {
        if (idx[k] < 0 || idx[k] >= r->capacity) {
            rc = crl_error_set(err, CRL_E_RANGE, "ring: slot %lld of a storage of %lld", (long long)idx[k],
                               (long long)r->capacity);
            break;
        }
        crl_td *view = crl_td_index((crl_td *)items, 0, (int64_t)k, &local);
        copies[k] = view ? crl_td_clone(view, &local) : NULL;
        crl_td_unref(view);
        if (!copies[k])
            rc = crl_error_pass(err, &local, CRL_E_NOMEM);
        else if (!ref)
            ref = copies[k];
        else
            rc = same_layout(ref, copies[k], err);
    }
    for (size_t k = 0; k < n; k++) {
        if (rc) {
            crl_td_unref(copies[k]);
            continue;
        }
        crl_td_unref(r->slots[idx[k]]);
        r->slots[idx[k]] = copies[k];
        if (idx[k] + 1 > r->len)
            r->len = idx[k] + 1;
    }
    free(copies);
    if (!rc)
        r->write_count += n;
    return rc;
}

static crl_td *ring_get(void *st, const int64_t *idx, size_t n, crl_error *err)
{
    ring *r = st;
    crl_td **tds = calloc(n ? n : 1, sizeof *tds);
    if (!tds) {
        crl_error_set(err, CRL_E_NOMEM, "ring: out of memory");
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= r->capacity || !r->slots[idx[k]]) {
            crl_error_set(err, CRL_E_RANGE, "ring: slot %lld is %s", (long long)idx[k],
                          idx[k] < 0 || idx[k] >= r->capacity ? "out of range" : "empty");
            free(tds);
            return NULL;
        }
        tds[k] = r->slots[idx[k]];
    }
    crl_td *out = crl_td_stack(tds, n, 0, err);
    free(tds);
    return out;
}

static int64_t ring_len(void *st)
{
    return ((ring *)st)->len;
}

static bool ring_has(void *st, int64_t i)
{
    ring *r = st;
    return i >= 0 && i < r->capacity && r->slots[i] != NULL;
}

static uint64_t ring_write_count(void *st)
{
    return ((ring *)st)->write_count;
}

static int ring_clear(void *st, crl_error *err)
{
    (void)err;
    ring_clear_slots(st);
    return CRL_OK;
}

/* ring.ckpt: "meta" = capacity, len, write_count, count (u64 LE each); "slots" = count u64 LE slot
 * numbers; "items/..." = the count items stacked. */
static char *ring_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/ring.ckpt";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/ring.ckpt", dir);
    return p;
}

static int ring_dump(void *st, const char *dir, crl_error *err)
{
    ring *r = st;
    char *path = ring_path(dir);
    int64_t count = 0;
    for (int64_t i = 0; i < r->len; i++)
        count += r->slots[i] != NULL;
    uint8_t meta[32];
    uint8_t *slots = malloc((size_t)(count ? count : 1) * 8);
    crl_td **tds = calloc((size_t)(count ? count : 1), sizeof *tds);
    if (!path || !slots || !tds) {
        free(path), free(slots), free(tds);
        return crl_error_set(err, CRL_E_NOMEM, "ring: out of memory");
    }
    crl_ckpt_put_u64(meta, (uint64_t)r->capacity);
    crl_ckpt_put_u64(meta + 8, (uint64_t)r->len);
    crl_ckpt_put_u64(meta + 16, r->write_count);
    crl_ckpt_put_u64(meta + 24, (uint64_t)count);
    for (int64_t i = 0, k = 0; i < r->len; i++) {
        if (r->slots[i]) {
            crl_ckpt_put_u64(slots + 8 * k, (uint64_t)i);
            tds[k++] = r->slots[i];
        }
    }
    crl_error local = { 0 };
    crl_td *items = count ? crl_td_stack(tds, (size_t)count, 0, &local) : NULL;
    crl_ckpt_writer *w = count && !items ? NULL : crl_ckpt_writer_new(path, RING_KIND, RING_VERSION, &local);
    int rc = w ? CRL_OK : crl_error_pass(err, &local, CRL_E_IO);
    if (!rc && ((rc = crl_ckpt_write(w, "meta", meta, sizeof meta, err)) ||
                (rc = crl_ckpt_write(w, "slots", slots, (size_t)count * 8, err)) ||
                (items && (rc = crl_ckpt_write_td(w, "items", items, err)))))
        crl_ckpt_writer_abort(w);
    else if (!rc)
        rc = crl_ckpt_writer_close(w, err);
    crl_td_unref(items);
    free(tds);
    free(slots);
    free(path);
    return rc;
}

static int ring_load(void *st, const char *dir, crl_error *err)
{
    ring *r = st;
    char *path = ring_path(dir);
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, "ring: out of memory");
    crl_error local = { 0 };
    crl_ckpt_reader *rd = crl_ckpt_reader_open(path, RING_KIND, RING_VERSION, &local);
    free(path);
    if (!rd)
        return crl_error_pass(err, &local, CRL_E_IO);
    uint8_t meta[32];
    int rc = crl_ckpt_read(rd, "meta", meta, sizeof meta, err);
    uint64_t cap = crl_ckpt_get_u64(meta), len = crl_ckpt_get_u64(meta + 8), wc = crl_ckpt_get_u64(meta + 16),
             count = crl_ckpt_get_u64(meta + 24);
    const char *file = crl_ckpt_path(rd);
    if (!rc && cap != (uint64_t)r->capacity)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: a ring of %llu slots, this one has %lld: give [replay] "
                           "capacity = %llu", file, (unsigned long long)cap, (long long)r->capacity,
                           (unsigned long long)cap);
    if (!rc && (len > cap || count > len))
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: meta: len %llu and count %llu do not fit %llu slots", file,
                           (unsigned long long)len, (unsigned long long)count, (unsigned long long)cap);
    size_t slen = 0;
    const uint8_t *slots = rc ? NULL : crl_ckpt_section(rd, "slots", &slen, err);
    if (!rc && !slots)
        rc = CRL_E_CORRUPT;
    if (!rc && slen != count * 8)
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: slots: %zu bytes for %llu items", file, slen,
                           (unsigned long long)count);
    crl_td *items = NULL;
    if (!rc && count) {
        items = crl_ckpt_read_td(rd, "items", &local);
        if (!items)
            rc = crl_error_pass(err, &local, CRL_E_CORRUPT);
        else if (crl_td_batch_ndim(items) != 1 || crl_td_batch_shape(items)[0] != (int64_t)count)
            rc = crl_error_set(err, CRL_E_CORRUPT, "%s: items: not a batch of %llu", file, (unsigned long long)count);
    }
    /* Everything checked and copied before the storage changes: a failed load leaves it as it was. */
    crl_td **next = rc ? NULL : calloc((size_t)cap, sizeof *next);
    if (!rc && !next)
        rc = crl_error_set(err, CRL_E_NOMEM, "ring: out of memory");
    for (uint64_t k = 0; !rc && k < count; k++) {
        uint64_t s = crl_ckpt_get_u64(slots + 8 * k);
        if (s >= len || next[s]) {
            rc = crl_error_set(err, CRL_E_CORRUPT, "%s: slots[%llu] = %llu is %s", file, (unsigned long long)k,
                               (unsigned long long)s, s >= len ? "past len" : "given twice");
            break;
        }
        crl_td *view = crl_td_index(items, 0, (int64_t)k, &local);
        next[s] = view ? crl_td_clone(view, &local) : NULL;
        crl_td_unref(view);
        if (!next[s])
            rc = crl_error_pass(err, &local, CRL_E_NOMEM);
    }
    if (!rc) {
        ring_clear_slots(r);
        memcpy(r->slots, next, (size_t)cap * sizeof *next);
        r->len = (int64_t)len;
        r->write_count = wc;
    } else if (next) {
        for (uint64_t s = 0; s < cap; s++)
            crl_td_unref(next[s]);
    }
    free(next);
    crl_td_unref(items);
    crl_ckpt_reader_free(rd);
    return rc;
}

static const crl_storage_ops ring_ops = {
    .struct_size = sizeof(crl_storage_ops),
    .open = ring_open,
    .set = ring_set,
    .get = ring_get,
    .len = ring_len,
    .has = ring_has,
    .write_count = ring_write_count,
    .clear = ring_clear,
    .dump = ring_dump,
    .load = ring_load,
    .close = ring_close,
    /* sync and check stay NULL: nothing is kept at rest between runs */
};

/* Joins the [replay] section when storage = ring. */
static const crl_option ring_options[] = {
    { "max_capacity", CRL_OPT_INT, CRL_OPT_RANGE, "1000000", 1, 1e9, NULL,
      "largest [replay] capacity accepted (a guard against typos)" },
    CRL_OPTIONS_END
};

const crl_component example_ring_component = {
    sizeof(crl_component), CRL_KIND_STORAGE, "ring", "items in memory, one per slot, dumped to one file",
    ring_options, &ring_ops
};
