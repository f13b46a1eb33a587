/* The gym plugin: registers env/gym, a crl_env_ops backend over Gymnasium / gym envs in embedded CPython. */
#include "config.h"
#include "gym.h"
#include "pyembed_kwargs.h"
#include "pyembed_plugin.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

/* The Python half (gym_support.py), compiled in: gym_support_source[]. */
#include "gym_support.h"

#define SUPPORT_NAME "_crl_gym_1"

crl_host *gym_host;

/* ---- options ------------------------------------------------------------- */

/* The component's options, in [env] next to the host's own (backend, id,
 * num_envs, frame_skip, from_pixels, pixels_only, max_episode_steps, ...). */
static const crl_option gym_options[] = {
    { "entry_point", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "package.module:Class: build this class (or call this function) directly, without any registry; id is then "
      "only a label" },
    { "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL,
      "kwargs.NAME = VALUE: keyword arguments of gymnasium.make / gym.make / the entry point; VALUE is read as a "
      "Python literal (ast.literal_eval), else taken as a string" },
    { "categorical_action_encoding", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "a Discrete action space as Categorical int64 [num] (true) or OneHot int64 [num, n] (false, TorchRL "
      "GymEnv's default), a 1-D MultiDiscrete one as MultiCategorical [num, k] (true) or MultiOneHot int64 "
      "[num, sum(nvec)] (false); Discrete observations are always Categorical" },
    { "info_keys", CRL_OPT_LIST, 0, NULL, 0, 0, NULL,
      "info entries to output next to the observation, typed by the first reset's info (float: float32 [1], "
      "int: int64 [1], bool: bool [1], numpy values: their dtype and shape); a '.' in a name becomes '_'" },
    { "render_height", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 65536, NULL,
      "height of the frames render() gives; 0: learn it from one reset and render() inside make when frames are "
      "wanted (from_pixels, or kwargs.render_mode = rgb_array)" },
    { "render_width", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 65536, NULL,
      "width of the frames render() gives; 0: as render_height" },
    CRL_OPTIONS_END
};

/* ---- helpers -------------------------------------------------------------- */

#define SPECS_HAS(specs, member) \
    ((specs)->struct_size >= offsetof(crl_env_specs, member) + sizeof((specs)->member))

static const char *const *gym_list(void)
{
    return NULL; /* any id: gymnasium.make (or the entry point) judges */
}

/* Drop every Python reference and the memory of e (GIL held). */
static void free_env(gym_env *e)
{
    if (!e)
        return;
    for (int64_t i = 0; e->envs && i < e->num; i++) {
        gym_one *o = &e->envs[i];
        Py_XDECREF(o->action);
        Py_XDECREF(o->step);
        Py_XDECREF(o->reset);
        Py_XDECREF(o->seed);
        Py_XDECREF(o->render);
        Py_XDECREF(o->env);
        g_free(o->staging);
    }
    g_free(e->envs);
    for (size_t i = 0; i < e->nobs; i++)
        gym_leaf_clear(&e->obs[i]);
    g_free(e->obs);
    for (size_t i = 0; i < e->ninfo; i++)
        gym_leaf_clear(&e->info[i]);
    g_free(e->info);
    gym_leaf_clear(&e->action);
    for (size_t i = 0; i < e->nacts; i++)
        gym_leaf_clear(&e->acts[i]);
    g_free(e->acts);
    Py_XDECREF(e->composer);
    Py_XDECREF(e->support);
    Py_XDECREF(e->cast);
    Py_XDECREF(e->seed_kw);
    Py_XDECREF(e->timelimit_key);
    Py_XDECREF(e->empty);
    g_free(e->id);
    g_free(e);
}

/* env.close() on every env; a failure is logged, never fatal (GIL held). */
static void close_envs(gym_env *e)
{
    for (int64_t i = 0; e->envs && i < e->num; i++) {
        PyObject *env = e->envs[i].env;
        PyObject *close = env ? PyObject_GetAttrString(env, "close") : NULL;
        if (!close) {
            PyErr_Clear(); /* nothing made, or no close(): nothing to do */
            continue;
        }
        PyObject *r = PyObject_CallNoArgs(close);
        Py_DECREF(close);
        if (!r) {
            char *why = pyembed_error_brief();
            crl_host_log(gym_host, CRL_LOG_WARNING, "%s: env %lld: close() raised %s (ignored)", e->id, (long long)i,
                         why);
            g_free(why);
        }
        Py_XDECREF(r);
    }
}

static void gym_close(void *env)
{
    gym_env *e = env;
    if (!e)
        return;
    if (!pyembed_interpreter_ready()) {
        g_free(e->id);
        g_free(e);
        return;
    }
    pyembed_gil g = pyembed_gil_acquire();
    close_envs(e);
    free_env(e);
    pyembed_gil_release(g);
}

/* The kwargs.NAME options as a dict of Python values, and whether they set render_mode (to "rgb_array"). */
static PyObject *make_kwargs(const crl_opts *opts, bool *has_render_mode, bool *render_rgb, crl_error *err)
{
    PyObject *kw = pyembed_kwargs(opts, "gym", err);
    PyObject *mode = kw ? PyDict_GetItemString(kw, "render_mode") : NULL;
    const char *text = mode && PyUnicode_Check(mode) ? PyUnicode_AsUTF8(mode) : NULL;
    PyErr_Clear();
    *has_render_mode = mode != NULL;
    *render_rgb = text && !strcmp(text, "rgb_array");
    return kw;
}

/* Read an option the host's [env] table declares, when that table is
 * part of opts (a bare backend test may build opts from ours alone). */
static bool host_bool(const crl_opts *opts, const char *name)
{
    bool v = false;
    if (opts && crl_opts_origin(opts, name) && crl_opts_bool(opts, name, &v, NULL) != CRL_OK)
        v = false;
    return v;
}

static int64_t host_int(const crl_opts *opts, const char *name)
{
    int64_t v = 0;
    if (opts && crl_opts_origin(opts, name) && crl_opts_is_set(opts, name) &&
        crl_opts_int(opts, name, &v, NULL) != CRL_OK)
        v = 0;
    return v;
}

/* Bind env i's methods (step, reset, seed, render). */
static int bind_methods(gym_env *e, int64_t i, bool want_render, crl_error *err)
{
    gym_one *o = &e->envs[i];
    PyObject *m = PyObject_CallMethod(e->support, "methods", "O", o->env);
    if (!m)
        return pyembed_error(err, CRL_E_INVALID, "gym: %s: env %lld", e->id, (long long)i);
    PyObject *seed;
    int takes_seed = 0;
    if (!PyArg_ParseTuple(m, "OOOp", &o->step, &o->reset, &seed, &takes_seed)) {
        Py_DECREF(m);
        return pyembed_error(err, CRL_E_PLUGIN, "gym: %s: env %lld: methods", e->id, (long long)i);
    }
    Py_INCREF(o->step);
    Py_INCREF(o->reset);
    o->seed = seed == Py_None ? NULL : (Py_INCREF(seed), seed);
    o->reset_seed = takes_seed != 0;
    Py_DECREF(m);
    if (want_render) {
        PyObject *r = PyObject_CallMethod(e->support, "render_call", "O", o->env);
        if (!r)
            return pyembed_error(err, CRL_E_INVALID, "gym: %s: env %lld: render", e->id, (long long)i);
        if (r == Py_None) {
            Py_DECREF(r);
            return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s: the env has no render() method, so it cannot "
                                 "give frames; leave from_pixels off", e->id);
        }
        o->render = r;
    }
    return CRL_OK;
}



/* categorical_action_encoding = false: a Discrete action leaf's buffer row becomes its one-hot [n], a 1-D
 * MultiDiscrete one's the one-hot groups [sum(nvec)]. */
static int onehot_leaf(gym_env *e, gym_leaf *l, bool onehot, crl_error *err)
{
    if (!onehot || (l->kind != GYM_DISCRETE && l->kind != GYM_MULTI_DISCRETE))
        return CRL_OK;
    if (l->kind == GYM_DISCRETE) {
        l->ndim = 1;
        l->shape[0] = l->n;
        l->numel = l->n;
        l->row_bytes = (size_t)l->n * sizeof(int64_t);
        return CRL_OK;
    }
    if (l->vndim != 1)
        return crl_error_set(err, CRL_E_UNSUPPORTED,
                             "gym: %s: categorical_action_encoding = false one-hot encodes a 1-D MultiDiscrete "
                             "action space, and '%s' has %d dims; set categorical_action_encoding = true",
                             e->id, l->key, l->vndim);
    int64_t width = 0;
    for (size_t j = 0; j < l->k; j++)
        width += l->nvec[j];
    /* numel and row_bytes stay the env's value (k entries); the buffer row is the one-hot groups. */
    l->oh_width = width;
    l->ndim = 1;
    l->shape[0] = width;
    return CRL_OK;
}

typedef struct make_args {
    const char *entry_point;
    bool onehot;
    size_t ninfo_keys;
    const char *const *info_keys;
    int64_t render_h, render_w;
    bool from_pixels;
    int64_t max_episode_steps;
} make_args;

static int read_options(const crl_opts *opts, make_args *a, crl_error *err)
{
    memset(a, 0, sizeof *a);
    if (!opts)
        return CRL_OK;
    int rc = CRL_OK;
    if (crl_opts_is_set(opts, "entry_point"))
        rc = crl_opts_string(opts, "entry_point", &a->entry_point, err);
    bool categorical = false;
    if (!rc)
        rc = crl_opts_bool(opts, "categorical_action_encoding", &categorical, err);
    a->onehot = !categorical;
    if (!rc && crl_opts_is_set(opts, "info_keys"))
        rc = crl_opts_list(opts, "info_keys", &a->ninfo_keys, &a->info_keys, err);
    if (!rc)
        rc = crl_opts_int(opts, "render_height", &a->render_h, err);
    if (!rc)
        rc = crl_opts_int(opts, "render_width", &a->render_w, err);
    if (rc)
        return rc;
    if ((a->render_h > 0) != (a->render_w > 0)) {
        const char *missing = a->render_h > 0 ? "render_width" : "render_height";
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s is set but %s is not; give both (or neither, to learn the "
                             "frame size from the env)",
                             crl_opts_origin(opts, a->render_h > 0 ? "render_height" : "render_width"),
                             crl_opts_section(opts), a->render_h > 0 ? "render_height" : "render_width", missing);
    }
    a->from_pixels = host_bool(opts, "from_pixels");
    a->max_episode_steps = host_int(opts, "max_episode_steps");
    return CRL_OK;
}

/* Everything make does once the GIL is held; e is freed by the caller on
 * failure. */
static int make_locked(gym_env *e, const char *id, const crl_opts *opts, const make_args *a, crl_spec **specs_out,
                       crl_error *err)
{
    crl_spec **obs_spec = &specs_out[0], **act_spec = &specs_out[1], **info_spec = &specs_out[2];
    crl_error le;   /* for the calls that return NULL on failure */
    crl_error_clear(&le);
    e->support = pyembed_source_module(SUPPORT_NAME, gym_support_source, &le);
    if (!e->support)
        return crl_error_pass(err, &le, CRL_E_PLUGIN);
    PyObject *np = PyObject_CallMethod(e->support, "numpy", NULL);
    if (!np)
        return pyembed_error(err, CRL_E_PLUGIN, "gym");
    Py_DECREF(np);
    e->cast = PyObject_GetAttrString(e->support, "cast");
    e->seed_kw = PyUnicode_InternFromString("seed");
    e->timelimit_key = PyUnicode_InternFromString("TimeLimit.truncated");
    e->empty = PyTuple_New(0);
    if (!e->cast || !e->seed_kw || !e->timelimit_key || !e->empty)
        return pyembed_error(err, CRL_E_PLUGIN, "gym: %s", e->id);

    bool has_render_mode = false, render_rgb = false;
    PyObject *kwargs = make_kwargs(opts, &has_render_mode, &render_rgb, &le);
    if (!kwargs)
        return crl_error_pass(err, &le, CRL_E_CONFIG);
    bool sized = a->render_h > 0;
    bool want_render = a->from_pixels || sized || render_rgb;
    const char *render_mode = (a->from_pixels || sized) && !has_render_mode ? "rgb_array" : NULL;
    int rc = CRL_OK;
    for (int64_t i = 0; i < e->num && !rc; i++) {
        PyObject *made = PyObject_CallMethod(e->support, "make", "szOLz", id, a->entry_point, kwargs,
                                             (long long)a->max_episode_steps, render_mode);
        PyObject *env = NULL;
        const char *how = NULL;
        if (!made || !PyArg_ParseTuple(made, "Os", &env, &how)) {
            rc = pyembed_error(err, CRL_E_INVALID, "gym: %s", e->id);
        } else {
            Py_INCREF(env);
            e->envs[i].env = env;
            rc = bind_methods(e, i, want_render, err);
        }
        Py_XDECREF(made);
    }
    Py_DECREF(kwargs);
    if (rc)
        return rc;

    /* Spaces of env 0 (every env of the batch is made alike). */
    PyObject *env0 = e->envs[0].env;
    PyObject *osp = PyObject_GetAttrString(env0, "observation_space");
    PyObject *asp = osp ? PyObject_GetAttrString(env0, "action_space") : NULL;
    if (!asp) {
        Py_XDECREF(osp);
        return pyembed_error(err, CRL_E_INVALID, "gym: %s: the env has no observation_space/action_space", e->id);
    }
    PyObject *ol = PyObject_CallMethod(e->support, "describe", "Os", osp, "observation");
    PyObject *al = ol ? PyObject_CallMethod(e->support, "describe", "Os", asp, "action") : NULL;
    PyObject *t2 = al ? PyObject_CallMethod(e->support, "is_tuple2", "O", osp) : NULL;
    e->tuple2 = t2 && PyObject_IsTrue(t2) == 1;
    Py_XDECREF(t2);
    Py_DECREF(osp);
    if (!al) {
        Py_DECREF(asp);
        Py_XDECREF(ol);
        return pyembed_error(err, CRL_E_UNSUPPORTED, "gym: %s", e->id);
    }
    gym_leaf *acts = NULL;
    size_t nact = 0;
    rc = gym_leaves_from_python(ol, &e->obs, &e->nobs, "observation", err);
    if (!rc)
        rc = gym_leaves_from_python(al, &acts, &nact, "action", err);
    Py_DECREF(ol);
    Py_DECREF(al);
    /* A Dict / Tuple space's leaves are keyed action.KEY; a single leaf is "action". */
    bool composite = !rc && nact > 0 && strcmp(acts[0].key, "action") != 0;
    if (!rc && composite) {
        e->acts = acts;
        e->nacts = nact;
        acts = NULL;
        nact = 0;
        e->composer = PyObject_CallMethod(e->support, "ActionComposer", "OO", asp, a->onehot ? Py_True : Py_False);
        if (!e->composer)
            rc = pyembed_error(err, CRL_E_PLUGIN, "gym: %s: the action composer", e->id);
    } else if (!rc) {
        e->action = acts[0];
        memset(&acts[0], 0, sizeof acts[0]);
    }
    Py_DECREF(asp);
    for (size_t i = 0; i < nact; i++)
        gym_leaf_clear(&acts[i]);
    g_free(acts);
    if (rc)
        return rc;
    if (composite) {
        e->onehot = a->onehot;
        for (size_t j = 0; j < e->nacts && !rc; j++)
            rc = onehot_leaf(e, &e->acts[j], a->onehot, err);
    } else {
        e->onehot = a->onehot && (e->action.kind == GYM_DISCRETE || e->action.kind == GYM_MULTI_DISCRETE);
        rc = onehot_leaf(e, &e->action, e->onehot, err);
    }
    if (rc)
        return rc;

    /* One reset (and render) of env 0 when make must learn the info types
     * or the frame size; the host seeds every env at its first reset. */
    bool probe_render = want_render && !sized;
    if (a->ninfo_keys || probe_render) {
        PyObject *res = PyObject_CallMethod(e->support, "probe", "OOOO", env0,
                                            probe_render ? e->envs[0].render : Py_None, e->tuple2 ? Py_True : Py_False,
                                            a->ninfo_keys ? Py_True : Py_False);
        PyObject *info = NULL, *size = NULL;
        if (!res || !PyArg_ParseTuple(res, "OO", &info, &size)) {
            Py_XDECREF(res);
            return pyembed_error(err, CRL_E_RUNTIME, "gym: %s: make: the first reset%s", e->id,
                                 probe_render ? " and render()" : "");
        }
        if (size != Py_None) {
            int h = 0, w = 0;
            if (!PyArg_ParseTuple(size, "ii", &h, &w)) {
                Py_DECREF(res);
                return pyembed_error(err, CRL_E_PLUGIN, "gym: %s: frame size", e->id);
            }
            e->render_h = h;
            e->render_w = w;
        }
        if (a->ninfo_keys) {
            PyObject *keys = PyList_New((Py_ssize_t)a->ninfo_keys);
            for (size_t k = 0; keys && k < a->ninfo_keys; k++) {
                PyObject *s = PyUnicode_FromString(a->info_keys[k]);
                if (!s) {
                    Py_CLEAR(keys);
                    break;
                }
                PyList_SET_ITEM(keys, (Py_ssize_t)k, s);
            }
            PyObject *il = keys ? PyObject_CallMethod(e->support, "info_leaves", "OO", info, keys) : NULL;
            Py_XDECREF(keys);
            if (!il) {
                Py_DECREF(res);
                return pyembed_error(err, CRL_E_INVALID, "gym: %s: [%s] info_keys", e->id,
                                     opts ? crl_opts_section(opts) : "env");
            }
            rc = gym_leaves_from_python(il, &e->info, &e->ninfo, "info", err);
            Py_DECREF(il);
        }
        Py_DECREF(res);
        if (rc)
            return rc;
    }
    if (sized) {
        e->render_h = (int32_t)a->render_h;
        e->render_w = (int32_t)a->render_w;
    }
    PyObject *ms = PyObject_CallMethod(e->support, "max_steps", "O", env0);
    e->max_steps = ms ? PyLong_AsLongLong(ms) : 0;
    Py_XDECREF(ms);
    PyErr_Clear();
    if (e->max_steps < 0)
        e->max_steps = 0;

    /* Info keys may not collide with observation keys. */
    for (size_t i = 0; i < e->ninfo; i++)
        for (size_t j = 0; j < e->nobs; j++)
            if (!strcmp(e->info[i].key, e->obs[j].key))
                return crl_error_set(err, CRL_E_EXISTS, "gym: %s: info_keys: '%s' is an observation key too; leave it "
                                     "out of info_keys", e->id, e->info[i].key);

    *obs_spec = gym_composite(e->obs, e->nobs, e->num, false, &le);
    *act_spec = !*obs_spec ? NULL
                : e->composer ? gym_composite(e->acts, e->nacts, e->num, e->onehot, &le)
                : gym_composite(&e->action, 1, e->num, e->onehot, &le);
    *info_spec = *act_spec && e->ninfo ? gym_composite(e->info, e->ninfo, e->num, false, &le) : NULL;
    if (!*act_spec || (e->ninfo && !*info_spec)) {
        crl_error_prefix(&le, "gym: %s: ", e->id);
        return crl_error_pass(err, &le, CRL_E_INVALID);
    }
    return CRL_OK;
}

static int gym_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                    crl_error *err)
{
    if (env)
        *env = NULL;
    if (!specs || !env || !id)
        return crl_error_set(err, CRL_E_INVALID, "gym: make needs an id and specs and env out-parameters");
    if (!SPECS_HAS(specs, done))
        return crl_error_set(err, CRL_E_ABI, "gym: the host's crl_env_specs (%u bytes) has no room for the required "
                             "specs; upgrade libcrl", specs->struct_size);
    if (num < 1)
        return crl_error_set(err, CRL_E_INVALID, "gym: %s: cannot make %lld envs; num_envs must be at least 1", id,
                             (long long)num);
    if (!pyembed_interpreter_ready())
        return crl_error_set(err, CRL_E_PLUGIN, "gym: the embedded Python is not running; the gym plugin's init "
                             "starts it: load the plugin through the host");
    make_args a;
    int rc = read_options(opts, &a, err);
    if (rc)
        return rc;
    gym_env *e = g_new0(gym_env, 1);
    e->num = num;
    e->id = a.entry_point ? g_strdup_printf("%s (entry_point %s)", id, a.entry_point) : g_strdup(id);
    e->envs = g_new0(gym_one, (gsize)num);
    crl_spec *parts[3] = { NULL, NULL, NULL };
    pyembed_gil g = pyembed_gil_acquire();
    rc = make_locked(e, id, opts, &a, parts, err);
    if (rc) {
        close_envs(e);
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
        crl_spec_unref(parts[2]);
        crl_spec_unref(reward);
        crl_spec_unref(done);
        if (e)
            gym_close(e);
        return rc;
    }
    specs->observation = parts[0];
    specs->action = parts[1];
    specs->reward = reward;
    specs->done = done;
    if (SPECS_HAS(specs, info))
        specs->info = parts[2];
    else
        crl_spec_unref(parts[2]);
    if (SPECS_HAS(specs, max_episode_steps))
        specs->max_episode_steps = e->max_steps;
    if (SPECS_HAS(specs, render_width)) {
        specs->render_height = e->render_h;
        specs->render_width = e->render_w;
    }
    *env = e;
    return CRL_OK;
}

/* ---- bind ------------------------------------------------------------------- */

/* The buffer under key: dtype, [num] + shape, contiguous cpu. */
static void *buffer(const gym_env *e, crl_td *buffers, const char *key, crl_dtype dt, int ndim, const int64_t *shape,
                    int *rc, crl_error *err)
{
    if (*rc)
        return NULL;
    crl_tensor *t = crl_td_get(buffers, key);
    if (!t) {
        *rc = crl_error_set(err, CRL_E_NOT_FOUND, "gym: %s: bind: no '%s' buffer; the host must allocate one per spec "
                            "leaf", e->id, key);
        return NULL;
    }
    if (crl_tensor_dtype(t) != dt) {
        *rc = crl_error_set(err, CRL_E_DTYPE, "gym: %s: bind: buffer '%s' is %s, expected %s", e->id, key,
                            crl_dtype_name(crl_tensor_dtype(t)), crl_dtype_name(dt));
        return NULL;
    }
    const int64_t *ts = crl_tensor_shape(t);
    bool same = crl_tensor_ndim(t) == ndim + 1 && ts[0] == e->num;
    for (int d = 0; same && d < ndim; d++)
        same = ts[d + 1] == shape[d];
    if (!same) {
        char *got = crl_shape_repr(crl_tensor_ndim(t), ts);
        *rc = crl_error_set(err, CRL_E_SHAPE, "gym: %s: bind: buffer '%s' has shape %s, which is not the spec's", e->id,
                            key, got ? got : "?");
        crl_free(got);
        return NULL;
    }
    if (crl_tensor_device(t).type != CRL_DEVICE_CPU || !crl_tensor_is_contiguous(t)) {
        *rc = crl_error_set(err, CRL_E_INVALID, "gym: %s: bind: buffer '%s' must be a contiguous cpu tensor", e->id,
                            key);
        return NULL;
    }
    return crl_tensor_data(t);
}

/* One numpy array per env over its action row (or its staging row), made
 * here once and handed to step() every time (GIL held). */
static int make_action_views(gym_env *e, crl_error *err)
{
    gym_leaf *a = &e->action;
    if (e->composer || a->kind == GYM_DISCRETE)
        return CRL_OK;
    PyObject *shape = PyTuple_New(a->vndim);
    for (int d = 0; shape && d < a->vndim; d++) {
        PyObject *v = PyLong_FromSsize_t(a->vshape[d]);
        if (!v) {
            Py_CLEAR(shape);
            break;
        }
        PyTuple_SET_ITEM(shape, d, v);
    }
    if (!shape)
        return pyembed_error(err, CRL_E_NOMEM, "gym: %s: bind", e->id);
    int rc = CRL_OK;
    for (int64_t i = 0; i < e->num && !rc; i++) {
        gym_one *o = &e->envs[i];
        Py_CLEAR(o->action);
        uint8_t *mem = a->buf + (size_t)i * a->row_bytes;
        if (a->start || a->oh_width) {
            if (!o->staging)
                o->staging = g_malloc0(a->row_bytes);
            mem = o->staging;
        }
        PyObject *mv = PyMemoryView_FromMemory((char *)mem, (Py_ssize_t)a->row_bytes, PyBUF_WRITE);
        o->action = mv ? PyObject_CallMethod(e->support, "action_view", "OOO", mv, a->space_dtype, shape) : NULL;
        Py_XDECREF(mv);
        if (!o->action)
            rc = pyembed_error(err, CRL_E_PLUGIN, "gym: %s: bind: the action array of env %lld", e->id, (long long)i);
    }
    Py_DECREF(shape);
    return rc;
}

/* Hand the composer a numpy view over each action leaf's [num, ...] buffer (GIL held). */
static int bind_composer(gym_env *e, crl_error *err)
{
    PyObject *list = PyList_New((Py_ssize_t)e->nacts);
    int rc = list ? CRL_OK : pyembed_error(err, CRL_E_NOMEM, "gym: %s: bind", e->id);
    for (size_t j = 0; j < e->nacts && !rc; j++) {
        gym_leaf *l = &e->acts[j];
        crl_dtype dt = l->kind == GYM_DISCRETE || l->oh_width ? CRL_I64 : l->dt;
        PyObject *path = PyTuple_New(l->depth), *shape = PyTuple_New(l->ndim + 1);
        for (int d = 0; path && d < l->depth; d++) {
            Py_INCREF(l->path[d]);
            PyTuple_SET_ITEM(path, d, l->path[d]);
        }
        for (int d = 0; shape && d <= l->ndim; d++)
            PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(d ? (long long)l->shape[d - 1] : (long long)e->num));
        size_t bytes = (size_t)e->num;
        for (int d = 0; d < l->ndim; d++)
            bytes *= (size_t)l->shape[d];
        bytes *= crl_dtype_size(dt);
        PyObject *mv = path && shape ? PyMemoryView_FromMemory((char *)l->buf, (Py_ssize_t)bytes, PyBUF_WRITE) : NULL;
        PyObject *item = mv ? Py_BuildValue("(OOsO)", path, mv, crl_dtype_name(dt), shape) : NULL;
        Py_XDECREF(mv);
        Py_XDECREF(path);
        Py_XDECREF(shape);
        if (!item)
            rc = pyembed_error(err, CRL_E_NOMEM, "gym: %s: bind '%s'", e->id, l->key);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)j, item);
    }
    PyObject *r = !rc ? PyObject_CallMethod(e->composer, "bind", "O", list) : NULL;
    if (!rc && !r)
        rc = pyembed_error(err, CRL_E_PLUGIN, "gym: %s: bind: the action composer", e->id);
    Py_XDECREF(r);
    Py_XDECREF(list);
    return rc;
}

static int gym_bind(void *env, crl_td *buffers, crl_error *err)
{
    gym_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "gym: bind needs an env and a buffer TensorDict");
    int rc = CRL_OK;
    int64_t one = 1;
    for (size_t i = 0; i < e->nobs; i++)
        e->obs[i].buf = buffer(e, buffers, e->obs[i].key, e->obs[i].dt, e->obs[i].ndim, e->obs[i].shape, &rc, err);
    for (size_t i = 0; i < e->ninfo; i++)
        e->info[i].buf = buffer(e, buffers, e->info[i].key, e->info[i].dt, e->info[i].ndim, e->info[i].shape, &rc,
                                err);
    gym_leaf *a = &e->action;
    if (!e->composer)
        a->buf = buffer(e, buffers, a->key, a->kind == GYM_DISCRETE || a->oh_width ? CRL_I64 : a->dt, a->ndim,
                        a->shape, &rc, err);
    for (size_t j = 0; j < e->nacts; j++) {
        gym_leaf *l = &e->acts[j];
        l->buf = buffer(e, buffers, l->key, l->kind == GYM_DISCRETE || l->oh_width ? CRL_I64 : l->dt, l->ndim,
                        l->shape, &rc, err);
    }
    float *reward = buffer(e, buffers, "reward", CRL_F32, 1, &one, &rc, err);
    uint8_t *term = buffer(e, buffers, "terminated", CRL_BOOL, 1, &one, &rc, err);
    uint8_t *trunc = buffer(e, buffers, "truncated", CRL_BOOL, 1, &one, &rc, err);
    if (rc)
        return rc;
    e->reward = reward;
    e->terminated = term;
    e->truncated = trunc;
    pyembed_gil g = pyembed_gil_acquire();
    rc = e->composer ? bind_composer(e, err) : make_action_views(e, err);
    pyembed_gil_release(g);
    if (!rc)
        e->bound = true;
    return rc;
}

/* ---- reset and step ------------------------------------------------------------- */

static int not_bound(const gym_env *e, const char *what, crl_error *err)
{
    return crl_error_set(err, CRL_E_INVALID, "gym: %s: %s before bind; bind the buffers first", e->id, what);
}

/* Write env i's observation leaves from obs and info leaves from info. */
static int write_outputs(gym_env *e, int64_t i, PyObject *obs, PyObject *info, const char *what, crl_error *err)
{
    for (size_t k = 0; k < e->nobs; k++) {
        int rc = gym_write_leaf(e, &e->obs[k], i, obs, what, err);
        if (rc)
            return rc;
    }
    if (!e->ninfo)
        return CRL_OK;
    if (!info || !PyDict_Check(info))
        return crl_error_set(err, CRL_E_RUNTIME, "gym: %s: %s: env %lld: info is a %s, not a dict; info_keys needs a "
                             "dict", e->id, what, (long long)i, info ? Py_TYPE(info)->tp_name : "missing value");
    for (size_t k = 0; k < e->ninfo; k++) {
        int rc = gym_write_leaf(e, &e->info[k], i, info, what, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int reset_one(gym_env *e, int64_t i, const uint64_t *seeds, crl_error *err)
{
    gym_one *o = &e->envs[i];
    PyObject *res = NULL;
    if (seeds && o->reset_seed) {
        PyObject *seed = PyLong_FromUnsignedLongLong(seeds[i]);
        PyObject *kw = seed ? PyDict_New() : NULL;
        if (kw && PyDict_SetItem(kw, e->seed_kw, seed) == 0)
            res = PyObject_Call(o->reset, e->empty, kw);
        Py_XDECREF(kw);
        Py_XDECREF(seed);
    } else {
        if (seeds && o->seed) {
            /* Old gym: env.seed(seed), then reset(). */
            PyObject *r = PyObject_CallFunction(o->seed, "K", (unsigned long long)seeds[i]);
            if (!r)
                return pyembed_error(err, CRL_E_RUNTIME, "gym: %s: reset: env %lld: seed(%llu)", e->id, (long long)i,
                                     (unsigned long long)seeds[i]);
            Py_DECREF(r);
        } else if (seeds && !e->warned_seed) {
            e->warned_seed = true;
            crl_host_log(gym_host, CRL_LOG_WARNING, "%s: the env's reset() takes no seed and it has no seed() method, "
                         "so crl's seeds cannot reach it: its rollouts are not reproducible", e->id);
        }
        res = PyObject_CallNoArgs(o->reset);
    }
    if (!res)
        return pyembed_error(err, CRL_E_RUNTIME, "gym: %s: reset: env %lld", e->id, (long long)i);
    /* Gymnasium's (obs, info) or old gym's obs (see split_reset). */
    PyObject *obs = res, *info = NULL;
    if (PyTuple_CheckExact(res) && PyTuple_GET_SIZE(res) == 2 && PyDict_Check(PyTuple_GET_ITEM(res, 1))) {
        PyObject *first = PyTuple_GET_ITEM(res, 0);
        if (!e->tuple2 || PyTuple_Check(first) || PyList_Check(first)) {
            obs = first;
            info = PyTuple_GET_ITEM(res, 1);
        }
    }
    int rc = CRL_OK;
    if (e->ninfo && !info)
        rc = crl_error_set(err, CRL_E_RUNTIME, "gym: %s: reset: env %lld returned no (obs, info) pair, which info_keys "
                           "needs", e->id, (long long)i);
    else
        rc = write_outputs(e, i, obs, info, "reset", err);
    Py_DECREF(res);
    if (!rc) {
        e->terminated[i] = 0;
        e->truncated[i] = 0;
        o->started = true;
        o->ended = false;
    }
    return rc;
}

static int gym_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    gym_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "gym: reset needs an env");
    if (!e->bound)
        return not_bound(e, "reset", err);
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s: reset from state: gym envs declare no state spec, so "
                             "they cannot start from a given state", e->id);
    pyembed_gil g = pyembed_gil_acquire();
    int rc = CRL_OK;
    for (int64_t i = 0; i < e->num && !rc; i++)
        if (!mask || mask[i])
            rc = reset_one(e, i, seeds, err);
    pyembed_gil_release(g);
    return rc;
}

/* The sequence item k of a tuple or list (borrowed). */
static inline PyObject *seq_item(PyObject *s, Py_ssize_t k)
{
    return PyTuple_Check(s) ? PyTuple_GET_ITEM(s, k) : PyList_GET_ITEM(s, k);
}

static int flag_of(gym_env *e, int64_t i, PyObject *v, const char *name, uint8_t *out, crl_error *err)
{
    int t = PyObject_IsTrue(v);
    if (t < 0)
        return pyembed_error(err, CRL_E_RUNTIME, "gym: %s: step: env %lld: %s is a %s, not a bool", e->id,
                             (long long)i, name, Py_TYPE(v)->tp_name);
    *out = (uint8_t)t;
    return CRL_OK;
}

static int step_one(gym_env *e, int64_t i, crl_error *err)
{
    gym_one *o = &e->envs[i];
    PyObject *arg = gym_action_arg(e, i);
    if (!arg)
        return pyembed_error(err, CRL_E_NOMEM, "gym: %s: step: env %lld: the action", e->id, (long long)i);
    PyObject *res = PyObject_CallOneArg(o->step, arg);
    Py_DECREF(arg);
    if (!res)
        return pyembed_error(err, CRL_E_RUNTIME, "gym: %s: step: env %lld", e->id, (long long)i);
    int rc = CRL_OK;
    Py_ssize_t n = PyTuple_Check(res) ? PyTuple_GET_SIZE(res) : PyList_Check(res) ? PyList_GET_SIZE(res) : -1;
    if (n != 5 && n != 4) {
        if (n < 0)
            rc = crl_error_set(err, CRL_E_RUNTIME, "gym: %s: step: env %lld returned %s; expected Gymnasium's (obs, "
                               "reward, terminated, truncated, info) or old gym's (obs, reward, done, info)", e->id,
                               (long long)i, res == Py_None ? "None" : Py_TYPE(res)->tp_name);
        else
            rc = crl_error_set(err, CRL_E_RUNTIME, "gym: %s: step: env %lld returned %zd values; expected Gymnasium's "
                               "5 (obs, reward, terminated, truncated, info) or old gym's 4 (obs, reward, done, info)",
                               e->id, (long long)i, n);
        Py_DECREF(res);
        return rc;
    }
    PyObject *obs = seq_item(res, 0), *rew = seq_item(res, 1), *info = seq_item(res, n - 1);
    double r = PyFloat_AsDouble(rew);
    if (r == -1.0 && PyErr_Occurred())
        rc = pyembed_error(err, CRL_E_RUNTIME, "gym: %s: step: env %lld: the reward is a %s, not a number", e->id,
                           (long long)i, Py_TYPE(rew)->tp_name);
    uint8_t term = 0, trunc = 0;
    if (!rc && n == 5) {
        rc = flag_of(e, i, seq_item(res, 2), "terminated", &term, err);
        if (!rc)
            rc = flag_of(e, i, seq_item(res, 3), "truncated", &trunc, err);
    } else if (!rc) {
        /* Old gym: done, with TimeLimit's truncation in the info. */
        uint8_t done = 0;
        rc = flag_of(e, i, seq_item(res, 2), "done", &done, err);
        PyObject *tl = !rc && PyDict_Check(info) ? PyDict_GetItemWithError(info, e->timelimit_key) : NULL;
        if (!rc && !tl && PyErr_Occurred())
            rc = pyembed_error(err, CRL_E_RUNTIME, "gym: %s: step: env %lld: info", e->id, (long long)i);
        if (!rc && tl)
            rc = flag_of(e, i, tl, "info['TimeLimit.truncated']", &trunc, err);
        trunc = trunc && done;
        term = done && !trunc;
    }
    if (!rc)
        rc = write_outputs(e, i, obs, info, "step", err);
    Py_DECREF(res);
    if (rc)
        return rc;
    e->reward[i] = (float)r;
    e->terminated[i] = term;
    e->truncated[i] = trunc;
    o->ended = term || trunc;
    return CRL_OK;
}

static int gym_step(void *env, crl_error *err)
{
    gym_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "gym: step needs an env");
    if (!e->bound)
        return not_bound(e, "step", err);
    for (int64_t i = 0; i < e->num; i++)
        if (!e->envs[i].started)
            return crl_error_set(err, CRL_E_INVALID, "gym: %s: step before env %lld was ever reset; reset it first",
                                 e->id, (long long)i);
    pyembed_gil g = pyembed_gil_acquire();
    int rc = CRL_OK;
    /* An ended env is not stepped again until its reset: gym envs may
     * refuse (or warn about) steps past the end; its outputs stay as the
     * last step left them, which the host discards. */
    for (int64_t i = 0; i < e->num && !rc; i++)
        if (!e->envs[i].ended)
            rc = step_one(e, i, err);
    pyembed_gil_release(g);
    return rc;
}

static int gym_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    gym_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "gym: render needs an env");
    if (i < 0 || i >= e->num)
        return crl_error_set(err, CRL_E_RANGE, "gym: %s: render: env %lld is not in 0..%lld", e->id, (long long)i,
                             (long long)(e->num - 1));
    if (!rgb)
        return crl_error_set(err, CRL_E_INVALID, "gym: %s: render: no frame buffer", e->id);
    if (!e->render_h || !e->envs[i].render)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "gym: %s: render: make declared no frame size; set "
                             "from_pixels = true or kwargs.render_mode = rgb_array", e->id);
    pyembed_gil g = pyembed_gil_acquire();
    int rc;
    PyObject *frame = PyObject_CallNoArgs(e->envs[i].render);
    if (!frame)
        rc = pyembed_error(err, CRL_E_RUNTIME, "gym: %s: render: env %lld", e->id, (long long)i);
    else
        rc = gym_copy_frame(e, i, frame, rgb, err);
    Py_XDECREF(frame);
    pyembed_gil_release(g);
    return rc;
}

static const crl_env_ops gym_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = gym_list,
    .make = gym_make,
    .bind = gym_bind,
    .reset = gym_reset,
    .step = gym_step,
    .render = gym_render,
    .close = gym_close,
};

static const crl_component gym_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "gym",
    "Gymnasium / gym envs in embedded CPython: id = any registered id (gymnasium.make, else gym.make), or "
    "entry_point = package.module:Class",
    gym_options,
    &gym_ops,
};

static int gym_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    int rc = pyembed_plugin_init(host, "gym", section, err);
    if (rc)
        return rc;
    gym_host = host;
    return crl_host_register(host, &gym_component, err);
}

static void gym_fini(void)
{
    gym_host = NULL;
}

CRL_PLUGIN_DEFINE(gym, "gym", PACKAGE_VERSION, "MIT",
                  "Gymnasium and gym envs through embedded CPython (numpy observations copied once into crl's "
                  "buffers)", pyembed_plugin_options, gym_init, gym_fini)
