/* The ffi backend's cost over a direct call: steps/s of tests/ffi/springmass.c driven by a plain C loop and
 * by the ffi env backend (through the host's env API, crl_env_step_and_maybe_reset), side by side, for one env
 * and a batch.  Prints a table; asserts nothing about speed (run it by hand: make tests/ffi/bench_ffi, then
 * with CRL_PLUGIN_PATH holding plugins/ffi/.libs, tests/ffi/bench_ffi). */
#include <dlfcn.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#define STEPS 200000

typedef struct direct {
    void *(*make)(void);
    void (*seed)(void *, uint64_t);
    void (*reset)(void *, double *);
    int32_t (*step)(void *, const double *, double *, double *, uint8_t *);
    void (*free)(void *);
} direct;

/* Frames per second of the direct loop over num sims (same action, reset on terminated). */
static double run_direct(const direct *d, int64_t num, int64_t steps)
{
    void **sims = g_new(void *, num);
    double *obs = g_new(double, 2 * num), *rew = g_new(double, num);
    uint8_t *term = g_new(uint8_t, num);
    for (int64_t i = 0; i < num; i++) {
        sims[i] = d->make();
        d->seed(sims[i], (uint64_t)i);
        d->reset(sims[i], obs + 2 * i);
    }
    int64_t t0 = g_get_monotonic_time();
    double checksum = 0;
    for (int64_t s = 0; s < steps / num; s++)
        for (int64_t i = 0; i < num; i++) {
            double u = (float)0.5;
            if (d->step(sims[i], &u, obs + 2 * i, rew + i, term + i) != 0)
                abort();
            checksum += rew[i];
            if (term[i])
                d->reset(sims[i], obs + 2 * i);
        }
    double secs = (double)(g_get_monotonic_time() - t0) / 1e6;
    for (int64_t i = 0; i < num; i++)
        d->free(sims[i]);
    g_free(sims);
    g_free(obs);
    g_free(rew);
    g_free(term);
    if (checksum == 1.0) /* keep the loop */
        printf(" ");
    return (double)(steps / num * num) / secs;
}

static double run_ffi(int64_t num, int64_t steps, crl_error *e)
{
    char *ini = g_strdup_printf(
        "[env]\nbackend = ffi\nid = springmass\nlibrary = %s\nmake = handle sm_make()\n"
        "seeding = void sm_seed(handle, seed)\nreset = void sm_reset(handle, double *observation)\n"
        "step = int32 sm_step(handle, const double *action, double *observation, double *reward, "
        "uint8 *terminated) ok=0\nfree = void sm_free(handle)\nobservation_shape = 2\nnum_envs = %lld\n"
        "auto_reset = next_step\n",
        SPRINGMASS_LIB, (long long)num);
    crl_config *cfg = crl_config_new(e);
    crl_host *host = NULL;
    crl_env *env = NULL;
    crl_td *td = NULL, *root = NULL;
    double fps = -1;
    if (!cfg || crl_config_load_buffer(cfg, "bench.ini", ini, strlen(ini), CRL_LAYER_FILE, e))
        goto out;
    host = crl_host_new(cfg, e);
    if (!host || crl_host_load_configured(host, e))
        goto out;
    env = crl_env_from_config(host, cfg, "env", e);
    if (!env || !(td = crl_env_reset(env, NULL, e)))
        goto out;
    root = crl_td_new(crl_env_batch_ndim(env), crl_env_batch_shape(env), e);
    int64_t shape[2] = { num, 1 };
    crl_tensor *act = crl_tensor_new(CRL_F32, 2, shape, e);
    if (!root || !act)
        goto out;
    float *a = crl_tensor_data(act);
    for (int64_t i = 0; i < num; i++)
        a[i] = 0.5f;
    int64_t t0 = g_get_monotonic_time();
    for (int64_t s = 0; s < steps / num; s++) {
        if (crl_td_set(td, "action", act, e) || crl_env_step_and_maybe_reset(env, td, root, e)) {
            crl_tensor_unref(act);
            goto out;
        }
        crl_td *tmp = td;
        td = root;
        root = tmp;
    }
    fps = (double)(steps / num * num) / ((double)(g_get_monotonic_time() - t0) / 1e6);
    crl_tensor_unref(act);
out:
    crl_td_unref(td);
    crl_td_unref(root);
    crl_env_free(env);
    crl_host_free(host);
    crl_config_free(cfg);
    g_free(ini);
    return fps;
}

int main(void)
{
    void *lib = dlopen(SPRINGMASS_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bench_ffi: %s\n", dlerror());
        return 1;
    }
    direct d;
    *(void **)&d.make = dlsym(lib, "sm_make");
    *(void **)&d.seed = dlsym(lib, "sm_seed");
    *(void **)&d.reset = dlsym(lib, "sm_reset");
    *(void **)&d.step = dlsym(lib, "sm_step");
    *(void **)&d.free = dlsym(lib, "sm_free");
    if (!d.make || !d.seed || !d.reset || !d.step || !d.free) {
        fprintf(stderr, "bench_ffi: %s lacks a springmass function\n", SPRINGMASS_LIB);
        return 1;
    }
    printf("%-8s %16s %16s %10s\n", "envs", "direct C steps/s", "ffi env steps/s", "ns/step +");
    const int64_t nums[] = { 1, 256 };
    for (size_t k = 0; k < 2; k++) {
        crl_error e = { 0 };
        double direct_fps = run_direct(&d, nums[k], STEPS);
        double ffi_fps = run_ffi(nums[k], STEPS, &e);
        if (ffi_fps < 0) {
            fprintf(stderr, "bench_ffi: %s\n", e.message);
            return 1;
        }
        printf("%-8lld %16.0f %16.0f %10.1f\n", (long long)nums[k], direct_fps, ffi_fps,
               1e9 / ffi_fps - 1e9 / direct_fps);
    }
    dlclose(lib);
    return 0;
}
