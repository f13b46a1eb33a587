/* crl bench gym: pure-Python envs stepped by a plain Python loop and by crl's gym backend, and what crl adds. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <dlfcn.h>
#include <glib.h>
#include <string.h>

#define ACTIONS 4096 /* pre-drawn random actions, reused cyclically */
#define ROUNDS 3     /* best of: the machine is shared, the minimum is the cost */
#define TARGET_NS 500.0

/* The plain Python loop: the same env class, the same kind of actions
 * (Python ints drawn beforehand), reset when an episode ends, timed with
 * perf_counter in doubling batches as crl__bench_measure does.
 * argv: DIR SECONDS ENV [quiet]; ENV is "cartpole" (crl_testenvs' CartPole)
 * or "noop" (CrlBenchNoopEnv: a step that only builds its return values, so
 * what crl spends around it stands out).  Leaves the ns per step in
 * __crl_bench_ns and prints it unless quiet.  Run in crl's own embedded
 * interpreter (the baseline: same libpython, same process) and, for
 * reference, in a child python (Debian links that one's interpreter
 * statically, which runs the same code faster than libpython3.X.so). */
static const char python_loop[] =
    "import random, sys, time\n"
    "import numpy as np\n"
    "if sys.argv[1] not in sys.path:\n"
    "    sys.path.insert(0, sys.argv[1])\n"
    "from crl_testenvs import spaces\n"
    "class CrlBenchNoopEnv:\n"
    "    def __init__(self):\n"
    "        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)\n"
    "        self.action_space = spaces.Discrete(2)\n"
    "        self._obs = np.zeros(4, np.float32)\n"
    "    def reset(self, *, seed=None, options=None):\n"
    "        return self._obs.copy(), {}\n"
    "    def step(self, action):\n"
    "        return self._obs.copy(), 1.0, False, False, {}\n"
    "def crl_bench_loop(which, seconds):\n"
    "    if which == 'noop':\n"
    "        env = CrlBenchNoopEnv()\n"
    "    else:\n"
    "        from crl_testenvs.cartpole import CartPoleEnv\n"
    "        env = CartPoleEnv()\n"
    "    rng = random.Random(1)\n"
    "    actions = [rng.randrange(2) for _ in range(4096)]\n"
    "    env.reset(seed=0)\n"
    "    def run(n, k):\n"
    "        step, reset = env.step, env.reset\n"
    "        for i in range(n):\n"
    "            obs, reward, terminated, truncated, info = step(actions[(k + i) & 4095])\n"
    "            if terminated or truncated:\n"
    "                reset()\n"
    "        return k + n\n"
    "    k = run(100, 0)\n"
    "    n, total = 1, 0\n"
    "    t0 = now = time.perf_counter()\n"
    "    while now - t0 < seconds:\n"
    "        k = run(n, k)\n"
    "        total += n\n"
    "        now = time.perf_counter()\n"
    "        if n < (1 << 24):\n"
    "            n *= 2\n"
    "    return (now - t0) * 1e9 / total\n"
    "if len(sys.argv) > 3:\n"
    "    __crl_bench_ns = crl_bench_loop(sys.argv[3], float(sys.argv[2]))\n"
    "    if len(sys.argv) < 5:\n"
    "        print('%.3f' % __crl_bench_ns)\n";

/* Where the test envs live (tests/python of the source tree). */
static const char *envs_dir(void)
{
    const char *d = g_getenv("CRL_BENCH_GYM_ENVS");
    return d && *d ? d : CRL_GYM_BENCH_ENVS;
}

static int child_figure(const char *dir, double seconds, double *ns, crl_error *err)
{
    char secs[32];
    g_snprintf(secs, sizeof secs, "%g", seconds);
    char *argv[] = { (char *)CRL_PYTHON_EXE, (char *)"-c", (char *)python_loop, (char *)dir, secs,
                     (char *)"cartpole", NULL };
    char *out = NULL, *errout = NULL;
    int status = 0;
    GError *ge = NULL;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout, &status, &ge)) {
        int rc = crl_error_set(err, CRL_E_IO, "cannot run %s for the plain Python loop: %s", CRL_PYTHON_EXE,
                               ge->message);
        g_error_free(ge);
        return rc;
    }
    int rc = CRL_OK;
    if (!g_spawn_check_wait_status(status, NULL) || sscanf(out, "%lf", ns) != 1 || !(*ns > 0))
        rc = crl_error_set(err, CRL_E_RUNTIME, "the plain Python loop (%s) failed: %s", CRL_PYTHON_EXE,
                           errout && *errout ? errout : out);
    g_free(out);
    g_free(errout);
    return rc;
}

/* The embedded interpreter: libpython is in the process once gym.so is
 * loaded (and global: crl_host_promote_libpython), so its entry points are
 * looked up at run time; crl itself never links libpython. */
typedef struct {
    int (*ensure)(void);
    void (*release)(int);
    int (*run)(const char *);
    void *(*add_module)(const char *);
    void *(*getattr)(void *, const char *);
    double (*as_double)(void *);
    void (*decref)(void *);
    void (*clear)(void);
} py_api;

static int py_lookup(py_api *py, crl_error *err)
{
    void **slots[] = { (void **)&py->ensure, (void **)&py->release, (void **)&py->run, (void **)&py->add_module,
                       (void **)&py->getattr, (void **)&py->as_double, (void **)&py->decref, (void **)&py->clear };
    static const char *const names[] = { "PyGILState_Ensure", "PyGILState_Release", "PyRun_SimpleString",
                                         "PyImport_AddModule", "PyObject_GetAttrString", "PyFloat_AsDouble",
                                         "Py_DecRef", "PyErr_Clear" };
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
        if (!(*slots[i] = dlsym(RTLD_DEFAULT, names[i])))
            return crl_error_set(err, CRL_E_NOT_FOUND, "%s is not in the process: the gym plugin did not make "
                                 "libpython global", names[i]);
    return CRL_OK;
}

/* Run python_loop in __main__ with argv DIR SECONDS WHICH quiet (WHICH NULL:
 * only define CrlBenchNoopEnv and crl_bench_loop); the figure into *ns. */
static int embedded_run(const py_api *py, const char *dir, double seconds, const char *which, double *ns,
                        crl_error *err)
{
    GString *code = g_string_new("import sys\nsys.argv = ['crl bench gym', '");
    for (const char *p = dir; *p; p++) { /* a Python string literal */
        if (*p == '\\' || *p == '\'')
            g_string_append_c(code, '\\');
        g_string_append_c(code, *p);
    }
    if (which)
        g_string_append_printf(code, "', '%g', '%s', 'quiet']\n", seconds, which);
    else
        g_string_append(code, "']\n");
    g_string_append(code, python_loop);
    int gil = py->ensure();
    int rc = py->run(code->str);
    double v = 1.0;
    if (rc == 0 && which) {
        void *main_mod = py->add_module("__main__");
        void *o = main_mod ? py->getattr(main_mod, "__crl_bench_ns") : NULL;
        v = o ? py->as_double(o) : -1.0;
        if (o)
            py->decref(o);
    }
    py->clear();
    py->release(gil);
    g_string_free(code, TRUE);
    if (ns)
        *ns = v;
    if (rc != 0 || !(v > 0))
        return crl_error_set(err, CRL_E_RUNTIME, "the plain Python loop failed in the embedded interpreter (its "
                             "traceback is above)");
    return CRL_OK;
}

/* ---- crl's side ------------------------------------------------------------ */

typedef struct {
    crl_config *cfg;
    crl_env *env;
    crl_td *td[2];
    int cur;
    crl_tensor *actions[ACTIONS];
    int64_t next;
    crl_td_key *action_key;
    crl_error err;
    bool failed;
} gym_loop;

/* step + step_mdp_into between two TensorDicts reused forever, as bench envs. */
static void run_crl(void *p, uint64_t n)
{
    gym_loop *g = p;
    for (uint64_t i = 0; i < n && !g->failed; i++) {
        crl_td *td = g->td[g->cur], *next = g->td[g->cur ^ 1];
        if (crl_td_set_k(td, g->action_key, g->actions[g->next++ % ACTIONS], &g->err) ||
            crl_env_step(g->env, td, &g->err) || crl_env_step_mdp_into(g->env, td, next, &g->err)) {
            g->failed = true;
            return;
        }
        g->cur ^= 1;
    }
}

static void loop_close(gym_loop *g)
{
    for (int i = 0; i < ACTIONS; i++)
        crl_tensor_unref(g->actions[i]);
    crl_td_unref(g->td[0]);
    crl_td_unref(g->td[1]);
    crl_td_key_free(g->action_key);
    crl_env_free(g->env);
    crl_config_free(g->cfg);
    memset(g, 0, sizeof *g);
}

/* [env] backend = gym with `entry_point`, one env (batch []), same-step
 * auto-reset as the Python loop resets right after the step that ended. */
static int loop_open(gym_loop *g, crl_host *host, const char *entry_point, crl_error *err)
{
    memset(g, 0, sizeof *g);
    /* Index actions (Python ints), as the plain loop draws them. */
    char *ini = g_strdup_printf("[env]\nbackend = gym\nid = %s\nentry_point = %s\nauto_reset = same_step\n"
                                "categorical_action_encoding = true\n",
                                strchr(entry_point, ':') + 1, entry_point);
    crl_error e;
    crl_error_clear(&e);
    int rc = (g->cfg = crl_config_new(&e)) ? crl_config_load_buffer(g->cfg, "crl bench gym", ini, strlen(ini),
                                                                     CRL_LAYER_FILE, &e)
                                           : CRL_E_NOMEM;
    g_free(ini);
    if (rc || !(g->env = crl_env_from_config(host, g->cfg, "env", &e)) ||
        !(g->action_key = crl_td_key_new("action", &e)))
        return crl_error_pass(err, &e, CRL_E_INVALID);
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    for (int i = 0; i < ACTIONS; i++) {
        if (!(g->actions[i] = crl_tensor_new(CRL_I64, 0, NULL, &e)))
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        *(int64_t *)crl_tensor_data(g->actions[i]) = (int64_t)crl_rng_below(&rng, 2);
    }
    crl_env_set_seed(g->env, 0);
    if (!(g->td[0] = crl_env_reset(g->env, NULL, &e)) ||
        !(g->td[1] = crl_td_new(crl_env_batch_ndim(g->env), crl_env_batch_shape(g->env), &e)))
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    return CRL_OK;
}

static int crl_figure(gym_loop *g, double seconds, double *ns, crl_error *err)
{
    crl_bench_result r = crl__bench_measure(run_crl, g, seconds, 100);
    if (g->failed)
        return crl_error_pass(err, &g->err, CRL_E_RUNTIME);
    *ns = r.ns_per_op;
    return CRL_OK;
}

static void line(const char *what, double ns)
{
    printf("  %-62s %9.1f ns/step  %7.1f k steps/s\n", what, ns, 1e6 / ns);
}

static inline double best(int r, double cur, double v)
{
    return r == 0 || v < cur ? v : cur;
}

int crl__bench_gym(double seconds)
{
    crl_error err = { 0 };
    crl_config *cfg = NULL;
    crl_host *host = NULL;
    gym_loop cart, noop;
    memset(&cart, 0, sizeof cart);
    memset(&noop, 0, sizeof noop);
    py_api py;
    int status = CRL_EXIT_RUNTIME;
    const char *dir = envs_dir();
    char *probe = g_build_filename(dir, "crl_testenvs", "cartpole.py", NULL);
    bool have_envs = g_file_test(probe, G_FILE_TEST_IS_REGULAR);
    g_free(probe);
    if (!have_envs) {
        crl_error_set(&err, CRL_E_NOT_FOUND, "no crl_testenvs/cartpole.py under %s; crl bench gym drives the test envs "
                      "of crl's source tree (tests/python): set CRL_BENCH_GYM_ENVS=DIR", dir);
        goto out;
    }
    if (crl__bench_python_host("bench gym", &cfg, &host, &err))
        goto out;
    /* CrlBenchNoopEnv must be in __main__ before crl makes one. */
    if (py_lookup(&py, &err) || embedded_run(&py, dir, seconds, NULL, NULL, &err) ||
        loop_open(&cart, host, "crl_testenvs.cartpole:CartPoleEnv", &err) ||
        loop_open(&noop, host, "__main__:CrlBenchNoopEnv", &err))
        goto out;

    printf("crl bench gym (%.2f s per measurement, best of %d; one env; random actions drawn beforehand; ended "
           "episodes reset)\n", seconds, ROUNDS);
    double py_cart = 0, py_noop = 0, child = 0, crl_cart = 0, crl_noop = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double a = 0, b = 0, c = 0, d = 0, e = 0;
        if (embedded_run(&py, dir, seconds, "cartpole", &a, &err) || crl_figure(&cart, seconds, &b, &err) ||
            embedded_run(&py, dir, seconds, "noop", &c, &err) || crl_figure(&noop, seconds, &d, &err) ||
            child_figure(dir, seconds, &e, &err))
            goto out;
        py_cart = best(r, py_cart, a);
        crl_cart = best(r, crl_cart, b);
        py_noop = best(r, py_noop, c);
        crl_noop = best(r, crl_noop, d);
        child = best(r, child, e);
    }
    double added = crl_noop - py_noop;
    printf("CartPole-v1 in pure Python (crl_testenvs.cartpole:CartPoleEnv):\n");
    line("plain Python loop, in crl's embedded interpreter", py_cart);
    line("crl: crl_env_step + crl_env_step_mdp_into (gym backend)", crl_cart);
    printf("  crl/python time: %.3fx (%+.1f ns per step)\n", crl_cart / py_cart, crl_cart - py_cart);
    line("plain Python loop, child " CRL_PYTHON_EXE " (for reference)", child);
    printf("  crl vs that: %.3fx (%+.1f ns per step; its statically linked interpreter runs the same Python "
           "faster than libpython does)\n", crl_cart / child, crl_cart - child);
    printf("a no-op env (step returns a new float32 [4] array, 1.0, False, False, {}), so crl's share stands out:\n");
    line("plain Python loop, in crl's embedded interpreter", py_noop);
    line("crl: crl_env_step + crl_env_step_mdp_into (gym backend)", crl_noop);
    printf("  crl adds %+.1f ns per step (target <= %.0f ns): %s\n", added, TARGET_NS,
           added <= TARGET_NS ? "met" : "missed");
    /* The executors side by side (crl bench python alone prints only these). */
    status = crl__bench_python_executors(host, seconds);
out:
    if (err.code)
        crl__cli_print_error("bench gym", &err);
    loop_close(&noop);
    loop_close(&cart);
    crl_host_free(host);
    crl_config_free(cfg);
    return status;
}
