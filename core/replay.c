/* The replay buffer: sampling (random, without replacement, prioritized, slice), priorities, beta, get/empty, transforms. */
#include "replay-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

size_t crl_replay_len(const crl_replay *rb)
{
    return rb ? rb->nfilled : 0;
}

int64_t crl_replay_capacity(const crl_replay *rb)
{
    return rb ? rb->capacity : 0;
}

size_t crl_replay_batch_size(const crl_replay *rb)
{
    return rb ? rb->batch_size : 0;
}

static int grow_scratch(crl_replay *rb, size_t n, crl_error *err)
{
    if (n <= rb->scratch_n)
        return CRL_OK;
    int64_t *i = g_try_renew(int64_t, rb->scratch_idx, n);
    if (i)
        rb->scratch_idx = i;
    double *w = i ? g_try_renew(double, rb->scratch_w, n) : NULL;
    if (w)
        rb->scratch_w = w;
    bool *t = w ? g_try_renew(bool, rb->scratch_trunc, n) : NULL;
    if (t)
        rb->scratch_trunc = t;
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "replay: out of memory for a batch of %zu", n);
    rb->scratch_n = n;
    return CRL_OK;
}

/* Filled slots in slot order, for samplers that draw positions in [0, len)
 * while the storage has holes (a durable storage resumed after a crash). */
static const int64_t *dense_slots(crl_replay *rb)
{
    if (rb->nfilled == (size_t)rb->high)
        return NULL;   /* no holes: position == slot */
    if (rb->dense_dirty || !rb->dense) {
        g_free(rb->dense);
        rb->dense = g_new(int64_t, rb->nfilled ? rb->nfilled : 1);
        size_t k = 0;
        for (int64_t i = 0; i < rb->high; i++)
            if (rb->filled[i])
                rb->dense[k++] = i;
        rb->dense_dirty = false;
    }
    return rb->dense;
}

static void draw_uniform(crl_replay *rb, size_t n, int64_t *out)
{
    if (rb->nfilled == (size_t)rb->high) {
        crl__sampler_uniform(&rb->rng, rb->nfilled, n, out, NULL);
        return;
    }
    /* holes: redraw until a filled slot comes up (holes are rare) */
    for (size_t k = 0; k < n; k++) {
        int64_t i;
        do
            i = (int64_t)crl_rng_below(&rb->rng, (uint64_t)rb->high);
        while (!rb->filled[i]);
        out[k] = i;
    }
}

/* OR a marker into rows of an existing entry, or create it as bool [n]. */
static int mark_rows(crl_td *td, const char *key, const bool *rows, size_t n, bool create, crl_error *err)
{
    crl_tensor *t = crl_td_get(td, key);
    if (!t) {
        if (!create)
            return CRL_OK;
        int64_t shape = (int64_t)n;
        crl_error e;
        crl_error_clear(&e);
        t = crl_tensor_new(CRL_BOOL, 1, &shape, &e);
        if (!t)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        uint8_t *p = crl_tensor_data(t);
        for (size_t k = 0; k < n; k++)
            p[k] = rows[k];
        int rc = crl_td_set(td, key, t, err);
        crl_tensor_unref(t);
        return rc;
    }
    int64_t per = crl_tensor_numel(t) / (int64_t)(n ? n : 1);
    for (size_t k = 0; k < n; k++)
        if (rows[k])
            for (int64_t j = 0; j < per; j++)
                crl_tensor_flat_set(t, (int64_t)k * per + j, 1.0);
    return CRL_OK;
}

static crl_td *sample_impl(crl_replay *rb, size_t batch_size, bool iterating, crl_error *err)
{
    if (!rb) {
        crl_error_set(err, CRL_E_INVALID, "crl_replay_sample: buffer is NULL");
        return NULL;
    }
    size_t n = batch_size ? batch_size : rb->batch_size;
    if (n == 0) {
        crl_error_set(err, CRL_E_INVALID,
                      "replay: no batch size: pass one to crl_replay_sample or set batch_size in [%s]", rb->section);
        return NULL;
    }
    if (rb->nfilled == 0) {
        crl_error_set(err, CRL_E_INVALID, "replay: the buffer is empty; add data before sampling");
        return NULL;
    }
    if (rb->sampler == CRL__SAMPLER_NOREPL && rb->epoch_over && (iterating || rb->drop_last)) {
        rb->epoch_over = false;
        if (iterating)
            crl_error_clear(err);
        else
            crl_error_set(err, CRL_E_RANGE,
                          "replay: the epoch is exhausted (without_replacement, drop_last); the next call starts "
                          "a new one");
        return NULL;
    }
    if (grow_scratch(rb, n, err))
        return NULL;
    int64_t *idx = rb->scratch_idx;
    size_t m = n;
    int rc = CRL_OK;
    switch (rb->sampler) {
    case CRL__SAMPLER_RANDOM:
        draw_uniform(rb, n, idx);
        break;
    case CRL__SAMPLER_NOREPL: {
        bool ran_out = false;
        rc = crl__sampler_norepl_sample(rb->norepl, &rb->rng, rb->nfilled, n, idx, &m, &ran_out, err);
        const int64_t *dense = rc ? NULL : dense_slots(rb);
        for (size_t k = 0; dense && k < m; k++)
            idx[k] = dense[idx[k]];
        if (!rc)
            rb->epoch_over = ran_out;
        break;
    }
    case CRL__SAMPLER_PRIO:
        rc = crl__sampler_prio_set_beta(rb->prio, crl__replay_current_beta(rb), err);
        if (!rc)
            rc = crl__sampler_prio_sample(rb->prio, &rb->rng, n, idx, rb->scratch_w, err);
        if (!rc)
            rb->beta_count++;
        break;
    case CRL__SAMPLER_SLICE: {
        size_t per = rb->slice_len ? rb->slice_len : n / rb->num_slices;
        size_t div = rb->slice_len ? rb->slice_len : rb->num_slices;
        if (n % div || per == 0) {
            crl_error_set(err, CRL_E_INVALID,
                          "replay: batch size %zu is not a positive multiple of %s = %zu (slice sampler)", n,
                          rb->slice_len ? "slice_len" : "num_slices", div);
            return NULL;
        }
        rc = crl__slice_sample(rb->slice, &rb->rng, n / per, per, rb->strict_length, idx, rb->scratch_trunc, &m,
                               err);
        break;
    }
    }
    if (rc)
        return NULL;
    crl_td *td = rb->ops.get(rb->st, idx, m, err);
    if (!td) {
        crl_error_prefix(err, "replay: storage '%s' get: ", rb->storage_name);
        return NULL;
    }
    int64_t shape = (int64_t)m;
    crl_tensor *it = crl_tensor_new(CRL_I64, 1, &shape, err);
    if (!it)
        goto fail;
    memcpy(crl_tensor_data(it), idx, m * sizeof *idx);
    rc = crl_td_set(td, "index", it, err);
    crl_tensor_unref(it);
    if (rc)
        goto fail;
    if (rb->sampler == CRL__SAMPLER_PRIO) {
        crl_tensor *wt = crl_tensor_new(CRL_F32, 1, &shape, err);
        if (!wt)
            goto fail;
        float *w = crl_tensor_data(wt);
        for (size_t k = 0; k < m; k++)
            w[k] = (float)rb->scratch_w[k];
        rc = crl_td_set(td, "_weight", wt, err);
        crl_tensor_unref(wt);
        if (rc)
            goto fail;
    }
    if (rb->sampler == CRL__SAMPLER_SLICE &&
        (mark_rows(td, "next.truncated", rb->scratch_trunc, m, true, err) ||
         mark_rows(td, "next.done", rb->scratch_trunc, m, false, err)))
        goto fail;
    for (guint i = 0; i < rb->transforms->len; i++)
        if (crl_transform_apply(g_ptr_array_index(rb->transforms, i), td, err)) {
            crl_error_prefix(err, "replay: transform %u ('%s') on a sampled batch: ", i,
                             crl_transform_name(g_ptr_array_index(rb->transforms, i)));
            goto fail;
        }
    return td;
fail:
    crl_td_unref(td);
    return NULL;
}

crl_td *crl_replay_sample(crl_replay *rb, size_t batch_size, crl_error *err)
{
    return sample_impl(rb, batch_size, false, err);
}

crl_td *crl_replay_next(crl_replay *rb, crl_error *err)
{
    return sample_impl(rb, 0, true, err);
}

/* ---- priorities -------------------------------------------------------------- */

int crl_replay_update_priority(crl_replay *rb, const int64_t *idx, const double *priority, size_t n, crl_error *err)
{
    if (!rb)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_update_priority: buffer is NULL");
    if (!rb->prio)
        return crl_error_set(err, CRL_E_UNSUPPORTED,
                             "replay: update_priority needs sampler = prioritized; this buffer uses %s",
                             crl__replay_sampler_name(rb->sampler));
    if (n && (!idx || !priority))
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_update_priority: NULL array for %zu items", n);
    for (size_t k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= rb->capacity)
            return crl_error_set(err, CRL_E_RANGE,
                                 "replay: index %" PRId64 " at position %zu is out of range [0, %" PRId64
                                 "); nothing was updated",
                                 idx[k], k, rb->capacity);
    /* A slot not written yet takes the priority as TorchRL's sampler does: it counts for the max
     * priority, is never drawn while empty, and the write of an item there sets the default. */
    bool stackh[256] = { false };
    bool *held = n <= 256 ? stackh : g_new(bool, n);
    for (size_t k = 0; k < n; k++)
        held[k] = rb->filled[idx[k]];
    int rc = crl__sampler_prio_update_held(rb->prio, idx, priority, n, held, err);
    if (held != stackh)
        g_free(held);
    if (rc) {
        crl_error_prefix(err, "replay: ");
        return rc;
    }
    return CRL_OK;
}

int crl_replay_update_td_priority(crl_replay *rb, const crl_td *td, crl_error *err)
{
    if (!rb || !td)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_update_td_priority: %s is NULL", !rb ? "buffer" : "td");
    if (!rb->prio)
        return crl_error_set(err, CRL_E_UNSUPPORTED,
                             "replay: update_td_priority needs sampler = prioritized; this buffer uses %s",
                             crl__replay_sampler_name(rb->sampler));
    crl_tensor *it = crl_td_get(td, "index");
    crl_tensor *pt = crl_td_get(td, rb->priority_key);
    if (!it || !pt)
        return crl_error_set(err, CRL_E_NOT_FOUND,
                             "replay: update_td_priority needs '%s' in the TensorDict (%s); %s",
                             !it ? "index" : rb->priority_key, !it ? "the slots, as sampled" : "the priorities",
                             !it ? "pass a sampled batch" : "set it, or set priority_key in the [replay] section");
    if (crl_tensor_dtype(it) != CRL_I64 || crl_tensor_ndim(it) != 1)
        return crl_error_set(err, CRL_E_DTYPE, "replay: 'index' must be int64 of shape [batch]");
    int64_t b = crl_tensor_shape(it)[0];
    if (!crl_dtype_is_float(crl_tensor_dtype(pt)))
        return crl_error_set(err, CRL_E_DTYPE, "replay: priority '%s' has dtype %s; give a float tensor",
                             rb->priority_key, crl_dtype_name(crl_tensor_dtype(pt)));
    if (crl_tensor_ndim(pt) < 1 || crl_tensor_ndim(pt) > 2 || crl_tensor_shape(pt)[0] != b ||
        (crl_tensor_ndim(pt) == 2 && crl_tensor_shape(pt)[1] != 1)) {
        char *s = crl_shape_repr(crl_tensor_ndim(pt), crl_tensor_shape(pt));
        int rc = crl_error_set(err, CRL_E_SHAPE,
                               "replay: priority '%s' has shape %s; expected [%" PRId64 "] or [%" PRId64 ", 1]",
                               rb->priority_key, s, b, b);
        crl_free(s);
        return rc;
    }
    int64_t *idx = g_new(int64_t, b ? (size_t)b : 1);
    double *p = g_new(double, b ? (size_t)b : 1);
    for (int64_t k = 0; k < b; k++) {
        memcpy(&idx[k], (const char *)crl_tensor_data(it) + k * crl_tensor_strides(it)[0] * 8, 8);
        p[k] = fabs(crl_tensor_flat_get(pt, k));
    }
    int rc = crl_replay_update_priority(rb, idx, p, (size_t)b, err);
    g_free(idx);
    g_free(p);
    return rc;
}

int crl_replay_set_beta(crl_replay *rb, double beta, crl_error *err)
{
    if (!rb)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_set_beta: buffer is NULL");
    if (!rb->prio)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "replay: beta applies to sampler = prioritized; this buffer uses %s",
                             crl__replay_sampler_name(rb->sampler));
    if (crl__sampler_prio_set_beta(rb->prio, beta, err)) {
        crl_error_prefix(err, "replay: ");
        return CRL_E_INVALID;
    }
    /* annealing (if any) restarts from here */
    rb->beta0 = beta;
    rb->beta_count = 0;
    return CRL_OK;
}

double crl_replay_beta(const crl_replay *rb)
{
    return rb && rb->prio ? crl__replay_current_beta(rb) : NAN;
}

/* ---- items ------------------------------------------------------------------- */

crl_td *crl_replay_get(crl_replay *rb, int64_t i, crl_error *err)
{
    if (!rb) {
        crl_error_set(err, CRL_E_INVALID, "crl_replay_get: buffer is NULL");
        return NULL;
    }
    if (i < 0 || i >= rb->capacity || !rb->filled[i]) {
        crl_error_set(err, CRL_E_RANGE, "replay: slot %" PRId64 " %s", i,
                      i < 0 || i >= rb->capacity ? "is out of range" : "holds no item");
        return NULL;
    }
    crl_td *b = rb->ops.get(rb->st, &i, 1, err);
    if (!b) {
        crl_error_prefix(err, "replay: storage '%s' get: ", rb->storage_name);
        return NULL;
    }
    crl_td *one = crl_td_index(b, 0, 0, err);
    crl_td_unref(b);
    return one;
}

int crl_replay_empty(crl_replay *rb, crl_error *err)
{
    if (!rb)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_empty: buffer is NULL");
    if (rb->ops.clear) {
        int rc = rb->ops.clear(rb->st, err);
        if (rc) {
            crl_error_prefix(err, "replay: storage '%s' clear: ", rb->storage_name);
            crl_error e;
            crl__replay_sync_from_storage(rb, &e);
            return rc;
        }
    } else {
        /* no clear: a fresh storage with the same options */
        void *st = NULL;
        int rc = rb->ops.open(rb->opts, rb->capacity, &st, err);
        if (rc)
            return rc;
        rb->ops.close(rb->st);
        rb->st = st;
    }
    return crl__replay_sync_from_storage(rb, err);
}

int crl_replay_append_transform(crl_replay *rb, crl_transform *t, crl_error *err)
{
    if (!rb || !t) {
        crl_transform_free(t);
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_append_transform: %s is NULL", !rb ? "buffer" : "transform");
    }
    g_ptr_array_add(rb->transforms, t);
    return CRL_OK;
}
