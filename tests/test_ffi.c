/* The ffi env backend over tests/ffi/springmass.c: specs, a rollout equal to a plain C loop over the same
 * library, every executor, and the description errors (CRL_E_CONFIG with FILE:LINE). */
#include <check.h>
#include <dlfcn.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <crl/crl.h>
#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#include "config-check.h"
#include "host-fixture.h"
#include "unsafe-copy.h"

/* The [env] section; each line is one key so a test can replace one. */
static const char *const base_keys[][2] = {
    { "backend", "ffi" },
    { "id", "springmass" },
    { "library", SPRINGMASS_LIB },
    { "make", "handle sm_make()" },
    { "seeding", "void sm_seed(handle, seed)" },
    { "reset", "void sm_reset(handle, double *observation[2])" },
    { "step", "int32 sm_step(handle, const double *action, double *observation, double *reward, "
              "uint8 *terminated) ok=0" },
    { "free", "void sm_free(handle)" },
    { "observation_shape", "2" },
    { "action_shape", "1" },
    { "action_low", "-1" },
    { "action_high", "1" },
};
#define NKEYS (sizeof base_keys / sizeof base_keys[0])

/* The same library through its batch interface. */
static const char *const batch_keys[NKEYS][2] = {
    { "backend", "ffi" },
    { "id", "springmass" },
    { "library", SPRINGMASS_LIB },
    { "make", "handle sm_batch_make(count)" },
    { "seeding", "void sm_batch_seed(handle, seeds, mask, count)" },
    { "reset", "void sm_batch_reset(handle, mask, double *observation, count)" },
    { "step", "int32 sm_batch_step(handle, const double *action, double *observation, double *reward, "
              "uint8 *terminated, count) ok=0" },
    { "free", "void sm_batch_free(handle)" },
    { "observation_shape", "2" },
    { "action_shape", "1" },
    { "calls", "batch" },
    { "action_high", "1" },
};

/* The key table ini_with writes (base_keys unless a test switches to batch_keys). */
static const char *const (*keys)[2] = base_keys;

/* The ini with `key` set to `value` (NULL: removed; a key not in the base is appended), and `extra` lines
 * after; *line gets the line of `key` in the whole file (the fixture adds two lines before). */
static char *ini_with2(const char *key, const char *value, const char *key2, const char *value2,
                       const char *extra, int *line)
{
    GString *s = g_string_new("[env]\n");
    int n = 3; /* "[plugins]", "load", "[env]" */
    bool seen = false;
    for (size_t k = 0; k < NKEYS; k++) {
        const char *v = keys[k][1];
        if (key2 && !strcmp(key2, keys[k][0]))
            v = value2;
        if (key && !strcmp(key, keys[k][0])) {
            seen = true;
            if (!value)
                continue;
            v = value;
            if (line)
                *line = n + 1;
        }
        g_string_append_printf(s, "%s = %s\n", keys[k][0], v);
        n++;
    }
    if (key && !seen && value) {
        g_string_append_printf(s, "%s = %s\n", key, value);
        if (line)
            *line = n + 1;
        n++;
    }
    if (extra)
        g_string_append(s, extra);
    return g_string_free(s, FALSE);
}

static char *ini_with(const char *key, const char *value, const char *extra, int *line)
{
    return ini_with2(key, value, NULL, NULL, extra, line);
}

static crl_env *open_env(crl_test_host *f, const char *ini, crl_error *e)
{
    crl_test_host_open(f, "ffi", ini);
    return crl_env_from_config(f->host, f->cfg, "env", e);
}

START_TEST(specs_pass)
{
    char *ini = ini_with(NULL, NULL, "num_envs = 3\n", NULL);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    ck_assert_int_eq(crl_env_check_specs(env, 40, &e), CRL_OK);
    const crl_spec *a = crl_env_action_spec(env);
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_BOUNDED);
    ck_assert_ptr_eq(a, crl_spec_composite_get(crl_env_full_action_spec(env), "action"));
    ck_assert_int_eq(crl_spec_shape(crl_spec_composite_get(crl_env_observation_spec(env), "observation"))[1], 2);
    crl_env_free(env);
    crl_test_host_close(&f);
    g_free(ini);
}
END_TEST

/* An integer action (sm_step_discrete): OneHot int64 [num, action_n] by default, as TorchRL's wrappers, the
 * library getting the index; categorical_action_encoding = true gives the index itself, step for step alike. */
START_TEST(discrete_action_encodings)
{
    static const char step[] = "int32 sm_step_discrete(handle, const int64 *action, double *observation, "
                               "double *reward, uint8 *terminated) ok=0";
    crl_test_host f, g;
    crl_error e = { 0 };
    char *ini_oh = ini_with("step", step, "num_envs = 3\naction_n = 3\nseed = 4\n", NULL);
    char *ini_ix = ini_with("step", step, "num_envs = 3\naction_n = 3\nseed = 4\ncategorical_action_encoding = true\n",
                            NULL);
    crl_env *oh = open_env(&f, ini_oh, &e);
    ck_assert_msg(oh != NULL, "%s", e.message);
    crl_env *ix = open_env(&g, ini_ix, &e);
    ck_assert_msg(ix != NULL, "%s", e.message);
    const crl_spec *a = crl_spec_composite_get(crl_env_full_action_spec(oh), "action");
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_ONEHOT);
    ck_assert_int_eq(crl_spec_n(a), 3);
    ck_assert_int_eq(crl_spec_dtype(a), CRL_I64);
    ck_assert_int_eq(crl_spec_get_kind(crl_spec_composite_get(crl_env_full_action_spec(ix), "action")), CRL_SPEC_CATEGORICAL);
    ck_assert_int_eq(crl_env_check_specs(oh, 20, &e), CRL_OK);
    crl_env_set_seed(oh, 4);
    crl_env_set_seed(ix, 4);
    crl_td *to = crl_env_reset(oh, NULL, &e), *ti = crl_env_reset(ix, NULL, &e);
    ck_assert_msg(to && ti, "%s", e.message);
    crl_tensor *ao = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 3, 3 }, &e), *ai = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 3 }, &e);
    for (int t = 0; t < 10; t++) {
        crl_tensor_fill(ao, 0);
        for (int i = 0; i < 3; i++) {
            int64_t k = (t + i) % 3;
            crl_tensor_flat_set(ai, i, (double)k);
            crl_tensor_flat_set(ao, i * 3 + k, 1);
        }
        ck_assert_int_eq(crl_td_set(to, "action", ao, &e), CRL_OK);
        ck_assert_int_eq(crl_td_set(ti, "action", ai, &e), CRL_OK);
        ck_assert_msg(crl_env_step(oh, to, &e) == CRL_OK, "%s", e.message);
        ck_assert_msg(crl_env_step(ix, ti, &e) == CRL_OK, "%s", e.message);
        ck_assert(crl_tensor_equal(crl_td_get(to, "next.observation"), crl_td_get(ti, "next.observation")));
        ck_assert(crl_tensor_equal(crl_td_get(to, "next.reward"), crl_td_get(ti, "next.reward")));
        crl_td *no = crl_env_step_mdp(oh, to, &e), *ni = crl_env_step_mdp(ix, ti, &e);
        crl_td_unref(to);
        crl_td_unref(ti);
        to = no;
        ti = ni;
    }
    /* A row with two ones is no action: refused before the library sees it. */
    crl_tensor_fill(ao, 0);
    crl_tensor_flat_set(ao, 0, 1);
    crl_tensor_flat_set(ao, 1, 1);
    crl_tensor_flat_set(ao, 4, 1);
    crl_tensor_flat_set(ao, 8, 1);
    ck_assert_int_eq(crl_td_set(to, "action", ao, &e), CRL_OK);
    ck_assert_int_eq(crl_env_step(oh, to, &e), CRL_E_RANGE);
    ck_assert_msg(strstr(e.message, "action") && strstr(e.message, "env 0"), "%s", e.message);
    crl_tensor_unref(ao);
    crl_tensor_unref(ai);
    crl_td_unref(to);
    crl_td_unref(ti);
    crl_env_free(oh);
    crl_env_free(ix);
    crl_test_host_close(&f);
    crl_test_host_close(&g);
    g_free(ini_oh);
    g_free(ini_ix);
}
END_TEST

/* The same library driven directly: env i seeded with element i of the chain, actions a(t, i). */
static float action_at(int64_t t, int64_t i)
{
    return (float)sin(0.3 * (double)t + (double)i);
}

typedef struct direct {
    void *(*make)(void);
    void (*seed)(void *, uint64_t);
    void (*reset)(void *, double *);
    int32_t (*step)(void *, const double *, double *, double *, uint8_t *);
    void (*free)(void *);
    void *lib;
} direct;

static void direct_open(direct *d)
{
    d->lib = dlopen(SPRINGMASS_LIB, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(d->lib != NULL, "%s", dlerror());
    *(void **)&d->make = dlsym(d->lib, "sm_make");
    *(void **)&d->seed = dlsym(d->lib, "sm_seed");
    *(void **)&d->reset = dlsym(d->lib, "sm_reset");
    *(void **)&d->step = dlsym(d->lib, "sm_step");
    *(void **)&d->free = dlsym(d->lib, "sm_free");
    ck_assert(d->make && d->seed && d->reset && d->step && d->free);
}

#define NUM 4
#define STEPS 60

/* Roll the ffi env (with `extra` config lines) and compare every observation, reward and flag bitwise. */
static void rollout_equals_direct(const char *extra)
{
    char *more = g_strdup_printf("num_envs = %d\n%s", NUM, extra);
    char *ini = ini_with(NULL, NULL, more, NULL);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_env_set_seed(env, 7);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);

    direct d;
    direct_open(&d);
    void *sims[NUM];
    double obs[NUM][2], rew[NUM];
    uint8_t term[NUM];
    uint64_t seed = 7;
    for (int i = 0; i < NUM; i++) {
        sims[i] = d.make();
        d.seed(sims[i], seed);
        seed = crl_seed_next(seed);
        d.reset(sims[i], obs[i]);
    }
    const float *o = crl_tensor_data(crl_td_get(td, "observation"));
    for (int i = 0; i < NUM; i++)
        for (int k = 0; k < 2; k++)
            ck_assert_msg((float)obs[i][k] == o[i * 2 + k], "reset env %d obs %d", i, k);
    int64_t ashape[2] = { NUM, 1 };
    crl_tensor *act = crl_tensor_new(CRL_F32, 2, ashape, &e);
    ck_assert_ptr_nonnull(act);
    for (int64_t t = 0; t < STEPS; t++) {
        float *a = crl_tensor_data(act);
        for (int i = 0; i < NUM; i++)
            a[i] = action_at(t, i);
        ck_assert_int_eq(crl_td_set(td, "action", act, &e), CRL_OK);
        ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
        const float *no = crl_tensor_data(crl_td_get(td, "next.observation"));
        const float *nr = crl_tensor_data(crl_td_get(td, "next.reward"));
        const uint8_t *nt = crl_tensor_data(crl_td_get(td, "next.terminated"));
        for (int i = 0; i < NUM; i++) {
            double u = a[i];
            ck_assert_int_eq(d.step(sims[i], &u, obs[i], &rew[i], &term[i]), 0);
            for (int k = 0; k < 2; k++)
                ck_assert_msg((float)obs[i][k] == no[i * 2 + k], "step %lld env %d obs %d: %.9g vs %.9g",
                              (long long)t, i, k, obs[i][k], no[i * 2 + k]);
            ck_assert((float)rew[i] == nr[i]);
            ck_assert_int_eq(term[i] != 0, nt[i]);
            ck_assert_int_eq(nt[i], 0); /* bounded forces keep |x| < 4: no reset needed */
        }
        crl_td *nx = crl_env_step_mdp(env, td, &e);
        ck_assert_msg(nx != NULL, "%s", e.message);
        crl_td_unref(td);
        td = nx;
    }
    for (int i = 0; i < NUM; i++)
        d.free(sims[i]);
    dlclose(d.lib);
    crl_tensor_unref(act);
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&f);
    g_free(ini);
    g_free(more);
}

START_TEST(rollout_inline) { rollout_equals_direct(""); }
END_TEST
START_TEST(rollout_serial) { rollout_equals_direct("executor = serial\nnum_workers = 2\n"); }
END_TEST
START_TEST(rollout_threads) { rollout_equals_direct("executor = threads\nnum_workers = 2\n"); }
END_TEST
START_TEST(rollout_processes) { rollout_equals_direct("executor = processes\nnum_workers = 2\n"); }
END_TEST

/* calls = batch: one call for all envs of an instance, inline and split across worker blocks. */
START_TEST(rollout_batch)
{
    keys = batch_keys;
    rollout_equals_direct("");
    rollout_equals_direct("executor = threads\nnum_workers = 2\n");
    rollout_equals_direct("executor = processes\nnum_workers = 2\n");
    keys = base_keys;
}
END_TEST

/* A masked reset resets only the masked envs: the others keep their observations. */
START_TEST(batch_masked_reset)
{
    keys = batch_keys;
    char *ini = ini_with(NULL, NULL, "num_envs = 3\n", NULL);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_env_set_seed(env, 3);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    float before[6];
    memcpy(before, crl_tensor_data(crl_td_get(td, "observation")), sizeof before);
    int64_t ms[2] = { 3, 1 };
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, ms, &e);
    uint8_t *md = crl_tensor_data(m);
    md[0] = 0;
    md[1] = 1;
    md[2] = 0;
    ck_assert_int_eq(crl_td_set(td, "_reset", m, &e), CRL_OK);
    crl_tensor_unref(m);
    crl_td *again = crl_env_reset(env, td, &e);
    ck_assert_msg(again != NULL, "%s", e.message);
    const float *after = crl_tensor_data(crl_td_get(again, "observation"));
    ck_assert(after[0] == before[0] && after[1] == before[1] && after[4] == before[4] && after[5] == before[5]);
    ck_assert(after[2] != before[2] || after[3] != before[3]); /* env 1 drew a new start from its own stream */
    crl_td_unref(again);
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&f);
    g_free(ini);
    keys = base_keys;
}
END_TEST

static void expect_config_error(const char *key, const char *value, const char *want);

START_TEST(bad_batch)
{
    keys = batch_keys;
    expect_config_error("reset", "void sm_batch_reset(handle, double *observation, count)", "takes the mask");
    expect_config_error("seeding", "void sm_batch_seed(handle, seed)", "use seeds");
    expect_config_error("step", "int32 sm_step(handle, const double *action, double *observation, double *reward, "
                        "mask)", "reset and seeding functions only");
    keys = base_keys;
}
END_TEST

/* A bad description: CRL_E_CONFIG naming test.ini:LINE of the key and `want`. */
static void expect_config_error(const char *key, const char *value, const char *want)
{
    int line = 0;
    char *ini = ini_with(key, value, NULL, &line);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_ptr_null(env);
    ck_assert_msg(e.code == CRL_E_CONFIG, "%s: code %d: %s", key, e.code, e.message);
    char *where = g_strdup_printf("test.ini:%d", line);
    ck_assert_msg(strstr(e.message, where) != NULL, "want %s in: %s", where, e.message);
    ck_assert_msg(strstr(e.message, want) != NULL, "want '%s' in: %s", want, e.message);
    g_free(where);
    crl_test_host_close(&f);
    g_free(ini);
}

START_TEST(bad_unknown_symbol)
{
    expect_config_error("step", "int32 sm_stpe(handle, const double *action, double *observation, double *reward, "
                        "uint8 *terminated)", "no function 'sm_stpe'");
}
END_TEST

START_TEST(bad_type)
{
    expect_config_error("reset", "void sm_reset(handle, dubble *observation)", "does not parse");
    expect_config_error("make", "handel sm_make()", "does not parse");
    expect_config_error("step", "int32 sm_step(handle, const double *action, double *observation, double *reward, "
                        "uint8 *terminated", "')' missing");
    expect_config_error("reset", "void sm_reset(handle, double *obsrvation)", "did you mean 'observation'");
    expect_config_error("seeding", "void sm_seed(handle, int32=abc)", "not an integer");
}
END_TEST

START_TEST(bad_shape)
{
    expect_config_error("reset", "void sm_reset(handle, double *observation[3])", "[3] but the observation spec");
    expect_config_error("observation_shape", "0", "not a positive size");
}
END_TEST

START_TEST(bad_missing)
{
    expect_config_error("step", "int32 sm_step(handle, const double *action, double *observation)", "reward");
    expect_config_error("reset", "void sm_reset(handle)", "reset must write the observation");
    expect_config_error("step", "int32 sm_step(handle, double *action, double *observation, double *reward, "
                        "uint8 *terminated)", "declare it const");
    expect_config_error("library", "/nonexistent/libnothing.so", "/nonexistent does not exist");
    expect_config_error("library", "/tmp", "not a regular file");
    /* A soname from the system's directories loads (root-owned) and is then searched for the symbols. */
    {
        char *ini = ini_with("library", "libm.so.6", NULL, NULL);
        crl_test_host f;
        crl_error e = { 0 };
        ck_assert_ptr_null(open_env(&f, ini, &e));
        ck_assert_msg(e.code == CRL_E_CONFIG && strstr(e.message, "no function 'sm_make' (libm.so.6)"), "%s",
                      e.message);
        crl_test_host_close(&f);
        g_free(ini);
    }
    expect_config_error("library", "libnothing-crl.so.9", "cannot load libnothing-crl.so.9");
}
END_TEST

/* A truncated copy of the library is refused before dlopen would map it (and crash on the missing pages). */
START_TEST(bad_truncated)
{
    GError *ge = NULL;
    char *dir = g_dir_make_tmp("crl-ffi-trunc-XXXXXX", &ge);
    ck_assert_msg(dir != NULL, "%s", ge ? ge->message : "");
    char *copy = g_build_filename(dir, "libspringmass.so", NULL);
    char *data;
    gsize len;
    ck_assert(g_file_get_contents(SPRINGMASS_LIB, &data, &len, NULL));
    ck_assert(len > 3000);
    ck_assert(g_file_set_contents(copy, data, 3000, NULL));
    g_free(data);
    expect_config_error("library", copy, "is truncated or corrupt");
    g_unlink(copy);
    g_rmdir(dir);
    g_free(copy);
    g_free(dir);
}
END_TEST

START_TEST(bad_world_writable)
{
    char *dir;
    char *copy = crl_test_unsafe_copy(SPRINGMASS_LIB, "crl-ffi-XXXXXX", "libspringmass.so", &dir);
    expect_config_error("library", copy, "world-writable");
    /* Reached through a symlink from a safe directory: the link's target is checked hop by hop. */
    GError *ge = NULL;
    char *safe = g_dir_make_tmp("crl-ffi-link-XXXXXX", &ge);
    ck_assert(safe != NULL);
    char *link = g_build_filename(safe, "libsim.so", NULL);
    ck_assert_int_eq(symlink(copy, link), 0);
    expect_config_error("library", link, "world-writable");
    /* A soname the dynamic linker would take from LD_LIBRARY_PATH is checked there before it is loaded. */
    const char *old = g_getenv("LD_LIBRARY_PATH");
    char *saved = old ? g_strdup(old) : NULL;
    g_setenv("LD_LIBRARY_PATH", dir, TRUE);
    expect_config_error("library", "libspringmass.so", "world-writable");
    if (saved)
        g_setenv("LD_LIBRARY_PATH", saved, TRUE);
    else
        g_unsetenv("LD_LIBRARY_PATH");
    g_free(saved);
    g_unlink(link);
    g_rmdir(safe);
    g_free(link);
    g_free(safe);
    crl_test_unsafe_copy_free(copy, dir);
}
END_TEST

/* `crl config check` dry-builds the env: a bad description exits 2 naming FILE:LINE. */
START_TEST(config_check_exits_2)
{
    int line = 0;
    char *ini = ini_with("reset", "void sm_reset(handle, dubble *observation)", NULL, &line);
    /* The file has no [plugins] section: the key is two lines higher than in the fixture's text. */
    crl_test_config_check_fails(ini, line - 2, "does not parse");
    g_free(ini);
}
END_TEST

/* Errors from the library: a declared error return and NaN outputs, naming the function and env. */
static void expect_runtime_error(const char *make, const char *step, const char *want)
{
    char *ini = ini_with2("make", make, "step", step, "num_envs = 2\n", NULL);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_env_set_seed(env, 1);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    int rc = CRL_OK;
    for (int t = 0; t < 3 && rc == CRL_OK; t++) {
        ck_assert_int_eq(crl_env_rand_action(env, td, &e), CRL_OK);
        rc = crl_env_step(env, td, &e);
        if (rc == CRL_OK) {
            crl_td *nx = crl_env_step_mdp(env, td, &e);
            ck_assert_ptr_nonnull(nx);
            crl_td_unref(td);
            td = nx;
        }
    }
    ck_assert_msg(rc == CRL_E_RUNTIME, "code %d: %s", rc, e.message);
    ck_assert_msg(strstr(e.message, want) != NULL, "want '%s' in: %s", want, e.message);
    ck_assert_msg(strstr(e.message, "env 0") != NULL, "no env in: %s", e.message);
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&f);
    g_free(ini);
}

START_TEST(error_return_code)
{
    expect_runtime_error("handle sm_make_mass(double=-1)", base_keys[6][1], "sm_step returned -1");
}
END_TEST
/* Mass 0 sends the state to infinity, then to NaN; without terminated nothing ends the episode first. */
START_TEST(nan_output)
{
    expect_runtime_error("handle sm_make_mass(double=0)",
                         "int32 sm_step_plant(handle, const double *action, double *observation, double *reward) "
                         "ok=0",
                         "sm_step_plant wrote NaN into observation[0] of env 0");
}
END_TEST

/* render + from_pixels: every frame the host stores is the one the library draws for the same state. */
#define RH 6
#define RW 32
START_TEST(render_pixels)
{
    char *ini = ini_with("render", "int32 sm_render(handle, rgb, int32=6, int32=32) ok=0",
                         "num_envs = 3\nfrom_pixels = true\nrender_height = 6\nrender_width = 32\n", NULL);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    ck_assert_int_eq(crl_env_check_specs(env, 10, &e), CRL_OK);
    crl_env_set_seed(env, 5);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);

    direct d;
    direct_open(&d);
    int32_t (*render)(const void *, uint8_t *, int32_t, int32_t);
    *(void **)&render = dlsym(d.lib, "sm_render");
    ck_assert_ptr_nonnull(render);
    void *sims[3];
    double obs[2], rew;
    uint8_t term, frame[RH * RW * 3];
    uint64_t seed = 5;
    for (int i = 0; i < 3; i++) {
        sims[i] = d.make();
        d.seed(sims[i], seed);
        seed = crl_seed_next(seed);
        d.reset(sims[i], obs);
    }
    int64_t ashape[2] = { 3, 1 };
    crl_tensor *act = crl_tensor_new(CRL_F32, 2, ashape, &e);
    ck_assert_ptr_nonnull(act);
    int dark = 0;
    for (int64_t t = 0; t <= 20; t++) {
        if (t) {
            float *a = crl_tensor_data(act);
            for (int i = 0; i < 3; i++)
                a[i] = action_at(t, i);
            ck_assert_int_eq(crl_td_set(td, "action", act, &e), CRL_OK);
            ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
            for (int i = 0; i < 3; i++) {
                double u = a[i];
                ck_assert_int_eq(d.step(sims[i], &u, obs, &rew, &term), 0);
            }
        }
        const char *key = t ? "next.pixels" : "pixels";
        crl_tensor *px = crl_td_get(td, key);
        ck_assert_ptr_nonnull(px);
        ck_assert_int_eq(crl_tensor_dtype(px), CRL_U8);
        ck_assert_int_eq(crl_tensor_ndim(px), 4);
        ck_assert_int_eq(crl_tensor_shape(px)[1], RH);
        ck_assert_int_eq(crl_tensor_shape(px)[2], RW);
        const uint8_t *p = crl_tensor_data(px);
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(render(sims[i], frame, RH, RW), 0);
            ck_assert_msg(!memcmp(frame, p + (size_t)i * sizeof frame, sizeof frame), "%s of env %d at t=%lld", key,
                          i, (long long)t);
            for (size_t k = 0; k < sizeof frame; k += 3)
                dark += frame[k] == 20;
        }
        if (t) {
            crl_td *nx = crl_env_step_mdp(env, td, &e);
            ck_assert_msg(nx != NULL, "%s", e.message);
            crl_td_unref(td);
            td = nx;
        }
    }
    ck_assert_int_gt(dark, 0); /* the bar shows: the frames are not blank */
    for (int i = 0; i < 3; i++)
        d.free(sims[i]);
    dlclose(d.lib);
    crl_tensor_unref(act);
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&f);
    g_free(ini);
}
END_TEST

/* A render that reports an error, and the render description errors. */
START_TEST(render_errors)
{
    char *ini = ini_with("render", "int32 sm_render(handle, rgb, int32=0, int32=32) ok=0",
                         "from_pixels = true\nrender_height = 6\nrender_width = 32\n", NULL);
    crl_test_host f;
    crl_error e = { 0 };
    crl_env *env = open_env(&f, ini, &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_ptr_null(td);
    ck_assert_msg(strstr(e.message, "sm_render returned -1 for env 0") != NULL, "%s", e.message);
    crl_env_free(env);
    crl_test_host_close(&f);
    g_free(ini);

    expect_config_error("render", "int32 sm_render(handle, rgb, int32=6, int32=32)", "render_height and render_width");
    expect_config_error("render_width", "32", "without a render function");
    expect_config_error("step", "int32 sm_step(handle, rgb, const double *action, double *observation, "
                        "double *reward)", "render function only");
}
END_TEST

static Suite *ffi_suite(void)
{
    Suite *s = suite_create("ffi");
    TCase *tc = tcase_create("ffi");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, specs_pass);
    tcase_add_test(tc, discrete_action_encodings);
    tcase_add_test(tc, rollout_inline);
    tcase_add_test(tc, rollout_serial);
    tcase_add_test(tc, rollout_threads);
    tcase_add_test(tc, rollout_processes);
    tcase_add_test(tc, rollout_batch);
    tcase_add_test(tc, batch_masked_reset);
    tcase_add_test(tc, bad_batch);
    tcase_add_test(tc, bad_unknown_symbol);
    tcase_add_test(tc, bad_type);
    tcase_add_test(tc, bad_shape);
    tcase_add_test(tc, bad_missing);
    tcase_add_test(tc, bad_world_writable);
    tcase_add_test(tc, bad_truncated);
    tcase_add_test(tc, config_check_exits_2);
    tcase_add_test(tc, error_return_code);
    tcase_add_test(tc, nan_output);
    tcase_add_test(tc, render_pixels);
    tcase_add_test(tc, render_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ffi_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
