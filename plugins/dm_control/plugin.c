/* The dm_control plugin: registers env/dm_control, a batched crl_env_ops backend over the suite's tasks on libmujoco. */
#include "config.h"
#include "dmc.h"

#include <crl/crl.h>
#include <crl/env_backend.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DMC_MAX_SIDE 4096

static const crl_option dmc_env_options[] = {
    {"domain", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
     "with task, names the env instead of id (domain = acrobot, task = swingup)"},
    {"task", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "the task of domain (see domain)"},
    {"camera_id", CRL_OPT_INT, CRL_OPT_RANGE, "0", -1, 1000, NULL,
     "the model's fixed camera drawn for pixels (-1: MuJoCo's free camera)"},
    {"height", CRL_OPT_INT, CRL_OPT_RANGE, "240", 1, DMC_MAX_SIDE, NULL,
     "rendered frame height in pixels"},
    {"width", CRL_OPT_INT, CRL_OPT_RANGE, "320", 1, DMC_MAX_SIDE, NULL,
     "rendered frame width in pixels"},
    {"on_divergence", CRL_OPT_ENUM, 0, "error", 0, 0, "error|terminate",
     "physics that blows up (NaN/Inf, bad accelerations): error = step fails naming the env, "
     "terminate = the episode ends with terminated set and reward 0"},
    CRL_OPTIONS_END};

static const crl_option dmc_plugin_options[] = {
    {"suite_dir", CRL_OPT_STRING, 0, "", 0, 0, NULL,
     "dm_control's suite folder (holding cartpole.xml, common/...): load its XML instead of the "
     "bundled models"},
    CRL_OPTIONS_END};

/* The plugin section's suite_dir, copied at init (the opts are borrowed). */
static char dmc_suite_dir[4096];

typedef struct dmc_env {
    dmc_model dm;
    const dmc_task *t;
    int64_t num;
    int n_sub_steps;
    bool terminate_on_divergence;
    int camera, width, height;
    int64_t state_dim;
    mjData **data;
    crl_rng *rng;
    double *extra;        /* [num, n_extra] */
    bool *started;
    int64_t unstarted;
    bool bound;
    double *obs[DMC_MAX_OBS];
    double *action, *reward, *state;
    uint8_t *terminated, *truncated;
    dmc_renderer *renderer;
    int64_t steps;
} dmc_env;

static const char *dmc_ids[64];
static pthread_once_t dmc_ids_once = PTHREAD_ONCE_INIT;

static void fill_ids(void)
{
    size_t n = dmc_task_count();
    for (size_t i = 0; i < n && i + 1 < sizeof dmc_ids / sizeof dmc_ids[0]; i++)
        dmc_ids[i] = dmc_task_at(i)->id;
}

static const char *const *dmc_list(void)
{
    pthread_once(&dmc_ids_once, fill_ids);
    return dmc_ids;
}

static void dmc_close(void *env)
{
    dmc_env *e = env;
    if (!e)
        return;
    dmc_renderer_free(e->renderer);
    if (e->data)
        for (int64_t i = 0; i < e->num; i++)
            if (e->data[i])
                mj_deleteData(e->data[i]);
    free(e->data);
    free(e->rng);
    free(e->extra);
    free(e->started);
    dmc_model_free(&e->dm);
    free(e);
}

#define SPECS_HAS(specs, member) \
    ((specs)->struct_size >= offsetof(crl_env_specs, member) + sizeof((specs)->member))

/* The id from `id`, or from the domain and task options when both are set
 * (they must then agree with a given id). */
static const dmc_task *task_from(const char *id, const crl_opts *opts, crl_error *err)
{
    const char *domain = NULL, *task = NULL;
    if (opts && crl_opts_is_set(opts, "domain") && crl_opts_string(opts, "domain", &domain, err))
        return NULL;
    if (opts && crl_opts_is_set(opts, "task") && crl_opts_string(opts, "task", &task, err))
        return NULL;
    if ((domain != NULL) != (task != NULL)) {
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s is set without %s; give both domain and task, or an id",
                      crl_opts_origin(opts, domain ? "domain" : "task"), crl_opts_section(opts),
                      domain ? "domain" : "task", domain ? "task" : "domain");
        return NULL;
    }
    if (!domain)
        return dmc_task_lookup(id, err);
    char joined[256];
    snprintf(joined, sizeof joined, "%s/%s", domain, task);
    if (id && *id && strcmp(id, joined) != 0) {
        crl_error_set(err, CRL_E_CONFIG,
                      "%s: [%s] domain = %s and task = %s name '%s' but id = '%s'; drop one of them",
                      crl_opts_origin(opts, "domain"), crl_opts_section(opts), domain, task, joined,
                      id);
        return NULL;
    }
    return dmc_task_lookup(joined, err);
}

static crl_spec *action_spec(const mjModel *m, int64_t num, crl_error *err)
{
    double lo[64], hi[64];
    int nu = m->nu;
    if (nu > 64) {
        crl_error_set(err, CRL_E_UNSUPPORTED, "dm_control: models with more than 64 actuators");
        return NULL;
    }
    for (int k = 0; k < nu; k++) {
        bool limited = m->actuator_ctrllimited[k];
        lo[k] = limited ? m->actuator_ctrlrange[2 * k] : -INFINITY;
        hi[k] = limited ? m->actuator_ctrlrange[2 * k + 1] : INFINITY;
    }
    int64_t one[2] = {1, nu}, full[2] = {num, nu};
    crl_tensor *lo1 = crl_tensor_wrap(lo, CRL_F64, 2, one, NULL, NULL, NULL, err);
    crl_tensor *hi1 = lo1 ? crl_tensor_wrap(hi, CRL_F64, 2, one, NULL, NULL, NULL, err) : NULL;
    crl_tensor *l = hi1 ? crl_tensor_expand(lo1, 2, full, err) : NULL;
    crl_tensor *h = l ? crl_tensor_expand(hi1, 2, full, err) : NULL;
    crl_spec *s = h ? crl_spec_bounded_t(CRL_F64, l, h, err) : NULL;
    crl_tensor_unref(h);
    crl_tensor_unref(l);
    crl_tensor_unref(hi1);
    crl_tensor_unref(lo1);
    return s;
}

static crl_spec *observation_spec(const dmc_task *t, int64_t num, crl_error *err)
{
    int64_t batch[1] = {num};
    crl_spec *comp = crl_spec_composite(1, batch, err);
    for (int k = 0; comp && k < t->n_obs; k++) {
        int cols = t->obs[k].cols;
        int64_t shape[3] = {num, cols ? t->obs[k].dim / cols : t->obs[k].dim, cols};
        crl_spec *leaf = crl_spec_unbounded(CRL_F64, cols ? 3 : 2, shape, err);
        if (!leaf || crl_spec_composite_set(comp, t->obs[k].name, leaf, err) != CRL_OK) {
            crl_spec_unref(comp);
            comp = NULL;
        }
        crl_spec_unref(leaf);
    }
    return comp;
}

static int read_env_options(dmc_env *e, const crl_opts *opts, bool *pixels, crl_error *err)
{
    int64_t camera = 0, height = 240, width = 320;
    const char *div = "error";
    int rc = CRL_OK;
    *pixels = false;
    if (opts) {
        rc = crl_opts_int(opts, "camera_id", &camera, err);
        if (!rc)
            rc = crl_opts_int(opts, "height", &height, err);
        if (!rc)
            rc = crl_opts_int(opts, "width", &width, err);
        if (!rc)
            rc = crl_opts_string(opts, "on_divergence", &div, err);
        /* The host's own option: with it, GL problems show at make, not at the first frame. */
        if (!rc && crl_opts_is_set(opts, "from_pixels"))
            rc = crl_opts_bool(opts, "from_pixels", pixels, err);
    }
    if (rc)
        return rc;
    if (camera >= e->dm.m->ncam)
        return crl_error_set(err, CRL_E_CONFIG,
                             "%s: [%s] camera_id = %lld: %s has %d camera(s); give 0..%d, or -1 "
                             "for the free camera",
                             opts ? crl_opts_origin(opts, "camera_id") : "dm_control",
                             opts ? crl_opts_section(opts) : "env", (long long)camera, e->t->id,
                             e->dm.m->ncam, e->dm.m->ncam - 1);
    e->camera = (int)camera;
    e->height = (int)height;
    e->width = (int)width;
    e->terminate_on_divergence = strcmp(div, "terminate") == 0;
    return CRL_OK;
}

static int dmc_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs,
                    void **env, crl_error *err)
{
    if (env)
        *env = NULL;
    if (!specs || !env)
        return crl_error_set(err, CRL_E_INVALID, "dm_control: make needs specs and env out-parameters");
    if (!SPECS_HAS(specs, done))
        return crl_error_set(err, CRL_E_ABI,
                             "dm_control: the host's crl_env_specs (%u bytes) has no room for the "
                             "required specs; upgrade libcrl",
                             specs->struct_size);
    crl_error te;
    crl_error_clear(&te);
    const dmc_task *t = task_from(id, opts, &te);
    if (!t)
        return crl_error_pass(err, &te, CRL_E_NOT_FOUND);
    if (num < 1)
        return crl_error_set(err, CRL_E_INVALID,
                             "dm_control: %s: cannot make %lld envs; num_envs must be at least 1",
                             t->id, (long long)num);
    dmc_env *e = calloc(1, sizeof *e);
    if (!e)
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory", t->id);
    e->t = t;
    e->num = num;
    int rc = dmc_model_load(&e->dm, t, dmc_suite_dir, err);
    bool pixels = false;
    if (rc == CRL_OK)
        rc = read_env_options(e, opts, &pixels, err);
    if (rc != CRL_OK) {
        dmc_close(e);
        return rc;
    }
    const mjModel *m = e->dm.m;
    double dt = m->opt.timestep;
    double ctrl_dt = t->control_timestep > 0 ? t->control_timestep : dt;
    double ratio = ctrl_dt / dt;
    if (!(dt > 0) || fabs(ratio - round(ratio)) > 1e-8 || ratio < 1) {
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the control timestep %g s is not a whole number of "
                           "physics steps of %g s (does suite_dir hold a different version?)",
                           t->id, ctrl_dt, dt);
        dmc_close(e);
        return rc;
    }
    e->n_sub_steps = (int)round(ratio);
    e->state_dim = 1 + m->nq + m->nv + m->na + t->n_extra;
    e->data = calloc((size_t)num, sizeof *e->data);
    e->rng = calloc((size_t)num, sizeof *e->rng);
    e->extra = calloc((size_t)num * (size_t)(t->n_extra ? t->n_extra : 1), sizeof *e->extra);
    e->started = calloc((size_t)num, sizeof *e->started);
    e->unstarted = num;
    bool ok = e->data && e->rng && e->extra && e->started;
    for (int64_t i = 0; ok && i < num; i++) {
        e->data[i] = mj_makeData(m);
        ok = e->data[i] != NULL;
        /* An env never seeded still gets a stream of its own. */
        crl_rng_init(&e->rng[i], 0, (uint64_t)i);
        if (t->seed)
            t->seed(&e->dm, e->extra + i * t->n_extra, &e->rng[i]);
    }
    if (!ok) {
        dmc_close(e);
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory for %lld envs", t->id,
                             (long long)num);
    }
    if (pixels) {
        crl_error re;
        crl_error_clear(&re);
        e->renderer = dmc_renderer_new(e->dm.m, e->width, e->height, &re);
        if (!e->renderer) {
            dmc_close(e);
            return crl_error_pass(err, &re, CRL_E_UNSUPPORTED);
        }
    }

    int64_t col[2] = {num, 1}, st[2] = {num, e->state_dim};
    crl_error se;   /* the specs' calls take NULL from the one before and pass its failure on */
    crl_error_clear(&se);
    crl_spec *observation = observation_spec(t, num, &se);
    crl_spec *action = observation ? crl_spec_composite_of(num, "action", action_spec(m, num, &se), &se) : NULL;
    crl_spec *reward = action ? crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F64, 2, col, &se), &se)
                              : NULL;
    crl_spec *done = reward ? crl_env_backend_done_spec(num, &se) : NULL;
    crl_spec *state = done ? crl_spec_composite_of(num, "state", crl_spec_unbounded(CRL_F64, 2, st, &se), &se)
                           : NULL;
    if (!state) {
        crl_spec_unref(observation);
        crl_spec_unref(action);
        crl_spec_unref(reward);
        crl_spec_unref(done);
        dmc_close(e);
        return crl_error_pass(err, &se, CRL_E_NOMEM);
    }
    specs->observation = observation;
    specs->action = action;
    specs->reward = reward;
    specs->done = done;
    if (SPECS_HAS(specs, state))
        specs->state = state;
    else
        crl_spec_unref(state);
    /* The suite ends an episode once step_count >= time_limit / control_timestep; an infinite
     * limit (lqr) is none, as TorchRL's DMControlEnv leaves it. */
    if (SPECS_HAS(specs, max_episode_steps))
        specs->max_episode_steps = isfinite(t->time_limit) ? (int64_t)ceil(t->time_limit / ctrl_dt - 1e-9) : 0;
    if (SPECS_HAS(specs, render_width)) {
        specs->render_height = e->height;
        specs->render_width = e->width;
    }
    *env = e;
    return CRL_OK;
}

/* The buffer under key: float64 (or bool) [num, dim], contiguous, on the cpu. */
static void *buffer(const dmc_env *e, crl_td *buffers, const char *key, crl_dtype dt, int64_t dim, int *rc,
                    crl_error *err)
{
    char who[160];
    snprintf(who, sizeof who, "dm_control: %s", e->t->id);
    return crl_env_backend_buffer(buffers, who, key, dt, e->num, dim, rc, err);
}

/* A matrix observation's buffer: float64 [num, rows, cols], contiguous, on the cpu. */
static double *matrix_buffer(const dmc_env *e, crl_td *buffers, const dmc_obs_def *o, int *rc, crl_error *err)
{
    if (*rc != CRL_OK)
        return NULL;
    crl_tensor *t = crl_td_get(buffers, o->name);
    const int64_t *shape = t ? crl_tensor_shape(t) : NULL;
    if (!t || crl_tensor_dtype(t) != CRL_F64 || crl_tensor_ndim(t) != 3 || shape[0] != e->num ||
        shape[1] != o->dim / o->cols || shape[2] != o->cols || crl_tensor_device(t).type != CRL_DEVICE_CPU ||
        !crl_tensor_is_contiguous(t)) {
        *rc = crl_error_set(err, t ? CRL_E_SHAPE : CRL_E_NOT_FOUND,
                            "dm_control: %s: bind: buffer '%s' must be a contiguous cpu float64 tensor of shape "
                            "[%lld, %d, %d]",
                            e->t->id, o->name, (long long)e->num, o->dim / o->cols, o->cols);
        return NULL;
    }
    return crl_tensor_data(t);
}

static int dmc_bind(void *env, crl_td *buffers, crl_error *err)
{
    dmc_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "dm_control: bind needs an env and a buffer TensorDict");
    int rc = CRL_OK;
    double *obs[DMC_MAX_OBS];
    for (int k = 0; k < e->t->n_obs; k++)
        obs[k] = e->t->obs[k].cols ? matrix_buffer(e, buffers, &e->t->obs[k], &rc, err)
                                   : buffer(e, buffers, e->t->obs[k].name, CRL_F64, e->t->obs[k].dim, &rc, err);
    double *action = buffer(e, buffers, "action", CRL_F64, e->dm.m->nu, &rc, err);
    double *reward = buffer(e, buffers, "reward", CRL_F64, 1, &rc, err);
    uint8_t *terminated = buffer(e, buffers, "terminated", CRL_BOOL, 1, &rc, err);
    uint8_t *truncated = buffer(e, buffers, "truncated", CRL_BOOL, 1, &rc, err);
    double *state = buffer(e, buffers, "state", CRL_F64, e->state_dim, &rc, err);
    if (rc != CRL_OK)
        return rc;
    memcpy(e->obs, obs, sizeof obs);
    e->action = action;
    e->reward = reward;
    e->terminated = terminated;
    e->truncated = truncated;
    e->state = state;
    e->bound = true;
    return CRL_OK;
}

static int not_bound(const dmc_env *e, const char *what, crl_error *err)
{
    return crl_error_set(err, CRL_E_INVALID, "dm_control: %s: %s before bind; bind the buffers first",
                         e->t->id, what);
}

/* Env i's observation leaves and state row from its mjData.  The state is
 * MuJoCo's (time, qpos, qvel, act) and then the task's per-env extras. */
static void publish(dmc_env *e, int64_t i)
{
    const dmc_task *t = e->t;
    const mjModel *m = e->dm.m;
    const mjData *d = e->data[i];
    double *out[DMC_MAX_OBS];
    for (int k = 0; k < t->n_obs; k++)
        out[k] = e->obs[k] + i * t->obs[k].dim;
    const double *extra = e->extra + i * t->n_extra;
    t->observe(&e->dm, d, extra, out);
    /* Loops, not memcpy calls: these are a handful of doubles, and calls
     * show on the lightest tasks' steps. */
    double *s = e->state + i * e->state_dim;
    *s++ = d->time;
    for (int k = 0; k < m->nq; k++)
        *s++ = d->qpos[k];
    for (int k = 0; k < m->nv; k++)
        *s++ = d->qvel[k];
    for (int k = 0; k < m->na; k++)
        *s++ = d->act[k];
    for (int k = 0; k < t->n_extra; k++)
        *s++ = extra[k];
}

typedef struct reset_args {
    dmc_env *e;
    int64_t i;
    bool from_state;
} reset_args;

/* dm_control's reset_context: reset and forward, the task's initialisation
 * (which may step the physics), forward again. */
static void reset_call(void *p)
{
    reset_args *a = p;
    dmc_env *e = a->e;
    const dmc_task *t = e->t;
    const mjModel *m = e->dm.m;
    mjData *d = e->data[a->i];
    double *extra = e->extra + a->i * t->n_extra;
    /* The suite's Physics.reset: both of its forwards run with actuation off, as its after_reset's. */
    int flags = m->opt.disableflags;
    e->dm.m->opt.disableflags |= mjDSBL_ACTUATION;
    dmc_reset_data(m, d);
    mj_forward(m, d);
    e->dm.m->opt.disableflags = flags;
    if (a->from_state) {
        const double *s = e->state + a->i * e->state_dim;
        d->time = *s++;
        memcpy(d->qpos, s, sizeof(double) * (size_t)m->nq);
        memcpy(d->qvel, s + m->nq, sizeof(double) * (size_t)m->nv);
        memcpy(d->act, s + m->nq + m->nv, sizeof(double) * (size_t)m->na);
        memcpy(extra, s + m->nq + m->nv + m->na, sizeof(double) * (size_t)t->n_extra);
    } else {
        t->init(&e->dm, d, extra, &e->rng[a->i]);
    }
    if (t->apply)
        t->apply(&e->dm, extra);
    /* The suite's after_reset: forward with actuation off, so the first acceleration-stage sensors
     * (accelerometers, force/torque) are those of a body no actuator pushes yet. */
    e->dm.m->opt.disableflags |= mjDSBL_ACTUATION;
    mj_forward(m, d);
    e->dm.m->opt.disableflags = flags;
}

static int dmc_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state,
                     crl_error *err)
{
    dmc_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "dm_control: reset needs an env");
    if (!e->bound)
        return not_bound(e, "reset", err);
    const dmc_task *t = e->t;
    if (from_state) {
        /* Check everything first so a bad state changes nothing. */
        for (int64_t i = 0; i < e->num; i++) {
            if (mask && !mask[i])
                continue;
            for (int64_t k = 0; k < e->state_dim; k++)
                if (!isfinite(e->state[i * e->state_dim + k]))
                    return crl_error_set(err, CRL_E_INVALID,
                                         "dm_control: %s: reset from state: env %lld has state[%lld] "
                                         "= %g; states must be finite",
                                         t->id, (long long)i, (long long)k,
                                         e->state[i * e->state_dim + k]);
        }
    }
    for (int64_t i = 0; i < e->num; i++) {
        if (mask && !mask[i])
            continue;
        if (seeds) {
            crl_rng_init(&e->rng[i], seeds[i], 0);
            if (t->seed)
                t->seed(&e->dm, e->extra + i * t->n_extra, &e->rng[i]);
        }
        reset_args ra = {e, i, from_state};
        int flags = e->dm.m->opt.disableflags;
        int rc = dmc_guarded(reset_call, &ra, t->id, err);
        /* a MuJoCo error jumps out of reset_call with actuation still off in the shared model */
        e->dm.m->opt.disableflags = flags;
        if (rc != CRL_OK)
            return rc;
        publish(e, i);
        e->terminated[i] = 0;
        e->truncated[i] = 0;
        if (!e->started[i]) {
            e->started[i] = true;
            e->unstarted--;
        }
    }
    return CRL_OK;
}

typedef struct step_args {
    dmc_env *e;
    crl_error *err;
    int rc;
} step_args;

/* Every env's control step under one guard (one setjmp per batch, not per
 * env); a MuJoCo error inside fails the whole step, as it did env by env. */
static void step_all(void *p)
{
    step_args *a = p;
    dmc_env *e = a->e;
    const dmc_task *t = e->t;
    const mjModel *m = e->dm.m;
    const int nu = m->nu;
    for (int64_t i = 0; i < e->num; i++) {
        mjData *d = e->data[i];
        for (int k = 0; k < nu; k++)
            d->ctrl[k] = e->action[i * nu + k];
        if (t->apply)
            t->apply(&e->dm, e->extra + i * t->n_extra);
        dmc_physics_step(m, d, e->n_sub_steps);
        const char *why = dmc_divergence(m, d);
        if (why) {
            if (!e->terminate_on_divergence) {
                a->rc = crl_error_set(a->err, CRL_E_RUNTIME,
                                      "dm_control: %s: env %lld diverged at t = %.3f s: %s; check the "
                                      "actions (finite, within the action spec) or set "
                                      "on_divergence = terminate to end such episodes instead",
                                      t->id, (long long)i, d->time, why);
                return;
            }
            /* Leave a sane state behind: later steps of this env are discarded. */
            dmc_reset_data(m, d);
            mj_forward(m, d);
            publish(e, i);
            e->reward[i] = 0.0;
            e->terminated[i] = 1;
            continue;
        }
        publish(e, i);
        e->reward[i] = t->reward(&e->dm, d, e->extra + i * t->n_extra);
        e->terminated[i] = t->terminate && t->terminate(&e->dm, d, e->extra + i * t->n_extra);
    }
}

static int dmc_step(void *env, crl_error *err)
{
    dmc_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "dm_control: step needs an env");
    if (!e->bound)
        return not_bound(e, "step", err);
    if (e->unstarted) {
        int64_t i = 0;
        while (e->started[i])
            i++;
        return crl_error_set(err, CRL_E_INVALID,
                             "dm_control: %s: step before env %lld was ever reset; reset it first",
                             e->t->id, (long long)i);
    }
    step_args sa = {e, err, CRL_OK};
    int rc = dmc_guarded(step_all, &sa, e->t->id, err);
    if (rc == CRL_OK)
        rc = sa.rc;
    if (rc == CRL_OK)
        e->steps++;
    return rc;
}

static int dmc_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    dmc_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "dm_control: render needs an env");
    if (!e->bound)
        return not_bound(e, "render", err);
    if (i < 0 || i >= e->num)
        return crl_error_set(err, CRL_E_RANGE, "dm_control: %s: render: env %lld is not in 0..%lld",
                             e->t->id, (long long)i, (long long)(e->num - 1));
    if (!rgb)
        return crl_error_set(err, CRL_E_INVALID, "dm_control: %s: render: no frame buffer", e->t->id);
    if (!e->started[i])
        return crl_error_set(err, CRL_E_INVALID,
                             "dm_control: %s: render: env %lld was never reset; reset it first",
                             e->t->id, (long long)i);
    if (!e->renderer) {
        crl_error re;
        crl_error_clear(&re);
        e->renderer = dmc_renderer_new(e->dm.m, e->width, e->height, &re);
        if (!e->renderer)
            return crl_error_pass(err, &re, CRL_E_UNSUPPORTED);
    }
    mjData *d = e->data[i];
    if (e->t->apply)
        e->t->apply(&e->dm, e->extra + i * e->t->n_extra);
    if (e->t->render_prep)
        e->t->render_prep(&e->dm, d, e->extra + i * e->t->n_extra);
    return dmc_renderer_draw(e->renderer, e->dm.m, d, e->camera, rgb, err);
}

static const crl_env_ops dmc_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = dmc_list,
    .make = dmc_make,
    .bind = dmc_bind,
    .reset = dmc_reset,
    .step = dmc_step,
    .render = dmc_render,
    .close = dmc_close,
};

static const crl_component dmc_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "dm_control",
    "DeepMind Control Suite tasks on MuJoCo (ids DOMAIN/TASK, float64 observations), pixels "
    "through offscreen OSMesa",
    dmc_env_options,
    &dmc_ops,
};

static int dmc_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    const char *dir = "";
    int rc = section ? crl_opts_string(section, "suite_dir", &dir, err) : CRL_OK;
    if (rc != CRL_OK)
        return rc;
    if (strlen(dir) >= sizeof dmc_suite_dir)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [plugin.dm_control] suite_dir is too long",
                             crl_opts_origin(section, "suite_dir"));
    snprintf(dmc_suite_dir, sizeof dmc_suite_dir, "%s", dir ? dir : "");
    if (mj_version() / 100 != mjVERSION_HEADER / 100)
        return crl_error_set(err, CRL_E_PLUGIN,
                             "dm_control: built against MuJoCo %d but libmujoco is %s; rebuild "
                             "the plugin against the installed libmujoco-dev",
                             mjVERSION_HEADER, mj_versionString());
    dmc_install_error_hooks();
    return crl_host_register(host, &dmc_component, err);
}

CRL_PLUGIN_DEFINE(dm_control, "dm_control", PACKAGE_VERSION, "MIT",
                  "DeepMind Control Suite tasks on libmujoco, with offscreen pixels",
                  dmc_plugin_options, dmc_init, NULL)
