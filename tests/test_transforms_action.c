/* Check suite for the action, key and episode-control transforms of the transforms plugin, on classic envs. */
#include <check.h>
#include "keep-cairo.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <glib.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/transform.h>

#define EXPECT_OK(expr, e)                                                                                        \
    do {                                                                                                          \
        int rc_ = (expr);                                                                                         \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message, crl_status_name(rc_));             \
    } while (0)

#define EXPECT_ERR(expr, e, want, needle)                                                                         \
    do {                                                                                                          \
        int rc_ = (expr);                                                                                         \
        ck_assert_msg(rc_ == (want), "%s gave %s, expected %s (%s)", #expr, crl_status_name(rc_),                \
                      crl_status_name(want), (e).message);                                                        \
        ck_assert_int_eq((e).code, (want));                                                                       \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'", (e).message, (needle));   \
    } while (0)

/* ---- fixture: a classic env with a transform chain from INI text ---------------- */

typedef struct fx {
    crl_config *cfg;
    crl_env *env;
} fx;

/* One host for the whole suite: loading classic.so once keeps its libraries'
 * start-up allocations (pixman's) from being made again on every reload. */
static crl_host *g_host;
static crl_config *g_host_cfg;

static bool open_host(void)
{
    crl_error e = { 0 };
    static const char text[] = "[plugins]\nload = classic, transforms\n";
    g_host_cfg = crl_config_new(&e);
    if (g_host_cfg && crl_config_load_buffer(g_host_cfg, "host.ini", text, strlen(text), CRL_LAYER_FILE, &e) == CRL_OK)
        g_host = crl_host_new(g_host_cfg, &e);
    if (g_host && crl_host_load_configured(g_host, &e) == CRL_OK)
        return true;
    fprintf(stderr, "loading classic and transforms: %s (CRL_PLUGIN_PATH=%s)\n", e.message,
            getenv("CRL_PLUGIN_PATH") ? getenv("CRL_PLUGIN_PATH") : "unset");
    return false;
}

/* [env] backend = classic, id, num_envs = num (0: a single env, batch []), seed, plus `env_extra` lines,
 * followed by `rest` (the [transform.NAME] sections).  NULL with err set. */
static crl_env *fx_open_n(fx *f, const char *id, int num, const char *env_extra, const char *rest, crl_error *err)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    char nums[32] = "";
    if (num > 0)
        snprintf(nums, sizeof nums, "num_envs = %d\n", num);
    /* Most cases write action indices; discrete_projection_onehot asks for the one-hot default. */
    bool named = env_extra && strstr(env_extra, "categorical_action_encoding");
    char *text = g_strdup_printf("[env]\nbackend = classic\nid = %s\n%sseed = 7\n%s\n%s%s\n", id, nums,
                                 env_extra ? env_extra : "", named ? "" : "categorical_action_encoding = true\n",
                                 rest ? rest : "");
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->env = crl_env_from_config(g_host, f->cfg, "env", err);
    return f->env;
}

static crl_env *fx_open(fx *f, const char *id, const char *env_extra, const char *rest, crl_error *err)
{
    return fx_open_n(f, id, 4, env_extra, rest, err);
}

static crl_env *fx_env(fx *f, const char *id, const char *env_extra, const char *rest)
{
    crl_error e = { 0 };
    crl_env *env = fx_open(f, id, env_extra, rest, &e);
    ck_assert_msg(env != NULL, "crl_env_from_config(%s, %s): %s", id, rest ? rest : "", e.message);
    return env;
}

static void fx_close(fx *f)
{
    crl_env_free(f->env);
    crl_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

static crl_td *reset_all(crl_env *env)
{
    crl_error e = { 0 };
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "reset: %s", e.message);
    return td;
}

/* A new action tensor of the env's (outer) action spec shape and dtype, from values (one per element). */
static crl_tensor *action_of(crl_env *env, const double *v)
{
    crl_error e = { 0 };
    const crl_spec *a = crl_env_action_spec(env);
    ck_assert_ptr_nonnull(a);
    crl_tensor *t = crl_tensor_new(crl_spec_dtype(a), crl_spec_ndim(a), crl_spec_shape(a), &e);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, v[i]);
    return t;
}

static void step_with(crl_env *env, crl_td *td, const double *v)
{
    crl_error e = { 0 };
    crl_tensor *a = action_of(env, v);
    EXPECT_OK(crl_td_set(td, "action", a, &e), e);
    crl_tensor_unref(a);
    EXPECT_OK(crl_env_step(env, td, &e), e);
}

static void mdp(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    EXPECT_OK(crl_env_step_mdp_into(env, td, td, &e), e);
}

static double at(const crl_td *td, const char *key, int64_t pos)
{
    crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no key '%s'", key);
    return crl_tensor_flat_get(t, pos);
}

/* ---- every transform passes check_env_specs ------------------------------------ */

typedef struct spec_case {
    const char *id;
    const char *env_extra;
    const char *sections;   /* [env] transforms = ... is part of env_extra */
} spec_case;

static const spec_case spec_cases[] = {
    { "CartPole-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = 3\nrandom = false" },
    { "CartPole-v1", "transforms = fs", "[transform.fs]\ntype = FrameSkipTransform\nframe_skip = 3" },
    { "Pendulum-v1", "transforms = fs", "[transform.fs]\ntype = FrameSkipTransform\nframe_skip = 2" },
    { "Pendulum-v1", "transforms = up, d2f",
      "[transform.up]\ntype = DTypeCastTransform\ndtype_in = float32\ndtype_out = float64\n"
      "in_keys = observation\nin_keys_inv = action\n[transform.d2f]\ntype = DoubleToFloat" },
    { "MountainCarContinuous-v0", "transforms = up",
      "[transform.up]\ntype = DTypeCastTransform\ndtype_in = float32\ndtype_out = float64" },
    { "CartPole-v1", "transforms = c", "[transform.c]\ntype = ClipTransform\nlow = -0.05\nhigh = 0.05" },
    { "Pendulum-v1", "transforms = c",
      "[transform.c]\ntype = ClipTransform\nlow = -1\nhigh = 1\nin_keys_inv = action" },
    { "Pendulum-v1", "transforms = s", "[transform.s]\ntype = ActionScaling" },
    { "MountainCarContinuous-v0", "transforms = s", "[transform.s]\ntype = ActionScaling\nstandard_normal = false" },
    { "CartPole-v1", "transforms = p",
      "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 2\nmax_actions = 5" },
    { "CartPole-v1", "transforms = pr, m",
      "[transform.pr]\ntype = TensorDictPrimer\nprimers.action_mask = bool [2] 1\n[transform.m]\ntype = ActionMask" },
    { "CartPole-v1", "transforms = x\nreturn_state = true", "[transform.x]\ntype = ExcludeTransform\nexclude_keys = state" },
    { "CartPole-v1", "transforms = s", "[transform.s]\ntype = SelectTransform\nkeys = observation" },
    { "Pendulum-v1", "transforms = r",
      "[transform.r]\ntype = RenameTransform\nin_keys = observation\nout_keys = obs\nin_keys_inv = action\n"
      "out_keys_inv = torque" },
    { "CartPole-v1", "transforms = r",
      "[transform.r]\ntype = RenameTransform\nin_keys = terminated\nout_keys = term_copy\ncreate_copy = true" },
    /* A reward copy stays under "next": step_mdp leaves every reward key of
     * the transformed env behind. */
    { "CartPole-v1", "transforms = r",
      "[transform.r]\ntype = RenameTransform\nin_keys = reward\nout_keys = reward_copy\ncreate_copy = true" },
    { "CartPole-v1", "transforms = p",
      "[transform.p]\ntype = TensorDictPrimer\nprimers.hidden = float32 [3] 0.5\nprimers.count = int64 [] 2" },
    { "CartPole-v1", "transforms = f", "[transform.f]\ntype = FiniteTensorDictCheck" },
    { "CartPole-v1", "transforms = t",
      "[transform.t]\ntype = TerminateTransform\nkey = observation\nindex = 0\nop = abs_gt\nvalue = 0.1" },
    { "Pendulum-v1", "transforms = t", "[transform.t]\ntype = RandomTruncationTransform\np = 0.2" },
};

START_TEST(check_specs_each)
{
    const spec_case *c = &spec_cases[_i];
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, c->id, c->env_extra, c->sections);
    /* 4 steps: short enough that no CartPole env ends under NoopResetEnv (a partial reset). */
    int rc = crl_env_check_specs(env, 4, &e);
    ck_assert_msg(rc == CRL_OK, "case %d (%s, %s): %s", _i, c->id, c->sections, e.message);
    if (_i != 0) {
        rc = crl_env_check_specs(env, 30, &e);
        ck_assert_msg(rc == CRL_OK, "case %d (%s, %s), 30 steps: %s", _i, c->id, c->sections, e.message);
    }
    fx_close(&f);
}
END_TEST

/* ---- ActionScaling ----------------------------------------------------------------- */

START_TEST(action_scaling_maps_onto_bounds)
{
    fx a, b;
    crl_error e = { 0 };
    crl_env *ea = fx_env(&a, "Pendulum-v1", "transforms = s", "[transform.s]\ntype = ActionScaling");
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    const crl_spec *as = crl_env_action_spec(ea);
    ck_assert_int_eq(crl_spec_get_kind(as), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_dtype(as), CRL_F32);
    for (int64_t i = 0; i < 4; i++) {
        ck_assert_double_eq(crl_tensor_flat_get(crl_spec_low(as), i), -1.0);
        ck_assert_double_eq(crl_tensor_flat_get(crl_spec_high(as), i), 1.0);
    }
    /* The base env's bounds are untouched: [-2, 2]. */
    const crl_spec *bs = crl_env_base_action_spec(ea);
    ck_assert_double_eq(crl_tensor_flat_get(crl_spec_high(bs), 0), 2.0);

    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "observation"), crl_td_get(tb, "observation")));
    const double norm[4] = { -1.0, -0.5, 0.25, 1.0 };
    const double env_range[4] = { -2.0, -1.0, 0.5, 2.0 };   /* a * (high - low) / 2 + (high + low) / 2 */
    crl_tensor *act = action_of(ea, norm);
    EXPECT_OK(crl_td_set(ta, "action", act, &e), e);
    EXPECT_OK(crl_env_step(ea, ta, &e), e);
    /* The caller's action is left as given. */
    ck_assert_ptr_eq(crl_td_get(ta, "action"), act);
    for (int64_t i = 0; i < 4; i++)
        ck_assert_double_eq(crl_tensor_flat_get(act, i), norm[i]);
    crl_tensor_unref(act);
    step_with(eb, tb, env_range);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.reward"), crl_td_get(tb, "next.reward")));
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(action_scaling_zero_one)
{
    fx a, b;
    crl_env *ea = fx_env(&a, "Pendulum-v1", "transforms = s", "[transform.s]\ntype = ActionScaling\n"
                         "standard_normal = false");
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double norm[4] = { 0.0, 0.25, 0.5, 1.0 };
    const double env_range[4] = { -2.0, -1.0, 0.0, 2.0 };   /* low + a * (high - low) */
    step_with(ea, ta, norm);
    step_with(eb, tb, env_range);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(action_scaling_refuses_discrete)
{
    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = s", "[transform.s]\ntype = ActionScaling", &e));
    ck_assert_int_eq(e.code, CRL_E_DTYPE);
    ck_assert_msg(strstr(e.message, "'action'") && strstr(e.message, "Categorical") && strstr(e.message, "Bounded"),
                  "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- DoubleToFloat / DTypeCastTransform ---------------------------------------------- */

START_TEST(double_to_float_round_trip)
{
    fx a, b;
    crl_error e = { 0 };
    crl_env *ea = fx_env(&a, "Pendulum-v1", "transforms = up, d2f\nreturn_state = true",
                         "[transform.up]\ntype = DTypeCastTransform\ndtype_in = float32\ndtype_out = float64\n"
                         "in_keys = observation\nin_keys_inv = action\n[transform.d2f]\ntype = DoubleToFloat");
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    /* After `up` everything is float64; DoubleToFloat brings both back to float32. */
    ck_assert_int_eq(crl_spec_dtype(crl_spec_composite_get(crl_env_observation_spec(ea), "observation")), CRL_F32);
    ck_assert_int_eq(crl_spec_dtype(crl_env_action_spec(ea)), CRL_F32);
    /* The state stays float64: DoubleToFloat's default keys are observation leaves. */
    ck_assert_int_eq(crl_spec_dtype(crl_spec_composite_get(crl_env_state_spec(ea), "state")), CRL_F64);

    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double v[4] = { 0.1f, -1.3f, 1.9f, -0.7f };
    crl_tensor *act = action_of(ea, v);
    crl_tensor *copy = crl_tensor_clone(act, &e);
    EXPECT_OK(crl_td_set(ta, "action", act, &e), e);
    EXPECT_OK(crl_env_step(ea, ta, &e), e);
    ck_assert_ptr_eq(crl_td_get(ta, "action"), act);
    ck_assert_int_eq(crl_tensor_dtype(act), CRL_F32);
    ck_assert(crl_tensor_equal(act, copy));
    step_with(eb, tb, v);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(ta, "next.observation")), CRL_F32);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
    crl_tensor_unref(act);
    crl_tensor_unref(copy);
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(dtype_cast_values_and_specs)
{
    fx f;
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = c",
                          "[transform.c]\ntype = DTypeCastTransform\ndtype_in = float32\ndtype_out = float64\n"
                          "in_keys = observation\nout_keys = obs64");
    const crl_spec *o = crl_env_observation_spec(env);
    const crl_spec *o64 = crl_spec_composite_get(o, "obs64");
    ck_assert_ptr_nonnull(o64);
    ck_assert_int_eq(crl_spec_dtype(o64), CRL_F64);
    ck_assert_int_eq(crl_spec_get_kind(o64), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_dtype(crl_spec_composite_get(o, "observation")), CRL_F32);
    crl_td *td = reset_all(env);
    crl_tensor *x = crl_td_get(td, "observation"), *y = crl_td_get(td, "obs64");
    ck_assert_int_eq(crl_tensor_dtype(y), CRL_F64);
    for (int64_t i = 0; i < crl_tensor_numel(x); i++)
        ck_assert_double_eq(crl_tensor_flat_get(x, i), crl_tensor_flat_get(y, i));
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(dtype_cast_bad_options)
{
    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = c",
                               "[transform.c]\ntype = DTypeCastTransform\ndtype_in = float33\ndtype_out = float64",
                               &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "dtype_in") && strstr(e.message, "float33") && strstr(e.message, "test.ini:"),
                  "%s", e.message);
    fx_close(&f);
    /* A key of the wrong dtype: the CartPole action is int64. */
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = c",
                               "[transform.c]\ntype = DTypeCastTransform\ndtype_in = float32\ndtype_out = float64\n"
                               "in_keys_inv = action", &e));
    ck_assert_int_eq(e.code, CRL_E_DTYPE);
    ck_assert_msg(strstr(e.message, "'action'") && strstr(e.message, "int64"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- ClipTransform -------------------------------------------------------------- */

START_TEST(clip_values_and_bounds)
{
    fx a, b;
    crl_env *ea = fx_env(&a, "CartPole-v1", "transforms = c", "[transform.c]\ntype = ClipTransform\nlow = -0.02\n"
                         "high = 0.03");
    crl_env *eb = fx_env(&b, "CartPole-v1", NULL, NULL);
    const crl_spec *s = crl_spec_composite_get(crl_env_observation_spec(ea), "observation");
    ck_assert_int_eq(crl_spec_get_kind(s), CRL_SPEC_BOUNDED);
    for (int64_t i = 0; i < 16; i++) {
        ck_assert_double_eq_tol(crl_tensor_flat_get(crl_spec_low(s), i), -0.02, 1e-7);
        ck_assert_double_eq_tol(crl_tensor_flat_get(crl_spec_high(s), i), 0.03, 1e-7);
    }
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double act[4] = { 1, 0, 1, 0 };
    for (int k = 0; k < 3; k++) {
        step_with(ea, ta, act);
        step_with(eb, tb, act);
        for (int64_t i = 0; i < 16; i++) {
            float raw = (float)at(tb, "next.observation", i);
            float want = raw < -0.02f ? -0.02f : raw > 0.03f ? 0.03f : raw;
            ck_assert_float_eq(at(ta, "next.observation", i), want);
        }
        mdp(ea, ta);
        mdp(eb, tb);
    }
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(clip_missing_key_and_bad_bounds)
{
    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = c",
                               "[transform.c]\ntype = ClipTransform\nlow = 0\nin_keys = pixels", &e));
    ck_assert_int_eq(e.code, CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'pixels'") && strstr(e.message, "'observation'") && strstr(e.message, "'reward'"),
                  "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = c",
                               "[transform.c]\ntype = ClipTransform\nlow = 2\nhigh = 1", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "low") && strstr(e.message, "test.ini:"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- FrameSkipTransform --------------------------------------------------------- */

START_TEST(frame_skip_sums_rewards)
{
    fx a, b;
    crl_env *ea = fx_env(&a, "Pendulum-v1", "transforms = fs", "[transform.fs]\ntype = FrameSkipTransform\n"
                         "frame_skip = 3");
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double act[4] = { 0.5, -1.5, 2.0, 0.0 };
    for (int k = 0; k < 5; k++) {
        step_with(ea, ta, act);
        double sum[4] = { 0 };
        for (int j = 0; j < 3; j++) {
            step_with(eb, tb, act);
            for (int64_t i = 0; i < 4; i++)
                sum[i] += at(tb, "next.reward", i);
            mdp(eb, tb);
        }
        for (int64_t i = 0; i < 4; i++)
            ck_assert_double_eq_tol(at(ta, "next.reward", i), sum[i], 1e-5 * (1 + fabs(sum[i])));
        ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "observation")));
        mdp(ea, ta);
    }
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(frame_skip_stops_at_done)
{
    /* Pushing right every step ends every CartPole episode within a few dozen frames; an env that ends inside a
     * skip keeps the reward of the frames it lived (1 each) and its final observation. */
    fx a;
    crl_env *ea = fx_env(&a, "CartPole-v1", "transforms = fs", "[transform.fs]\ntype = FrameSkipTransform\n"
                         "frame_skip = 4");
    crl_td *ta = reset_all(ea);
    const double act[4] = { 1, 1, 1, 1 };
    double total[4] = { 0 };
    bool ended[4] = { false };
    int partial = 0;
    for (int k = 0; k < 30; k++) {
        step_with(ea, ta, act);
        for (int64_t i = 0; i < 4; i++) {
            if (ended[i])
                continue;
            double r = at(ta, "next.reward", i);
            ck_assert(r >= 1.0 && r <= 4.0);
            total[i] += r;
            if (at(ta, "next.done", i) != 0.0) {
                /* The observation is the one of the frame that ended the episode, not a restarted one. */
                double x = at(ta, "next.observation", 4 * i), th = at(ta, "next.observation", 4 * i + 2);
                ck_assert_msg(fabs(x) > 2.4 || fabs(th) > 0.2094, "env %lld: x %g theta %g", (long long)i, x, th);
                ended[i] = true;
                partial += r < 4.0;
            } else {
                ck_assert_double_eq(r, 4.0);
            }
        }
        if (ended[0] && ended[1] && ended[2] && ended[3])
            break;
        /* Ended envs sit out: reset them with a mask. */
        bool any = false;
        for (int64_t i = 0; i < 4; i++)
            any |= ended[i];
        mdp(ea, ta);
        if (any) {
            crl_error e = { 0 };
            int64_t shp[2] = { 4, 1 };
            crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shp, &e);
            for (int64_t i = 0; i < 4; i++)
                crl_tensor_flat_set(m, i, at(ta, "done", i));
            EXPECT_OK(crl_td_set(ta, "_reset", m, &e), e);
            crl_tensor_unref(m);
            crl_td *r = crl_env_reset(ea, ta, &e);
            ck_assert_msg(r != NULL, "%s", e.message);
            crl_td_unref(r);
        }
    }
    for (int64_t i = 0; i < 4; i++) {
        ck_assert_msg(ended[i], "env %lld never ended", (long long)i);
        ck_assert(total[i] >= 8 && total[i] <= 60);
    }
    ck_assert_int_gt(partial, 0);
    crl_td_unref(ta);
    fx_close(&a);
}
END_TEST

/* ---- NoopResetEnv ------------------------------------------------------------------ */

START_TEST(noop_reset_steps_after_reset)
{
    fx a, b, c;
    crl_error e = { 0 };
    crl_env *ea = fx_env(&a, "Pendulum-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = 3\n"
                         "random = false");
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    crl_env *ec = fx_env(&c, "Pendulum-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = 0\n"
                         "random = false");
    crl_td *ta = reset_all(ea), *tb = reset_all(eb), *tc = reset_all(ec);
    /* Zero no-ops is the plain reset; three random steps moved every env away from it. */
    ck_assert(crl_tensor_equal(crl_td_get(tc, "observation"), crl_td_get(tb, "observation")));
    for (int64_t i = 0; i < 4; i++)
        ck_assert(at(ta, "observation", 3 * i + 2) != at(tb, "observation", 3 * i + 2));
    ck_assert(!crl_td_has(ta, "next"));
    ck_assert(!crl_td_has(ta, "action"));
    ck_assert(!crl_td_has(ta, "reward"));
    /* Same seed, same no-op steps. */
    fx d;
    crl_env *ed = fx_env(&d, "Pendulum-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = 3\n"
                         "random = false");
    crl_td *td = reset_all(ed);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "observation"), crl_td_get(td, "observation")));
    /* A partial reset cannot step one env alone. */
    int64_t shp[2] = { 4, 1 };
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shp, &e);
    crl_tensor_flat_set(m, 1, 1);
    EXPECT_OK(crl_td_set(ta, "_reset", m, &e), e);
    crl_tensor_unref(m);
    ck_assert_ptr_null(crl_env_reset(ea, ta, &e));
    ck_assert_int_eq(e.code, CRL_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "partial reset") && strstr(e.message, "1 of 4"), "%s", e.message);
    crl_td_unref(ta);
    crl_td_unref(tb);
    crl_td_unref(tc);
    crl_td_unref(td);
    fx_close(&a);
    fx_close(&b);
    fx_close(&c);
    fx_close(&d);
}
END_TEST

START_TEST(noop_reset_bad_options)
{
    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = 0",
                               &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "noops") && strstr(e.message, "random"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = -2",
                               &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "noops"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- DiscreteActionProjection ------------------------------------------------------- */

/* TorchRL's DiscreteActionProjection takes one-hot actions, the classic envs' default encoding: the outer
 * OneHot(max_actions) is projected onto the env's OneHot(2). */
START_TEST(discrete_projection_onehot)
{
    fx a, b;
    crl_env *ea = fx_env(&a, "CartPole-v1", "categorical_action_encoding = false\ntransforms = p",
                         "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 2\n"
                         "max_actions = 5\nprojection = modulo");
    crl_env *eb = fx_env(&b, "CartPole-v1", NULL, NULL);
    const crl_spec *s = crl_env_action_spec(ea);
    ck_assert_int_eq(crl_spec_get_kind(s), CRL_SPEC_ONEHOT);
    ck_assert_int_eq(crl_spec_n(s), 5);
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    double wide[20] = { 0 };
    const int hot[4] = { 0, 1, 3, 4 };
    for (int i = 0; i < 4; i++)
        wide[i * 5 + hot[i]] = 1;
    const double proj[4] = { 0, 1, 1, 0 };
    step_with(ea, ta, wide);
    step_with(eb, tb, proj);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(discrete_projection_modulo_and_random)
{
    fx a, b;
    crl_env *ea = fx_env(&a, "CartPole-v1", "transforms = p",
                         "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 2\n"
                         "max_actions = 5\nprojection = modulo");
    crl_env *eb = fx_env(&b, "CartPole-v1", NULL, NULL);
    const crl_spec *s = crl_env_action_spec(ea);
    ck_assert_int_eq(crl_spec_get_kind(s), CRL_SPEC_CATEGORICAL);
    ck_assert_int_eq(crl_spec_n(s), 5);
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double wide[4] = { 0, 1, 3, 4 }, proj[4] = { 0, 1, 1, 0 };
    step_with(ea, ta, wide);
    step_with(eb, tb, proj);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
    ck_assert_double_eq(at(ta, "action", 2), 3);
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);

    /* random: an action beyond the env's is some valid action: the result is one of the two plain steps. */
    fx r, p0, p1;
    crl_env *er = fx_env(&r, "CartPole-v1", "transforms = p",
                         "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 2\nmax_actions = 5");
    crl_env *e0 = fx_env(&p0, "CartPole-v1", NULL, NULL);
    crl_env *e1 = fx_env(&p1, "CartPole-v1", NULL, NULL);
    crl_td *tr = reset_all(er), *t0 = reset_all(e0), *t1 = reset_all(e1);
    const double big[4] = { 4, 4, 2, 3 }, zeros[4] = { 0, 0, 0, 0 }, ones[4] = { 1, 1, 1, 1 };
    step_with(er, tr, big);
    step_with(e0, t0, zeros);
    step_with(e1, t1, ones);
    for (int64_t i = 0; i < 16; i += 4) {
        double v = at(tr, "next.observation", i + 1);
        ck_assert(v == at(t0, "next.observation", i + 1) || v == at(t1, "next.observation", i + 1));
    }
    crl_td_unref(tr);
    crl_td_unref(t0);
    crl_td_unref(t1);
    fx_close(&r);
    fx_close(&p0);
    fx_close(&p1);
}
END_TEST

START_TEST(discrete_projection_bad_options)
{
    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = p",
                               "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 3\n"
                               "max_actions = 2", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "max_actions") && strstr(e.message, "test.ini:"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = p",
                               "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 3\n"
                               "max_actions = 6", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "num_actions_effective = 2"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "Pendulum-v1", "transforms = p",
                               "[transform.p]\ntype = DiscreteActionProjection\nnum_actions_effective = 3\n"
                               "max_actions = 6", &e));
    ck_assert_int_eq(e.code, CRL_E_DTYPE);
    fx_close(&f);
}
END_TEST

/* ---- ActionMask ------------------------------------------------------------------- */

START_TEST(action_mask_refuses_masked_action)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = pr, m",
                          "[transform.pr]\ntype = TensorDictPrimer\nprimers.action_mask = bool [2] 1\n"
                          "[transform.m]\ntype = ActionMask");
    crl_td *td = reset_all(env);
    const double ok[4] = { 0, 1, 1, 0 };
    step_with(env, td, ok);
    mdp(env, td);
    /* Env 2 may only push left now. */
    crl_tensor_flat_set(crl_td_get(td, "action_mask"), 2 * 2 + 1, 0);
    crl_tensor *a = action_of(env, ok);
    EXPECT_OK(crl_td_set(td, "action", a, &e), e);
    crl_tensor_unref(a);
    EXPECT_ERR(crl_env_step(env, td, &e), e, CRL_E_INVALID, "env 2");
    ck_assert_msg(strstr(e.message, "action 1") && strstr(e.message, "action_mask"), "%s", e.message);
    crl_td_unref(td);
    fx_close(&f);
    /* No mask in the env's output. */
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = m", "[transform.m]\ntype = ActionMask", &e));
    ck_assert_int_eq(e.code, CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'action_mask'") && strstr(e.message, "'observation'"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* The latest mask goes onto the outer action spec (TorchRL's update_mask):
 * random actions only draw allowed ones, and the spec's check refuses others. */
START_TEST(action_mask_updates_spec_mask)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = pr, m",
                          "[transform.pr]\ntype = TensorDictPrimer\nprimers.action_mask = bool [2] 1\n"
                          "[transform.m]\ntype = ActionMask");
    crl_td *td = reset_all(env);
    const crl_spec *a = crl_env_action_spec(env);
    ck_assert_ptr_nonnull(crl_spec_mask(a));
    /* Env 2 may only push left, env 3 only right, from this step on. */
    crl_tensor_flat_set(crl_td_get(td, "action_mask"), 2 * 2 + 1, 0);
    crl_tensor_flat_set(crl_td_get(td, "action_mask"), 3 * 2 + 0, 0);
    const double ok[4] = { 0, 1, 0, 1 };
    step_with(env, td, ok);
    mdp(env, td);
    const uint8_t *m = crl_tensor_data(crl_spec_mask(a));
    ck_assert(m[2 * 2 + 0] && !m[2 * 2 + 1] && !m[3 * 2 + 0] && m[3 * 2 + 1]);
    int seen[4][2] = { { 0 } };
    for (int i = 0; i < 200; i++) {
        EXPECT_OK(crl_env_rand_action(env, td, &e), e);
        for (int k = 0; k < 4; k++)
            seen[k][(int)at(td, "action", k)]++;
    }
    ck_assert_int_eq(seen[2][1], 0);
    ck_assert_int_eq(seen[3][0], 0);
    ck_assert(seen[0][0] > 50 && seen[0][1] > 50 && seen[1][0] > 50 && seen[1][1] > 50);
    /* The spec itself refuses a masked value. */
    crl_tensor *bad = action_of(env, (const double[4]) { 0, 0, 1, 1 });
    ck_assert(!crl_spec_is_in(a, bad));
    EXPECT_ERR(crl_spec_check(a, bad, "action", &e), e, CRL_E_RANGE, "masked");
    crl_tensor_unref(bad);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- Exclude / Select / Rename ---------------------------------------------------------- */

START_TEST(exclude_select_rename_keys)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = x\nreturn_state = true",
                          "[transform.x]\ntype = ExcludeTransform\nexclude_keys = state");
    ck_assert_ptr_null(crl_spec_composite_get(crl_env_state_spec(env), "state"));
    crl_td *td = reset_all(env);
    ck_assert(!crl_td_has(td, "state"));
    ck_assert(crl_td_has(td, "observation"));
    const double act[4] = { 0, 1, 0, 1 };
    step_with(env, td, act);
    ck_assert(!crl_td_has(td, "next.state"));
    ck_assert(crl_td_has(td, "next.reward"));
    crl_td_unref(td);
    fx_close(&f);

    env = fx_env(&f, "CartPole-v1", "transforms = s\nreturn_state = true",
                 "[transform.s]\ntype = SelectTransform\nkeys = observation");
    td = reset_all(env);
    ck_assert(!crl_td_has(td, "state"));
    step_with(env, td, act);
    ck_assert(crl_td_has(td, "next.observation") && crl_td_has(td, "next.reward") && crl_td_has(td, "next.done") &&
              crl_td_has(td, "next.terminated") && crl_td_has(td, "next.truncated") && crl_td_has(td, "action"));
    ck_assert(!crl_td_has(td, "next.state"));
    crl_td_unref(td);
    fx_close(&f);

    fx b;
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    env = fx_env(&f, "Pendulum-v1", "transforms = r",
                 "[transform.r]\ntype = RenameTransform\nin_keys = observation\nout_keys = obs\nin_keys_inv = action\n"
                 "out_keys_inv = torque");
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_observation_spec(env), "obs"));
    ck_assert_ptr_null(crl_spec_composite_get(crl_env_observation_spec(env), "observation"));
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_full_action_spec(env), "torque"));
    td = reset_all(env);
    crl_td *tb = reset_all(eb);
    ck_assert(crl_tensor_equal(crl_td_get(td, "obs"), crl_td_get(tb, "observation")));
    const double u[4] = { 1.5, -0.5, 0.25, -2 };
    crl_tensor *t = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 4, 1 }, &e);
    for (int i = 0; i < 4; i++)
        crl_tensor_flat_set(t, i, u[i]);
    EXPECT_OK(crl_td_set(td, "torque", t, &e), e);
    crl_tensor_unref(t);
    EXPECT_OK(crl_env_step(env, td, &e), e);
    ck_assert(crl_td_has(td, "torque"));
    step_with(eb, tb, u);
    ck_assert(crl_tensor_equal(crl_td_get(td, "next.obs"), crl_td_get(tb, "next.observation")));
    crl_td_unref(td);
    crl_td_unref(tb);
    fx_close(&f);
    fx_close(&b);
}
END_TEST

START_TEST(keys_bad_input)
{
    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = x", "[transform.x]\ntype = ExcludeTransform\n"
                               "exclude_keys = velocity", &e));
    ck_assert_int_eq(e.code, CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'velocity'") && strstr(e.message, "'observation'"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = x", "[transform.x]\ntype = ExcludeTransform\n"
                               "exclude_keys = reward", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = r", "[transform.r]\ntype = RenameTransform\n"
                               "in_keys = reward\nout_keys = r", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "create_copy"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = r", "[transform.r]\ntype = RenameTransform\n"
                               "in_keys = observation, state\nout_keys = o", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "out_keys") && strstr(e.message, "test.ini:"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = s", "[transform.s]\ntype = SelectTransform\n"
                               "keys = obs", &e));
    ck_assert_int_eq(e.code, CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'obs'") && strstr(e.message, "'observation'"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- TensorDictPrimer ---------------------------------------------------------------- */

START_TEST(primer_partial_reset)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = p", "[transform.p]\ntype = TensorDictPrimer\n"
                          "primers.hidden = float32 [3] 0.5");
    const crl_spec *s = crl_spec_composite_get(crl_env_observation_spec(env), "hidden");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(crl_spec_ndim(s), 2);
    ck_assert_int_eq(crl_spec_shape(s)[0], 4);
    ck_assert_int_eq(crl_spec_shape(s)[1], 3);
    crl_td *td = reset_all(env);
    for (int64_t i = 0; i < 12; i++)
        ck_assert_double_eq(at(td, "hidden", i), 0.5);
    /* The policy's values are carried through the step. */
    for (int64_t i = 0; i < 12; i++)
        crl_tensor_flat_set(crl_td_get(td, "hidden"), i, (double)i);
    const double act[4] = { 0, 1, 0, 1 };
    step_with(env, td, act);
    for (int64_t i = 0; i < 12; i++)
        ck_assert_double_eq(at(td, "next.hidden", i), (double)i);
    mdp(env, td);
    /* Reset env 1 alone: only its row restarts. */
    int64_t shp[2] = { 4, 1 };
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shp, &e);
    crl_tensor_flat_set(m, 1, 1);
    EXPECT_OK(crl_td_set(td, "_reset", m, &e), e);
    crl_tensor_unref(m);
    crl_td *r = crl_env_reset(env, td, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    crl_td_unref(r);
    for (int64_t i = 0; i < 12; i++)
        ck_assert_double_eq(at(td, "hidden", i), i / 3 == 1 ? 0.5 : (double)i);
    crl_td_unref(td);
    fx_close(&f);

    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = p", "[transform.p]\ntype = TensorDictPrimer\n"
                               "primers.h = float32 4", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "primers.h") && strstr(e.message, "brackets"), "%s", e.message);
    fx_close(&f);
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = p", "[transform.p]\ntype = TensorDictPrimer\n"
                               "primers.observation = float32 [4]", &e));
    ck_assert_int_eq(e.code, CRL_E_EXISTS);
    fx_close(&f);
}
END_TEST

/* ---- FiniteTensorDictCheck ------------------------------------------------------------ */

START_TEST(finite_check_names_key_and_env)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = f", "[transform.f]\ntype = FiniteTensorDictCheck");
    crl_td *td = reset_all(env);
    const double act[4] = { 0, 1, 0, 1 };
    step_with(env, td, act);
    crl_td_unref(td);
    fx_close(&f);

    crl_transform *t = crl_transform_new(g_host, "FiniteTensorDictCheck", NULL, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b = 4, shp[2] = { 4, 3 };
    td = crl_td_new(1, &b, &e);
    crl_tensor *x = crl_tensor_new(CRL_F32, 2, shp, &e);
    EXPECT_OK(crl_td_set(td, "obs.inner", x, &e), e);
    EXPECT_OK(crl_transform_apply(t, td, &e), e);
    crl_tensor_flat_set(x, 2 * 3 + 1, NAN);
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_RANGE, "'obs.inner'");
    ck_assert_msg(strstr(e.message, "NaN") && strstr(e.message, "env 2"), "%s", e.message);
    crl_tensor_flat_set(x, 2 * 3 + 1, 0);
    crl_tensor_flat_set(x, 3 * 3, -INFINITY);
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_RANGE, "env 3");
    crl_tensor_unref(x);
    crl_td_unref(td);
    crl_transform_free(t);
}
END_TEST

/* ---- TerminateTransform ---------------------------------------------------------------- */

START_TEST(terminate_on_cart_position)
{
    fx a, b;
    crl_env *ea = fx_env(&a, "CartPole-v1", "transforms = t", "[transform.t]\ntype = TerminateTransform\n"
                         "key = observation\nindex = 0\nop = gt\nvalue = 0.02");
    crl_env *eb = fx_env(&b, "CartPole-v1", NULL, NULL);
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double right[4] = { 1, 1, 1, 1 };
    int by_condition = 0;
    bool ended[4] = { false };
    for (int k = 0; k < 6; k++) {
        step_with(ea, ta, right);
        step_with(eb, tb, right);
        ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
        for (int64_t i = 0; i < 4; i++) {
            if (ended[i])
                continue;
            double xpos = at(tb, "next.observation", 4 * i);
            bool base = at(tb, "next.terminated", i) != 0.0;
            bool want = base || xpos > 0.02;
            ck_assert_int_eq(at(ta, "next.terminated", i) != 0.0, want);
            ck_assert_int_eq(at(ta, "next.done", i) != 0.0, want || at(tb, "next.truncated", i) != 0.0);
            by_condition += want && !base;
            ended[i] = want;
        }
        if (ended[0] || ended[1] || ended[2] || ended[3])
            break;
        mdp(ea, ta);
        mdp(eb, tb);
    }
    ck_assert_int_gt(by_condition, 0);
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);

    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&a, "CartPole-v1", "transforms = t", "[transform.t]\ntype = TerminateTransform\n"
                               "index = 4\nvalue = 1", &e));
    ck_assert_int_eq(e.code, CRL_E_RANGE);
    ck_assert_msg(strstr(e.message, "index = 4") && strstr(e.message, "0..3"), "%s", e.message);
    fx_close(&a);
    ck_assert_ptr_null(fx_open(&a, "CartPole-v1", "transforms = t", "[transform.t]\ntype = TerminateTransform\n"
                               "op = bigger\nvalue = 1", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "op"), "%s", e.message);
    fx_close(&a);
}
END_TEST

/* ---- RandomTruncationTransform ----------------------------------------------------------- */

/* Steps of 4 Pendulum envs (which never terminate) with truncation p, resetting truncated envs; the pattern of
 * truncations as a bit string, and their count. */
static int64_t truncations(uint64_t seed, double p, int steps, char *pattern)
{
    fx f;
    crl_error e = { 0 };
    char sec[128];
    snprintf(sec, sizeof sec, "[transform.t]\ntype = RandomTruncationTransform\np = %g", p);
    crl_env *env = fx_env(&f, "Pendulum-v1", "transforms = t", sec);
    crl_env_set_seed(env, seed);
    crl_td *td = reset_all(env);
    const double act[4] = { 0, 0, 0, 0 };
    int64_t count = 0;
    for (int k = 0; k < steps; k++) {
        step_with(env, td, act);
        bool any = false;
        for (int64_t i = 0; i < 4; i++) {
            bool cut = at(td, "next.truncated", i) != 0.0;
            ck_assert_int_eq(at(td, "next.done", i) != 0.0, cut);
            ck_assert(at(td, "next.terminated", i) == 0.0);
            count += cut;
            any |= cut;
            if (pattern)
                pattern[4 * k + i] = cut ? '1' : '0';
        }
        mdp(env, td);
        if (any) {
            int64_t shp[2] = { 4, 1 };
            crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shp, &e);
            for (int64_t i = 0; i < 4; i++)
                crl_tensor_flat_set(m, i, at(td, "done", i));
            EXPECT_OK(crl_td_set(td, "_reset", m, &e), e);
            crl_tensor_unref(m);
            crl_td *r = crl_env_reset(env, td, &e);
            ck_assert_msg(r != NULL, "%s", e.message);
            crl_td_unref(r);
        }
    }
    if (pattern)
        pattern[4 * steps] = '\0';
    crl_td_unref(td);
    fx_close(&f);
    return count;
}

START_TEST(random_truncation_frequency_and_seed)
{
    enum { STEPS = 150 };   /* 600 draws: the Pendulum time limit (200) is never reached */
    char p1[4 * STEPS + 1], p2[4 * STEPS + 1], p3[4 * STEPS + 1];
    int64_t n1 = truncations(11, 0.25, STEPS, p1);
    int64_t n2 = truncations(11, 0.25, STEPS, p2);
    int64_t n3 = truncations(12, 0.25, STEPS, p3);
    ck_assert_str_eq(p1, p2);
    ck_assert_int_eq(n1, n2);
    ck_assert_str_ne(p1, p3);
    /* 600 Bernoulli(0.25) draws: sd = 10.6; 5 sd either side of 150. */
    ck_assert_msg(n1 > 97 && n1 < 203, "%lld truncations of 600", (long long)n1);
    ck_assert_msg(n3 > 97 && n3 < 203, "%lld truncations of 600", (long long)n3);
    ck_assert_int_eq(truncations(11, 0.0, 20, NULL), 0);
    ck_assert_int_eq(truncations(11, 1.0, 5, NULL), 20);

    fx f;
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "Pendulum-v1", "transforms = t",
                               "[transform.t]\ntype = RandomTruncationTransform\np = 1.5", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "p") && strstr(e.message, "test.ini:"), "%s", e.message);
    fx_close(&f);
}
END_TEST


START_TEST(noop_reset_restarts_ended_envs)
{
    /* 40 random CartPole steps end most episodes: those envs restart inside the no-ops. */
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = n", "[transform.n]\ntype = NoopResetEnv\nnoops = 40\n"
                          "random = false");
    crl_td *td = reset_all(env);
    for (int64_t i = 0; i < 4; i++)
        ck_assert(at(td, "done", i) == 0.0);
    EXPECT_OK(crl_spec_check_td(crl_env_observation_spec(env), td, &e), e);
    const double act[4] = { 0, 1, 0, 1 };
    step_with(env, td, act);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(clip_inverse_on_actions)
{
    fx a, b;
    crl_error e = { 0 };
    crl_env *ea = fx_env(&a, "Pendulum-v1", "transforms = c", "[transform.c]\ntype = ClipTransform\nlow = -1\n"
                         "high = 0.5\nin_keys =\nin_keys_inv = action");
    crl_env *eb = fx_env(&b, "Pendulum-v1", NULL, NULL);
    crl_td *ta = reset_all(ea), *tb = reset_all(eb);
    const double v[4] = { -2, -0.25, 0.75, 2 }, clipped[4] = { -1, -0.25, 0.5, 0.5 };
    crl_tensor *act = action_of(ea, v);
    EXPECT_OK(crl_td_set(ta, "action", act, &e), e);
    EXPECT_OK(crl_env_step(ea, ta, &e), e);
    for (int64_t i = 0; i < 4; i++)
        ck_assert_double_eq(crl_tensor_flat_get(act, i), v[i]);
    crl_tensor_unref(act);
    step_with(eb, tb, clipped);
    ck_assert(crl_tensor_equal(crl_td_get(ta, "next.observation"), crl_td_get(tb, "next.observation")));
    crl_td_unref(ta);
    crl_td_unref(tb);
    fx_close(&a);
    fx_close(&b);
}
END_TEST

START_TEST(discrete_projection_standalone_forward)
{
    crl_error e = { 0 };
    const char *kv[] = { "num_actions_effective=2", "max_actions=5", NULL };
    crl_transform *t = crl_transform_new(g_host, "DiscreteActionProjection", kv, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    int64_t b = 3, shp[2] = { 3, 2 };
    crl_td *td = crl_td_new(1, &b, &e);
    crl_tensor *x = crl_tensor_new(CRL_I64, 2, shp, &e);
    crl_tensor_flat_set(x, 1, 1);   /* row 0: action 1 */
    crl_tensor_flat_set(x, 2, 1);   /* row 1: action 0 */
    crl_tensor_flat_set(x, 5, 1);   /* row 2: action 1 */
    EXPECT_OK(crl_td_set(td, "action", x, &e), e);
    crl_tensor_unref(x);
    EXPECT_OK(crl_transform_apply(t, td, &e), e);
    crl_tensor *y = crl_td_get(td, "action");
    ck_assert_int_eq(crl_tensor_shape(y)[1], 5);
    const int want[3] = { 1, 0, 1 };
    for (int64_t r = 0; r < 3; r++)
        for (int64_t j = 0; j < 5; j++)
            ck_assert_double_eq(crl_tensor_flat_get(y, 5 * r + j), j == want[r] ? 1.0 : 0.0);
    crl_td_unref(td);
    crl_transform_free(t);
}
END_TEST

START_TEST(primer_random_start)
{
    fx f;
    crl_env *env = fx_env(&f, "CartPole-v1", "transforms = p", "[transform.p]\ntype = TensorDictPrimer\n"
                          "primers.z = float32 [2]\nrandom = true");
    crl_td *td = reset_all(env);
    bool differ = false;
    for (int64_t i = 1; i < 8; i++)
        differ |= at(td, "z", i) != at(td, "z", 0);
    ck_assert(differ);
    fx g;
    crl_env *env2 = fx_env(&g, "CartPole-v1", "transforms = p", "[transform.p]\ntype = TensorDictPrimer\n"
                           "primers.z = float32 [2]\nrandom = true");
    crl_td *td2 = reset_all(env2);
    ck_assert(crl_tensor_equal(crl_td_get(td, "z"), crl_td_get(td2, "z")));
    crl_td_unref(td);
    crl_td_unref(td2);
    fx_close(&f);
    fx_close(&g);
    crl_error e = { 0 };
    ck_assert_ptr_null(fx_open(&f, "CartPole-v1", "transforms = p", "[transform.p]\ntype = TensorDictPrimer\n"
                               "primers.z = float32 [2] 0\nrandom = true", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "primers.z") && strstr(e.message, "random"), "%s", e.message);
    fx_close(&f);
}
END_TEST


START_TEST(single_env_batch)
{
    /* A single env (batch []): the per-env paths see one env and scalar-batch tensors. */
    static const char *const chains[][2] = {
        { "transforms = fs, t, r", "[transform.fs]\ntype = FrameSkipTransform\nframe_skip = 3\n"
          "[transform.t]\ntype = TerminateTransform\nop = abs_gt\nvalue = 0.5\n"
          "[transform.r]\ntype = RandomTruncationTransform\np = 0.1" },
        { "transforms = n, p, m", "[transform.n]\ntype = NoopResetEnv\nnoops = 5\n"
          "[transform.p]\ntype = TensorDictPrimer\nprimers.action_mask = bool [2] 1\n[transform.m]\ntype = ActionMask" },
    };
    for (size_t k = 0; k < 2; k++) {
        fx f;
        crl_error e = { 0 };
        crl_env *env = fx_open_n(&f, "CartPole-v1", 0, chains[k][0], chains[k][1], &e);
        ck_assert_msg(env != NULL, "%s", e.message);
        ck_assert_int_eq(crl_env_batch_ndim(env), 0);
        /* NoopResetEnv resets one env at a time here: no partial resets. */
        EXPECT_OK(crl_env_check_specs(env, 40, &e), e);
        fx_close(&f);
    }
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_open_n(&f, "Pendulum-v1", 0, "transforms = s", "[transform.s]\ntype = ActionScaling", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    EXPECT_OK(crl_env_check_specs(env, 10, &e), e);
    fx_close(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("transforms_action");
    TCase *tc = tcase_create("specs");
    tcase_add_loop_test(tc, check_specs_each, 0, (int)(sizeof spec_cases / sizeof spec_cases[0]));
    tcase_add_test(tc, single_env_batch);
    suite_add_tcase(s, tc);
    tc = tcase_create("actions");
    tcase_add_test(tc, action_scaling_maps_onto_bounds);
    tcase_add_test(tc, action_scaling_zero_one);
    tcase_add_test(tc, action_scaling_refuses_discrete);
    tcase_add_test(tc, double_to_float_round_trip);
    tcase_add_test(tc, dtype_cast_values_and_specs);
    tcase_add_test(tc, dtype_cast_bad_options);
    tcase_add_test(tc, clip_values_and_bounds);
    tcase_add_test(tc, clip_missing_key_and_bad_bounds);
    tcase_add_test(tc, discrete_projection_modulo_and_random);
    tcase_add_test(tc, discrete_projection_onehot);
    tcase_add_test(tc, discrete_projection_bad_options);
    tcase_add_test(tc, action_mask_refuses_masked_action);
    tcase_add_test(tc, action_mask_updates_spec_mask);
    tcase_add_test(tc, clip_inverse_on_actions);
    tcase_add_test(tc, discrete_projection_standalone_forward);
    suite_add_tcase(s, tc);
    tc = tcase_create("keys");
    tcase_add_test(tc, exclude_select_rename_keys);
    tcase_add_test(tc, keys_bad_input);
    tcase_add_test(tc, primer_partial_reset);
    tcase_add_test(tc, primer_random_start);
    suite_add_tcase(s, tc);
    tc = tcase_create("episodes");
    tcase_add_test(tc, frame_skip_sums_rewards);
    tcase_add_test(tc, frame_skip_stops_at_done);
    tcase_add_test(tc, noop_reset_steps_after_reset);
    tcase_add_test(tc, noop_reset_bad_options);
    tcase_add_test(tc, noop_reset_restarts_ended_envs);
    tcase_add_test(tc, finite_check_names_key_and_env);
    tcase_add_test(tc, terminate_on_cart_position);
    tcase_add_test(tc, random_truncation_frequency_and_seed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    if (!open_host())
        return EXIT_FAILURE;
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    crl_host_free(g_host);
    crl_config_free(g_host_cfg);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
