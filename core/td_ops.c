/* crl_td operations: select, exclude, rename, update, clone, copy_into, index, slice, stack, cat, equal. */
#include "td-private.h"

#include <inttypes.h>
#include <string.h>

#define KEYBUF 512

crl_td *crl__td_shallow(const crl_td *td)
{
    crl_td *out = crl__td_alloc(td->batch_ndim, td->batch_shape);
    out->device = td->device;
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        crl__td_insert(out, e->key, crl_tensor_ref(e->tensor),
                       e->td ? crl__td_shallow(e->td) : NULL);
    }
    return out;
}

/* ---- select / exclude / rename ---------------------------------------- */

static int not_found(crl_error *err, const char *op, const char *key, const crl_td *td)
{
    char *keys = crl__td_keys_list(td);
    crl_error_set(err, CRL_E_NOT_FOUND, "%s: no key '%s' in the TensorDict; keys present: %s", op,
                  key, keys);
    g_free(keys);
    return CRL_E_NOT_FOUND;
}

crl_td *crl_td_select(const crl_td *td, const char *const *keys, bool strict, crl_error *err)
{
    if (!td || !keys) {
        crl_error_set(err, CRL_E_INVALID, "select: %s is NULL", td ? "key list" : "TensorDict");
        return NULL;
    }
    crl_td *out = crl__td_alloc(td->batch_ndim, td->batch_shape);
    out->device = td->device;
    for (size_t k = 0; keys[k]; k++) {
        const char *comps[CRL__TD_MAX_DEPTH];
        const crl_td *chain[CRL__TD_MAX_DEPTH];
        size_t n;
        if (crl__td_split(keys[k], comps, &n, err)) {
            crl_error_prefix(err, "select: ");
            goto fail;
        }
        /* Find the whole path in the source before building anything. */
        const crl__td_entry *e = NULL;
        chain[0] = td;
        for (size_t i = 0; i < n; i++) {
            e = crl__td_find_interned(chain[i], comps[i]);
            if (!e || (i + 1 < n && !e->td)) {
                e = NULL;
                break;
            }
            if (i + 1 < n)
                chain[i + 1] = e->td;
        }
        if (!e) {
            if (!strict)
                continue;
            not_found(err, "select", keys[k], td);
            goto fail;
        }
        /* Intermediates keep the source's batch shapes. */
        crl_td *dst = out;
        for (size_t i = 0; i + 1 < n; i++) {
            crl__td_entry *de = crl__td_find_interned(dst, comps[i]);
            if (de) {
                dst = de->td;
            } else {
                crl_td *mid = crl__td_alloc(chain[i + 1]->batch_ndim, chain[i + 1]->batch_shape);
                crl__td_insert(dst, comps[i], NULL, mid);
                dst = mid;
            }
        }
        crl_tensor *t = crl_tensor_ref(e->tensor);
        crl_td *sub = e->td ? crl__td_shallow(e->td) : NULL;
        crl__td_entry *de = crl__td_find_interned(dst, comps[n - 1]);
        if (de) {
            bool changed = de->tensor != t || de->td != sub;
            crl_tensor_unref(de->tensor);
            crl_td_unref(de->td);
            de->tensor = t;
            de->td = sub;
            if (changed)
                crl__td_touch_layout(dst, de);
        } else {
            crl__td_insert(dst, comps[n - 1], t, sub);
        }
    }
    return out;
fail:
    crl_td_unref(out);
    return NULL;
}

crl_td *crl_td_exclude(const crl_td *td, const char *const *keys, crl_error *err)
{
    if (!td || !keys) {
        crl_error_set(err, CRL_E_INVALID, "exclude: %s is NULL", td ? "key list" : "TensorDict");
        return NULL;
    }
    for (size_t k = 0; keys[k]; k++) {
        const char *comps[CRL__TD_MAX_DEPTH];
        size_t n;
        if (crl__td_split(keys[k], comps, &n, err)) {
            crl_error_prefix(err, "exclude: ");
            return NULL;
        }
    }
    crl_td *out = crl__td_shallow(td);
    for (size_t k = 0; keys[k]; k++)
        crl__td_remove(out, keys[k]);
    return out;
}

int crl_td_rename(crl_td *td, const char *old_key, const char *new_key, crl_error *err)
{
    if (!td)
        return crl_error_set(err, CRL_E_INVALID, "rename: TensorDict is NULL");
    const char *comps[CRL__TD_MAX_DEPTH];
    size_t n;
    int rc = crl__td_split(old_key, comps, &n, err);
    if (!rc)
        rc = crl__td_split(new_key, comps, &n, err);
    if (rc) {
        crl_error_prefix(err, "rename: ");
        return rc;
    }
    crl__td_entry *e = crl__td_lookup(td, old_key);
    if (!e)
        return not_found(err, "rename", old_key, td);
    if (crl__td_lookup(td, new_key))
        return crl_error_set(err, CRL_E_EXISTS,
                             "rename: key '%s' already exists; delete it first or pick another name",
                             new_key);
    size_t ol = strlen(old_key);
    if (e->td && strncmp(new_key, old_key, ol) == 0 && new_key[ol] == '.')
        return crl_error_set(err, CRL_E_INVALID,
                             "rename: cannot move TensorDict '%s' inside itself ('%s')", old_key,
                             new_key);
    /* Hold our own references: inserting may move the entry array. */
    crl_tensor *t = crl_tensor_ref(e->tensor);
    crl_td *sub = crl_td_ref(e->td);
    rc = crl__td_set_path(td, comps, n, new_key, t, sub, err);
    if (rc == CRL_OK)
        crl__td_remove(td, old_key);
    else
        crl_error_prefix(err, "rename '%s': ", old_key);
    crl_tensor_unref(t);
    crl_td_unref(sub);
    return rc;
}

/* ---- update / clone / copy_into ---------------------------------------- */

static int update_rec(crl_td *dst, const crl_td *src, const crl__td_path *path, crl_error *err)
{
    char kb[KEYBUF], b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    for (size_t i = 0; i < src->len; i++) {
        const crl__td_entry *e = &src->entries[i];
        crl__td_path here = {path, e->key};
        crl__td_entry *de = crl__td_find_interned(dst, e->key);
        if (e->tensor) {
            if (de && de->td)
                return crl_error_set(err, CRL_E_EXISTS,
                                     "update: key '%s' is a TensorDict in the destination but a "
                                     "tensor in the source",
                                     crl__td_path_str(&here, NULL, kb, sizeof kb));
            if (!crl__td_leads(dst, e->tensor->ndim, e->tensor->shape))
                return crl_error_set(err, CRL_E_SHAPE,
                                     "update: key '%s': expected a tensor whose shape starts with "
                                     "the batch shape %s but got %s",
                                     crl__td_path_str(&here, NULL, kb, sizeof kb),
                                     crl__shape_fmt(b, dst->batch_ndim, dst->batch_shape),
                                     crl__shape_fmt(c, e->tensor->ndim, e->tensor->shape));
            if (!de) {
                crl__td_insert(dst, e->key, crl_tensor_ref(e->tensor), NULL);
            } else if (de->tensor != e->tensor) {
                crl_tensor *old = de->tensor;
                de->tensor = crl_tensor_ref(e->tensor);
                crl__td_touch_entry(dst, de);
                crl_tensor_unref(old);
            }
            continue;
        }
        if (de && de->tensor)
            return crl_error_set(err, CRL_E_EXISTS,
                                 "update: key '%s' is a tensor in the destination but a "
                                 "TensorDict in the source",
                                 crl__td_path_str(&here, NULL, kb, sizeof kb));
        crl_td *sub;
        const crl_td *ssub = e->td;
        if (de) {
            sub = de->td;
        } else {
            if (!crl__td_leads(dst, ssub->batch_ndim, ssub->batch_shape))
                return crl_error_set(err, CRL_E_SHAPE,
                                     "update: key '%s': expected a TensorDict whose batch shape "
                                     "starts with %s but got %s",
                                     crl__td_path_str(&here, NULL, kb, sizeof kb),
                                     crl__shape_fmt(b, dst->batch_ndim, dst->batch_shape),
                                     crl__shape_fmt(c, ssub->batch_ndim, ssub->batch_shape));
            sub = crl__td_alloc(ssub->batch_ndim, ssub->batch_shape);
            crl__td_insert(dst, e->key, NULL, sub);
        }
        int rc = update_rec(sub, ssub, &here, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

int crl_td_update(crl_td *dst, const crl_td *src, crl_error *err)
{
    if (!dst || !src)
        return crl_error_set(err, CRL_E_INVALID, "update: %s TensorDict is NULL",
                             dst ? "source" : "destination");
    return update_rec(dst, src, NULL, err);
}

static crl_td *clone_rec(const crl_td *td, const crl__td_path *path, crl_error *err)
{
    crl_td *out = crl__td_alloc(td->batch_ndim, td->batch_shape);
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        crl__td_path here = {path, e->key};
        crl_tensor *t = NULL;
        crl_td *sub = NULL;
        if (e->tensor)
            t = crl_tensor_clone(e->tensor, err);
        else
            sub = clone_rec(e->td, &here, err);
        if (!t && !sub) {
            if (e->tensor) {
                char kb[KEYBUF];
                crl_error_prefix(err, "clone of key '%s': ",
                                 crl__td_path_str(&here, NULL, kb, sizeof kb));
            }
            crl_td_unref(out);
            return NULL;
        }
        crl__td_insert(out, e->key, t, sub);
    }
    return out;
}

crl_td *crl_td_clone(const crl_td *td, crl_error *err)
{
    if (!td) {
        crl_error_set(err, CRL_E_INVALID, "clone: TensorDict is NULL");
        return NULL;
    }
    return clone_rec(td, NULL, err);
}

static int copy_into_rec(crl_td *dst, const crl_td *src, const crl__td_path *path, crl_error *err)
{
    char kb[KEYBUF], b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    for (size_t i = 0; i < src->len; i++) {
        const crl__td_entry *e = &src->entries[i];
        crl__td_path here = {path, e->key};
        crl__td_entry *de = crl__td_find_interned(dst, e->key);
        if (de && !de->tensor != !e->tensor)
            return crl_error_set(err, CRL_E_EXISTS,
                                 "copy_into: key '%s' is a %s in the destination but a %s in the "
                                 "source",
                                 crl__td_path_str(&here, NULL, kb, sizeof kb),
                                 de->tensor ? "tensor" : "TensorDict",
                                 e->tensor ? "tensor" : "TensorDict");
        if (de && de->tensor) {
            if (!crl_tensor_same_shape(de->tensor, e->tensor))
                return crl_error_set(err, CRL_E_SHAPE,
                                     "copy_into: key '%s': expected shape %s but got %s",
                                     crl__td_path_str(&here, NULL, kb, sizeof kb),
                                     crl__shape_fmt(b, de->tensor->ndim, de->tensor->shape),
                                     crl__shape_fmt(c, e->tensor->ndim, e->tensor->shape));
            int rc = crl_tensor_copy(de->tensor, e->tensor, err);
            if (rc)
                return rc;
            continue;
        }
        if (de) {
            int rc = copy_into_rec(de->td, e->td, &here, err);
            if (rc)
                return rc;
            continue;
        }
        /* Missing in dst: add a deep copy. */
        int nd = e->tensor ? e->tensor->ndim : e->td->batch_ndim;
        const int64_t *sh = e->tensor ? e->tensor->shape : e->td->batch_shape;
        if (!crl__td_leads(dst, nd, sh))
            return crl_error_set(err, CRL_E_SHAPE,
                                 "copy_into: key '%s': expected a %s starting with the batch "
                                 "shape %s but got %s",
                                 crl__td_path_str(&here, NULL, kb, sizeof kb),
                                 e->tensor ? "tensor shape" : "batch shape",
                                 crl__shape_fmt(b, dst->batch_ndim, dst->batch_shape),
                                 crl__shape_fmt(c, nd, sh));
        crl_tensor *t = NULL;
        crl_td *sub = NULL;
        crl_error le;
        crl_error_clear(&le);
        if (e->tensor)
            t = crl_tensor_clone(e->tensor, &le);
        else
            sub = clone_rec(e->td, &here, &le);
        if (!t && !sub)
            return crl_error_pass(err, &le, CRL_E_NOMEM);
        crl__td_insert(dst, e->key, t, sub);
    }
    return CRL_OK;
}

int crl_td_copy_into(crl_td *dst, const crl_td *src, crl_error *err)
{
    if (!dst || !src)
        return crl_error_set(err, CRL_E_INVALID, "copy_into: %s TensorDict is NULL",
                             dst ? "source" : "destination");
    return copy_into_rec(dst, src, NULL, err);
}

/* ---- index / slice ----------------------------------------------------- */

static crl_td *index_rec(const crl_td *td, int d, int64_t j, crl_error *err)
{
    int64_t shape[CRL_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < td->batch_ndim; i++)
        if (i != d)
            shape[k++] = td->batch_shape[i];
    crl_td *out = crl__td_alloc(k, shape);
    out->device = td->device;
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        crl_tensor *t = NULL;
        crl_td *sub = NULL;
        if (e->tensor)
            t = crl_tensor_index(e->tensor, d, j, err);
        else
            sub = index_rec(e->td, d, j, err);
        if (!t && !sub) {
            crl_td_unref(out);
            return NULL;
        }
        crl__td_insert(out, e->key, t, sub);
    }
    return out;
}

static int batch_dim(const char *op, const crl_td *td, int dim, int *d, crl_error *err)
{
    if (!td)
        return crl_error_set(err, CRL_E_INVALID, "%s: TensorDict is NULL", op);
    *d = dim;
    if (!crl__norm_dim(d, td->batch_ndim)) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_RANGE,
                             "%s: batch dim %d is out of range for batch shape %s (valid: %d..%d)",
                             op, dim, crl__shape_fmt(b, td->batch_ndim, td->batch_shape),
                             -td->batch_ndim, td->batch_ndim - 1);
    }
    return CRL_OK;
}

crl_td *crl_td_index(crl_td *td, int dim, int64_t i, crl_error *err)
{
    int d;
    if (batch_dim("index", td, dim, &d, err))
        return NULL;
    int64_t n = td->batch_shape[d];
    int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) {
        char b[CRL__SHAPE_BUF];
        crl_error_set(err, CRL_E_RANGE,
                      "index %" PRId64 " is out of range for batch dim %d of size %" PRId64
                      " (batch shape %s)",
                      i, d, n, crl__shape_fmt(b, td->batch_ndim, td->batch_shape));
        return NULL;
    }
    return index_rec(td, d, j, err);
}

static crl_td *slice_rec(const crl_td *td, int d, int64_t start, int64_t stop, int64_t step,
                         int64_t len, crl_error *err)
{
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, td->batch_shape, sizeof shape);
    shape[d] = len;
    crl_td *out = crl__td_alloc(td->batch_ndim, shape);
    out->device = td->device;
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        crl_tensor *t = NULL;
        crl_td *sub = NULL;
        if (e->tensor)
            t = crl_tensor_slice(e->tensor, d, start, stop, step, err);
        else
            sub = slice_rec(e->td, d, start, stop, step, len, err);
        if (!t && !sub) {
            crl_td_unref(out);
            return NULL;
        }
        crl__td_insert(out, e->key, t, sub);
    }
    return out;
}

crl_td *crl_td_slice(crl_td *td, int dim, int64_t start, int64_t stop, int64_t step,
                     crl_error *err)
{
    int d;
    if (batch_dim("slice", td, dim, &d, err))
        return NULL;
    if (step <= 0) {
        crl_error_set(err, CRL_E_INVALID, "slice: step %" PRId64 " of batch dim %d must be positive",
                      step, d);
        return NULL;
    }
    int64_t len = crl__slice_norm(td->batch_shape[d], &start, &stop, step);
    return slice_rec(td, d, start, stop, step, len, err);
}

/* ---- reshape ---------------------------------------------------------- */

static crl_td *reshape_rec(const crl_td *td, int ndim, const int64_t *shape, crl_error *err)
{
    crl_td *out = crl__td_alloc(ndim, shape);
    out->device = td->device;
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        crl_tensor *t = NULL;
        crl_td *sub = NULL;
        if (e->tensor) {
            int tn = crl_tensor_ndim(e->tensor), nd = ndim + tn - td->batch_ndim;
            int64_t ts[CRL_MAX_DIMS];
            if (nd > CRL_MAX_DIMS) {
                crl_error_set(err, CRL_E_SHAPE, "reshape: key '%s' would have %d dims (at most %d)", e->key, nd,
                              CRL_MAX_DIMS);
                crl_td_unref(out);
                return NULL;
            }
            memcpy(ts, shape, (size_t)ndim * sizeof *ts);
            memcpy(ts + ndim, crl_tensor_shape(e->tensor) + td->batch_ndim,
                   (size_t)(tn - td->batch_ndim) * sizeof *ts);
            t = crl_tensor_reshape(e->tensor, nd, ts, err);
        } else {
            sub = reshape_rec(e->td, ndim, shape, err);
        }
        if (!t && !sub) {
            crl_td_unref(out);
            return NULL;
        }
        crl__td_insert(out, e->key, t, sub);
    }
    return out;
}

crl_td *crl_td_reshape(crl_td *td, int ndim, const int64_t *shape, crl_error *err)
{
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    if (!td) {
        crl_error_set(err, CRL_E_INVALID, "reshape: NULL TensorDict");
        return NULL;
    }
    int64_t have = 1, want = 1;
    for (int i = 0; i < td->batch_ndim; i++)
        have *= td->batch_shape[i];
    bool ok = ndim >= 0 && ndim <= CRL_MAX_DIMS && (ndim == 0 || shape);
    for (int i = 0; ok && i < ndim; i++) {
        ok = shape[i] >= 0;
        want *= shape[i];
    }
    if (!ok || want != have) {
        crl_error_set(err, CRL_E_SHAPE, "reshape: batch shape %s cannot become %s (%" PRId64 " elements)",
                      crl__shape_fmt(b, td->batch_ndim, td->batch_shape),
                      ok ? crl__shape_fmt(c, ndim, shape) : "an invalid shape", have);
        return NULL;
    }
    return reshape_rec(td, ndim, shape, err);
}

/* ---- stack / cat ------------------------------------------------------- */

typedef enum { OP_STACK, OP_CAT } join_op;

static const char *op_name(join_op op) { return op == OP_STACK ? "stack" : "cat"; }

/* Shapes agree: equal for stack, equal except dim d for cat. */
static bool shapes_join(join_op op, int d, int an, const int64_t *as, int bn, const int64_t *bs)
{
    if (an != bn)
        return false;
    for (int i = 0; i < an; i++)
        if (as[i] != bs[i] && !(op == OP_CAT && i == d))
            return false;
    return true;
}

static int check_join(crl_td *const *tds, size_t n, int d, join_op op, const crl__td_path *path,
                      crl_error *err)
{
    char kb[KEYBUF], b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    const char *on = op_name(op);
    const crl_td *a = tds[0];
    for (size_t t = 1; t < n; t++) {
        const crl_td *o = tds[t];
        if (!shapes_join(op, d, a->batch_ndim, a->batch_shape, o->batch_ndim, o->batch_shape)) {
            if (path)
                return crl_error_set(err, CRL_E_SHAPE,
                                     "%s: key '%s' has batch shape %s in TensorDict 0 but %s in "
                                     "TensorDict %zu",
                                     on, crl__td_path_str(path, NULL, kb, sizeof kb),
                                     crl__shape_fmt(b, a->batch_ndim, a->batch_shape),
                                     crl__shape_fmt(c, o->batch_ndim, o->batch_shape), t);
            return crl_error_set(err, CRL_E_SHAPE,
                                 "%s: TensorDict %zu has batch shape %s but TensorDict 0 has %s%s",
                                 on, t, crl__shape_fmt(b, o->batch_ndim, o->batch_shape),
                                 crl__shape_fmt(c, a->batch_ndim, a->batch_shape),
                                 op == OP_CAT ? " (only the cat dim may differ)" : "");
        }
        for (size_t i = 0; i < o->len; i++)
            if (!crl__td_find_interned(a, o->entries[i].key))
                return crl_error_set(err, CRL_E_NOT_FOUND,
                                     "%s: key '%s' is in TensorDict %zu but not in TensorDict 0",
                                     on, crl__td_path_str(path, o->entries[i].key, kb, sizeof kb),
                                     t);
        for (size_t i = 0; i < a->len; i++) {
            const crl__td_entry *ea = &a->entries[i];
            const crl__td_entry *eo = crl__td_find_interned(o, ea->key);
            const char *key = crl__td_path_str(path, ea->key, kb, sizeof kb);
            if (!eo)
                return crl_error_set(err, CRL_E_NOT_FOUND,
                                     "%s: key '%s' is in TensorDict 0 but not in TensorDict %zu", on,
                                     key, t);
            if (!ea->tensor != !eo->tensor)
                return crl_error_set(err, CRL_E_INVALID,
                                     "%s: key '%s' is a %s in TensorDict 0 but a %s in TensorDict %zu",
                                     on, key, ea->tensor ? "tensor" : "TensorDict",
                                     eo->tensor ? "tensor" : "TensorDict", t);
            if (!ea->tensor)
                continue;
            const crl_tensor *x = ea->tensor, *y = eo->tensor;
            if (x->dtype != y->dtype)
                return crl_error_set(err, CRL_E_DTYPE,
                                     "%s: key '%s' has dtype %s in TensorDict 0 but %s in "
                                     "TensorDict %zu",
                                     on, key, crl_dtype_name(x->dtype), crl_dtype_name(y->dtype), t);
            if (!shapes_join(op, d, x->ndim, x->shape, y->ndim, y->shape))
                return crl_error_set(err, CRL_E_SHAPE,
                                     "%s: key '%s' has shape %s in TensorDict 0 but %s in "
                                     "TensorDict %zu",
                                     on, key, crl__shape_fmt(b, x->ndim, x->shape),
                                     crl__shape_fmt(c, y->ndim, y->shape), t);
        }
    }
    for (size_t i = 0; i < a->len; i++) {
        const crl__td_entry *ea = &a->entries[i];
        crl__td_path here = {path, ea->key};
        if (ea->tensor) {
            if (op == OP_STACK && ea->tensor->ndim >= CRL_MAX_DIMS)
                return crl_error_set(err, CRL_E_SHAPE,
                                     "stack: key '%s' already has %d dims (max %d)",
                                     crl__td_path_str(&here, NULL, kb, sizeof kb),
                                     ea->tensor->ndim, CRL_MAX_DIMS);
            continue;
        }
        if (op == OP_STACK && ea->td->batch_ndim >= CRL_MAX_DIMS)
            return crl_error_set(err, CRL_E_SHAPE,
                                 "stack: key '%s' already has %d batch dims (max %d)",
                                 crl__td_path_str(&here, NULL, kb, sizeof kb),
                                 ea->td->batch_ndim, CRL_MAX_DIMS);
        crl_td **subs = g_new(crl_td *, n);
        for (size_t t = 0; t < n; t++)
            subs[t] = crl__td_find_interned(tds[t], ea->key)->td;
        int rc = check_join(subs, n, d, op, &here, err);
        g_free(subs);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static crl_td *join_rec(crl_td *const *tds, size_t n, int d, join_op op, crl_error *err)
{
    const crl_td *a = tds[0];
    int64_t shape[CRL_MAX_DIMS];
    int nd = a->batch_ndim;
    if (op == OP_STACK) {
        for (int i = 0, k = 0; i <= nd; i++)
            shape[i] = i == d ? (int64_t)n : a->batch_shape[k++];
        nd++;
    } else {
        memcpy(shape, a->batch_shape, sizeof shape);
        shape[d] = 0;
        for (size_t t = 0; t < n; t++)
            shape[d] += tds[t]->batch_shape[d];
    }
    crl_td *out = crl__td_alloc(nd, shape);
    out->device = a->device;
    for (size_t i = 0; i < a->len; i++) {
        const crl__td_entry *ea = &a->entries[i];
        if (ea->td) {
            crl_td **subs = g_new(crl_td *, n);
            for (size_t t = 0; t < n; t++)
                subs[t] = crl__td_find_interned(tds[t], ea->key)->td;
            crl_td *sub = join_rec(subs, n, d, op, err);
            g_free(subs);
            if (!sub)
                goto fail;
            crl__td_insert(out, ea->key, NULL, sub);
            continue;
        }
        const crl_tensor *x = ea->tensor;
        int64_t ts[CRL_MAX_DIMS];
        int tn = x->ndim;
        if (op == OP_STACK) {
            for (int k = 0, j = 0; k <= tn; k++)
                ts[k] = k == d ? (int64_t)n : x->shape[j++];
            tn++;
        } else {
            memcpy(ts, x->shape, sizeof ts);
            ts[d] = shape[d];
        }
        crl_tensor *ot = crl_tensor_new(x->dtype, tn, ts, err);
        if (!ot)
            goto fail;
        crl__td_insert(out, ea->key, ot, NULL);
        int64_t off = 0;
        for (size_t t = 0; t < n; t++) {
            const crl_tensor *src = crl__td_find_interned(tds[t], ea->key)->tensor;
            crl_tensor *v;
            if (op == OP_STACK) {
                v = crl_tensor_index(ot, d, (int64_t)t, err);
            } else {
                v = crl_tensor_slice(ot, d, off, off + src->shape[d], 1, err);
                off += src->shape[d];
            }
            int rc = v ? crl_tensor_copy(v, src, err) : CRL_E_INVALID;
            crl_tensor_unref(v);
            if (rc)
                goto fail;
        }
    }
    return out;
fail:
    crl_td_unref(out);
    return NULL;
}

static crl_td *join(const char *on, crl_td *const *tds, size_t n, int dim, join_op op,
                    crl_error *err)
{
    if (!tds || n == 0) {
        crl_error_set(err, CRL_E_INVALID, "%s: no TensorDicts given (n = %zu)", on, n);
        return NULL;
    }
    for (size_t t = 0; t < n; t++) {
        if (!tds[t]) {
            crl_error_set(err, CRL_E_INVALID, "%s: TensorDict %zu is NULL", on, t);
            return NULL;
        }
    }
    const crl_td *a = tds[0];
    char b[CRL__SHAPE_BUF];
    int d = dim;
    int range = op == OP_STACK ? a->batch_ndim + 1 : a->batch_ndim;
    if (!crl__norm_dim(&d, range)) {
        crl_error_set(err, CRL_E_RANGE,
                      "%s: dim %d is out of range for batch shape %s (valid: %d..%d)", on, dim,
                      crl__shape_fmt(b, a->batch_ndim, a->batch_shape), -range, range - 1);
        return NULL;
    }
    if (op == OP_STACK && a->batch_ndim >= CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_SHAPE, "stack: batch shape %s already has %d dims (max %d)",
                      crl__shape_fmt(b, a->batch_ndim, a->batch_shape), a->batch_ndim,
                      CRL_MAX_DIMS);
        return NULL;
    }
    if (check_join(tds, n, d, op, NULL, err))
        return NULL;
    return join_rec(tds, n, d, op, err);
}

crl_td *crl_td_stack(crl_td *const *tds, size_t n, int dim, crl_error *err)
{
    return join("stack", tds, n, dim, OP_STACK, err);
}

crl_td *crl_td_cat(crl_td *const *tds, size_t n, int dim, crl_error *err)
{
    return join("cat", tds, n, dim, OP_CAT, err);
}

/* ---- equal ------------------------------------------------------------- */

bool crl_td_equal(const crl_td *a, const crl_td *b)
{
    if (!a || !b)
        return false;
    if (a == b)
        return true;
    if (a->batch_ndim != b->batch_ndim || a->len != b->len ||
        memcmp(a->batch_shape, b->batch_shape, sizeof(int64_t) * (size_t)a->batch_ndim) != 0)
        return false;
    for (size_t i = 0; i < a->len; i++) {
        const crl__td_entry *x = &a->entries[i], *y = &b->entries[i];
        /* Same sorted key sets line up entry by entry. */
        if (x->key != y->key || !x->tensor != !y->tensor)
            return false;
        if (x->tensor ? !crl_tensor_equal(x->tensor, y->tensor) : !crl_td_equal(x->td, y->td))
            return false;
    }
    return true;
}
