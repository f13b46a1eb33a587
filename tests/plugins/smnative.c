/* smnative: the springmass example library (tests/ffi/springmass.c) wrapped by hand as a native env
 * backend, env/smnative, id "springmass": what `crl bench envs` sets beside the ffi backend describing the
 * same library.  The library is dlopen'ed from the `library` option and its functions are called
 * directly through their pointers, with the conversions a plugin author would write. */
#include <crl/crl.h>
#include <crl/env_backend.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static const crl_option sm_options[] = {
    { "library", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "required: path of tests/ffi/.libs/libspringmass.so" },
    CRL_OPTIONS_END
};

static const char *const sm_ids[] = { "springmass", NULL };

typedef struct sm_native {
    int64_t num;
    void *lib;
    void *(*make)(void);
    void (*seed)(void *, uint64_t);
    void (*reset)(void *, double *);
    int32_t (*step)(void *, const double *, double *, double *, uint8_t *);
    void (*free)(void *);
    void **sims;
    float *obs, *reward;
    const float *action;
    uint8_t *terminated, *truncated;
} sm_native;

static const char *const *sm_list(void)
{
    return sm_ids;
}

static void sm_close(void *env)
{
    sm_native *e = env;
    if (!e)
        return;
    for (int64_t i = 0; e->sims && i < e->num; i++)
        if (e->sims[i])
            e->free(e->sims[i]);
    free(e->sims);
    if (e->lib)
        dlclose(e->lib);
    free(e);
}

static int sm_make_env(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                       crl_error *err)
{
    *env = NULL;
    if (strcmp(id, "springmass"))
        return crl_error_set(err, CRL_E_NOT_FOUND, "smnative: no env '%s' (ids: springmass)", id);
    const char *lib = NULL;
    int rc = crl_opts_string(opts, "library", &lib, err);
    if (rc)
        return rc;
    if (!lib || !*lib)
        return crl_error_set(err, CRL_E_CONFIG, "smnative: set library to the springmass library's path");
    sm_native *e = calloc(1, sizeof *e);
    if (!e)
        return crl_error_set(err, CRL_E_NOMEM, "smnative: out of memory");
    e->num = num;
    e->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!e->lib) {
        rc = crl_error_set(err, CRL_E_NOT_FOUND, "smnative: cannot load %s: %s", lib, dlerror());
        sm_close(e);
        return rc;
    }
    void *p[5] = { dlsym(e->lib, "sm_make"), dlsym(e->lib, "sm_seed"), dlsym(e->lib, "sm_reset"),
                   dlsym(e->lib, "sm_step"), dlsym(e->lib, "sm_free") };
    if (!p[0] || !p[1] || !p[2] || !p[3] || !p[4]) {
        rc = crl_error_set(err, CRL_E_NOT_FOUND, "smnative: %s lacks the sm_make/sm_seed/sm_reset/sm_step/sm_free "
                           "functions", lib);
        sm_close(e);
        return rc;
    }
    memcpy(&e->make, &p[0], sizeof p[0]);
    memcpy(&e->seed, &p[1], sizeof p[1]);
    memcpy(&e->reset, &p[2], sizeof p[2]);
    memcpy(&e->step, &p[3], sizeof p[3]);
    memcpy(&e->free, &p[4], sizeof p[4]);
    e->sims = calloc((size_t)num, sizeof *e->sims);
    for (int64_t i = 0; e->sims && i < num; i++)
        if (!(e->sims[i] = e->make()))
            break;
    if (!e->sims || !e->sims[num - 1]) {
        sm_close(e);
        return crl_error_set(err, CRL_E_NOMEM, "smnative: out of memory");
    }
    int64_t obs_shape[2] = { num, 2 }, col[2] = { num, 1 };
    specs->observation = crl_spec_composite_of(num, "observation", crl_spec_unbounded(CRL_F32, 2, obs_shape, err),
                                               err);
    specs->action = crl_spec_composite_of(num, "action", crl_spec_bounded(CRL_F32, 2, col, -1.0, 1.0, err), err);
    specs->reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, err), err);
    specs->done = crl_env_backend_done_spec(num, err);
    if (!specs->observation || !specs->action || !specs->reward || !specs->done) {
        sm_close(e);
        return CRL_E_INVALID;
    }
    *env = e;
    return CRL_OK;
}

static int sm_bind(void *env, crl_td *buffers, crl_error *err)
{
    sm_native *e = env;
    int rc = CRL_OK;
    e->obs = crl_env_backend_buffer(buffers, "smnative", "observation", CRL_F32, e->num, 2, &rc, err);
    e->action = crl_env_backend_buffer(buffers, "smnative", "action", CRL_F32, e->num, 1, &rc, err);
    e->reward = crl_env_backend_buffer(buffers, "smnative", "reward", CRL_F32, e->num, 1, &rc, err);
    e->terminated = crl_env_backend_buffer(buffers, "smnative", "terminated", CRL_BOOL, e->num, 1, &rc, err);
    e->truncated = crl_env_backend_buffer(buffers, "smnative", "truncated", CRL_BOOL, e->num, 1, &rc, err);
    return rc;
}

static int sm_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    sm_native *e = env;
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "smnative: no state to reset from");
    for (int64_t i = 0; i < e->num; i++) {
        if (mask && !mask[i])
            continue;
        if (seeds)
            e->seed(e->sims[i], seeds[i]);
        double o[2];
        e->reset(e->sims[i], o);
        e->obs[2 * i] = (float)o[0];
        e->obs[2 * i + 1] = (float)o[1];
        e->terminated[i] = e->truncated[i] = 0;
    }
    return CRL_OK;
}

static int sm_step(void *env, crl_error *err)
{
    sm_native *e = env;
    for (int64_t i = 0; i < e->num; i++) {
        double u = e->action[i], o[2], r;
        uint8_t t;
        if (e->step(e->sims[i], &u, o, &r, &t))
            return crl_error_set(err, CRL_E_RUNTIME, "smnative: sm_step failed for env %lld", (long long)i);
        e->obs[2 * i] = (float)o[0];
        e->obs[2 * i + 1] = (float)o[1];
        e->reward[i] = (float)r;
        e->terminated[i] = t != 0;
    }
    return CRL_OK;
}

static const crl_env_ops sm_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = sm_list,
    .make = sm_make_env,
    .bind = sm_bind,
    .reset = sm_reset,
    .step = sm_step,
    .render = NULL,
    .close = sm_close,
};

static const crl_component sm_component = {
    sizeof(crl_component), CRL_KIND_ENV, "smnative",
    "the springmass example library wrapped by hand (the native side of crl bench envs' ffi figure)", sm_options,
    &sm_ops,
};

static int sm_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &sm_component, err);
}

CRL_PLUGIN_DEFINE(smnative, "smnative", "1.0", "MIT", "springmass wrapped as a native env backend (bench fixture)",
                  NULL, sm_init, NULL)
