/* plugins/replay: the dump format shared by storage/tensor and storage/memmap (write and validate DIR/storage.ckpt). */
#include "config.h"
#include "replay.h"

#include <crl/checkpoint.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* "meta": u64 capacity, u64 len, u64 write_count, u32 has_layout, u32 0 */
#define META_BYTES 32

static char *ckpt_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/storage.ckpt";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/storage.ckpt", dir);
    return p;
}

void rp_dense_clear(rp_dense *d)
{
    rp_layout_free(d->layout);
    free(d->filled);
    crl_td_unref(d->data);
    memset(d, 0, sizeof *d);
}

int rp_dense_dump(const char *who, const char *dir, const rp_dense *d, crl_error *err)
{
    char *path = ckpt_path(dir);
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, RP_DENSE_KIND, RP_DENSE_KIND_VERSION, &e);
    free(path);
    if (!w)
        return crl_error_pass(err, &e, CRL_E_IO);
    uint8_t meta[META_BYTES] = { 0 };
    rp_put_u64(meta, (uint64_t)d->capacity);
    rp_put_u64(meta + 8, (uint64_t)d->len);
    rp_put_u64(meta + 16, d->write_count);
    rp_put_u32(meta + 24, d->layout ? 1u : 0u);
    int rc = crl_ckpt_write(w, "meta", meta, sizeof meta, err);
    if (!rc)
        rc = crl_ckpt_write(w, "filled", d->filled, (size_t)d->capacity, err);
    if (!rc && d->layout) {
        size_t llen;
        void *lb = rp_layout_encode(d->layout, &llen);
        rc = lb ? crl_ckpt_write(w, "layout", lb, llen, err) : crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        free(lb);
    }
    if (!rc && d->layout && d->len > 0)
        rc = crl_ckpt_write_td(w, "data", d->data, err);
    if (rc) {
        crl_ckpt_writer_abort(w);
        return rc;
    }
    return crl_ckpt_writer_close(w, err);
}

int rp_dense_load(const char *who, const char *dir, int64_t capacity, rp_dense *d, crl_error *err)
{
    memset(d, 0, sizeof *d);
    char *path = ckpt_path(dir);
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    int rc = CRL_OK;
    uint8_t meta[META_BYTES];
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, RP_DENSE_KIND, RP_DENSE_KIND_VERSION, &e);
    if (!r) {
        rc = crl_error_pass(err, &e, CRL_E_IO);
        goto out;
    }
    if ((rc = crl_ckpt_read(r, "meta", meta, sizeof meta, err)))
        goto out;
    uint64_t cap = rp_get_u64(meta), len = rp_get_u64(meta + 8), wc = rp_get_u64(meta + 16);
    uint32_t has_layout = rp_get_u32(meta + 24), pad = rp_get_u32(meta + 28);
    if (cap != (uint64_t)capacity) {
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "%s: dumped from a storage of capacity %" PRIu64 " but this one has capacity %" PRId64
                           "; load it into a storage with capacity = %" PRIu64,
                           path, cap, capacity, cap);
        goto out;
    }
    if (has_layout > 1 || pad != 0 || len > cap || (!has_layout && (len != 0 || wc != 0))) {
        rc = crl_error_set(err, CRL_E_CORRUPT,
                           "%s: section 'meta': inconsistent values (len %" PRIu64 ", capacity %" PRIu64
                           ", write_count %" PRIu64 ", has_layout %" PRIu32 ")",
                           path, len, cap, wc, has_layout);
        goto out;
    }
    d->capacity = capacity;
    d->len = (int64_t)len;
    d->write_count = wc;
    if (!(d->filled = malloc((size_t)capacity))) {
        rc = crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        goto out;
    }
    if ((rc = crl_ckpt_read(r, "filled", d->filled, (size_t)capacity, err)))
        goto out;
    uint64_t count = 0;
    for (int64_t i = 0; i < capacity; i++) {
        if (d->filled[i] > 1 || (d->filled[i] && (uint64_t)i >= len)) {
            rc = crl_error_set(err, CRL_E_CORRUPT,
                               "%s: section 'filled' offset %" PRId64 ": byte %u (slot %" PRId64 ", len %" PRIu64 ")",
                               path, i, d->filled[i], i, len);
            goto out;
        }
        count += d->filled[i];
    }
    if (wc < count) {
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section 'meta': write_count %" PRIu64 " is below the %" PRIu64
                           " filled slots", path, wc, count);
        goto out;
    }
    if (!has_layout) {
        if (crl_ckpt_has(r, "layout")) {
            rc = crl_error_set(err, CRL_E_CORRUPT, "%s: holds a layout but section 'meta' says it has none", path);
            goto out;
        }
        goto out;
    }
    size_t llen = 0;
    const void *lb = crl_ckpt_section(r, "layout", &llen, &e);
    if (!lb) {
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        goto out;
    }
    char what[512];
    snprintf(what, sizeof what, "%s: section 'layout'", path);
    if (!(d->layout = rp_layout_decode(what, lb, llen, 0, false, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        goto out;
    }
    if (len == 0)
        goto out;
    if (!(d->data = crl_ckpt_read_td(r, "data", &e))) {
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        goto out;
    }
    crl_error lerr;
    rp_layout *dl = crl_td_batch_ndim(d->data) >= 1 && crl_td_batch_shape(d->data)[0] == (int64_t)len
                        ? rp_layout_from_items(who, d->data, &lerr)
                        : NULL;
    if (!dl || !rp_layout_equal(dl, d->layout)) {
        char *ls = rp_layout_str(d->layout), *ds = dl ? rp_layout_str(dl) : NULL;
        rc = crl_error_set(err, CRL_E_CORRUPT,
                           "%s: the data (%s, %d batch dims, first %" PRId64 ") does not match section 'layout' %s "
                           "with %" PRIu64 " rows",
                           path, ds ? ds : "no leaves", crl_td_batch_ndim(d->data),
                           crl_td_batch_ndim(d->data) ? crl_td_batch_shape(d->data)[0] : 0, ls ? ls : "?", len);
        free(ls);
        free(ds);
        rp_layout_free(dl);
        goto out;
    }
    rp_layout_free(dl);
out:
    crl_ckpt_reader_free(r);
    free(path);
    if (rc)
        rp_dense_clear(d);
    return rc;
}
