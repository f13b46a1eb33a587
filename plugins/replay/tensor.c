/* plugins/replay: storage/tensor, preallocated contiguous [capacity, ...] columns laid out from the first item. */
#include "config.h"
#include "replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define WHO "storage/tensor"

typedef struct tensor_store {
    int64_t capacity;
    rp_layout *layout;   /* NULL until the first set */
    crl_tensor **cols;   /* per leaf [capacity, ...] */
    uint8_t **base;      /* their data */
    uint8_t *filled;     /* capacity bytes */
    int64_t len;
    uint64_t write_count;
} tensor_store;

static int tensor_open(const crl_opts *opts, int64_t capacity, void **out, crl_error *err)
{
    (void)opts;
    if (!out)
        return crl_error_set(err, CRL_E_INVALID, WHO ": open: out pointer is NULL");
    if (capacity < 1)
        return crl_error_set(err, CRL_E_INVALID, WHO ": capacity %" PRId64 " must be at least 1", capacity);
    tensor_store *s = calloc(1, sizeof *s);
    if (!s || (uint64_t)capacity > SIZE_MAX || !(s->filled = calloc((size_t)capacity, 1))) {
        free(s);
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory for %" PRId64 " slots", capacity);
    }
    s->capacity = capacity;
    *out = s;
    return CRL_OK;
}

static void free_cols(crl_tensor **cols, uint8_t **base, size_t n)
{
    for (size_t i = 0; cols && i < n; i++)
        crl_tensor_unref(cols[i]);
    free(cols);
    free(base);
}

/* Allocate zeroed columns for layout l. */
static int alloc_cols(int64_t capacity, const rp_layout *l, crl_tensor ***cols_out, uint8_t ***base_out,
                      crl_error *err)
{
    crl_tensor **cols = calloc(l->nleaves, sizeof *cols);
    uint8_t **base = calloc(l->nleaves, sizeof *base);
    if (!cols || !base) {
        free(cols);
        free(base);
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    }
    for (size_t i = 0; i < l->nleaves; i++) {
        const rp_leaf *f = &l->leaves[i];
        int64_t shape[CRL_MAX_DIMS];
        uint64_t total;
        shape[0] = capacity;
        memcpy(shape + 1, f->shape, sizeof(int64_t) * (size_t)f->ndim);
        if (__builtin_mul_overflow((uint64_t)capacity, (uint64_t)f->row_bytes, &total) || total > SIZE_MAX / 2) {
            free_cols(cols, base, l->nleaves);
            return crl_error_set(err, CRL_E_NOMEM, WHO ": key '%s': %" PRId64 " rows of %zu bytes do not fit in memory",
                                 f->key, capacity, f->row_bytes);
        }
        crl_error e;
        crl_error_clear(&e);
        cols[i] = crl_tensor_new(f->dtype, f->ndim + 1, shape, &e);
        if (!cols[i]) {
            crl_error_prefix(&e, WHO ": key '%s' (%" PRIu64 " bytes): ", f->key, total);
            free_cols(cols, base, l->nleaves);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
        base[i] = crl_tensor_data(cols[i]);
    }
    *cols_out = cols;
    *base_out = base;
    return CRL_OK;
}

static int tensor_set(void *st, const int64_t *idx, size_t n, const crl_td *items, crl_error *err)
{
    tensor_store *s = st;
    int rc;
    if ((rc = rp_check_items(WHO, items, n, err)) || (rc = rp_check_indices(WHO ": set", idx, n, s->capacity, err)))
        return rc;
    if (n == 0)
        return CRL_OK;
    if (!s->layout) {
        crl_error e;
        crl_error_clear(&e);
        rp_layout *l = rp_layout_from_items(WHO, items, &e);
        if (!l)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = alloc_cols(s->capacity, l, &s->cols, &s->base, err))) {
            rp_layout_free(l);
            return rc;
        }
        s->layout = l;
    }
    const rp_layout *l = s->layout;
    crl_tensor *stackcols[16];
    crl_tensor **src = l->nleaves <= 16 ? stackcols : calloc(l->nleaves, sizeof *src);
    if (!src)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    rc = rp_layout_match(WHO ": set", l, items, src, NULL, err);
    if (rc == CRL_OK) {
        /* One copy per leaf per run of consecutive slots (a round-robin
         * extend is one or two runs). */
        for (size_t k = 0; k < n;) {
            size_t r = rp_run_length(idx, n, k);
            for (size_t i = 0; i < l->nleaves; i++) {
                size_t row = l->leaves[i].row_bytes;
                if (row)
                    rp_stream_copy(s->base[i] + (size_t)idx[k] * row, (const uint8_t *)crl_tensor_data(src[i]) + k * row,
                                   r * row);
            }
            memset(s->filled + idx[k], 1, r);
            if (idx[k] + (int64_t)r > s->len)
                s->len = idx[k] + (int64_t)r;
            k += r;
        }
        rp_stream_fence();
        rp_cols_release(src, l->nleaves);
        s->write_count += n;
    }
    if (src != stackcols)
        free(src);
    return rc;
}

static crl_td *tensor_get(void *st, const int64_t *idx, size_t n, crl_error *err)
{
    tensor_store *s = st;
    return rp_dense_get(WHO ": get", s->layout, s->base, s->filled, s->capacity, idx, n, err);
}

static int64_t tensor_len(void *st)
{
    return ((tensor_store *)st)->len;
}

static bool tensor_has(void *st, int64_t i)
{
    tensor_store *s = st;
    return i >= 0 && i < s->capacity && s->filled[i];
}

static uint64_t tensor_write_count(void *st)
{
    return ((tensor_store *)st)->write_count;
}

static int tensor_clear(void *st, crl_error *err)
{
    (void)err;
    tensor_store *s = st;
    memset(s->filled, 0, (size_t)s->capacity);
    s->len = 0;
    s->write_count = 0;
    return CRL_OK;
}

static void tensor_close(void *st)
{
    tensor_store *s = st;
    if (!s)
        return;
    if (s->layout)
        free_cols(s->cols, s->base, s->layout->nleaves);
    rp_layout_free(s->layout);
    free(s->filled);
    free(s);
}

static int tensor_dump(void *st, const char *dir, crl_error *err)
{
    tensor_store *s = st;
    rp_dense d = { s->capacity, s->len, s->write_count, s->layout, s->filled, NULL };
    crl_error e;
    crl_error_clear(&e);
    if (s->layout && s->len > 0 && !(d.data = rp_layout_view_td(s->layout, s->len, s->cols, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = rp_dense_dump(WHO, dir, &d, err);
    crl_td_unref(d.data);
    return rc;
}

static int tensor_load(void *st, const char *dir, crl_error *err)
{
    tensor_store *s = st;
    rp_dense d;
    int rc;
    if ((rc = rp_dense_load(WHO, dir, s->capacity, &d, err)))
        return rc;
    crl_tensor **cols = NULL;
    uint8_t **base = NULL;
    if (d.layout) {
        if ((rc = alloc_cols(s->capacity, d.layout, &cols, &base, err))) {
            rp_dense_clear(&d);
            return rc;
        }
        for (size_t i = 0; d.len > 0 && i < d.layout->nleaves; i++) {
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *t = crl_tensor_contiguous(crl_td_get_k(d.data, d.layout->leaves[i].handle), &e);
            if (!t) {
                free_cols(cols, base, d.layout->nleaves);
                rp_dense_clear(&d);
                return crl_error_pass(err, &e, CRL_E_NOMEM);
            }
            memcpy(base[i], crl_tensor_data(t), (size_t)d.len * d.layout->leaves[i].row_bytes);
            crl_tensor_unref(t);
        }
    }
    /* Validated and copied: replace the contents. */
    if (s->layout)
        free_cols(s->cols, s->base, s->layout->nleaves);
    rp_layout_free(s->layout);
    free(s->filled);
    s->layout = d.layout;
    s->cols = cols;
    s->base = base;
    s->filled = d.filled;
    s->len = d.len;
    s->write_count = d.write_count;
    d.layout = NULL;
    d.filled = NULL;
    rp_dense_clear(&d);
    return CRL_OK;
}

const crl_storage_ops rp_tensor_ops = {
    .struct_size = sizeof(crl_storage_ops),
    .open = tensor_open,
    .set = tensor_set,
    .get = tensor_get,
    .len = tensor_len,
    .has = tensor_has,
    .write_count = tensor_write_count,
    .sync = NULL,
    .clear = tensor_clear,
    .dump = tensor_dump,
    .load = tensor_load,
    .close = tensor_close,
};
