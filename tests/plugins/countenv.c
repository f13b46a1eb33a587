/* countenv: a deterministic counting env backend (component env/countenv) for the env host tests.
 *
 * Env i keeps a counter that starts at a random offset in [0, offset_range)
 * drawn from its own stream at reset, and grows by 1 per step.
 *   observation "observation" float32 [num, 2] = (counter, i)
 *   action      "action" int64 Categorical(3) [num]
 *   reward      float32 [num, 1] = the action's value
 *   terminated  when counter >= 5 + i
 *   state       "state" float64 [num, 1] = counter (Count-v0 only)
 *   render      an 8 wide, 6 high frame: pixel (y, x) = (counter, i, y * 8 + x)
 * CountNoState-v0 has no state, cannot render, and declares a time limit
 * of 4 steps.  CountBox-v0 is Count-v0 without state or render, whose
 * action is Bounded float32 [num, 1] in [-1, 1] (reward = that value).
 * CountLong-v0 is CountNoState-v0 with a time limit of 8 steps: the same
 * specs under another id (per_env.id).
 * aux_action = true adds a second action leaf "aux" (Categorical(2) int64
 * [num], ignored), so the action Composite has two leaves. */
#include <crl/crl.h>
#include <crl/env_backend.h>

#include <stdlib.h>
#include <string.h>

#define COUNT_H 6
#define COUNT_W 8
#define COUNT_NOSTATE_LIMIT 4
#define COUNT_LONG_LIMIT 8

static const char *const count_ids[] = { "Count-v0", "CountNoState-v0", "CountBox-v0", "CountLong-v0", NULL };

typedef struct count_env {
    int64_t num;
    int64_t offset_range;
    bool full;          /* Count-v0: state and render */
    bool box;           /* CountBox-v0: float actions */
    crl_rng *rng;
    int64_t *counter;
    float *obs;
    const int64_t *action;
    const float *box_action;
    float *reward;
    uint8_t *terminated;
    uint8_t *truncated;
    double *state;
} count_env;

static const char *const *count_list(void)
{
    return count_ids;
}


static void count_close(void *env)
{
    count_env *e = env;
    if (!e)
        return;
    free(e->rng);
    free(e->counter);
    free(e);
}

static int count_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                      crl_error *err)
{
    bool full = false, box = false, lng = false;
    if (!strcmp(id, "Count-v0"))
        full = true;
    else if (!strcmp(id, "CountBox-v0"))
        box = true;
    else if (!strcmp(id, "CountLong-v0"))
        lng = true;
    else if (strcmp(id, "CountNoState-v0") != 0)
        return crl_error_set(err, CRL_E_NOT_FOUND, "countenv: no env '%s' (ids: Count-v0, CountNoState-v0, "
                             "CountBox-v0, CountLong-v0)", id);
    int64_t range = 3;
    bool aux = false;
    if (opts && (crl_opts_int(opts, "offset_range", &range, err) || crl_opts_bool(opts, "aux_action", &aux, err)))
        return err->code;
    int64_t col[2] = { num, 1 }, obs_shape[2] = { num, 2 };
    specs->observation = crl_spec_composite_of(num, "observation", crl_spec_unbounded(CRL_F32, 2, obs_shape, err), err);
    specs->action = crl_spec_composite_of(num, "action",
                                 box ? crl_spec_bounded(CRL_F32, 2, col, -1.0, 1.0, err)
                                     : crl_spec_categorical(3, CRL_I64, 1, &num, err),
                                 err);
    if (aux && specs->action) {
        crl_spec *a = crl_spec_categorical(2, CRL_I64, 1, &num, err);
        if (!a || crl_spec_composite_set(specs->action, "aux", a, err)) {
            crl_spec_unref(a);
            return err ? err->code : CRL_E_INVALID;
        }
        crl_spec_unref(a);
    }
    specs->reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, err), err);
    specs->done = crl_env_backend_done_spec(num, err);
    if (full)
        specs->state = crl_spec_composite_of(num, "state", crl_spec_unbounded(CRL_F64, 2, col, err), err);
    if (!specs->observation || !specs->action || !specs->reward || !specs->done || (full && !specs->state))
        return err ? err->code : CRL_E_INVALID;
    specs->max_episode_steps = full || box ? 0 : lng ? COUNT_LONG_LIMIT : COUNT_NOSTATE_LIMIT;
    specs->render_height = full ? COUNT_H : 0;
    specs->render_width = full ? COUNT_W : 0;
    count_env *e = calloc(1, sizeof *e);
    if (e) {
        e->rng = calloc((size_t)num, sizeof *e->rng);
        e->counter = calloc((size_t)num, sizeof *e->counter);
    }
    if (!e || !e->rng || !e->counter) {
        count_close(e);
        return crl_error_set(err, CRL_E_NOMEM, "countenv: out of memory for %lld envs", (long long)num);
    }
    e->num = num;
    e->offset_range = range;
    e->full = full;
    e->box = box;
    for (int64_t i = 0; i < num; i++)
        crl_rng_init(&e->rng[i], 0, (uint64_t)i);
    *env = e;
    return CRL_OK;
}

static void *buffer(crl_td *buffers, const char *key, crl_dtype dt, int *rc, crl_error *err)
{
    if (*rc)
        return NULL;
    crl_tensor *t = crl_td_get(buffers, key);
    if (!t || crl_tensor_dtype(t) != dt || !crl_tensor_is_contiguous(t)) {
        *rc = crl_error_set(err, CRL_E_INVALID, "countenv: bind: buffer '%s' is missing or not a contiguous %s "
                            "tensor", key, crl_dtype_name(dt));
        return NULL;
    }
    return crl_tensor_data(t);
}

static int count_bind(void *env, crl_td *buffers, crl_error *err)
{
    count_env *e = env;
    int rc = CRL_OK;
    e->obs = buffer(buffers, "observation", CRL_F32, &rc, err);
    if (e->box)
        e->box_action = buffer(buffers, "action", CRL_F32, &rc, err);
    else
        e->action = buffer(buffers, "action", CRL_I64, &rc, err);
    e->reward = buffer(buffers, "reward", CRL_F32, &rc, err);
    e->terminated = buffer(buffers, "terminated", CRL_BOOL, &rc, err);
    e->truncated = buffer(buffers, "truncated", CRL_BOOL, &rc, err);
    if (e->full)
        e->state = buffer(buffers, "state", CRL_F64, &rc, err);
    return rc;
}

static void write_outputs(count_env *e, int64_t i)
{
    e->obs[2 * i] = (float)e->counter[i];
    e->obs[2 * i + 1] = (float)i;
    e->terminated[i] = e->counter[i] >= 5 + i;
    if (e->state)
        e->state[i] = (double)e->counter[i];
}

static int count_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    count_env *e = env;
    if (from_state && !e->full)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "countenv: this id has no state to start from");
    for (int64_t i = 0; i < e->num; i++) {
        if (mask && !mask[i])
            continue;
        if (seeds)
            crl_rng_init(&e->rng[i], seeds[i], 0);
        if (from_state)
            e->counter[i] = (int64_t)e->state[i];
        else
            e->counter[i] = (int64_t)crl_rng_below(&e->rng[i], (uint64_t)e->offset_range);
        write_outputs(e, i);
        e->terminated[i] = 0;
        e->truncated[i] = 0;
    }
    return CRL_OK;
}

static int count_step(void *env, crl_error *err)
{
    count_env *e = env;
    for (int64_t i = 0; i < e->num; i++) {
        if (e->box) {
            e->reward[i] = e->box_action[i];
        } else {
            int64_t a = e->action[i];
            if (a < 0 || a > 2)
                return crl_error_set(err, CRL_E_RANGE, "countenv: env %lld got action %lld", (long long)i,
                                     (long long)a);
            e->reward[i] = (float)a;
        }
        e->counter[i]++;
        e->truncated[i] = 0;
        write_outputs(e, i);
    }
    return CRL_OK;
}

static int count_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    count_env *e = env;
    if (!e->full)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "countenv: this id cannot render");
    for (int y = 0; y < COUNT_H; y++)
        for (int x = 0; x < COUNT_W; x++) {
            uint8_t *p = rgb + 3 * (y * COUNT_W + x);
            p[0] = (uint8_t)e->counter[i];
            p[1] = (uint8_t)i;
            p[2] = (uint8_t)(y * COUNT_W + x);
        }
    return CRL_OK;
}

static const crl_env_ops count_ops = {
    sizeof(crl_env_ops), 0, count_list, count_make, count_bind, count_reset, count_step, count_render, count_close
};

static const crl_option count_options[] = {
    { "offset_range", CRL_OPT_INT, CRL_OPT_RANGE, "3", 1, 100, NULL,
      "start counters are drawn uniformly from [0, offset_range)" },
    { "aux_action", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "add a second action leaf \"aux\" (ignored)" },
    CRL_OPTIONS_END
};

static const crl_component count_component = {
    sizeof(crl_component), CRL_KIND_ENV, "countenv", "deterministic counting envs for tests", count_options,
    &count_ops
};

static int count_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &count_component, err);
}

CRL_PLUGIN_DEFINE(countenv, "countenv", "1.0.0", "MIT", "counting env backend for the env host tests", NULL,
                  count_init, NULL)
