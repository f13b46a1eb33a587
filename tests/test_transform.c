/* Check suite: transforms in libcrl (standalone, and an env's chain) over the tftest, countenv and classic fixtures. */
#include "config.h"

#include <check.h>
#include "keep-cairo.h"
#include <dlfcn.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/transform.h>

/* The env's counters of cached and general steps (step_fast, ...). */
#include "env-private.h"
#include "cli-schema.h"

/* ---- fixtures ---------------------------------------------------------------- */

typedef struct fx {
    crl_config *cfg;
    crl_host *host;
    crl_env *env;
} fx;

/* Load the fixtures and build [env] from `ini` (everything after [plugins]).
 * Returns the env, or NULL with err set. */
static crl_env *fx_open(fx *f, const char *ini, crl_error *err)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    char *text = g_strdup_printf("[plugins]\nload = tftest, countenv, classic\n%s\n", ini);
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->host = crl_host_new(f->cfg, &e);
    ck_assert_ptr_nonnull(f->host);
    rc = crl_host_load_configured(f->host, &e);
    ck_assert_msg(rc == CRL_OK, "loading the fixtures: %s (CRL_PLUGIN_PATH=%s)", e.message,
                  getenv("CRL_PLUGIN_PATH") ? getenv("CRL_PLUGIN_PATH") : "unset");
    if (!strstr(ini, "[env]"))
        return NULL;
    f->env = crl_env_from_config(f->host, f->cfg, "env", err);
    return f->env;
}

static crl_env *fx_env(fx *f, const char *ini)
{
    crl_error e = { 0 };
    crl_env *env = fx_open(f, ini, &e);
    ck_assert_msg(env != NULL, "crl_env_from_config: %s", e.message);
    return env;
}

static void fx_close(fx *f)
{
    crl_env_free(f->env);
    crl_host_free(f->host);
    crl_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

#define assert_ok(expr, e)                                                      \
    do {                                                                        \
        int rc_ = (expr);                                                       \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message, \
                      crl_status_name(rc_));                                    \
    } while (0)

#define assert_err(expr, e, want_code, needle)                                                        \
    do {                                                                                              \
        crl_error_clear(&(e));                                                                        \
        int rc_ = (expr);                                                                             \
        ck_assert_msg(rc_ == (want_code), "%s gave %s, want %s: %s", #expr, crl_status_name(rc_),     \
                      crl_status_name(want_code), (e).message);                                       \
        ck_assert_int_eq((e).code, (want_code));                                                      \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'", (e).message, \
                      (needle));                                                                      \
    } while (0)

#define assert_null_err(expr, e, want_code, needle)                                                   \
    do {                                                                                              \
        crl_error_clear(&(e));                                                                        \
        void *p_ = (void *)(expr);                                                                    \
        ck_assert_msg(p_ == NULL, "%s succeeded", #expr);                                             \
        ck_assert_msg((e).code == (want_code), "%s gave %s, want %s: %s", #expr,                      \
                      crl_status_name((e).code), crl_status_name(want_code), (e).message);            \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'", (e).message, \
                      (needle));                                                                      \
    } while (0)

#define assert_has(msg, needle) \
    ck_assert_msg(strstr((msg), (needle)) != NULL, "message '%s' lacks '%s'", (msg), (needle))

/* Element of a [batch..., k] tensor in td: env i (ignored for batch []), column j. */
static double val(const crl_td *td, const char *key, int64_t i, int64_t j)
{
    crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no key '%s'", key);
    int nd = crl_tensor_ndim(t);
    int b = crl_td_batch_ndim(td);
    int64_t idx[4] = { 0 };
    int k = 0;
    if (b)
        idx[k++] = i;
    if (nd > b)
        idx[k++] = j;
    ck_assert_int_eq(k, nd);
    return crl_tensor_get_f64(t, idx);
}

/* A float32 [n] or [num, n] tensor at key holding v. */
static void set_f32(crl_td *td, const char *key, int nd, const int64_t *shape, double v)
{
    crl_error e = { 0 };
    crl_tensor *t = crl_tensor_new(CRL_F32, nd, shape, &e);
    ck_assert_ptr_nonnull(t);
    crl_tensor_fill(t, v);
    assert_ok(crl_td_set(td, key, t, &e), e);
    crl_tensor_unref(t);
}

/* Every env's int64 action (batch [num] or []). */
static void set_action_i64(crl_env *env, crl_td *td, int64_t v)
{
    crl_error e = { 0 };
    crl_tensor *t = crl_tensor_new(CRL_I64, crl_env_batch_ndim(env), crl_env_batch_shape(env), &e);
    ck_assert_ptr_nonnull(t);
    crl_tensor_fill(t, (double)v);
    assert_ok(crl_td_set(td, "action", t, &e), e);
    crl_tensor_unref(t);
}

static crl_td *reset(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    crl_td *r = crl_env_reset(env, td, &e);
    ck_assert_msg(r != NULL, "reset: %s", e.message);
    return r;
}

static void step_mdp(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
}

/* ---- standalone --------------------------------------------------------------- */

START_TEST(test_standalone_apply)
{
    fx f;
    fx_open(&f, "", NULL);
    crl_error e = { 0 };
    const char *kv[] = { "amount=2", " scale = 3 ", NULL };
    crl_transform *t = crl_transform_new(f.host, "AddOne", kv, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    ck_assert_str_eq(crl_transform_type(t), "AddOne");
    ck_assert_str_eq(crl_transform_name(t), "AddOne");

    int64_t b = 4, shape[2] = { 4, 3 };
    crl_td *td = crl_td_new(1, &b, &e);
    set_f32(td, "observation", 2, shape, 1.5);
    crl_tensor *before = crl_td_get(td, "observation");
    assert_ok(crl_transform_apply(t, td, &e), e);
    ck_assert_ptr_eq(crl_td_get(td, "observation"), before); /* in place: no allocation */
    ck_assert_double_eq_tol(val(td, "observation", 3, 2), 1.5 * 3 + 2, 1e-6);

    /* A sample without the key names it and what is there. */
    crl_td *other = crl_td_new(1, &b, &e);
    set_f32(other, "pixels", 2, shape, 0);
    assert_err(crl_transform_apply(t, other, &e), e, CRL_E_NOT_FOUND, "key 'observation'");
    assert_has(e.message, "available keys: pixels");
    crl_td_unref(other);

    /* Wrong dtype. */
    crl_td *ints = crl_td_new(1, &b, &e);
    crl_tensor *it = crl_tensor_new(CRL_I64, 2, shape, &e);
    crl_td_set(ints, "observation", it, &e);
    crl_tensor_unref(it);
    assert_err(crl_transform_apply(t, ints, &e), e, CRL_E_DTYPE, "float");
    assert_has(e.message, "transform 'AddOne' (AddOne)");
    crl_td_unref(ints);

    crl_td_unref(td);
    crl_transform_free(t);

    /* out_keys writes elsewhere and the spec grows. */
    const char *kv2[] = { "out_keys=obs2", NULL };
    t = crl_transform_new(f.host, "AddOne", kv2, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t leaf[2] = { 4, 3 };
    crl_spec *lo = crl_spec_bounded(CRL_F32, 2, leaf, -1, 1, &e);
    crl_spec *obs = crl_spec_composite_of(4, "observation", lo, &e);
    crl_spec *out = crl_transform_observation_spec(t, obs, &e);
    ck_assert_msg(out != NULL, "%s", e.message);
    ck_assert_int_eq(crl_spec_composite_len(out), 2);
    ck_assert_int_eq(crl_spec_get_kind(crl_spec_composite_get(out, "obs2")), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_get_kind(crl_spec_composite_get(out, "observation")), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_composite_len(obs), 1); /* the input is untouched */
    crl_spec_unref(out);
    crl_spec_unref(obs);

    /* A spec without the in_key: named, with the available keys. */
    crl_spec *px = crl_spec_composite_of(4, "pixels", crl_spec_unbounded(CRL_F32, 2, leaf, &e), &e);
    assert_null_err(crl_transform_observation_spec(t, px, &e), e, CRL_E_NOT_FOUND, "key 'observation'");
    assert_has(e.message, "available keys: pixels");
    crl_spec_unref(px);
    crl_transform_free(t);
    crl_transform_free(NULL);
    fx_close(&f);
}
END_TEST

START_TEST(test_standalone_errors)
{
    fx f;
    fx_open(&f, "", NULL);
    crl_error e = { 0 };
    assert_null_err(crl_transform_new(f.host, "AddOen", NULL, &e), e, CRL_E_NOT_FOUND, "did you mean 'AddOne'");
    const char *bad_kv[] = { "amount", NULL };
    assert_null_err(crl_transform_new(f.host, "AddOne", bad_kv, &e), e, CRL_E_INVALID, "argument 1");
    const char *typo[] = { "scale=2", "amout=1", NULL };
    assert_null_err(crl_transform_new(f.host, "AddOne", typo, &e), e, CRL_E_CONFIG, "did you mean 'amount'");
    assert_has(e.message, "argument 2");
    ck_assert_msg(!strstr(e.message, "argument 2:2"), "raw origin in '%s'", e.message);
    const char *badval[] = { "amount=lots", NULL };
    assert_null_err(crl_transform_new(f.host, "AddOne", badval, &e), e, CRL_E_CONFIG, "argument 1");
    const char *settype[] = { "type=Counter", NULL };
    assert_null_err(crl_transform_new(f.host, "AddOne", settype, &e), e, CRL_E_INVALID, "type");
    const char *badcombo[] = { "in_keys=a, b", "out_keys=c", NULL };
    assert_null_err(crl_transform_new(f.host, "AddOne", badcombo, &e), e, CRL_E_CONFIG, "out_keys");
    assert_has(e.message, "transform 'AddOne' (AddOne)");
    assert_null_err(crl_transform_new(f.host, "Add One", NULL, &e), e, CRL_E_INVALID, "Add One");

    /* A transform with no call only works inside an env. */
    crl_transform *t = crl_transform_new(f.host, "ActShift", NULL, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    crl_td *td = crl_td_new(0, NULL, &e);
    assert_err(crl_transform_apply(t, td, &e), e, CRL_E_UNSUPPORTED, "transform 'ActShift' (ActShift)");
    /* ... and it has no parent. */
    crl_td_unref(td);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

START_TEST(test_sdk_helpers)
{
    crl_error e = { 0 };
    int64_t b = 2, shape[2] = { 2, 3 };
    crl_td *td = crl_td_new(1, &b, &e);
    crl_tensor *t = crl_transform_output(td, "a.b", CRL_F32, 2, shape, &e);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(crl_td_get(td, "a.b"), t);
    ck_assert_ptr_eq(crl_transform_output(td, "a.b", CRL_F32, 2, shape, &e), t); /* reused */
    crl_tensor *u = crl_transform_output(td, "a.b", CRL_F64, 2, shape, &e);      /* replaced */
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "a.b")), CRL_F64);
    int64_t bad[1] = { 5 };
    ck_assert_ptr_null(crl_transform_output(td, "x", CRL_F32, 1, bad, &e)); /* not the batch */
    ck_assert_int_eq(e.code, CRL_E_SHAPE);
    crl_error_clear(&e);
    ck_assert_ptr_null(crl_transform_output(td, "", CRL_F32, 2, shape, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);

    assert_err(crl_transform_missing_td_key(&e, "Who", "k", td), e, CRL_E_NOT_FOUND,
               "Who: key 'k' is not in the TensorDict; available keys: a.b");
    crl_spec *c = crl_spec_composite(1, &b, &e);
    crl_spec *inner = crl_spec_composite(1, &b, &e);
    crl_spec *l = crl_spec_unbounded(CRL_F32, 2, shape, &e);
    crl_spec_composite_set(inner, "y", l, &e);
    crl_spec_composite_set(c, "x", inner, &e);
    crl_spec_composite_set(c, "z", l, &e);
    assert_err(crl_transform_missing_key(&e, "Who", "k", c, "observation spec"), e, CRL_E_NOT_FOUND,
               "Who: key 'k' is not in the observation spec; available keys: x.y, z");
    crl_spec_unref(l);
    crl_spec_unref(inner);
    crl_spec_unref(c);
    crl_td_unref(td);
}
END_TEST

/* ---- the chain in config -------------------------------------------------------- */

START_TEST(test_chain_specs)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\ntransforms = a, c\n"
                              "[transform.a]\ntype = AddOne\namount = 1\n[transform.c]\ntype = Counter\n");
    crl_error e = { 0 };
    ck_assert_int_eq(crl_env_transform_count(env), 2);
    ck_assert_str_eq(crl_transform_name(crl_env_transform_at(env, 0)), "a");
    ck_assert_str_eq(crl_transform_type(crl_env_transform_at(env, 1)), "Counter");
    ck_assert_ptr_null(crl_env_transform_at(env, 2));
    const crl_spec *obs = crl_env_observation_spec(env);
    ck_assert_ptr_nonnull(crl_spec_composite_get(obs, "count"));
    ck_assert_ptr_null(crl_spec_composite_get(crl_env_base_observation_spec(env), "count"));
    ck_assert_ptr_eq(crl_env_action_spec(env), crl_env_action_spec(env));
    ck_assert(crl_spec_equal(crl_env_action_spec(env), crl_env_base_action_spec(env)));
    char *repr = crl_env_specs_repr(env);
    assert_has(repr, "count");
    crl_free(repr);
    crl_td *td = reset(env, NULL);
    ck_assert_double_eq(val(td, "observation", 1, 1), 2.0); /* (counter, i) + 1 */
    ck_assert_double_eq(val(td, "count", 1, 0), 0.0);
    assert_ok(crl_env_check_specs(env, 10, &e), e);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_chain_order)
{
    const char *secs = "[transform.a]\ntype = AddOne\namount = 1\n[transform.b]\ntype = AddOne\nscale = 10\namount = 0\n";
    for (int order = 0; order < 2; order++) {
        fx f;
        char *ini = g_strdup_printf("[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 3\n"
                                    "transforms = %s\n%s", order ? "b, a" : "a, b", secs);
        crl_env *env = fx_env(&f, ini);
        g_free(ini);
        crl_td *td = reset(env, NULL);
        for (int64_t i = 0; i < 3; i++)
            ck_assert_double_eq_tol(val(td, "observation", i, 1), order ? i * 10.0 + 1 : (i + 1) * 10.0, 1e-6);
        set_action_i64(env, td, 1);
        crl_error e = { 0 };
        assert_ok(crl_env_step(env, td, &e), e);
        crl_td *next = crl_td_get_td(td, "next");
        for (int64_t i = 0; i < 3; i++)
            ck_assert_double_eq_tol(val(next, "observation", i, 1), order ? i * 10.0 + 1 : (i + 1) * 10.0, 1e-6);
        /* next = previous + 1 in the counter column: (c+1+1)*10 vs (c)*10 */
        double c0 = order ? (val(td, "observation", 0, 0) - 1) / 10 : val(td, "observation", 0, 0) / 10 - 1;
        double n0 = order ? (val(next, "observation", 0, 0) - 1) / 10 : val(next, "observation", 0, 0) / 10 - 1;
        ck_assert_double_eq_tol(n0, c0 + 1, 1e-6);
        crl_td_unref(td);
        fx_close(&f);
    }
}
END_TEST

START_TEST(test_partial_reset)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 3\ntransforms = a, c\n"
                              "[transform.a]\ntype = AddOne\namount = 1\n[transform.c]\ntype = Counter\n");
    crl_error e = { 0 };
    crl_td *td = reset(env, NULL);
    for (int s = 0; s < 2; s++) {
        set_action_i64(env, td, 0);
        assert_ok(crl_env_step(env, td, &e), e);
        step_mdp(env, td);
    }
    for (int64_t i = 0; i < 3; i++)
        ck_assert_double_eq(val(td, "count", i, 0), 2.0);
    double obs0 = val(td, "observation", 0, 0), obs2 = val(td, "observation", 2, 0);
    int64_t rs[2] = { 3, 1 };
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, rs, &e);
    crl_tensor_fill(m, 0);
    int64_t idx[2] = { 1, 0 };
    crl_tensor_set_f64(m, idx, 1);
    crl_td_set(td, "_reset", m, &e);
    crl_tensor_unref(m);
    crl_td *r = reset(env, td);
    ck_assert_ptr_eq(r, td);
    crl_td_unref(r);
    ck_assert(!crl_td_has(td, "_reset"));
    ck_assert_double_eq(val(td, "count", 0, 0), 2.0);
    ck_assert_double_eq(val(td, "count", 1, 0), 0.0);
    ck_assert_double_eq(val(td, "count", 2, 0), 2.0);
    /* The envs not reset keep their (already transformed) values: no second +1. */
    ck_assert_double_eq(val(td, "observation", 0, 0), obs0);
    ck_assert_double_eq(val(td, "observation", 2, 0), obs2);
    ck_assert_double_eq(val(td, "observation", 1, 1), 2.0);
    ck_assert_double_lt(val(td, "observation", 1, 0), 1.0 + 3); /* a fresh offset in [0, 3), + 1 */
    /* The counter goes on from there. */
    set_action_i64(env, td, 0);
    assert_ok(crl_env_step(env, td, &e), e);
    crl_td *next = crl_td_get_td(td, "next");
    ck_assert_double_eq(val(next, "count", 0, 0), 3.0);
    ck_assert_double_eq(val(next, "count", 1, 0), 1.0);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_inverse)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountBox-v0\nnum_envs = 2\nauto_reset = next_step\n"
                              "transforms = s\n"
                              "[transform.s]\ntype = ActShift\nshift = 0.5\n");
    crl_error e = { 0 };
    const crl_spec *a = crl_env_action_spec(env);
    ck_assert_double_eq_tol(crl_tensor_flat_get(crl_spec_low(a), 0), -0.5, 1e-9);
    ck_assert_double_eq_tol(crl_tensor_flat_get(crl_spec_high(a), 1), 1.5, 1e-9);
    int64_t shape[2] = { 2, 1 };
    int64_t two = 2;
    crl_td *fresh = crl_td_new(1, &two, &e);
    set_f32(fresh, "action", 2, shape, 0.5);
    assert_err(crl_env_step(env, fresh, &e), e, CRL_E_INVALID, "never reset");
    crl_td_unref(fresh);
    crl_td *td = reset(env, NULL);
    set_f32(td, "action", 2, shape, 1.25);
    crl_tensor *act = crl_td_get(td, "action");
    uint64_t fast0 = env->step_fast;
    for (int s = 0; s < 3; s++) {
        assert_ok(crl_env_step(env, td, &e), e);
        crl_td *next = crl_td_get_td(td, "next");
        ck_assert_double_eq_tol(val(next, "reward", 1, 0), 0.75, 1e-6);
        ck_assert_ptr_eq(crl_td_get(td, "action"), act);           /* the caller's tensor stays */
        ck_assert_double_eq_tol(val(td, "action", 0, 0), 1.25, 1e-6); /* with the caller's values */
        step_mdp(env, td);
    }
    /* The inverses' shallow copy is kept: the base's cached step path holds. */
    ck_assert_uint_ge(env->step_fast - fast0, 2);
    /* Outside the transformed spec (inside the base's would not matter). */
    set_f32(td, "action", 2, shape, 1.75);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_RANGE, "action");
    set_f32(td, "action", 2, shape, -0.9);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_RANGE, "action");
    /* Random actions come from the transformed spec and pass. */
    for (int s = 0; s < 20; s++)
        assert_ok(crl_env_rand_step(env, td, &e), e);
    assert_ok(crl_env_check_specs(env, 8, &e), e);
    crl_td_unref(td);
    fx_close(&f);

    /* Inverses run in reverse chain order: a -> (a - 0.5) * 2. */
    env = fx_env(&f, "[env]\nbackend = countenv\nid = CountBox-v0\nnum_envs = 2\ntransforms = s1, s2\n"
                     "[transform.s1]\ntype = ActShift\nshift = 0\nscale = 2\n[transform.s2]\ntype = ActShift\nshift = 0.5\n");
    a = crl_env_action_spec(env);
    ck_assert_double_eq_tol(crl_tensor_flat_get(crl_spec_low(a), 0), 0.0, 1e-9);
    ck_assert_double_eq_tol(crl_tensor_flat_get(crl_spec_high(a), 0), 1.0, 1e-9);
    td = reset(env, NULL);
    set_f32(td, "action", 2, shape, 0.75);
    assert_ok(crl_env_step(env, td, &e), e);
    ck_assert_double_eq_tol(val(crl_td_get_td(td, "next"), "reward", 0, 0), 0.5, 1e-6);
    ck_assert_double_eq_tol(val(td, "action", 0, 0), 0.75, 1e-6);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_parent_step)
{
    fx f;
    /* Counter below TwoSteps runs at each parent step; above, once. */
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\ntransforms = lo, two, hi\n"
                              "[transform.lo]\ntype = Counter\nkey = lo\n[transform.two]\ntype = TwoSteps\n"
                              "[transform.hi]\ntype = Counter\nkey = hi\n");
    crl_error e = { 0 };
    crl_td *td = reset(env, NULL);
    double c0 = val(td, "observation", 0, 0);
    set_action_i64(env, td, 2);
    assert_ok(crl_env_step(env, td, &e), e);
    crl_td *next = crl_td_get_td(td, "next");
    ck_assert_double_eq(val(next, "observation", 0, 0), c0 + 2);
    ck_assert_double_eq(val(next, "reward", 0, 0), 4.0);
    ck_assert_double_eq(val(next, "lo", 0, 0), 2.0);
    ck_assert_double_eq(val(next, "hi", 0, 0), 1.0);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_step_resets)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\nauto_reset = next_step\n"
                              "transforms = c\n[transform.c]\ntype = Counter\n");
    crl_error e = { 0 };
    crl_td *td = reset(env, NULL);
    /* CountNoState-v0 truncates after 4 steps. */
    for (int s = 0; s < 4; s++) {
        set_action_i64(env, td, 0);
        assert_ok(crl_env_step(env, td, &e), e);
        step_mdp(env, td);
    }
    ck_assert_double_eq(val(td, "count", 0, 0), 4.0);
    ck_assert(val(td, "done", 0, 0) != 0);
    set_action_i64(env, td, 0);
    assert_ok(crl_env_step(env, td, &e), e);
    crl_td *next = crl_td_get_td(td, "next");
    ck_assert_double_eq(val(next, "count", 0, 0), 0.0); /* the base reset it inside this step */
    ck_assert_double_eq(val(next, "count", 1, 0), 0.0);
    ck_assert(val(next, "done", 0, 0) == 0);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_transform_done)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\n"
                              "transforms = d\n[transform.d]\ntype = DoneAt\nat = 100\n");
    crl_error e = { 0 };
    crl_td *td = reset(env, NULL);
    set_action_i64(env, td, 0);
    assert_ok(crl_env_step(env, td, &e), e);
    ck_assert(val(crl_td_get_td(td, "next"), "done", 0, 0) == 0);
    step_mdp(env, td);
    assert_ok(crl_env_step(env, td, &e), e);
    crl_td_unref(td);
    fx_close(&f);

    /* A done a transform sets counts as the env's: with auto_reset off the
     * next step is refused for that env. */
    env = fx_env(&f, "[env]\nbackend = countenv\nid = Count-v0\nnum_envs = 2\n"
                     "transforms = d\n[transform.d]\ntype = DoneAt\nat = 0\n");
    td = reset(env, NULL);
    set_action_i64(env, td, 0);
    assert_ok(crl_env_step(env, td, &e), e);
    ck_assert(val(crl_td_get_td(td, "next"), "truncated", 0, 0) != 0);
    step_mdp(env, td);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID, "env 0 is done");
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_cartpole_check_specs)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 4\nauto_reset = next_step\n"
                              "transforms = a, c\n[transform.a]\ntype = AddOne\nin_keys = observation\n"
                              "out_keys = shifted\n[transform.c]\ntype = Counter\n");
    crl_error e = { 0 };
    assert_ok(crl_env_check_specs(env, 50, &e), e);
    crl_td *r = crl_env_rollout(env, 30, NULL, NULL, false, true, NULL, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    ck_assert(crl_td_has(r, "next.shifted"));
    ck_assert(crl_td_has(r, "count"));
    crl_td_unref(r);
    fx_close(&f);

    /* Single env, auto_reset off: the rollout resets ended envs through the chain. */
    env = fx_env(&f, "[env]\nbackend = classic\nid = CartPole-v1\ntransforms = c\n[transform.c]\ntype = Counter\n");
    assert_ok(crl_env_check_specs(env, 40, &e), e);
    r = crl_env_rollout(env, 60, NULL, NULL, false, true, NULL, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    /* count follows the steps and restarts after an episode ends */
    crl_tensor *cnt = crl_td_get(r, "next.count"), *dn = crl_td_get(r, "next.done");
    int64_t expect = 1;
    for (int64_t t = 0; t < 60; t++) {
        ck_assert_double_eq(crl_tensor_flat_get(cnt, t), (double)expect);
        expect = crl_tensor_flat_get(dn, t) != 0 ? 1 : expect + 1;
    }
    crl_td_unref(r);
    fx_close(&f);
}
END_TEST

/* ---- the chain at run time ------------------------------------------------------- */

START_TEST(test_chain_api)
{
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\n");
    crl_error e = { 0 };
    const crl_spec *base_obs = crl_env_observation_spec(env);
    ck_assert_int_eq(crl_env_transform_count(env), 0);
    crl_td *td = reset(env, NULL);

    const char *kv[] = { "amount=100", NULL };
    crl_transform *add = crl_transform_new(f.host, "AddOne", kv, &e);
    crl_transform *cnt = crl_transform_new(f.host, "Counter", NULL, &e);
    ck_assert_ptr_nonnull(add);
    ck_assert_ptr_nonnull(cnt);
    assert_ok(crl_env_append_transform(env, cnt, &e), e);
    assert_ok(crl_env_insert_transform(env, 0, add, &e), e);
    ck_assert_int_eq(crl_env_transform_count(env), 2);
    ck_assert_ptr_eq(crl_env_transform_at(env, 0), add);
    ck_assert_ptr_eq(crl_env_transform_at(env, 1), cnt);
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_observation_spec(env), "count"));

    /* The chain changed: reset first. */
    set_action_i64(env, td, 0);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID, "reset");
    crl_td *r = reset(env, td);
    crl_td_unref(r);
    ck_assert_double_ge(val(td, "observation", 0, 0), 100.0);
    assert_ok(crl_env_step(env, td, &e), e);

    /* Already in a chain; and freeing it there is refused (the env owns it). */
    assert_err(crl_env_append_transform(env, add, &e), e, CRL_E_INVALID, "already belongs");
    crl_transform_free(add);
    ck_assert_ptr_eq(crl_env_transform_at(env, 0), add);
    ck_assert_str_eq(crl_transform_type(add), "AddOne");
    ck_assert_int_eq(crl_env_transform_count(env), 2);
    /* Bad insert index: the transform is freed, the chain unchanged. */
    crl_transform *x = crl_transform_new(f.host, "Counter", NULL, &e);
    assert_err(crl_env_insert_transform(env, 5, x, &e), e, CRL_E_RANGE, "index 5");
    /* A transform whose specs fail: chain unchanged, still usable. */
    x = crl_transform_new(f.host, "BadSpecs", NULL, &e);
    ck_assert_ptr_nonnull(x);
    assert_err(crl_env_append_transform(env, x, &e), e, CRL_E_SHAPE, "transform 'BadSpecs' (BadSpecs)");
    ck_assert_int_eq(crl_env_transform_count(env), 2);
    /* ... and the counter kept its place and state. */
    step_mdp(env, td);
    assert_ok(crl_env_step(env, td, &e), e);
    ck_assert_double_eq(val(crl_td_get_td(td, "next"), "count", 0, 0), 2.0);

    /* Remove: bad index, then the first. */
    assert_null_err(crl_env_remove_transform(env, 2, &e), e, CRL_E_RANGE, "index 2");
    assert_has(e.message, "0..1");
    crl_transform *got = crl_env_remove_transform(env, 0, &e);
    ck_assert_ptr_eq(got, add);
    ck_assert_int_eq(crl_env_transform_count(env), 1);
    ck_assert_ptr_eq(crl_env_transform_at(env, 0), cnt);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID, "reset");
    r = reset(env, td);
    crl_td_unref(r);
    ck_assert_double_lt(val(td, "observation", 0, 0), 100.0);
    assert_ok(crl_env_step(env, td, &e), e);
    /* A removed transform can go elsewhere (here: back in). */
    assert_ok(crl_env_append_transform(env, got, &e), e);
    ck_assert_ptr_eq(crl_env_transform_at(env, 1), add);
    got = crl_env_remove_transform(env, 1, &e);
    crl_transform_free(got);
    got = crl_env_remove_transform(env, 0, &e);
    ck_assert_ptr_eq(got, cnt);
    crl_transform_free(got);
    ck_assert_int_eq(crl_env_transform_count(env), 0);
    ck_assert(crl_spec_equal(crl_env_observation_spec(env), base_obs));
    assert_null_err(crl_env_remove_transform(env, 0, &e), e, CRL_E_RANGE, "no transforms");
    /* Back to the plain env. */
    r = reset(env, td);
    crl_td_unref(r);
    set_action_i64(env, td, 0);
    assert_ok(crl_env_step(env, td, &e), e);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- config failures ------------------------------------------------------------- */

START_TEST(test_parent_reset_rand)
{
    /* Noops: parent_reset, then parent_rand_action + parent_step. */
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\ntransforms = c, n\n"
                              "[transform.c]\ntype = Counter\n[transform.n]\ntype = Noops\nnoops = 2\n");
    crl_error e = { 0 };
    for (int r = 0; r < 3; r++) {
        crl_td *td = reset(env, NULL);
        for (int64_t i = 0; i < 2; i++) {
            double c = val(td, "observation", i, 0);
            /* Offsets are in [0, 3); env i terminates at 5 + i. */
            ck_assert_msg(c >= 2 && c < 5, "env %d: counter %g after 2 noops", (int)i, c);
            ck_assert_double_eq(val(td, "count", i, 0), 2.0); /* the counter below saw the noops */
            ck_assert(val(td, "done", i, 0) == 0);
        }
        set_action_i64(env, td, 0);
        assert_ok(crl_env_step(env, td, &e), e); /* the 4-step limit is not reached yet */
        ck_assert_double_eq(val(crl_td_get_td(td, "next"), "count", 0, 0), 3.0);
        crl_td_unref(td);
    }
    fx_close(&f);

    /* Random counts come from the transform's stream, seeded by the env. */
    double seen[2][6];
    for (int k = 0; k < 2; k++) {
        env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\nseed = 11\ntransforms = n\n"
                         "[transform.n]\ntype = Noops\nnoops = 2\nrandom = true\n");
        crl_transform *t = crl_env_transform_at(env, 0);
        ck_assert_ptr_nonnull(t);
        for (int r = 0; r < 3; r++) {
            crl_td *td = reset(env, NULL);
            seen[k][2 * r] = val(td, "observation", 0, 0);
            seen[k][2 * r + 1] = val(td, "observation", 1, 0);
            crl_td_unref(td);
        }
        fx_close(&f);
    }
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq(seen[0][i], seen[1][i]);
}
END_TEST

START_TEST(test_config_failures)
{
    fx f;
    crl_error e = { 0 };
    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a, b\n"
                                "[transform.a]\ntype = AddOne\n", &e),
                    e, CRL_E_CONFIG, "[transform.b]");
    assert_has(e.message, "test.ini:6");
    fx_close(&f);

    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a\n"
                                "[transform.a]\ntype = AddOen\n", &e),
                    e, CRL_E_NOT_FOUND, "did you mean 'AddOne'");
    assert_has(e.message, "test.ini:8");
    fx_close(&f);

    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a\n[transform.a]\n"
                                "type = AddOne\nin_keys = obsrvation\n", &e),
                    e, CRL_E_NOT_FOUND, "key 'obsrvation'");
    assert_has(e.message, "available keys: observation");
    assert_has(e.message, "transform 'a' (AddOne)");
    fx_close(&f);

    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a\n[transform.a]\n"
                                "type = AddOne\namout = 2\n", &e),
                    e, CRL_E_CONFIG, "did you mean 'amount'");
    assert_has(e.message, "test.ini:9");
    fx_close(&f);

    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a\n[transform.a]\n"
                                "amount = 2\n", &e),
                    e, CRL_E_CONFIG, "type is required");
    fx_close(&f);

    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\nauto_reset = same_step\ntransforms = a\n"
                                "[transform.a]\ntype = AddOne\n", &e),
                    e, CRL_E_UNSUPPORTED, "same_step");
    fx_close(&f);

    /* The API refuses as well. */
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = Count-v0\nauto_reset = same_step\n");
    crl_transform *t = crl_transform_new(f.host, "AddOne", NULL, &e);
    assert_err(crl_env_append_transform(env, t, &e), e, CRL_E_UNSUPPORTED, "same_step");
    fx_close(&f);

    /* Key missing in the env's output at run time (the spec said otherwise):
     * AddOne on a key a transform before it removed is caught by the specs. */
    assert_null_err(fx_open(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a\n[transform.a]\n"
                                "type = BadSpecs\n", &e),
                    e, CRL_E_SHAPE, "transform 'a' (BadSpecs)");
    fx_close(&f);
}
END_TEST

START_TEST(test_schema)
{
    /* [transform.NAME] takes 'type' plus the options of the type it names. */
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = Count-v0\ntransforms = a\n[transform.a]\ntype = AddOne\n"
                              "amount = 2\n");
    (void)env;
    crl_error e = { 0 };
    crl_schema *s = crl__cli_schema_new(f.host, &e);
    ck_assert_msg(s != NULL, "%s", e.message);
    size_t n = 0;
    const crl_option *const *tables = crl_schema_tables(s, f.cfg, "transform.a", &n);
    ck_assert_ptr_nonnull(tables);
    bool has_type = false, has_amount = false;
    for (size_t i = 0; i < n; i++)
        for (const crl_option *o = tables[i]; o->type != CRL_OPT_END; o++) {
            has_type |= !strcmp(o->name, "type");
            has_amount |= !strcmp(o->name, "amount");
        }
    ck_assert(has_type && has_amount);
    ck_assert_ptr_null(crl_schema_tables(s, f.cfg, "transform.a.b", &n));
    crl_schema_free(s);
    /* [env] declares transforms. */
    bool env_has = false;
    for (const crl_option *o = crl_env_options(); o->type != CRL_OPT_END; o++)
        env_has |= !strcmp(o->name, "transforms") && o->type == CRL_OPT_LIST;
    ck_assert(env_has);
    fx_close(&f);
}
END_TEST

START_TEST(test_untransformed_untouched)
{
    /* An env without transforms: specs are the base ones, and a chain
     * emptied at run time gives them back. */
    fx f;
    crl_env *env = fx_env(&f, "[env]\nbackend = classic\nid = CartPole-v1\n");
    ck_assert_ptr_eq(crl_env_observation_spec(env), crl_env_base_observation_spec(env));
    ck_assert_ptr_eq(crl_env_action_spec(env), crl_env_base_action_spec(env));
    fx_close(&f);
}
END_TEST

/* print(env), print(transform) and transform.parent as TorchRL prints them. */
START_TEST(test_reprs_and_parent)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "[env]\nbackend = countenv\nid = CountNoState-v0\nnum_envs = 2\ntransforms = a, c, b\n"
                              "[transform.a]\ntype = AddOne\n"
                              "[transform.c]\ntype = Counter\n[transform.b]\ntype = BadSpecs\nok = true\n");
    crl_transform *a = crl_env_transform_at(env, 0), *c = crl_env_transform_at(env, 1),
                  *b = crl_env_transform_at(env, 2);
    /* The default repr: TorchRL's Transform.__repr__ from in_keys (a dotted key is a tuple, a quote is escaped;
     * none: []). */
    const char *kv[] = { "in_keys = observation, next.x, it's", NULL };
    crl_transform *alone = crl_transform_new(f.host, "AddOne", kv, &e);
    ck_assert_msg(alone != NULL, "%s", e.message);
    char *r = crl_transform_repr(alone);
    ck_assert_str_eq(r, "AddOne(keys=['observation', ('next', 'x'), 'it\\'s'])");
    crl_free(r);
    ck_assert_ptr_null(crl_transform_parent_repr(alone));
    crl_transform_free(alone);
    r = crl_transform_repr(a);
    ck_assert_str_eq(r, "AddOne(keys=['observation'])");
    crl_free(r);
    r = crl_transform_repr(c);
    ck_assert_str_eq(r, "Counter(keys=[])");
    crl_free(r);
    r = crl_transform_repr(b);
    ck_assert_str_eq(r, "BadSpecs()");
    crl_free(r);
    r = crl_env_repr(env);
    ck_assert_str_eq(r, "TransformedEnv(\n"
                        "    env=EnvBase(backend=countenv, env=CountNoState-v0, batch_size=torch.Size([2]), device=cpu),\n"
                        "    transform=Compose(\n"
                        "            AddOne(keys=['observation']),\n"
                        "            Counter(keys=[]),\n"
                        "            BadSpecs()))");
    crl_free(r);
    /* parent: the env with the transforms before this one; the first's is an empty Compose. */
    r = crl_transform_parent_repr(a);
    ck_assert_str_eq(r, "TransformedEnv(\n"
                        "    env=EnvBase(backend=countenv, env=CountNoState-v0, batch_size=torch.Size([2]), device=cpu),\n"
                        "    transform=Compose(\n"
                        "    ))");
    crl_free(r);
    r = crl_transform_parent_repr(b);
    ck_assert_str_eq(r, "TransformedEnv(\n"
                        "    env=EnvBase(backend=countenv, env=CountNoState-v0, batch_size=torch.Size([2]), device=cpu),\n"
                        "    transform=Compose(\n"
                        "            AddOne(keys=['observation']),\n"
                        "            Counter(keys=[])))");
    crl_free(r);
    size_t idx = 9;
    ck_assert_ptr_eq(crl_transform_parent_env(b, &idx), env);
    ck_assert_uint_eq(idx, 2);
    ck_assert_ptr_eq(crl_transform_parent_env(a, NULL), env);
    /* The parent's specs: Counter's parent lacks "count", BadSpecs' has it. */
    const crl_transform_specs *pc = crl_transform_parent_specs(c), *pb = crl_transform_parent_specs(b);
    ck_assert_ptr_nonnull(pc);
    ck_assert_ptr_nonnull(pb);
    ck_assert_ptr_null(crl_spec_composite_get(pc->observation, "count"));
    ck_assert_ptr_nonnull(crl_spec_composite_get(pb->observation, "count"));
    ck_assert_int_eq(pb->batch_ndim, 1);
    ck_assert_int_eq(pb->batch_shape[0], 2);
    ck_assert(crl_spec_equal(crl_transform_parent_specs(a)->observation, crl_env_base_observation_spec(env)));
    ck_assert(crl_spec_equal(pb->action, crl_env_full_action_spec(env)));

    /* Taken out of the chain, a transform has no parent; the env's repr follows the chain. */
    crl_transform *out = crl_env_remove_transform(env, 1, &e);
    ck_assert_ptr_eq(out, c);
    ck_assert_ptr_null(crl_transform_parent_repr(c));
    ck_assert_ptr_null(crl_transform_parent_specs(c));
    ck_assert_ptr_null(crl_transform_parent_env(c, &idx));
    r = crl_transform_repr(c);                  /* a standalone transform still prints */
    ck_assert_str_eq(r, "Counter(keys=[])");
    crl_free(r);
    crl_transform_free(c);
    r = crl_transform_parent_repr(b);
    assert_has(r, "AddOne(keys=['observation'])))");
    crl_free(r);
    while (crl_env_transform_count(env))
        crl_transform_free(crl_env_remove_transform(env, 0, &e));
    r = crl_env_repr(env);                      /* no transforms: the base env */
    ck_assert_str_eq(r, "EnvBase(backend=countenv, env=CountNoState-v0, batch_size=torch.Size([2]), device=cpu)");
    crl_free(r);
    fx_close(&f);

    /* A repr longer than the host's first buffer, and one that fails (the default then). */
    env = fx_env(&f, "[env]\nbackend = classic\nid = CartPole-v1\ntransforms = l, x\n"
                     "[transform.l]\ntype = BadSpecs\nok = true\nrepr = 700\n"
                     "[transform.x]\ntype = BadSpecs\nok = true\nrepr = -1\n");
    r = crl_transform_repr(crl_env_transform_at(env, 0));
    ck_assert_uint_eq(strlen(r), 710);
    ck_assert(g_str_has_prefix(r, "BadSpecs(xxx") && g_str_has_suffix(r, "xx)"));
    crl_free(r);
    r = crl_transform_repr(crl_env_transform_at(env, 1));
    ck_assert_str_eq(r, "BadSpecs(keys=[])");
    crl_free(r);
    r = crl_env_repr(env);
    ck_assert(g_str_has_prefix(r, "TransformedEnv(\n    env=GymEnv(env=CartPole-v1, batch_size=torch.Size([]), "
                                  "device=cpu),\n    transform=Compose(\n            BadSpecs(xxx"));
    ck_assert(g_str_has_suffix(r, "xx),\n            BadSpecs(keys=[])))"));
    crl_free(r);
    fx_close(&f);

    ck_assert_ptr_null(crl_env_repr(NULL));
    ck_assert_ptr_null(crl_transform_repr(NULL));
    ck_assert_ptr_null(crl_transform_parent_repr(NULL));
    ck_assert_ptr_null(crl_transform_parent_specs(NULL));
    ck_assert_ptr_null(crl_transform_parent_env(NULL, NULL));
}
END_TEST

static Suite *transform_suite(void)
{
    Suite *s = suite_create("transform");
    TCase *tc = tcase_create("standalone");
    tcase_add_test(tc, test_standalone_apply);
    tcase_add_test(tc, test_standalone_errors);
    tcase_add_test(tc, test_sdk_helpers);
    suite_add_tcase(s, tc);
    tc = tcase_create("chain");
    tcase_add_test(tc, test_chain_specs);
    tcase_add_test(tc, test_chain_order);
    tcase_add_test(tc, test_partial_reset);
    tcase_add_test(tc, test_inverse);
    tcase_add_test(tc, test_parent_step);
    tcase_add_test(tc, test_parent_reset_rand);
    tcase_add_test(tc, test_step_resets);
    tcase_add_test(tc, test_transform_done);
    tcase_add_test(tc, test_cartpole_check_specs);
    tcase_add_test(tc, test_untransformed_untouched);
    suite_add_tcase(s, tc);
    tc = tcase_create("runtime");
    tcase_add_test(tc, test_chain_api);
    tcase_add_test(tc, test_reprs_and_parent);
    tcase_add_test(tc, test_config_failures);
    tcase_add_test(tc, test_schema);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(transform_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
