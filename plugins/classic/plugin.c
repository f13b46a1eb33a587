/* The classic plugin: registers env/classic, a batched crl_env_ops backend over the classic_def table. */
#include "config.h"
#include "classic.h"

#include <crl/crl.h>
#include <crl/env_backend.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the options table: one option per physics parameter name ----
 *
 * The component's table is static but the parameters depend on the id, so
 * it declares the union of every def's parameters, each without a default:
 * an option left unset keeps the chosen env's own default, and make()
 * refuses one the chosen env does not take.  The table is built once from
 * the defs (so names, types and docs never drift from the physics). */

#define CLASSIC_MAX_OPTIONS 64
#define CLASSIC_RENDER_W_OPTION "render_width"
#define CLASSIC_RENDER_H_OPTION "render_height"
#define CLASSIC_DOC_MAX 512

static crl_option classic_options[CLASSIC_MAX_OPTIONS + 1];
static char classic_option_docs[CLASSIC_MAX_OPTIONS][CLASSIC_DOC_MAX];
static pthread_once_t classic_options_once = PTHREAD_ONCE_INIT;
static crl_error classic_options_error;

/* Choice `index` of "a|b|c" into buf; "?" when out of range. */
static const char *choice_name(const char *choices, int index, char *buf, size_t size)
{
    const char *p = choices ? choices : "";
    for (int k = 0; k < index && p; k++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p || index < 0) {
        snprintf(buf, size, "?");
        return buf;
    }
    size_t len = strcspn(p, "|");
    if (len >= size)
        len = size - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return buf;
}

/* A parameter's default as it would be written in INI. */
static const char *param_default_text(const classic_param *pp, char *buf, size_t size)
{
    if (pp->type == CRL_OPT_BOOL)
        snprintf(buf, size, "%s", pp->default_value != 0.0 ? "true" : "false");
    else if (pp->type == CRL_OPT_ENUM)
        choice_name(pp->choices, (int)pp->default_value, buf, size);
    else {
        /* The shortest form that reads back as the same double. */
        snprintf(buf, size, "%.15g", pp->default_value);
        if (strtod(buf, NULL) != pp->default_value)
            snprintf(buf, size, "%.17g", pp->default_value);
    }
    return buf;
}

static void append(char *dst, size_t size, const char *src)
{
    size_t used = strlen(dst);
    if (used + 1 < size)
        snprintf(dst + used, size - used, "%s", src);
}

/* Options that are no physics parameter, ahead of the generated ones. */
#define CLASSIC_ENCODING_OPTION "categorical_action_encoding"

static void build_options(void)
{
    size_t n = 0;
    crl_error_clear(&classic_options_error);
    /* TorchRL's GymEnv default: discrete actions one-hot unless asked otherwise. */
    classic_options[n++] = (crl_option){CLASSIC_ENCODING_OPTION, CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
                                        "the discrete actions of CartPole-v1, MountainCar-v0 and Acrobot-v1 as "
                                        "Categorical int64 [num] indices (true) or OneHot int64 [num, n] (false, "
                                        "TorchRL GymEnv's default); the continuous envs ignore it"};
    for (size_t di = 0; di < classic_def_count(); di++) {
        const classic_def *d = classic_def_at(di);
        for (int pi = 0; pi < d->n_params; pi++) {
            const classic_param *pp = &d->params[pi];
            size_t k = 0;
            while (k < n && strcmp(classic_options[k].name, pp->name) != 0)
                k++;
            if (k == n) {
                if (n == CLASSIC_MAX_OPTIONS) {
                    crl_error_set(&classic_options_error, CRL_E_INVALID,
                                  "classic: more than %d distinct physics parameters; raise "
                                  "CLASSIC_MAX_OPTIONS in plugins/classic/plugin.c",
                                  CLASSIC_MAX_OPTIONS);
                    return;
                }
                classic_options[n] = (crl_option){pp->name, pp->type, 0, NULL, 0, 0,
                                                  pp->choices, classic_option_docs[n]};
                snprintf(classic_option_docs[n], CLASSIC_DOC_MAX, "%s; unset: the env's default (",
                         pp->doc ? pp->doc : pp->name);
                n++;
            } else {
                const crl_option *o = &classic_options[k];
                bool same_choices = (!o->choices && !pp->choices) ||
                                    (o->choices && pp->choices &&
                                     strcmp(o->choices, pp->choices) == 0);
                if (o->type != pp->type || !same_choices) {
                    crl_error_set(&classic_options_error, CRL_E_INVALID,
                                  "classic: parameter '%s' of %s has another type or other "
                                  "choices than the same parameter of an earlier env; one "
                                  "option cannot declare both (fix the param tables)",
                                  pp->name, d->id);
                    return;
                }
                append(classic_option_docs[k], CLASSIC_DOC_MAX, ", ");
            }
            /* "ID DEFAULT", plus the env's own doc where it differs from the first's. */
            char dflt[64], entry[256];
            const classic_param *first = NULL;
            for (size_t dj = 0; dj <= di && !first; dj++) {
                int pj = classic_param_index(classic_def_at(dj), pp->name);
                if (pj >= 0)
                    first = &classic_def_at(dj)->params[pj];
            }
            bool own_doc = first && first->doc && pp->doc && strcmp(first->doc, pp->doc) != 0;
            snprintf(entry, sizeof entry, "%s %s%s%s", d->id,
                     param_default_text(pp, dflt, sizeof dflt), own_doc ? ": " : "",
                     own_doc ? pp->doc : "");
            append(classic_option_docs[k], CLASSIC_DOC_MAX, entry);
        }
    }
    for (size_t k = 1; k < n; k++)
        append(classic_option_docs[k], CLASSIC_DOC_MAX, ")");
    /* Pixels for learning are small: drawing them at that size directly costs a fraction of drawing the
     * env's own frame and resizing it. */
    if (n + 2 <= CLASSIC_MAX_OPTIONS) {
        classic_options[n++] = (crl_option){CLASSIC_RENDER_W_OPTION, CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1,
                                            CLASSIC_RENDER_MAX_SIDE, NULL,
                                            "width of the rendered frames (from_pixels, render), drawn at that "
                                            "size (unset: the env's own, 600 for CartPole-v1)"};
        classic_options[n++] = (crl_option){CLASSIC_RENDER_H_OPTION, CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1,
                                            CLASSIC_RENDER_MAX_SIDE, NULL,
                                            "height of the rendered frames (unset: the env's own, 400 for "
                                            "CartPole-v1)"};
    }
    classic_options[n] = (crl_option)CRL_OPTIONS_END;
}

/* ---- env instances ---- */

typedef struct classic_env {
    const classic_def *d;
    int64_t num;
    double params[CLASSIC_MAX_PARAMS];
    /* Env i draws its initial states from rng[i] and the step's noise
     * (Acrobot's torque_noise_max) from step_rng[i]: streams 0 and 1 of the
     * seed given for it.  Separate streams make the step's draws depend only
     * on the seed and the steps since, so a seeded reset from a saved state
     * replays a noisy trajectory bit for bit. */
    crl_rng *rng;             /* [num] */
    crl_rng *step_rng;        /* [num] */
    /* Render needs each env's previous action (Pendulum draws it), or none
     * right after a reset: env i has one when reset_at[i] != steps. */
    void *last_action;        /* [num] actions in the step layout */
    size_t action_bytes;      /* per env */
    uint64_t steps;           /* step calls so far */
    uint64_t *reset_at;       /* [num]: `steps` at env i's last reset */
    bool *started;            /* [num]: reset at least once */
    int64_t unstarted;        /* envs never reset: step refuses to run */
    bool bound;
    /* The host's buffers (borrowed, contiguous, checked in bind). */
    float *obs;               /* [num, obs_dim] */
    void *action;             /* [num] int64 or [num, action_dim] float32: what the physics reads */
    bool onehot;              /* discrete actions come one-hot: decoded into `index` before a step */
    int32_t render_w, render_h; /* frame size: the env's own or render_width/render_height */
    int64_t *onehot_buf;      /* [num, action_n] int64, the host's buffer */
    int64_t *index;           /* [num] */
    float *reward;            /* [num, 1] */
    uint8_t *terminated;      /* [num, 1] bool */
    uint8_t *truncated;       /* [num, 1] bool */
    double *state;            /* [num, state_dim] */
} classic_env;

static const char *const classic_ids[] = {
    "CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1", NULL,
};

static const char *const *classic_list(void)
{
    return classic_ids;
}

/* The parameter names of d, comma-separated, for messages. */
static void param_names(const classic_def *d, char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < d->n_params; i++) {
        if (i)
            append(buf, size, ", ");
        append(buf, size, d->params[i].name);
    }
}

/* Index of `value` among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *value)
{
    int index = 0;
    size_t len = strlen(value);
    for (const char *p = choices; p; index++) {
        size_t plen = strcspn(p, "|");
        if (plen == len && strncmp(p, value, len) == 0)
            return index;
        p = strchr(p, '|');
        if (p)
            p++;
    }
    return -1;
}

/* True when `word` occurs in `text` as a whole identifier. */
static bool mentions(const char *text, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        bool left = p == text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                                   (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9'));
        char c = p[len];
        bool right = !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9'));
        if (left && right)
            return true;
    }
    return false;
}

/* The physics parameters of d under opts: defaults, then every option given. */
static int params_from_opts(const classic_def *d, const crl_opts *opts, double *params,
                            crl_error *err)
{
    classic_params_default(d, params);
    if (!opts)
        return CRL_OK;
    const char *section = crl_opts_section(opts);
    for (const crl_option *o = classic_options; o->type != CRL_OPT_END; o++) {
        if (!crl_opts_is_set(opts, o->name) || !strcmp(o->name, CLASSIC_ENCODING_OPTION) ||
            !strcmp(o->name, CLASSIC_RENDER_W_OPTION) || !strcmp(o->name, CLASSIC_RENDER_H_OPTION))
            continue;
        int pi = classic_param_index(d, o->name);
        const char *origin = crl_opts_origin(opts, o->name);
        if (pi < 0) {
            char names[512];
            param_names(d, names, sizeof names);
            return crl_error_set(err, CRL_E_CONFIG,
                                 "%s: [%s] %s: %s has no parameter '%s'; remove it (the "
                                 "parameters of %s are: %s)",
                                 origin, section, o->name, d->id, o->name, d->id, names);
        }
        int rc;
        if (o->type == CRL_OPT_BOOL) {
            bool b = false;
            rc = crl_opts_bool(opts, o->name, &b, err);
            params[pi] = b ? 1.0 : 0.0;
        } else if (o->type == CRL_OPT_ENUM) {
            const char *s = NULL;
            rc = crl_opts_string(opts, o->name, &s, err);
            if (rc == CRL_OK) {
                int index = choice_index(o->choices, s);
                if (index < 0)
                    return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = '%s': expected one of %s",
                                         origin, section, o->name, s, o->choices);
                params[pi] = index;
            }
        } else {
            rc = crl_opts_double(opts, o->name, &params[pi], err);
        }
        if (rc != CRL_OK)
            return rc;
    }
    crl_error e;
    crl_error_clear(&e);
    int rc = classic_params_check(d, params, &e);
    if (rc != CRL_OK) {
        /* Point at the line that set the offending value: a bad value in the
         * config is a config error (exit 2), whatever the range check said. */
        for (const crl_option *o = classic_options; o->type != CRL_OPT_END; o++) {
            if (crl_opts_is_set(opts, o->name) && mentions(e.message, o->name)) {
                crl_error_prefix(&e, "%s: [%s] %s: ", crl_opts_origin(opts, o->name), section,
                                 o->name);
                e.code = rc = CRL_E_CONFIG;
                break;
            }
        }
        rc = crl_error_pass(err, &e, rc);
    }
    return rc;
}

/* Elementwise Bounded float32 [num, dim] from per-element bounds [dim]. */
static crl_spec *bounded_rows(int64_t num, int32_t dim, const float *low, const float *high,
                              crl_error *err)
{
    int64_t one[2] = {1, dim}, full[2] = {num, dim};
    crl_tensor *lo1 = crl_tensor_wrap((void *)low, CRL_F32, 2, one, NULL, NULL, NULL, err);
    crl_tensor *hi1 = lo1 ? crl_tensor_wrap((void *)high, CRL_F32, 2, one, NULL, NULL, NULL, err)
                          : NULL;
    crl_tensor *lo = hi1 ? crl_tensor_expand(lo1, 2, full, err) : NULL;
    crl_tensor *hi = lo ? crl_tensor_expand(hi1, 2, full, err) : NULL;
    crl_spec *s = hi ? crl_spec_bounded_t(CRL_F32, lo, hi, err) : NULL;
    crl_tensor_unref(hi);
    crl_tensor_unref(lo);
    crl_tensor_unref(hi1);
    crl_tensor_unref(lo1);
    return s;
}



static void classic_close(void *env)
{
    classic_env *e = env;
    if (!e)
        return;
    free(e->rng);
    free(e->step_rng);
    free(e->last_action);
    free(e->reset_at);
    free(e->started);
    free(e->index);
    free(e);
}

#define SPECS_HAS(specs, member) \
    ((specs)->struct_size >= offsetof(crl_env_specs, member) + sizeof((specs)->member))

static int classic_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs,
                        void **env, crl_error *err)
{
    if (env)
        *env = NULL;
    if (!specs || !env)
        return crl_error_set(err, CRL_E_INVALID, "classic: make needs specs and env out-parameters");
    if (!SPECS_HAS(specs, done))
        return crl_error_set(err, CRL_E_ABI,
                             "classic: the host's crl_env_specs (%u bytes) has no room for the "
                             "required specs; upgrade libcrl",
                             specs->struct_size);
    const classic_def *d = classic_lookup(id, err);
    if (!d)
        return CRL_E_NOT_FOUND;
    if (num < 1)
        return crl_error_set(err, CRL_E_INVALID,
                             "classic: %s: cannot make %lld envs; num_envs must be at least 1",
                             d->id, (long long)num);
    double params[CLASSIC_MAX_PARAMS];
    int rc = params_from_opts(d, opts, params, err);
    if (rc != CRL_OK)
        return rc;
    int64_t max_steps = d->max_episode_steps;
    if (opts && crl_opts_is_set(opts, "max_episode_steps")) {
        rc = crl_opts_int(opts, "max_episode_steps", &max_steps, err);
        if (rc != CRL_OK)
            return rc;
        if (max_steps < 0)
            return crl_error_set(err, CRL_E_CONFIG,
                                 "%s: [%s] max_episode_steps = %lld: give 0 (no limit) or a "
                                 "positive count",
                                 crl_opts_origin(opts, "max_episode_steps"),
                                 crl_opts_section(opts), (long long)max_steps);
    }

    int64_t rsize[2] = { d->render_width, d->render_height };
    static const char *const rkeys[2] = { CLASSIC_RENDER_W_OPTION, CLASSIC_RENDER_H_OPTION };
    for (int k = 0; k < 2; k++)
        if (opts && crl_opts_is_set(opts, rkeys[k]) && (rc = crl_opts_int(opts, rkeys[k], &rsize[k], err)) != CRL_OK)
            return rc;

    bool categorical = false;
    if (opts && crl_opts_is_set(opts, CLASSIC_ENCODING_OPTION)) {
        rc = crl_opts_bool(opts, CLASSIC_ENCODING_OPTION, &categorical, err);
        if (rc != CRL_OK)
            return rc;
    }

    float obs_low[CLASSIC_MAX_OBS], obs_high[CLASSIC_MAX_OBS];
    float act_low[CLASSIC_MAX_ACTION], act_high[CLASSIC_MAX_ACTION];
    bool box = d->action_kind == CLASSIC_ACTION_BOX;
    bool onehot = !box && !categorical;
    d->bounds(d, params, obs_low, obs_high, box ? act_low : NULL, box ? act_high : NULL);

    crl_error le;   /* the specs' calls take NULL from the one before and pass its failure on */
    crl_error_clear(&le);
    crl_spec *observation = NULL, *action = NULL, *reward = NULL, *done = NULL, *state = NULL;
    int64_t col[2] = {num, 1}, st[2] = {num, d->state_dim}, oh[2] = {num, d->action_n};
    observation = crl_spec_composite_of(num, "observation", bounded_rows(num, d->obs_dim, obs_low, obs_high, &le),
                               &le);
    if (observation)
        action = crl_spec_composite_of(num, "action",
                              box      ? bounded_rows(num, d->action_dim, act_low, act_high, &le)
                              : onehot ? crl_spec_onehot(d->action_n, CRL_I64, 2, oh, &le)
                                       : crl_spec_categorical(d->action_n, CRL_I64, 1, &num, &le),
                              &le);
    if (action)
        reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, &le), &le);
    if (reward)
        done = crl_env_backend_done_spec(num, &le);
    if (done)
        state = crl_spec_composite_of(num, "state", crl_spec_unbounded(CRL_F64, 2, st, &le), &le);

    classic_env *e = state ? calloc(1, sizeof *e) : NULL;
    if (e) {
        e->d = d;
        e->num = num;
        memcpy(e->params, params, sizeof(double) * (size_t)d->n_params);
        e->action_bytes = box ? sizeof(float) * (size_t)d->action_dim : sizeof(int64_t);
        e->rng = calloc((size_t)num, sizeof *e->rng);
        e->step_rng = calloc((size_t)num, sizeof *e->step_rng);
        e->last_action = calloc((size_t)num, e->action_bytes);
        e->reset_at = calloc((size_t)num, sizeof *e->reset_at);
        e->started = calloc((size_t)num, sizeof *e->started);
        e->unstarted = num;
        e->onehot = onehot;
        e->index = onehot ? calloc((size_t)num, sizeof *e->index) : NULL;
        if (!e->rng || !e->step_rng || !e->last_action || !e->reset_at || !e->started || (onehot && !e->index)) {
            classic_close(e);
            e = NULL;
        }
    }
    if (!e) {
        rc = state ? crl_error_set(err, CRL_E_NOMEM, "classic: %s: out of memory for %lld envs", d->id,
                                   (long long)num)
                   : crl_error_pass(err, &le, CRL_E_NOMEM);
        crl_spec_unref(observation);
        crl_spec_unref(action);
        crl_spec_unref(reward);
        crl_spec_unref(done);
        crl_spec_unref(state);
        return rc;
    }
    /* An env never seeded still gets streams of its own (seed 0; step
     * streams from the top half of the stream ids). */
    for (int64_t i = 0; i < num; i++) {
        crl_rng_init(&e->rng[i], 0, (uint64_t)i);
        crl_rng_init(&e->step_rng[i], 0, (UINT64_C(1) << 63) | (uint64_t)i);
    }

    specs->observation = observation;
    specs->action = action;
    specs->reward = reward;
    specs->done = done;
    if (SPECS_HAS(specs, state))
        specs->state = state;
    else
        crl_spec_unref(state);
    if (SPECS_HAS(specs, max_episode_steps))
        specs->max_episode_steps = max_steps;
    e->render_w = (int32_t)rsize[0];
    e->render_h = (int32_t)rsize[1];
    if (SPECS_HAS(specs, render_width)) {
        specs->render_height = e->render_h;
        specs->render_width = e->render_w;
    }
    *env = e;
    return CRL_OK;
}

/* The buffer under key, checked for dtype, shape [num, dim] (dim 0: [num])
 * and a contiguous layout. */
static void *buffer(const classic_env *e, crl_td *buffers, const char *key, crl_dtype dt, int64_t dim, int *rc,
                    crl_error *err)
{
    char who[160];
    snprintf(who, sizeof who, "classic: %s", e->d->id);
    return crl_env_backend_buffer(buffers, who, key, dt, e->num, dim, rc, err);
}

static int classic_bind(void *env, crl_td *buffers, crl_error *err)
{
    classic_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "classic: bind needs an env and a buffer TensorDict");
    const classic_def *d = e->d;
    bool box = d->action_kind == CLASSIC_ACTION_BOX;
    int rc = CRL_OK;
    float *obs = buffer(e, buffers, "observation", CRL_F32, d->obs_dim, &rc, err);
    void *action = buffer(e, buffers, "action", box ? CRL_F32 : CRL_I64,
                          box ? d->action_dim : e->onehot ? d->action_n : 0, &rc, err);
    float *reward = buffer(e, buffers, "reward", CRL_F32, 1, &rc, err);
    uint8_t *terminated = buffer(e, buffers, "terminated", CRL_BOOL, 1, &rc, err);
    uint8_t *truncated = buffer(e, buffers, "truncated", CRL_BOOL, 1, &rc, err);
    double *state = buffer(e, buffers, "state", CRL_F64, d->state_dim, &rc, err);
    if (rc != CRL_OK)
        return rc;
    e->obs = obs;
    e->onehot_buf = e->onehot ? action : NULL;
    e->action = e->onehot ? (void *)e->index : action;
    e->reward = reward;
    e->terminated = terminated;
    e->truncated = truncated;
    e->state = state;
    e->bound = true;
    return CRL_OK;
}

static int not_bound(const classic_env *e, const char *what, crl_error *err)
{
    return crl_error_set(err, CRL_E_INVALID, "classic: %s: %s before bind; bind the buffers first",
                         e->d->id, what);
}

static int classic_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state,
                         crl_error *err)
{
    classic_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "classic: reset needs an env");
    if (!e->bound)
        return not_bound(e, "reset", err);
    const classic_def *d = e->d;
    const int64_t num = e->num, sd = d->state_dim, od = d->obs_dim;
    if (from_state) {
        /* Check everything first so a bad state changes nothing. */
        for (int64_t i = 0; i < num; i++) {
            if (mask && !mask[i])
                continue;
            for (int64_t k = 0; k < sd; k++)
                if (!isfinite(e->state[i * sd + k]))
                    return crl_error_set(err, CRL_E_INVALID,
                                         "classic: %s: reset from state: env %lld has %s = %g; "
                                         "states must be finite",
                                         d->id, (long long)i, d->state_names[k],
                                         e->state[i * sd + k]);
        }
    }
    int64_t run = -1; /* start of the current run of reset envs */
    for (int64_t i = 0; i <= num; i++) {
        bool hit = i < num && (!mask || mask[i]);
        if (hit) {
            if (seeds) {
                crl_rng_init(&e->rng[i], seeds[i], 0);
                crl_rng_init(&e->step_rng[i], seeds[i], 1);
            }
            if (!from_state)
                d->reset_one(d, e->state + i * sd, &e->rng[i], e->params);
            e->terminated[i] = 0;
            e->truncated[i] = 0;
            e->reset_at[i] = e->steps;
            if (!e->started[i]) {
                e->started[i] = true;
                e->unstarted--;
            }
            if (run < 0)
                run = i;
        } else if (run >= 0) {
            d->observe_batch(d, e->state + run * sd, e->obs + run * od, i - run, e->params);
            run = -1;
        }
    }
    return CRL_OK;
}

static int classic_step(void *env, crl_error *err)
{
    classic_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "classic: step needs an env");
    if (!e->bound)
        return not_bound(e, "step", err);
    const classic_def *d = e->d;
    if (e->unstarted) {
        int64_t i = 0;
        while (e->started[i])
            i++;
        return crl_error_set(err, CRL_E_INVALID,
                             "classic: %s: step before env %lld was ever reset; reset it first",
                             d->id, (long long)i);
    }
    if (e->onehot) {
        /* The host checks actions against the OneHot spec unless they are projected; a backend driven
         * directly gets the same rule here. */
        const int64_t n = d->action_n;
        for (int64_t i = 0; i < e->num; i++) {
            const int64_t *row = e->onehot_buf + i * n;
            int64_t hot = -1, ones = 0;
            bool binary = true;
            for (int64_t j = 0; j < n; j++) {
                binary &= row[j] == 0 || row[j] == 1;
                if (row[j] == 1) {
                    hot = j;
                    ones++;
                }
            }
            if (!binary || ones != 1)
                return crl_error_set(err, CRL_E_RANGE,
                                     "classic: %s: the action of env %lld is not one-hot (%lld ones among %lld "
                                     "values%s); give exactly one 1, or set categorical_action_encoding = true "
                                     "for int64 indices",
                                     d->id, (long long)i, (long long)ones, (long long)n,
                                     binary ? "" : ", and values other than 0 and 1");
            e->index[i] = hot;
        }
    }
    int rc = classic_check_step(d, e->action, e->num, e->params, e->step_rng, err);
    if (rc != CRL_OK)
        return rc;
    d->step_batch(d, e->state, e->action, e->obs, e->reward, e->terminated, e->num, e->params,
                  e->step_rng);
    memcpy(e->last_action, e->action, (size_t)e->num * e->action_bytes);
    e->steps++;
    return CRL_OK;
}

static int classic_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    classic_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "classic: render needs an env");
    if (!e->bound)
        return not_bound(e, "render", err);
    const classic_def *d = e->d;
    if (i < 0 || i >= e->num)
        return crl_error_set(err, CRL_E_RANGE, "classic: %s: render: env %lld is not in 0..%lld",
                             d->id, (long long)i, (long long)(e->num - 1));
    if (!rgb)
        return crl_error_set(err, CRL_E_INVALID, "classic: %s: render: no frame buffer", d->id);
    if (!e->started[i])
        return crl_error_set(err, CRL_E_INVALID,
                             "classic: %s: render: env %lld was never reset; reset it first", d->id,
                             (long long)i);
    const void *last = e->reset_at[i] != e->steps
                           ? (const char *)e->last_action + (size_t)i * e->action_bytes
                           : NULL;
    return d->render_one(d, e->state + i * d->state_dim, last, rgb, e->render_w, e->render_h, e->params, err);
}

static const crl_env_ops classic_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = classic_list,
    .make = classic_make,
    .bind = classic_bind,
    .reset = classic_reset,
    .step = classic_step,
    .render = classic_render,
    .close = classic_close,
};

static const crl_component classic_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "classic",
    "Gymnasium's classic control envs in native C: CartPole-v1, Pendulum-v1, MountainCar-v0, "
    "MountainCarContinuous-v0, Acrobot-v1",
    classic_options,
    &classic_ops,
};

static int classic_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    if (pthread_once(&classic_options_once, build_options) != 0)
        return crl_error_set(err, CRL_E_PLUGIN, "classic: cannot build the options table");
    if (classic_options_error.code != CRL_OK)
        return crl_error_set(err, classic_options_error.code, "%s", classic_options_error.message);
    return crl_host_register(host, &classic_component, err);
}

CRL_PLUGIN_DEFINE(classic, "classic", PACKAGE_VERSION, "MIT",
                  "native classic-control envs (CartPole, Pendulum, MountainCar, Acrobot)", NULL,
                  classic_init, NULL)
