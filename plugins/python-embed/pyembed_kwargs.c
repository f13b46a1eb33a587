/* pyembed_kwargs: kwargs.NAME = VALUE options as a dict of Python literals. */
#include "pyembed_kwargs.h"

#include <string.h>

#define PREFIX "kwargs."

/* The literal text spells, else the text itself; NULL only on a failure that is not about the text. */
static PyObject *literal(PyObject *ast, const char *text)
{
    PyObject *s = PyUnicode_FromString(text);
    PyObject *stripped = s ? PyObject_CallMethod(s, "strip", NULL) : NULL;
    PyObject *v = stripped ? PyObject_CallMethod(ast, "literal_eval", "O", stripped) : NULL;
    /* What literal_eval raises on text that is no literal; anything else is a real failure. */
    if (!v && stripped &&
        (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_SyntaxError) ||
         PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_MemoryError) ||
         PyErr_ExceptionMatches(PyExc_RecursionError))) {
        PyErr_Clear();
        v = Py_NewRef(s);
    }
    Py_XDECREF(stripped);
    Py_XDECREF(s);
    return v;
}

PyObject *pyembed_kwargs(const crl_opts *opts, const char *who, crl_error *err)
{
    PyObject *ast = PyImport_ImportModule("ast");
    if (!ast) {
        pyembed_error(err, CRL_E_PLUGIN, "%s: kwargs: cannot import ast", who);
        return NULL;
    }
    PyObject *kw = PyDict_New();
    if (!kw) {
        Py_DECREF(ast);
        pyembed_error(err, CRL_E_NOMEM, "%s: kwargs", who);
        return NULL;
    }
    size_t n = opts ? crl_opts_prefixed_count(opts, PREFIX) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = crl_opts_prefixed_key(opts, PREFIX, i);
        const char *raw = crl_opts_prefixed_value(opts, PREFIX, i);
        const char *name = key ? key + strlen(PREFIX) : "";
        PyObject *pn = PyUnicode_FromString(name);
        if (!pn || !PyUnicode_IsIdentifier(pn)) {
            Py_XDECREF(pn);
            PyErr_Clear();
            Py_DECREF(kw);
            Py_DECREF(ast);
            const char *origin = crl_opts_origin(opts, key);
            crl_error_set(err, CRL_E_CONFIG, "%s%s[%s] %s: '%s' is not a Python keyword argument name; write "
                          "kwargs.NAME = VALUE with NAME an identifier", origin ? origin : "", origin ? ": " : "",
                          crl_opts_section(opts), key, name);
            return NULL;
        }
        PyObject *v = literal(ast, raw ? raw : "");
        int bad = !v || PyDict_SetItem(kw, pn, v) < 0;
        Py_XDECREF(v);
        Py_DECREF(pn);
        if (bad) {
            Py_DECREF(kw);
            Py_DECREF(ast);
            pyembed_error(err, CRL_E_CONFIG, "[%s] %s", crl_opts_section(opts), key);
            return NULL;
        }
    }
    Py_DECREF(ast);
    return kw;
}
