/* pyembed_buffer: host buffers as (memoryview, dtype, shape) tuples for a plugin's Python half. */
#include "pyembed_buffer.h"

PyObject *pyembed_buffer(crl_td *buffers, const char *who, const char *id, int64_t num, const char *key,
                         crl_dtype dt, int ndim, const int64_t *shape, int *rc, crl_error *err)
{
    if (*rc)
        return NULL;
    crl_tensor *t = crl_td_get(buffers, key);
    if (!t) {
        *rc = crl_error_set(err, CRL_E_NOT_FOUND, "%s: %s: bind: no '%s' buffer; the host must allocate one per "
                            "spec leaf", who, id, key);
        return NULL;
    }
    const int64_t *ts = crl_tensor_shape(t);
    bool same = crl_tensor_dtype(t) == dt && crl_tensor_ndim(t) == ndim + 1 && ts[0] == num;
    for (int d = 0; same && d < ndim; d++)
        same = ts[d + 1] == shape[d];
    if (!same || crl_tensor_device(t).type != CRL_DEVICE_CPU || !crl_tensor_is_contiguous(t)) {
        *rc = crl_error_set(err, CRL_E_SHAPE, "%s: %s: bind: buffer '%s' is not a contiguous cpu %s tensor of "
                            "the spec's shape", who, id, key, crl_dtype_name(dt));
        return NULL;
    }
    size_t bytes = (size_t)crl_tensor_numel(t) * crl_dtype_size(dt);
    PyObject *sh = PyTuple_New(ndim + 1);
    for (int d = 0; sh && d <= ndim; d++) {
        PyObject *v = PyLong_FromLongLong((long long)ts[d]);
        if (!v) {
            Py_CLEAR(sh);
            break;
        }
        PyTuple_SET_ITEM(sh, d, v);
    }
    PyObject *mv = sh ? PyMemoryView_FromMemory((char *)crl_tensor_data(t), (Py_ssize_t)bytes, PyBUF_WRITE) : NULL;
    PyObject *r = mv ? Py_BuildValue("(OsO)", mv, crl_dtype_name(dt), sh) : NULL;
    Py_XDECREF(mv);
    Py_XDECREF(sh);
    if (!r)
        *rc = pyembed_error(err, CRL_E_NOMEM, "%s: %s: bind '%s'", who, id, key);
    return r;
}
