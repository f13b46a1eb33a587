/* The brax plugin: registers env/brax, a crl_env_ops backend over one Brax env vmapped over num envs (as TorchRL's
 * BraxEnv) in embedded CPython, with Brax's State pytree as crl's state spec. */
#include "config.h"
#include "pyembed_buffer.h"
#include "pyembed_kwargs.h"
#include "pyembed_plugin.h"

#include <glib.h>
#include <string.h>

/* The Python half (brax_support.py), compiled in: brax_support_source[]. */
#include "brax_support.h"

#define SUPPORT_NAME "_crl_brax_1"

static crl_host *brax_host;

static const crl_option brax_options[] = {
    { "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL,
      "kwargs.NAME = VALUE: keyword arguments of brax.envs.get_environment (e.g. kwargs.backend = generalized); "
      "VALUE is read as a Python literal (ast.literal_eval), else taken as a string" },
    CRL_OPTIONS_END
};

#define SPECS_HAS(specs, member) \
    ((specs)->struct_size >= offsetof(crl_env_specs, member) + sizeof((specs)->member))

typedef struct state_leaf {
    char *key;
    crl_dtype dt;
    int ndim;                  /* after [num] */
    int64_t shape[CRL_MAX_DIMS];
} state_leaf;

typedef struct brax_env {
    char *id;
    int64_t num;
    int64_t obs_size, act_size;
    PyObject *env;             /* support.BraxEnv */
    PyObject *reset, *step;
    state_leaf *state;
    size_t nstate;
    bool bound;
} brax_env;

static const char *const *brax_list(void)
{
    return NULL; /* brax.envs.get_environment judges at make */
}

static void free_env(brax_env *e)
{
    if (!e)
        return;
    Py_XDECREF(e->reset);
    Py_XDECREF(e->step);
    Py_XDECREF(e->env);
    for (size_t i = 0; i < e->nstate; i++)
        g_free(e->state[i].key);
    g_free(e->state);
    g_free(e->id);
    g_free(e);
}

static void brax_close(void *env)
{
    brax_env *e = env;
    if (!e)
        return;
    if (!pyembed_interpreter_ready()) {
        for (size_t i = 0; i < e->nstate; i++)
            g_free(e->state[i].key);
        g_free(e->state);
        g_free(e->id);
        g_free(e);
        return;
    }
    pyembed_gil g = pyembed_gil_acquire();
    free_env(e);
    pyembed_gil_release(g);
}

static int read_state_leaves(brax_env *e, PyObject *list, crl_error *err)
{
    if (!PyList_Check(list))
        return crl_error_set(err, CRL_E_PLUGIN, "brax: the state leaves are not a list (plugin bug)");
    size_t n = (size_t)PyList_GET_SIZE(list);
    e->state = g_new0(state_leaf, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        const char *key, *dt;
        PyObject *shape;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, (Py_ssize_t)i), "ssO!", &key, &dt, &PyTuple_Type, &shape))
            return pyembed_error(err, CRL_E_PLUGIN, "brax: a state leaf description");
        state_leaf *l = &e->state[e->nstate++];
        l->key = g_strdup(key);
        if (!crl_dtype_from_name(dt, &l->dt))
            return crl_error_set(err, CRL_E_UNSUPPORTED, "brax: %s: state leaf '%s' is %s, which has no crl dtype",
                                 e->id, key, dt);
        if (PyTuple_GET_SIZE(shape) >= CRL_MAX_DIMS)
            return crl_error_set(err, CRL_E_UNSUPPORTED, "brax: %s: state leaf '%s' has more than %d dims", e->id,
                                 key, CRL_MAX_DIMS - 2);
        l->ndim = (int)PyTuple_GET_SIZE(shape);
        for (int d = 0; d < l->ndim; d++)
            l->shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
    }
    return CRL_OK;
}

static int make_locked(brax_env *e, const char *id, const crl_opts *opts, crl_spec **state_spec, crl_error *err)
{
    crl_error le;
    crl_error_clear(&le);
    PyObject *sup = pyembed_source_module(SUPPORT_NAME, brax_support_source, &le);
    if (!sup)
        return crl_error_pass(err, &le, CRL_E_PLUGIN);
    PyObject *kw = pyembed_kwargs(opts, "brax", &le);
    if (!kw) {
        Py_DECREF(sup);
        return crl_error_pass(err, &le, CRL_E_CONFIG);
    }
    e->env = PyObject_CallMethod(sup, "BraxEnv", "sLO", id, (long long)e->num, kw);
    Py_DECREF(kw);
    Py_DECREF(sup);
    if (!e->env)
        return pyembed_error(err, CRL_E_INVALID, "brax: %s", id);
    e->reset = PyObject_GetAttrString(e->env, "reset");
    e->step = e->reset ? PyObject_GetAttrString(e->env, "step") : NULL;
    PyObject *d = e->step ? PyObject_CallMethod(e->env, "describe", NULL) : NULL;
    long long obs = 0, act = 0;
    PyObject *leaves = NULL;
    if (!d || !PyArg_ParseTuple(d, "LLO", &obs, &act, &leaves)) {
        Py_XDECREF(d);
        return pyembed_error(err, CRL_E_UNSUPPORTED, "brax: %s", id);
    }
    e->obs_size = obs;
    e->act_size = act;
    int rc = read_state_leaves(e, leaves, err);
    Py_DECREF(d);
    if (rc)
        return rc;
    crl_spec *c = crl_spec_composite(1, &e->num, &le);
    for (size_t i = 0; c && i < e->nstate; i++) {
        int64_t shape[CRL_MAX_DIMS];
        shape[0] = e->num;
        for (int k = 0; k < e->state[i].ndim; k++)
            shape[k + 1] = e->state[i].shape[k];
        crl_spec *s = crl_spec_unbounded(e->state[i].dt, e->state[i].ndim + 1, shape, &le);
        if (!s || crl_spec_composite_set(c, e->state[i].key, s, &le)) {
            crl_spec_unref(s);
            crl_spec_unref(c);
            c = NULL;
            break;
        }
        crl_spec_unref(s);
    }
    if (!c) {
        crl_error_prefix(&le, "brax: %s: state spec: ", id);
        return crl_error_pass(err, &le, CRL_E_INVALID);
    }
    *state_spec = c;
    return CRL_OK;
}

static int brax_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                     crl_error *err)
{
    if (env)
        *env = NULL;
    if (!specs || !env || !id)
        return crl_error_set(err, CRL_E_INVALID, "brax: make needs an id and specs and env out-parameters");
    if (!SPECS_HAS(specs, state))
        return crl_error_set(err, CRL_E_ABI, "brax: the host's crl_env_specs (%u bytes) has no room for the state "
                             "spec; upgrade libcrl", specs->struct_size);
    if (num < 1)
        return crl_error_set(err, CRL_E_INVALID, "brax: %s: cannot make %lld envs; num_envs must be at least 1", id,
                             (long long)num);
    if (!pyembed_interpreter_ready())
        return crl_error_set(err, CRL_E_PLUGIN, "brax: the embedded Python is not running; the brax plugin's init "
                             "starts it: load the plugin through the host");
    brax_env *e = g_new0(brax_env, 1);
    e->id = g_strdup(id);
    e->num = num;
    crl_spec *state = NULL;
    pyembed_gil g = pyembed_gil_acquire();
    int rc = make_locked(e, id, opts, &state, err);
    if (rc) {
        free_env(e);
        e = NULL;
    }
    pyembed_gil_release(g);
    if (rc)
        return rc;
    crl_error se;
    crl_error_clear(&se);
    int64_t o[2] = { num, e->obs_size }, a[2] = { num, e->act_size }, col[2] = { num, 1 };
    crl_spec *obs = crl_spec_composite_of(num, "observation", crl_spec_unbounded(CRL_F32, 2, o, &se), &se);
    crl_spec *act = obs ? crl_spec_composite_of(num, "action", crl_spec_bounded(CRL_F32, 2, a, -1.0, 1.0, &se), &se)
                        : NULL;
    crl_spec *rew = act ? crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, &se), &se) : NULL;
    crl_spec *done = rew ? crl_env_backend_done_spec(num, &se) : NULL;
    if (!done) {
        crl_spec_unref(obs);
        crl_spec_unref(act);
        crl_spec_unref(rew);
        crl_spec_unref(state);
        brax_close(e);
        return crl_error_pass(err, &se, CRL_E_NOMEM);
    }
    specs->observation = obs;
    specs->action = act;
    specs->reward = rew;
    specs->done = done;
    specs->state = state;
    *env = e;
    return CRL_OK;
}

/* The buffer under key as pyembed_buffer hands it to the support module. */
static PyObject *buffer(const brax_env *e, crl_td *buffers, const char *key, crl_dtype dt, int ndim,
                        const int64_t *shape, int *rc, crl_error *err)
{
    return pyembed_buffer(buffers, "brax", e->id, e->num, key, dt, ndim, shape, rc, err);
}

static int bind_locked(brax_env *e, crl_td *buffers, crl_error *err)
{
    int rc = CRL_OK;
    int64_t one = 1;
    PyObject *obs = buffer(e, buffers, "observation", CRL_F32, 1, &e->obs_size, &rc, err);
    PyObject *act = buffer(e, buffers, "action", CRL_F32, 1, &e->act_size, &rc, err);
    PyObject *rew = buffer(e, buffers, "reward", CRL_F32, 1, &one, &rc, err);
    PyObject *term = buffer(e, buffers, "terminated", CRL_BOOL, 1, &one, &rc, err);
    PyObject *trunc = buffer(e, buffers, "truncated", CRL_BOOL, 1, &one, &rc, err);
    PyObject *state = !rc ? PyList_New((Py_ssize_t)e->nstate) : NULL;
    if (!rc && !state)
        rc = pyembed_error(err, CRL_E_NOMEM, "brax: %s: bind", e->id);
    for (size_t i = 0; !rc && i < e->nstate; i++) {
        state_leaf *l = &e->state[i];
        PyObject *b = buffer(e, buffers, l->key, l->dt, l->ndim, l->shape, &rc, err);
        if (b)
            PyList_SET_ITEM(state, (Py_ssize_t)i, b);
    }
    if (!rc) {
        PyObject *r = PyObject_CallMethod(e->env, "bind", "OOOOOO", obs, act, rew, term, trunc, state);
        if (!r)
            rc = pyembed_error(err, CRL_E_PLUGIN, "brax: %s: bind", e->id);
        Py_XDECREF(r);
    }
    Py_XDECREF(obs);
    Py_XDECREF(act);
    Py_XDECREF(rew);
    Py_XDECREF(term);
    Py_XDECREF(trunc);
    Py_XDECREF(state);
    return rc;
}

static int brax_bind(void *env, crl_td *buffers, crl_error *err)
{
    brax_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "brax: bind needs an env and a buffer TensorDict");
    pyembed_gil g = pyembed_gil_acquire();
    int rc = bind_locked(e, buffers, err);
    pyembed_gil_release(g);
    if (!rc)
        e->bound = true;
    return rc;
}

static int brax_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    brax_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "brax: reset needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "brax: %s: reset before bind; bind the buffers first", e->id);
    /* One key serves the batch: the seed of the first env reset. */
    int64_t first = 0;
    while (mask && first < e->num && !mask[first])
        first++;
    if (first == e->num)
        return CRL_OK;
    pyembed_gil g = pyembed_gil_acquire();
    PyObject *m = mask ? PyBytes_FromStringAndSize((const char *)mask, (Py_ssize_t)e->num) : Py_NewRef(Py_None);
    PyObject *s = seeds ? PyLong_FromUnsignedLongLong(seeds[first]) : Py_NewRef(Py_None);
    PyObject *r = m && s ? PyObject_CallFunctionObjArgs(e->reset, m, s, from_state ? Py_True : Py_False, NULL) : NULL;
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "brax: %s: reset%s", e->id,
                                        from_state ? " from state" : "");
    Py_XDECREF(r);
    Py_XDECREF(m);
    Py_XDECREF(s);
    pyembed_gil_release(g);
    return rc;
}

static int brax_step(void *env, crl_error *err)
{
    brax_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "brax: step needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "brax: %s: step before bind; bind the buffers first", e->id);
    pyembed_gil g = pyembed_gil_acquire();
    PyObject *r = PyObject_CallNoArgs(e->step);
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "brax: %s: step", e->id);
    Py_XDECREF(r);
    pyembed_gil_release(g);
    return rc;
}

static const crl_env_ops brax_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = brax_list,
    .make = brax_make,
    .bind = brax_bind,
    .reset = brax_reset,
    .step = brax_step,
    .render = NULL,
    .close = brax_close,
};

static const crl_component brax_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "brax",
    "Brax (google/brax) envs on JAX in embedded CPython, as TorchRL's BraxEnv: id = a brax.envs name; "
    "vmap(jit(reset/step)) over num_envs, the State pytree as the state spec",
    brax_options,
    &brax_ops,
};

static int brax_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    int rc = pyembed_plugin_init(host, "brax", section, err);
    if (rc)
        return rc;
    brax_host = host;
    return crl_host_register(host, &brax_component, err);
}

static void brax_fini(void)
{
    brax_host = NULL;
}

CRL_PLUGIN_DEFINE(brax, "brax", PACKAGE_VERSION, "MIT",
                  "Brax envs on JAX through embedded CPython: one vmapped batch, arrays out through DLPack",
                  pyembed_plugin_options, brax_init, brax_fini)
