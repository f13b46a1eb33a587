/* badspec: an env backend (component env/badspec) that breaks its own specs at step time, for check_env_specs tests.
 *
 * "observation" is Bounded float32 [num, 1] in [-1, 1], "action"
 * Categorical(2), "reward" float32 [num, 1].  Option mode:
 *   observation_range  step writes 2.0, outside the observation's bounds
 *   reward_dtype       step swaps the reward buffer for a float64 tensor
 *   none               behaves */
#include <crl/crl.h>
#include <crl/env_backend.h>

#include <stdlib.h>
#include <string.h>

enum { MODE_OBS_RANGE, MODE_REWARD_DTYPE, MODE_NONE };

static const char *const bad_ids[] = { "Bad-v0", NULL };

typedef struct bad_env {
    int64_t num;
    int mode;
    crl_td *buffers;        /* borrowed from bind */
    float *obs;
    float *reward;
    crl_tensor *wrong;      /* the float64 reward it swaps in */
} bad_env;

static const char *const *bad_list(void)
{
    return bad_ids;
}


static void bad_close(void *env)
{
    bad_env *e = env;
    if (!e)
        return;
    crl_tensor_unref(e->wrong);
    free(e);
}

static int bad_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                    crl_error *err)
{
    if (strcmp(id, "Bad-v0") != 0)
        return crl_error_set(err, CRL_E_NOT_FOUND, "badspec: no env '%s' (ids: Bad-v0)", id);
    const char *mode = "observation_range";
    if (opts && crl_opts_string(opts, "mode", &mode, err))
        return err->code;
    int64_t col[2] = { num, 1 };
    specs->observation = crl_spec_composite_of(num, "observation", crl_spec_bounded(CRL_F32, 2, col, -1.0, 1.0, err), err);
    specs->action = crl_spec_composite_of(num, "action", crl_spec_categorical(2, CRL_I64, 1, &num, err), err);
    specs->reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, err), err);
    specs->done = crl_env_backend_done_spec(num, err);
    if (!specs->observation || !specs->action || !specs->reward || !specs->done)
        return err ? err->code : CRL_E_INVALID;
    bad_env *e = calloc(1, sizeof *e);
    if (!e)
        return crl_error_set(err, CRL_E_NOMEM, "badspec: out of memory");
    e->num = num;
    e->mode = !strcmp(mode, "reward_dtype") ? MODE_REWARD_DTYPE : !strcmp(mode, "none") ? MODE_NONE : MODE_OBS_RANGE;
    *env = e;
    return CRL_OK;
}

static int bad_bind(void *env, crl_td *buffers, crl_error *err)
{
    bad_env *e = env;
    e->buffers = buffers;
    crl_tensor *o = crl_td_get(buffers, "observation"), *r = crl_td_get(buffers, "reward");
    if (!o || !r)
        return crl_error_set(err, CRL_E_INVALID, "badspec: bind: no observation or reward buffer");
    e->obs = crl_tensor_data(o);
    e->reward = crl_tensor_data(r);
    return CRL_OK;
}

static int bad_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    bad_env *e = env;
    (void)seeds;
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "badspec: no state");
    for (int64_t i = 0; i < e->num; i++)
        if (!mask || mask[i])
            e->obs[i] = 0.0f;
    return CRL_OK;
}

static int bad_step(void *env, crl_error *err)
{
    bad_env *e = env;
    if (e->mode == MODE_REWARD_DTYPE && !e->wrong) {
        int64_t col[2] = { e->num, 1 };
        e->wrong = crl_tensor_new(CRL_F64, 2, col, err);
        if (!e->wrong || crl_td_set(e->buffers, "reward", e->wrong, err))
            return err ? err->code : CRL_E_NOMEM;
        crl_tensor_fill(e->wrong, 1.0);
    }
    for (int64_t i = 0; i < e->num; i++) {
        e->obs[i] = e->mode == MODE_OBS_RANGE ? 2.0f : 0.5f;
        if (e->mode != MODE_REWARD_DTYPE)
            e->reward[i] = 1.0f;
    }
    return CRL_OK;
}

static const crl_env_ops bad_ops = {
    sizeof(crl_env_ops), 0, bad_list, bad_make, bad_bind, bad_reset, bad_step, NULL, bad_close
};

static const crl_option bad_options[] = {
    { "mode", CRL_OPT_ENUM, 0, "observation_range", 0, 0, "observation_range|reward_dtype|none",
      "how step breaks the specs" },
    CRL_OPTIONS_END
};

static const crl_component bad_component = {
    sizeof(crl_component), CRL_KIND_ENV, "badspec", "env whose steps break its specs (tests)", bad_options, &bad_ops
};

static int bad_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &bad_component, err);
}

CRL_PLUGIN_DEFINE(badspec, "badspec", "1.0.0", "MIT", "env backend that breaks its specs (tests)", NULL, bad_init,
                  NULL)
