/* The envpool plugin: registers env/envpool, a crl_env_ops backend over one EnvPool (sail-sg/envpool) per
 * instance, as TorchRL's MultiThreadedEnv, in embedded CPython. */
#include "config.h"
#include "gym.h"
#include "pyembed_buffer.h"
#include "pyembed_kwargs.h"
#include "pyembed_plugin.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

/* The Python halves, compiled in: gym_support_source[] (the space mapping) and envpool_support_source[]. */
#include "gym_support.h"
#include "envpool_support.h"

#define GYM_SUPPORT_NAME "_crl_gym_1"
#define SUPPORT_NAME "_crl_envpool_1"

static crl_host *ep_host;

static const crl_option ep_options[] = {
    { "env_type", CRL_OPT_ENUM, 0, "gymnasium", 0, 0, "gymnasium|gym",
      "envpool.make's env_type: gymnasium (step gives (obs, reward, terminated, truncated, info)) or gym (step gives "
      "(obs, reward, done, info) with info['TimeLimit.truncated'])" },
    { "num_threads", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 4096, NULL,
      "EnvPool's worker threads (envpool.make num_threads); 0: EnvPool's default" },
    { "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL,
      "kwargs.NAME = VALUE: more envpool.make config keys (e.g. kwargs.frame_skip = 4); VALUE is read as a Python "
      "literal (ast.literal_eval), else taken as a string; num_envs, batch_size, seed and max_episode_steps come from "
      "[env]" },
    CRL_OPTIONS_END
};

#define SPECS_HAS(specs, member) \
    ((specs)->struct_size >= offsetof(crl_env_specs, member) + sizeof((specs)->member))

typedef struct ep_env {
    char *id;
    int64_t num;
    PyObject *pool;            /* support.Pool */
    PyObject *reset, *step;    /* its bound methods */
    gym_leaf *obs;
    size_t nobs;
    gym_leaf action;
    int32_t render_h, render_w;
    int64_t max_steps;
    bool bound;
} ep_env;

static const char *const *ep_list(void)
{
    return NULL; /* envpool.list_all_envs() judges at make */
}

static void free_env(ep_env *e)
{
    if (!e)
        return;
    if (e->pool) {
        PyObject *r = PyObject_CallMethod(e->pool, "close", NULL);
        if (!r) {
            char *why = pyembed_error_brief();
            crl_host_log(ep_host, CRL_LOG_WARNING, "envpool: %s: close() raised %s (ignored)", e->id, why);
            g_free(why);
        }
        Py_XDECREF(r);
    }
    Py_XDECREF(e->reset);
    Py_XDECREF(e->step);
    Py_XDECREF(e->pool);
    for (size_t i = 0; i < e->nobs; i++)
        gym_leaf_clear(&e->obs[i]);
    g_free(e->obs);
    gym_leaf_clear(&e->action);
    g_free(e->id);
    g_free(e);
}

static void ep_close(void *env)
{
    ep_env *e = env;
    if (!e)
        return;
    if (!pyembed_interpreter_ready()) {
        g_free(e->id);
        g_free(e);
        return;
    }
    pyembed_gil g = pyembed_gil_acquire();
    free_env(e);
    pyembed_gil_release(g);
}

static bool host_has(const crl_opts *opts, const char *name)
{
    return opts && crl_opts_origin(opts, name) && crl_opts_is_set(opts, name);
}

static int64_t host_int(const crl_opts *opts, const char *name)
{
    int64_t v = 0;
    if (host_has(opts, name) && crl_opts_int(opts, name, &v, NULL) != CRL_OK)
        v = 0;
    return v;
}

/* kwargs.NAME as a dict of Python values (GIL held), refusing the names the [env] section owns. */
static PyObject *make_kwargs(const crl_opts *opts, crl_error *err)
{
    static const char *const owned[] = { "num_envs", "batch_size", "seed", "max_episode_steps", "env_type" };
    size_t n = opts ? crl_opts_prefixed_count(opts, "kwargs.") : 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = crl_opts_prefixed_key(opts, "kwargs.", i);
        const char *name = key ? key + strlen("kwargs.") : "";
        for (size_t k = 0; k < G_N_ELEMENTS(owned); k++)
            if (!strcmp(name, owned[k])) {
                const char *origin = crl_opts_origin(opts, key);
                crl_error_set(err, CRL_E_CONFIG, "%s%s[%s] %s: %s comes from [%s] %s, not from kwargs; set it there",
                              origin ? origin : "", origin ? ": " : "", crl_opts_section(opts), key, name,
                              crl_opts_section(opts), name);
                return NULL;
            }
    }
    return pyembed_kwargs(opts, "envpool", err);
}

static int make_locked(ep_env *e, const char *id, const crl_opts *opts, crl_spec **parts, crl_error *err)
{
    crl_error le;
    crl_error_clear(&le);
    PyObject *gs = pyembed_source_module(GYM_SUPPORT_NAME, gym_support_source, &le);
    PyObject *sup = gs ? pyembed_source_module(SUPPORT_NAME, envpool_support_source, &le) : NULL;
    if (!sup) {
        Py_XDECREF(gs);
        return crl_error_pass(err, &le, CRL_E_PLUGIN);
    }
    const char *env_type = "gymnasium";
    int64_t threads = 0;
    int rc = CRL_OK;
    if (opts && crl_opts_is_set(opts, "env_type"))
        rc = crl_opts_string(opts, "env_type", &env_type, err);
    if (!rc && opts && crl_opts_is_set(opts, "num_threads"))
        rc = crl_opts_int(opts, "num_threads", &threads, err);
    bool pixels = false;
    if (!rc && host_has(opts, "from_pixels") && crl_opts_bool(opts, "from_pixels", &pixels, NULL) != CRL_OK)
        pixels = false;
    PyObject *kw = !rc ? make_kwargs(opts, &le) : NULL;
    if (!kw) {
        Py_DECREF(gs);
        Py_DECREF(sup);
        return rc ? rc : crl_error_pass(err, &le, CRL_E_CONFIG);
    }
    int render = pixels || PyDict_GetItemString(kw, "render_mode") != NULL;
    uint64_t seed = (uint64_t)host_int(opts, "seed");
    e->pool = PyObject_CallMethod(sup, "Pool", "sLsOKLLiL", id, (long long)e->num, env_type, kw,
                                  (unsigned long long)seed, (long long)host_int(opts, "max_episode_steps"),
                                  (long long)threads, render, (long long)host_int(opts, "batch_size"));
    Py_DECREF(kw);
    Py_DECREF(sup);
    Py_DECREF(gs);
    if (!e->pool)
        return pyembed_error(err, CRL_E_INVALID, "envpool: %s", id);
    e->reset = PyObject_GetAttrString(e->pool, "reset");
    e->step = e->reset ? PyObject_GetAttrString(e->pool, "step") : NULL;
    PyObject *d = e->step ? PyObject_CallMethod(e->pool, "describe", NULL) : NULL;
    PyObject *ol, *al, *size;
    long long max_steps = 0;
    if (!d || !PyArg_ParseTuple(d, "OOLO", &ol, &al, &max_steps, &size)) {
        Py_XDECREF(d);
        return pyembed_error(err, CRL_E_UNSUPPORTED, "envpool: %s", id);
    }
    gym_leaf *acts = NULL;
    size_t nact = 0;
    rc = gym_leaves_from_python(ol, &e->obs, &e->nobs, "observation", err);
    if (!rc)
        rc = gym_leaves_from_python(al, &acts, &nact, "action", err);
    if (!rc && size != Py_None) {
        int h = 0, w = 0;
        if (!PyArg_ParseTuple(size, "ii", &h, &w))
            rc = pyembed_error(err, CRL_E_PLUGIN, "envpool: %s: frame size", id);
        e->render_h = h;
        e->render_w = w;
    }
    Py_DECREF(d);
    if (!rc && nact != 1)
        rc = crl_error_set(err, CRL_E_UNSUPPORTED, "envpool: %s: the action space gives %zu leaves; crl takes one", id,
                           nact);
    if (!rc) {
        e->action = acts[0];
        memset(&acts[0], 0, sizeof acts[0]);
    }
    for (size_t i = 0; i < nact; i++)
        gym_leaf_clear(&acts[i]);
    g_free(acts);
    if (rc)
        return rc;
    e->max_steps = max_steps > 0 ? max_steps : 0;
    parts[0] = gym_composite(e->obs, e->nobs, e->num, false, &le);
    parts[1] = parts[0] ? gym_composite(&e->action, 1, e->num, false, &le) : NULL;
    if (!parts[1]) {
        crl_error_prefix(&le, "envpool: %s: ", id);
        return crl_error_pass(err, &le, CRL_E_INVALID);
    }
    return CRL_OK;
}

static int ep_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                   crl_error *err)
{
    if (env)
        *env = NULL;
    if (!specs || !env || !id)
        return crl_error_set(err, CRL_E_INVALID, "envpool: make needs an id and specs and env out-parameters");
    if (!SPECS_HAS(specs, done))
        return crl_error_set(err, CRL_E_ABI, "envpool: the host's crl_env_specs (%u bytes) has no room for the "
                             "required specs; upgrade libcrl", specs->struct_size);
    if (num < 1)
        return crl_error_set(err, CRL_E_INVALID, "envpool: %s: cannot make %lld envs; num_envs must be at least 1", id,
                             (long long)num);
    if (!pyembed_interpreter_ready())
        return crl_error_set(err, CRL_E_PLUGIN, "envpool: the embedded Python is not running; the envpool plugin's "
                             "init starts it: load the plugin through the host");
    const char *ar = NULL;
    if (host_has(opts, "auto_reset") && crl_opts_string(opts, "auto_reset", &ar, NULL) == CRL_OK && ar &&
        !strcmp(ar, "same_step"))
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] auto_reset = same_step: EnvPool resets an ended env at its "
                             "next step (the action is ignored) and gives no final observation with the reset one, "
                             "so it cannot reset in the same step; set auto_reset = next_step (or off)",
                             crl_opts_origin(opts, "auto_reset"), crl_opts_section(opts));
    ep_env *e = g_new0(ep_env, 1);
    e->id = g_strdup(id);
    e->num = num;
    crl_spec *parts[2] = { NULL, NULL };
    pyembed_gil g = pyembed_gil_acquire();
    int rc = make_locked(e, id, opts, parts, err);
    if (rc) {
        free_env(e);
        e = NULL;
    }
    pyembed_gil_release(g);
    int64_t col[2] = { num, 1 };
    crl_error se;
    crl_error_clear(&se);
    crl_spec *reward = !rc ? crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, &se), &se)
                           : NULL;
    crl_spec *done = reward ? crl_env_backend_done_spec(num, &se) : NULL;
    if (!rc && !done)
        rc = crl_error_pass(err, &se, CRL_E_NOMEM);
    if (rc) {
        crl_spec_unref(parts[0]);
        crl_spec_unref(parts[1]);
        crl_spec_unref(reward);
        crl_spec_unref(done);
        ep_close(e);
        return rc;
    }
    specs->observation = parts[0];
    specs->action = parts[1];
    specs->reward = reward;
    specs->done = done;
    if (SPECS_HAS(specs, max_episode_steps))
        specs->max_episode_steps = e->max_steps;
    if (SPECS_HAS(specs, render_width)) {
        specs->render_height = e->render_h;
        specs->render_width = e->render_w;
    }
    *env = e;
    return CRL_OK;
}

/* The buffer under key as pyembed_buffer hands it to the support module. */
static PyObject *buffer(const ep_env *e, crl_td *buffers, const char *key, crl_dtype dt, int ndim,
                        const int64_t *shape, int *rc, crl_error *err)
{
    return pyembed_buffer(buffers, "envpool", e->id, e->num, key, dt, ndim, shape, rc, err);
}

static int bind_locked(ep_env *e, crl_td *buffers, crl_error *err)
{
    int rc = CRL_OK;
    int64_t one = 1;
    PyObject *obs = PyList_New((Py_ssize_t)e->nobs);
    if (!obs)
        return pyembed_error(err, CRL_E_NOMEM, "envpool: %s: bind", e->id);
    for (size_t i = 0; i < e->nobs && !rc; i++) {
        gym_leaf *l = &e->obs[i];
        PyObject *b = buffer(e, buffers, l->key, l->dt, l->ndim, l->shape, &rc, err);
        PyObject *path = b ? PyTuple_New(l->depth) : NULL;
        for (int d = 0; path && d < l->depth; d++) {
            Py_INCREF(l->path[d]);
            PyTuple_SET_ITEM(path, d, l->path[d]);
        }
        PyObject *item = path ? Py_BuildValue("(OOOO)", path, PyTuple_GET_ITEM(b, 0), PyTuple_GET_ITEM(b, 1),
                                              PyTuple_GET_ITEM(b, 2)) : NULL;
        Py_XDECREF(path);
        Py_XDECREF(b);
        if (!item && !rc)
            rc = pyembed_error(err, CRL_E_NOMEM, "envpool: %s: bind", e->id);
        if (item)
            PyList_SET_ITEM(obs, (Py_ssize_t)i, item);
    }
    gym_leaf *a = &e->action;
    PyObject *act = buffer(e, buffers, a->key, a->dt, a->ndim, a->shape, &rc, err);
    PyObject *rew = buffer(e, buffers, "reward", CRL_F32, 1, &one, &rc, err);
    PyObject *term = buffer(e, buffers, "terminated", CRL_BOOL, 1, &one, &rc, err);
    PyObject *trunc = buffer(e, buffers, "truncated", CRL_BOOL, 1, &one, &rc, err);
    if (!rc) {
        PyObject *r = PyObject_CallMethod(e->pool, "bind", "OOOOO", obs, act, rew, term, trunc);
        if (!r)
            rc = pyembed_error(err, CRL_E_PLUGIN, "envpool: %s: bind", e->id);
        Py_XDECREF(r);
    }
    Py_DECREF(obs);
    Py_XDECREF(act);
    Py_XDECREF(rew);
    Py_XDECREF(term);
    Py_XDECREF(trunc);
    return rc;
}

static int ep_bind(void *env, crl_td *buffers, crl_error *err)
{
    ep_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "envpool: bind needs an env and a buffer TensorDict");
    pyembed_gil g = pyembed_gil_acquire();
    int rc = bind_locked(e, buffers, err);
    pyembed_gil_release(g);
    if (!rc)
        e->bound = true;
    return rc;
}

static int ep_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    ep_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "envpool: reset needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "envpool: %s: reset before bind; bind the buffers first", e->id);
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "envpool: %s: reset from state: EnvPool envs declare no state "
                             "spec, so they cannot start from a given state", e->id);
    pyembed_gil g = pyembed_gil_acquire();
    int rc = CRL_OK;
    PyObject *m = mask ? PyBytes_FromStringAndSize((const char *)mask, (Py_ssize_t)e->num) : Py_NewRef(Py_None);
    PyObject *s = seeds ? PyLong_FromUnsignedLongLong(seeds[0]) : Py_NewRef(Py_None);
    PyObject *r = m && s ? PyObject_CallFunctionObjArgs(e->reset, m, s, NULL) : NULL;
    if (!r)
        rc = pyembed_error(err, CRL_E_RUNTIME, "envpool: %s: reset", e->id);
    Py_XDECREF(r);
    Py_XDECREF(m);
    Py_XDECREF(s);
    pyembed_gil_release(g);
    return rc;
}

static int ep_step(void *env, crl_error *err)
{
    ep_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "envpool: step needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "envpool: %s: step before bind; bind the buffers first", e->id);
    pyembed_gil g = pyembed_gil_acquire();
    PyObject *r = PyObject_CallNoArgs(e->step);
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "envpool: %s: step", e->id);
    Py_XDECREF(r);
    pyembed_gil_release(g);
    return rc;
}

static int ep_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    ep_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "envpool: render needs an env");
    if (i < 0 || i >= e->num)
        return crl_error_set(err, CRL_E_RANGE, "envpool: %s: render: env %lld is not in 0..%lld", e->id, (long long)i,
                             (long long)(e->num - 1));
    if (!rgb || !e->render_h)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "envpool: %s: render: make declared no frame size; set "
                             "from_pixels = true or kwargs.render_mode = rgb_array", e->id);
    pyembed_gil g = pyembed_gil_acquire();
    size_t bytes = (size_t)e->render_h * (size_t)e->render_w * 3;
    PyObject *mv = PyMemoryView_FromMemory((char *)rgb, (Py_ssize_t)bytes, PyBUF_WRITE);
    PyObject *r = mv ? PyObject_CallMethod(e->pool, "render", "LO", (long long)i, mv) : NULL;
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "envpool: %s: render: env %lld", e->id, (long long)i);
    Py_XDECREF(r);
    Py_XDECREF(mv);
    pyembed_gil_release(g);
    return rc;
}

/* ---- EnvPool's async mode (batch_size < num_envs, executor = inline) ---------------------------- */

static int ep_async_reset(void *env, const uint64_t *seeds, crl_error *err)
{
    ep_env *e = env;
    if (!e || !e->bound)
        return crl_error_set(err, CRL_E_INVALID, "envpool: async_reset needs a bound env");
    pyembed_gil g = pyembed_gil_acquire();
    PyObject *s = seeds ? PyLong_FromUnsignedLongLong(seeds[0]) : Py_NewRef(Py_None);
    PyObject *r = s ? PyObject_CallMethod(e->pool, "async_reset", "O", s) : NULL;
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "envpool: %s: async_reset", e->id);
    Py_XDECREF(r);
    Py_XDECREF(s);
    pyembed_gil_release(g);
    return rc;
}

static int ep_send(void *env, const int64_t *ids, const bool *ended, int64_t k, crl_error *err)
{
    ep_env *e = env;
    if (!e || !e->bound || !ids || k < 1)
        return crl_error_set(err, CRL_E_INVALID, "envpool: send needs a bound env and env ids");
    pyembed_gil g = pyembed_gil_acquire();
    PyObject *pi = PyBytes_FromStringAndSize((const char *)ids, (Py_ssize_t)(sizeof(int64_t) * (size_t)k));
    PyObject *pe_ = ended ? PyBytes_FromStringAndSize((const char *)ended, (Py_ssize_t)k) : Py_NewRef(Py_None);
    PyObject *r = pi && pe_ ? PyObject_CallMethod(e->pool, "send", "OO", pi, pe_) : NULL;
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "envpool: %s: send", e->id);
    Py_XDECREF(r);
    Py_XDECREF(pi);
    Py_XDECREF(pe_);
    pyembed_gil_release(g);
    return rc;
}

static int ep_recv(void *env, int64_t batch, int64_t *ids, crl_error *err)
{
    ep_env *e = env;
    if (!e || !e->bound || !ids || batch < 1)
        return crl_error_set(err, CRL_E_INVALID, "envpool: recv needs a bound env and room for the env ids");
    pyembed_gil g = pyembed_gil_acquire();
    PyObject *mv = PyMemoryView_FromMemory((char *)ids, (Py_ssize_t)(sizeof(int64_t) * (size_t)batch), PyBUF_WRITE);
    PyObject *r = mv ? PyObject_CallMethod(e->pool, "recv", "O", mv) : NULL;
    int rc = r ? CRL_OK : pyembed_error(err, CRL_E_RUNTIME, "envpool: %s: recv", e->id);
    Py_XDECREF(r);
    Py_XDECREF(mv);
    pyembed_gil_release(g);
    return rc;
}

static const crl_env_ops ep_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = ep_list,
    .make = ep_make,
    .bind = ep_bind,
    .reset = ep_reset,
    .step = ep_step,
    .render = ep_render,
    .close = ep_close,
    .async_reset = ep_async_reset,
    .send = ep_send,
    .recv = ep_recv,
};

static const crl_component ep_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "envpool",
    "EnvPool (sail-sg/envpool) in embedded CPython, as TorchRL's MultiThreadedEnv: id = any of "
    "envpool.list_all_envs(); one pool of num_envs envs per instance",
    ep_options,
    &ep_ops,
};

static int ep_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    int rc = pyembed_plugin_init(host, "envpool", section, err);
    if (rc)
        return rc;
    ep_host = host;
    return crl_host_register(host, &ep_component, err);
}

static void ep_fini(void)
{
    ep_host = NULL;
}

CRL_PLUGIN_DEFINE(envpool, "envpool", PACKAGE_VERSION, "MIT",
                  "EnvPool through embedded CPython: batched C++ envs, rows placed by info['env_id']",
                  pyembed_plugin_options, ep_init, ep_fini)
