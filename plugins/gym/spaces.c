/* Gym spaces to crl specs: the support module's leaf descriptions become gym_leaf records and Composite specs. */
#include "gym.h"

#include <glib.h>
#include <string.h>

void gym_leaf_clear(gym_leaf *l)
{
    if (!l)
        return;
    g_free(l->key);
    for (int d = 0; d < l->depth; d++)
        Py_XDECREF(l->path[d]);
    Py_XDECREF(l->np_dtype);
    Py_XDECREF(l->space_dtype);
    g_free(l->nvec);
    g_free(l->start);
    g_free(l->low);
    g_free(l->high);
    memset(l, 0, sizeof *l);
}

/* A bytes object of exactly `count` values of `size` bytes, copied. */
static int take_bytes(PyObject *b, size_t count, size_t size, void **out, const char *key, const char *field,
                      crl_error *err)
{
    *out = NULL;
    if (b == Py_None)
        return CRL_OK;
    if (!PyBytes_Check(b) || (size_t)PyBytes_GET_SIZE(b) != count * size)
        return crl_error_set(err, CRL_E_PLUGIN, "gym: leaf '%s': %s is not %zu values (plugin bug)", key, field,
                             count);
    size_t bytes = count * size;
    *out = g_malloc(bytes > 0 ? bytes : 1);
    memcpy(*out, PyBytes_AS_STRING(b), bytes);
    return CRL_OK;
}

static int parse_leaf(PyObject *t, gym_leaf *l, const char *what, crl_error *err)
{
    const char *key, *kind, *dt, *sdt;
    PyObject *path, *shape, *low, *high, *nvec, *start;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(t, "sOsssOOOnOO", &key, &path, &kind, &dt, &sdt, &shape, &low, &high, &n, &nvec, &start))
        return pyembed_error(err, CRL_E_PLUGIN, "gym: a %s leaf description", what);
    l->key = g_strdup(key);
    if (!crl_dtype_from_name(dt, &l->dt))
        return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s '%s': dtype %s has no crl dtype", what, key, dt);
    static const char *const kinds[] = { "box", "discrete", "multi_discrete", "multi_binary", "info" };
    l->kind = (gym_kind)-1;
    for (int k = 0; k < 5; k++)
        if (!strcmp(kind, kinds[k]))
            l->kind = (gym_kind)k;
    if ((int)l->kind < 0)
        return crl_error_set(err, CRL_E_PLUGIN, "gym: %s '%s': unknown leaf kind %s", what, key, kind);
    l->widened = strcmp(dt, sdt) != 0;
    if (!PyTuple_Check(path) || PyTuple_GET_SIZE(path) > GYM_MAX_DEPTH)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s '%s': Dict/Tuple spaces nest deeper than %d levels",
                             what, key, GYM_MAX_DEPTH);
    l->depth = (int)PyTuple_GET_SIZE(path);
    for (int d = 0; d < l->depth; d++) {
        l->path[d] = PyTuple_GET_ITEM(path, d);
        Py_INCREF(l->path[d]);
    }
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) >= CRL_MAX_DIMS)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s '%s': more than %d dims", what, key,
                             CRL_MAX_DIMS - 2);
    l->vndim = (int)PyTuple_GET_SIZE(shape);
    l->numel = 1;
    for (int d = 0; d < l->vndim; d++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (v < 0) {
            PyErr_Clear();
            return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s '%s': a negative or unknown dim", what, key);
        }
        l->vshape[d] = v;
        l->shape[d] = v;
        l->numel *= v;
    }
    /* TorchRL: a scalar Box (and a scalar info value) is [1] per env; a
     * Discrete index is a scalar per env ([num] in all). */
    l->ndim = l->vndim;
    if (l->ndim == 0 && l->kind != GYM_DISCRETE) {
        l->ndim = 1;
        l->shape[0] = 1;
    }
    l->n = n;
    l->row_bytes = (size_t)l->numel * crl_dtype_size(l->dt);
    l->np_dtype = PyUnicode_FromString(dt);
    l->space_dtype = PyUnicode_FromString(sdt);
    if (!l->np_dtype || !l->space_dtype)
        return pyembed_error(err, CRL_E_NOMEM, "gym: %s '%s'", what, key);
    int rc = CRL_OK;
    if (l->kind == GYM_BOX) {
        rc = take_bytes(low, (size_t)l->numel, sizeof(double), (void **)&l->low, key, "low", err);
        if (!rc)
            rc = take_bytes(high, (size_t)l->numel, sizeof(double), (void **)&l->high, key, "high", err);
        if (!rc && (!l->low) != (!l->high))
            rc = crl_error_set(err, CRL_E_PLUGIN, "gym: %s '%s': one bound only (plugin bug)", what, key);
    } else if (l->kind == GYM_MULTI_DISCRETE) {
        l->k = l->vndim ? (size_t)l->vshape[l->vndim - 1] : 1;
        rc = take_bytes(nvec, l->k, sizeof(int64_t), (void **)&l->nvec, key, "nvec", err);
        if (!rc && !l->nvec)
            rc = crl_error_set(err, CRL_E_PLUGIN, "gym: %s '%s': no nvec (plugin bug)", what, key);
    }
    if (!rc && (l->kind == GYM_DISCRETE || l->kind == GYM_MULTI_DISCRETE))
        rc = take_bytes(start, l->kind == GYM_DISCRETE ? 1 : (size_t)l->numel, sizeof(int64_t), (void **)&l->start,
                        key, "start", err);
    return rc;
}

int gym_leaves_from_python(PyObject *list, gym_leaf **out, size_t *n, const char *what, crl_error *err)
{
    *out = NULL;
    *n = 0;
    if (!PyList_Check(list))
        return crl_error_set(err, CRL_E_PLUGIN, "gym: the %s leaves are not a list (plugin bug)", what);
    size_t count = (size_t)PyList_GET_SIZE(list);
    gym_leaf *leaves = g_new0(gym_leaf, count ? count : 1);
    for (size_t i = 0; i < count; i++) {
        int rc = parse_leaf(PyList_GET_ITEM(list, (Py_ssize_t)i), &leaves[i], what, err);
        if (rc) {
            for (size_t j = 0; j <= i; j++)
                gym_leaf_clear(&leaves[j]);
            g_free(leaves);
            return rc;
        }
    }
    *out = leaves;
    *n = count;
    return CRL_OK;
}

crl_spec *gym_leaf_spec(const gym_leaf *l, int64_t num, bool onehot, crl_error *err)
{
    int64_t shape[CRL_MAX_DIMS];
    shape[0] = num;
    for (int d = 0; d < l->ndim; d++)
        shape[d + 1] = l->shape[d];
    int nd = l->ndim + 1;
    switch (l->kind) {
    case GYM_BOX: {
        if (!l->low)
            return crl_spec_unbounded(l->dt, nd, shape, err);
        /* Elementwise bounds of one env, broadcast over the batch. */
        int64_t one[CRL_MAX_DIMS];
        one[0] = 1;
        for (int d = 0; d < l->ndim; d++)
            one[d + 1] = l->shape[d];
        crl_tensor *lo1 = crl_tensor_wrap(l->low, CRL_F64, nd, one, NULL, NULL, NULL, err);
        crl_tensor *hi1 = lo1 ? crl_tensor_wrap(l->high, CRL_F64, nd, one, NULL, NULL, NULL, err) : NULL;
        crl_tensor *lo = hi1 ? crl_tensor_expand(lo1, nd, shape, err) : NULL;
        crl_tensor *hi = lo ? crl_tensor_expand(hi1, nd, shape, err) : NULL;
        crl_spec *s = hi ? crl_spec_bounded_t(l->dt, lo, hi, err) : NULL;
        crl_tensor_unref(hi);
        crl_tensor_unref(lo);
        crl_tensor_unref(hi1);
        crl_tensor_unref(lo1);
        return s;
    }
    case GYM_DISCRETE:
        if (onehot) {
            int64_t oh[2] = { num, l->n };
            return crl_spec_onehot(l->n, CRL_I64, 2, oh, err);
        }
        return crl_spec_categorical(l->n, CRL_I64, 1, shape, err);
    case GYM_MULTI_DISCRETE:
        if (onehot && l->oh_width) {
            int64_t oh[2] = { num, l->oh_width };
            return crl_spec_multi_onehot(l->nvec, l->k, CRL_I64, 2, oh, err);
        }
        return crl_spec_multi_categorical(l->nvec, l->dt, nd, shape, err);
    case GYM_MULTI_BINARY:
        return crl_spec_binary(l->n, l->dt, nd, shape, err);
    case GYM_INFO:
        return crl_spec_unbounded(l->dt, nd, shape, err);
    }
    crl_error_set(err, CRL_E_PLUGIN, "gym: leaf '%s' has no spec (plugin bug)", l->key);
    return NULL;
}

crl_spec *gym_composite(const gym_leaf *leaves, size_t n, int64_t num, bool onehot, crl_error *err)
{
    crl_spec *c = crl_spec_composite(1, &num, err);
    for (size_t i = 0; c && i < n; i++) {
        crl_spec *s = gym_leaf_spec(&leaves[i], num, onehot, err);
        if (!s) {
            crl_error_prefix(err, "gym: '%s': ", leaves[i].key);
            crl_spec_unref(c);
            return NULL;
        }
        int rc = crl_spec_composite_set(c, leaves[i].key, s, err);
        crl_spec_unref(s);
        if (rc) {
            crl_spec_unref(c);
            return NULL;
        }
    }
    return c;
}
