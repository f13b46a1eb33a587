/* The gym plugin's data path: Python values into crl buffers through the buffer protocol, actions out. */
#include "gym.h"

#include <glib.h>
#include <string.h>

/* ---- element stores ----------------------------------------------------- */

static void store_i64(uint8_t *dst, crl_dtype dt, long long v)
{
    switch (dt) {
    case CRL_BOOL: *dst = v != 0; break;
    case CRL_U8: *dst = (uint8_t)v; break;
    case CRL_I8: *(int8_t *)dst = (int8_t)v; break;
    case CRL_I16: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); break; }
    case CRL_I32: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); break; }
    case CRL_I64: { int64_t x = (int64_t)v; memcpy(dst, &x, 8); break; }
    case CRL_F16: { uint16_t x = crl_float_to_half((float)v); memcpy(dst, &x, 2); break; }
    case CRL_F32: { float x = (float)v; memcpy(dst, &x, 4); break; }
    case CRL_F64: { double x = (double)v; memcpy(dst, &x, 8); break; }
    default: break;
    }
}

static void store_f64(uint8_t *dst, crl_dtype dt, double v)
{
    switch (dt) {
    case CRL_F16: { uint16_t x = crl_float_to_half((float)v); memcpy(dst, &x, 2); break; }
    case CRL_F32: { float x = (float)v; memcpy(dst, &x, 4); break; }
    case CRL_F64: memcpy(dst, &v, 8); break;
    default: break; /* floats reach integer leaves through numpy only */
    }
}

static int64_t load_int(const uint8_t *src, crl_dtype dt)
{
    switch (dt) {
    case CRL_U8: return *src;
    case CRL_I8: return *(const int8_t *)src;
    case CRL_I16: { int16_t x; memcpy(&x, src, 2); return x; }
    case CRL_I32: { int32_t x; memcpy(&x, src, 4); return x; }
    case CRL_I64: { int64_t x; memcpy(&x, src, 8); return x; }
    default: return 0;
    }
}

/* ---- messages ------------------------------------------------------------- */

static const char *role_of(const gym_leaf *l)
{
    return l->kind == GYM_INFO ? "info" : "observation";
}

/* "(3, 4)" of a value's shape. */
static void shape_text(int ndim, const Py_ssize_t *shape, char *buf, size_t n)
{
    size_t used = 0;
    used += (size_t)g_snprintf(buf + used, n - used, "(");
    for (int d = 0; d < ndim && used < n; d++)
        used += (size_t)g_snprintf(buf + used, n - used, d ? ", %zd" : "%zd", shape ? shape[d] : 0);
    if (used < n)
        used += (size_t)g_snprintf(buf + used, n - used, ndim == 1 ? ",)" : ")");
}

/* ---- buffer views ------------------------------------------------------------ */

/* True when a buffer-protocol format with this itemsize is crl dtype dt. */
static bool format_is(const char *fmt, Py_ssize_t itemsize, crl_dtype dt)
{
    if ((size_t)itemsize != crl_dtype_size(dt))
        return false;
    if (!fmt)
        fmt = "B";
    if (*fmt == '@' || *fmt == '=')
        fmt++;
    else if (*fmt == '<' || *fmt == '>' || *fmt == '!') {
        bool little = *fmt == '<';
        if (itemsize > 1 && little != (G_BYTE_ORDER == G_LITTLE_ENDIAN))
            return false;
        fmt++;
    }
    char c = fmt[0];
    if (!c || fmt[1])
        return false;
    switch (dt) {
    case CRL_BOOL: return c == '?';
    case CRL_U8: return c == 'B';
    case CRL_I8: return c == 'b';
    case CRL_I16: return c == 'h';
    case CRL_I32: return c == 'i' || (c == 'l' && sizeof(long) == 4);
    case CRL_I64: return c == 'q' || (c == 'l' && sizeof(long) == 8);
    case CRL_F16: return c == 'e';
    case CRL_F32: return c == 'f';
    case CRL_F64: return c == 'd';
    default: return false;
    }
}

static bool shape_ok(const gym_leaf *l, const Py_buffer *v)
{
    if (v->ndim == l->vndim) {
        for (int d = 0; d < v->ndim; d++)
            if (!v->shape || v->shape[d] != l->vshape[d])
                return false;
        return true;
    }
    /* A scalar leaf takes () and (1,) alike. */
    if (l->numel == 1 && v->ndim <= 1 && l->vndim <= 1)
        return v->ndim == 0 || (v->shape && v->shape[0] == 1);
    return false;
}

/* After the copy: indices back from `start` (Discrete, MultiDiscrete). */
static void unshift(const gym_leaf *l, uint8_t *dst)
{
    if (!l->start)
        return;
    size_t es = crl_dtype_size(l->dt);
    for (int64_t j = 0; j < l->numel; j++)
        store_i64(dst + (size_t)j * es, l->dt, load_int(dst + (size_t)j * es, l->dt) - l->start[j]);
}

/* Copy a view into dst when its format and shape fit.  Returns 1 when
 * copied, 0 when the format differs (cast needed), -1 with err set. */
static int copy_view(gym_env *e, const gym_leaf *l, int64_t i, const Py_buffer *v, uint8_t *dst, const char *what,
                     crl_error *err)
{
    if (!format_is(v->format, v->itemsize, l->dt))
        return 0;
    if (!shape_ok(l, v)) {
        char got[96], want[96];
        shape_text(v->ndim, v->shape, got, sizeof got);
        shape_text(l->vndim, l->vshape, want, sizeof want);
        crl_error_set(err, CRL_E_SHAPE, "gym: %s: %s: env %lld: %s '%s' has shape %s, but its %s says %s", e->id,
                      what, (long long)i, role_of(l), l->key, got, l->kind == GYM_INFO ? "first reset" : "space", want);
        return -1;
    }
    if (PyBuffer_IsContiguous(v, 'C'))
        memcpy(dst, v->buf, l->row_bytes);
    else if (PyBuffer_ToContiguous(dst, v, (Py_ssize_t)l->row_bytes, 'C') < 0) {
        pyembed_error(err, CRL_E_RUNTIME, "gym: %s: %s: env %lld: copying %s '%s'", e->id, what, (long long)i,
                      role_of(l), l->key);
        return -1;
    }
    return 1;
}

/* Python scalars into a one-element leaf without a view.  Returns 1 when
 * stored, 0 when not a case handled here, -1 with err set. */
static int store_scalar(gym_env *e, const gym_leaf *l, int64_t i, PyObject *v, uint8_t *dst, const char *what,
                        crl_error *err)
{
    if (l->numel != 1)
        return 0;
    bool fl = crl_dtype_is_float(l->dt);
    if (PyBool_Check(v)) {
        store_i64(dst, l->dt, v == Py_True);
        return 1;
    }
    if (PyLong_Check(v) || (l->kind == GYM_DISCRETE && PyIndex_Check(v) && !PyFloat_Check(v))) {
        PyObject *ix = PyLong_Check(v) ? (Py_INCREF(v), v) : PyNumber_Index(v);
        if (!ix) {
            PyErr_Clear();
            return 0;
        }
        if (fl) {
            double d = PyLong_AsDouble(ix);
            Py_DECREF(ix);
            if (d == -1.0 && PyErr_Occurred())
                goto fail;
            store_f64(dst, l->dt, d);
        } else {
            long long x = PyLong_AsLongLong(ix);
            Py_DECREF(ix);
            if (x == -1 && PyErr_Occurred())
                goto fail;
            store_i64(dst, l->dt, x);
            unshift(l, dst);
        }
        return 1;
    }
    if (fl && PyFloat_Check(v)) {
        store_f64(dst, l->dt, PyFloat_AS_DOUBLE(v));
        return 1;
    }
    return 0;
fail:
    pyembed_error(err, CRL_E_RANGE, "gym: %s: %s: env %lld: %s '%s' = %s", e->id, what, (long long)i, role_of(l),
                  l->key, Py_TYPE(v)->tp_name);
    return -1;
}

static int write_value(gym_env *e, gym_leaf *l, int64_t i, PyObject *v, const char *what, crl_error *err)
{
    uint8_t *dst = l->buf + (size_t)i * l->row_bytes;
    if (v == Py_None)
        return crl_error_set(err, CRL_E_RUNTIME, "gym: %s: %s: env %lld: %s '%s' is None; the env must return a "
                             "value for every key of its space", e->id, what, (long long)i, role_of(l), l->key);
    crl_error le;   /* the helpers below return -1 with the error here */
    crl_error_clear(&le);
    int r = store_scalar(e, l, i, v, dst, what, &le);
    if (r)
        return r < 0 ? crl_error_pass(err, &le, CRL_E_DTYPE) : CRL_OK;
    char got_fmt[16] = "";
    if (PyObject_CheckBuffer(v)) {
        Py_buffer view;
        if (PyObject_GetBuffer(v, &view, PyBUF_RECORDS_RO) == 0) {
            r = copy_view(e, l, i, &view, dst, what, &le);
            g_strlcpy(got_fmt, view.format ? view.format : "B", sizeof got_fmt);
            PyBuffer_Release(&view);
            if (r < 0)
                return crl_error_pass(err, &le, CRL_E_DTYPE);
            if (r > 0) {
                unshift(l, dst);
                return CRL_OK;
            }
        } else {
            PyErr_Clear();
        }
    }
    /* Another dtype (or no buffer at all): numpy converts, once per step. */
    if (!l->warned && !l->widened) {
        l->warned = true;
        crl_host_log(gym_host, CRL_LOG_WARNING,
                     "%s: %s '%s' comes as %s%s%s%s, not %s as the %s says; converting it with numpy.asarray at "
                     "every step (slower): make the env return %s values", e->id, role_of(l), l->key,
                     Py_TYPE(v)->tp_name, *got_fmt ? " (buffer format '" : "", got_fmt, *got_fmt ? "')" : "",
                     crl_dtype_name(l->dt), l->kind == GYM_INFO ? "first reset" : "space", crl_dtype_name(l->dt));
    }
    PyObject *arr = PyObject_CallFunctionObjArgs(e->cast, v, l->np_dtype, NULL);
    if (!arr)
        return pyembed_error(err, CRL_E_DTYPE, "gym: %s: %s: env %lld: %s '%s' is a %s, which numpy cannot make a %s "
                             "array of", e->id, what, (long long)i, role_of(l), l->key, Py_TYPE(v)->tp_name,
                             crl_dtype_name(l->dt));
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_RECORDS_RO) != 0) {
        Py_DECREF(arr);
        return pyembed_error(err, CRL_E_DTYPE, "gym: %s: %s: env %lld: %s '%s'", e->id, what, (long long)i,
                             role_of(l), l->key);
    }
    r = copy_view(e, l, i, &view, dst, what, &le);
    PyBuffer_Release(&view);
    Py_DECREF(arr);
    if (r == 0)
        return crl_error_set(err, CRL_E_DTYPE, "gym: %s: %s: env %lld: %s '%s': numpy gave another dtype than %s",
                             e->id, what, (long long)i, role_of(l), l->key, crl_dtype_name(l->dt));
    if (r < 0)
        return crl_error_pass(err, &le, CRL_E_DTYPE);
    unshift(l, dst);
    return CRL_OK;
}

void gym_zero_leaf(gym_leaf *l, int64_t i)
{
    memset(l->buf + (size_t)i * l->row_bytes, 0, l->row_bytes);
}

/* The item `k` of v: borrowed, or a new reference parked in *tmp. */
static PyObject *item_of(PyObject *v, PyObject *k, PyObject **tmp)
{
    if (PyDict_Check(v))
        return PyDict_GetItemWithError(v, k);
    if (PyLong_CheckExact(k)) {
        Py_ssize_t ix = PyLong_AsSsize_t(k);
        if (PyTuple_Check(v) && ix >= 0 && ix < PyTuple_GET_SIZE(v))
            return PyTuple_GET_ITEM(v, ix);
        if (PyList_Check(v) && ix >= 0 && ix < PyList_GET_SIZE(v))
            return PyList_GET_ITEM(v, ix);
    }
    *tmp = PyObject_GetItem(v, k);
    return *tmp;
}

int gym_write_leaf(gym_env *e, gym_leaf *l, int64_t i, PyObject *root, const char *what, crl_error *err)
{
    PyObject *tmp[GYM_MAX_DEPTH] = { NULL };
    PyObject *v = root;
    int rc = CRL_OK;
    for (int d = 0; d < l->depth && v; d++) {
        PyObject *parent = v;
        v = item_of(parent, l->path[d], &tmp[d]);
        if (!v) {
            if (l->kind == GYM_INFO && !PyErr_Occurred()) {
                /* An info key the env leaves out at this step reads as 0. */
                gym_zero_leaf(l, i);
                goto out;
            }
            char *k = NULL;
            PyObject *ks = PyObject_Repr(l->path[d]);
            k = g_strdup(ks ? PyUnicode_AsUTF8(ks) : "?");
            Py_XDECREF(ks);
            if (PyErr_Occurred())
                rc = pyembed_error(err, CRL_E_RUNTIME, "gym: %s: %s: env %lld: %s '%s': no entry %s in the %s the "
                                   "env returned", e->id, what, (long long)i, role_of(l), l->key, k,
                                   Py_TYPE(parent)->tp_name);
            else
                rc = crl_error_set(err, CRL_E_RUNTIME, "gym: %s: %s: env %lld: %s '%s': the %s the env returned has "
                                   "no entry %s, which its space declares", e->id, what, (long long)i, role_of(l),
                                   l->key, Py_TYPE(parent)->tp_name, k);
            g_free(k);
            goto out;
        }
    }
    rc = write_value(e, l, i, v, what, err);
out:
    for (int d = 0; d < l->depth; d++)
        Py_XDECREF(tmp[d]);
    return rc;
}

/* ---- frames --------------------------------------------------------------------- */

int gym_copy_frame(gym_env *e, int64_t i, PyObject *frame, uint8_t *rgb, crl_error *err)
{
    if (frame == Py_None)
        return crl_error_set(err, CRL_E_RUNTIME, "gym: %s: render: env %lld: render() returned None; make the env "
                             "with render_mode='rgb_array' (kwargs.render_mode = rgb_array)", e->id, (long long)i);
    Py_buffer v;
    PyObject *own = NULL;
    if (!PyObject_CheckBuffer(frame) || PyObject_GetBuffer(frame, &v, PyBUF_RECORDS_RO) != 0) {
        PyErr_Clear();
        PyObject *dt = PyUnicode_FromString("uint8");
        own = dt ? PyObject_CallFunctionObjArgs(e->cast, frame, dt, NULL) : NULL;
        Py_XDECREF(dt);
        if (!own || PyObject_GetBuffer(own, &v, PyBUF_RECORDS_RO) != 0) {
            Py_XDECREF(own);
            return pyembed_error(err, CRL_E_DTYPE, "gym: %s: render: env %lld: render() gave a %s, not an image",
                                 e->id, (long long)i, Py_TYPE(frame)->tp_name);
        }
    }
    int rc = CRL_OK;
    const int64_t h = e->render_h, w = e->render_w;
    if (!format_is(v.format, v.itemsize, CRL_U8)) {
        rc = crl_error_set(err, CRL_E_DTYPE, "gym: %s: render: env %lld: render() gave frames of buffer format '%s'; "
                           "crl takes uint8 RGB frames", e->id, (long long)i, v.format ? v.format : "B");
    } else if (v.ndim != 3 || !v.shape || v.shape[0] != h || v.shape[1] != w || (v.shape[2] != 3 && v.shape[2] != 4)) {
        char got[96];
        shape_text(v.ndim, v.shape, got, sizeof got);
        rc = crl_error_set(err, CRL_E_SHAPE, "gym: %s: render: env %lld: render() gave a frame of shape %s, but make "
                           "declared (%lld, %lld, 3)%s", e->id, (long long)i, got, (long long)h, (long long)w,
                           " (set render_height/render_width to the env's frame size)");
    } else if (v.shape[2] == 3 && PyBuffer_IsContiguous(&v, 'C')) {
        memcpy(rgb, v.buf, (size_t)(h * w * 3));
    } else {
        const uint8_t *base = v.buf;
        Py_ssize_t s0 = v.strides ? v.strides[0] : w * v.shape[2];
        Py_ssize_t s1 = v.strides ? v.strides[1] : v.shape[2];
        Py_ssize_t s2 = v.strides ? v.strides[2] : 1;
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                const uint8_t *p = base + y * s0 + x * s1;
                uint8_t *q = rgb + (y * w + x) * 3;
                q[0] = p[0];
                q[1] = p[s2];
                q[2] = p[2 * s2];
            }
    }
    PyBuffer_Release(&v);
    Py_XDECREF(own);
    return rc;
}

/* ---- actions ---------------------------------------------------------------------- */

PyObject *gym_action_arg(gym_env *e, int64_t i)
{
    if (e->composer)
        return PyObject_CallMethod(e->composer, "arg", "L", (long long)i);
    const gym_leaf *a = &e->action;
    const uint8_t *row = a->buf + (size_t)i * a->row_bytes;
    if (a->kind == GYM_DISCRETE) {
        int64_t idx = 0;
        if (e->onehot) {
            /* The first maximum, as crl_spec_project's argmax. */
            const int64_t *oh = (const int64_t *)(const void *)row;
            for (int64_t j = 1; j < a->n; j++)
                if (oh[j] > oh[idx])
                    idx = j;
        } else {
            memcpy(&idx, row, sizeof idx);
        }
        return PyLong_FromLongLong(idx + (a->start ? a->start[0] : 0));
    }
    gym_one *o = &e->envs[i];
    if (a->oh_width) {
        /* Each group's first maximum, as for Discrete; the env gets start + index. */
        const int64_t *oh = (const int64_t *)(const void *)(a->buf + (size_t)i * (size_t)a->oh_width * sizeof(int64_t));
        size_t es = crl_dtype_size(a->dt);
        for (size_t j = 0; j < a->k; j++) {
            int64_t idx = 0;
            for (int64_t c = 1; c < a->nvec[j]; c++)
                if (oh[c] > oh[idx])
                    idx = c;
            store_i64(o->staging + j * es, a->dt, idx + (a->start ? a->start[j] : 0));
            oh += a->nvec[j];
        }
    } else if (o->staging) {
        size_t es = crl_dtype_size(a->dt);
        for (int64_t j = 0; j < a->numel; j++)
            store_i64(o->staging + (size_t)j * es, a->dt, load_int(row + (size_t)j * es, a->dt) + a->start[j]);
    }
    Py_INCREF(o->action);
    return o->action;
}
