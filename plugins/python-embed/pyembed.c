/* pyembed: start CPython once per process, extend sys.path, turn Python exceptions into crl errors. */
#include "pyembed.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

/* Python half of pyembed, defined once per process in sys.modules (every
 * plugin's copy of this library finds it there).  The _1 is a version: a
 * later, incompatible helper takes a new name. */
#define SUPPORT_NAME "_crl_pyembed_1"

#include "pyembed_support.h" /* support_source[], generated from pyembed_support.py */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

bool pyembed_interpreter_ready(void)
{
    return Py_IsInitialized() != 0;
}

/* ---- exceptions ---------------------------------------------------------- */

/* UTF-8 text of str(o), or a placeholder; never leaves an exception set. */
static char *str_of(PyObject *o)
{
    if (!o)
        return g_strdup("");
    PyObject *s = PyObject_Str(o);
    const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
    char *out = g_strdup(u ? u : "<unprintable>");
    Py_XDECREF(s);
    PyErr_Clear();
    return out;
}

/* "ValueError" for builtins, else "module.QualName". */
static char *type_name(PyObject *type)
{
    if (!type || !PyType_Check(type))
        return g_strdup("<unknown exception>");
    PyObject *mod = PyObject_GetAttrString(type, "__module__");
    PyObject *qual = PyObject_GetAttrString(type, "__qualname__");
    PyErr_Clear();
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    const char *q = qual && PyUnicode_Check(qual) ? PyUnicode_AsUTF8(qual) : NULL;
    PyErr_Clear();
    if (!q)
        q = ((PyTypeObject *)type)->tp_name;
    char *out = m && strcmp(m, "builtins") != 0 ? g_strdup_printf("%s.%s", m, q) : g_strdup(q);
    Py_XDECREF(mod);
    Py_XDECREF(qual);
    return out;
}

/* traceback.format_exception(type, value, tb), joined; NULL when it fails. */
static char *format_traceback(PyObject *type, PyObject *value, PyObject *tb)
{
    PyObject *mod = PyImport_ImportModule("traceback");
    PyObject *lines = mod ? PyObject_CallMethod(mod, "format_exception", "OOO", type, value ? value : Py_None,
                                                tb ? tb : Py_None)
                          : NULL;
    PyObject *empty = lines ? PyUnicode_FromString("") : NULL;
    PyObject *joined = empty ? PyUnicode_Join(empty, lines) : NULL;
    const char *u = joined ? PyUnicode_AsUTF8(joined) : NULL;
    char *out = u ? g_strdup(u) : NULL;
    Py_XDECREF(joined);
    Py_XDECREF(empty);
    Py_XDECREF(lines);
    Py_XDECREF(mod);
    PyErr_Clear();
    return out;
}

/* Room left for the traceback after the head; the rest of the message
 * budget stays free for the prefixes the host adds ("env backend ...:"). */
#define HOST_PREFIX_ROOM 200

int pyembed_error(crl_error *err, int code, const char *fmt, ...)
{
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    if (!type)
        return crl_error_set(err, code, "%s: failed without a Python exception", ctx);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);

    /* A CrlError (or anything with an int crl_code) speaks for itself. */
    PyObject *cc = value ? PyObject_GetAttrString(value, "crl_code") : NULL;
    if (!cc)
        PyErr_Clear();
    if (cc && PyLong_Check(cc)) {
        long c = PyLong_AsLong(cc);
        PyErr_Clear();
        char *msg = str_of(value);
        int rc = crl_error_set(err, c > 0 && c < 1000 ? (int)c : code, "%s: %s", ctx, msg);
        g_free(msg);
        Py_DECREF(cc);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return rc;
    }
    Py_XDECREF(cc);

    char *tname = type_name(type);
    char *msg = str_of(value);
    char *trace = tb ? format_traceback(type, value, tb) : NULL;
    GString *s = g_string_new(NULL);
    g_string_printf(s, "%s: %s: %s", ctx, tname, msg);
    if (s->len > CRL_ERROR_MESSAGE_MAX / 2) {
        g_string_truncate(s, CRL_ERROR_MESSAGE_MAX / 2 - 3);
        g_string_append(s, "...");
    }
    if (trace) {
        /* The last line of format_exception repeats "Type: message". */
        size_t n = strlen(trace);
        while (n && trace[n - 1] == '\n')
            trace[--n] = '\0';
        char *last = strrchr(trace, '\n');
        if (last && g_str_has_prefix(last + 1, tname))
            *last = '\0';
        size_t room = CRL_ERROR_MESSAGE_MAX - 1 - HOST_PREFIX_ROOM;
        room = s->len + 1 < room ? room - s->len - 1 : 0;
        n = strlen(trace);
        if (n <= room) {
            g_string_append_c(s, '\n');
            g_string_append(s, trace);
        } else if (room > 80) {
            /* Keep the innermost frames: they say where it broke. */
            static const char head[] = "Traceback (most recent call last, outer frames cut):\n";
            size_t keep = room - (sizeof head - 1);
            const char *tail = trace + n - keep;
            const char *nl = strchr(tail, '\n');
            if (nl && nl[1])
                tail = nl + 1;
            g_string_append_c(s, '\n');
            g_string_append(s, head);
            g_string_append(s, tail);
        }
    }
    int rc = crl_error_set(err, code, "%s", s->str);
    g_string_free(s, TRUE);
    g_free(trace);
    g_free(msg);
    g_free(tname);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return rc;
}

char *pyembed_error_brief(void)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    if (!type)
        return g_strdup("no Python exception");
    PyErr_NormalizeException(&type, &value, &tb);
    char *tname = type_name(type);
    char *msg = str_of(value);
    char *out = g_strdup_printf("%s: %s", tname, msg);
    g_free(tname);
    g_free(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return out;
}

/* ---- the support module -------------------------------------------------- */

PyObject *pyembed_source_module(const char *name, const char *source, crl_error *err)
{
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *m = mods ? PyDict_GetItemString(mods, name) : NULL;
    if (m) {
        Py_INCREF(m);
        return m;
    }
    char *filename = g_strdup_printf("<crl %s>", name);
    PyObject *code = Py_CompileString(source, filename, Py_file_input);
    g_free(filename);
    m = code ? PyImport_ExecCodeModule(name, code) : NULL;
    Py_XDECREF(code);
    if (!m)
        pyembed_error(err, CRL_E_PLUGIN, "cannot define the Python module %s that crl embeds", name);
    return m;
}

static PyObject *support_module(crl_error *err)
{
    PyObject *mods = PyImport_GetModuleDict();
    if (mods && PyDict_GetItemString(mods, SUPPORT_NAME))
        return pyembed_source_module(SUPPORT_NAME, support_source, err);
    PyObject *m = pyembed_source_module(SUPPORT_NAME, support_source, err);
    static const struct { const char *name; int code; } codes[] = {
        { "E_INVALID", CRL_E_INVALID },   { "E_CONFIG", CRL_E_CONFIG },
        { "E_NOT_FOUND", CRL_E_NOT_FOUND }, { "E_PLUGIN", CRL_E_PLUGIN },
        { "E_DTYPE", CRL_E_DTYPE },       { "E_SHAPE", CRL_E_SHAPE },
        { "E_RUNTIME", CRL_E_RUNTIME },   { "E_UNSUPPORTED", CRL_E_UNSUPPORTED },
    };
    for (size_t i = 0; m && i < sizeof codes / sizeof codes[0]; i++)
        if (PyModule_AddIntConstant(m, codes[i].name, codes[i].code) < 0) {
            pyembed_error(err, CRL_E_PLUGIN, "cannot define %s.%s", SUPPORT_NAME, codes[i].name);
            Py_CLEAR(m);
        }
    return m;
}

/* Call support.fn(*args) and log the warnings it returns. */
static int call_setup(crl_host *host, const char *who, const char *fn, PyObject *args, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    PyObject *m = support_module(&e);
    if (!m)
        return crl_error_pass(err, &e, CRL_E_PLUGIN);
    PyObject *f = PyObject_GetAttrString(m, fn);
    PyObject *warnings = f ? PyObject_CallObject(f, args) : NULL;
    Py_XDECREF(f);
    Py_DECREF(m);
    if (!warnings)
        return pyembed_error(err, CRL_E_PLUGIN, "%s: setting up the embedded Python (%s)", who, fn);
    Py_ssize_t n = PySequence_Check(warnings) ? PySequence_Size(warnings) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = PySequence_GetItem(warnings, i);
        char *text = str_of(w);
        crl_host_log(host, CRL_LOG_WARNING, "%s", text);
        g_free(text);
        Py_XDECREF(w);
    }
    PyErr_Clear();
    Py_DECREF(warnings);
    return CRL_OK;
}

/* ---- start-up ------------------------------------------------------------- */

static int start_interpreter(const char *who, crl_error *err)
{
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    /* As Py_InitializeEx(0): the host owns signals and its C stdio. */
    config.install_signal_handlers = 0;
    config.configure_c_stdio = 0;
    config.parse_argv = 0;
    PyStatus st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
        return crl_error_set(err, CRL_E_PLUGIN,
                             "%s: cannot start the embedded Python (%s%s%s); check PYTHONHOME and PYTHONPATH "
                             "(unset them to use the system's Python %s)",
                             who, st.func ? st.func : "", st.func ? ": " : "", st.err_msg ? st.err_msg : "failed",
                             PY_VERSION);
    return CRL_OK;
}

int pyembed_init(crl_host *host, const char *who, const char *const *paths, size_t n, crl_error *err)
{
    if (!who)
        who = "python-embed";
    int rc = crl_host_promote_libpython(host, err);
    if (rc != CRL_OK) {
        crl_error_prefix(err, "%s: ", who);
        return rc;
    }
    pthread_mutex_lock(&init_lock);
    bool started_here = false;
    if (!Py_IsInitialized()) {
        rc = start_interpreter(who, err);
        if (rc == CRL_OK) {
            started_here = true;
            /* The main thread holds the GIL now; give it back below. */
        }
    }
    if (rc == CRL_OK) {
        pyembed_gil g = 0;
        if (!started_here)
            g = pyembed_gil_acquire();
        rc = call_setup(host, who, "setup_once", NULL, err);
        if (rc == CRL_OK && n > 0) {
            PyObject *list = PyList_New((Py_ssize_t)n);
            for (size_t i = 0; list && i < n; i++) {
                PyObject *s = PyUnicode_DecodeFSDefault(paths[i] ? paths[i] : "");
                if (!s) {
                    Py_CLEAR(list);
                    break;
                }
                PyList_SET_ITEM(list, (Py_ssize_t)i, s);
            }
            PyObject *args = list ? Py_BuildValue("(Os)", list, who) : NULL;
            rc = args ? call_setup(host, who, "add_paths", args, err)
                      : pyembed_error(err, CRL_E_PLUGIN, "%s: python_path", who);
            Py_XDECREF(args);
            Py_XDECREF(list);
        }
        if (started_here)
            PyEval_SaveThread(); /* from now on no thread holds the GIL between calls */
        else
            pyembed_gil_release(g);
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* ---- messages -------------------------------------------------------------- */

char *pyembed_describe(void)
{
    PyObject *m = support_module(NULL);
    PyObject *d = m ? PyObject_CallMethod(m, "describe", NULL) : NULL;
    char *out = d ? str_of(d) : g_strdup_printf("Python %s", Py_GetVersion());
    Py_XDECREF(d);
    Py_XDECREF(m);
    PyErr_Clear();
    return out;
}

char *pyembed_sys_path(void)
{
    PyObject *p = PySys_GetObject("path"); /* borrowed */
    return p ? str_of(p) : g_strdup("(no sys.path)");
}

PyObject *pyembed_import(const char *module, const char *what, const char *plugin, crl_error *err)
{
    PyObject *m = support_module(err);
    PyObject *mod = m ? PyObject_CallMethod(m, "import_module", "sss", module, what ? what : module,
                                            plugin ? plugin : "NAME")
                      : NULL;
    Py_XDECREF(m);
    if (!mod && m)
        pyembed_error(err, CRL_E_PLUGIN, "importing '%s'", module);
    return mod;
}
