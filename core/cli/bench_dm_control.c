/* crl bench dm_control: env steps/s per suite task through the host, next to
 * bare mj_step on the same model in the same run, and pixel frames/s. */
#define _GNU_SOURCE
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <dlfcn.h>
#include <glib.h>
#include <math.h>
#include <mujoco/mujoco.h>
#include <string.h>
#include <time.h>

#define ACTIONS 256
#define TURNS 7
#define RESETS 8 /* episode starts reset_work takes from the probe env, after its first */

static double thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* crl__bench_measure on this thread's CPU clock: time the machine gave to
 * other processes (a shared box) counts for neither side of a ratio. */
static crl_bench_result measure_cpu(void (*fn)(void *, uint64_t), void *state, double seconds, uint64_t warmup)
{
    uint64_t n = 1, total = 0;
    fn(state, warmup);
    double start = thread_cpu_ns(), now = start;
    while (now - start < seconds * 1e9) {
        fn(state, n);
        total += n;
        now = thread_cpu_ns();
        if (n < (1u << 24))
            n *= 2;
    }
    crl_bench_result r = { (now - start) / (double)total, total };
    return r;
}

/* The few libmujoco entry points the bare loop needs, looked up at run time
 * (crl itself never links libmujoco; its header gives the types). */
typedef struct mj_api {
    void *lib;
    mjModel *(*copy_model)(mjModel *dest, const mjModel *src);
    mjData *(*make_data)(const mjModel *m);
    void (*step)(const mjModel *m, mjData *d);
    void (*step1)(const mjModel *m, mjData *d);
    void (*step2)(const mjModel *m, mjData *d);
    void (*forward)(const mjModel *m, mjData *d);
    void (*reset_data)(const mjModel *m, mjData *d);
    mjfGeneric *cb_control; /* libmujoco's mjcb_control, which reset_work borrows to count */
    void (*delete_data)(mjData *d);
    void (*delete_model)(mjModel *m);
} mj_api;

static int mj_lookup(mj_api *mj, crl_error *err)
{
    static const char *const names[] = { "libmujoco.so.2.2.2", "libmujoco.so" };
    memset(mj, 0, sizeof *mj);
    for (size_t i = 0; i < G_N_ELEMENTS(names) && !mj->lib; i++)
        mj->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!mj->lib)
        return crl_error_set(err, CRL_E_NOT_FOUND, "crl bench dm_control: cannot open libmujoco (%s)", dlerror());
    *(void **)&mj->copy_model = dlsym(mj->lib, "mj_copyModel");
    *(void **)&mj->make_data = dlsym(mj->lib, "mj_makeData");
    *(void **)&mj->step = dlsym(mj->lib, "mj_step");
    *(void **)&mj->step1 = dlsym(mj->lib, "mj_step1");
    *(void **)&mj->step2 = dlsym(mj->lib, "mj_step2");
    *(void **)&mj->forward = dlsym(mj->lib, "mj_forward");
    *(void **)&mj->reset_data = dlsym(mj->lib, "mj_resetData");
    mj->cb_control = (mjfGeneric *)dlsym(mj->lib, "mjcb_control");
    *(void **)&mj->delete_data = dlsym(mj->lib, "mj_deleteData");
    *(void **)&mj->delete_model = dlsym(mj->lib, "mj_deleteModel");
    if (!mj->copy_model || !mj->make_data || !mj->step || !mj->step1 || !mj->step2 || !mj->forward || !mj->reset_data || !mj->cb_control ||
        !mj->delete_data || !mj->delete_model)
        return crl_error_set(err, CRL_E_NOT_FOUND, "crl bench dm_control: libmujoco lacks an entry point");
    return CRL_OK;
}

typedef struct bare {
    const mj_api *mj;
    mjModel *m;
    mjData *d;
    int64_t n_sub;
    const double *actions; /* the host's ACTIONS rows, so both simulate the same thing */
    uint64_t next;
    /* The env's episode resets as physics calls (reset_work): every ep_len
     * control steps, rst_clr mj_resetData, rst_step mj_step and rst_fwd mj_forward. */
    int64_t ep_len, ep_pos, rst_clr, rst_step, rst_fwd;
    /* The states (qpos, qvel, act) the probe env's resets started episodes from, taken in turn, and the model
     * as each reset left it (a task may change it per episode: escape draws a new terrain). */
    double *starts;
    mjModel **models;
    int n_starts, next_start;
} bare;

static void run_bare(void *p, uint64_t n)
{
    bare *b = p;
    for (uint64_t i = 0; i < n; i++)
        b->mj->step(b->m, b->d);
}

/* One control step the way the suite (and the backend) steps: RK4 models
 * mj_step each sub-step, others start with mj_step2 on the forces of the
 * last mj_step1; then mj_step1 so positions are current for observations. */
static void run_bare_suite(void *p, uint64_t n)
{
    bare *b = p;
    bool rk4 = b->m->opt.integrator == mjINT_RK4;
    const int nu = b->m->nu;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(b->d->ctrl, b->actions + (b->next++ % ACTIONS) * (size_t)nu, sizeof(double) * (size_t)nu);
        if (rk4)
            b->mj->step(b->m, b->d);
        else
            b->mj->step2(b->m, b->d);
        for (int64_t k = 1; k < b->n_sub; k++)
            b->mj->step(b->m, b->d);
        b->mj->step1(b->m, b->d);
    }
}

/* The state an episode starts from, at rest: the model's qpos0, no velocity,
 * activation, control or applied force, no warm start (mj_resetData's values
 * for them, without its clear of the whole arena). */
static void bare_rest(bare *b)
{
    const mjModel *m = b->m;
    mjData *d = b->d;
    d->time = 0;
    memcpy(d->qpos, m->qpos0, sizeof(mjtNum) * (size_t)m->nq);
    memset(d->qvel, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->qacc_warmstart, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->qfrc_applied, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->xfrc_applied, 0, sizeof(mjtNum) * 6 * (size_t)m->nbody);
    memset(d->act, 0, sizeof(mjtNum) * (size_t)m->na);
    memset(d->ctrl, 0, sizeof(mjtNum) * (size_t)m->nu);
}

/* The next of the env's episode starts into the data (time 0), on its model. */
static void bare_start(bare *b)
{
    b->m = b->models[b->next_start];
    const mjModel *m = b->m;
    mjData *d = b->d;
    const double *s = b->starts + (size_t)b->next_start * (size_t)(m->nq + m->nv + m->na);
    b->next_start = (b->next_start + 1) % b->n_starts;
    d->time = 0;
    memcpy(d->qpos, s, sizeof(mjtNum) * (size_t)m->nq);
    memcpy(d->qvel, s + m->nq, sizeof(mjtNum) * (size_t)m->nv);
    memcpy(d->act, s + m->nq + m->nv, sizeof(mjtNum) * (size_t)m->na);
}

/* run_bare_suite in the env's episodes: after every ep_len control steps,
 * the mj_step calls one of the env's resets makes (from rest, as its
 * settling steps start from a reset pose), then one of the states the env's
 * episodes started from and the reset's mj_forward calls on it (the last
 * one is the suite's after_reset, which the next step builds on).  The
 * initial-state draw, the observation and mj_resetData's arena clears are
 * not included. */
static void run_bare_episodes(void *p, uint64_t n)
{
    bare *b = p;
    for (uint64_t i = 0; i < n; i++) {
        run_bare_suite(b, 1);
        if (b->ep_len > 0 && ++b->ep_pos == b->ep_len) {
            b->ep_pos = 0;
            bare_rest(b);
            for (int64_t k = 0; k < b->rst_clr; k++)
                b->mj->reset_data(b->m, b->d);
            for (int64_t k = 0; k < b->rst_step; k++)
                b->mj->step(b->m, b->d);
            bare_start(b);
            for (int64_t k = 0; k < b->rst_fwd; k++)
                b->mj->forward(b->m, b->d);
        }
    }
}

/* MuJoCo calls mjcb_control once per forward evaluation (each mj_forward, mj_step1 and each of mj_step's, 4 for
 * RK4) with the model and data: bare_open and reset_work borrow it to see the env's, and to count.  A clear of the
 * data (mj_resetData, or crl's own reset) zeroes its timers: the callback marks mj_inverse's timer, which nothing
 * here runs, and a mark found gone tells a clear since the last evaluation. */
static int64_t cb_calls, cb_clears;
static const mjModel *cb_model;
static mjData *cb_data;

static void count_control(const mjModel *m, mjData *d)
{
    cb_calls++;
    cb_model = m;
    cb_data = d;
    if (!d->timer[mjTIMER_INVERSE].number)
        cb_clears++;
    d->timer[mjTIMER_INVERSE].number = 1;
}

/* The state a reset put in its "state" (time, qpos, qvel, act, ...) into row r of b's starts. */
static int take_start(bare *b, crl_td *td, int r, const char *id, crl_error *err)
{
    const mjModel *m = b->m;
    size_t row = (size_t)(m->nq + m->nv + m->na);
    crl_tensor *st = crl_td_get(td, "state");
    if (!st || crl_tensor_dtype(st) != CRL_F64 || crl_tensor_numel(st) < (int64_t)row + 1)
        return crl_error_set(err, CRL_E_INVALID, "crl bench dm_control: %s: the reset gave no state to start "
                             "the bare loops from", id);
    memcpy(b->starts + (size_t)r * row, (const double *)crl_tensor_data(st) + 1, row * sizeof(double));
    return CRL_OK;
}

/* A copy of the probe env's own model as its first reset (host_open's, run with count_control hooked) left it
 * (the task's edits, per-env parameters and per-episode terrain included), and data for it in the state that
 * reset gave: the timed env (same config and seed) starts its first episode there too, so the bare loop steps
 * the same model through the same states for as long as that episode lasts. */
static int bare_open(bare *b, const mj_api *mj, crl_env *probe, crl_td *reset, crl_error *err)
{
    memset(b, 0, sizeof b[0]);
    b->mj = mj;
    const char *id = crl_env_id(probe);
    if (!cb_model)
        return crl_error_set(err, CRL_E_RUNTIME, "crl bench dm_control: %s: the reset ran no MuJoCo forward", id);
    b->n_starts = RESETS + 1;
    b->models = g_new0(mjModel *, (gsize)b->n_starts);
    if (!(b->m = b->models[0] = mj->copy_model(NULL, cb_model)))
        return crl_error_set(err, CRL_E_NOMEM, "crl bench dm_control: mj_copyModel failed");
    b->starts = g_new(double, (gsize)b->n_starts * (gsize)(b->m->nq + b->m->nv + b->m->na));
    if (!(b->d = mj->make_data(b->m)))
        return crl_error_set(err, CRL_E_NOMEM, "crl bench dm_control: mj_makeData failed");
    int rc = take_start(b, reset, 0, id, err);
    if (!rc) {
        b->n_starts = 1;
        bare_start(b);
        mj->forward(b->m, b->d); /* the suite's after_reset */
        b->n_starts = RESETS + 1;
    }
    return rc;
}

/* b, and be sharing its starts and models. */
static void bare_close(bare *b, bare *be)
{
    if (be->d)
        b->mj->delete_data(be->d);
    if (b->d)
        b->mj->delete_data(b->d);
    for (int k = 0; b->models && k < b->n_starts; k++)
        if (b->models[k])
            b->mj->delete_model(b->models[k]);
    g_free(b->models);
    g_free(b->starts);
}

typedef struct host_loop {
    crl_env *env;
    crl_config *cfg;
    crl_td_key *action_key; /* as a policy writes it: through a key handle */
    crl_td *td[2];
    int cur;
    double *actions; /* ACTIONS rows of the action leaf */
    size_t row;      /* doubles per row */
    uint64_t next;
    crl_error err;
    bool failed;
} host_loop;

static void host_close(host_loop *h)
{
    crl_td_unref(h->td[0]);
    crl_td_unref(h->td[1]);
    crl_td_key_free(h->action_key);
    crl_env_free(h->env);
    crl_config_free(h->cfg);
    g_free(h->actions);
    memset(h, 0, sizeof *h);
}

/* state: return_state, for sub_steps to read the physics time (the timed env goes without, as by default). */
static int host_open(host_loop *h, crl_host *host, const char *id, bool pixels, bool state, crl_error *err)
{
    memset(h, 0, sizeof *h);
    char *text = g_strdup_printf("[env]\nbackend = dm_control\nid = %s\nauto_reset = same_step\nseed = 1\n"
                                 "return_state = %s\n%s", id, state ? "true" : "false",
                                 pixels ? "from_pixels = true\npixels_only = true\n" : "");
    int rc = CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    if (!(h->cfg = crl_config_new(&e)) ||
        crl_config_load_buffer(h->cfg, "crl bench dm_control", text, strlen(text), CRL_LAYER_FILE, &e) ||
        !(h->env = crl_env_from_config(host, h->cfg, "env", &e)) || !(h->td[0] = crl_env_reset(h->env, NULL, &e)) ||
        !(h->td[1] = crl_td_new(crl_env_batch_ndim(h->env), crl_env_batch_shape(h->env), &e)) ||
        !(h->action_key = crl_td_key_new("action", &e)))
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
    g_free(text);
    if (rc)
        return rc;
    /* Random actions drawn up front, so the rng is not timed. */
    crl_tensor *a = NULL;
    for (int k = 0; k < ACTIONS && !rc; k++) {
        rc = crl_env_rand_action(h->env, h->td[0], err);
        a = rc ? NULL : crl_td_get(h->td[0], "action");
        if (a && !h->actions) {
            h->row = crl_tensor_nbytes(a) / sizeof(double);
            h->actions = g_new(double, (gsize)ACTIONS * h->row);
        }
        if (a)
            memcpy(h->actions + (size_t)k * h->row, crl_tensor_data(a), h->row * sizeof(double));
    }
    return rc;
}

/* The next of the ACTIONS rows into td's action (made once by a random draw, so the entry exists). */
static int next_action(host_loop *h, crl_td *td)
{
    crl_tensor *a = crl_td_get_k(td, h->action_key);
    int rc = a ? CRL_OK : crl_env_rand_action(h->env, td, &h->err);
    if (!rc) {
        a = crl_td_get_k(td, h->action_key);
        memcpy(crl_tensor_data(a), h->actions + (h->next++ % ACTIONS) * h->row, h->row * sizeof(double));
    }
    return rc;
}

static void run_host(void *p, uint64_t n)
{
    host_loop *h = p;
    for (uint64_t i = 0; i < n && !h->failed; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        int rc = next_action(h, td);
        if (!rc)
            rc = crl_env_step(h->env, td, &h->err);
        if (!rc)
            rc = crl_env_step_mdp_into(h->env, td, next, &h->err);
        if (rc) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* run_host through crl_env_step_and_maybe_reset (TorchRL's step_and_maybe_reset, which its collectors take):
 * one call steps, moves "next" into the other root and resets the envs that ended. */
static void run_host_smr(void *p, uint64_t n)
{
    host_loop *h = p;
    for (uint64_t i = 0; i < n && !h->failed; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        int rc = next_action(h, td);
        if (!rc)
            rc = crl_env_step_and_maybe_reset(h->env, td, next, &h->err);
        if (rc) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* The env's physics steps per control step, from the time its state reports. */
static int sub_steps(host_loop *h, double timestep, int64_t *out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *td = crl_env_reset(h->env, NULL, &e);
    if (!td)
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    int rc = crl_env_rand_action(h->env, td, err);
    if (!rc)
        rc = crl_env_step(h->env, td, err);
    if (!rc) {
        crl_tensor *st = crl_td_get(crl_td_get_td(td, "next"), "state");
        double t = st ? ((const double *)crl_tensor_data(st))[0] : 0;
        *out = (int64_t)llround(t / timestep);
        if (*out < 1)
            rc = crl_error_set(err, CRL_E_INVALID, "crl bench dm_control: %s reports no physics time", crl_env_id(h->env));
    }
    crl_td_unref(td);
    if (!rc)
        rc = crl_env_reset(h->env, h->td[0], &e) ? CRL_OK : crl_error_pass(err, &e, CRL_E_RUNTIME);
    if (!rc)
        crl_td_unref(h->td[0]); /* reset returned a new reference to it */
    return rc;
}

/* The physics one episode reset of the env makes, as mj_resetData, mj_step and mj_forward calls, averaged over
 * RESETS resets: the clears beyond the reset's own are mj_resetData calls (quadruped's height search makes one per
 * try, as the suite's), its mjData's step timer counts the mj_step (and mj_step1) calls since the last clear, the
 * evaluations counted through mjcb_control beyond those steps' own are the mj_forward calls.  Also the states the
 * resets start episodes from and the model as each left it: right after the probe's first reset, these are the
 * timed env's next episodes (same seed), which the episodic bare loop then follows. */
static int reset_work(host_loop *h, bare *b, crl_error *err)
{
    const mj_api *mj = b->mj;
    mjfGeneric saved = *mj->cb_control;
    cb_calls = 0;
    *mj->cb_control = count_control;
    b->mj->step(b->m, b->d);
    int64_t per_step = cb_calls, calls = 0, steps = 0, clears = 0;
    int rc = CRL_OK;
    for (int r = 1; r <= RESETS && !rc; r++) {
        cb_calls = cb_clears = 0;
        cb_data = NULL;
        crl_error e;
        crl_error_clear(&e);
        crl_td *td = crl_env_reset(h->env, NULL, &e);
        if (!td) {
            rc = crl_error_pass(err, &e, CRL_E_RUNTIME);
            break;
        }
        rc = take_start(b, td, r, crl_env_id(h->env), err);
        if (!rc && !(b->models[r] = mj->copy_model(NULL, cb_model)))
            rc = crl_error_set(err, CRL_E_NOMEM, "crl bench dm_control: mj_copyModel failed");
        crl_td_unref(td);
        calls += cb_calls;
        clears += cb_clears;
        steps += cb_data ? cb_data->timer[mjTIMER_STEP].number : 0;
    }
    *mj->cb_control = saved;
    if (rc)
        return rc;
    b->rst_step = (steps + RESETS / 2) / RESETS;
    /* The first clear is the reset's own (crl's arena-preserving one, which the episode start's state stands for). */
    b->rst_clr = clears > RESETS ? (clears - RESETS + RESETS / 2) / RESETS : 0;
    int64_t fwd = calls - steps * per_step;
    b->rst_fwd = fwd > 0 ? (fwd + RESETS / 2) / RESETS : 0;
    b->ep_len = crl_env_max_episode_steps(h->env);
    b->next_start = 0;
    bare_start(b);
    b->mj->forward(b->m, b->d);
    return CRL_OK;
}

typedef struct frames {
    crl_env *env;
    uint8_t *rgb;
    crl_tensor *frame;
    crl_error err;
    bool failed;
} frames;

static void run_render(void *p, uint64_t n)
{
    frames *f = p;
    for (uint64_t i = 0; i < n && !f->failed; i++)
        if (crl_env_render(f->env, 0, f->frame, &f->err))
            f->failed = true;
}

/* What one task's row holds: its two host envs, the plugin alone, the bare loops. */
static void task_close(host_loop *h, host_loop *hs, crl__bench_backend *pb, crl_env_specs *pspecs, bare *b, bare *be)
{
    host_close(h);
    host_close(hs);
    crl__bench_backend_close(pb, pspecs);
    bare_close(b, be);
}

static char **only;

void crl__bench_dm_control_only(const char *names)
{
    g_strfreev(only);
    only = g_strsplit(names, ",", -1);
}

static bool task_wanted(const char *id)
{
    return !only || g_strv_contains((const char *const *)only, id);
}

/* Each --only name is one of the plugin's tasks, else a usage error listing them. */
static bool only_known(const char *const *ids)
{
    for (char **o = only; o && *o; o++) {
        if (g_strv_contains(ids, *o))
            continue;
        GString *known = g_string_new(NULL);
        for (const char *const *id = ids; *id; id++)
            g_string_append_printf(known, "%s%s", id == ids ? "" : ", ", *id);
        fprintf(stderr, "crl bench dm_control: --only: no task '%s' (the plugin has %s)\n", *o, known->str);
        g_string_free(known, TRUE);
        return false;
    }
    return true;
}

int crl__bench_dm_control(double seconds)
{
    crl_error err = { 0 };
    crl_host *host = crl_host_new(NULL, &err);
    mj_api mj;
    int status = CRL_EXIT_RUNTIME;
    if (!host)
        goto out;
    if (crl_host_load_name(host, "dm_control", &err)) {
        /* Not on the plugin path: the one this build made, if present. */
        crl_error first = err;
        crl_error_clear(&err);
        if (!g_file_test(CRL_DM_CONTROL_BUILD_PLUGIN, G_FILE_TEST_IS_REGULAR) ||
            crl_host_load_path(host, CRL_DM_CONTROL_BUILD_PLUGIN, &err)) {
            if (!err.code)
                err = first;
            crl_error_prefix(&err, "crl bench dm_control needs the dm_control plugin: ");
            goto out;
        }
    }
    if (mj_lookup(&mj, &err))
        goto out;
    const crl_component *comp = crl_host_find(host, CRL_KIND_ENV, "dm_control");
    const crl_env_ops *ops = comp ? crl__cli_env_ops(comp) : NULL;
    if (!ops) {
        crl_error_set(&err, CRL_E_PLUGIN, "crl bench dm_control: the plugin registers no usable env/dm_control");
        goto out;
    }
    if (!only_known(ops->list())) {
        crl_host_free(host);
        return CRL_EXIT_USAGE;
    }
    printf("dm_control tasks, one env, random actions, auto-reset (%.2f s per figure):\n", seconds);
    printf("  %-24s %11s %4s %14s %15s %10s %7s %14s %10s %10s %12s %9s %9s\n", "task", "env steps/s", "sub",
           "bare mj_step/s", "bare suite st/s", "crl/suite", "mj/crl", "rst clr/st/fwd", "crl/s+rst", "smr/s+rst",
           "plugin st/s", "crl/plug", "smr/plug");
    for (const char *const *id = ops->list(); *id; id++) {
        if (!task_wanted(*id))
            continue;
        host_loop h, hs; /* hs: another env of the same config, stepped through step_and_maybe_reset */
        bare b, be; /* be: the same model with data of its own, stepped in episodes */
        memset(&b, 0, sizeof b);
        memset(&be, 0, sizeof be);
        int64_t n_sub = 0;
        /* A probe env first, of the timed envs' config and seed: its first reset's model (copied) and state are
         * where the bare loops start (escape's per-episode terrain included: a bare loop on another terrain, or
         * upright at qpos0 while the env tumbles, casts its rangefinders over other heightfield cells, up to
         * 4x cheaper), its next resets the physics of an episode start, its state tells the sub-steps. */
        host_loop probe;
        mjfGeneric cb_saved = *mj.cb_control;
        cb_model = NULL;
        *mj.cb_control = count_control;
        int rc = host_open(&probe, host, *id, false, true, &err);
        *mj.cb_control = cb_saved;
        if (!rc)
            rc = bare_open(&b, &mj, probe.env, probe.td[0], &err);
        if (!rc) {
            be = b;
            if (!(be.d = mj.make_data(b.m)))
                rc = crl_error_set(&err, CRL_E_NOMEM, "crl bench dm_control: mj_makeData failed");
        }
        if (!rc)
            rc = reset_work(&probe, &be, &err);
        if (!rc)
            rc = sub_steps(&probe, b.m->opt.timestep, &n_sub, &err);
        host_close(&probe);
        memset(&h, 0, sizeof h);
        memset(&hs, 0, sizeof hs);
        if (!rc)
            rc = host_open(&h, host, *id, false, false, &err);
        if (!rc)
            rc = host_open(&hs, host, *id, false, false, &err);
        /* pb: the plugin's env ops alone on buffers of our own (the suite's step: physics, observation, reward,
         * the env's resets), same seed and actions: what only the host adds shows against it. */
        crl__bench_backend pb;
        crl_env_specs pspecs;
        memset(&pb, 0, sizeof pb);
        memset(&pspecs, 0, sizeof pspecs);
        crl__bench_bank bank = { (uint8_t *)h.actions, h.row * sizeof(double), ACTIONS };
        if (!rc && !(rc = crl__bench_backend_open(&pb, host, h.cfg, "dm_control", *id, 1, 1, &pspecs, &err))) {
            pb.bank = &bank;
            if (crl_tensor_nbytes(crl_td_get(pb.buffers, "action")) != bank.step_bytes)
                rc = crl_error_set(&err, CRL_E_SHAPE, "crl bench dm_control: %s: the plugin's action buffer differs "
                                   "from the host's action", *id);
        }
        if (rc) {
            task_close(&h, &hs, &pb, &pspecs, &b, &be);
            goto out;
        }
        b.n_sub = be.n_sub = n_sub;
        b.actions = be.actions = h.actions;
        /* Host and bare stepping in turns, so load that comes and goes on a
         * shared machine falls on both; the ratio is the median turn's. */
        double ratio[TURNS], ratio_rst[TURNS], ratio_smr[TURNS], ratio_plug[TURNS], ratio_smr_plug[TURNS];
        double host_ns = 0, suite_ns = 0, plug_ns = 0;
        uint64_t host_ops = 0, suite_ops = 0, plug_ops = 0;
        for (int t = 0; t < TURNS && !h.failed && !hs.failed && !pb.failed; t++) {
            crl_bench_result rh = measure_cpu(run_host, &h, seconds / TURNS, t ? 10 : 100);
            crl_bench_result rm = measure_cpu(run_host_smr, &hs, seconds / TURNS, t ? 10 : 100);
            crl_bench_result rs = measure_cpu(run_bare_suite, &b, seconds / TURNS, t ? 10 : 100);
            crl_bench_result re = measure_cpu(run_bare_episodes, &be, seconds / TURNS, t ? 10 : 100);
            crl_bench_result rp = measure_cpu(crl__bench_backend_run, &pb, seconds / TURNS, t ? 10 : 100);
            ratio_plug[t] = rh.ns_per_op / rp.ns_per_op;
            ratio_smr_plug[t] = rm.ns_per_op / rp.ns_per_op;
            plug_ns += rp.ns_per_op * (double)rp.ops;
            plug_ops += rp.ops;
            ratio[t] = rh.ns_per_op / rs.ns_per_op;
            ratio_rst[t] = rh.ns_per_op / re.ns_per_op;
            ratio_smr[t] = rm.ns_per_op / re.ns_per_op;
            host_ns += rh.ns_per_op * (double)rh.ops;
            host_ops += rh.ops;
            suite_ns += rs.ns_per_op * (double)rs.ops;
            suite_ops += rs.ops;
        }
        crl_bench_result rb = measure_cpu(run_bare, &b, seconds / TURNS, 100);
        if (h.failed || hs.failed || pb.failed) {
            err = h.failed ? h.err : hs.failed ? hs.err : pb.err;
            task_close(&h, &hs, &pb, &pspecs, &b, &be);
            goto out;
        }
        double env_rate = 1e9 * (double)host_ops / host_ns, bare_rate = 1e9 / rb.ns_per_op;
        double suite_rate = 1e9 * (double)suite_ops / suite_ns;
        char rst[48];
        snprintf(rst, sizeof rst, "%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, (gint64)be.rst_clr,
                 (gint64)be.rst_step, (gint64)be.rst_fwd);
        printf("  %-24s %11.0f %4" G_GINT64_FORMAT " %14.0f %15.0f %9.2fx %6.2fx %14s %9.2fx %9.2fx %12.0f %8.2fx "
               "%8.2fx\n", *id, env_rate, (gint64)n_sub, bare_rate, suite_rate, crl__bench_median(ratio, TURNS),
               bare_rate / ((double)n_sub * env_rate), be.ep_len > 0 ? rst : "no episodes",
               crl__bench_median(ratio_rst, TURNS), crl__bench_median(ratio_smr, TURNS),
               1e9 * (double)plug_ops / plug_ns, crl__bench_median(ratio_plug, TURNS),
               crl__bench_median(ratio_smr_plug, TURNS));
        task_close(&h, &hs, &pb, &pspecs, &b, &be);
    }
    printf("  sub: physics steps per env step.  bare suite st/s: control steps/s of the suite's stepping on\n"
           "  a copy of the env's model (mj_step2 .. mj_step1, which keeps observations current), the same actions,\n"
           "  from the env's first reset state on the model as that reset left it (escape's terrain), so it\n"
           "  steps the env's first episode; no host, no resets, no observation or reward.\n"
           "  env steps/s: crl_env_step + step_mdp_into, as the collector steps, the task's observation and\n"
           "  reward included (the suite computes them every step too) and its resets (cheetah's settles\n"
           "  200 physics steps per episode, as the suite).\n"
           "  crl/suite: the host's time per step over the bare one, the median of %d turns taken\n"
           "  alternately (1.00x: no overhead).  mj/crl: bare mj_step/s over the physics steps/s crl\n"
           "  delivers, stepping semantics included.  Rates are per second of this thread's CPU time.\n"
           "  rst clr/st/fwd: the mj_resetData, mj_step and mj_forward calls one episode reset of the env\n"
           "  makes beyond its own arena-preserving clear (counted in a probe env through MuJoCo's timers and\n"
           "  mjcb_control, the mean of %d resets; the suite's resets make the same: 0/0/2 is Physics.reset's\n"
           "  and after_reset's forwards).  crl/s+rst: the host's time per step over the bare suite stepping\n"
           "  (own data, same model and actions) in episodes of the env's time limit (none without one):\n"
           "  at each episode start it sets the state at rest, makes those calls, and takes the next of the\n"
           "  probe env's reset states (and the model as it left it) before the forwards; in the same turns.\n"
           "  The bare side gets no initial-state draw, no observation and not the suite's first mj_resetData\n"
           "  per reset (crl avoids its arena clear).\n"
           "  smr/s+rst: as crl/s+rst, the host stepping through crl_env_step_and_maybe_reset (TorchRL's\n"
           "  step_and_maybe_reset: the step, step_mdp into the other root and the resets in one call) instead.\n"
           "  plugin st/s: the plugin's env ops alone (no host env: buffers bound by the bench, the action\n"
           "  copied in, ops->step, ops->reset of an ended env), i.e. the suite's own step in C: physics,\n"
           "  observation and reward, with the env's resets; same seed and actions, in the same turns.\n"
           "  crl/plug and smr/plug: the host's time per step over it, through step + step_mdp_into and\n"
           "  through step_and_maybe_reset: what the host alone adds (1.00x: nothing).\n",
           TURNS, RESETS);

    /* Pixels: the tutorial's acrobot, 240 x 320 from camera 0 (with --only, when acrobot/swingup is named). */
    if (!task_wanted("acrobot/swingup")) {
        status = 0;
        goto out;
    }
    host_loop h;
    if (host_open(&h, host, "acrobot/swingup", true, false, &err)) {
        host_close(&h);
        goto out;
    }
    frames f = { .env = h.env };
    int64_t shape[3] = { crl_env_render_height(h.env), crl_env_render_width(h.env), 3 };
    f.rgb = g_malloc((gsize)(shape[0] * shape[1] * 3));
    f.frame = crl_tensor_wrap(f.rgb, CRL_U8, 3, shape, NULL, NULL, NULL, &err);
    if (!f.frame) {
        g_free(f.rgb);
        host_close(&h);
        goto out;
    }
    crl_bench_result rr = crl__bench_measure(run_render, &f, seconds, 3);
    crl_bench_result rp = crl__bench_measure(run_host, &h, seconds, 3);
    bool failed = f.failed || h.failed;
    if (failed)
        err = f.failed ? f.err : h.err;
    else
        printf("pixels (OSMesa, software GL): acrobot/swingup %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
               ": render %.1f frames/s; step with pixels_only %.1f steps/s\n",
               (gint64)shape[0], (gint64)shape[1], 1e9 / rr.ns_per_op, 1e9 / rp.ns_per_op);
    crl_tensor_unref(f.frame);
    g_free(f.rgb);
    host_close(&h);
    if (!failed)
        status = 0;
out:
    if (status)
        crl__cli_print_error("bench dm_control", &err);
    crl_host_free(host);
    return status;
}
