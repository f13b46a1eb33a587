/* Check suite: the state group of plugins/transforms (normalisation, rewards, counters, frame stacks) on classic envs. */
#include "config.h"

/* The state group is registered from this program as a built-in plugin; the
 * classic envs come from classic.so along CRL_PLUGIN_PATH. */
#define CRL_PLUGIN_BUILTIN

#include <check.h>
#include "keep-cairo.h"
#include <dlfcn.h>
#include <glib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <crl/crl.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/transform.h>

#include "state_common.h"

static int state_group_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return tf_register_state(host, err);
}
CRL_PLUGIN_DEFINE(tf_state_test, "transforms", PACKAGE_VERSION, "MIT", "the state group of the transforms plugin",
                  NULL, state_group_init, tf_state_forget_host)

#define N_ENVS 4

#define EXPECT_OK(expr, e)                                                                                          \
    do {                                                                                                            \
        int rc_ = (expr);                                                                                           \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message, crl_status_name(rc_));              \
    } while (0)

#define EXPECT_ERR(rc_expr, e, want, needle)                                                                        \
    do {                                                                                                            \
        int rc_ = (rc_expr);                                                                                        \
        ck_assert_msg(rc_ == (want), "%s gave %s, expected %s (%s)", #rc_expr, crl_status_name(rc_),               \
                      crl_status_name(want), (e).message);                                                          \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'", (e).message, (needle));     \
    } while (0)

/* ---- fixtures ---------------------------------------------------------------------------------------------- */

typedef struct fx {
    crl_config *cfg;
    crl_host *host;
    crl_env *env;
} fx;

/* A host with the state group and classic; ini may hold [env] and [transform.*] sections. */
static void fx_host(fx *f, const char *ini)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    char *text = g_strdup_printf("[plugins]\nload = classic\n%s", ini ? ini : "");
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->host = crl_host_new(f->cfg, &e);
    ck_assert_msg(f->host != NULL, "host: %s", e.message);
    EXPECT_OK(crl_host_load_builtin(f->host, crl_plugin_builtin_tf_state_test, &e), e);
    rc = crl_host_load_configured(f->host, &e);
    ck_assert_msg(rc == CRL_OK, "classic: %s (CRL_PLUGIN_PATH=%s)", e.message,
                  getenv("CRL_PLUGIN_PATH") ? getenv("CRL_PLUGIN_PATH") : "unset");
}

/* "[env] CartPole-v1 x4 (auto_reset) transforms = t" plus "[transform.t] type = TYPE" and the lines in opts. */
static char *cartpole_ini(const char *autoreset, const char *type, const char *opts)
{
    return g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = %d\nseed = 11\nauto_reset = %s\n"
                           "transforms = t\n[transform.t]\ntype = %s\n%s",
                           N_ENVS, autoreset, type, opts ? opts : "");
}

/* Open an env from cartpole_ini; on failure returns the code and fills e. */
static int fx_env_try(fx *f, const char *autoreset, const char *type, const char *opts, crl_error *e)
{
    char *ini = cartpole_ini(autoreset, type, opts);
    fx_host(f, ini);
    g_free(ini);
    f->env = crl_env_from_config(f->host, f->cfg, "env", e);
    return f->env ? CRL_OK : e->code;
}

static void fx_env(fx *f, const char *autoreset, const char *type, const char *opts)
{
    crl_error e = { 0 };
    int rc = fx_env_try(f, autoreset, type, opts, &e);
    ck_assert_msg(rc == CRL_OK, "env with %s (%s): %s", type, opts ? opts : "", e.message);
}

static void fx_close(fx *f)
{
    crl_env_free(f->env);
    crl_host_free(f->host);
    crl_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

static crl_td *do_reset(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    crl_td *r = crl_env_reset(env, td, &e);
    ck_assert_msg(r != NULL, "reset: %s", e.message);
    if (td)
        crl_td_unref(r); /* a new reference to td itself */
    return td ? td : r;
}

/* Reset only env `which` through a "_reset" mask. */
static void reset_one(crl_env *env, crl_td *td, int64_t which)
{
    crl_error e = { 0 };
    int64_t shape[2] = { N_ENVS, 1 };
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shape, &e);
    ck_assert_ptr_nonnull(m);
    crl_tensor_flat_set(m, which, 1);
    EXPECT_OK(crl_td_set(td, "_reset", m, &e), e);
    crl_tensor_unref(m);
    do_reset(env, td);
    ck_assert(!crl_td_has(td, "_reset"));
}

static void rand_step(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    EXPECT_OK(crl_env_rand_step(env, td, &e), e);
}

/* step_mdp into td itself: the root takes next's values. */
static void mdp(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    EXPECT_OK(crl_env_step_mdp_into(env, td, td, &e), e);
}

static crl_tensor *get(const crl_td *td, const char *key)
{
    crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no '%s' in the TensorDict", key);
    return t;
}

static double at(const crl_td *td, const char *key, int64_t pos)
{
    return crl_tensor_flat_get(get(td, key), pos);
}

/* A copy of the values of key (numel doubles). */
static double *values(const crl_td *td, const char *key)
{
    crl_tensor *t = get(td, key);
    int64_t n = crl_tensor_numel(t);
    double *v = g_new(double, n);
    for (int64_t i = 0; i < n; i++)
        v[i] = crl_tensor_flat_get(t, i);
    return v;
}

static crl_transform *mk(fx *f, const char *type, const char *const *kv)
{
    crl_error e = { 0 };
    crl_transform *t = crl_transform_new(f->host, type, kv, &e);
    ck_assert_msg(t != NULL, "crl_transform_new(%s): %s", type, e.message);
    return t;
}

/* A td of batch [rows] holding key = values (f32 [rows, F]). */
static crl_td *td_rows(const char *key, crl_dtype dt, int64_t rows, int64_t F, const double *v)
{
    crl_error e = { 0 };
    int64_t shape[2] = { rows, F };
    crl_td *td = crl_td_new(1, shape, &e);
    crl_tensor *t = crl_tensor_new(dt, 2, shape, &e);
    ck_assert_ptr_nonnull(td);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < rows * F; i++)
        crl_tensor_flat_set(t, i, v[i]);
    EXPECT_OK(crl_td_set(td, key, t, &e), e);
    crl_tensor_unref(t);
    return td;
}

static void apply_ok(crl_transform *t, crl_td *td)
{
    crl_error e = { 0 };
    int rc = crl_transform_apply(t, td, &e);
    ck_assert_msg(rc == CRL_OK, "apply %s: %s", crl_transform_type(t), e.message);
}

#define CLOSE(a, b, tol)                                                                                            \
    ck_assert_msg(fabs((double)(a) - (double)(b)) <= (tol) * (1 + fabs((double)(b))), "%.9g != %.9g", (double)(a),  \
                  (double)(b))

/* ---- registration and check_env_specs ------------------------------------------------------------------------ */

static const char *const all_types[] = { "CatFrames",   "ObservationNorm", "VecNorm",      "RewardScaling",
                                         "RewardClipping", "BinarizeReward", "SignTransform", "RewardSum",
                                         "StepCounter", "InitTracker",     "TrajCounter",  "TimeMaxPool" };

START_TEST(test_registered)
{
    fx f;
    fx_host(&f, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(all_types); i++) {
        const crl_component *c = crl_host_find(f.host, CRL_KIND_TRANSFORM, all_types[i]);
        ck_assert_msg(c != NULL, "%s is not registered", all_types[i]);
        ck_assert_ptr_nonnull(c->description);
        ck_assert_ptr_nonnull(c->options);
    }
    fx_close(&f);
}
END_TEST

/* Every transform on CartPole x4, with auto_reset off and next_step. */
static const struct {
    const char *type, *opts;
} spec_cases[] = {
    { "CatFrames", "N = 3\ndim = -1\nin_keys = observation\n" },
    { "CatFrames", "N = 2\ndim = 0\npadding = constant\npadding_value = -7\nin_keys = observation\nout_keys = stack\n" },
    { "ObservationNorm", "loc = 1\nscale = 2\n" },
    { "ObservationNorm", "loc = 0, 1, 2, 3\nscale = 2\nstandard_normal = true\nout_keys = obs_n\n" },
    { "VecNorm", "decay = 0.99\n" },
    { "RewardScaling", "loc = 0.5\nscale = 2\n" },
    { "RewardClipping", "clamp_min = -0.5\nclamp_max = 0.5\n" },
    { "BinarizeReward", NULL },
    { "SignTransform", NULL },
    { "SignTransform", "in_keys = observation\n" },
    { "RewardSum", NULL },
    { "StepCounter", "max_steps = 5\n" },
    { "InitTracker", NULL },
    { "TrajCounter", NULL },
    { "TimeMaxPool", "T = 3\n" },
};

START_TEST(test_check_specs)
{
    static const char *const modes[] = { "off", "next_step" };
    for (size_t m = 0; m < G_N_ELEMENTS(modes); m++) {
        fx f;
        crl_error e = { 0 };
        fx_env(&f, modes[m], spec_cases[_i].type, spec_cases[_i].opts);
        int rc = crl_env_check_specs(f.env, 40, &e);
        ck_assert_msg(rc == CRL_OK, "%s (%s), auto_reset = %s: %s", spec_cases[_i].type,
                      spec_cases[_i].opts ? spec_cases[_i].opts : "", modes[m], e.message);
        fx_close(&f);
    }
}
END_TEST

/* The transformed specs say what TorchRL's say. */
START_TEST(test_specs_shapes)
{
    fx f;
    fx_env(&f, "off", "CatFrames", "N = 3\ndim = -1\nin_keys = observation\n");
    const crl_spec *obs = crl_spec_composite_get(crl_env_observation_spec(f.env), "observation");
    ck_assert_ptr_nonnull(obs);
    ck_assert_int_eq(crl_spec_ndim(obs), 2);
    ck_assert_int_eq(crl_spec_shape(obs)[1], 12);
    fx_close(&f);

    fx_env(&f, "off", "RewardSum", NULL);
    const crl_spec *er = crl_spec_composite_get(crl_env_observation_spec(f.env), "episode_reward");
    ck_assert_ptr_nonnull(er);
    ck_assert_int_eq(crl_spec_get_kind(er), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_dtype(er), CRL_F32);
    ck_assert_int_eq(crl_spec_shape(er)[1], 1);
    fx_close(&f);

    fx_env(&f, "off", "StepCounter", "max_steps = 4\n");
    const crl_spec *sc = crl_spec_composite_get(crl_env_observation_spec(f.env), "step_count");
    ck_assert_ptr_nonnull(sc);
    ck_assert_int_eq(crl_spec_dtype(sc), CRL_I64);
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_full_done_spec(f.env), "truncated"));
    fx_close(&f);

    fx_env(&f, "off", "BinarizeReward", NULL);
    const crl_spec *br = crl_env_reward_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(br), CRL_SPEC_BINARY);
    ck_assert_int_eq(crl_spec_dtype(br), CRL_I64);
    fx_close(&f);

    fx_env(&f, "off", "RewardClipping", "clamp_min = -0.25\nclamp_max = 0.5\n");
    const crl_spec *rc = crl_env_reward_spec(f.env);
    ck_assert_int_eq(crl_spec_get_kind(rc), CRL_SPEC_BOUNDED);
    CLOSE(crl_tensor_flat_get(crl_spec_low(rc), 0), -0.25, 1e-9);
    CLOSE(crl_tensor_flat_get(crl_spec_high(rc), 0), 0.5, 1e-9);
    fx_close(&f);

    fx_env(&f, "off", "InitTracker", NULL);
    const crl_spec *ii = crl_spec_composite_get(crl_env_observation_spec(f.env), "is_init");
    ck_assert_int_eq(crl_spec_dtype(ii), CRL_BOOL);
    fx_close(&f);
}
END_TEST

/* ---- numeric formulas (standalone) ---------------------------------------------------------------------------- */

START_TEST(test_observation_norm_formula)
{
    fx f;
    fx_host(&f, NULL);
    double x[8] = { 1, -2, 3, 4.5, 0, 10, -1, 0.25 };
    /* obs * scale + loc, loc broadcast along the last dim */
    const char *kv1[] = { "loc=1, 2, 3, 4", "scale=0.5", NULL };
    crl_transform *t = mk(&f, "ObservationNorm", kv1);
    crl_td *td = td_rows("observation", CRL_F32, 2, 4, x);
    apply_ok(t, td);
    for (int i = 0; i < 8; i++)
        CLOSE(at(td, "observation", i), x[i] * 0.5 + (i % 4 + 1), 1e-6);
    crl_td_unref(td);
    crl_transform_free(t);
    /* (obs - loc) / scale into another key, f64 kept */
    const char *kv2[] = { "loc=2", "scale=4", "standard_normal=true", "out_keys=obs_n", NULL };
    t = mk(&f, "ObservationNorm", kv2);
    td = td_rows("observation", CRL_F64, 2, 4, x);
    apply_ok(t, td);
    ck_assert_int_eq(crl_tensor_dtype(get(td, "obs_n")), CRL_F64);
    for (int i = 0; i < 8; i++) {
        CLOSE(at(td, "obs_n", i), (x[i] - 2) / 4, 1e-12);
        CLOSE(at(td, "observation", i), x[i], 0);
    }
    crl_td_unref(td);
    /* the bounds of a Bounded spec go through the formula */
    crl_error e = { 0 };
    int64_t shape[1] = { 4 };
    crl_spec *comp = crl_spec_composite(0, NULL, &e);
    crl_spec *b = crl_spec_bounded(CRL_F32, 1, shape, -2, 6, &e);
    EXPECT_OK(crl_spec_composite_set(comp, "observation", b, &e), e);
    crl_spec_unref(b);
    crl_spec *out = crl_transform_observation_spec(t, comp, &e);
    ck_assert_msg(out != NULL, "%s", e.message);
    const crl_spec *on = crl_spec_composite_get(out, "obs_n");
    ck_assert_int_eq(crl_spec_get_kind(on), CRL_SPEC_BOUNDED);
    CLOSE(crl_tensor_flat_get(crl_spec_low(on), 0), -1.0, 1e-9);
    CLOSE(crl_tensor_flat_get(crl_spec_high(on), 3), 1.0, 1e-9);
    crl_spec_unref(out);
    crl_spec_unref(comp);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

START_TEST(test_reward_formulas)
{
    fx f;
    fx_host(&f, NULL);
    double r[6] = { -3, -0.5, 0, 0.25, 2, 7 };
    struct {
        const char *type;
        const char *kv[4];
        crl_dtype out;
    } cases[] = {
        { "RewardScaling", { "loc=1", "scale=3", NULL }, CRL_F32 },
        { "RewardScaling", { "loc=1", "scale=4", "standard_normal=true" }, CRL_F32 },
        { "RewardClipping", { "clamp_min=-1", "clamp_max=1", NULL }, CRL_F32 },
        { "RewardClipping", { "clamp_max=0.1", NULL }, CRL_F32 },
        { "BinarizeReward", { NULL }, CRL_I64 },
        { "SignTransform", { NULL }, CRL_F32 },
    };
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        crl_transform *t = mk(&f, cases[c].type, cases[c].kv);
        crl_td *td = td_rows("reward", CRL_F32, 6, 1, r);
        apply_ok(t, td);
        ck_assert_int_eq(crl_tensor_dtype(get(td, "reward")), cases[c].out);
        for (int i = 0; i < 6; i++) {
            double want;
            switch (c) {
            case 0: want = r[i] * 3 + 1; break;
            case 1: want = (r[i] - 1) / 4; break;
            case 2: want = fmin(fmax(r[i], -1), 1); break;
            case 3: want = fmin(r[i], 0.1); break;
            case 4: want = r[i] > 0; break;
            default: want = (r[i] > 0) - (r[i] < 0); break;
            }
            ck_assert_msg(fabs(at(td, "reward", i) - want) < 1e-6, "%s case %zu row %d: %g != %g", cases[c].type, c,
                          i, at(td, "reward", i), want);
        }
        crl_td_unref(td);
        crl_transform_free(t);
    }
    fx_close(&f);
}
END_TEST

/* TorchRL's VecNorm update, written out: sums decay then add the batch, count likewise. */
typedef struct vn_ref {
    double sum[4], ssq[4], count;
} vn_ref;

static void vn_ref_update(vn_ref *s, const double *x, int64_t rows, int64_t F, double decay, const bool *mask)
{
    int64_t used = 0;
    for (int64_t j = 0; j < F; j++) {
        s->sum[j] *= decay;
        s->ssq[j] *= decay;
    }
    for (int64_t r = 0; r < rows; r++) {
        if (mask && !mask[r])
            continue;
        used++;
        for (int64_t j = 0; j < F; j++) {
            s->sum[j] += x[r * F + j];
            s->ssq[j] += x[r * F + j] * x[r * F + j];
        }
    }
    s->count = s->count * decay + (double)used;
}

static double vn_ref_norm(const vn_ref *s, int64_t j, double x, double eps)
{
    double mean = s->sum[j] / s->count;
    double var = s->ssq[j] / s->count - mean * mean;
    double sd = sqrt(fmax(var, eps));
    return (x - mean) / fmax(sd, eps);
}

static void batch_values(double *x, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = sin((double)(i + 1) * (seed + 1) * 0.7) * (1 + seed) + 0.3 * seed;
}

START_TEST(test_vecnorm_running_stats)
{
    fx f;
    fx_host(&f, NULL);
    const char *kv[] = { "in_keys=observation", "decay=0.9", "eps=1e-4", NULL };
    crl_transform *t = mk(&f, "VecNorm", kv);
    vn_ref ref = { { 0 }, { 0 }, 0 };
    for (int b = 0; b < 5; b++) {
        double x[12];
        batch_values(x, 12, b);
        crl_td *td = td_rows("observation", CRL_F64, 3, 4, x);
        apply_ok(t, td);
        vn_ref_update(&ref, x, 3, 4, 0.9, NULL);
        for (int i = 0; i < 12; i++)
            CLOSE(at(td, "observation", i), vn_ref_norm(&ref, i % 4, x[i], 1e-4), 1e-9);
        crl_td_unref(td);
    }
    crl_transform_free(t);

    /* frozen: the statistics never move, so before any data the values pass unchanged */
    const char *kvf[] = { "in_keys=observation", "frozen=true", NULL };
    t = mk(&f, "VecNorm", kvf);
    double x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    crl_td *td = td_rows("observation", CRL_F32, 2, 4, x);
    apply_ok(t, td);
    apply_ok(t, td);
    for (int i = 0; i < 8; i++)
        CLOSE(at(td, "observation", i), x[i], 1e-6);
    crl_td_unref(td);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

/* ---- VecNorm in an env: only the reset envs feed the statistics ------------------------------------------------ */

START_TEST(test_vecnorm_env_partial_reset)
{
    fx f;
    fx_env(&f, "off", "VecNorm", "in_keys = observation\nout_keys = obs_n\ndecay = 1\n");
    crl_td *td = do_reset(f.env, NULL);
    vn_ref ref = { { 0 }, { 0 }, 0 };
    double *x = values(td, "observation");
    vn_ref_update(&ref, x, N_ENVS, 4, 1.0, NULL);
    for (int i = 0; i < 16; i++)
        CLOSE(at(td, "obs_n", i), vn_ref_norm(&ref, i % 4, x[i], 1e-4), 1e-5);
    g_free(x);
    /* a step: every env's next observation */
    rand_step(f.env, td);
    crl_td *next = crl_td_get_td(td, "next");
    x = values(next, "observation");
    vn_ref_update(&ref, x, N_ENVS, 4, 1.0, NULL);
    for (int i = 0; i < 16; i++)
        CLOSE(at(next, "obs_n", i), vn_ref_norm(&ref, i % 4, x[i], 1e-4), 1e-5);
    g_free(x);
    mdp(f.env, td);
    /* a partial reset of env 2: only its row is counted */
    reset_one(f.env, td, 2);
    x = values(td, "observation");
    bool mask[N_ENVS] = { false, false, true, false };
    vn_ref_update(&ref, x, N_ENVS, 4, 1.0, mask);
    for (int j = 0; j < 4; j++)
        CLOSE(at(td, "obs_n", 2 * 4 + j), vn_ref_norm(&ref, j, x[2 * 4 + j], 1e-4), 1e-5);
    g_free(x);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- VecNorm shared between processes ---------------------------------------------------------------------------- */

/* The child reports through a pipe, not its exit status: under valgrind a
 * child's exit status is valgrind's verdict on memory the parent still owns. */
static void wait_child(pid_t pid, int fd)
{
    char verdict = 0;
    ck_assert_int_eq(read(fd, &verdict, 1), 1);
    close(fd);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(verdict == 'y', "child failed (verdict '%c')", verdict ? verdict : '0');
}

static void child_report(int fd, char verdict)
{
    ssize_t n = write(fd, &verdict, 1);
    (void)n;
    close(fd);
}

/* The child applies batch `seed` `times` times; 'y' when every call worked. */
static char child_apply(crl_transform *t, int seed, int times)
{
    double x[12];
    batch_values(x, 12, seed);
    for (int k = 0; k < times; k++) {
        crl_error e = { 0 };
        crl_td *td = td_rows("observation", CRL_F64, 3, 4, x);
        int rc = crl_transform_apply(t, td, &e);
        crl_td_unref(td);
        if (rc != CRL_OK)
            return 'a';
    }
    return 'y';
}

/* memfd: statistics made before fork are the same memory in both processes. */
START_TEST(test_vecnorm_shared_fork)
{
    fx f;
    fx_host(&f, NULL);
    const char *kv[] = { "in_keys=observation", "decay=1", "shared=true", NULL };
    crl_transform *t = mk(&f, "VecNorm", kv);
    vn_ref ref = { { 0 }, { 0 }, 0 };
    double a[12], b[12], c[12];
    batch_values(a, 12, 1);
    batch_values(b, 12, 2);
    batch_values(c, 12, 3);
    crl_td *td = td_rows("observation", CRL_F64, 3, 4, a);
    apply_ok(t, td);
    crl_td_unref(td);
    vn_ref_update(&ref, a, 3, 4, 1, NULL);
    /* Both processes update at once (decay 1: the order does not matter, lost updates would). */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        char v = child_apply(t, 2, 200);
        crl_transform_free(t); /* unmaps; the memory stays the parent's */
        fx_close(&f);
        child_report(fds[1], v);
        _exit(0);
    }
    close(fds[1]);
    for (int k = 0; k < 200; k++) {
        td = td_rows("observation", CRL_F64, 3, 4, c);
        apply_ok(t, td);
        crl_td_unref(td);
    }
    wait_child(pid, fds[0]);
    for (int k = 0; k < 200; k++) {
        vn_ref_update(&ref, b, 3, 4, 1, NULL);
        vn_ref_update(&ref, c, 3, 4, 1, NULL);
    }
    td = td_rows("observation", CRL_F64, 3, 4, a);
    apply_ok(t, td);
    vn_ref_update(&ref, a, 3, 4, 1, NULL);
    for (int i = 0; i < 12; i++)
        CLOSE(at(td, "observation", i), vn_ref_norm(&ref, i % 4, a[i], 1e-4), 1e-9);
    crl_td_unref(td);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

/* shm_name: a transform made in another process joins the same statistics by name. */
START_TEST(test_vecnorm_shared_named)
{
    fx f;
    fx_host(&f, NULL);
    char name[64], opt[96];
    snprintf(name, sizeof name, "/crl-test-vn-%d", (int)getpid());
    snprintf(opt, sizeof opt, "shm_name=%s", name);
    const char *kv[] = { "in_keys=observation", "decay=1", "shared=true", opt, NULL };
    crl_transform *t = mk(&f, "VecNorm", kv);
    double a[12], b[12];
    batch_values(a, 12, 4);
    batch_values(b, 12, 5);
    crl_td *td = td_rows("observation", CRL_F64, 3, 4, a);
    apply_ok(t, td);
    crl_td_unref(td);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        crl_error e = { 0 };
        crl_transform *u = crl_transform_new(f.host, "VecNorm", kv, &e);
        char v = u ? child_apply(u, 5, 3) : 'n';
        crl_transform_free(u); /* a joiner: the name stays */
        crl_transform_free(t); /* made by the parent: only the parent removes the name */
        fx_close(&f);
        child_report(fds[1], v);
        _exit(0);
    }
    close(fds[1]);
    wait_child(pid, fds[0]);
    vn_ref ref = { { 0 }, { 0 }, 0 };
    vn_ref_update(&ref, a, 3, 4, 1, NULL);
    for (int k = 0; k < 3; k++)
        vn_ref_update(&ref, b, 3, 4, 1, NULL);
    td = td_rows("observation", CRL_F64, 3, 4, a);
    apply_ok(t, td);
    vn_ref_update(&ref, a, 3, 4, 1, NULL);
    for (int i = 0; i < 12; i++)
        CLOSE(at(td, "observation", i), vn_ref_norm(&ref, i % 4, a[i], 1e-4), 1e-9);
    crl_td_unref(td);
    /* A transform of another shape cannot join. */
    crl_error e = { 0 };
    crl_transform *w = crl_transform_new(f.host, "VecNorm", kv, &e);
    ck_assert_ptr_nonnull(w);
    double z[6] = { 0 };
    td = td_rows("observation", CRL_F64, 2, 3, z);
    EXPECT_ERR(crl_transform_apply(w, td, &e), e, CRL_E_SHAPE, name);
    crl_td_unref(td);
    crl_transform_free(w);
    crl_transform_free(t); /* the creator removes the name */
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s.observation", name);
    ck_assert_msg(access(path, F_OK) != 0, "%s is still there", path);
    fx_close(&f);
}
END_TEST

/* What a process writes to stderr between cap_begin and cap_end (no Check
 * calls: forked children use it too).  cap_end returns a g_malloc'd string,
 * or NULL when the capture could not be set up. */
typedef struct cap {
    int saved;
    FILE *f;
} cap;

static bool cap_begin(cap *c)
{
    fflush(stderr);
    c->f = tmpfile();
    c->saved = c->f ? dup(2) : -1;
    if (c->saved < 0 || dup2(fileno(c->f), 2) < 0) {
        if (c->f)
            fclose(c->f);
        c->f = NULL;
        return false;
    }
    return true;
}

static char *cap_end(cap *c)
{
    if (!c->f)
        return NULL;
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    char *text = NULL;
    long n = ftell(c->f);
    if (n >= 0 && fseek(c->f, 0, SEEK_SET) == 0 && (text = g_malloc((size_t)n + 1)))
        text[fread(text, 1, (size_t)n, c->f)] = '\0';
    fclose(c->f);
    c->f = NULL;
    return text;
}

/* Apply one batch of 3 envs x 4 values to t, capturing stderr into *log. */
static void apply_captured(crl_transform *t, crl_td *td, char **log)
{
    cap c;
    ck_assert(cap_begin(&c));
    crl_error e = { 0 };
    int rc = crl_transform_apply(t, td, &e);
    *log = cap_end(&c);
    ck_assert_ptr_nonnull(*log);
    ck_assert_msg(rc == CRL_OK, "apply: %s", e.message);
}

/* shm_name: a creator killed with SIGKILL leaves its segment behind (nothing
 * runs at kill -9), but no process holds it any more: the next user starts
 * fresh statistics and says so, and removes the name when it is done; while
 * the creator lives, its statistics are joined. */
START_TEST(test_vecnorm_shared_killed_creator)
{
    fx f;
    fx_host(&f, NULL);
    char name[64], opt[96], path[128], seg[128];
    snprintf(name, sizeof name, "/crl-test-vnk-%d", (int)getpid());
    snprintf(opt, sizeof opt, "shm_name=%s", name);
    snprintf(seg, sizeof seg, "%s.observation", name);
    snprintf(path, sizeof path, "/dev/shm%s", seg);
    const char *kv[] = { "in_keys=observation", "decay=1", "shared=true", opt, NULL };
    double a[12], b[12];
    batch_values(a, 12, 6);
    batch_values(b, 12, 7);
    int ready[2], hold[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]);
        crl_error e = { 0 };
        crl_transform *u = crl_transform_new(f.host, "VecNorm", kv, &e);
        char v = u ? child_apply(u, 6, 1) : 'n';
        child_report(ready[1], v);
        char c;
        while (read(hold[0], &c, 1) != 0) /* until killed */
            ;
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char verdict = 0;
    ck_assert_int_eq(read(ready[0], &verdict, 1), 1);
    close(ready[0]);
    ck_assert_msg(verdict == 'y', "creator failed (verdict '%c')", verdict);

    /* The creator is alive: its statistics are joined, nothing is said. */
    crl_transform *t = mk(&f, "VecNorm", kv);
    crl_td *td = td_rows("observation", CRL_F64, 3, 4, b);
    char *log;
    apply_captured(t, td, &log);
    ck_assert_msg(strstr(log, "fresh") == NULL, "joining a live creator warned: %s", log);
    g_free(log);
    vn_ref ref = { { 0 }, { 0 }, 0 };
    vn_ref_update(&ref, a, 3, 4, 1, NULL);
    vn_ref_update(&ref, b, 3, 4, 1, NULL);
    for (int i = 0; i < 12; i++)
        CLOSE(at(td, "observation", i), vn_ref_norm(&ref, i % 4, b[i], 1e-4), 1e-9);
    crl_td_unref(td);
    crl_transform_free(t); /* the creator still uses it: the name stays */
    ck_assert_msg(access(path, F_OK) == 0, "%s was removed while its creator lives", path);

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(hold[1]);
    ck_assert_msg(access(path, F_OK) == 0, "%s: nothing should have removed it at kill -9", path);

    /* The next user starts fresh statistics, saying so with the segment's name. */
    t = mk(&f, "VecNorm", kv);
    td = td_rows("observation", CRL_F64, 3, 4, b);
    apply_captured(t, td, &log);
    char pidtxt[64];
    snprintf(pidtxt, sizeof pidtxt, "of process %d (6 samples)", (int)pid);
    ck_assert_msg(strstr(log, seg) && strstr(log, "starting fresh statistics") && strstr(log, pidtxt) &&
                      strstr(log, "no running process uses"),
                  "no warning naming the segment: '%s'", log);
    g_free(log);
    vn_ref fresh = { { 0 }, { 0 }, 0 };
    vn_ref_update(&fresh, b, 3, 4, 1, NULL);
    for (int i = 0; i < 12; i++)
        CLOSE(at(td, "observation", i), vn_ref_norm(&fresh, i % 4, b[i], 1e-4), 1e-9);
    crl_td_unref(td);
    /* A second user joins the fresh statistics without a word. */
    crl_transform *u = mk(&f, "VecNorm", kv);
    td = td_rows("observation", CRL_F64, 3, 4, a);
    apply_captured(u, td, &log);
    ck_assert_msg(strstr(log, "fresh") == NULL, "%s", log);
    g_free(log);
    vn_ref_update(&fresh, a, 3, 4, 1, NULL);
    for (int i = 0; i < 12; i++)
        CLOSE(at(td, "observation", i), vn_ref_norm(&fresh, i % 4, a[i], 1e-4), 1e-9);
    crl_td_unref(td);
    crl_transform_free(t);
    ck_assert_msg(access(path, F_OK) == 0, "%s removed while a user remains", path);
    crl_transform_free(u); /* the last user removes the name */
    ck_assert_msg(access(path, F_OK) != 0, "%s is still there after its last user", path);
    fx_close(&f);
}
END_TEST

/* shm_name: processes started together end up in one segment (one starts
 * it, the others join), and the last to leave removes the name. */
#define N_RACERS 4
START_TEST(test_vecnorm_shared_start_together)
{
    fx f;
    fx_host(&f, NULL);
    char name[64], opt[96], path[128];
    snprintf(name, sizeof name, "/crl-test-vnr-%d", (int)getpid());
    snprintf(opt, sizeof opt, "shm_name=%s", name);
    snprintf(path, sizeof path, "/dev/shm%s.observation", name);
    const char *kv[] = { "in_keys=observation", "decay=1", "shared=true", opt, NULL };
    int go[2], done[2], hold[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(done), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t pids[N_RACERS];
    for (int k = 0; k < N_RACERS; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0) {
            close(go[1]);
            close(done[0]);
            close(hold[1]);
            char c;
            while (read(go[0], &c, 1) != 0) /* all start when go closes */
                ;
            cap cp;
            bool captured = cap_begin(&cp);
            crl_error e = { 0 };
            crl_transform *u = crl_transform_new(f.host, "VecNorm", kv, &e);
            char v = u ? child_apply(u, 20 + k, 1) : 'n';
            char *log = cap_end(&cp);
            if (!captured || !log)
                v = 'c';
            else if (strstr(log, "fresh"))
                v = 'w'; /* someone thought the segment abandoned */
            g_free(log);
            child_report(done[1], v);
            while (read(hold[0], &c, 1) != 0)
                ;
            crl_transform_free(u); /* a normal exit */
            fx_close(&f);
            _exit(0);
        }
    }
    close(go[0]);
    close(done[1]);
    close(hold[0]);
    close(go[1]);
    for (int k = 0; k < N_RACERS; k++) {
        char v = 0;
        ck_assert_int_eq(read(done[0], &v, 1), 1);
        ck_assert_msg(v == 'y', "racer failed (verdict '%c')", v);
    }
    close(done[0]);
    /* Every racer's batch is in the one set of statistics. */
    crl_transform *t = mk(&f, "VecNorm", kv);
    double x[12], a[12];
    vn_ref ref = { { 0 }, { 0 }, 0 };
    for (int k = 0; k < N_RACERS; k++) {
        batch_values(x, 12, 20 + k);
        vn_ref_update(&ref, x, 3, 4, 1, NULL);
    }
    batch_values(a, 12, 30);
    vn_ref_update(&ref, a, 3, 4, 1, NULL);
    crl_td *td = td_rows("observation", CRL_F64, 3, 4, a);
    char *log;
    apply_captured(t, td, &log);
    ck_assert_msg(strstr(log, "fresh") == NULL, "%s", log);
    g_free(log);
    for (int i = 0; i < 12; i++)
        CLOSE(at(td, "observation", i), vn_ref_norm(&ref, i % 4, a[i], 1e-4), 1e-9);
    crl_td_unref(td);
    close(hold[1]);
    for (int k = 0; k < N_RACERS; k++) {
        int status = 0;
        ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
    }
    ck_assert_msg(access(path, F_OK) == 0, "%s removed while this process uses it", path);
    crl_transform_free(t);
    ck_assert_msg(access(path, F_OK) != 0, "%s is still there after its last user", path);
    fx_close(&f);
}
END_TEST

/* shm_name naming a segment that is not VecNorm's: refused, left alone. */
START_TEST(test_vecnorm_shared_foreign_segment)
{
    fx f;
    fx_host(&f, NULL);
    char name[64], opt[96], seg[128];
    snprintf(name, sizeof name, "/crl-test-vnf-%d", (int)getpid());
    snprintf(opt, sizeof opt, "shm_name=%s", name);
    snprintf(seg, sizeof seg, "%s.observation", name);
    int fd = shm_open(seg, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    char junk[256];
    memset(junk, 'j', sizeof junk);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    const char *kv[] = { "in_keys=observation", "shared=true", opt, NULL };
    crl_transform *t = mk(&f, "VecNorm", kv);
    double a[12];
    batch_values(a, 12, 1);
    crl_td *td = td_rows("observation", CRL_F64, 3, 4, a);
    crl_error e = { 0 };
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_CORRUPT, "does not hold VecNorm statistics");
    ck_assert_msg(strstr(e.message, seg), "%s", e.message);
    crl_td_unref(td);
    crl_transform_free(t);
    char back[256];
    ck_assert_int_eq(pread(fd, back, sizeof back, 0), (ssize_t)sizeof back);
    ck_assert(memcmp(back, junk, sizeof junk) == 0);
    close(fd);
    ck_assert_int_eq(shm_unlink(seg), 0);
    fx_close(&f);
}
END_TEST

/* ---- ObservationNorm init_stats -------------------------------------------------------------------------------- */

START_TEST(test_observation_norm_init_stats)
{
    /* The rollout at bind: loc/scale give the rollout's own data mean 0 and std 1, which the same rollout
     * replayed on an identical env without the transform shows. */
    fx f, g;
    fx_env(&f, "off", "ObservationNorm", "init_stats = 25\nstandard_normal = true\nout_keys = obs_n\n");
    fx_env(&g, "off", "RewardSum", NULL);
    crl_error e = { 0 };
    /* Same seed chain: the stats env's rollout started from the default seed; replay it on g. */
    crl_td *td = do_reset(g.env, NULL);
    double n = 0, mean[4] = { 0 }, m2[4] = { 0 };
    for (int it = 0; it < 25; it++) {
        double *x = values(td, "observation");
        for (int r = 0; r < N_ENVS; r++) {
            n++;
            for (int j = 0; j < 4; j++) {
                double d = x[r * 4 + j] - mean[j];
                mean[j] += d / n;
                m2[j] += d * (x[r * 4 + j] - mean[j]);
            }
        }
        g_free(x);
        if (it == 24)
            break;
        EXPECT_OK(crl_env_rand_step(g.env, td, &e), e);
        crl_td *nx = crl_td_clone(crl_td_get_td(td, "next"), &e);
        crl_td_unref(td);
        td = nx;
        crl_tensor *done = get(td, "done");
        bool any = false;
        for (int r = 0; r < N_ENVS; r++)
            any |= crl_tensor_flat_get(done, r) != 0;
        if (any) {
            int64_t shape[2] = { N_ENVS, 1 };
            crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shape, &e);
            crl_tensor_copy(m, done, &e);
            EXPECT_OK(crl_td_set(td, "_reset", m, &e), e);
            crl_tensor_unref(m);
            do_reset(g.env, td);
        }
    }
    crl_td_unref(td);
    /* Now both envs from the same seed: obs_n == (obs - mean) / std */
    crl_env_set_seed(f.env, 99);
    crl_env_set_seed(g.env, 99);
    crl_td *tf = do_reset(f.env, NULL), *tg = do_reset(g.env, NULL);
    for (int i = 0; i < 16; i++) {
        CLOSE(at(tf, "observation", i), at(tg, "observation", i), 0);
        double sd = fmax(sqrt(m2[i % 4] / (n - 1)), 1e-6);
        CLOSE(at(tf, "obs_n", i), (at(tg, "observation", i) - mean[i % 4]) / sd, 1e-4);
    }
    crl_td_unref(tf);
    crl_td_unref(tg);
    fx_close(&f);
    fx_close(&g);
}
END_TEST

START_TEST(test_observation_norm_init_stats_specs)
{
    static const char *const modes[] = { "off", "next_step" };
    for (size_t m = 0; m < G_N_ELEMENTS(modes); m++) {
        fx f;
        crl_error e = { 0 };
        fx_env(&f, modes[m], "ObservationNorm", "init_stats = 6\nstandard_normal = false\n");
        EXPECT_OK(crl_env_check_specs(f.env, 40, &e), e);
        fx_close(&f);
    }
    /* one env and init_stats = 1: a single sample has no std */
    fx f;
    crl_error e = { 0 };
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\ntransforms = t\n[transform.t]\n"
                                "type = ObservationNorm\ninit_stats = 1\n");
    fx_host(&f, ini);
    g_free(ini);
    f.env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_ptr_null(f.env);
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "init_stats") != NULL, "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- counters ---------------------------------------------------------------------------------------------------- */

START_TEST(test_reward_sum)
{
    fx f;
    fx_env(&f, "off", "RewardSum", NULL);
    crl_td *td = do_reset(f.env, NULL);
    double want[N_ENVS] = { 0 };
    for (int i = 0; i < N_ENVS; i++)
        CLOSE(at(td, "episode_reward", i), 0, 0);
    for (int s = 0; s < 6; s++) {
        rand_step(f.env, td);
        crl_td *next = crl_td_get_td(td, "next");
        for (int i = 0; i < N_ENVS; i++) {
            want[i] += at(next, "reward", i);
            CLOSE(at(next, "episode_reward", i), want[i], 1e-6);
        }
        mdp(f.env, td);
        if (s == 3) {
            /* partial reset: env 1 restarts, the others keep their sums */
            reset_one(f.env, td, 1);
            want[1] = 0;
            for (int i = 0; i < N_ENVS; i++)
                CLOSE(at(td, "episode_reward", i), want[i], 1e-6);
        }
    }
    ck_assert(want[0] == 6 && want[1] == 2); /* CartPole: 1 per step */
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_step_counter)
{
    fx f;
    fx_env(&f, "off", "StepCounter", "max_steps = 3\n");
    crl_td *td = do_reset(f.env, NULL);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_int_eq((int)at(td, "step_count", i), 0);
    ck_assert_int_eq(crl_tensor_dtype(get(td, "step_count")), CRL_I64);
    for (int s = 1; s <= 2; s++) {
        rand_step(f.env, td);
        crl_td *next = crl_td_get_td(td, "next");
        for (int i = 0; i < N_ENVS; i++) {
            ck_assert_int_eq((int)at(next, "step_count", i), s);
            ck_assert(at(next, "truncated", i) == 0 && at(next, "done", i) == 0);
        }
        mdp(f.env, td);
    }
    /* partial reset of env 3 */
    reset_one(f.env, td, 3);
    int64_t want[N_ENVS] = { 2, 2, 2, 0 };
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_int_eq((int64_t)at(td, "step_count", i), want[i]);
    rand_step(f.env, td);
    crl_td *next = crl_td_get_td(td, "next");
    for (int i = 0; i < N_ENVS; i++) {
        ck_assert_int_eq((int64_t)at(next, "step_count", i), want[i] + 1);
        bool trunc = want[i] + 1 >= 3;
        ck_assert_msg((at(next, "truncated", i) != 0) == trunc, "env %d truncated", i);
        ck_assert_msg((at(next, "done", i) != 0) == trunc, "env %d done", i);
    }
    /* with auto_reset off a truncated env must be reset before it steps again */
    mdp(f.env, td);
    crl_error e = { 0 };
    ck_assert_int_ne(crl_env_rand_step(f.env, td, &e), CRL_OK);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_init_tracker_traj_counter)
{
    fx f;
    fx_env(&f, "off", "InitTracker", NULL);
    crl_td *td = do_reset(f.env, NULL);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert(at(td, "is_init", i) != 0);
    rand_step(f.env, td);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert(at(crl_td_get_td(td, "next"), "is_init", i) == 0);
    mdp(f.env, td);
    reset_one(f.env, td, 3);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_msg((at(td, "is_init", i) != 0) == (i == 3), "env %d", i);
    crl_td_unref(td);
    fx_close(&f);

    fx_env(&f, "off", "TrajCounter", NULL);
    td = do_reset(f.env, NULL);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_int_eq((int64_t)at(td, "traj_count", i), i);
    rand_step(f.env, td);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_int_eq((int64_t)at(crl_td_get_td(td, "next"), "traj_count", i), i);
    mdp(f.env, td);
    reset_one(f.env, td, 2);
    int64_t want[N_ENVS] = { 0, 1, 4, 3 };
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_int_eq((int64_t)at(td, "traj_count", i), want[i]);
    reset_one(f.env, td, 0);
    ck_assert_int_eq((int64_t)at(td, "traj_count", 0), 5);
    do_reset(f.env, td);
    for (int i = 0; i < N_ENVS; i++)
        ck_assert_int_eq((int64_t)at(td, "traj_count", i), 6 + i);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- frame stacks ------------------------------------------------------------------------------------------------ */

/* stack[e] (N frames of 4 along the last dim) against the frames expected, oldest first. */
static void check_stack(const crl_td *td, const char *key, int64_t e, int N, double *const *frames)
{
    for (int n = 0; n < N; n++)
        for (int j = 0; j < 4; j++)
            ck_assert_msg(at(td, key, e * N * 4 + n * 4 + j) == frames[n][e * 4 + j],
                          "env %lld slot %d elem %d: %g != %g", (long long)e, n, j, at(td, key, e * N * 4 + n * 4 + j),
                          frames[n][e * 4 + j]);
}

START_TEST(test_cat_frames)
{
    fx f;
    fx_env(&f, "off", "CatFrames", "N = 3\ndim = -1\nin_keys = observation\nout_keys = stack\n");
    crl_td *td = do_reset(f.env, NULL);
    double *o[6] = { values(td, "observation") };
    ck_assert_int_eq(crl_tensor_shape(get(td, "stack"))[1], 12);
    for (int e = 0; e < N_ENVS; e++)
        check_stack(td, "stack", e, 3, (double *const[]){ o[0], o[0], o[0] });
    for (int s = 1; s <= 3; s++) {
        rand_step(f.env, td);
        crl_td *next = crl_td_get_td(td, "next");
        o[s] = values(next, "observation");
        for (int e = 0; e < N_ENVS; e++) {
            double *want[3] = { o[s >= 2 ? s - 2 : 0], o[s - 1], o[s] };
            check_stack(next, "stack", e, 3, want);
        }
        mdp(f.env, td);
    }
    /* partial reset of env 1: three copies of its reset frame; env 0 keeps its stack */
    reset_one(f.env, td, 1);
    o[4] = values(td, "observation");
    check_stack(td, "stack", 1, 3, (double *const[]){ o[4], o[4], o[4] });
    check_stack(td, "stack", 0, 3, (double *const[]){ o[1], o[2], o[3] });
    rand_step(f.env, td);
    o[5] = values(crl_td_get_td(td, "next"), "observation");
    check_stack(crl_td_get_td(td, "next"), "stack", 1, 3, (double *const[]){ o[4], o[4], o[5] });
    check_stack(crl_td_get_td(td, "next"), "stack", 2, 3, (double *const[]){ o[2], o[3], o[5] });
    for (int i = 0; i < 6; i++)
        g_free(o[i]);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_cat_frames_constant_and_dims)
{
    fx f;
    /* padding = constant: older slots hold padding_value after a reset; dim = 0 counts the per-env dims */
    fx_env(&f, "off", "CatFrames", "N = 3\ndim = 0\nin_keys = observation\npadding = constant\npadding_value = -5\n");
    crl_td *td = do_reset(f.env, NULL);
    crl_tensor *st = get(td, "observation");
    ck_assert_int_eq(crl_tensor_shape(st)[1], 12);
    crl_env *env = f.env;
    crl_error e = { 0 };
    for (int i = 0; i < N_ENVS; i++)
        for (int j = 0; j < 8; j++)
            ck_assert(at(td, "observation", i * 12 + j) == -5);
    /* the spec's low takes in the padding */
    const crl_spec *os = crl_spec_composite_get(crl_env_observation_spec(env), "observation");
    ck_assert(crl_tensor_flat_get(crl_spec_low(os), 0) <= -5);
    EXPECT_OK(crl_env_check_specs(env, 10, &e), e);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(test_time_max_pool)
{
    fx f;
    fx_env(&f, "off", "TimeMaxPool", "T = 2\nout_keys = pooled\n");
    crl_td *td = do_reset(f.env, NULL);
    double *prev = values(td, "observation");
    for (int i = 0; i < 16; i++)
        ck_assert(at(td, "pooled", i) == prev[i]);
    for (int s = 0; s < 3; s++) {
        rand_step(f.env, td);
        crl_td *next = crl_td_get_td(td, "next");
        double *cur = values(next, "observation");
        for (int i = 0; i < 16; i++)
            ck_assert(at(next, "pooled", i) == fmax(prev[i], cur[i]));
        g_free(prev);
        prev = cur;
        mdp(f.env, td);
    }
    reset_one(f.env, td, 0);
    double *r = values(td, "observation");
    for (int j = 0; j < 4; j++)
        ck_assert(at(td, "pooled", j) == r[j]);
    rand_step(f.env, td);
    crl_td *next = crl_td_get_td(td, "next");
    double *cur = values(next, "observation");
    for (int j = 0; j < 4; j++)
        ck_assert(at(next, "pooled", j) == fmax(r[j], cur[j]));
    for (int i = 4; i < 16; i++)
        ck_assert(at(next, "pooled", i) == fmax(prev[i], cur[i]));
    g_free(r);
    g_free(cur);
    g_free(prev);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- next_step auto-reset: state restarts for the envs the step reset ---------------------------------------------- */

START_TEST(test_next_step_autoreset)
{
    fx f;
    crl_error e = { 0 };
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = %d\nauto_reset = next_step\n"
                                "transforms = sc, rs, it, tc, cf\n"
                                "[transform.sc]\ntype = StepCounter\nmax_steps = 2\n"
                                "[transform.rs]\ntype = RewardSum\n"
                                "[transform.it]\ntype = InitTracker\n"
                                "[transform.tc]\ntype = TrajCounter\n"
                                "[transform.cf]\ntype = CatFrames\nN = 2\ndim = -1\nin_keys = observation\n"
                                "out_keys = stack\n",
                                N_ENVS);
    fx_host(&f, ini);
    g_free(ini);
    f.env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(f.env != NULL, "%s", e.message);
    crl_td *td = do_reset(f.env, NULL);
    rand_step(f.env, td);
    mdp(f.env, td);
    rand_step(f.env, td); /* step 2: StepCounter truncates every env */
    crl_td *next = crl_td_get_td(td, "next");
    for (int i = 0; i < N_ENVS; i++) {
        ck_assert(at(next, "truncated", i) != 0 && at(next, "done", i) != 0);
        CLOSE(at(next, "episode_reward", i), 2, 0);
        ck_assert(at(next, "is_init", i) == 0);
    }
    mdp(f.env, td);
    rand_step(f.env, td); /* step 3: the parent resets them */
    next = crl_td_get_td(td, "next");
    for (int i = 0; i < N_ENVS; i++) {
        ck_assert_int_eq((int64_t)at(next, "step_count", i), 0);
        CLOSE(at(next, "episode_reward", i), 0, 0);
        ck_assert(at(next, "is_init", i) != 0);
        ck_assert(at(next, "done", i) == 0);
        ck_assert_int_eq((int64_t)at(next, "traj_count", i), N_ENVS + i);
        for (int j = 0; j < 4; j++) /* both slots hold the reset frame */
            ck_assert(at(next, "stack", i * 8 + j) == at(next, "observation", i * 4 + j) &&
                      at(next, "stack", i * 8 + 4 + j) == at(next, "observation", i * 4 + j));
    }
    mdp(f.env, td);
    rand_step(f.env, td);
    next = crl_td_get_td(td, "next");
    for (int i = 0; i < N_ENVS; i++) {
        ck_assert_int_eq((int64_t)at(next, "step_count", i), 1);
        CLOSE(at(next, "episode_reward", i), 1, 0);
        ck_assert(at(next, "is_init", i) == 0);
        ck_assert_int_eq((int64_t)at(next, "traj_count", i), N_ENVS + i);
    }
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- bad input ----------------------------------------------------------------------------------------------------- */

START_TEST(test_bad_options)
{
    fx f;
    fx_host(&f, NULL);
    static const struct {
        const char *type;
        const char *kv[4];
        int code;
        const char *needle;
    } cases[] = {
        { "CatFrames", { "N=0", NULL }, CRL_E_CONFIG, "N" },
        { "CatFrames", { "N=2", "padding=mirror", NULL }, CRL_E_CONFIG, "padding" },
        { "CatFrames", { NULL }, CRL_E_CONFIG, "N" },
        { "RewardClipping", { "clamp_min=2", "clamp_max=1", NULL }, CRL_E_CONFIG, "clamp_min" },
        { "RewardScaling", { "loc=0", "scale=0", NULL }, CRL_E_CONFIG, "scale" },
        { "RewardScaling", { "loc=0", NULL }, CRL_E_CONFIG, "scale" },
        { "ObservationNorm", { "scale=0", "standard_normal=true", NULL }, CRL_E_CONFIG, "scale" },
        { "ObservationNorm", { "init_stats=-1", NULL }, CRL_E_CONFIG, "init_stats" },
        { "VecNorm", { "decay=2", NULL }, CRL_E_CONFIG, "decay" },
        { "VecNorm", { "eps=0", NULL }, CRL_E_CONFIG, "eps" },
        { "VecNorm", { "shm_name=/x", NULL }, CRL_E_CONFIG, "shm_name" },
        { "VecNorm", { "shared=true", "shm_name=no-slash", NULL }, CRL_E_CONFIG, "shm_name" },
        { "StepCounter", { "max_steps=0", NULL }, CRL_E_CONFIG, "max_steps" },
        { "TimeMaxPool", { "T=0", NULL }, CRL_E_CONFIG, "T" },
        { "RewardSum", { "out_keys=reward", NULL }, CRL_E_CONFIG, "out_keys" },
        { "RewardSum", { "in_keys=a, b", "out_keys=c", NULL }, CRL_E_CONFIG, "out_keys" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        crl_error e = { 0 };
        crl_transform *t = crl_transform_new(f.host, cases[i].type, cases[i].kv, &e);
        ck_assert_msg(t == NULL, "case %zu (%s) was accepted", i, cases[i].type);
        ck_assert_msg(e.code == cases[i].code, "case %zu (%s): %s: %s", i, cases[i].type, crl_status_name(e.code),
                      e.message);
        ck_assert_msg(strstr(e.message, cases[i].needle) != NULL, "case %zu: '%s' lacks '%s'", i, e.message,
                      cases[i].needle);
    }
    fx_close(&f);
}
END_TEST

START_TEST(test_bad_keys_in_env)
{
    fx f;
    crl_error e = { 0 };
    /* CatFrames' TorchRL default key is "pixels": CartPole has none */
    EXPECT_ERR(fx_env_try(&f, "off", "CatFrames", "N = 2\n", &e), e, CRL_E_NOT_FOUND, "pixels");
    ck_assert_msg(strstr(e.message, "observation") != NULL, "no available keys in '%s'", e.message);
    fx_close(&f);
    memset(&e, 0, sizeof e);
    EXPECT_ERR(fx_env_try(&f, "off", "VecNorm", "in_keys = done\n", &e), e, CRL_E_DTYPE, "done");
    fx_close(&f);
    memset(&e, 0, sizeof e);
    EXPECT_ERR(fx_env_try(&f, "off", "RewardSum", "in_keys = bonus\n", &e), e, CRL_E_NOT_FOUND, "bonus");
    ck_assert_msg(strstr(e.message, "reward") != NULL, "no available keys in '%s'", e.message);
    fx_close(&f);
    memset(&e, 0, sizeof e);
    EXPECT_ERR(fx_env_try(&f, "off", "CatFrames", "N = 2\ndim = -3\nin_keys = observation\n", &e), e, CRL_E_SHAPE,
               "dim");
    fx_close(&f);
    memset(&e, 0, sizeof e);
    EXPECT_ERR(fx_env_try(&f, "off", "ObservationNorm", "loc = 1, 2, 3\n", &e), e, CRL_E_SHAPE, "loc");
    fx_close(&f);
    memset(&e, 0, sizeof e);
    EXPECT_ERR(fx_env_try(&f, "off", "SignTransform", "in_keys = terminated\n", &e), e, CRL_E_DTYPE, "terminated");
    fx_close(&f);
    memset(&e, 0, sizeof e);
    EXPECT_ERR(fx_env_try(&f, "off", "BinarizeReward", "in_keys = observation\n", &e), e, CRL_E_SHAPE, "last dim");
    fx_close(&f);
}
END_TEST

START_TEST(test_bad_specs_standalone)
{
    fx f;
    fx_host(&f, NULL);
    crl_error e = { 0 };
    int64_t shape[1] = { 3 };
    crl_spec *comp = crl_spec_composite(0, NULL, &e);
    crl_spec *nest = crl_spec_composite(0, NULL, &e);
    crl_spec *leaf = crl_spec_unbounded(CRL_F32, 1, shape, &e);
    crl_spec *flag = crl_spec_categorical(2, CRL_BOOL, 1, shape, &e);
    EXPECT_OK(crl_spec_composite_set(nest, "a", leaf, &e), e);
    EXPECT_OK(crl_spec_composite_set(comp, "nest", nest, &e), e);
    EXPECT_OK(crl_spec_composite_set(comp, "flag", flag, &e), e);
    crl_spec_unref(leaf);
    crl_spec_unref(nest);
    crl_spec_unref(flag);
    /* CatFrames on a key that is a nested Composite, not a tensor */
    const char *kv1[] = { "N=2", "in_keys=nest", NULL };
    crl_transform *t = mk(&f, "CatFrames", kv1);
    ck_assert_ptr_null(crl_transform_observation_spec(t, comp, &e));
    ck_assert_int_eq(e.code, CRL_E_DTYPE);
    ck_assert_msg(strstr(e.message, "nest") && strstr(e.message, "Composite"), "%s", e.message);
    crl_transform_free(t);
    /* VecNorm on bool */
    memset(&e, 0, sizeof e);
    const char *kv2[] = { "in_keys=flag", NULL };
    t = mk(&f, "VecNorm", kv2);
    ck_assert_ptr_null(crl_transform_observation_spec(t, comp, &e));
    ck_assert_int_eq(e.code, CRL_E_DTYPE);
    ck_assert_msg(strstr(e.message, "flag") && strstr(e.message, "bool"), "%s", e.message);
    /* ... and on bool data */
    memset(&e, 0, sizeof e);
    double v[3] = { 1, 0, 1 };
    crl_td *td = td_rows("flag", CRL_BOOL, 1, 3, v);
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_DTYPE, "flag");
    crl_transform_free(t);
    /* a missing key names the keys present */
    memset(&e, 0, sizeof e);
    const char *kv3[] = { "loc=1", NULL };
    t = mk(&f, "ObservationNorm", kv3);
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_NOT_FOUND, "observation");
    ck_assert_msg(strstr(e.message, "flag") != NULL, "'%s' does not list the keys present", e.message);
    crl_transform_free(t);
    memset(&e, 0, sizeof e);
    const char *kv4[] = { NULL };
    t = mk(&f, "VecNorm", kv4);
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_NOT_FOUND, "observation");
    ck_assert_msg(strstr(e.message, "flag") != NULL, "'%s' does not list the keys present", e.message);
    crl_transform_free(t);
    memset(&e, 0, sizeof e);
    t = mk(&f, "SignTransform", kv4);
    const char *kv5[] = { "in_keys=flag", NULL };
    crl_transform_free(t);
    t = mk(&f, "SignTransform", kv5);
    EXPECT_ERR(crl_transform_apply(t, td, &e), e, CRL_E_DTYPE, "flag");
    crl_transform_free(t);
    crl_td_unref(td);
    crl_spec_unref(comp);
    fx_close(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("transforms_state");
    TCase *tc = tcase_create("state");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_registered);
    tcase_add_loop_test(tc, test_check_specs, 0, (int)G_N_ELEMENTS(spec_cases));
    tcase_add_test(tc, test_specs_shapes);
    tcase_add_test(tc, test_observation_norm_formula);
    tcase_add_test(tc, test_reward_formulas);
    tcase_add_test(tc, test_vecnorm_running_stats);
    tcase_add_test(tc, test_vecnorm_env_partial_reset);
    tcase_add_test(tc, test_vecnorm_shared_fork);
    tcase_add_test(tc, test_vecnorm_shared_named);
    tcase_add_test(tc, test_vecnorm_shared_killed_creator);
    tcase_add_test(tc, test_vecnorm_shared_start_together);
    tcase_add_test(tc, test_vecnorm_shared_foreign_segment);
    tcase_add_test(tc, test_reward_sum);
    tcase_add_test(tc, test_step_counter);
    tcase_add_test(tc, test_init_tracker_traj_counter);
    tcase_add_test(tc, test_cat_frames);
    tcase_add_test(tc, test_cat_frames_constant_and_dims);
    tcase_add_test(tc, test_time_max_pool);
    tcase_add_test(tc, test_next_step_autoreset);
    tcase_add_test(tc, test_bad_options);
    tcase_add_test(tc, test_bad_keys_in_env);
    tcase_add_test(tc, test_bad_specs_standalone);
    suite_add_tcase(s, tc);
    /* init_stats rolls the parent out from bind (crl_transform_ctx_parent_*). */
    TCase *ti = tcase_create("init_stats");
    tcase_set_timeout(ti, 60);
    tcase_add_test(ti, test_observation_norm_init_stats);
    tcase_add_test(ti, test_observation_norm_init_stats_specs);
    suite_add_tcase(s, ti);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
