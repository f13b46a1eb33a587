/* Check suite for the gym plugin: Gymnasium/gym envs in embedded CPython through the host env API. */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#include "pyenv-fixture.h"

#define PYDIR TEST_SRCDIR "/python"
#define REFERENCE PYDIR "/reference_rollout.py"

/* A temporary directory on python_path holding gym_test_envs.py (below). */
static char *tmpdir;

/* Extra envs only this suite needs: one space per case, the action the
 * env received (as info), how many blocks Python holds.  Written to tmpdir
 * by main(). */
static const char test_envs_py[] =
    "# Extra envs for tests/test_gym.c: one space per case, the action received, a leak probe.\n"
    "import sys\n"
    "import numpy as np\n"
    "from crl_testenvs import spaces\n"
    "\n"
    "class Text:\n"
    "    shape = None\n"
    "    dtype = None\n"
    "\n"
    "CASES = {\n"
    "    'box_elementwise': lambda: spaces.Box(np.array([-1.0, -np.inf, 0.0], np.float32),\n"
    "                                          np.array([1.0, 2.0, np.inf], np.float32), dtype=np.float32),\n"
    "    'box_unbounded': lambda: spaces.Box(-np.inf, np.inf, (2, 3), np.float64),\n"
    "    'box_int': lambda: spaces.Box(0, 255, (2, 2), np.uint8),\n"
    "    'box_scalar': lambda: spaces.Box(-2.0, 2.0, (), np.float32),\n"
    "    'box_uint16': lambda: spaces.Box(0, 1000, (3,), np.uint16),\n"
    "    'box_f16': lambda: spaces.Box(-1.0, 1.0, (2,), np.float16),\n"
    "    'box_uint64': lambda: spaces.Box(0, 10, (2,), np.uint64),\n"
    "    'discrete': lambda: spaces.Discrete(5),\n"
    "    'discrete_start': lambda: spaces.Discrete(4, start=10),\n"
    "    'multi_discrete': lambda: spaces.MultiDiscrete([3, 4, 2]),\n"
    "    'multi_discrete_start': lambda: spaces.MultiDiscrete([3, 4], start=[1, -2]),\n"
    "    'multi_discrete_ragged': lambda: spaces.MultiDiscrete([[2, 3], [4, 5]]),\n"
    "    'multi_discrete_2d': lambda: spaces.MultiDiscrete([[2, 3], [2, 3]]),\n"
    "    'multi_binary': lambda: spaces.MultiBinary(5),\n"
    "    'multi_binary_2d': lambda: spaces.MultiBinary([2, 3]),\n"
    "    'dict': lambda: spaces.Dict({'b': spaces.Discrete(2),\n"
    "                                 'a': spaces.Dict({'x': spaces.Box(-1.0, 1.0, (2,), np.float32)})}),\n"
    "    'tuple': lambda: spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(3))),\n"
    "    'dotted_key': lambda: spaces.Dict({'a.b': spaces.Discrete(2)}),\n"
    "    'reserved_key': lambda: spaces.Dict({'reward': spaces.Discrete(2)}),\n"
    "    'text': Text,\n"
    "}\n"
    "\n"
    "class SpaceEnv:\n"
    "    \"\"\"observation_space = CASES[obs](), action_space = CASES[act](); observations are seeded samples;\n"
    "    info: act (the action received, flat float64), act_id (its id), act_is_int, x.y (1.5).\"\"\"\n"
    "    def __init__(self, obs='box_elementwise', act='discrete'):\n"
    "        self.observation_space = CASES[obs]()\n"
    "        self.action_space = CASES[act]()\n"
    "        size = int(np.prod(self.action_space.shape)) if self.action_space.shape else 1\n"
    "        self._zero = np.zeros(size)\n"
    "    def reset(self, *, seed=None, options=None):\n"
    "        if seed is not None:\n"
    "            self.observation_space.seed(seed)\n"
    "        return self.observation_space.sample(), {'act': self._zero, 'act_id': 0, 'act_is_int': False, 'x.y': 1.5}\n"
    "    def step(self, action):\n"
    "        info = {'act': np.asarray(action, dtype=np.float64).reshape(-1), 'act_id': id(action),\n"
    "                'act_is_int': type(action) is int, 'x.y': 1.5}\n"
    "        return self.observation_space.sample(), 0.0, False, False, info\n"
    "\n"
    "class LeakProbeEnv:\n"
    "    \"\"\"info blocks = sys.getallocatedblocks() at every step.\"\"\"\n"
    "    def __init__(self):\n"
    "        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)\n"
    "        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)\n"
    "    def reset(self, *, seed=None, options=None):\n"
    "        return np.zeros(2, np.float32), {'blocks': sys.getallocatedblocks()}\n"
    "    def step(self, action):\n"
    "        return np.zeros(2, np.float32), 0.0, False, False, {'blocks': sys.getallocatedblocks()}\n"
    "\n"
    "class NoSpacesEnv:\n"
    "    def reset(self):\n"
    "        return 0\n"
    "    def step(self, action):\n"
    "        return 0, 0.0, False, False, {}\n"
    "\n"
    "NOT_CALLABLE = 3\n";

/* ---- fixtures --------------------------------------------------------------- */

#define EXPECT_OK(expr, e)                                                                     \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message,                 \
                      crl_status_name(rc_));                                                   \
    } while (0)

typedef crl_test_pyenv fx;

/* A host with gym loaded ([plugin.gym] python_path = the test envs, the
 * fake gymnasium and gym, tmpdir) and the env of "[env] backend = gym" plus
 * `env_ini`.  Returns the env's status (err holds the message); *stage
 * says what failed (0 config, 1 host, 2 plugin, 3 env).  Most cases read
 * index actions, so categorical_action_encoding = true is added unless
 * env_ini names it (test_onehot_default does, in a comment). */
static int fx_open_at(fx *f, const char *env_ini, int *stage)
{
    char *ini = g_strdup_printf("[plugin.gym]\npython_path = %s, %s/fake_gymnasium, %s/fake_gym, %s\n\n"
                                "[env]\nbackend = gym\n%s\n%s", PYDIR, PYDIR, PYDIR, tmpdir, env_ini,
                                strstr(env_ini, "categorical_action_encoding") ? ""
                                                                              : "categorical_action_encoding = true\n");
    int rc = crl_test_pyenv_open_at(f, ini, (const char *const[]){ "gym", NULL }, stage);
    g_free(ini);
    return rc;
}

static int fx_open_quiet(fx *f, const char *env_ini)
{
    int stage;
    return fx_open_at(f, env_ini, &stage);
}

static int fx_open(fx *f, const char *env_ini)
{
    int stage;
    int rc = fx_open_at(f, env_ini, &stage);
    ck_assert_msg(rc == CRL_OK || stage == 3, "setting up the host failed (stage %d): %s", stage, f->err.message);
    return rc;
}

static void fx_must_open(fx *f, const char *env_ini)
{
    crl_test_pyenv_expect_made(f, fx_open(f, env_ini), env_ini);
}

/* make must fail with `code` and a message holding every needle (NULL-terminated). */
static void expect_make_error(const char *env_ini, int code, const char *const *needles)
{
    fx f;
    crl_test_pyenv_expect_failed(&f, fx_open(&f, env_ini), code, needles);
    crl_test_pyenv_close(&f);
}

static const crl_spec *leaf(const crl_spec *comp, const char *key)
{
    const crl_spec *s = crl_spec_composite_get(comp, key);
    ck_assert_msg(s != NULL, "no spec '%s'", key);
    return s;
}

static void expect_shape(const crl_spec *s, int ndim, const int64_t *shape)
{
    ck_assert_int_eq(crl_spec_ndim(s), ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_int_eq(crl_spec_shape(s)[i], shape[i]);
}

/* ---- the Python reference ------------------------------------------------------ */

/* Runs reference_rollout.py (its main(), in this process: one Python start
 * instead of two) and prints its records flattened along the env's
 * spaces, in crl's terms: "reset T" / "step T REWARD TERM TRUNC", then "obs
 * KEY N V..." (dotted crl keys; Discrete/MultiDiscrete values shifted back by
 * their start) and "info KEY N V..." lines, then "end".  Actions come in as
 * crl gives them (indices, one-hot rows) and reach the script as the env
 * takes them. */
static const char converter_py[] =
    "import contextlib, importlib, io, json, os, sys\n"
    "import numpy as np\n"
    "ref, entry, seed, actions, kwargs = sys.argv[1:6]\n"
    "sys.path[:0] = sys.argv[6:]\n"
    "mod, name = entry.split(':')\n"
    "env = getattr(importlib.import_module(mod), name)(**json.loads(kwargs))\n"
    "def kind(s):\n"
    "    for c in type(s).__mro__:\n"
    "        if c.__name__ in ('Box', 'Discrete', 'MultiDiscrete', 'MultiBinary', 'Dict', 'Tuple'):\n"
    "            return c.__name__\n"
    "def start(s):\n"
    "    return np.broadcast_to(np.asarray(getattr(s, 'start', 0)), np.shape(s.nvec) if kind(s) == 'MultiDiscrete' else ()).ravel()\n"
    "def env_action(s, a):\n"
    "    if kind(s) == 'Dict':\n"
    "        return {k: env_action(sub, a[k]) for k, sub in s.spaces.items()}\n"
    "    if kind(s) == 'Tuple':\n"
    "        return [env_action(sub, a[str(i)]) for i, sub in enumerate(s.spaces)]\n"
    "    if kind(s) == 'Discrete':  # a one-hot row is its argmax\n"
    "        return int(np.argmax(a) if isinstance(a, list) else a) + int(getattr(s, 'start', 0))\n"
    "    if kind(s) == 'MultiDiscrete':\n"
    "        a = np.asarray(a)\n"
    "        if a.shape != np.shape(s.nvec):  # one-hot groups: each group's argmax\n"
    "            a = np.array([np.argmax(g) for g in np.split(a, np.cumsum(s.nvec)[:-1])])\n"
    "        return (a + start(s).reshape(np.shape(s.nvec))).tolist()\n"
    "    return a\n"
    "def num(v):\n"
    "    if isinstance(v, str):\n"
    "        return {'NaN': float('nan'), 'Infinity': float('inf'), '-Infinity': float('-inf')}[v]\n"
    "    return float(v)\n"
    "def flat(v):\n"
    "    if isinstance(v, list):\n"
    "        return [x for item in v for x in flat(item)]\n"
    "    return [num(v)]\n"
    "def walk(s, v, key, out):\n"
    "    k = kind(s)\n"
    "    sub = (key + '.') if key else ''\n"
    "    if k == 'Dict':\n"
    "        for n, sp in s.spaces.items():\n"
    "            walk(sp, v[str(n)], sub + str(n), out)\n"
    "    elif k == 'Tuple':\n"
    "        for i, sp in enumerate(s.spaces):\n"
    "            walk(sp, v[i], sub + str(i), out)\n"
    "    else:\n"
    "        vals = flat(v)\n"
    "        if k in ('Discrete', 'MultiDiscrete'):\n"
    "            vals = [x - float(y) for x, y in zip(vals, start(s))]\n"
    "        out.append((key or 'observation', vals))\n"
    "acts = [env_action(env.action_space, a) for a in json.loads(actions)]\n"
    "sys.path.insert(0, os.path.dirname(ref))\n"
    "import reference_rollout\n"
    "buf = io.StringIO()\n"
    "try:\n"
    "    with contextlib.redirect_stdout(buf):\n"
    "        code = reference_rollout.main([ref, entry, seed, json.dumps(acts), kwargs])\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    "for line in buf.getvalue().splitlines():\n"
    "    r = json.loads(line)\n"
    "    if 'error' in r:\n"
    "        print('error', r['t'], r['phase'], r['error'].replace('\\n', ' '))\n"
    "        continue\n"
    "    if r.get('reset'):\n"
    "        print('reset', r['t'])\n"
    "    else:\n"
    "        print('step', r['t'], repr(num(r['reward'])), int(r['terminated']), int(r['truncated']))\n"
    "    out = []\n"
    "    walk(env.observation_space, r['obs'], '', out)\n"
    "    for k, vals in out:\n"
    "        print('obs', k, len(vals), *map(repr, vals))\n"
    "    for k, v in (r.get('info') or {}).items():\n"
    "        vals = flat(v)\n"
    "        print('info', k.replace('.', '_'), len(vals), *map(repr, vals))\n"
    "    print('end')\n"
    "sys.exit(code)\n";

typedef struct ref_val {
    char *key;
    bool info;
    GArray *v; /* double */
} ref_val;

typedef struct ref_rec {
    bool reset;
    int64_t t;
    double reward;
    int term, trunc;
    GPtrArray *vals; /* ref_val */
} ref_rec;

static void ref_val_free(gpointer p)
{
    ref_val *v = p;
    g_free(v->key);
    g_array_unref(v->v);
    g_free(v);
}

static void ref_rec_free(gpointer p)
{
    ref_rec *r = p;
    g_ptr_array_unref(r->vals);
    g_free(r);
}

/* The reference records of entry_point run from `seed` over `actions`
 * (JSON, crl's values); kwargs_json may be NULL. */
static GPtrArray *reference(const char *entry_point, uint64_t seed, const char *actions, const char *kwargs_json)
{
    char seed_s[32];
    g_snprintf(seed_s, sizeof seed_s, "%" G_GUINT64_FORMAT, (guint64)seed);
    char *argv[] = { (char *)CRL_PYTHON, (char *)"-c", (char *)converter_py, (char *)REFERENCE,
                     (char *)entry_point, seed_s, (char *)actions, (char *)(kwargs_json ? kwargs_json : "{}"),
                     (char *)PYDIR, tmpdir, NULL };
    char *out = NULL, *errout = NULL;
    int status = 0;
    GError *ge = NULL;
    gboolean ran = g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout, &status, &ge);
    ck_assert_msg(ran, "cannot run %s: %s", CRL_PYTHON, ge ? ge->message : "?");
    GPtrArray *recs = g_ptr_array_new_with_free_func(ref_rec_free);
    char **lines = g_strsplit(out, "\n", -1);
    ref_rec *cur = NULL;
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        char **w = g_strsplit(*l, " ", -1);
        if (!strcmp(w[0], "reset") || !strcmp(w[0], "step")) {
            cur = g_new0(ref_rec, 1);
            cur->vals = g_ptr_array_new_with_free_func(ref_val_free);
            cur->reset = !strcmp(w[0], "reset");
            cur->t = g_ascii_strtoll(w[1], NULL, 10);
            if (!cur->reset) {
                cur->reward = g_ascii_strtod(w[2], NULL);
                cur->term = atoi(w[3]);
                cur->trunc = atoi(w[4]);
            }
            g_ptr_array_add(recs, cur);
        } else if ((!strcmp(w[0], "obs") || !strcmp(w[0], "info")) && cur) {
            ref_val *v = g_new0(ref_val, 1);
            v->key = g_strdup(w[1]);
            v->info = w[0][0] == 'i';
            int n = atoi(w[2]);
            v->v = g_array_new(FALSE, FALSE, sizeof(double));
            for (int i = 0; i < n; i++) {
                double d = strtod(w[3 + i], NULL); /* "nan" and "inf" too */
                g_array_append_val(v->v, d);
            }
            g_ptr_array_add(cur->vals, v);
        } else if (!strcmp(w[0], "error")) {
            ck_abort_msg("the reference rollout failed: %s", *l);
        }
        g_strfreev(w);
    }
    g_strfreev(lines);
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "the reference rollout failed: %s", errout);
    ck_assert_msg(recs->len > 0, "the reference rollout printed nothing: %s", errout);
    g_free(out);
    g_free(errout);
    return recs;
}

static bool same_value(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Every obs (and info, when crl outputs it) value of rec equals td's,
 * under prefix ("" or "next."); returns how many info values matched. */
static int compare_rec(const ref_rec *rec, const crl_td *td, const char *prefix, const char *what)
{
    int infos = 0;
    for (guint k = 0; k < rec->vals->len; k++) {
        const ref_val *v = g_ptr_array_index(rec->vals, k);
        char *key = g_strconcat(prefix, v->key, NULL);
        const crl_tensor *t = crl_td_get(td, key);
        if (v->info && !t) {
            g_free(key);
            continue; /* an info entry crl was not asked to output */
        }
        ck_assert_msg(t != NULL, "%s t=%lld: crl has no '%s'", what, (long long)rec->t, key);
        ck_assert_msg(crl_tensor_numel(t) == (int64_t)v->v->len, "%s t=%lld: '%s' has %lld values, Python %u", what,
                      (long long)rec->t, key, (long long)crl_tensor_numel(t), v->v->len);
        for (guint i = 0; i < v->v->len; i++) {
            double a = crl_tensor_flat_get(t, i), b = g_array_index(v->v, double, i);
            ck_assert_msg(same_value(a, b), "%s t=%lld: '%s'[%u]: crl %.17g, Python %.17g", what, (long long)rec->t,
                          key, i, a, b);
        }
        infos += v->info ? (int)v->v->len : 0;
        g_free(key);
    }
    return infos;
}

/* x as (nested) JSON lists along its shape, row-major; a scalar as a number. */
static void json_tensor(GString *s, const crl_tensor *x)
{
    {
        int nd = crl_tensor_ndim(x);
        const int64_t *sh = crl_tensor_shape(x);
        int64_t n = crl_tensor_numel(x);
        bool fl = crl_dtype_is_float(crl_tensor_dtype(x));
        for (int64_t i = 0; i < n; i++) {
            int64_t stride = 1;
            for (int d = nd - 1; d >= 0; d--) {
                stride *= sh[d];
                if (i % stride == 0)
                    g_string_append_c(s, '[');
            }
            double v = crl_tensor_flat_get(x, i);
            if (fl)
                g_string_append_printf(s, "%.9g", v);
            else
                g_string_append_printf(s, "%lld", (long long)v);
            stride = 1;
            for (int d = nd - 1; d >= 0; d--) {
                stride *= sh[d];
                if ((i + 1) % stride == 0)
                    g_string_append_c(s, ']');
            }
            if (i + 1 < n)
                g_string_append(s, ", ");
        }
    }
}

/* Random actions from the env's action spec (batch []), as tensors and as the JSON list the reference takes:
 * *nkeys tensors per step (acts[t * nkeys + j] under (*keys)[j]), one "action" for a single leaf, the leaves of
 * a Dict / Tuple action space (action.KEY) otherwise, whose JSON is an object of KEY (Tuple: "0", "1", ...). */
static crl_tensor **draw_actions(crl_env *env, int64_t steps, uint64_t seed, char **json, const char ***keys,
                                 size_t *nkeys)
{
    const crl_spec *full = crl_spec_composite_get(crl_env_full_action_spec(env), "action");
    ck_assert(full);
    bool comp = crl_spec_dtype(full) == CRL_DTYPE_COUNT;
    size_t nk = comp ? crl_spec_composite_len(full) : 1;
    const char **ks = g_new0(const char *, nk);
    const crl_spec **ss = g_new0(const crl_spec *, nk);
    for (size_t j = 0; j < nk; j++) {
        ks[j] = comp ? crl_spec_composite_key_at(full, j) : "action";
        ss[j] = comp ? crl_spec_composite_at(full, j) : full;
        ck_assert_msg(crl_spec_dtype(ss[j]) != CRL_DTYPE_COUNT, "nested action composites are not drawn here");
    }
    crl_rng rng;
    crl_rng_init(&rng, seed, 7);
    crl_tensor **acts = g_new0(crl_tensor *, (gsize)steps * nk);
    GString *s = g_string_new("[");
    crl_error e = { 0 };
    for (int64_t t = 0; t < steps; t++) {
        g_string_append(s, t ? ", " : "");
        g_string_append(s, comp ? "{" : "");
        for (size_t j = 0; j < nk; j++) {
            crl_tensor *x = acts[t * (int64_t)nk + (int64_t)j] = crl_spec_rand(ss[j], &rng, &e);
            ck_assert_msg(x != NULL, "%s", e.message);
            if (comp)
                g_string_append_printf(s, "%s\"%s\": ", j ? ", " : "", ks[j]);
            json_tensor(s, x);
        }
        g_string_append(s, comp ? "}" : "");
    }
    g_string_append_c(s, ']');
    *json = g_string_free(s, FALSE);
    if (comp) {
        for (size_t j = 0; j < nk; j++)
            ks[j] = g_strconcat("action.", ks[j], NULL);
    }
    g_free(ss);
    *keys = ks;
    *nkeys = comp ? nk : 0;
    return acts;
}

/* Step crl through `steps` actions from `seed` (same-step auto-reset, so the
 * root after step_mdp holds the reset observation as the script's next
 * reset record does) and compare with the Python reference, step for step.
 * Returns the number of info values compared. */
static int check_reference(const char *entry_point, const char *extra_ini, const char *kwargs_json, uint64_t seed,
                           int64_t steps, int64_t *episodes)
{
    fx f;
    char *ini = g_strdup_printf("id = ref\nentry_point = %s\nauto_reset = same_step\nseed = %" G_GUINT64_FORMAT
                                "\n%s", entry_point, (guint64)seed, extra_ini ? extra_ini : "");
    fx_must_open(&f, ini);
    g_free(ini);
    char *json = NULL;
    const char **keys = NULL;
    size_t nkeys = 0; /* 0: one "action" */
    crl_tensor **acts = draw_actions(f.env, steps, seed, &json, &keys, &nkeys);
    size_t per = nkeys ? nkeys : 1;
    GPtrArray *recs = reference(entry_point, seed, json, kwargs_json);
    g_free(json);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    guint r = 0;
    const ref_rec *rec = g_ptr_array_index(recs, r++);
    ck_assert(rec->reset);
    compare_rec(rec, td, "", "reset");
    int infos = 0;
    int64_t ends = 0;
    for (int64_t t = 0; t < steps; t++) {
        for (size_t j = 0; j < per; j++)
            EXPECT_OK(crl_td_set(td, keys[j], acts[t * (int64_t)per + (int64_t)j], &f.err), f.err);
        EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
        ck_assert_msg(r < recs->len, "the reference has no step %lld", (long long)t);
        rec = g_ptr_array_index(recs, r++);
        ck_assert(!rec->reset && rec->t == t);
        infos += compare_rec(rec, td, "next.", "step");
        const crl_tensor *rw = crl_td_get(td, "next.reward");
        ck_assert_msg(same_value(crl_tensor_flat_get(rw, 0), (double)(float)rec->reward),
                      "step %lld: reward crl %.9g, Python %.9g", (long long)t, crl_tensor_flat_get(rw, 0), rec->reward);
        ck_assert_int_eq((int)crl_tensor_flat_get(crl_td_get(td, "next.terminated"), 0), rec->term);
        ck_assert_int_eq((int)crl_tensor_flat_get(crl_td_get(td, "next.truncated"), 0), rec->trunc);
        ck_assert_int_eq((int)crl_tensor_flat_get(crl_td_get(td, "next.done"), 0), rec->term || rec->trunc);
        crl_td *nt = crl_env_step_mdp(f.env, td, &f.err);
        ck_assert_msg(nt != NULL, "%s", f.err.message);
        crl_td_unref(td);
        td = nt;
        if (rec->term || rec->trunc) {
            ends++;
            ck_assert_msg(r < recs->len, "the reference has no reset after step %lld", (long long)t);
            rec = g_ptr_array_index(recs, r++);
            ck_assert(rec->reset && rec->t == t + 1);
            compare_rec(rec, td, "", "reset after an episode");
        }
    }
    ck_assert_uint_eq(r, recs->len);
    crl_td_unref(td);
    for (int64_t t = 0; t < steps * (int64_t)per; t++)
        crl_tensor_unref(acts[t]);
    g_free(acts);
    for (size_t j = 0; j < nkeys; j++)
        g_free((char *)keys[j]);
    g_free(keys);
    g_ptr_array_unref(recs);
    crl_test_pyenv_close(&f);
    if (episodes)
        *episodes = ends;
    return infos;
}

/* ---- specs ---------------------------------------------------------------------- */

START_TEST(test_cartpole_make_specs)
{
    fx f;
    fx_must_open(&f, "id = CartPole-v1");
    ck_assert_int_eq(crl_env_max_episode_steps(f.env), 500);
    ck_assert_int_eq(crl_env_batch_ndim(f.env), 0);
    const crl_spec *o = leaf(crl_env_observation_spec(f.env), "observation");
    ck_assert_int_eq(crl_spec_get_kind(o), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_dtype(o), CRL_F32);
    expect_shape(o, 1, (int64_t[]){ 4 });
    const crl_tensor *lo = crl_spec_low(o), *hi = crl_spec_high(o);
    ck_assert(crl_tensor_flat_get(lo, 0) == (double)-4.8f && crl_tensor_flat_get(hi, 0) == (double)4.8f);
    ck_assert(isinf(crl_tensor_flat_get(lo, 1)) && crl_tensor_flat_get(lo, 1) < 0);
    ck_assert(isinf(crl_tensor_flat_get(hi, 3)) && crl_tensor_flat_get(hi, 3) > 0);
    ck_assert(crl_tensor_flat_get(hi, 2) == (double)(float)(2 * 12 * 2 * M_PI / 360));
    const crl_spec *a = crl_env_action_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_CATEGORICAL);
    ck_assert_int_eq(crl_spec_n(a), 2);
    ck_assert_int_eq(crl_spec_dtype(a), CRL_I64);
    ck_assert_int_eq(crl_spec_ndim(a), 0);
    const crl_spec *r = crl_env_reward_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(r), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_dtype(r), CRL_F32);
    expect_shape(r, 1, (int64_t[]){ 1 });
    for (const char *const *k = (const char *const[]){ "done", "terminated", "truncated", NULL }; *k; k++)
        ck_assert_int_eq(crl_spec_dtype(leaf(crl_env_full_done_spec(f.env), *k)), CRL_BOOL);
    char *repr = crl_env_specs_repr(f.env);
    EXPECT_HAS(repr, "BoundedTensorSpec");
    EXPECT_HAS(repr, "DiscreteBox(n=2)");
    crl_free(repr);
    EXPECT_OK(crl_env_check_specs(f.env, 100, &f.err), f.err);
    crl_test_pyenv_close(&f);
    /* Left at its default, the Discrete action is OneHot int64, as TorchRL's GymEnv
     * (categorical_action_encoding=False). */
    fx_must_open(&f, "id = CartPole-v1\n; categorical_action_encoding left at its default");
    a = crl_env_action_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_ONEHOT);
    ck_assert_int_eq(crl_spec_dtype(a), CRL_I64);
    expect_shape(a, 1, (int64_t[]){ 2 });
    EXPECT_OK(crl_env_check_specs(f.env, 100, &f.err), f.err);
    crl_test_pyenv_close(&f);
}
END_TEST

/* Leaf spec of SpaceEnv(obs=CASE): the env's observation spec. */
static void open_space(fx *f, const char *obs_case, const char *act_case, const char *extra)
{
    char *ini = g_strdup_printf("id = spaces\nentry_point = gym_test_envs:SpaceEnv\nkwargs.obs = %s\n"
                                "kwargs.act = %s\nnum_envs = 2\n%s", obs_case, act_case, extra ? extra : "");
    fx_must_open(f, ini);
    g_free(ini);
}

START_TEST(test_spaces_to_specs)
{
    crl_error e = { 0 };
    fx f;
    int64_t num = 2;
    /* Box, elementwise bounds, infinite sides kept (Bounded). */
    open_space(&f, "box_elementwise", "discrete", NULL);
    const crl_spec *s = leaf(crl_env_observation_spec(f.env), "observation");
    ck_assert_int_eq(crl_spec_get_kind(s), CRL_SPEC_BOUNDED);
    expect_shape(s, 2, (int64_t[]){ 2, 3 });
    ck_assert(crl_tensor_flat_get(crl_spec_low(s), 0) == -1.0 && crl_tensor_flat_get(crl_spec_high(s), 1) == 2.0);
    ck_assert(isinf(crl_tensor_flat_get(crl_spec_low(s), 1)) && isinf(crl_tensor_flat_get(crl_spec_high(s), 2)));
    ck_assert(crl_tensor_flat_get(crl_spec_low(s), 3) == -1.0); /* env 1's bounds too */
    const crl_spec *a = crl_env_action_spec(f.env);
    crl_spec *want = crl_spec_categorical(5, CRL_I64, 1, &num, &e);
    ck_assert(crl_spec_equal(a, want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);

    /* All-infinite Box: Unbounded, any dtype. */
    open_space(&f, "box_unbounded", "discrete_start", NULL);
    want = crl_spec_unbounded(CRL_F64, 3, (int64_t[]){ 2, 2, 3 }, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    crl_spec_unref(want);
    want = crl_spec_categorical(4, CRL_I64, 1, &num, &e);
    ck_assert(crl_spec_equal(crl_env_action_spec(f.env), want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);

    /* Integer Box: Bounded uint8. */
    open_space(&f, "box_int", "multi_discrete", NULL);
    want = crl_spec_bounded(CRL_U8, 3, (int64_t[]){ 2, 2, 2 }, 0, 255, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    crl_spec_unref(want);
    want = crl_spec_multi_categorical((int64_t[]){ 3, 4, 2 }, CRL_I64, 2, (int64_t[]){ 2, 3 }, &e);
    ck_assert(crl_spec_equal(crl_env_action_spec(f.env), want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);

    /* A scalar Box is [1] per env (TorchRL). */
    open_space(&f, "box_scalar", "multi_binary", NULL);
    want = crl_spec_bounded(CRL_F32, 2, (int64_t[]){ 2, 1 }, -2, 2, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    crl_spec_unref(want);
    want = crl_spec_binary(5, CRL_I8, 2, (int64_t[]){ 2, 5 }, &e);
    ck_assert(crl_spec_equal(crl_env_action_spec(f.env), want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);

    /* uint16 observations widen to int32; float16 stays. */
    open_space(&f, "box_uint16", "box_f16", NULL);
    want = crl_spec_bounded(CRL_I32, 2, (int64_t[]){ 2, 3 }, 0, 1000, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    crl_spec_unref(want);
    ck_assert_int_eq(crl_spec_dtype(crl_env_action_spec(f.env)), CRL_F16);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);

    /* Discrete observations (with start), MultiDiscrete (with start), MultiBinary 2-D. */
    open_space(&f, "discrete_start", "discrete", NULL);
    want = crl_spec_categorical(4, CRL_I64, 1, &num, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);
    open_space(&f, "multi_discrete_start", "multi_discrete_start", NULL);
    want = crl_spec_multi_categorical((int64_t[]){ 3, 4 }, CRL_I64, 2, (int64_t[]){ 2, 2 }, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    ck_assert(crl_spec_equal(crl_env_action_spec(f.env), want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);
    open_space(&f, "multi_binary_2d", "discrete", NULL);
    want = crl_spec_binary(3, CRL_I8, 3, (int64_t[]){ 2, 2, 3 }, &e);
    ck_assert(crl_spec_equal(leaf(crl_env_observation_spec(f.env), "observation"), want));
    crl_spec_unref(want);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);

    /* Dict: keys kept at the root, nested Composites; Tuple: "0", "1". */
    open_space(&f, "dict", "discrete", NULL);
    const crl_spec *obs = crl_env_observation_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(leaf(obs, "a")), CRL_SPEC_COMPOSITE);
    want = crl_spec_bounded(CRL_F32, 2, (int64_t[]){ 2, 2 }, -1, 1, &e);
    ck_assert(crl_spec_equal(leaf(obs, "a.x"), want));
    crl_spec_unref(want);
    ck_assert_int_eq(crl_spec_get_kind(leaf(obs, "b")), CRL_SPEC_CATEGORICAL);
    ck_assert_ptr_null(crl_spec_composite_get(obs, "observation"));
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    crl_test_pyenv_close(&f);
    open_space(&f, "tuple", "discrete", NULL);
    obs = crl_env_observation_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(leaf(obs, "0")), CRL_SPEC_CATEGORICAL);
    ck_assert_int_eq(crl_spec_get_kind(leaf(obs, "1")), CRL_SPEC_BINARY);
    EXPECT_OK(crl_env_check_specs(f.env, 20, &f.err), f.err);
    char *repr = crl_env_specs_repr(f.env);
    EXPECT_HAS(repr, "0: DiscreteTensorSpec");
    EXPECT_HAS(repr, "1: BinaryDiscreteTensorSpec");
    crl_free(repr);
    crl_test_pyenv_close(&f);
}
END_TEST

START_TEST(test_unsupported_spaces)
{
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.act = dotted_key", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "action space", "'a.b'", "nesting", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.obs = text", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "gym_test_envs.Text", "Box, Discrete", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.obs = box_uint64", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "uint64", "no crl dtype", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.act = box_uint16", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "uint16", "action", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.obs = multi_discrete_ragged",
                      CRL_E_UNSUPPORTED, (const char *const[]){ "MultiDiscrete", "nvec", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.obs = dotted_key", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "'a.b'", "nesting", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.obs = reserved_key", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "'reward'", "clashes", NULL });
    expect_make_error("id = s\nentry_point = gym_test_envs:NoSpacesEnv", CRL_E_INVALID,
                      (const char *const[]){ "observation_space", NULL });
}
END_TEST

/* ---- rollouts against Python ------------------------------------------------------ */

START_TEST(test_reference_cartpole)
{
    int64_t eps = 0;
    check_reference("crl_testenvs.cartpole:CartPoleEnv", NULL, NULL, 42, 300, &eps);
    ck_assert_int_gt(eps, 3); /* terminations and unseeded resets included */
    /* The episode limit: the env's own truncation at a short limit. */
    check_reference("crl_testenvs.cartpole:CartPoleEnv", "kwargs.max_episode_steps = 7", "{\"max_episode_steps\": 7}",
                    3, 40, &eps);
    ck_assert_int_ge(eps, 5);
}
END_TEST

START_TEST(test_reference_spaces)
{
    int64_t eps = 0;
    check_reference("crl_testenvs.dictenv:DictObsEnv", NULL, NULL, 5, 60, &eps);
    ck_assert_int_ge(eps, 2);
    check_reference("crl_testenvs.multiaction:MultiDiscreteEnv", NULL, NULL, 6, 25, NULL);
    check_reference("crl_testenvs.multiaction:MultiBinaryEnv", NULL, NULL, 7, 45, NULL);
    check_reference("crl_testenvs.multiaction:DiscreteStartEnv", NULL, NULL, 8, 45, NULL);
    check_reference("crl_testenvs.imageenv:PixelObsEnv", NULL, NULL, 9, 35, NULL);
}
END_TEST

/* Dict and Tuple action spaces: a Composite under "action", each leaf as a single action leaf would be. */
START_TEST(test_composite_actions)
{
    fx f;
    fx_must_open(&f, "id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.act = dict\nnum_envs = 2");
    const crl_spec *a = crl_spec_composite_get(crl_env_full_action_spec(f.env), "action");
    ck_assert(a && crl_spec_dtype(a) == CRL_DTYPE_COUNT);
    ck_assert_uint_eq(crl_spec_composite_len(a), 2);
    const crl_spec *b = leaf(crl_env_full_action_spec(f.env), "action.b");
    ck_assert_int_eq(crl_spec_get_kind(b), CRL_SPEC_CATEGORICAL);
    expect_shape(b, 1, (int64_t[]){ 2 });
    const crl_spec *x = leaf(crl_env_full_action_spec(f.env), "action.a.x");
    ck_assert_int_eq(crl_spec_dtype(x), CRL_F32);
    expect_shape(x, 2, (int64_t[]){ 2, 2 });
    /* The action spec of a multi-action env is the whole Composite. */
    ck_assert_ptr_eq(crl_env_action_spec(f.env), crl_env_full_action_spec(f.env));
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = s\nentry_point = crl_testenvs.compositeaction:DictActionEnv\nnum_envs = 3");
    ck_assert_msg(crl_env_check_specs(f.env, 30, &f.err) == CRL_OK, "check_specs: %s", f.err.message);
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = s\nentry_point = gym_test_envs:SpaceEnv\nkwargs.act = tuple\n"
                     "categorical_action_encoding = false");
    expect_shape(leaf(crl_env_full_action_spec(f.env), "action.0"), 1, (int64_t[]){ 2 });
    ck_assert_int_eq(crl_spec_get_kind(leaf(crl_env_full_action_spec(f.env), "action.0")), CRL_SPEC_ONEHOT);
    ck_assert_int_eq(crl_spec_get_kind(leaf(crl_env_full_action_spec(f.env), "action.1")), CRL_SPEC_BINARY);
    crl_test_pyenv_close(&f);
    /* Step for step against Python, index and one-hot encodings. */
    int64_t eps = 0;
    check_reference("crl_testenvs.compositeaction:DictActionEnv", NULL, NULL, 31, 80, &eps);
    ck_assert_int_gt(eps, 2);
    check_reference("crl_testenvs.compositeaction:DictActionEnv", "categorical_action_encoding = false", NULL, 32, 60,
                    NULL);
    check_reference("crl_testenvs.compositeaction:TupleActionEnv", NULL, NULL, 33, 80, &eps);
    ck_assert_int_gt(eps, 2);
    check_reference("crl_testenvs.compositeaction:TupleActionEnv", "categorical_action_encoding = false", NULL, 34,
                    60, NULL);
}
END_TEST

START_TEST(test_reference_legacy_info_dtypes)
{
    int64_t eps = 0;
    /* Old gym: seed(), reset() -> obs, 4-tuple, TimeLimit.truncated. */
    check_reference("crl_testenvs.legacy:LegacyEnv", NULL, NULL, 11, 100, &eps);
    ck_assert_int_ge(eps, 3);
    int infos = check_reference("crl_testenvs.infoenv:InfoEnv", "info_keys = score, lives, flags", NULL, 12, 40, &eps);
    ck_assert_int_eq(infos, 40 * 4); /* score, lives, flags[2] at every step */
    /* Loose but valid types: lists and float64 cast, numpy scalars. */
    check_reference("crl_testenvs.bad:WrongDtypeEnv", "kwargs.mode = list", "{\"mode\": \"list\"}", 13, 60, NULL);
    check_reference("crl_testenvs.bad:WrongDtypeEnv", "kwargs.mode = float64", "{\"mode\": \"float64\"}", 14, 60, NULL);
    /* NaN passes through (Unbounded observation). */
    check_reference("crl_testenvs.bad:NaNEnv", "kwargs.where = both", "{\"where\": \"both\"}", 15, 10, NULL);
    /* OneHot actions reach the env as the index of the one. */
    check_reference("crl_testenvs.cartpole:CartPoleEnv", "categorical_action_encoding = false", NULL, 16, 60, NULL);
}
END_TEST

START_TEST(test_registry_paths)
{
    /* gymnasium.make through the fake gymnasium, with kwargs. */
    fx f;
    fx_must_open(&f, "id = CartPole-v1\nkwargs.sutton_barto_reward = True\nseed = 4");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_ptr_nonnull(td);
    EXPECT_OK(crl_env_rand_step(f.env, td, &f.err), f.err);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.reward"), 0) == 0.0); /* Sutton & Barto: 0 while alive */
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* max_episode_steps goes to make() (and the host cuts there too). */
    fx_must_open(&f, "id = CartPole-v1\nmax_episode_steps = 5\nauto_reset = off");
    ck_assert_int_eq(crl_env_max_episode_steps(f.env), 5);
    td = crl_env_reset(f.env, NULL, &f.err);
    for (int t = 0; t < 5 && !crl_tensor_flat_get(crl_td_get(td, "done"), 0); t++) {
        EXPECT_OK(crl_env_rand_step(f.env, td, &f.err), f.err);
        crl_td *nt = crl_env_step_mdp(f.env, td, &f.err);
        crl_td_unref(td);
        td = nt;
    }
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "done"), 0) != 0);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* An id gymnasium does not know falls back to gym (the old API). */
    fx_must_open(&f, "id = LegacyCartPole-v0");
    EXPECT_OK(crl_env_check_specs(f.env, 50, &f.err), f.err);
    crl_test_pyenv_close(&f);
    /* Unknown ids name both registries and the close match. */
    expect_make_error("id = CartPol-v1", CRL_E_NOT_FOUND,
                      (const char *const[]){ "unknown env id 'CartPol-v1'", "gymnasium 1.0.0-fake", "NameNotFound",
                                             "CartPole-v1", "gym 0.21.0-fake", "entry_point", NULL });
    expect_make_error("id = no such id", CRL_E_NOT_FOUND, (const char *const[]){ "unknown env id", NULL });
}
END_TEST

START_TEST(test_seeding)
{
    crl_td *out[3] = { NULL, NULL, NULL };
    static const char *const inis[3] = { "id = CartPole-v1\nseed = 7\nnum_envs = 3\nauto_reset = same_step",
                                         "id = CartPole-v1\nseed = 7\nnum_envs = 3\nauto_reset = same_step",
                                         "id = CartPole-v1\nseed = 8\nnum_envs = 3\nauto_reset = same_step" };
    for (int k = 0; k < 3; k++) {
        fx f;
        fx_must_open(&f, inis[k]);
        out[k] = crl_env_rollout(f.env, 60, NULL, NULL, false, true, NULL, &f.err);
        ck_assert_msg(out[k] != NULL, "%s", f.err.message);
        crl_test_pyenv_close(&f);
    }
    ck_assert(crl_td_equal(out[0], out[1]));
    ck_assert(!crl_tensor_equal(crl_td_get(out[0], "observation"), crl_td_get(out[2], "observation")));
    /* Envs of one batch get different seeds (the seed chain). */
    crl_tensor *o = crl_td_get(out[0], "observation");
    ck_assert(crl_tensor_flat_get(o, 0) != crl_tensor_flat_get(o, 60 * 4));
    for (int k = 0; k < 3; k++)
        crl_td_unref(out[k]);
    /* Env 1 of the batch is the reference run from the chain's second seed. */
    fx f;
    fx_must_open(&f, "id = CartPole-v1\nseed = 7\nnum_envs = 2");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    fx g;
    char *ini = g_strdup_printf("id = CartPole-v1\nseed = %" G_GUINT64_FORMAT, (guint64)crl_seed_next(7));
    fx_must_open(&g, ini);
    g_free(ini);
    crl_td *td1 = crl_env_reset(g.env, NULL, &g.err);
    for (int i = 0; i < 4; i++)
        ck_assert(crl_tensor_flat_get(crl_td_get(td, "observation"), 4 + i) ==
                  crl_tensor_flat_get(crl_td_get(td1, "observation"), i));
    crl_td_unref(td);
    crl_td_unref(td1);
    crl_test_pyenv_close(&g);
    crl_test_pyenv_close(&f);
    /* Old gym: seeded through env.seed(). */
    for (int k = 0; k < 2; k++) {
        fx_must_open(&f, "id = LegacyCartPole-v0\nseed = 99");
        out[k] = crl_env_rollout(f.env, 40, NULL, NULL, false, true, NULL, &f.err);
        ck_assert_msg(out[k] != NULL, "%s", f.err.message);
        crl_test_pyenv_close(&f);
    }
    ck_assert(crl_td_equal(out[0], out[1]));
    crl_td_unref(out[0]);
    crl_td_unref(out[1]);
}
END_TEST

START_TEST(test_info_keys)
{
    fx f;
    fx_must_open(&f, "id = TestInfo-v0\ninfo_keys = score, lives, flags\nnum_envs = 2");
    const crl_spec *obs = crl_env_observation_spec(f.env);
    crl_error e = { 0 };
    crl_spec *want = crl_spec_unbounded(CRL_F32, 2, (int64_t[]){ 2, 1 }, &e);
    ck_assert(crl_spec_equal(leaf(obs, "score"), want));
    crl_spec_unref(want);
    want = crl_spec_unbounded(CRL_I64, 2, (int64_t[]){ 2, 1 }, &e);
    ck_assert(crl_spec_equal(leaf(obs, "lives"), want));
    crl_spec_unref(want);
    want = crl_spec_unbounded(CRL_BOOL, 2, (int64_t[]){ 2, 2 }, &e);
    ck_assert(crl_spec_equal(leaf(obs, "flags"), want));
    crl_spec_unref(want);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_int_eq((int)crl_tensor_flat_get(crl_td_get(td, "lives"), 1), 3);
    ck_assert_int_eq((int)crl_tensor_flat_get(crl_td_get(td, "flags"), 0), 1);
    crl_td_unref(td);
    EXPECT_OK(crl_env_check_specs(f.env, 30, &f.err), f.err);
    crl_test_pyenv_close(&f);
    /* A key left out of one step's info reads as 0 there. */
    fx_must_open(&f, "id = i\nentry_point = crl_testenvs.infoenv:InfoEnv\nkwargs.drop_key_at_step = 1\n"
                     "info_keys = score");
    td = crl_env_reset(f.env, NULL, &f.err);
    crl_tensor *one = crl_tensor_new(CRL_I64, 0, NULL, &f.err);
    crl_tensor_fill(one, 1);
    double scores[3];
    for (int t = 0; t < 3; t++) {
        EXPECT_OK(crl_td_set(td, "action", one, &f.err), f.err);
        EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
        scores[t] = crl_tensor_flat_get(crl_td_get(td, "next.score"), 0);
        crl_td *nt = crl_env_step_mdp(f.env, td, &f.err);
        crl_td_unref(td);
        td = nt;
    }
    ck_assert(scores[0] > 0 && scores[1] == 0.0 && scores[2] > scores[0]);
    crl_tensor_unref(one);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* Dots become '_'; an unknown key and an old-gym env are errors. */
    open_space(&f, "discrete", "discrete", "info_keys = x.y");
    ck_assert_int_eq(crl_spec_dtype(leaf(crl_env_observation_spec(f.env), "x_y")), CRL_F32);
    crl_test_pyenv_close(&f);
    expect_make_error("id = TestInfo-v0\ninfo_keys = score, livez", CRL_E_NOT_FOUND,
                      (const char *const[]){ "'livez'", "first reset", "lives", NULL });
    expect_make_error("id = LegacyCartPole-v0\ninfo_keys = x", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "info_keys", "old gym", NULL });
    expect_make_error("id = CartPole-v1\ninfo_keys = observation", CRL_E_NOT_FOUND,
                      (const char *const[]){ "'observation'", NULL });
}
END_TEST

START_TEST(test_actions)
{
    /* Discrete with start: the env gets start + index, as a Python int. */
    fx f;
    open_space(&f, "discrete", "discrete_start", "info_keys = act, act_is_int");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    crl_tensor *a = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 2 }, &f.err);
    crl_tensor_flat_set(a, 0, 0);
    crl_tensor_flat_set(a, 1, 3);
    EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
    EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.act"), 0) == 10.0);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.act"), 1) == 13.0);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.act_is_int"), 1) == 1.0);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* MultiDiscrete with start: shifted elementwise, through the bound array. */
    open_space(&f, "discrete", "multi_discrete_start", "info_keys = act");
    td = crl_env_reset(f.env, NULL, &f.err);
    a = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 2, 2 }, &f.err);
    for (int i = 0; i < 4; i++)
        crl_tensor_flat_set(a, i, i % 3);
    EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
    EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
    const crl_tensor *got = crl_td_get(td, "next.act");
    ck_assert(crl_tensor_flat_get(got, 0) == 1 && crl_tensor_flat_get(got, 1) == -1 &&
              crl_tensor_flat_get(got, 2) == 3 && crl_tensor_flat_get(got, 3) == -2);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* OneHot: the index of the one. */
    open_space(&f, "discrete", "discrete_start", "info_keys = act\ncategorical_action_encoding = false");
    const crl_spec *as = crl_env_action_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(as), CRL_SPEC_ONEHOT);
    expect_shape(as, 2, (int64_t[]){ 2, 4 });
    td = crl_env_reset(f.env, NULL, &f.err);
    a = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 2, 4 }, &f.err);
    crl_tensor_flat_set(a, 2, 1);
    crl_tensor_flat_set(a, 4, 1);
    EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
    EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.act"), 0) == 12.0);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.act"), 1) == 10.0);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* MultiOneHot: each group's index, shifted by start, as TorchRL's MultiOneHot of a MultiDiscrete. */
    open_space(&f, "discrete", "multi_discrete_start", "info_keys = act\ncategorical_action_encoding = false");
    as = crl_env_action_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(as), CRL_SPEC_MULTI_ONEHOT);
    ck_assert_int_eq(crl_spec_dtype(as), CRL_I64);
    expect_shape(as, 2, (int64_t[]){ 2, 7 });
    td = crl_env_reset(f.env, NULL, &f.err);
    a = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 2, 7 }, &f.err);
    /* env 0: (2, 0) -> (3, -2); env 1: (0, 3) -> (1, 1) */
    for (int k = 0; k < 4; k++)
        crl_tensor_flat_set(a, (int64_t[]){ 2, 3, 7, 13 }[k], 1);
    EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
    EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
    got = crl_td_get(td, "next.act");
    ck_assert(crl_tensor_flat_get(got, 0) == 3 && crl_tensor_flat_get(got, 1) == -2 &&
              crl_tensor_flat_get(got, 2) == 1 && crl_tensor_flat_get(got, 3) == 1);
    /* A row that is no MultiOneHot is refused by the spec before the env sees it. */
    crl_tensor_fill(a, 0);
    EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
    ck_assert_int_ne(crl_env_step(f.env, td, &f.err), CRL_OK);
    EXPECT_HAS(f.err.message, "action");
    EXPECT_OK(crl_env_check_specs(f.env, 10, &f.err), f.err);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* A MultiDiscrete of more than one dim has no MultiOneHot here: a clear error naming the way out. */
    expect_make_error("id = spaces\nentry_point = gym_test_envs:SpaceEnv\nkwargs.act = multi_discrete_2d\n"
                      "categorical_action_encoding = false", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "has 2 dims", "categorical_action_encoding = true", NULL });
    open_space(&f, "discrete", "multi_discrete_2d", "categorical_action_encoding = true");
    ck_assert_int_eq(crl_spec_get_kind(crl_env_action_spec(f.env)), CRL_SPEC_MULTI_CATEGORICAL);
    crl_test_pyenv_close(&f);
}
END_TEST

/* One numpy array per env over crl's action buffer, reused every step; no
 * Python object outlives a step. */
START_TEST(test_no_per_step_objects)
{
    fx f;
    open_space(&f, "discrete", "box_elementwise", "info_keys = act_id, act\nauto_reset = same_step");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    crl_tensor *a = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 2, 3 }, &f.err);
    double ids[2] = { 0, 0 };
    for (int t = 0; t < 20; t++) {
        for (int i = 0; i < 6; i++)
            crl_tensor_flat_set(a, i, (t + i) % 3 == 0 ? 0.5 : 0.25);
        EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
        EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
        const crl_tensor *id = crl_td_get(td, "next.act_id"), *act = crl_td_get(td, "next.act");
        for (int i = 0; i < 2; i++) {
            if (t == 0)
                ids[i] = crl_tensor_flat_get(id, i);
            ck_assert_msg(crl_tensor_flat_get(id, i) == ids[i], "step %d env %d got another action object", t, i);
        }
        for (int i = 0; i < 6; i++)
            ck_assert(crl_tensor_flat_get(act, i) == crl_tensor_flat_get(a, i));
        crl_td *nt = crl_env_step_mdp(f.env, td, &f.err);
        crl_td_unref(td);
        td = nt;
    }
    ck_assert(ids[0] != ids[1]);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* Python's block count does not grow with steps (nothing leaks). */
    fx_must_open(&f, "id = leak\nentry_point = gym_test_envs:LeakProbeEnv\ninfo_keys = blocks\nauto_reset = same_step");
    td = crl_env_reset(f.env, NULL, &f.err);
    double first = 0, last = 0;
    crl_td *next = crl_td_new(0, NULL, &f.err);
    for (int t = 0; t < 300; t++) {
        EXPECT_OK(crl_env_rand_action(f.env, td, &f.err), f.err);
        EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
        last = crl_tensor_flat_get(crl_td_get(td, "next.blocks"), 0);
        if (t == 50)
            first = last;
        EXPECT_OK(crl_env_step_mdp_into(f.env, td, next, &f.err), f.err);
        crl_td *sw = td;
        td = next;
        next = sw;
    }
    ck_assert_msg(last <= first, "Python holds %g blocks after 300 steps, %g after 50", last, first);
    crl_td_unref(td);
    crl_td_unref(next);
    crl_test_pyenv_close(&f);
}
END_TEST

/* Another thread (one CPython never saw) steps the env: the GIL is free
 * between calls and taken per call. */
typedef struct thread_job {
    crl_env *env;
    crl_td *td;
    int steps;
    crl_error err;
} thread_job;

static gpointer step_in_thread(gpointer p)
{
    thread_job *j = p;
    for (int t = 0; t < j->steps; t++) {
        if (crl_env_rand_step(j->env, j->td, &j->err))
            return GINT_TO_POINTER(1);
        crl_td *nt = crl_env_step_mdp(j->env, j->td, &j->err);
        if (!nt)
            return GINT_TO_POINTER(1);
        crl_td_unref(j->td);
        j->td = nt;
    }
    return NULL;
}

START_TEST(test_other_threads)
{
    fx f;
    fx_must_open(&f, "id = CartPole-v1\nnum_envs = 2\nauto_reset = same_step");
    thread_job j = { f.env, crl_env_reset(f.env, NULL, &f.err), 100, { 0 } };
    ck_assert_ptr_nonnull(j.td);
    for (int k = 0; k < 2; k++) {
        GThread *th = g_thread_new("crl-test-gym", step_in_thread, &j);
        ck_assert_msg(g_thread_join(th) == NULL, "stepping in a thread failed: %s", j.err.message);
    }
    /* And the main thread still can. */
    ck_assert_ptr_null(step_in_thread(&j));
    crl_td_unref(j.td);
    crl_test_pyenv_close(&f);
}
END_TEST

/* ---- pixels ------------------------------------------------------------------------- */

START_TEST(test_pixels)
{
    fx f;
    fx_must_open(&f, "id = TestImage-v0\nfrom_pixels = true\npixels_only = false\nseed = 3\nnum_envs = 2");
    ck_assert_int_eq(crl_env_render_height(f.env), 48);
    ck_assert_int_eq(crl_env_render_width(f.env), 64);
    const crl_spec *p = leaf(crl_env_observation_spec(f.env), "pixels");
    expect_shape(p, 4, (int64_t[]){ 2, 48, 64, 3 });
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    crl_tensor *a = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 2 }, &f.err);
    for (int t = 0; t <= 3; t++) {
        /* ImageEnv's frame: red 4 t, green 128, blue round(255 x); pixel (47, 0) is far from the dot. */
        const crl_tensor *px = crl_td_get(td, t ? "next.pixels" : "pixels");
        const crl_tensor *ob = crl_td_get(td, t ? "next.observation" : "observation");
        ck_assert_ptr_nonnull(ob);
        for (int i = 0; i < 2; i++) {
            double x = crl_tensor_flat_get(ob, i * 4);
            int64_t base = i * 48 * 64 * 3 + 47 * 64 * 3;
            if (x > 0.2) {
                ck_assert_int_eq((int)crl_tensor_flat_get(px, base + 0), 4 * t);
                ck_assert_int_eq((int)crl_tensor_flat_get(px, base + 1), 128);
                ck_assert(fabs(crl_tensor_flat_get(px, base + 2) - 255 * x) <= 1.0);
            }
        }
        if (t == 3)
            break;
        EXPECT_OK(crl_td_set(td, "action", a, &f.err), f.err);
        EXPECT_OK(crl_env_step(f.env, td, &f.err), f.err);
    }
    /* crl_env_render gives env i's current frame. */
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 48, 64, 3 }, &f.err);
    EXPECT_OK(crl_env_render(f.env, 1, frame, &f.err), f.err);
    crl_tensor *row = crl_tensor_index(crl_td_get(td, "next.pixels"), 0, 1, &f.err);
    ck_assert(crl_tensor_equal(frame, row));
    crl_tensor_unref(row);
    crl_tensor_unref(frame);
    crl_tensor_unref(a);
    crl_td_unref(td);
    EXPECT_OK(crl_env_check_specs(f.env, 10, &f.err), f.err);
    crl_test_pyenv_close(&f);
    /* Declared frame sizes skip the probe; a wrong one is a clear error.  pixels_only defaults to true with
     * from_pixels, as GymEnv's does. */
    fx_must_open(&f, "id = TestImage-v0\nfrom_pixels = true\nrender_height = 48\nrender_width = 64");
    EXPECT_OK(crl_env_check_specs(f.env, 5, &f.err), f.err);
    ck_assert_ptr_null(crl_spec_composite_get(crl_env_observation_spec(f.env), "observation"));
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = TestImage-v0\nfrom_pixels = true\nrender_height = 40\nrender_width = 64");
    td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_ptr_null(td);
    ck_assert_int_eq(f.err.code, CRL_E_SHAPE);
    EXPECT_HAS(f.err.message, "(48, 64, 3)");
    EXPECT_HAS(f.err.message, "render_height");
    crl_test_pyenv_close(&f);
    expect_make_error("id = TestImage-v0\nrender_height = 48", CRL_E_CONFIG,
                      (const char *const[]){ "render_width", "give both", NULL });
    /* Old gym renders with render(mode='rgb_array'). */
    fx_must_open(&f, "id = LegacyCartPole-v0\nfrom_pixels = true");
    ck_assert_int_eq(crl_env_render_height(f.env), 400);
    td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* An env made without rgb_array frames cannot give pixels. */
    expect_make_error("id = TestImage-v0\nfrom_pixels = true\nkwargs.render_mode = None", CRL_E_UNSUPPORTED,
                      (const char *const[]){ "render() returned None", "render_mode", NULL });
    fx_must_open(&f, "id = CartPole-v1");
    frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 4, 4, 3 }, &f.err);
    ck_assert_int_eq(crl_env_render(f.env, 0, frame, &f.err), CRL_E_UNSUPPORTED);
    crl_tensor_unref(frame);
    crl_test_pyenv_close(&f);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------------- */

START_TEST(test_missing_modules)
{
    /* sys.path holds python_path normalised (a distcheck srcdir is ".../sub/../.."). */
    char *pydir = g_canonicalize_filename(PYDIR, NULL);
    expect_make_error("id = x\nentry_point = no_such_module_xyz:Env", CRL_E_NOT_FOUND,
                      (const char *const[]){ "no module named 'no_such_module_xyz'", "Python 3.", "sys.path searched",
                                             pydir, "python_path", "PYTHONPATH", "VIRTUAL_ENV", NULL });
    g_free(pydir);
    expect_make_error("id = x\nentry_point = crl_testenvs.cartpole:CartPoleEnvv", CRL_E_NOT_FOUND,
                      (const char *const[]){ "has no attribute 'CartPoleEnvv'", "did you mean CartPoleEnv", NULL });
    expect_make_error("id = x\nentry_point = crl_testenvs.cartpole", CRL_E_CONFIG,
                      (const char *const[]){ "package.module:Class", NULL });
    expect_make_error("id = x\nentry_point = gym_test_envs:NOT_CALLABLE", CRL_E_CONFIG,
                      (const char *const[]){ "not a class", NULL });
    expect_make_error("id = CartPole-v1\nkwargs.1x = 2", CRL_E_CONFIG,
                      (const char *const[]){ "[env] kwargs.1x", "not a Python keyword", NULL });
    expect_make_error("id = CartPole-v1\nkwargs.no_such_kwarg = 2", CRL_E_INVALID,
                      (const char *const[]){ "TypeError", "no_such_kwarg", NULL });
}
END_TEST

/* env_ini must step into an error; returns with f open and err set. */
static void step_until_error(fx *f, const char *env_ini, int steps, int code, const char *const *needles)
{
    fx_must_open(f, env_ini);
    crl_td *td = crl_env_reset(f->env, NULL, &f->err);
    ck_assert_msg(td != NULL, "%s", f->err.message);
    int rc = CRL_OK, t = 0;
    for (; t < steps && rc == CRL_OK; t++) {
        EXPECT_OK(crl_env_rand_action(f->env, td, &f->err), f->err);
        rc = crl_env_step(f->env, td, &f->err);
        if (rc == CRL_OK) {
            crl_td *nt = crl_env_step_mdp(f->env, td, &f->err);
            crl_td_unref(td);
            td = nt;
        }
    }
    ck_assert_msg(rc == code, "stepping gave %s (%s), expected %s", crl_status_name(rc), f->err.message,
                  crl_status_name(code));
    for (const char *const *n = needles; *n; n++)
        EXPECT_HAS(f->err.message, *n);
    crl_td_unref(td);
}

/* os._exit in an env run inline would end crl without a word: it is an error of that step instead (pyembed's
 * guard); a forked child's os._exit still exits (the guard is for crl's own process). */
START_TEST(test_os_exit_inline)
{
    fx f;
    step_until_error(&f, "id = k\nentry_point = crl_testenvs.hostile:KillingEnv\nkwargs.how = exit\n"
                     "kwargs.exit_status = 0", 10, CRL_E_RUNTIME,
                     (const char *const[]){ "step: env 0", "OsExitInHost", "os._exit(0) was called in the crl process",
                                            "executor = processes", "hostile.py", NULL });
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = k\nentry_point = crl_testenvs.hostile:KillingEnv\nkwargs.how = child_exit\nnum_envs = 2");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    for (int t = 0; t < 5; t++) {
        EXPECT_OK(crl_env_rand_step(f.env, td, &f.err), f.err);
        EXPECT_OK(crl_env_step_mdp_into(f.env, td, td, &f.err), f.err);
    }
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
}
END_TEST

START_TEST(test_bad_envs)
{
    fx f;
    step_until_error(&f, "id = TestRaising-v0", 10, CRL_E_RUNTIME,
                     (const char *const[]){ "step: env 0", "ValueError: boom at step 3", "Traceback", "bad.py", NULL });
    crl_test_pyenv_close(&f);
    /* SystemExit and KeyboardInterrupt are errors too, not an exit. */
    step_until_error(&f, "id = r\nentry_point = crl_testenvs.bad:RaisingEnv\nkwargs.exc_type = SystemExit", 10,
                     CRL_E_RUNTIME, (const char *const[]){ "SystemExit", NULL });
    crl_test_pyenv_close(&f);
    step_until_error(&f, "id = r\nentry_point = crl_testenvs.bad:RaisingEnv\nkwargs.exc_type = KeyboardInterrupt", 10,
                     CRL_E_RUNTIME, (const char *const[]){ "KeyboardInterrupt", NULL });
    crl_test_pyenv_close(&f);
    step_until_error(&f, "id = TestWrongShape-v0", 10, CRL_E_SHAPE,
                     (const char *const[]){ "observation 'observation'", "(5,)", "(4,)", NULL });
    crl_test_pyenv_close(&f);
    step_until_error(&f, "id = TestNone-v0", 10, CRL_E_RUNTIME,
                     (const char *const[]){ "returned None", "terminated, truncated", NULL });
    crl_test_pyenv_close(&f);
    step_until_error(&f, "id = TestWrongTuple-v0", 10, CRL_E_RUNTIME,
                     (const char *const[]){ "returned 3 values", NULL });
    crl_test_pyenv_close(&f);
    step_until_error(&f, "id = w\nentry_point = crl_testenvs.bad:WrongTupleEnv\nkwargs.length = 6", 10, CRL_E_RUNTIME,
                     (const char *const[]){ "returned 6 values", NULL });
    crl_test_pyenv_close(&f);
    /* After an error the env and the host still work: free it cleanly. */
    step_until_error(&f, "id = TestRaising-v0\nnum_envs = 3", 10, CRL_E_RUNTIME,
                     (const char *const[]){ "boom at step 3", NULL });
    EXPECT_OK(crl_env_check_specs(f.env, 2, &f.err), f.err);
    crl_test_pyenv_close(&f);
    /* reset, __init__, render and close. */
    fx_must_open(&f, "id = r\nentry_point = crl_testenvs.bad:RaisingEnv\nkwargs.raise_in_reset = True");
    ck_assert_ptr_null(crl_env_reset(f.env, NULL, &f.err));
    ck_assert_int_eq(f.err.code, CRL_E_RUNTIME);
    EXPECT_HAS(f.err.message, "reset: env 0");
    EXPECT_HAS(f.err.message, "ValueError: boom in reset");
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = n\nentry_point = crl_testenvs.bad:NoneEnv\nkwargs.none_in_reset = True");
    ck_assert_ptr_null(crl_env_reset(f.env, NULL, &f.err));
    EXPECT_HAS(f.err.message, "is None");
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = w\nentry_point = crl_testenvs.bad:WrongShapeEnv\nkwargs.bad_in_reset = True");
    ck_assert_ptr_null(crl_env_reset(f.env, NULL, &f.err));
    ck_assert_int_eq(f.err.code, CRL_E_SHAPE);
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = w\nentry_point = crl_testenvs.bad:WrongTupleEnv\nkwargs.bad_in_reset = True");
    ck_assert_ptr_null(crl_env_reset(f.env, NULL, &f.err));
    ck_assert(f.err.code == CRL_E_DTYPE || f.err.code == CRL_E_SHAPE);
    EXPECT_HAS(f.err.message, "observation 'observation'");
    crl_test_pyenv_close(&f);
    expect_make_error("id = r\nentry_point = crl_testenvs.bad:RaisingEnv\nkwargs.raise_in_init = True", CRL_E_INVALID,
                      (const char *const[]){ "ValueError", "boom in __init__", NULL });
    fx_must_open(&f, "id = r\nentry_point = crl_testenvs.bad:RaisingEnv\nkwargs.raise_in_render = True\n"
                     "render_height = 8\nrender_width = 8\nfrom_pixels = true");
    ck_assert_ptr_null(crl_env_reset(f.env, NULL, &f.err));
    EXPECT_HAS(f.err.message, "render: env 0");
    EXPECT_HAS(f.err.message, "boom in render");
    crl_test_pyenv_close(&f);
    /* close() raising is logged, not fatal. */
    fx_must_open(&f, "id = r\nentry_point = crl_testenvs.bad:RaisingEnv\nkwargs.raise_in_close = True");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* Stateless resets do not exist for gym envs. */
    fx_must_open(&f, "id = CartPole-v1");
    td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_ptr_null(crl_env_reset_from_state(f.env, td, &f.err));
    ck_assert_int_eq(f.err.code, CRL_E_UNSUPPORTED);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
}
END_TEST

/* ---- the interpreter's set-up, in a child crl ------------------------------------------- */

static const char *crl_program(void)
{
    const char *p = getenv("CRL");
    return p && *p ? p : TEST_BUILDDIR "/../core/cli/crl";
}

/* Run `crl inspect` with extra environment; returns the exit status, and
 * stdout+stderr in *out. */
static int run_crl(const char *const *envp_extra, const char *const *args, char **out)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)crl_program());
    g_ptr_array_add(argv, (gpointer) "inspect");
    g_ptr_array_add(argv, (gpointer) "plugins.load=gym");
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, NULL);
    char **envp = g_get_environ();
    for (const char *const *e = envp_extra; *e; e += 2)
        envp = e[1] ? g_environ_setenv(envp, e[0], e[1], TRUE) : g_environ_unsetenv(envp, e[0]);
    if (!getenv("CRL_PLUGIN_PATH"))
        envp = g_environ_setenv(envp, "CRL_PLUGIN_PATH", GYM_PLUGIN_DIR, TRUE);
    char *so = NULL, *se = NULL;
    int status = 0;
    GError *ge = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &so, &se, &status, &ge);
    ck_assert_msg(ok, "cannot run %s: %s", crl_program(), ge ? ge->message : "?");
    *out = g_strconcat(so, se, NULL);
    g_free(so);
    g_free(se);
    g_strfreev(envp);
    g_ptr_array_unref(argv);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* "3.11": the version of the Python that matches the embedded library. */
static char *python_version(void)
{
    char *argv[] = { (char *)CRL_PYTHON, (char *)"-c",
                     (char *)"import sys; print('%d.%d' % sys.version_info[:2])", NULL };
    char *out = NULL;
    int status = 0;
    ck_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL));
    g_strstrip(out);
    ck_assert_msg(*out, "%s printed no version", CRL_PYTHON);
    return out;
}

START_TEST(test_virtualenv_pythonpath)
{
    char *venv = g_build_filename(tmpdir, "venv", NULL);
    char *ver = python_version();
    char *site = g_strdup_printf("%s/lib/python%s/site-packages", venv, ver);
    g_free(ver);
    ck_assert_int_eq(g_mkdir_with_parents(site, 0755), 0);
    char *mod = g_build_filename(site, "venv_only_env.py", NULL);
    ck_assert(g_file_set_contents(mod, "# An env that only the test virtualenv has.\n"
                                       "from crl_testenvs.cartpole import CartPoleEnv as VenvEnv\n", -1, NULL));
    char *pp = g_strdup_printf("plugin.gym.python_path=%s", PYDIR);
    char *out = NULL;
    /* Found through VIRTUAL_ENV's site-packages. */
    int st = run_crl((const char *const[]){ "VIRTUAL_ENV", venv, NULL, NULL },
                     (const char *const[]){ pp, "env.backend=gym", "env.id=v", "env.entry_point=venv_only_env:VenvEnv",
                                            NULL }, &out);
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    EXPECT_HAS(out, "max_episode_steps=500");
    g_free(out);
    /* Not without it: the message names the interpreter and the fixes. */
    st = run_crl((const char *const[]){ "VIRTUAL_ENV", NULL, NULL },
                 (const char *const[]){ pp, "env.backend=gym", "env.id=v", "env.entry_point=venv_only_env:VenvEnv",
                                        NULL }, &out);
    ck_assert_int_eq(st, 2);
    EXPECT_HAS(out, "no module named 'venv_only_env'");
    EXPECT_HAS(out, "VIRTUAL_ENV");
    g_free(out);
    /* PYTHONPATH is honoured (CPython reads it). */
    char *pypath = g_strdup_printf("%s:%s", site, PYDIR);
    st = run_crl((const char *const[]){ "PYTHONPATH", pypath, "VIRTUAL_ENV", NULL, NULL },
                 (const char *const[]){ "env.backend=gym", "env.id=v", "env.entry_point=venv_only_env:VenvEnv", NULL },
                 &out);
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    g_free(out);
    g_free(pypath);
    /* A venv of another Python is ignored with a warning saying why. */
    char *other = g_build_filename(tmpdir, "venv2", "lib", "python2.7", "site-packages", NULL);
    ck_assert_int_eq(g_mkdir_with_parents(other, 0755), 0);
    char *venv2 = g_build_filename(tmpdir, "venv2", NULL);
    st = run_crl((const char *const[]){ "VIRTUAL_ENV", venv2, NULL, NULL },
                 (const char *const[]){ pp, "env.backend=gym", "env.id=CartPole-v1",
                                        "env.entry_point=crl_testenvs.cartpole:CartPoleEnv", NULL }, &out);
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    EXPECT_HAS(out, "is ignored");
    EXPECT_HAS(out, "python2.7");
    g_free(out);
    g_free(venv2);
    g_free(other);
    g_free(pp);
    g_free(mod);
    g_free(site);
    g_free(venv);
}
END_TEST

static Suite *gym_suite(void)
{
    Suite *s = suite_create("gym");
    TCase *tc = tcase_create("specs");
    tcase_add_test(tc, test_cartpole_make_specs);
    tcase_add_test(tc, test_spaces_to_specs);
    tcase_add_test(tc, test_unsupported_spaces);
    suite_add_tcase(s, tc);
    tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reference_cartpole);
    tcase_add_test(tc, test_reference_spaces);
    tcase_add_test(tc, test_reference_legacy_info_dtypes);
    tcase_add_test(tc, test_composite_actions);
    suite_add_tcase(s, tc);
    tc = tcase_create("behaviour");
    tcase_add_test(tc, test_registry_paths);
    tcase_add_test(tc, test_seeding);
    tcase_add_test(tc, test_info_keys);
    tcase_add_test(tc, test_actions);
    tcase_add_test(tc, test_no_per_step_objects);
    tcase_add_test(tc, test_other_threads);
    tcase_add_test(tc, test_pixels);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_missing_modules);
    tcase_add_test(tc, test_bad_envs);
    tcase_add_test(tc, test_os_exit_inline);
    tcase_add_test(tc, test_virtualenv_pythonpath);
    suite_add_tcase(s, tc);
    return s;
}

/* Remove tmpdir and everything under it. */
static void rm_tree(const char *path)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
        GDir *d = g_dir_open(path, 0, NULL);
        const char *name;
        while (d && (name = g_dir_read_name(d))) {
            char *p = g_build_filename(path, name, NULL);
            rm_tree(p);
            g_free(p);
        }
        if (d)
            g_dir_close(d);
        g_rmdir(path);
    } else {
        g_unlink(path);
    }
}

int main(void)
{
    if (!getenv("CRL_PLUGIN_PATH"))
        setenv("CRL_PLUGIN_PATH", GYM_PLUGIN_DIR, 1);
    /* Valgrind: CPython's own allocator confuses memcheck; use malloc. */
    if (getenv("CRL_TEST_VALGRIND"))
        setenv("PYTHONMALLOC", "malloc", 1);
    /* Warnings (deliberate ones: close() raising, casts) stay quiet. */
    setenv("PYTHONWARNINGS", "ignore", 1);
    tmpdir = g_dir_make_tmp("crl-test-gym-XXXXXX", NULL);
    if (!tmpdir) {
        fprintf(stderr, "test_gym: cannot make a temporary directory\n");
        return 1;
    }
    char *mod = g_build_filename(tmpdir, "gym_test_envs.py", NULL);
    if (!g_file_set_contents(mod, test_envs_py, -1, NULL)) {
        fprintf(stderr, "test_gym: cannot write %s\n", mod);
        return 1;
    }
    g_free(mod);
    /* Start Python (and import numpy and the test envs) once here, so the
     * forked tests inherit a warm interpreter. */
    fx f;
    if (fx_open_quiet(&f, "id = CartPole-v1") != CRL_OK) {
        fprintf(stderr, "test_gym: the first gym env failed: %s\n", f.err.message);
        crl_test_pyenv_close(&f);
        return 1;
    }
    crl_test_pyenv_close(&f);
    SRunner *sr = srunner_create(gym_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    rm_tree(tmpdir);
    g_free(tmpdir);
    return failed ? 1 : 0;
}
