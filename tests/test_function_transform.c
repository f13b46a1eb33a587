/* FunctionTransform over tests/ffi/obsfilter.c: standalone on TensorDicts of any batch shape, per row and in
 * one batch call, a handle made and freed, inside an env's chain (specs and rollout), and the description
 * and runtime errors (CRL_E_CONFIG with FILE:LINE; the function and row named). */
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
#include <crl/transform.h>

#include "config-check.h"
#include "host-fixture.h"
#include "unsafe-copy.h"

#define LIB "library=" OBSFILTER_LIB

static crl_td *td_with(const char *key, crl_dtype dt, int bnd, const int64_t *bshape, int64_t row)
{
    crl_error e = { 0 };
    crl_td *td = crl_td_new(bnd, bshape, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    int64_t shape[4];
    memcpy(shape, bshape, (size_t)bnd * sizeof *shape);
    shape[bnd] = row;
    crl_tensor *t = crl_tensor_new(dt, bnd + 1, shape, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    for (int64_t m = 0; m < crl_tensor_numel(t); m++) {
        double v = sin(1.7 * (double)m) * 3.0;
        if (dt == CRL_F32)
            ((float *)crl_tensor_data(t))[m] = (float)v;
        else
            ((double *)crl_tensor_data(t))[m] = v;
    }
    ck_assert_int_eq(crl_td_set(td, key, t, &e), CRL_OK);
    crl_tensor_unref(t);
    return td;
}

static crl_transform *make_tf(crl_test_host *f, const char *const *kv, crl_error *e)
{
    crl_test_host_open(f, "transforms", "");
    return crl_transform_new(f->host, "FunctionTransform", kv, e);
}

START_TEST(affine_per_row)
{
    const char *kv[] = { LIB, "forward=void of_affine(const double *in[3], double *out[3], double=2, double=0.5, int64=3)",
                         "in_keys=obs", "out_keys=feat", NULL };
    crl_test_host f;
    crl_error e = { 0 };
    crl_transform *t = make_tf(&f, kv, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b[1] = { 4 };
    crl_td *td = td_with("obs", CRL_F32, 1, b, 3);
    ck_assert_msg(crl_transform_apply(t, td, &e) == CRL_OK, "%s", e.message);
    const crl_tensor *x = crl_td_get(td, "obs"), *y = crl_td_get(td, "feat");
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(crl_tensor_dtype(y), CRL_F32);
    ck_assert(crl_tensor_same_shape(x, y));
    for (int64_t m = 0; m < 12; m++) {
        float in = ((const float *)crl_tensor_data(x))[m];
        ck_assert_msg(((const float *)crl_tensor_data(y))[m] == (float)(2.0 * (double)in + 0.5), "element %lld",
                      (long long)m);
    }
    /* Again in place, float64 in and out: the input is staged before forward overwrites it. */
    crl_td_unref(td);
    crl_transform_free(t);
    const char *kv2[] = { LIB, "forward=void of_affine(const double *in, double *out, double=-1, double=0, int64=3)",
                          "in_keys=obs", "out_dtype=float64", NULL };
    t = crl_transform_new(f.host, "FunctionTransform", kv2, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    td = td_with("obs", CRL_F64, 1, b, 3);
    crl_tensor *before = crl_tensor_clone(crl_td_get(td, "obs"), &e);
    ck_assert_msg(crl_transform_apply(t, td, &e) == CRL_OK, "%s", e.message);
    y = crl_td_get(td, "obs");
    for (int64_t m = 0; m < 12; m++)
        ck_assert(((const double *)crl_tensor_data(y))[m] == -((const double *)crl_tensor_data(before))[m]);
    crl_tensor_unref(before);
    crl_td_unref(td);
    crl_transform_free(t);
    crl_test_host_close(&f);
}
END_TEST

/* One call for every row of a [B, T] batch, a new output shape, and the spec it declares. */
START_TEST(energy_batch)
{
    const char *kv[] = { LIB, "forward=int32 of_energy(const float *in[2], float *out[1], count, double=4) ok=0",
                         "calls=batch", "out_keys=energy", "out_low=0", NULL };
    crl_test_host f;
    crl_error e = { 0 };
    crl_transform *t = make_tf(&f, kv, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b[2] = { 2, 5 };
    crl_td *td = td_with("observation", CRL_F32, 2, b, 2);
    ck_assert_msg(crl_transform_apply(t, td, &e) == CRL_OK, "%s", e.message);
    const crl_tensor *x = crl_td_get(td, "observation"), *y = crl_td_get(td, "energy");
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(crl_tensor_ndim(y), 3);
    ck_assert_int_eq(crl_tensor_shape(y)[2], 1);
    for (int64_t r = 0; r < 10; r++) {
        double p = ((const float *)crl_tensor_data(x))[2 * r], v = ((const float *)crl_tensor_data(x))[2 * r + 1];
        ck_assert(((const float *)crl_tensor_data(y))[r] == (float)(0.5 * 4 * p * p + 0.5 * v * v));
    }
    /* The spec: observation [2] becomes energy Bounded [1] beside it. */
    int64_t os[1] = { 2 };
    crl_spec *obs = crl_spec_composite(0, NULL, &e);
    crl_spec *leaf = crl_spec_unbounded(CRL_F32, 1, os, &e);
    ck_assert(obs && leaf);
    ck_assert_int_eq(crl_spec_composite_set(obs, "observation", leaf, &e), CRL_OK);
    crl_spec_unref(leaf);
    crl_spec *after = crl_transform_observation_spec(t, obs, &e);
    ck_assert_msg(after != NULL, "%s", e.message);
    const crl_spec *en = crl_spec_composite_get(after, "energy");
    ck_assert_ptr_nonnull(en);
    ck_assert_int_eq(crl_spec_get_kind(en), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_ndim(en), 1);
    ck_assert_int_eq(crl_spec_shape(en)[0], 1);
    ck_assert_ptr_nonnull(crl_spec_composite_get(after, "observation"));
    crl_spec_unref(after);
    crl_spec_unref(obs);
    crl_td_unref(td);
    crl_transform_free(t);
    crl_test_host_close(&f);
}
END_TEST

/* make's handle reaches forward (index = the row) and free is called once when the transform goes. */
START_TEST(handle_make_free)
{
    void *lib = dlopen(OBSFILTER_LIB, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(lib);
    int64_t (*frees)(void);
    *(void **)&frees = dlsym(lib, "of_frees");
    ck_assert_ptr_nonnull(frees);
    int64_t before = frees();
    const char *kv[] = { LIB, "make=handle of_gain_new(double=3)",
                         "forward=void of_gain(handle, const float *in, float *out, int64=2, index)",
                         "free=void of_gain_free(handle)", NULL };
    crl_test_host f;
    crl_error e = { 0 };
    crl_transform *t = make_tf(&f, kv, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b[1] = { 3 };
    crl_td *td = td_with("observation", CRL_F32, 1, b, 2);
    crl_tensor *x = crl_tensor_clone(crl_td_get(td, "observation"), &e);
    ck_assert_msg(crl_transform_apply(t, td, &e) == CRL_OK, "%s", e.message);
    const float *y = crl_tensor_data(crl_td_get(td, "observation"));
    for (int64_t m = 0; m < 6; m++)
        ck_assert(y[m] == (float)(3.0 * ((const float *)crl_tensor_data(x))[m] + (double)(m / 2)));
    crl_tensor_unref(x);
    crl_td_unref(td);
    crl_transform_free(t);
    ck_assert_int_eq(frees(), before + 1);
    crl_test_host_close(&f);
    dlclose(lib);
}
END_TEST

/* The springmass ffi env with the energy as a transform: specs check, every step's energy is the
 * function of that step's observation. */
static const char *env_ini(const char *tf_extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "[env]\nbackend = ffi\nid = springmass\nlibrary = %s\nmake = handle sm_make()\n"
             "seeding = void sm_seed(handle, seed)\nreset = void sm_reset(handle, double *observation[2])\n"
             "step = int32 sm_step(handle, const double *action, double *observation, double *reward, "
             "uint8 *terminated) ok=0\nfree = void sm_free(handle)\nobservation_shape = 2\nnum_envs = 3\n"
             "transforms = energy\n"
             "[transform.energy]\ntype = FunctionTransform\nlibrary = %s\n"
             "forward = int32 of_energy(const float *in[2], float *out[1], count, double=4) ok=0\n"
             "out_keys = energy\n%s",
             SPRINGMASS_LIB, OBSFILTER_LIB, tf_extra);
    return buf;
}

START_TEST(in_env_chain)
{
    crl_test_host f;
    crl_test_host_open(&f, "ffi, transforms", env_ini(""));
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    ck_assert_msg(crl_env_check_specs(env, 30, &e) == CRL_OK, "%s", e.message);
    const crl_spec *en = crl_spec_composite_get(crl_env_observation_spec(env), "energy");
    ck_assert_ptr_nonnull(en);
    ck_assert_int_eq(crl_spec_shape(en)[0], 3);
    ck_assert_int_eq(crl_spec_shape(en)[1], 1);
    crl_env_set_seed(env, 7);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    for (int s = 0; s < 20; s++) {
        ck_assert_int_eq(crl_env_rand_action(env, td, &e), CRL_OK);
        ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
        const float *o = crl_tensor_data(crl_td_get(td, "next.observation"));
        const float *y = crl_tensor_data(crl_td_get(td, "next.energy"));
        for (int i = 0; i < 3; i++)
            ck_assert(y[i] == (float)(0.5 * 4 * (double)o[2 * i] * o[2 * i] + 0.5 * (double)o[2 * i + 1] * o[2 * i + 1]));
        crl_td *nx = crl_env_step_mdp(env, td, &e);
        ck_assert_msg(nx != NULL, "%s", e.message);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&f);
}
END_TEST

/* A bad [transform.t] key: CRL_E_CONFIG naming test.ini:LINE of that key and `want`. */
static void expect_bad(const char *key, const char *value, const char *want)
{
    const char *base[][2] = { { "type", "FunctionTransform" },
                              { "library", OBSFILTER_LIB },
                              { "forward", "void of_affine(const double *in, double *out, double=1, double=0, "
                                           "int64=2)" } };
    GString *s = g_string_new("[transform.t]\n");
    int line = 0, n = 3; /* [plugins], load, [transform.t] */
    bool seen = false;
    for (size_t k = 0; k < 3; k++) {
        const char *v = base[k][1];
        if (!strcmp(key, base[k][0])) {
            v = value;
            seen = true;
            line = n + 1;
        }
        g_string_append_printf(s, "%s = %s\n", base[k][0], v);
        n++;
    }
    if (!seen) {
        g_string_append_printf(s, "%s = %s\n", key, value);
        line = n + 1;
    }
    crl_test_host f;
    crl_test_host_open(&f, "transforms", s->str);
    crl_error e = { 0 };
    crl_transform *t = crl_transform_from_config(f.host, f.cfg, "transform.t", &e);
    ck_assert_msg(t == NULL, "%s = %s was accepted", key, value);
    ck_assert_msg(e.code == CRL_E_CONFIG, "%s = %s: code %d: %s", key, value, e.code, e.message);
    char *where = g_strdup_printf("test.ini:%d", line);
    ck_assert_msg(strstr(e.message, where) != NULL, "want %s in: %s", where, e.message);
    ck_assert_msg(strstr(e.message, want) != NULL, "want '%s' in: %s", want, e.message);
    g_free(where);
    crl_test_host_close(&f);
    g_string_free(s, TRUE);
}

START_TEST(bad_descriptions)
{
    expect_bad("forward", "void of_afine(const double *in, double *out)", "no function 'of_afine'");
    expect_bad("forward", "void of_affine(const dubble *in, double *out)", "does not parse");
    expect_bad("forward", "void of_affine(double *in, double *out)", "declare it const");
    expect_bad("forward", "void of_affine(const double *in)", "must take the input and the output");
    expect_bad("forward", "void of_affine(const double *in, double *outt)", "did you mean 'out'");
    expect_bad("forward", "void of_affine(const double *in, double *out, seed)", "'seed' is an argument of");
    expect_bad("forward", "void of_affine(handle, const double *in, double *out)", "no make function");
    expect_bad("free", "void of_gain_free(handle)", "free without make");
    expect_bad("make", "void of_gain_new(double=1)", "make returns handle");
    expect_bad("out_dtype", "complex64", "not a dtype");
    expect_bad("library", "/nonexistent/libobs.so", "does not exist");
    expect_bad("forward", "void of_affine(const double *in, double *out) ok=0", "ok= needs a scalar");
}
END_TEST

/* These need the rest of their key set to differ from expect_bad's base. */
START_TEST(bad_combinations)
{
    crl_test_host f;
    crl_test_host_open(&f, "transforms", "");
    crl_error e = { 0 };
    /* calls = batch with index. */
    const char *kv[] = { LIB, "calls=batch", "forward=void of_gain(const float *in, float *out, int64=1, index)",
                         NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "FunctionTransform", kv, &e));
    ck_assert_msg(e.code == CRL_E_CONFIG && strstr(e.message, "use count, not index"), "%s", e.message);
    const char *kv5[] = { LIB, "out_low=5", "out_high=1", "forward=void of_affine(const double *in, double *out, "
                               "double=1, double=0, int64=3)", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "FunctionTransform", kv5, &e));
    ck_assert_msg(e.code == CRL_E_CONFIG && strstr(e.message, "must be below"), "%s", e.message);
    /* out's declared shape against out_shape. */
    const char *kv4[] = { LIB, "out_shape=4", "forward=void of_affine(const double *in, double *out[3], double=1, "
                               "double=0, int64=3)", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "FunctionTransform", kv4, &e));
    ck_assert_msg(e.code == CRL_E_CONFIG && strstr(e.message, "differs from out_shape"), "%s", e.message);
    /* A declared input row that the data does not have: CRL_E_SHAPE naming the key. */
    const char *kv2[] = { LIB, "forward=void of_affine(const double *in[3], double *out[3], double=1, double=0, "
                               "int64=3)", NULL };
    crl_transform *t = crl_transform_new(f.host, "FunctionTransform", kv2, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b[1] = { 2 };
    crl_td *td = td_with("observation", CRL_F32, 1, b, 2);
    ck_assert_int_eq(crl_transform_apply(t, td, &e), CRL_E_SHAPE);
    ck_assert_msg(strstr(e.message, "'observation' has per-row shape [2]"), "%s", e.message);
    /* A missing in_key names the keys present. */
    crl_transform_free(t);
    const char *kv3[] = { LIB, "in_keys=pixels", "forward=void of_affine(const double *in, double *out, double=1, "
                               "double=0, int64=2)", NULL };
    t = crl_transform_new(f.host, "FunctionTransform", kv3, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    ck_assert_int_eq(crl_transform_apply(t, td, &e), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "pixels") && strstr(e.message, "observation"), "%s", e.message);
    crl_transform_free(t);
    crl_td_unref(td);
    crl_test_host_close(&f);
}
END_TEST

START_TEST(world_writable_library)
{
    char *dir;
    char *copy = crl_test_unsafe_copy(OBSFILTER_LIB, "crl-fnt-XXXXXX", "libobsfilter.so", &dir);
    expect_bad("library", copy, "world-writable");
    crl_test_unsafe_copy_free(copy, dir);
}
END_TEST

/* An error return names the function and the row; so does a NaN. */
START_TEST(runtime_errors)
{
    crl_test_host f;
    crl_test_host_open(&f, "transforms", "");
    crl_error e = { 0 };
    const char *kv[] = { LIB, "forward=int32 of_checked(const double *in, double *out, int64=2) ok=0", NULL };
    crl_transform *t = crl_transform_new(f.host, "FunctionTransform", kv, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b[1] = { 3 };
    crl_td *td = td_with("observation", CRL_F32, 1, b, 2);
    float *x = crl_tensor_data(crl_td_get(td, "observation"));
    x[0] = 1;
    x[2] = -1; /* row 1 */
    x[4] = 1;
    ck_assert_int_eq(crl_transform_apply(t, td, &e), CRL_E_RUNTIME);
    ck_assert_msg(strstr(e.message, "of_checked returned -1 for row 1"), "%s", e.message);
    crl_transform_free(t);
    crl_td_unref(td);

    const char *kv2[] = { LIB, "forward=void of_nan_above(const double *in, double *out, int64=2)", NULL };
    t = crl_transform_new(f.host, "FunctionTransform", kv2, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    td = td_with("observation", CRL_F32, 1, b, 2);
    x = crl_tensor_data(crl_td_get(td, "observation"));
    for (int m = 0; m < 6; m++)
        x[m] = 0;
    x[5] = 11; /* row 2, element 1 */
    ck_assert_int_eq(crl_transform_apply(t, td, &e), CRL_E_RUNTIME);
    ck_assert_msg(strstr(e.message, "of_nan_above wrote NaN into observation[1] of row 2"), "%s", e.message);
    crl_transform_free(t);
    /* check_nan = false lets it through. */
    const char *kv3[] = { LIB, "check_nan=false", "forward=void of_nan_above(const double *in, double *out, int64=2)",
                          NULL };
    t = crl_transform_new(f.host, "FunctionTransform", kv3, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    x = crl_tensor_data(crl_td_get(td, "observation"));
    x[5] = 11;
    ck_assert_msg(crl_transform_apply(t, td, &e) == CRL_OK, "%s", e.message);
    ck_assert(isnan(((const float *)crl_tensor_data(crl_td_get(td, "observation")))[5]));
    crl_transform_free(t);
    crl_td_unref(td);
    crl_test_host_close(&f);
}
END_TEST

/* `crl config check` builds the chain dry: a bad forward exits 2 naming FILE:LINE. */
START_TEST(config_check_exits_2)
{
    GString *ini = g_string_new("[plugins]\nload = ffi, transforms\n");
    g_string_append(ini, env_ini(""));
    /* Replace the forward's function by a misspelt one. */
    char *text = g_string_free(ini, FALSE);
    char *bad = strstr(text, "of_energy(");
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, "of_enrgy(", 9);
    memmove(bad + 9, bad + 10, strlen(bad + 10) + 1);
    int line = 1;
    for (const char *p = text; p < bad; p++)
        line += *p == '\n';
    crl_test_config_check_fails(text, line, "no function 'of_enrgy'");
    g_free(text);
}
END_TEST

static Suite *fnt_suite(void)
{
    Suite *s = suite_create("function_transform");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, affine_per_row);
    tcase_add_test(tc, energy_batch);
    tcase_add_test(tc, handle_make_free);
    tcase_add_test(tc, in_env_chain);
    tcase_add_test(tc, bad_descriptions);
    tcase_add_test(tc, bad_combinations);
    tcase_add_test(tc, world_writable_library);
    tcase_add_test(tc, runtime_errors);
    tcase_add_test(tc, config_check_exits_2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fnt_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
