/* pyembed: the embedded CPython shared by the Python-backed plugins (gym, envpool and brax).
 *
 * One interpreter per process, whichever plugin starts it first: each
 * plugin links its own copy of this convenience library, so the state that
 * must be process-wide lives in CPython itself (Py_IsInitialized, sys.path,
 * sys.modules).  Between calls no thread holds the GIL: every entry point a
 * plugin exposes to the host brackets its Python work with
 * pyembed_gil_acquire / pyembed_gil_release, so any host thread may call in
 * and worker threads can run Python in turn.
 *
 * All functions except pyembed_init, pyembed_gil_acquire and
 * pyembed_interpreter_ready must be called with the GIL held. */
#ifndef CRL_PYEMBED_H
#define CRL_PYEMBED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <crl/crl.h>

/* Start the interpreter unless it runs already, make libpython's symbols
 * global (crl_host_promote_libpython, so C extension modules such as numpy
 * resolve while the plugin stays RTLD_LOCAL) and extend sys.path:
 *   - PYTHONPATH is honoured by CPython itself at start-up;
 *   - $VIRTUAL_ENV/lib/pythonX.Y/site-packages (with its .pth files) goes
 *     before the system's site directories when the venv matches this
 *     Python's X.Y, else a warning says why it is ignored;
 *   - `paths` (n entries, e.g. a plugin's python_path option) go to the
 *     front of sys.path, each once.
 * Starting is the equivalent of Py_InitializeEx(0) (no signal handlers,
 * the C stdio left alone) through PyConfig, so a broken installation is a
 * CRL_E_PLUGIN error instead of a fatal abort.  sys.executable is pointed
 * at the Python binary matching the embedded library (the venv's python
 * with a matching VIRTUAL_ENV), not whatever python3 comes first on PATH.
 * `who` names the plugin in messages; `host` is used for promotion and
 * logging.  Call from the plugin's init; returns with the GIL released. */
int pyembed_init(crl_host *host, const char *who, const char *const *paths, size_t n, crl_error *err);

/* True once some copy of pyembed (or the embedding program) started CPython. */
bool pyembed_interpreter_ready(void);

/* Take / give back the GIL (PyGILState_Ensure / Release: works on any
 * thread, including ones CPython never saw). */
typedef PyGILState_STATE pyembed_gil;
static inline pyembed_gil pyembed_gil_acquire(void)
{
    return PyGILState_Ensure();
}
static inline void pyembed_gil_release(pyembed_gil g)
{
    PyGILState_Release(g);
}

/* Turn the pending Python exception into a crl error and clear it.  The
 * message is "CONTEXT: module.Type: message" followed by the traceback
 * (traceback.format_exception; when it does not fit, its innermost frames).
 * An exception carrying an int attribute `crl_code` is a user-facing setup
 * error raised on purpose: its code is taken from there and its message is
 * given alone.  With no exception pending, says so.  Returns the code. */
int pyembed_error(crl_error *err, int code, const char *fmt, ...) CRL_PRINTF(3, 4);

/* The type and message of the pending exception ("ValueError: bad"), then
 * clear it; for warnings that must not fail anything.  Free with g_free. */
char *pyembed_error_brief(void);

/* "Python 3.11.2 at /usr/bin/python3.11" for messages; free with g_free. */
char *pyembed_describe(void);

/* sys.path as "['a', 'b']"; free with g_free. */
char *pyembed_sys_path(void);

/* Import a module.  A missing module is CRL_E_NOT_FOUND naming the module,
 * `what` needs it for, the interpreter, sys.path and the three ways to fix
 * it ([plugin.PLUGIN] python_path, PYTHONPATH, VIRTUAL_ENV); any other
 * failure while importing is CRL_E_PLUGIN with the traceback.  New
 * reference or NULL. */
PyObject *pyembed_import(const char *module, const char *what, const char *plugin, crl_error *err);

/* A module built from Python source held in the plugin, registered in
 * sys.modules under `name` the first time and reused afterwards (another
 * copy of the plugin may have defined it).  New reference or NULL. */
PyObject *pyembed_source_module(const char *name, const char *source, crl_error *err);

#endif
