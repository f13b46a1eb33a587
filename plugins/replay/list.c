/* plugins/replay: storage/list, one cloned TensorDict per slot (items may differ in shape), with dump/load. */
#include "config.h"
#include "replay.h"

#include <crl/checkpoint.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define WHO "storage/list"

typedef struct list_store {
    int64_t capacity;
    crl_td **slots;
    int64_t len;
    uint64_t write_count;
} list_store;

static int list_open(const crl_opts *opts, int64_t capacity, void **out, crl_error *err)
{
    (void)opts;
    if (!out)
        return crl_error_set(err, CRL_E_INVALID, WHO ": open: out pointer is NULL");
    if (capacity < 1)
        return crl_error_set(err, CRL_E_INVALID, WHO ": capacity %" PRId64 " must be at least 1", capacity);
    list_store *s = calloc(1, sizeof *s);
    if (!s || (uint64_t)capacity > SIZE_MAX / sizeof(crl_td *) ||
        !(s->slots = calloc((size_t)capacity, sizeof(crl_td *)))) {
        free(s);
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory for %" PRId64 " slots", capacity);
    }
    s->capacity = capacity;
    *out = s;
    return CRL_OK;
}

static void free_tds(crl_td **tds, size_t n)
{
    for (size_t k = 0; k < n; k++)
        crl_td_unref(tds[k]);
}

static int list_set(void *st, const int64_t *idx, size_t n, const crl_td *items, crl_error *err)
{
    list_store *s = st;
    int rc;
    if ((rc = rp_check_items(WHO, items, n, err)) || (rc = rp_check_indices(WHO ": set", idx, n, s->capacity, err)))
        return rc;
    if (n == 0)
        return CRL_OK;
    /* Clone everything first: a failure writes nothing. */
    crl_td **clones = calloc(n, sizeof *clones);
    if (!clones)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    for (size_t k = 0; k < n; k++) {
        crl_error e;
        crl_error_clear(&e);
        crl_td *view = crl_td_index((crl_td *)items, 0, (int64_t)k, &e);
        clones[k] = view ? crl_td_clone(view, &e) : NULL;
        crl_td_unref(view);
        if (!clones[k]) {
            crl_error_prefix(&e, WHO ": set: item %zu: ", k);
            free_tds(clones, k);
            free(clones);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
    }
    for (size_t k = 0; k < n; k++) {
        crl_td_unref(s->slots[idx[k]]);
        s->slots[idx[k]] = clones[k];
        if (idx[k] + 1 > s->len)
            s->len = idx[k] + 1;
    }
    s->write_count += n;
    free(clones);
    return CRL_OK;
}

static int check_filled(const list_store *s, const int64_t *idx, size_t n, crl_error *err)
{
    if (rp_check_indices(WHO ": get", idx, n, s->capacity, err))
        return CRL_E_RANGE;
    for (size_t k = 0; k < n; k++) {
        if (!s->slots[idx[k]])
            return crl_error_set(err, CRL_E_RANGE, WHO ": get: slot %" PRId64 " (position %zu) is empty", idx[k], k);
    }
    return CRL_OK;
}

static crl_td *list_get(void *st, const int64_t *idx, size_t n, crl_error *err)
{
    list_store *s = st;
    if (check_filled(s, idx, n, err))
        return NULL;
    if (n == 0) {
        int64_t zero = 0;
        return crl_td_new(1, &zero, err);
    }
    crl_td **tds = malloc(n * sizeof *tds);
    if (!tds) {
        crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        return NULL;
    }
    for (size_t k = 0; k < n; k++)
        tds[k] = s->slots[idx[k]];
    crl_error serr;
    crl_td *out = crl_td_stack(tds, n, 0, &serr);
    free(tds);
    if (!out) {
        if (serr.code == CRL_E_NOMEM)
            crl_error_set(err, CRL_E_NOMEM, WHO ": get: %s", serr.message);
        else
            crl_error_set(err, CRL_E_SHAPE,
                          WHO ": get: the %zu items cannot be stacked (%s); the list storage keeps items of "
                          "different shapes: fetch them one at a time (n = 1)",
                          n, serr.message);
    }
    return out;
}

static int64_t list_len(void *st)
{
    return ((list_store *)st)->len;
}

static bool list_has(void *st, int64_t i)
{
    list_store *s = st;
    return i >= 0 && i < s->capacity && s->slots[i] != NULL;
}

static uint64_t list_write_count(void *st)
{
    return ((list_store *)st)->write_count;
}

static int list_clear(void *st, crl_error *err)
{
    (void)err;
    list_store *s = st;
    free_tds(s->slots, (size_t)s->capacity);
    memset(s->slots, 0, sizeof(crl_td *) * (size_t)s->capacity);
    s->len = 0;
    s->write_count = 0;
    return CRL_OK;
}

static void list_close(void *st)
{
    list_store *s = st;
    if (!s)
        return;
    free_tds(s->slots, (size_t)s->capacity);
    free(s->slots);
    free(s);
}

/* ---- dump / load ------------------------------------------------------------
 *
 * DIR/storage.ckpt, kind crl.storage.list:
 *   "meta"   u64 capacity, u64 len, u64 write_count, u64 count
 *   "items"  count records: u64 slot, u64 layout bytes, layout (layout.c
 *            encoding of the item, batch shape included), then every leaf's
 *            contiguous elements in layout order, each little-endian
 */

static char *ckpt_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/storage.ckpt";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/storage.ckpt", dir);
    return p;
}

typedef struct growbuf {
    uint8_t *p;
    size_t len, cap;
} growbuf;

static bool gb_reserve(growbuf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool gb_add(growbuf *b, const void *data, size_t len)
{
    if (!gb_reserve(b, len))
        return false;
    if (len)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    return true;
}

/* A leaf's elements, little-endian. */
static bool gb_add_le(growbuf *b, const void *data, size_t len, size_t elem_size)
{
    if (!gb_reserve(b, len))
        return false;
    crl_ckpt_le_copy(b->p + b->len, data, elem_size, len / elem_size);
    b->len += len;
    return true;
}

static int encode_item(growbuf *b, int64_t slot, const crl_td *item, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    rp_layout *l = rp_layout_from_item(WHO, item, &e);
    if (!l)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    size_t llen;
    uint8_t *lb = rp_layout_encode(l, &llen);
    uint8_t hdr[16];
    rp_put_u64(hdr, (uint64_t)slot);
    rp_put_u64(hdr + 8, llen);
    bool ok = lb && gb_add(b, hdr, sizeof hdr) && gb_add(b, lb, llen);
    free(lb);
    for (size_t i = 0; ok && i < l->nleaves; i++) {
        crl_tensor *t = crl_tensor_contiguous(crl_td_get_k(item, l->leaves[i].handle), &e);
        if (!t) {
            rp_layout_free(l);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
        ok = gb_add_le(b, crl_tensor_data(t), l->leaves[i].row_bytes, crl_dtype_size(l->leaves[i].dtype));
        crl_tensor_unref(t);
    }
    rp_layout_free(l);
    return ok ? CRL_OK : crl_error_set(err, CRL_E_NOMEM, WHO ": dump: out of memory");
}

static int list_dump(void *st, const char *dir, crl_error *err)
{
    list_store *s = st;
    char *path = ckpt_path(dir);
    growbuf b = { 0 };
    uint64_t count = 0;
    int rc = CRL_OK;
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    for (int64_t i = 0; i < s->len && rc == CRL_OK; i++) {
        if (s->slots[i]) {
            rc = encode_item(&b, i, s->slots[i], err);
            count++;
        }
    }
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_writer *w = rc ? NULL : crl_ckpt_writer_new(path, RP_LIST_KIND, RP_LIST_KIND_VERSION, &e);
    if (!rc && !w)
        rc = crl_error_pass(err, &e, CRL_E_IO);
    if (w) {
        uint8_t meta[32];
        rp_put_u64(meta, (uint64_t)s->capacity);
        rp_put_u64(meta + 8, (uint64_t)s->len);
        rp_put_u64(meta + 16, s->write_count);
        rp_put_u64(meta + 24, count);
        if ((rc = crl_ckpt_write(w, "meta", meta, sizeof meta, err)) ||
            (rc = crl_ckpt_write(w, "items", b.p, b.len, err))) {
            crl_ckpt_writer_abort(w);
        } else {
            rc = crl_ckpt_writer_close(w, err);
        }
    }
    free(b.p);
    free(path);
    return rc;
}

/* Decode one record at *pos of the items section into a new item. */
static crl_td *decode_item(const char *path, const uint8_t *data, size_t len, size_t *pos, int64_t *slot,
                           crl_error *err)
{
    size_t at = *pos;
    if (len - at < 16) {
        crl_error_set(err, CRL_E_CORRUPT, "%s: section 'items' offset %zu: record header truncated", path, at);
        return NULL;
    }
    uint64_t sl = rp_get_u64(data + at), llen = rp_get_u64(data + at + 8);
    at += 16;
    if (llen > len - at) {
        crl_error_set(err, CRL_E_CORRUPT, "%s: section 'items' offset %zu: layout of %" PRIu64 " bytes overruns the section",
                      path, at - 8, llen);
        return NULL;
    }
    char what[512];
    snprintf(what, sizeof what, "%s: section 'items'", path);
    rp_layout *l = rp_layout_decode(what, data + at, (size_t)llen, at, true, err);
    if (!l)
        return NULL;
    at += (size_t)llen;
    if (l->item_bytes > len - at) {
        crl_error_set(err, CRL_E_CORRUPT, "%s: section 'items' offset %zu: slot %" PRIu64 " needs %zu data bytes, %zu left",
                      path, at, sl, l->item_bytes, len - at);
        rp_layout_free(l);
        return NULL;
    }
    for (size_t i = 0, off = at; i < l->nleaves; off += l->leaves[i++].row_bytes) {
        if (l->leaves[i].dtype != CRL_BOOL)
            continue;
        for (size_t k = 0; k < l->leaves[i].row_bytes; k++)
            if (data[off + k] > 1) {
                crl_error_set(err, CRL_E_CORRUPT, "%s: section 'items' offset %zu: slot %" PRIu64 ", bool leaf '%s': "
                              "byte %u, not 0 or 1", path, off + k, sl, l->leaves[i].key, data[off + k]);
                rp_layout_free(l);
                return NULL;
            }
    }
    crl_td *item = crl_td_new(l->batch_ndim, l->batch_shape, err);
    for (size_t i = 0; item && i < l->nleaves; i++) {
        const rp_leaf *f = &l->leaves[i];
        crl_tensor *t = crl_tensor_new(f->dtype, f->ndim, f->shape, err);
        if (t && f->row_bytes)
            crl_ckpt_le_copy(crl_tensor_data(t), data + at, crl_dtype_size(f->dtype),
                             f->row_bytes / crl_dtype_size(f->dtype));
        at += f->row_bytes;
        if (!t || crl_td_set_k(item, f->handle, t, err)) {
            crl_tensor_unref(t);
            crl_td_unref(item);
            item = NULL;
            crl_error_prefix(err, "%s: section 'items': slot %" PRIu64 ": ", path, sl);
        } else {
            crl_tensor_unref(t);
        }
    }
    rp_layout_free(l);
    *slot = (int64_t)(sl > INT64_MAX ? INT64_MAX : sl);
    *pos = at;
    return item;
}

static int list_load(void *st, const char *dir, crl_error *err)
{
    list_store *s = st;
    char *path = ckpt_path(dir);
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, RP_LIST_KIND, RP_LIST_KIND_VERSION, &e);
    crl_td **slots = NULL;
    int rc = CRL_OK;
    uint8_t meta[32];
    if (!r) {
        rc = crl_error_pass(err, &e, CRL_E_IO);
        goto out;
    }
    if ((rc = crl_ckpt_read(r, "meta", meta, sizeof meta, err)))
        goto out;
    uint64_t cap = rp_get_u64(meta), len = rp_get_u64(meta + 8), wc = rp_get_u64(meta + 16),
             count = rp_get_u64(meta + 24);
    if (cap != (uint64_t)s->capacity) {
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "%s: dumped from a list storage of capacity %" PRIu64 " but this one has capacity %" PRId64
                           "; load it into a storage with capacity = %" PRIu64,
                           path, cap, s->capacity, cap);
        goto out;
    }
    if (len > cap || count > len || wc < count) {
        rc = crl_error_set(err, CRL_E_CORRUPT,
                           "%s: section 'meta': inconsistent counts (len %" PRIu64 ", items %" PRIu64
                           ", write_count %" PRIu64 ", capacity %" PRIu64 ")",
                           path, len, count, wc, cap);
        goto out;
    }
    if (!crl_ckpt_has(r, "items")) {
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section 'items' is missing", path);
        goto out;
    }
    size_t ilen = 0;
    const uint8_t *items = crl_ckpt_section(r, "items", &ilen, &e);
    if (!items && ilen != 0) {
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        goto out;
    }
    if (!items)
        ilen = 0;
    slots = calloc((size_t)s->capacity, sizeof *slots);
    if (!slots) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    size_t pos = 0;
    int64_t prev = -1;
    for (uint64_t k = 0; k < count; k++) {
        size_t at = pos;
        int64_t slot;
        crl_td *item = decode_item(path, items, ilen, &pos, &slot, &e);
        if (!item) {
            rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
            goto out;
        }
        if (slot <= prev || (uint64_t)slot >= len) {
            crl_td_unref(item);
            rc = crl_error_set(err, CRL_E_CORRUPT,
                               "%s: section 'items' offset %zu: slot %" PRId64 " is out of order or not below len %" PRIu64,
                               path, at, slot, len);
            goto out;
        }
        slots[slot] = item;
        prev = slot;
    }
    if (pos != ilen) {
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section 'items' offset %zu: %zu bytes after the last item", path,
                           pos, ilen - pos);
        goto out;
    }
    /* Validated: replace the contents. */
    free_tds(s->slots, (size_t)s->capacity);
    free(s->slots);
    s->slots = slots;
    slots = NULL;
    s->len = (int64_t)len;
    s->write_count = wc;
out:
    if (slots) {
        free_tds(slots, (size_t)s->capacity);
        free(slots);
    }
    crl_ckpt_reader_free(r);
    free(path);
    return rc;
}

const crl_storage_ops rp_list_ops = {
    .struct_size = sizeof(crl_storage_ops),
    .open = list_open,
    .set = list_set,
    .get = list_get,
    .len = list_len,
    .has = list_has,
    .write_count = list_write_count,
    .sync = NULL,
    .clear = list_clear,
    .dump = list_dump,
    .load = list_load,
    .close = list_close,
};
