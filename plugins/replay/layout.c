/* plugins/replay: item layouts (keys, dtypes, per-item shapes), their checks, printing and portable encoding. */
#include "config.h"
#include "replay.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Caps that keep a decoded layout sane (a hostile file cannot make us
 * allocate absurd amounts). */
#define RP_MAX_LEAVES 65536u
#define RP_MAX_KEY 4096u
#define RP_MAX_ITEM_BYTES ((uint64_t)1 << 40)

void rp_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void rp_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t rp_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

uint64_t rp_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- a growable string for messages ------------------------------------ */

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) CRL_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0)
        return;
    if (b->len + (size_t)need + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + (size_t)need + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
            return;
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)need;
}

static char *sb_take(sbuf *b)
{
    if (!b->s)
        return strdup("");
    return b->s;
}

static void sb_shape(sbuf *b, int ndim, const int64_t *shape)
{
    sb_printf(b, "[");
    for (int i = 0; i < ndim; i++)
        sb_printf(b, "%s%" PRId64, i ? ", " : "", shape[i]);
    sb_printf(b, "]");
}

static void sb_leaf(sbuf *b, crl_dtype dt, int ndim, const int64_t *shape)
{
    const char *name = crl_dtype_name(dt);
    sb_printf(b, "%s", name ? name : "?");
    sb_shape(b, ndim, shape);
}

/* ---- checks --------------------------------------------------------------- */

int rp_check_items(const char *who, const crl_td *items, size_t n, crl_error *err)
{
    if (!items)
        return crl_error_set(err, CRL_E_INVALID, "%s: set: items is NULL", who);
    int bnd = crl_td_batch_ndim(items);
    if (bnd < 1)
        return crl_error_set(err, CRL_E_SHAPE,
                             "%s: set: items have batch shape []; pass a batch whose first dim counts the "
                             "items (add a leading dim of 1 for one item)",
                             who);
    if (crl_td_batch_shape(items)[0] != (int64_t)n)
        return crl_error_set(err, CRL_E_SHAPE,
                             "%s: set: %zu slots given for a batch of %" PRId64
                             " items; pass one slot per item",
                             who, n, crl_td_batch_shape(items)[0]);
    return CRL_OK;
}

int rp_check_indices(const char *who, const int64_t *idx, size_t n, int64_t capacity, crl_error *err)
{
    if (n > 0 && !idx)
        return crl_error_set(err, CRL_E_INVALID, "%s: slot indices are NULL", who);
    /* Branch-free pass first (vectorised); the exact culprit only on failure.
     * As unsigned, a negative index is larger than any capacity. */
    uint64_t bad = 0;
    for (size_t k = 0; k < n; k++)
        bad |= (uint64_t)((uint64_t)idx[k] >= (uint64_t)capacity);
    if (!bad)
        return CRL_OK;
    for (size_t k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= capacity)
            return crl_error_set(err, CRL_E_RANGE,
                                 "%s: slot %" PRId64 " (position %zu) is out of range [0, %" PRId64 ")",
                                 who, idx[k], k, capacity);
    }
    return CRL_OK;
}

/* ---- layouts -------------------------------------------------------------- */

void rp_layout_free(rp_layout *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->nleaves; i++) {
        free(l->leaves[i].key);
        crl_td_key_free(l->leaves[i].handle);
    }
    free(l->leaves);
    free(l);
}

/* Fill row_bytes/item_bytes with overflow checks. */
static int layout_sizes(const char *who, rp_layout *l, crl_error *err)
{
    uint64_t total = 0;
    for (size_t i = 0; i < l->nleaves; i++) {
        rp_leaf *f = &l->leaves[i];
        uint64_t bytes = crl_dtype_size(f->dtype);
        for (int d = 0; d < f->ndim; d++) {
            if (f->shape[d] < 0 || __builtin_mul_overflow(bytes, (uint64_t)f->shape[d], &bytes) ||
                bytes > RP_MAX_ITEM_BYTES)
                return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s': one item is too large (over 2^40 bytes)",
                                     who, f->key);
        }
        f->row_bytes = (size_t)bytes;
        total += bytes;
        if (total > RP_MAX_ITEM_BYTES)
            return crl_error_set(err, CRL_E_SHAPE, "%s: one item is larger than 2^40 bytes", who);
    }
    l->item_bytes = (size_t)total;
    return CRL_OK;
}

/* The layout of td's leaves with `lead` leading dims dropped (1 for a
 * batch of items, 0 for one item). */
static rp_layout *layout_from_td(const char *who, const crl_td *items, int lead, bool allow_empty, crl_error *err)
{
    char **keys = crl_td_leaf_keys(items, err);
    if (!keys)
        return NULL;
    size_t n = 0;
    while (keys[n])
        n++;
    if (n == 0 && !allow_empty) {
        crl_free(keys);
        crl_error_set(err, CRL_E_INVALID, "%s: the item holds no tensors; store at least one key", who);
        return NULL;
    }
    rp_layout *l = calloc(1, sizeof *l);
    if (!l || !(l->leaves = calloc(n ? n : 1, sizeof *l->leaves))) {
        free(l);
        crl_free(keys);
        crl_error_set(err, CRL_E_NOMEM, "%s: out of memory for a layout of %zu keys", who, n);
        return NULL;
    }
    l->batch_ndim = crl_td_batch_ndim(items) - lead;
    memcpy(l->batch_shape, crl_td_batch_shape(items) + lead, sizeof(int64_t) * (size_t)l->batch_ndim);
    for (size_t i = 0; i < n; i++) {
        rp_leaf *f = &l->leaves[i];
        crl_tensor *t = crl_td_get(items, keys[i]);
        l->nleaves = i + 1;
        f->key = strdup(keys[i]);
        f->handle = crl_td_key_new(keys[i], err);
        if (!f->key || !f->handle || !t) {
            if (f->handle && !f->key)
                crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
            else if (!t)
                crl_error_set(err, CRL_E_NOT_FOUND, "%s: key '%s' vanished", who, keys[i]);
            goto fail;
        }
        if (crl_tensor_device(t).type != CRL_DEVICE_CPU) {
            crl_error_set(err, CRL_E_UNSUPPORTED, "%s: key '%s' is not on the cpu; move the item to cpu first",
                          who, keys[i]);
            goto fail;
        }
        f->dtype = crl_tensor_dtype(t);
        f->ndim = crl_tensor_ndim(t) - lead;
        memcpy(f->shape, crl_tensor_shape(t) + lead, sizeof(int64_t) * (size_t)f->ndim);
    }
    crl_free(keys);
    keys = NULL;
    if (layout_sizes(who, l, err))
        goto fail;
    return l;
fail:
    crl_free(keys);
    rp_layout_free(l);
    return NULL;
}

rp_layout *rp_layout_from_items(const char *who, const crl_td *items, crl_error *err)
{
    return layout_from_td(who, items, 1, false, err);
}

rp_layout *rp_layout_from_item(const char *who, const crl_td *item, crl_error *err)
{
    return layout_from_td(who, item, 0, true, err);
}

rp_layout *rp_layout_dup(const rp_layout *src, crl_error *err)
{
    size_t len;
    void *bytes = rp_layout_encode(src, &len);
    if (!bytes) {
        crl_error_set(err, CRL_E_NOMEM, "out of memory copying a layout");
        return NULL;
    }
    rp_layout *l = rp_layout_decode("layout", bytes, len, 0, true, err);
    free(bytes);
    return l;
}

static bool leaf_equal(const rp_leaf *a, const rp_leaf *b)
{
    return strcmp(a->key, b->key) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

bool rp_layout_equal(const rp_layout *a, const rp_layout *b)
{
    if (!a || !b)
        return a == b;
    if (a->batch_ndim != b->batch_ndim || a->nleaves != b->nleaves ||
        memcmp(a->batch_shape, b->batch_shape, sizeof(int64_t) * (size_t)a->batch_ndim) != 0)
        return false;
    for (size_t i = 0; i < a->nleaves; i++) {
        if (!leaf_equal(&a->leaves[i], &b->leaves[i]))
            return false;
    }
    return true;
}

char *rp_layout_str(const rp_layout *l)
{
    sbuf b = { 0 };
    sb_printf(&b, "{");
    for (size_t i = 0; l && i < l->nleaves; i++) {
        const rp_leaf *f = &l->leaves[i];
        sb_printf(&b, "%s%s: ", i ? ", " : "", f->key);
        sb_leaf(&b, f->dtype, f->ndim, f->shape);
    }
    sb_printf(&b, "}");
    if (l && l->batch_ndim > 0) {
        sb_printf(&b, " batch ");
        sb_shape(&b, l->batch_ndim, l->batch_shape);
    }
    return sb_take(&b);
}

static const rp_leaf *find_leaf(const rp_layout *l, const char *key)
{
    for (size_t i = 0; i < l->nleaves; i++) {
        if (strcmp(l->leaves[i].key, key) == 0)
            return &l->leaves[i];
    }
    return NULL;
}

char *rp_layout_diff(const rp_layout *stored, const rp_layout *item, const char *where)
{
    sbuf b = { 0 };
    if (stored->batch_ndim != item->batch_ndim ||
        memcmp(stored->batch_shape, item->batch_shape, sizeof(int64_t) * (size_t)stored->batch_ndim) != 0) {
        sb_printf(&b, "the item batch shape is ");
        sb_shape(&b, stored->batch_ndim, stored->batch_shape);
        sb_printf(&b, " in %s but ", where);
        sb_shape(&b, item->batch_ndim, item->batch_shape);
        sb_printf(&b, " in the new item");
        return sb_take(&b);
    }
    for (size_t i = 0; i < stored->nleaves; i++) {
        const rp_leaf *s = &stored->leaves[i];
        const rp_leaf *t = find_leaf(item, s->key);
        if (!t) {
            sb_printf(&b, "key '%s' is in %s but missing from the new item", s->key, where);
            return sb_take(&b);
        }
        if (!leaf_equal(s, t)) {
            sb_printf(&b, "key '%s' is ", s->key);
            sb_leaf(&b, s->dtype, s->ndim, s->shape);
            sb_printf(&b, " in %s but ", where);
            sb_leaf(&b, t->dtype, t->ndim, t->shape);
            sb_printf(&b, " in the new item");
            return sb_take(&b);
        }
    }
    for (size_t i = 0; i < item->nleaves; i++) {
        if (!find_leaf(stored, item->leaves[i].key)) {
            sb_printf(&b, "the new item has key '%s', which %s does not hold", item->leaves[i].key, where);
            return sb_take(&b);
        }
    }
    sb_printf(&b, "the layouts are the same");
    return sb_take(&b);
}

/* Leaves (tensors) under td, recursively, without allocating. */
static size_t count_leaves(const crl_td *td)
{
    size_t n = 0;
    for (size_t i = 0; i < crl_td_len(td); i++) {
        const crl_td *sub = crl_td_td_at(td, i);
        n += sub ? count_leaves(sub) : 1;
    }
    return n;
}

void rp_cols_release(crl_tensor **cols, size_t n)
{
    for (size_t i = 0; cols && i < n; i++) {
        crl_tensor_unref(cols[i]);
        cols[i] = NULL;
    }
}

/* The mismatch error: code, the differing key, both layouts. */
static int mismatch_error(const char *who, const rp_layout *l, const crl_td *items, int code, rp_layout **mismatch,
                          crl_error *err)
{
    crl_error tmp;
    rp_layout *il = rp_layout_from_items(who, items, &tmp);
    char *diff = il ? rp_layout_diff(l, il, "the storage's layout") : NULL;
    char *ls = rp_layout_str(l);
    char *is = il ? rp_layout_str(il) : NULL;
    crl_error_set(err, code,
                  "%s: the item does not match the storage's layout (fixed by the first item written): %s; "
                  "storage layout %s, item layout %s; nothing was written",
                  who, diff ? diff : tmp.message, ls ? ls : "?", is ? is : "?");
    free(diff);
    free(ls);
    free(is);
    if (mismatch)
        *mismatch = il;
    else
        rp_layout_free(il);
    return code;
}

int rp_layout_match(const char *who, const rp_layout *l, const crl_td *items, crl_tensor **cols,
                    rp_layout **mismatch, crl_error *err)
{
    if (mismatch)
        *mismatch = NULL;
    int bnd = crl_td_batch_ndim(items);
    const int64_t *bs = crl_td_batch_shape(items);
    if (bnd != 1 + l->batch_ndim ||
        memcmp(bs + 1, l->batch_shape, sizeof(int64_t) * (size_t)l->batch_ndim) != 0)
        return mismatch_error(who, l, items, CRL_E_SHAPE, mismatch, err);
    for (size_t i = 0; i < l->nleaves; i++) {
        const rp_leaf *f = &l->leaves[i];
        crl_tensor *t = crl_td_get_k(items, f->handle);
        int code = CRL_OK;
        if (!t)
            code = CRL_E_NOT_FOUND;
        else if (crl_tensor_dtype(t) != f->dtype)
            code = CRL_E_DTYPE;
        else if (crl_tensor_ndim(t) != f->ndim + 1 ||
                 memcmp(crl_tensor_shape(t) + 1, f->shape, sizeof(int64_t) * (size_t)f->ndim) != 0)
            code = CRL_E_SHAPE;
        if (code)
            return mismatch_error(who, l, items, code, mismatch, err);
    }
    if (count_leaves(items) != l->nleaves)
        return mismatch_error(who, l, items, CRL_E_NOT_FOUND, mismatch, err);
    for (size_t i = 0; i < l->nleaves; i++) {
        crl_tensor *t = crl_td_get_k(items, l->leaves[i].handle);
        if (crl_tensor_device(t).type != CRL_DEVICE_CPU) {
            rp_cols_release(cols, i);
            return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: key '%s' is not on the cpu; move the item to cpu first",
                                 who, l->leaves[i].key);
        }
        crl_error e;
        crl_error_clear(&e);
        cols[i] = crl_tensor_contiguous(t, &e);
        if (!cols[i]) {
            rp_cols_release(cols, i);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
    }
    return CRL_OK;
}

crl_td *rp_layout_new_batch(const rp_layout *l, size_t n, crl_tensor **cols, crl_error *err)
{
    int64_t bshape[CRL_MAX_DIMS];
    bshape[0] = (int64_t)n;
    memcpy(bshape + 1, l->batch_shape, sizeof(int64_t) * (size_t)l->batch_ndim);
    crl_td *td = crl_td_new(1 + l->batch_ndim, bshape, err);
    if (!td)
        return NULL;
    for (size_t i = 0; i < l->nleaves; i++) {
        const rp_leaf *f = &l->leaves[i];
        int64_t shape[CRL_MAX_DIMS];
        shape[0] = (int64_t)n;
        memcpy(shape + 1, f->shape, sizeof(int64_t) * (size_t)f->ndim);
        crl_tensor *t = crl_tensor_new(f->dtype, f->ndim + 1, shape, err);
        if (!t || crl_td_set_k(td, f->handle, t, err)) {
            crl_tensor_unref(t);
            crl_td_unref(td);
            return NULL;
        }
        cols[i] = t;
        crl_tensor_unref(t);  /* the td holds it */
    }
    return td;
}

/* ---- encoding ----------------------------------------------------------------
 *
 *   u32 batch_ndim, i64 batch_shape[batch_ndim], u32 nleaves,
 *   per leaf: u32 keylen, key bytes, u32 dtype, u32 ndim, i64 shape[ndim]
 */

void *rp_layout_encode(const rp_layout *l, size_t *len)
{
    size_t n = 4 + 8 * (size_t)l->batch_ndim + 4;
    for (size_t i = 0; i < l->nleaves; i++)
        n += 4 + strlen(l->leaves[i].key) + 8 + 8 * (size_t)l->leaves[i].ndim;
    uint8_t *buf = malloc(n), *p = buf;
    if (!buf)
        return NULL;
    rp_put_u32(p, (uint32_t)l->batch_ndim);
    p += 4;
    for (int d = 0; d < l->batch_ndim; d++, p += 8)
        rp_put_u64(p, (uint64_t)l->batch_shape[d]);
    rp_put_u32(p, (uint32_t)l->nleaves);
    p += 4;
    for (size_t i = 0; i < l->nleaves; i++) {
        const rp_leaf *f = &l->leaves[i];
        size_t kl = strlen(f->key);
        rp_put_u32(p, (uint32_t)kl);
        memcpy(p + 4, f->key, kl);
        p += 4 + kl;
        rp_put_u32(p, (uint32_t)f->dtype);
        rp_put_u32(p + 4, (uint32_t)f->ndim);
        p += 8;
        for (int d = 0; d < f->ndim; d++, p += 8)
            rp_put_u64(p, (uint64_t)f->shape[d]);
    }
    *len = n;
    return buf;
}

typedef struct reader {
    const char *what;
    const uint8_t *data;
    size_t len, pos, base;
    crl_error *err;
} reader;

static int rd_need(reader *r, size_t n, const char *field)
{
    if (r->len - r->pos < n)
        return crl_error_set(r->err, CRL_E_CORRUPT,
                             "%s: offset %zu: layout truncated reading %s (%zu bytes needed, %zu left)", r->what,
                             r->base + r->pos, field, n, r->len - r->pos);
    return CRL_OK;
}

static int rd_u32(reader *r, const char *field, uint32_t *out)
{
    if (rd_need(r, 4, field))
        return CRL_E_CORRUPT;
    *out = rp_get_u32(r->data + r->pos);
    r->pos += 4;
    return CRL_OK;
}

static int rd_dims(reader *r, const char *field, uint32_t ndim, int64_t *dims)
{
    for (uint32_t d = 0; d < ndim; d++) {
        if (rd_need(r, 8, field))
            return CRL_E_CORRUPT;
        uint64_t v = rp_get_u64(r->data + r->pos);
        if (v > (uint64_t)1 << 40)
            return crl_error_set(r->err, CRL_E_CORRUPT, "%s: offset %zu: %s dim %u is %" PRIu64 " (negative or absurd)",
                                 r->what, r->base + r->pos, field, d, v);
        dims[d] = (int64_t)v;
        r->pos += 8;
    }
    return CRL_OK;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

rp_layout *rp_layout_decode(const char *what, const void *data, size_t len, size_t base_offset, bool allow_empty,
                            crl_error *err)
{
    reader r = { what, data, len, 0, base_offset, err };
    rp_layout *l = calloc(1, sizeof *l);
    char **sorted = NULL;
    if (!l) {
        crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    uint32_t v;
    if (rd_u32(&r, "batch ndim", &v))
        goto fail;
    if (v > CRL_MAX_DIMS - 1) {
        crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: item batch ndim %u exceeds %d", what, base_offset,
                      v, CRL_MAX_DIMS - 1);
        goto fail;
    }
    l->batch_ndim = (int)v;
    if (rd_dims(&r, "batch shape", v, l->batch_shape))
        goto fail;
    size_t at = r.base + r.pos;
    if (rd_u32(&r, "leaf count", &v))
        goto fail;
    if ((v == 0 && !allow_empty) || v > RP_MAX_LEAVES) {
        crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: leaf count %u is not in [%d, %u]", what, at, v,
                      allow_empty ? 0 : 1, RP_MAX_LEAVES);
        goto fail;
    }
    if (!(l->leaves = calloc(v ? v : 1, sizeof *l->leaves)) || !(sorted = calloc(v ? v : 1, sizeof *sorted))) {
        crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", what);
        goto fail;
    }
    uint32_t nleaves = v;
    for (uint32_t i = 0; i < nleaves; i++) {
        rp_leaf *f = &l->leaves[i];
        l->nleaves = i + 1;
        at = r.base + r.pos;
        uint32_t kl;
        if (rd_u32(&r, "key length", &kl))
            goto fail;
        if (kl == 0 || kl > RP_MAX_KEY) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: key length %u is not in [1, %u]", what, at, kl,
                          RP_MAX_KEY);
            goto fail;
        }
        if (rd_need(&r, kl, "key"))
            goto fail;
        if (memchr(r.data + r.pos, '\0', kl)) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: key holds a NUL byte", what, r.base + r.pos);
            goto fail;
        }
        f->key = strndup((const char *)r.data + r.pos, kl);
        if (!f->key) {
            crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", what);
            goto fail;
        }
        crl_error kerr;
        f->handle = crl_td_key_new(f->key, &kerr);
        if (!f->handle) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: bad key: %s", what, r.base + r.pos, kerr.message);
            goto fail;
        }
        r.pos += kl;
        at = r.base + r.pos;
        uint32_t dt, nd;
        if (rd_u32(&r, "dtype", &dt) || rd_u32(&r, "ndim", &nd))
            goto fail;
        if (dt >= CRL_DTYPE_COUNT) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: key '%s': dtype %u is unknown", what, at, f->key, dt);
            goto fail;
        }
        if (nd > CRL_MAX_DIMS - 1 || (int)nd < l->batch_ndim) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: key '%s': ndim %u is not in [%d, %d]", what, at + 4,
                          f->key, nd, l->batch_ndim, CRL_MAX_DIMS - 1);
            goto fail;
        }
        f->dtype = (crl_dtype)dt;
        f->ndim = (int)nd;
        at = r.base + r.pos;
        if (rd_dims(&r, "shape", nd, f->shape))
            goto fail;
        if (memcmp(f->shape, l->batch_shape, sizeof(int64_t) * (size_t)l->batch_ndim) != 0) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: key '%s': shape does not start with the item batch shape",
                          what, at, f->key);
            goto fail;
        }
        sorted[i] = f->key;
    }
    if (r.pos != r.len) {
        crl_error_set(err, CRL_E_CORRUPT, "%s: offset %zu: %zu unexpected bytes after the layout", what,
                      r.base + r.pos, r.len - r.pos);
        goto fail;
    }
    /* Keys unique, and none a nested path of another ("a" and "a.b"). */
    qsort(sorted, nleaves, sizeof *sorted, key_cmp);
    for (uint32_t i = 0; i < nleaves; i++) {
        if (i > 0 && strcmp(sorted[i - 1], sorted[i]) == 0) {
            crl_error_set(err, CRL_E_CORRUPT, "%s: key '%s' appears twice", what, sorted[i]);
            goto fail;
        }
        /* Strings starting with "KEY." sort after KEY, though not always right
         * after it ("a-x" < "a.b"): binary-search the first one >= "KEY.". */
        size_t pl = strlen(sorted[i]);
        uint32_t lo = i + 1, hi = nleaves;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            int c = strncmp(sorted[mid], sorted[i], pl);
            if (c < 0 || (c == 0 && (unsigned char)sorted[mid][pl] < '.'))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nleaves && strncmp(sorted[lo], sorted[i], pl) == 0 && sorted[lo][pl] == '.') {
            crl_error_set(err, CRL_E_CORRUPT, "%s: key '%s' is both a tensor and a TensorDict ('%s')", what,
                          sorted[i], sorted[lo]);
            goto fail;
        }
    }
    free(sorted);
    sorted = NULL;
    crl_error serr;
    if (layout_sizes(what, l, &serr)) {
        crl_error_set(err, CRL_E_CORRUPT, "%s", serr.message);
        goto fail;
    }
    return l;
fail:
    free(sorted);
    rp_layout_free(l);
    return NULL;
}

crl_td *rp_layout_view_td(const rp_layout *l, int64_t len, crl_tensor *const *cols, crl_error *err)
{
    int64_t bshape[CRL_MAX_DIMS];
    bshape[0] = len;
    memcpy(bshape + 1, l->batch_shape, sizeof(int64_t) * (size_t)l->batch_ndim);
    crl_td *td = crl_td_new(1 + l->batch_ndim, bshape, err);
    if (!td)
        return NULL;
    for (size_t i = 0; i < l->nleaves; i++) {
        crl_tensor *v = crl_tensor_slice(cols[i], 0, 0, len, 1, err);
        if (!v || crl_td_set_k(td, l->leaves[i].handle, v, err)) {
            crl_tensor_unref(v);
            crl_td_unref(td);
            return NULL;
        }
        crl_tensor_unref(v);
    }
    return td;
}

size_t rp_run_length(const int64_t *idx, size_t n, size_t k)
{
    size_t r = 1;
    while (k + r < n && idx[k + r] == idx[k] + (int64_t)r)
        r++;
    return r;
}

crl_td *rp_gather(const rp_layout *l, uint8_t *const *base, const int64_t *idx, size_t n, crl_error *err)
{
    crl_tensor *stackcols[16];
    crl_tensor **cols = l->nleaves <= 16 ? stackcols : malloc(l->nleaves * sizeof *cols);
    if (!cols) {
        crl_error_set(err, CRL_E_NOMEM, "out of memory");
        return NULL;
    }
    /* Random rows of a large storage are cache misses: ask for all of them
     * first so the memory system fetches them in parallel, then copy. */
    for (size_t i = 0; i < l->nleaves; i++) {
        size_t row = l->leaves[i].row_bytes;
        for (size_t k = 0; row && k < n; k++)
            __builtin_prefetch(base[i] + (size_t)idx[k] * row);
    }
    crl_td *td = rp_layout_new_batch(l, n, cols, err);
    for (size_t i = 0; td && i < l->nleaves; i++) {
        size_t row = l->leaves[i].row_bytes;
        uint8_t *dst = crl_tensor_data(cols[i]);
        if (!row)
            continue;
        for (size_t k = 0; k < n;) {
            size_t r = rp_run_length(idx, n, k);
            memcpy(dst + k * row, base[i] + (size_t)idx[k] * row, r * row);
            k += r;
        }
    }
    if (cols != stackcols)
        free(cols);
    return td;
}

crl_td *rp_dense_get(const char *who, const rp_layout *l, uint8_t *const *base, const uint8_t *filled,
                     int64_t capacity, const int64_t *idx, size_t n, crl_error *err)
{
    if (rp_check_indices(who, idx, n, capacity, err))
        return NULL;
    for (size_t k = 0; k < n; k++) {
        if (!filled[idx[k]]) {
            crl_error_set(err, CRL_E_RANGE, "%s: slot %" PRId64 " (position %zu) is empty", who, idx[k], k);
            return NULL;
        }
    }
    if (!l) {
        int64_t zero = 0;
        return crl_td_new(1, &zero, err);
    }
    return rp_gather(l, base, idx, n, err);
}

#if defined(__SSE2__)
#include <emmintrin.h>
#define RP_STREAM_MIN 2048

void rp_stream_copy(void *dst, const void *src, size_t n)
{
    if (n < RP_STREAM_MIN) {
        memcpy(dst, src, n);
        return;
    }
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, n);
}

void rp_stream_fence(void)
{
    _mm_sfence();
}
#else
void rp_stream_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

void rp_stream_fence(void)
{
}
#endif
