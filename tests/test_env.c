/* Check suite: the env host (crl_env) over the countenv and badspec fixture backends. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/env.h>
#include <crl/transform.h>
#include <crl/host.h>

/* The env's counters of cached and general steps (step_fast, ...). */
#include "env-private.h"

/* ---- allocation counting: every heap call libcrl makes on the steady-state path ---- */

#include "alloc-count.h"
#include "cli-schema.h"

/* ---- fixtures ---------------------------------------------------------------- */

typedef struct fx {
    crl_config *cfg;
    crl_host *host;
    crl_env *env;
} fx;

/* Load countenv and badspec and build [env] from env_lines ("key = value"
 * lines).  Returns the env, or NULL with err set.  These suites test the
 * host's state handling, so return_state is on unless env_lines sets it
 * (return_state_off tests the default). */
static crl_env *fx_open(fx *f, const char *env_lines, crl_error *err)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    char *text = g_strdup_printf("[plugins]\nload = countenv, badspec\n[env]\n%s\n%s", env_lines,
                                 strstr(env_lines, "return_state") ? "" : "return_state = true\n");
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->host = crl_host_new(f->cfg, &e);
    ck_assert_ptr_nonnull(f->host);
    rc = crl_host_load_configured(f->host, &e);
    ck_assert_msg(rc == CRL_OK, "loading the fixtures: %s (CRL_PLUGIN_PATH=%s)", e.message,
                  getenv("CRL_PLUGIN_PATH") ? getenv("CRL_PLUGIN_PATH") : "unset");
    f->env = crl_env_from_config(f->host, f->cfg, "env", err);
    return f->env;
}

static crl_env *fx_env(fx *f, const char *env_lines)
{
    crl_error e = { 0 };
    crl_env *env = fx_open(f, env_lines, &e);
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

/* Leaf keys joined with ",". */
static char *keys_of(const crl_td *td)
{
    char **keys = crl_td_leaf_keys(td, NULL);
    ck_assert_ptr_nonnull(keys);
    char *s = g_strjoinv(",", keys);
    crl_free(keys);
    return s;
}

#define assert_keys(td, want)                                                      \
    do {                                                                           \
        char *got_ = keys_of(td);                                                  \
        ck_assert_msg(strcmp(got_, want) == 0, "keys: got '%s', want '%s'", got_, \
                      want);                                                       \
        g_free(got_);                                                              \
    } while (0)

#define assert_ok(expr, e)                                                      \
    do {                                                                        \
        int rc_ = (expr);                                                       \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message, \
                      crl_status_name(rc_));                                    \
    } while (0)

#define assert_err(expr, e, want_code, needle)                                                     \
    do {                                                                                      \
        crl_error_clear(&(e));                                                                \
        int rc_ = (expr);                                                                     \
        ck_assert_msg(rc_ == (want_code), "%s gave %s, want %s: %s", #expr, crl_status_name(rc_), \
                      crl_status_name(want_code), (e).message);                                   \
        ck_assert_int_eq((e).code, (want_code));                                                   \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'",      \
                      (e).message, (needle));                                                 \
    } while (0)

#define assert_null_err(expr, e, want_code, needle)                                               \
    do {                                                                                     \
        crl_error_clear(&(e));                                                               \
        void *p_ = (void *)(expr);                                                           \
        ck_assert_msg(p_ == NULL, "%s succeeded", #expr);                                    \
        ck_assert_msg((e).code == (want_code), "%s gave %s, want %s: %s", #expr,                 \
                      crl_status_name((e).code), crl_status_name(want_code), (e).message);        \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'",     \
                      (e).message, (needle));                                                \
    } while (0)

/* Element of a [batch..., k] tensor in td: env i (ignored for batch []),
 * column j. */
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

/* Set every env's action (int64 [num] or []). */
static void set_actions(crl_env *env, crl_td *td, const int64_t *a)
{
    int b = crl_env_batch_ndim(env);
    int64_t n = crl_env_num(env);
    crl_tensor *t = crl_td_get(td, "action");
    if (!t) {
        crl_error e = { 0 };
        t = crl_tensor_new(CRL_I64, b, crl_env_batch_shape(env), &e);
        ck_assert_ptr_nonnull(t);
        assert_ok(crl_td_set(td, "action", t, &e), e);
        crl_tensor_unref(t);
    }
    for (int64_t i = 0; i < n; i++)
        crl_tensor_flat_set(t, i, (double)a[i]);
}

static void set_all_actions(crl_env *env, crl_td *td, int64_t a)
{
    int64_t acts[64];
    for (int i = 0; i < 64; i++)
        acts[i] = a;
    set_actions(env, td, acts);
}

static crl_td *reset_ok(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    crl_td *r = crl_env_reset(env, td, &e);
    ck_assert_msg(r != NULL, "reset: %s", e.message);
    return r;
}

static void step_ok(crl_env *env, crl_td *td)
{
    crl_error e = { 0 };
    assert_ok(crl_env_step(env, td, &e), e);
}

/* ---- construction and options ------------------------------------------------ */

START_TEST(options_table)
{
    const char *names[] = { "backend", "id", "num_envs", "frame_skip", "from_pixels", "pixels_only",
                            "auto_reset", "project_actions", "max_episode_steps", "seed", "return_state", "transforms",
                            "executor", "num_workers", "batch_size", "pin_threads", "step_timeout",
                            "on_worker_failure", "max_restarts", "worker_transforms", "per_env." };
    const crl_option *t = crl_env_options();
    size_t n = 0;
    while (t[n].type != CRL_OPT_END)
        n++;
    ck_assert_uint_eq(n, G_N_ELEMENTS(names));
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(t[i].name, names[i]);
    ck_assert_int_eq(t[6].type, CRL_OPT_ENUM);
    ck_assert_str_eq(t[6].choices, "off|next_step|same_step");
    ck_assert_str_eq(t[6].default_value, "off");
    ck_assert_str_eq(t[3].default_value, "1");
    ck_assert_double_eq(t[3].min, 1);
    ck_assert_str_eq(t[9].default_value, "0");
    ck_assert_int_eq(t[10].type, CRL_OPT_BOOL);
    ck_assert_str_eq(t[10].default_value, "false");
}
END_TEST

START_TEST(single_env_basics)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0");
    ck_assert_str_eq(crl_env_id(env), "Count-v0");
    ck_assert_str_eq(crl_env_backend_name(env), "countenv");
    ck_assert_int_eq(crl_env_num(env), 1);
    ck_assert_int_eq(crl_env_batch_ndim(env), 0);
    ck_assert_int_eq(crl_env_autoreset(env), CRL_AUTORESET_OFF);
    ck_assert_int_eq(crl_env_max_episode_steps(env), 0);
    ck_assert_int_eq(crl_env_render_height(env), 6);
    ck_assert_int_eq(crl_env_render_width(env), 8);
    const crl_spec *obs = crl_env_observation_spec(env);
    ck_assert_int_eq(crl_spec_ndim(obs), 0);
    const crl_spec *o = crl_spec_composite_get(obs, "observation");
    ck_assert_int_eq(crl_spec_ndim(o), 1);
    ck_assert_int_eq(crl_spec_shape(o)[0], 2);
    const crl_spec *a = crl_env_action_spec(env);
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_CATEGORICAL);
    ck_assert_int_eq(crl_spec_n(a), 3);
    ck_assert_int_eq(crl_spec_ndim(a), 0);
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_full_done_spec(env)), 3);
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_state_spec(env), "state"));
    ck_assert_int_eq(crl_spec_ndim(crl_env_reward_spec(env)), 1);
    fx_close(&f);
}
END_TEST

/* TorchRL's rule: action_spec / reward_spec / done_spec are the leaf of a
 * one-leaf Composite, else the Composite; full_* are always the Composites. */
START_TEST(spec_getters_as_torchrl)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2");
    const crl_spec *fa = crl_env_full_action_spec(env), *a = crl_env_action_spec(env);
    ck_assert_int_eq(crl_spec_get_kind(fa), CRL_SPEC_COMPOSITE);
    ck_assert_ptr_eq(a, crl_spec_composite_get(fa, "action"));
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_CATEGORICAL);
    ck_assert_int_eq(crl_spec_shape(a)[0], 2);
    ck_assert_ptr_eq(crl_env_reward_spec(env), crl_spec_composite_get(crl_env_full_reward_spec(env), "reward"));
    /* three done leaves: the Composite, as the tutorial prints env.done_spec */
    ck_assert_ptr_eq(crl_env_done_spec(env), crl_env_full_done_spec(env));
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_done_spec(env)), 3);
    ck_assert_ptr_eq(crl_env_observation_spec(env), crl_env_full_observation_spec(env));
    ck_assert_ptr_eq(crl_env_state_spec(env), crl_env_full_state_spec(env));
    ck_assert_ptr_eq(crl_env_base_action_spec(env), a);
    ck_assert_ptr_eq(crl_env_base_full_action_spec(env), fa);
    /* the leaf is what is_in / project / rand take directly */
    crl_error e = { 0 };
    crl_tensor *t = crl_spec_zero(a, &e);
    ck_assert_ptr_nonnull(t);
    ck_assert(crl_spec_is_in(a, t));
    crl_tensor_unref(t);
    /* the specs print: action_spec is the leaf, done_spec the Composite */
    char *r = crl_env_specs_repr(env);
    ck_assert_ptr_nonnull(strstr(r, "action_spec:\nDiscreteTensorSpec(\n"));
    ck_assert_ptr_nonnull(strstr(r, "reward_spec:\nUnboundedContinuousTensorSpec(\n"));
    ck_assert_ptr_nonnull(strstr(r, "done_spec:\nCompositeSpec(\n"));
    crl_free(r);
    fx_close(&f);

    /* two action leaves: action_spec is the whole Composite */
    env = fx_env(&f, "backend = countenv\nid = Count-v0\naux_action = true");
    ck_assert_ptr_eq(crl_env_action_spec(env), crl_env_full_action_spec(env));
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_action_spec(env)), 2);
    ck_assert_ptr_eq(crl_env_base_action_spec(env), crl_env_full_action_spec(env));
    r = crl_env_specs_repr(env);
    ck_assert_ptr_nonnull(strstr(r, "action_spec:\nCompositeSpec(\n    action: DiscreteTensorSpec(\n"));
    crl_free(r);
    fx_close(&f);

    ck_assert_ptr_null(crl_env_action_spec(NULL));
    ck_assert_ptr_null(crl_env_full_action_spec(NULL));
    ck_assert_ptr_null(crl_env_reward_spec(NULL));
    ck_assert_ptr_null(crl_env_done_spec(NULL));
    ck_assert_ptr_null(crl_env_full_done_spec(NULL));
    ck_assert_ptr_null(crl_env_base_full_action_spec(NULL));
}
END_TEST

/* The README's seed chain figures (next to TorchRL's 3288080526 for the same call). */
START_TEST(seed_chain_readme_figures)
{
    ck_assert_uint_eq(crl_seed_next(10), UINT64_C(3154873970851002780));
    ck_assert_uint_eq(crl_seed_next(UINT64_C(3154873970851002780)), UINT64_C(11157014602911934616));
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3");
    ck_assert_uint_eq(crl_env_set_seed(env, 10), UINT64_C(1601305919382704873));
    fx_close(&f);
}
END_TEST

START_TEST(batched_env_basics)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 4\nauto_reset = same_step");
    ck_assert_int_eq(crl_env_num(env), 4);
    ck_assert_int_eq(crl_env_batch_ndim(env), 1);
    ck_assert_int_eq(crl_env_batch_shape(env)[0], 4);
    ck_assert_int_eq(crl_env_autoreset(env), CRL_AUTORESET_SAME_STEP);
    const crl_spec *o = crl_spec_composite_get(crl_env_observation_spec(env), "observation");
    ck_assert_int_eq(crl_spec_ndim(o), 2);
    ck_assert_int_eq(crl_spec_shape(o)[0], 4);
    crl_td *td = reset_ok(env, NULL);
    ck_assert_int_eq(crl_td_batch_ndim(td), 1);
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq(val(td, "observation", i, 1), i);
        double c = val(td, "observation", i, 0);
        ck_assert(c >= 0 && c < 3);
        ck_assert_double_eq(val(td, "state", i, 0), c);
        ck_assert_double_eq(val(td, "done", i, 0), 0);
    }
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(specs_repr_layout)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0");
    char *r = crl_env_specs_repr(env);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(g_str_has_prefix(r, "observation_spec:\nCompositeSpec(\n    observation: UnboundedContinuousTensorSpec("),
                  "%s", r);
    ck_assert_msg(strstr(r, "\naction_spec:\nDiscreteTensorSpec(\n    shape=torch.Size([]),\n    space=DiscreteBox(n=3),")
                  != NULL, "%s", r);
    ck_assert_msg(strstr(r, "\nreward_spec:\nUnboundedContinuousTensorSpec(\n    shape=torch.Size([1]),") != NULL,
                  "%s", r);
    ck_assert_msg(strstr(r, "\ndone_spec:\nCompositeSpec(\n    done: DiscreteTensorSpec(") != NULL, "%s", r);
    ck_assert_msg(strstr(r, "\nstate_spec:\nCompositeSpec(\n    state: UnboundedContinuousTensorSpec(") != NULL, "%s",
                  r);
    crl_free(r);
    fx_close(&f);
}
END_TEST

START_TEST(backend_options_and_schema)
{
    fx f;
    /* offset_range is countenv's own option: 1 makes every start 0. */
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 5\noffset_range = 1");
    crl_td *td = reset_ok(env, NULL);
    for (int i = 0; i < 5; i++)
        ck_assert_double_eq(val(td, "observation", i, 0), 0);
    crl_td_unref(td);
    crl_error e = { 0 };
    crl_schema *s = crl__cli_schema_new(f.host, &e);
    ck_assert_msg(s != NULL, "%s", e.message);
    assert_ok(crl_config_validate(f.cfg, s, &e), e);
    crl_schema_free(s);
    fx_close(&f);

    /* crl's schema knows [env] and the backend's table; a typo is caught. */
    crl_error e2 = { 0 };
    env = fx_open(&f, "backend = countenv\nid = Count-v0\noffset_rnage = 2", &e2);
    ck_assert_ptr_null(env);
    ck_assert_int_eq(e2.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e2.message, "test.ini:6: unknown key 'offset_rnage' in [env]; did you mean 'offset_range'?"),
                  "%s", e2.message);
    s = crl__cli_schema_new(f.host, &e2);
    ck_assert_msg(s != NULL, "%s", e2.message);
    assert_err(crl_config_validate(f.cfg, s, &e2), e2, CRL_E_CONFIG, "offset_rnage");
    crl_schema_free(s);
    /* The host's own schema declares only what the host reads: [env] is no section of it. */
    assert_err(crl_config_validate(f.cfg, crl_host_schema(f.host), &e2), e2, CRL_E_CONFIG, "unknown section [env]");
    fx_close(&f);
}
END_TEST

START_TEST(config_errors)
{
    fx f;
    crl_error e = { 0 };
    assert_null_err(fx_open(&f, "backend = countnev\nid = Count-v0", &e), e, CRL_E_NOT_FOUND,
                    "did you mean 'countenv'?");
    ck_assert_msg(strstr(e.message, "test.ini:4") != NULL, "%s", e.message);
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Cuont-v0", &e), e, CRL_E_NOT_FOUND,
                    "did you mean 'Count-v0'?");
    ck_assert_msg(strstr(e.message, "Count-v0, CountNoState-v0, CountBox-v0, CountLong-v0") != NULL, "%s", e.message);
    ck_assert_msg(strstr(e.message, "test.ini:5") != NULL, "%s", e.message);
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Zebra", &e), e, CRL_E_NOT_FOUND,
                    "its envs: Count-v0, CountNoState-v0, CountBox-v0, CountLong-v0");
    fx_close(&f);
    assert_null_err(fx_open(&f, "id = Count-v0", &e), e, CRL_E_CONFIG, "[env] backend is required");
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv", &e), e, CRL_E_CONFIG, "[env] id is required");
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Count-v0\nframe_skp = 2", &e), e, CRL_E_CONFIG,
                    "did you mean 'frame_skip'?");
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Count-v0\nframe_skip = 0", &e), e, CRL_E_CONFIG,
                    "frame_skip");
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Count-v0\nauto_reset = sometimes", &e), e, CRL_E_CONFIG,
                    "auto_reset");
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Count-v0\npixels_only = true", &e), e, CRL_E_CONFIG,
                    "pixels_only = true needs from_pixels = true");
    fx_close(&f);
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\npixels_only = false");
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_observation_spec(env), "observation"));
    ck_assert_ptr_null(crl_spec_composite_get(crl_env_observation_spec(env), "pixels"));
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = CountNoState-v0\nfrom_pixels = true", &e), e,
                    CRL_E_UNSUPPORTED, "cannot render");
    fx_close(&f);
    assert_null_err(fx_open(&f, "backend = countenv\nid = Count-v0\noffset_range = 0", &e), e, CRL_E_CONFIG,
                    "offset_range");
    fx_close(&f);
}
END_TEST

/* ---- the typed description -------------------------------------------------------- */

/* A description is parsed once: later changes to the config text do not reach envs made from it, and one
 * description makes any number of independent envs. */
START_TEST(env_desc_parse_once_make_many)
{
    fx f;
    fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3\nmax_episode_steps = 7\nseed = 5");
    crl_error e = { 0 };
    crl_env_desc *d = crl_env_desc_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(d != NULL, "%s", e.message);
    ck_assert_str_eq(crl_env_desc_section(d), "env");
    ck_assert_str_eq(crl_env_desc_backend(d), "countenv");
    ck_assert_str_eq(crl_env_desc_id(d), "Count-v0");
    ck_assert_int_eq(crl_env_desc_num_envs(d), 3);
    ck_assert_uint_eq(crl_env_desc_transform_count(d), 0);
    ck_assert_ptr_null(crl_env_desc_transform_at(d, 0));
    const char *later = "[env]\nnum_envs = 5\nid = CountBox-v0\n";
    ck_assert_int_eq(crl_config_load_buffer(f.cfg, "later.ini", later, strlen(later), CRL_LAYER_OVERRIDE, &e), CRL_OK);
    crl_env *a = crl_env_new(d, &e), *b = crl_env_new(d, &e);
    ck_assert_msg(a && b, "%s", e.message);
    ck_assert_int_eq(crl_env_num(a), 3);
    ck_assert_int_eq(crl_env_num(b), 3);
    ck_assert_str_eq(crl_env_id(b), "Count-v0");
    ck_assert_int_eq(crl_env_max_episode_steps(a), 7);
    /* Same seed from the description: the same first observations, and stepping one leaves the other. */
    crl_td *ta = crl_env_reset(a, NULL, &e), *tb = crl_env_reset(b, NULL, &e);
    ck_assert_msg(ta && tb, "%s", e.message);
    for (int64_t i = 0; i < 3; i++)
        ck_assert_double_eq(val(ta, "observation", i, 0), val(tb, "observation", i, 0));
    ck_assert_int_eq(crl_env_rand_step(a, ta, &e), CRL_OK);
    ck_assert_int_eq(crl_env_rand_step(a, ta, &e), CRL_OK);
    set_all_actions(b, tb, 1);
    step_ok(b, tb);
    for (int64_t i = 0; i < 3; i++) {
        ck_assert_double_eq(val(tb, "next.observation", i, 0), val(tb, "observation", i, 0) + 1);
        ck_assert_double_eq(val(ta, "next.observation", i, 0), val(tb, "observation", i, 0) + 2);
    }
    crl_td_unref(ta);
    crl_td_unref(tb);
    crl_env_free(a);
    crl_env_free(b);
    crl_env_desc_free(d);
    /* The changed text is what a new description reads. */
    d = crl_env_desc_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(d != NULL, "%s", e.message);
    ck_assert_int_eq(crl_env_desc_num_envs(d), 5);
    ck_assert_str_eq(crl_env_desc_id(d), "CountBox-v0");
    crl_env_desc_free(d);
    fx_close(&f);
}
END_TEST

/* per_env.id: envs of different ids with the same specs in one batch (TorchRL's ParallelEnv of several create
 * functions); ids whose specs or time limits differ are a config error naming both ids. */
START_TEST(per_env_ids)
{
    fx f;
    crl_error e = { 0 };
    /* Counters start below 3 and end episodes at 5 or more: two steps truncate before any terminates. */
    crl_env *env = fx_env(&f, "backend = countenv\nnum_envs = 3\nexecutor = serial\nmax_episode_steps = 2\n"
                              "per_env.id = CountNoState-v0, CountLong-v0, CountNoState-v0");
    ck_assert_str_eq(crl_env_id(env), "CountNoState-v0, CountLong-v0");
    ck_assert_int_eq(crl_env_max_episode_steps(env), 2);
    crl_td *td = reset_ok(env, NULL);
    for (int t = 1; t <= 2; t++) {
        assert_ok(crl_env_rand_step(env, td, &e), e);
        for (int i = 0; i < 3; i++) {
            ck_assert_double_eq(val(td, "next.truncated", i, 0), t == 2);
            ck_assert_double_eq(val(td, "next.terminated", i, 0), 0);
        }
        assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    }
    crl_td_unref(td);
    fx_close(&f);
    /* With an [env] id too, per_env.id still decides each env's. */
    env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2\nexecutor = threads\nmax_episode_steps = 5\n"
                     "per_env.id = CountLong-v0, CountNoState-v0");
    ck_assert_str_eq(crl_env_id(env), "CountLong-v0, CountNoState-v0");
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_state_spec(env)), 0);
    fx_close(&f);

    /* test.ini: line 4 backend, 5 num_envs, 6 executor, 7 per_env.id */
    static const struct {
        const char *lines;
        int code;
        const char *needles[5];
    } bad[] = {
        { "backend = countenv\nnum_envs = 2\nexecutor = serial\nper_env.id = CountNoState-v0, CountBox-v0", CRL_E_CONFIG,
          { "test.ini:7", "spec 'action' of env 1 (id CountBox-v0) differs from that of env 0 (id CountNoState-v0)",
            "Categorical int64 [] (env 0) vs Bounded float32 [1] (this env)", NULL } },
        { "backend = countenv\nnum_envs = 2\nexecutor = serial\nper_env.id = CountNoState-v0, Count-v0", CRL_E_CONFIG,
          { "test.ini:7", "env 1 (id Count-v0) declares a state spec and env 0 (id CountNoState-v0) does not", NULL } },
        { "backend = countenv\nnum_envs = 2\nexecutor = serial\nper_env.id = CountNoState-v0, CountLong-v0", CRL_E_CONFIG,
          { "test.ini:7", "env 1 (id CountLong-v0) ends its episodes after 8 steps but env 0 (id CountNoState-v0) "
            "after 4", "max_episode_steps", NULL } },
        { "backend = countenv\nnum_envs = 2\nexecutor = serial\nper_env.id = CountNoState-v0, CountLng-v0",
          CRL_E_NOT_FOUND, { "test.ini:7", "per_env.id value 1 = 'CountLng-v0'", "did you mean 'CountLong-v0'", NULL } },
        { "backend = countenv\nnum_envs = 2\nper_env.id = CountNoState-v0, CountLong-v0", CRL_E_CONFIG,
          { "per-env options need one backend instance per env", NULL } },
        { "backend = countenv\nnum_envs = 2\nexecutor = serial\nper_env.id = CountNoState-v0", CRL_E_CONFIG,
          { "per_env.id has 1 value but there are 2 envs", NULL } },
    };
    for (size_t k = 0; k < G_N_ELEMENTS(bad); k++) {
        crl_error_clear(&e);
        ck_assert_msg(fx_open(&f, bad[k].lines, &e) == NULL, "case %zu made an env", k);
        ck_assert_msg(e.code == bad[k].code, "case %zu: %s (%s)", k, crl_status_name(e.code), e.message);
        for (size_t j = 0; bad[k].needles[j]; j++)
            ck_assert_msg(strstr(e.message, bad[k].needles[j]), "case %zu: '%s' lacks '%s'", k, e.message,
                          bad[k].needles[j]);
        fx_close(&f);
    }
}
END_TEST

/* Everything a description checks fails there, before any backend make, with FILE:LINE; NULL err is fine. */
START_TEST(env_desc_errors)
{
    static const struct {
        const char *lines, *needle;
        int code;
    } cases[] = {
        { "backend = countenv\nid = Count-v0\nnum_envs = 2\nexecutor = serial\nper_env.offset_range = 3",
          "test.ini:8: [env] per_env.offset_range has 1 value but there are 2 envs", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\nnum_envs = 2\nexecutor = serial\nper_env.offset_range = 3, 0",
          "[env] env 1 (per_env.offset_range = 0 from test.ini:8)", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\nnum_envs = 2\nexecutor = serial\nper_env.ofset_range = 3, 4",
          "did you mean 'per_env.offset_range'?", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\nnum_envs = 2\nper_env.offset_range = 3, 4",
          "per-env options need one backend instance per env", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\ntransforms = norm", "test.ini:6: [env] transforms names 'norm' but "
          "there is no [transform.norm] section", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\nworker_transforms = a.b", "'a.b' is not a transform name",
          CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\nnum_envs = 4\nbatch_size = 9", "test.ini:7: [env] batch_size = 9 "
          "exceeds num_envs = 4", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\nnum_envs = 4\nbatch_size = 2\nexecutor = processes",
          "needs executor = threads, not processes", CRL_E_CONFIG },
        { "backend = countenv\nid = Count-v0\noffset_range = -1", "test.ini:6: [env] offset_range", CRL_E_CONFIG },
        { "backend = countenv\nid = Cuont-v0", "did you mean 'Count-v0'?", CRL_E_NOT_FOUND },
    };
    for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
        fx f;
        crl_error e = { 0 };
        crl_env *env = fx_open(&f, cases[k].lines, &e);
        ck_assert_msg(env == NULL, "case %zu built an env", k);
        crl_error_clear(&e);
        ck_assert_ptr_null(crl_env_desc_from_config(f.host, f.cfg, "env", &e));
        ck_assert_msg(e.code == cases[k].code, "case %zu: %s, want %s: %s", k, crl_status_name(e.code),
                      crl_status_name(cases[k].code), e.message);
        ck_assert_msg(strstr(e.message, cases[k].needle) != NULL, "case %zu: '%s' lacks '%s'", k, e.message,
                      cases[k].needle);
        ck_assert_ptr_null(crl_env_desc_from_config(f.host, f.cfg, "env", NULL));
        fx_close(&f);
    }
    crl_error e = { 0 };
    ck_assert_ptr_null(crl_env_desc_from_config(NULL, NULL, "env", &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_env_new(NULL, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_env_new(NULL, NULL));
    crl_env_desc_free(NULL);
    ck_assert_ptr_null(crl_env_desc_id(NULL));
    ck_assert_int_eq(crl_env_desc_num_envs(NULL), 0);
}
END_TEST

/* ---- reset and step layouts ---------------------------------------------------- */

static const char *const reset_repr =
    "TensorDict(\n"
    "    fields={\n"
    "        done: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "        observation: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "        state: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float64, is_shared=False),\n"
    "        terminated: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "        truncated: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False)},\n"
    "    batch_size=torch.Size([]),\n"
    "    device=cpu,\n"
    "    is_shared=False)";

START_TEST(reset_layout)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0");
    crl_td *td = reset_ok(env, NULL);
    assert_keys(td, "done,observation,state,terminated,truncated");
    char *r = crl_td_repr(td);
    ck_assert_str_eq(r, reset_repr);
    crl_free(r);
    /* reset(td) updates and returns td itself, keeping other keys. */
    crl_error e = { 0 };
    crl_td *mine = crl_td_new(0, NULL, &e);
    crl_tensor *x = crl_tensor_new(CRL_F32, 1, (int64_t[]){ 1 }, &e);
    assert_ok(crl_td_set(mine, "some other key", x, &e), e);
    crl_td *back = reset_ok(env, mine);
    ck_assert_ptr_eq(back, mine);
    assert_keys(mine, "done,observation,some other key,state,terminated,truncated");
    ck_assert_ptr_eq(crl_td_get(mine, "some other key"), x);
    crl_td_unref(back);
    crl_td_unref(mine);
    crl_tensor_unref(x);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(step_layout_and_values)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0");
    crl_td *td = reset_ok(env, NULL);
    double c0 = val(td, "observation", 0, 0);
    set_all_actions(env, td, 2);
    step_ok(env, td);
    assert_keys(td, "action,done,next.done,next.observation,next.reward,next.state,next.terminated,next.truncated,"
                    "observation,state,terminated,truncated");
    ck_assert_double_eq(val(td, "next.observation", 0, 0), c0 + 1);
    ck_assert_double_eq(val(td, "next.observation", 0, 1), 0);
    ck_assert_double_eq(val(td, "next.state", 0, 0), c0 + 1);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 2);
    ck_assert_double_eq(val(td, "observation", 0, 0), c0);
    crl_tensor *nobs = crl_td_get(td, "next.observation");
    /* Stepping the same td again reuses its next tensors. */
    set_all_actions(env, td, 1);
    step_ok(env, td);
    ck_assert_ptr_eq(crl_td_get(td, "next.observation"), nobs);
    ck_assert_double_eq(val(td, "next.observation", 0, 0), c0 + 2);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 1);
    crl_td_unref(td);

    /* rand_step on a fresh reset gives TorchRL's rand_step layout. */
    td = reset_ok(env, NULL);
    crl_error e = { 0 };
    assert_ok(crl_env_rand_step(env, td, &e), e);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "action")), CRL_I64);
    double a = val(td, "action", 0, 0);
    ck_assert(a >= 0 && a < 3);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), a);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(step_mdp_semantics)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0");
    crl_td *td = reset_ok(env, NULL);
    crl_error e = { 0 };
    assert_ok(crl_env_rand_step(env, td, &e), e);
    crl_tensor *other = crl_tensor_new(CRL_F32, 1, (int64_t[]){ 1 }, &e);
    crl_tensor_fill(other, 0.25);
    assert_ok(crl_td_set(td, "some other key", other, &e), e);
    crl_td *tp = crl_env_step_mdp(env, td, &e);
    ck_assert_msg(tp != NULL, "%s", e.message);
    assert_keys(tp, "done,observation,some other key,state,terminated,truncated");
    ck_assert(crl_tensor_equal(crl_td_get(tp, "observation"), crl_td_get(td, "next.observation")));
    ck_assert(crl_tensor_equal(crl_td_get(tp, "state"), crl_td_get(td, "next.state")));
    ck_assert(crl_tensor_equal(crl_td_get(tp, "done"), crl_td_get(td, "next.done")));
    ck_assert(crl_tensor_equal(crl_td_get(tp, "some other key"), other));
    /* Its own copies: stepping td again does not change tp. */
    double before = val(tp, "observation", 0, 0);
    assert_ok(crl_env_rand_step(env, td, &e), e);
    ck_assert_double_eq(val(tp, "observation", 0, 0), before);

    /* step_mdp_into reuses the destination's tensors. */
    crl_tensor *dobs = crl_td_get(tp, "observation");
    assert_ok(crl_env_step_mdp_into(env, td, tp, &e), e);
    ck_assert_ptr_eq(crl_td_get(tp, "observation"), dobs);
    ck_assert(crl_tensor_equal(dobs, crl_td_get(td, "next.observation")));
    /* In place: the root takes next's values, "next" stays for reuse. */
    assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    ck_assert(crl_tensor_equal(crl_td_get(td, "observation"), crl_td_get(td, "next.observation")));
    ck_assert_ptr_eq(crl_td_get(td, "some other key"), other);

    /* Errors. */
    crl_td *bare = reset_ok(env, NULL);
    assert_null_err(crl_env_step_mdp(env, bare, &e), e, CRL_E_NOT_FOUND, "no 'next'");
    crl_td *wrong = crl_td_new(1, (int64_t[]){ 2 }, &e);
    assert_err(crl_env_step_mdp_into(env, td, wrong, &e), e, CRL_E_SHAPE, "batch shape");
    crl_td_unref(wrong);
    crl_td_unref(bare);
    crl_td_unref(tp);
    crl_tensor_unref(other);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- seeding ------------------------------------------------------------------------ */

static crl_td *seeded_rollout(crl_env *env, uint64_t seed, int64_t steps)
{
    crl_env_set_seed(env, seed);
    crl_error e = { 0 };
    crl_td *r = crl_env_rollout(env, steps, NULL, NULL, false, true, NULL, &e);
    ck_assert_msg(r != NULL, "rollout: %s", e.message);
    return r;
}

START_TEST(seed_determinism_and_chain)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 4");
    uint64_t s = 12345;
    uint64_t want = s;
    for (int i = 0; i < 4; i++)
        want = crl_seed_next(want);
    ck_assert_uint_eq(crl_env_set_seed(env, s), want);

    crl_td *a = seeded_rollout(env, 12345, 30);
    crl_td *b = seeded_rollout(env, 12345, 30);
    ck_assert(crl_td_equal(a, b));
    crl_td *c = seeded_rollout(env, 999, 30);
    ck_assert(!crl_td_equal(a, c));
    crl_td_unref(c);
    crl_td_unref(b);

    /* Continuing the chain: a 2-env batch seeded with element 2 of the chain
     * starts like envs 2 and 3 of the 4-env batch. */
    fx g;
    crl_env *env2 = fx_env(&g, "backend = countenv\nid = Count-v0\nnum_envs = 2");
    uint64_t s2 = crl_seed_next(crl_seed_next(12345));
    ck_assert_uint_eq(crl_env_set_seed(env2, s2), want);
    crl_td *r4 = NULL, *r2 = NULL;
    crl_env_set_seed(env, 12345);
    r4 = reset_ok(env, NULL);
    r2 = reset_ok(env2, NULL);
    for (int i = 0; i < 2; i++)
        ck_assert_double_eq(val(r2, "observation", i, 0), val(r4, "observation", i + 2, 0));
    crl_td_unref(r4);
    crl_td_unref(r2);
    crl_td_unref(a);
    fx_close(&g);

    /* The seed option is set_seed at construction. */
    crl_env_set_seed(env, 77);
    crl_td *x = reset_ok(env, NULL);
    fx_close(&f);
    env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 4\nseed = 77");
    crl_td *y = reset_ok(env, NULL);
    ck_assert(crl_td_equal(x, y));
    /* Without a new seed, a second reset keeps each env's stream going. */
    crl_td *z = reset_ok(env, NULL);
    bool same = true;
    for (int k = 0; k < 8 && same; k++) {
        crl_td_unref(z);
        z = reset_ok(env, NULL);
        same = crl_td_equal(y, z);
    }
    ck_assert(!same);
    crl_td_unref(z);
    crl_td_unref(x);
    crl_td_unref(y);
    fx_close(&f);
}
END_TEST

/* ---- frame_skip ------------------------------------------------------------------------ */

static crl_td *reset_to_counters(crl_env *env, const double *counters)
{
    crl_error e = { 0 };
    int64_t n = crl_env_num(env);
    int b = crl_env_batch_ndim(env);
    int64_t shape[2] = { n, 1 };
    crl_td *td = crl_td_new(b, crl_env_batch_shape(env), &e);
    crl_tensor *st = crl_tensor_new(CRL_F64, b + 1, b ? shape : shape + 1, &e);
    for (int64_t i = 0; i < n; i++)
        crl_tensor_flat_set(st, i, counters[i]);
    assert_ok(crl_td_set(td, "state", st, &e), e);
    crl_tensor_unref(st);
    crl_td *r = crl_env_reset_from_state(env, td, &e);
    ck_assert_msg(r == td, "reset_from_state: %s", e.message);
    crl_td_unref(r);
    return td;
}

START_TEST(frame_skip_sums_and_stops)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3\nframe_skip = 3\n"
                              "auto_reset = next_step\nfrom_pixels = true\npixels_only = false");
    /* env 0 ends at counter 5: from 3 that is 2 frames into the 3. */
    crl_td *td = reset_to_counters(env, (double[]){ 3, 0, 1 });
    set_all_actions(env, td, 2);
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.observation", 0, 0), 5);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 4);
    ck_assert_double_eq(val(td, "next.done", 0, 0), 1);
    ck_assert_double_eq(val(td, "next.terminated", 0, 0), 1);
    ck_assert_double_eq(val(td, "next.state", 0, 0), 5);
    /* its frame was rendered when it ended */
    crl_tensor *px = crl_td_get(td, "next.pixels");
    ck_assert_double_eq(crl_tensor_get_f64(px, (int64_t[]){ 0, 2, 3, 0 }), 5);
    for (int i = 1; i < 3; i++) {
        ck_assert_double_eq(val(td, "next.observation", i, 0), (i == 1 ? 0 : 1) + 3);
        ck_assert_double_eq(val(td, "next.reward", i, 0), 6);
        ck_assert_double_eq(val(td, "next.done", i, 0), 0);
        ck_assert_double_eq(crl_tensor_get_f64(px, (int64_t[]){ i, 0, 0, 0 }), (i == 1 ? 0 : 1) + 3);
    }
    /* next_step: env 0 resets on this step (reward 0, not done). */
    set_all_actions(env, td, 1);
    step_ok(env, td);
    double c = val(td, "next.observation", 0, 0);
    ck_assert(c >= 0 && c < 3);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 0);
    ck_assert_double_eq(val(td, "next.done", 0, 0), 0);
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(td, "next.pixels"), (int64_t[]){ 0, 0, 0, 0 }), c);
    /* env 1 (ends at 6) went 3 -> 6 and stops at once, env 2 (ends at 7)
     * went 4 -> 7 */
    ck_assert_double_eq(val(td, "next.observation", 1, 0), 6);
    ck_assert_double_eq(val(td, "next.reward", 1, 0), 3);
    ck_assert_double_eq(val(td, "next.done", 1, 0), 1);
    ck_assert_double_eq(val(td, "next.observation", 2, 0), 7);
    ck_assert_double_eq(val(td, "next.done", 2, 0), 1);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- auto-reset modes ------------------------------------------------------------------ */

START_TEST(autoreset_off)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 4");
    crl_td *td = reset_to_counters(env, (double[]){ 4, 0, 0, 0 });
    set_all_actions(env, td, 1);
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.done", 0, 0), 1);
    crl_error e = { 0 };
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID,
               "env 0 is done; reset it first (pass _reset) or set env.auto_reset");
    crl_td *tp = crl_env_step_mdp(env, td, &e);
    ck_assert_ptr_nonnull(tp);
    /* off: the root keeps the final observation. */
    ck_assert_double_eq(val(tp, "observation", 0, 0), 5);
    ck_assert_double_eq(val(tp, "done", 0, 0), 1);
    /* A partial reset of env 0 leaves the others' entries alone. */
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, (int64_t[]){ 4, 1 }, &e);
    crl_tensor_flat_set(m, 0, 1);
    assert_ok(crl_td_set(tp, "_reset", m, &e), e);
    crl_tensor_unref(m);
    crl_td *before = crl_td_clone(tp, &e);
    crl_td *r = reset_ok(env, tp);
    ck_assert_ptr_eq(r, tp);
    crl_td_unref(r);
    ck_assert(!crl_td_has(tp, "_reset"));
    double c = val(tp, "observation", 0, 0);
    ck_assert(c >= 0 && c < 3);
    ck_assert_double_eq(val(tp, "done", 0, 0), 0);
    for (int i = 1; i < 4; i++) {
        ck_assert_double_eq(val(tp, "observation", i, 0), val(before, "observation", i, 0));
        ck_assert_double_eq(val(tp, "state", i, 0), val(before, "state", i, 0));
    }
    set_all_actions(env, tp, 1);
    step_ok(env, tp);
    ck_assert_double_eq(val(tp, "next.observation", 0, 0), c + 1);
    crl_td_unref(before);
    crl_td_unref(tp);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(autoreset_next_step)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2\nauto_reset = next_step");
    crl_td *td = reset_to_counters(env, (double[]){ 4, 1 });
    set_all_actions(env, td, 2);
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.observation", 0, 0), 5);
    ck_assert_double_eq(val(td, "next.done", 0, 0), 1);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 2);
    crl_error e = { 0 };
    assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    ck_assert_double_eq(val(td, "observation", 0, 0), 5);
    step_ok(env, td);
    double c = val(td, "next.observation", 0, 0);
    ck_assert(c >= 0 && c < 3);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 0);
    ck_assert_double_eq(val(td, "next.done", 0, 0), 0);
    ck_assert_double_eq(val(td, "next.state", 0, 0), c);
    /* env 1 just kept going */
    ck_assert_double_eq(val(td, "next.observation", 1, 0), 3);
    ck_assert_double_eq(val(td, "next.reward", 1, 0), 2);
    assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.observation", 0, 0), c + 1);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 2);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(autoreset_same_step)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2\nauto_reset = same_step\n"
                              "from_pixels = true\npixels_only = false");
    crl_td *td = reset_to_counters(env, (double[]){ 4, 1 });
    set_all_actions(env, td, 2);
    step_ok(env, td);
    /* next keeps the final observation */
    ck_assert_double_eq(val(td, "next.observation", 0, 0), 5);
    ck_assert_double_eq(val(td, "next.done", 0, 0), 1);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 2);
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(td, "next.pixels"), (int64_t[]){ 0, 1, 1, 0 }), 5);
    crl_error e = { 0 };
    crl_td *tp = crl_env_step_mdp(env, td, &e);
    ck_assert_ptr_nonnull(tp);
    /* the root after step_mdp holds the reset one */
    double c = val(tp, "observation", 0, 0);
    ck_assert(c >= 0 && c < 3);
    ck_assert_double_eq(val(tp, "done", 0, 0), 0);
    ck_assert_double_eq(val(tp, "terminated", 0, 0), 0);
    ck_assert_double_eq(val(tp, "state", 0, 0), c);
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(tp, "pixels"), (int64_t[]){ 0, 1, 1, 0 }), c);
    ck_assert_double_eq(val(tp, "observation", 1, 0), 2);
    /* and the env goes on from there, without an error */
    set_all_actions(env, tp, 1);
    step_ok(env, tp);
    ck_assert_double_eq(val(tp, "next.observation", 0, 0), c + 1);
    ck_assert_double_eq(val(tp, "next.reward", 0, 0), 1);
    ck_assert_double_eq(val(tp, "next.done", 0, 0), 0);
    ck_assert_double_eq(val(tp, "next.observation", 1, 0), 3);
    crl_td_unref(tp);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- partial resets, reset_from_state, truncation ------------------------------------ */

START_TEST(partial_reset)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 4\nfrom_pixels = true\npixels_only = false");
    crl_td *td = reset_to_counters(env, (double[]){ 1, 1, 1, 1 });
    set_all_actions(env, td, 0);
    step_ok(env, td);
    crl_error e = { 0 };
    assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, (int64_t[]){ 4, 1 }, &e);
    crl_tensor_flat_set(m, 1, 1);
    crl_tensor_flat_set(m, 3, 1);
    assert_ok(crl_td_set(td, "_reset", m, &e), e);
    crl_env_set_seed(env, 5);
    crl_td *r = reset_ok(env, td);
    crl_td_unref(r);
    for (int i = 0; i < 4; i++) {
        double c = val(td, "observation", i, 0);
        if (i % 2 == 0) {
            ck_assert_double_eq(c, 2);
        } else {
            ck_assert(c >= 0 && c < 3);
            ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(td, "pixels"), (int64_t[]){ i, 5, 7, 0 }), c);
        }
        ck_assert_double_eq(val(td, "state", i, 0), c);
    }
    /* envs 0 and 2 kept their pending seeds: their next reset uses them */
    crl_td *again = reset_ok(env, NULL);
    crl_env_set_seed(env, 5);
    crl_td *fresh = reset_ok(env, NULL);
    ck_assert_double_eq(val(again, "observation", 0, 0), val(fresh, "observation", 0, 0));
    ck_assert_double_eq(val(again, "observation", 2, 0), val(fresh, "observation", 2, 0));
    crl_td_unref(again);
    crl_td_unref(fresh);
    /* a bad mask */
    crl_tensor *bad = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 4, 1 }, &e);
    assert_ok(crl_td_set(td, "_reset", bad, &e), e);
    assert_null_err(crl_env_reset(env, td, &e), e, CRL_E_DTYPE, "'_reset'");
    crl_tensor_unref(bad);
    bad = crl_tensor_new(CRL_BOOL, 1, (int64_t[]){ 4 }, &e);
    assert_ok(crl_td_set(td, "_reset", bad, &e), e);
    assert_null_err(crl_env_reset(env, td, &e), e, CRL_E_SHAPE, "'_reset'");
    crl_tensor_unref(bad);
    crl_tensor_unref(m);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(reset_from_state_replays)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3\nseed = 3");
    /* far from the end, so no episode ends (and no reset draws) in the window */
    crl_td *td = reset_to_counters(env, (double[]){ -20, -30, -40 });
    crl_error e = { 0 };
    for (int t = 0; t < 2; t++) {
        assert_ok(crl_env_rand_step(env, td, &e), e);
        assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    }
    crl_td *saved = crl_td_clone(td, &e);
    crl_td *actions[6], *outs[6];
    for (int t = 0; t < 6; t++) {
        assert_ok(crl_env_rand_step(env, td, &e), e);
        actions[t] = crl_td_clone(td, &e);
        outs[t] = crl_td_clone(crl_td_get_td(td, "next"), &e);
        assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    }
    crl_td *replay = crl_td_clone(saved, &e);
    crl_td *r = crl_env_reset_from_state(env, replay, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    crl_td_unref(r);
    ck_assert(crl_tensor_equal(crl_td_get(replay, "observation"), crl_td_get(saved, "observation")));
    for (int t = 0; t < 6; t++) {
        assert_ok(crl_tensor_copy(crl_td_get(replay, "action"), crl_td_get(actions[t], "action"), &e), e);
        step_ok(env, replay);
        ck_assert_msg(crl_td_equal(crl_td_get_td(replay, "next"), outs[t]), "step %d differs", t);
        assert_ok(crl_env_step_mdp_into(env, replay, replay, &e), e);
        crl_td_unref(actions[t]);
        crl_td_unref(outs[t]);
    }
    /* the state entries must be there */
    crl_td *empty = crl_td_new(1, (int64_t[]){ 3 }, &e);
    assert_null_err(crl_env_reset_from_state(env, empty, &e), e, CRL_E_NOT_FOUND, "'state'");
    crl_tensor *wrong = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 1 }, &e);
    assert_ok(crl_td_set(empty, "state", wrong, &e), e);
    assert_null_err(crl_env_reset_from_state(env, empty, &e), e, CRL_E_DTYPE, "'state'");
    assert_null_err(crl_env_reset_from_state(env, NULL, &e), e, CRL_E_INVALID, "state");
    crl_tensor_unref(wrong);
    crl_td_unref(empty);
    crl_td_unref(replay);
    crl_td_unref(saved);
    crl_td_unref(td);
    fx_close(&f);

    /* without a state spec */
    env = fx_env(&f, "backend = countenv\nid = CountNoState-v0");
    td = reset_ok(env, NULL);
    assert_null_err(crl_env_reset_from_state(env, td, &e), e, CRL_E_UNSUPPORTED, "no state spec");
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* The default: the state stays inside the env (TorchRL's GymEnv has an empty state spec), yet
 * reset_from_state still takes it and starts there. */
START_TEST(return_state_off)
{
    fx f, g;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2\nreturn_state = false");
    crl_env *with = fx_env(&g, "backend = countenv\nid = Count-v0\nnum_envs = 2\nreturn_state = true");
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_state_spec(env)), 0);
    ck_assert_ptr_nonnull(crl_spec_composite_get(crl_env_state_spec(with), "state"));
    char *repr = crl_env_specs_repr(env);
    ck_assert_msg(repr && !strstr(repr, "state: "), "%s", repr);
    crl_free(repr);
    crl_td *td = reset_ok(env, NULL);
    assert_keys(td, "done,observation,terminated,truncated");
    crl_error e = { 0 };
    assert_ok(crl_env_rand_step(env, td, &e), e);
    assert_keys(td, "action,done,next.done,next.observation,next.reward,next.terminated,next.truncated,observation,"
                    "terminated,truncated");
    crl_td *roll = crl_env_rollout(env, 3, NULL, NULL, false, true, NULL, &e);
    ck_assert_msg(roll != NULL, "%s", e.message);
    ck_assert(!crl_td_has(roll, "state") && !crl_td_has(roll, "next.state"));
    crl_td_unref(roll);
    /* reset_from_state: the state given in the td is where the env starts, as with return_state = true */
    crl_td *a = reset_to_counters(env, (double[]){ -7, -9 });
    crl_td *b = reset_to_counters(with, (double[]){ -7, -9 });
    ck_assert(crl_tensor_equal(crl_td_get(a, "observation"), crl_td_get(b, "observation")));
    ck_assert_double_eq(val(a, "observation", 1, 0), -9);
    assert_ok(crl_env_rand_action(with, b, &e), e);
    assert_ok(crl_td_set(a, "action", crl_td_get(b, "action"), &e), e);
    step_ok(env, a);
    step_ok(with, b);
    ck_assert(crl_tensor_equal(crl_td_get(a, "next.observation"), crl_td_get(b, "next.observation")));
    ck_assert(!crl_td_has(a, "next.state"));
    /* a td without the state says how to get one */
    crl_td *empty = crl_td_new(1, (int64_t[]){ 2 }, &e);
    assert_null_err(crl_env_reset_from_state(env, empty, &e), e, CRL_E_NOT_FOUND, "return_state = true");
    crl_td_unref(empty);
    crl_td_unref(a);
    crl_td_unref(b);
    crl_td_unref(td);
    fx_close(&g);
    fx_close(&f);
}
END_TEST

START_TEST(max_episode_steps_truncates)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2\nmax_episode_steps = 2");
    ck_assert_int_eq(crl_env_max_episode_steps(env), 2);
    crl_td *td = reset_to_counters(env, (double[]){ 0, 0 });
    crl_error e = { 0 };
    assert_ok(crl_env_rand_step(env, td, &e), e);
    ck_assert_double_eq(val(td, "next.truncated", 0, 0), 0);
    ck_assert_double_eq(val(td, "next.done", 1, 0), 0);
    assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    assert_ok(crl_env_rand_step(env, td, &e), e);
    for (int i = 0; i < 2; i++) {
        ck_assert_double_eq(val(td, "next.truncated", i, 0), 1);
        ck_assert_double_eq(val(td, "next.terminated", i, 0), 0);
        ck_assert_double_eq(val(td, "next.done", i, 0), 1);
    }
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID, "env 0 is done");
    crl_td_unref(td);
    fx_close(&f);

    /* 0 takes the backend's limit (4 for CountNoState-v0) */
    env = fx_env(&f, "backend = countenv\nid = CountNoState-v0\nauto_reset = same_step\noffset_range = 1");
    ck_assert_int_eq(crl_env_max_episode_steps(env), 4);
    td = reset_ok(env, NULL);
    for (int t = 1; t <= 4; t++) {
        assert_ok(crl_env_rand_step(env, td, &e), e);
        ck_assert_double_eq(val(td, "next.truncated", 0, 0), t == 4);
        ck_assert_double_eq(val(td, "next.done", 0, 0), t == 4);
        assert_ok(crl_env_step_mdp_into(env, td, td, &e), e);
    }
    /* same_step reset it: the count starts over */
    ck_assert_double_eq(val(td, "observation", 0, 0), 0);
    assert_ok(crl_env_rand_step(env, td, &e), e);
    ck_assert_double_eq(val(td, "next.truncated", 0, 0), 0);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- pixels ------------------------------------------------------------------------------- */

START_TEST(from_pixels_keys)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nfrom_pixels = true\npixels_only = false");
    crl_td *td = reset_ok(env, NULL);
    assert_keys(td, "done,observation,pixels,state,terminated,truncated");
    crl_tensor *px = crl_td_get(td, "pixels");
    ck_assert_int_eq(crl_tensor_dtype(px), CRL_U8);
    ck_assert_int_eq(crl_tensor_ndim(px), 3);
    ck_assert_int_eq(crl_tensor_shape(px)[0], 6);
    ck_assert_int_eq(crl_tensor_shape(px)[1], 8);
    ck_assert_int_eq(crl_tensor_shape(px)[2], 3);
    double c = val(td, "observation", 0, 0);
    ck_assert_double_eq(crl_tensor_get_f64(px, (int64_t[]){ 5, 7, 0 }), c);
    ck_assert_double_eq(crl_tensor_get_f64(px, (int64_t[]){ 5, 7, 2 }), 47);
    const crl_spec *ps = crl_spec_composite_get(crl_env_observation_spec(env), "pixels");
    ck_assert_int_eq(crl_spec_get_kind(ps), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_dtype(ps), CRL_U8);
    ck_assert_int_eq(crl_spec_ndim(ps), 3);
    crl_error e = { 0 };
    assert_ok(crl_env_rand_step(env, td, &e), e);
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(td, "next.pixels"), (int64_t[]){ 0, 0, 0 }), c + 1);
    /* render by hand agrees */
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 6, 8, 3 }, &e);
    assert_ok(crl_env_render(env, 0, frame, &e), e);
    ck_assert(crl_tensor_equal(frame, crl_td_get(td, "next.pixels")));
    assert_err(crl_env_render(env, 1, frame, &e), e, CRL_E_RANGE, "out of range");
    crl_tensor *small = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 8, 6, 3 }, &e);
    assert_err(crl_env_render(env, 0, small, &e), e, CRL_E_SHAPE, "[6, 8, 3]");
    crl_tensor_unref(small);
    crl_tensor_unref(frame);
    crl_td_unref(td);
    fx_close(&f);

    /* pixels_only defaults to true with from_pixels, as in TorchRL's wrappers. */
    env = fx_env(&f, "backend = countenv\nid = Count-v0\nfrom_pixels = true\nnum_envs = 2");
    td = reset_ok(env, NULL);
    assert_keys(td, "done,pixels,state,terminated,truncated");
    ck_assert_int_eq(crl_tensor_ndim(crl_td_get(td, "pixels")), 4);
    ck_assert_ptr_null(crl_spec_composite_get(crl_env_observation_spec(env), "observation"));
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_observation_spec(env)), 1);
    assert_ok(crl_env_rand_step(env, td, &e), e);
    assert_keys(td, "action,done,next.done,next.pixels,next.reward,next.state,next.terminated,next.truncated,"
                    "pixels,state,terminated,truncated");
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(td, "next.pixels"), (int64_t[]){ 1, 0, 0, 1 }), 1);
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(td, "next.pixels"), (int64_t[]){ 1, 0, 0, 0 }),
                        val(td, "next.state", 1, 0));
    crl_td_unref(td);
    fx_close(&f);

    /* no render */
    env = fx_env(&f, "backend = countenv\nid = CountNoState-v0");
    frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 6, 8, 3 }, &e);
    assert_err(crl_env_render(env, 0, frame, &e), e, CRL_E_UNSUPPORTED, "cannot render");
    crl_tensor_unref(frame);
    fx_close(&f);
}
END_TEST

/* ---- rollouts ---------------------------------------------------------------------------- */

static bool rows_equal(crl_tensor *a, int64_t ia, crl_tensor *b, int64_t ib, int dim)
{
    crl_tensor *x = crl_tensor_index(a, dim, ia, NULL), *y = crl_tensor_index(b, dim, ib, NULL);
    bool eq = crl_tensor_equal(x, y);
    crl_tensor_unref(x);
    crl_tensor_unref(y);
    return eq;
}

START_TEST(rollout_single)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0");
    crl_error e = { 0 };
    crl_td *r = crl_env_rollout(env, 20, NULL, NULL, false, true, NULL, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    ck_assert_int_eq(crl_td_batch_ndim(r), 1);
    ck_assert_int_eq(crl_td_batch_shape(r)[0], 20);
    assert_keys(r, "action,done,next.done,next.observation,next.reward,next.state,next.terminated,next.truncated,"
                   "observation,state,terminated,truncated");
    crl_tensor *obs = crl_td_get(r, "observation"), *nobs = crl_td_get(r, "next.observation");
    ck_assert_int_eq(crl_tensor_shape(obs)[0], 20);
    ck_assert_int_eq(crl_tensor_shape(obs)[1], 2);
    int ended = 0;
    for (int t = 0; t + 1 < 20; t++) {
        if (val(r, "next.done", t, 0)) {
            ended++;
            /* off mode: the rollout reset that env itself */
            ck_assert(crl_tensor_get_f64(obs, (int64_t[]){ t + 1, 0 }) < 3);
            ck_assert_double_eq(val(r, "done", t + 1, 0), 0);
            continue;
        }
        ck_assert_msg(rows_equal(obs, t + 1, nobs, t, 0), "obs[%d] != next.obs[%d]", t + 1, t);
        ck_assert_double_eq(val(r, "next.reward", t, 0), val(r, "action", t, 0));
    }
    ck_assert_int_ge(ended, 2);
    crl_td_unref(r);

    /* break_when_any_done stops at the end of the episode */
    r = crl_env_rollout(env, 50, NULL, NULL, true, true, NULL, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    int64_t T = crl_td_batch_shape(r)[0];
    ck_assert_int_ge(T, 3);
    ck_assert_int_le(T, 5);
    ck_assert_double_eq(val(r, "next.done", T - 1, 0), 1);
    ck_assert_double_eq(val(r, "next.observation", T - 1, 0), 5);
    ck_assert_double_eq(val(r, "next.done", T - 2, 0), 0);
    ck_assert_int_eq(crl_tensor_shape(crl_td_get(r, "next.reward"))[0], T);
    crl_td_unref(r);
    fx_close(&f);
}
END_TEST

static int policy_fixed(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    int *calls = user;
    (*calls)++;
    crl_tensor *a = crl_td_get(td, "action");
    if (!a) {
        a = crl_tensor_new(CRL_I64, crl_env_batch_ndim(env), crl_env_batch_shape(env), err);
        if (!a)
            return err->code;
        int rc = crl_td_set(td, "action", a, err);
        crl_tensor_unref(a);
        if (rc)
            return rc;
    }
    crl_tensor_fill(a, 1);
    return CRL_OK;
}

static int policy_fails(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)env;
    (void)td;
    int *calls = user;
    if (++*calls == 3)
        return crl_error_set(err, CRL_E_RUNTIME, "policy broke");
    return policy_fixed(&(int){ 0 }, env, td, err);
}

START_TEST(rollout_batched)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3\nauto_reset = next_step");
    crl_error e = { 0 };
    int calls = 0;
    crl_td *r = crl_env_rollout(env, 12, policy_fixed, &calls, false, true, NULL, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    ck_assert_int_eq(calls, 12);
    ck_assert_int_eq(crl_td_batch_ndim(r), 2);
    ck_assert_int_eq(crl_td_batch_shape(r)[0], 3);
    ck_assert_int_eq(crl_td_batch_shape(r)[1], 12);
    crl_tensor *obs = crl_td_get(r, "observation"), *nobs = crl_td_get(r, "next.observation");
    ck_assert_int_eq(crl_tensor_ndim(obs), 3);
    /* next_step: obs[t + 1] == next.obs[t] for every env and step */
    for (int i = 0; i < 3; i++) {
        crl_tensor *oi = crl_tensor_index(obs, 0, i, NULL), *ni = crl_tensor_index(nobs, 0, i, NULL);
        for (int t = 0; t + 1 < 12; t++)
            ck_assert_msg(rows_equal(oi, t + 1, ni, t, 0), "env %d: obs[%d] != next.obs[%d]", i, t + 1, t);
        crl_tensor_unref(oi);
        crl_tensor_unref(ni);
        ck_assert_double_eq(crl_tensor_get_f64(obs, (int64_t[]){ i, 5, 1 }), i);
    }
    crl_td_unref(r);

    /* rollout from a given root state, without auto_reset */
    crl_td *td = reset_ok(env, NULL);
    crl_tensor *x = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 1 }, &e);
    crl_tensor_fill(x, 7);
    assert_ok(crl_td_set(td, "some other key", x, &e), e);
    crl_tensor_unref(x);
    crl_td *keep = crl_td_clone(td, &e);
    r = crl_env_rollout(env, 4, NULL, NULL, false, false, td, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    ck_assert(crl_td_equal(td, keep)); /* the caller's td is left alone */
    crl_tensor *o0 = crl_tensor_index(crl_td_get(r, "observation"), 1, 0, NULL);
    ck_assert(crl_tensor_equal(o0, crl_td_get(td, "observation")));
    crl_tensor_unref(o0);
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(r, "some other key"), (int64_t[]){ 2, 3, 0 }), 7);
    crl_td_unref(r);
    crl_td_unref(keep);

    /* errors */
    calls = 0;
    assert_null_err(crl_env_rollout(env, 5, policy_fails, &calls, false, true, NULL, &e), e, CRL_E_RUNTIME,
                    "rollout: step 2: policy: policy broke");
    assert_null_err(crl_env_rollout(env, 0, NULL, NULL, false, true, NULL, &e), e, CRL_E_INVALID, "max_steps");
    assert_null_err(crl_env_rollout(env, 3, NULL, NULL, false, false, NULL, &e), e, CRL_E_INVALID, "auto_reset");
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- check_env_specs --------------------------------------------------------------------- */

START_TEST(check_specs)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3\nfrom_pixels = true\npixels_only = false");
    assert_ok(crl_env_check_specs(env, 10, &e), e);
    fx_close(&f);
    env = fx_env(&f, "backend = countenv\nid = CountBox-v0\nauto_reset = same_step\nframe_skip = 2");
    assert_ok(crl_env_check_specs(env, 10, &e), e);
    fx_close(&f);
    env = fx_env(&f, "backend = badspec\nid = Bad-v0\nmode = none\nnum_envs = 2");
    assert_ok(crl_env_check_specs(env, 5, &e), e);
    fx_close(&f);

    env = fx_env(&f, "backend = badspec\nid = Bad-v0");
    assert_err(crl_env_check_specs(env, 5, &e), e, CRL_E_RANGE, "key 'next.observation'");
    ck_assert_msg(strstr(e.message, "outside [-1, 1]"), "%s", e.message);
    fx_close(&f);

    env = fx_env(&f, "backend = badspec\nid = Bad-v0\nmode = reward_dtype\nnum_envs = 2");
    assert_err(crl_env_check_specs(env, 5, &e), e, CRL_E_DTYPE, "key 'reward'");
    ck_assert_msg(strstr(e.message, "float64"), "%s", e.message);
    ck_assert_msg(g_str_has_prefix(e.message, "check_env_specs: "), "%s", e.message);
    assert_err(crl_env_check_specs(env, 0, &e), e, CRL_E_INVALID, "steps");
    fx_close(&f);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------- */

START_TEST(bad_actions)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 4");
    crl_td *td = reset_ok(env, NULL);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_NOT_FOUND, "no 'action'");
    crl_tensor *fa = crl_tensor_new(CRL_F32, 1, (int64_t[]){ 4 }, &e);
    assert_ok(crl_td_set(td, "action", fa, &e), e);
    crl_tensor_unref(fa);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_DTYPE, "key 'action': expected dtype int64 but got float32");
    crl_tensor *sa = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 4, 1 }, &e);
    assert_ok(crl_td_set(td, "action", sa, &e), e);
    crl_tensor_unref(sa);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_SHAPE, "key 'action': expected shape");
    assert_ok(crl_td_del(td, "action", &e), e);
    set_actions(env, td, (int64_t[]){ 0, 1, 7, 2 });
    assert_err(crl_env_step(env, td, &e), e, CRL_E_RANGE, "env 2");
    ck_assert_msg(strstr(e.message, "'action'") && strstr(e.message, "project_actions"), "%s", e.message);
    /* nothing was stepped */
    set_actions(env, td, (int64_t[]){ 0, 1, 2, 2 });
    double c = val(td, "observation", 0, 0);
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.observation", 0, 0), c + 1);
    crl_td_unref(td);
    fx_close(&f);

    env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2\nproject_actions = true");
    td = reset_ok(env, NULL);
    set_actions(env, td, (int64_t[]){ 7, -3 });
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 2);
    ck_assert_double_eq(val(td, "next.reward", 1, 0), 0);
    ck_assert_double_eq(val(td, "action", 0, 0), 7); /* the caller's action is left as given */
    crl_td_unref(td);
    fx_close(&f);

    /* float actions: NaN is always an error, out of bounds projects */
    env = fx_env(&f, "backend = countenv\nid = CountBox-v0\nnum_envs = 3\nproject_actions = true");
    td = reset_ok(env, NULL);
    crl_tensor *ba = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 1 }, &e);
    crl_tensor_fill(ba, 0.5);
    crl_tensor_flat_set(ba, 1, NAN);
    assert_ok(crl_td_set(td, "action", ba, &e), e);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID, "env 1: key 'action' holds NaN");
    crl_tensor_flat_set(ba, 1, 5.0);
    step_ok(env, td);
    ck_assert_double_eq(val(td, "next.reward", 1, 0), 1.0);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 0.5);
    crl_tensor_unref(ba);
    crl_td_unref(td);
    fx_close(&f);

    env = fx_env(&f, "backend = countenv\nid = CountBox-v0");
    td = reset_ok(env, NULL);
    ba = crl_tensor_new(CRL_F32, 1, (int64_t[]){ 1 }, &e);
    crl_tensor_fill(ba, -1.5);
    assert_ok(crl_td_set(td, "action", ba, &e), e);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_RANGE, "env 0: key 'action': value -1.5");
    crl_tensor_unref(ba);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(bad_calls)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2");
    crl_td *td = crl_td_new(1, (int64_t[]){ 2 }, &e);
    set_all_actions(env, td, 1);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_INVALID, "never reset");
    crl_td *wrong = crl_td_new(1, (int64_t[]){ 3 }, &e);
    assert_null_err(crl_env_reset(env, wrong, &e), e, CRL_E_SHAPE, "batch shape [3]");
    assert_err(crl_env_step(env, wrong, &e), e, CRL_E_SHAPE, "batch shape");
    assert_err(crl_env_rand_action(env, wrong, &e), e, CRL_E_SHAPE, "batch shape");
    assert_err(crl_env_step(env, NULL, &e), e, CRL_E_INVALID, "NULL");
    assert_err(crl_env_step(NULL, td, &e), e, CRL_E_INVALID, "NULL");
    crl_td_unref(wrong);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST


/* ---- the cached step path ----------------------------------------------------------
 *
 * crl_env_step and step_mdp_into remember a td's layout; these tests hold
 * that path to the general one and make the cache miss in every way. */

/* Step t's actions: a fixed walk through (and, for Box, a bit beyond) the
 * action spec.  Written into the td's own action tensor when there is one. */
static void walk_actions(crl_env *env, crl_td *td, int64_t t)
{
    crl_error e = { 0 };
    crl_tensor *a = crl_td_get(td, "action");
    if (!a) {
        a = crl_spec_zero(crl_env_action_spec(env), &e);
        ck_assert_msg(a != NULL, "%s", e.message);
        assert_ok(crl_td_set(td, "action", a, &e), e);
        crl_tensor_unref(a);
    }
    bool box = crl_dtype_is_float(crl_tensor_dtype(a));
    for (int64_t i = 0; i < crl_tensor_numel(a); i++) {
        int64_t k = t * 7 + i * 3 + t / 5;
        crl_tensor_flat_set(a, i, box ? (double)(k % 9) / 3.0 - 1.25 : (double)(k % 3));
    }
}

typedef struct run_stats {
    uint64_t step_fast, step_slow, mdp_fast, mdp_slow;
} run_stats;

/* `steps` steps of a fresh env from seed 7, each followed by step_mdp_into.
 * reuse: two tds used in turn (the steady state); otherwise every step runs
 * on a clone of the last td and moves into a brand-new one, so every td
 * and tensor is new.  Returns clones of the td after each step and of the
 * destination after each step_mdp. */
static GPtrArray *record_run(const char *lines, int64_t steps, bool reuse, run_stats *st)
{
    fx f;
    crl_env *env = fx_env(&f, lines);
    crl_env_set_seed(env, 7);
    crl_error e = { 0 };
    crl_td *td = reset_ok(env, NULL);
    crl_td *dst = crl_td_new(crl_env_batch_ndim(env), crl_env_batch_shape(env), &e);
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)crl_td_unref);
    for (int64_t t = 0; t < steps; t++) {
        if (!reuse) {
            crl_td *c = crl_td_clone(td, &e);
            ck_assert_ptr_nonnull(c);
            crl_td_unref(td);
            td = c;
            crl_td_unref(dst);
            dst = crl_td_new(crl_env_batch_ndim(env), crl_env_batch_shape(env), &e);
        }
        walk_actions(env, td, t);
        assert_ok(crl_env_step(env, td, &e), e);
        g_ptr_array_add(out, crl_td_clone(td, &e));
        assert_ok(crl_env_step_mdp_into(env, td, dst, &e), e);
        g_ptr_array_add(out, crl_td_clone(dst, &e));
        crl_td *x = td;
        td = dst;
        dst = x;
    }
    st->step_fast = f.env->step_fast;
    st->step_slow = f.env->step_slow;
    st->mdp_fast = f.env->mdp_fast;
    st->mdp_slow = f.env->mdp_slow;
    crl_td_unref(td);
    crl_td_unref(dst);
    fx_close(&f);
    return out;
}

START_TEST(cached_steps_match_general)
{
    static const char *const cases[] = {
        "backend = countenv\nid = Count-v0\nnum_envs = 4\nauto_reset = same_step",
        "backend = countenv\nid = Count-v0\nnum_envs = 2\nauto_reset = same_step\nfrom_pixels = true\npixels_only = false",
        "backend = countenv\nid = Count-v0\nauto_reset = next_step\nframe_skip = 2",
        "backend = countenv\nid = CountNoState-v0\nnum_envs = 3\nauto_reset = same_step",
        "backend = countenv\nid = CountBox-v0\nnum_envs = 3\nauto_reset = next_step\nproject_actions = true",
        "backend = countenv\nid = CountBox-v0\nauto_reset = same_step\nproject_actions = true",
    };
    const int64_t steps = 40;
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        run_stats fast, slow;
        GPtrArray *a = record_run(cases[c], steps, true, &fast);
        GPtrArray *b = record_run(cases[c], steps, false, &slow);
        /* the reused tds went the cached way, the fresh ones never */
        ck_assert_msg(fast.step_fast >= (uint64_t)steps - 3 && fast.mdp_fast >= (uint64_t)steps - 3,
                      "case %zu: step %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT ", mdp %" G_GUINT64_FORMAT
                      "/%" G_GUINT64_FORMAT " cached", c, fast.step_fast, fast.step_fast + fast.step_slow,
                      fast.mdp_fast, fast.mdp_fast + fast.mdp_slow);
        ck_assert_uint_eq(slow.step_fast, 0);
        ck_assert_uint_eq(slow.mdp_fast, 0);
        ck_assert_uint_eq(a->len, b->len);
        for (guint i = 0; i < a->len; i++) {
            /* The reused tds also keep entries of earlier steps (a
             * destination keeps its action and "next"): compare what the
             * general run has. */
            crl_error e = { 0 };
            char **keys = crl_td_leaf_keys(b->pdata[i], &e);
            crl_td *sel = crl_td_select(a->pdata[i], (const char *const *)keys, true, &e);
            ck_assert_msg(sel != NULL, "case %zu, record %u: %s", c, i, e.message);
            if (!crl_td_equal(sel, b->pdata[i]))
                ck_abort_msg("case %zu: %s %u differs", c, i % 2 ? "step_mdp" : "step", i / 2);
            crl_td_unref(sel);
            crl_free(keys);
        }
        g_ptr_array_unref(a);
        g_ptr_array_unref(b);
    }
}
END_TEST

/* What countenv must have done in td's last step (same_step: "next" holds
 * the final values of every env). */
static void check_count_step(const crl_td *td, int64_t num)
{
    for (int64_t i = 0; i < num; i++) {
        ck_assert_double_eq(val(td, "next.reward", i, 0), val(td, "action", i, 0));
        ck_assert_double_eq(val(td, "next.observation", i, 0), val(td, "observation", i, 0) + 1);
        ck_assert_double_eq(val(td, "next.observation", i, 1), (double)i);
        ck_assert_double_eq(val(td, "next.state", i, 0), val(td, "next.observation", i, 0));
    }
}

/* What step_mdp must have put in dst: next's values, or for envs reset
 * in the step, the reset ones. */
static void check_count_mdp(const crl_td *td, const crl_td *dst, int64_t num)
{
    for (int64_t i = 0; i < num; i++) {
        if (val(td, "next.done", i, 0) != 0) {
            ck_assert_double_eq(val(dst, "done", i, 0), 0);
            ck_assert(val(dst, "observation", i, 0) < 3);
        } else {
            ck_assert_double_eq(val(dst, "observation", i, 0), val(td, "next.observation", i, 0));
            ck_assert_double_eq(val(dst, "done", i, 0), 0);
        }
        ck_assert_double_eq(val(dst, "state", i, 0), val(dst, "observation", i, 0));
    }
}

/* One step of td and step_mdp into dst, checked; *fast says whether the
 * step went the cached way. */
static void step_checked(crl_env *env, crl_td *td, crl_td *dst, int64_t t, bool *fast)
{
    crl_error e = { 0 };
    uint64_t before = env->step_fast;
    if (t >= 0)
        walk_actions(env, td, t);
    assert_ok(crl_env_step(env, td, &e), e);
    if (fast)
        *fast = env->step_fast > before;
    check_count_step(td, crl_env_num(env));
    assert_ok(crl_env_step_mdp_into(env, td, dst, &e), e);
    check_count_mdp(td, dst, crl_env_num(env));
}

#define SWAP_TDS(x, y)      \
    do {                    \
        crl_td *swap_ = (x); \
        (x) = (y);          \
        (y) = swap_;        \
    } while (0)

START_TEST(cached_step_honours_replacements)
{
    fx f;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 3\nauto_reset = same_step");
    crl_error e = { 0 };
    crl_td *td = reset_ok(env, NULL);
    crl_td *dst = crl_td_new(1, (int64_t[]){ 3 }, &e);
    bool fast;
    for (int t = 0; t < 4; t++) {
        step_checked(env, td, dst, t, NULL);
        SWAP_TDS(td, dst);
    }
    step_checked(env, td, dst, 4, &fast);
    ck_assert(fast);
    SWAP_TDS(td, dst);

    /* another action tensor (a different pointer): its values are used */
    crl_tensor *a = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 3 }, &e);
    for (int i = 0; i < 3; i++)
        crl_tensor_flat_set(a, i, (double)((i + 2) % 3));
    assert_ok(crl_td_set(td, "action", a, &e), e);
    step_checked(env, td, dst, -1, &fast);
    ck_assert(fast); /* contiguous int64 [3]: checked again, still cached */
    ck_assert_double_eq(val(td, "next.reward", 0, 0), 2);
    crl_tensor_unref(a);
    SWAP_TDS(td, dst);

    /* a strided view of the right dtype and shape: the general path */
    crl_tensor *big = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 6 }, &e);
    for (int i = 0; i < 6; i++)
        crl_tensor_flat_set(big, i, (double)(i % 3));
    crl_tensor *view = crl_tensor_slice(big, 0, 0, 6, 2, &e);
    assert_ok(crl_td_set(td, "action", view, &e), e);
    step_checked(env, td, dst, -1, &fast);
    ck_assert(!fast);
    ck_assert_double_eq(val(td, "next.reward", 1, 0), 2);
    ck_assert_double_eq(val(td, "next.reward", 2, 0), 1);
    assert_ok(crl_td_set(dst, "action", view, &e), e);
    SWAP_TDS(td, dst);
    step_checked(env, td, dst, -1, &fast); /* still not cacheable */
    ck_assert(!fast);
    SWAP_TDS(td, dst);
    crl_tensor_unref(view);
    crl_tensor_unref(big);

    /* a wrong dtype: the same error as ever */
    crl_tensor *fa = crl_tensor_new(CRL_F32, 1, (int64_t[]){ 3 }, &e);
    assert_ok(crl_td_set(td, "action", fa, &e), e);
    crl_tensor_unref(fa);
    assert_err(crl_env_step(env, td, &e), e, CRL_E_DTYPE,
               "step: key 'action': expected dtype int64 but got float32 (see the action spec)");
    assert_ok(crl_td_del(td, "action", &e), e);
    step_checked(env, td, dst, 5, &fast);
    ck_assert(!fast);
    SWAP_TDS(td, dst);
    assert_ok(crl_td_del(td, "action", &e), e);
    step_checked(env, td, dst, 6, &fast);
    ck_assert(!fast);
    SWAP_TDS(td, dst);
    step_checked(env, td, dst, 7, &fast);
    ck_assert(fast);
    SWAP_TDS(td, dst);

    /* a strided next.observation is written in place */
    crl_tensor *obig = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 4 }, &e);
    crl_tensor_fill(obig, -7);
    crl_tensor *oview = crl_tensor_slice(obig, 1, 0, 4, 2, &e);
    assert_ok(crl_td_set(td, "next.observation", oview, &e), e);
    step_checked(env, td, dst, 8, &fast);
    ck_assert(!fast);
    ck_assert_ptr_eq(crl_td_get(td, "next.observation"), oview);
    ck_assert_double_eq(crl_tensor_get_f64(obig, (int64_t[]){ 1, 1 }), -7);
    ck_assert_double_eq(crl_tensor_get_f64(obig, (int64_t[]){ 1, 2 }), 1);
    SWAP_TDS(td, dst);
    crl_tensor_unref(oview);
    crl_tensor_unref(obig);

    /* a next.observation of another dtype is replaced by a fitting copy */
    crl_tensor *o64 = crl_tensor_new(CRL_F64, 2, (int64_t[]){ 3, 2 }, &e);
    assert_ok(crl_td_set(td, "next.observation", o64, &e), e);
    step_checked(env, td, dst, 9, &fast);
    ck_assert(!fast);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "next.observation")), CRL_F32);
    ck_assert_double_eq(crl_tensor_get_f64(o64, (int64_t[]){ 0, 1 }), 0); /* untouched */
    crl_tensor_unref(o64);
    SWAP_TDS(td, dst);
    step_checked(env, td, dst, 10, &fast);
    ck_assert(!fast); /* the other td still had its strided view */
    SWAP_TDS(td, dst);
    step_checked(env, td, dst, 11, &fast);
    ck_assert(fast);
    SWAP_TDS(td, dst);

    /* a deleted output comes back; a whole new "next" is filled */
    assert_ok(crl_td_del(td, "next.reward", &e), e);
    step_checked(env, td, dst, 12, &fast);
    ck_assert(!fast);
    ck_assert_ptr_nonnull(crl_td_get(td, "next.reward"));
    SWAP_TDS(td, dst);
    crl_td *nn = crl_td_new(1, (int64_t[]){ 3 }, &e);
    assert_ok(crl_td_set_td(td, "next", nn, &e), e);
    step_checked(env, td, dst, 13, &fast);
    ck_assert(!fast);
    ck_assert_ptr_eq(crl_td_get_td(td, "next"), nn);
    ck_assert_ptr_nonnull(crl_td_get(nn, "observation"));
    crl_td_unref(nn);
    SWAP_TDS(td, dst);

    /* step_mdp: a root tensor of dst that no longer fits is replaced */
    for (int t = 14; t < 17; t++) {
        step_checked(env, td, dst, t, NULL);
        SWAP_TDS(td, dst);
    }
    uint64_t mdp_fast = env->mdp_fast;
    crl_tensor *r64 = crl_tensor_new(CRL_F64, 2, (int64_t[]){ 3, 2 }, &e);
    assert_ok(crl_td_set(dst, "observation", r64, &e), e);
    crl_tensor_unref(r64);
    step_checked(env, td, dst, 17, NULL);
    ck_assert_uint_eq(env->mdp_fast, mdp_fast);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(dst, "observation")), CRL_F32);
    SWAP_TDS(td, dst);
    step_checked(env, td, dst, 18, NULL);
    ck_assert_uint_eq(env->mdp_fast, mdp_fast + 1);
    SWAP_TDS(td, dst);
    step_checked(env, td, dst, 19, NULL);
    ck_assert_uint_eq(env->mdp_fast, mdp_fast + 2); /* the copy it made fits: cached again */
    SWAP_TDS(td, dst);
    /* ... and one that fits but is another tensor is written into */
    crl_tensor *r32 = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 2 }, &e);
    assert_ok(crl_td_set(dst, "observation", r32, &e), e);
    step_checked(env, td, dst, 20, NULL);
    ck_assert_uint_eq(env->mdp_fast, mdp_fast + 3);
    ck_assert_ptr_eq(crl_td_get(dst, "observation"), r32);
    crl_tensor_unref(r32);
    SWAP_TDS(td, dst);
    /* ... and a missing "next" is the same error as ever */
    crl_td *no_next = crl_td_new(1, (int64_t[]){ 3 }, &e);
    assert_err(crl_env_step_mdp_into(env, no_next, dst, &e), e, CRL_E_NOT_FOUND,
               "step_mdp: the TensorDict has no 'next' entries; call crl_env_step on it first");
    crl_td_unref(no_next);

    /* tds freed and made again (often at the same address) never match a
     * stale slot */
    for (int t = 0; t < 40; t++) {
        crl_td *c = crl_td_clone(td, &e);
        crl_td *d = crl_td_new(1, (int64_t[]){ 3 }, &e);
        step_checked(env, c, d, 30 + t, &fast);
        ck_assert(!fast);
        crl_td_unref(td);
        td = d;
        crl_td_unref(c);
    }
    crl_td_unref(td);
    crl_td_unref(dst);
    fx_close(&f);
}
END_TEST

/* Step td expecting an error; returns its message. */
static char *step_error(crl_env *env, crl_td *td, int code)
{
    crl_error e = { 0 };
    int rc = crl_env_step(env, td, &e);
    ck_assert_msg(rc == code, "step gave %s, want %s: %s", crl_status_name(rc), crl_status_name(code), e.message);
    return g_strdup(e.message);
}

/* A bad action errors on the cached path exactly as on the general one. */
static void bad_action_both_ways(crl_env *env, crl_td *td, crl_tensor *a, int64_t pos, double v, int code,
                                 const char *needle)
{
    crl_error e = { 0 };
    double old = crl_tensor_flat_get(a, pos);
    uint64_t fast = env->step_fast, slow = env->step_slow;
    crl_tensor_flat_set(a, pos, v);
    char *m_fast = step_error(env, td, code);
    ck_assert_uint_eq(env->step_fast, fast + 1);
    crl_td *c = crl_td_clone(td, &e);
    char *m_slow = step_error(env, c, code);
    ck_assert_uint_eq(env->step_slow, slow + 1);
    ck_assert_str_eq(m_fast, m_slow);
    ck_assert_msg(strstr(m_fast, needle), "message '%s' lacks '%s'", m_fast, needle);
    crl_td_unref(c);
    g_free(m_fast);
    g_free(m_slow);
    crl_tensor_flat_set(a, pos, old);
    step_ok(env, td);
}

START_TEST(cached_step_rejects_bad_actions)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = fx_env(&f, "backend = countenv\nid = CountBox-v0\nnum_envs = 3\nauto_reset = same_step");
    crl_td *td = reset_ok(env, NULL);
    crl_tensor *a = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 1 }, &e);
    crl_tensor_fill(a, 0.5);
    assert_ok(crl_td_set(td, "action", a, &e), e);
    step_ok(env, td);
    step_ok(env, td);
    bad_action_both_ways(env, td, a, 1, NAN, CRL_E_INVALID,
                         "step: env 1: key 'action' holds NaN (element 0 of that env's action); check the policy");
    bad_action_both_ways(env, td, a, 2, 1.5, CRL_E_RANGE, "step: env 2: key 'action': value 1.5 at index [0]");
    bad_action_both_ways(env, td, a, 0, -INFINITY, CRL_E_RANGE, "env 0: key 'action': value -inf");
    bad_action_both_ways(env, td, a, 0, (double)nextafterf(1.0f, 2.0f), CRL_E_RANGE, "env 0: key 'action'");
    /* the bounds themselves are in */
    crl_tensor_flat_set(a, 0, -1.0);
    crl_tensor_flat_set(a, 1, 1.0);
    uint64_t fast = env->step_fast;
    step_ok(env, td);
    ck_assert_uint_eq(env->step_fast, fast + 1);
    ck_assert_double_eq(val(td, "next.reward", 0, 0), -1.0);
    crl_tensor_unref(a);
    crl_td_unref(td);
    fx_close(&f);

    env = fx_env(&f, "backend = countenv\nid = Count-v0\nauto_reset = same_step");
    td = reset_ok(env, NULL);
    set_all_actions(env, td, 1);
    step_ok(env, td);
    step_ok(env, td);
    a = crl_td_get(td, "action");
    bad_action_both_ways(env, td, a, 0, 3, CRL_E_RANGE, "step: env 0: key 'action': value 3");
    bad_action_both_ways(env, td, a, 0, -1, CRL_E_RANGE, "value -1");
    crl_td_unref(td);
    fx_close(&f);

    /* projected on the cached path as on the general one */
    env = fx_env(&f, "backend = countenv\nid = CountBox-v0\nnum_envs = 2\nproject_actions = true\n"
                     "auto_reset = same_step");
    td = reset_ok(env, NULL);
    a = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 2, 1 }, &e);
    crl_tensor_fill(a, 0.25);
    assert_ok(crl_td_set(td, "action", a, &e), e);
    step_ok(env, td);
    crl_tensor_flat_set(a, 1, 3.0);
    fast = env->step_fast;
    step_ok(env, td);
    ck_assert_uint_eq(env->step_fast, fast + 1);
    ck_assert_double_eq(val(td, "next.reward", 1, 0), 1.0);
    ck_assert_double_eq(val(td, "action", 1, 0), 3.0); /* the caller's action is left as given */
    crl_tensor_unref(a);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- the steady state allocates nothing --------------------------------------------- */

static long count_steps(crl_env *env, crl_td *td, crl_td *root, int n)
{
    crl_error e = { 0 };
    alloc_count_start();
    int rc = CRL_OK;
    for (int i = 0; i < n && !rc; i++) {
        rc = crl_env_rand_action(env, td, &e);
        if (!rc)
            rc = crl_env_step(env, td, &e);
        if (!rc)
            rc = crl_env_step_mdp_into(env, td, root, &e);
    }
    long calls = alloc_count_stop();
    ck_assert_msg(rc == CRL_OK, "%s", e.message);
    return calls;
}

static void zero_alloc_case(const char *lines)
{
    fx f;
    crl_env *env = fx_env(&f, lines);
    crl_td *td = reset_ok(env, NULL);
    crl_error e = { 0 };
    crl_td *root = crl_td_new(crl_env_batch_ndim(env), crl_env_batch_shape(env), &e);
    count_steps(env, td, root, 50); /* warm up: every key exists */
    ck_assert_int_eq(count_steps(env, td, root, 10000), 0);
    /* in place, as rollout does */
    count_steps(env, td, td, 5);
    ck_assert_int_eq(count_steps(env, td, td, 10000), 0);
    crl_td_unref(root);
    crl_td_unref(td);
    fx_close(&f);
}

START_TEST(zero_alloc_steady_state)
{
    if (!alloc_count_works())
        return;

    zero_alloc_case("backend = countenv\nid = Count-v0\nnum_envs = 4\nauto_reset = same_step\nfrom_pixels = true");
    zero_alloc_case("backend = countenv\nid = Count-v0\nauto_reset = next_step\nframe_skip = 3");
    zero_alloc_case("backend = countenv\nid = CountNoState-v0\nnum_envs = 3\nauto_reset = same_step\n"
                    "frame_skip = 2");
    zero_alloc_case("backend = countenv\nid = CountBox-v0\nnum_envs = 2\nauto_reset = next_step\n"
                    "project_actions = true");
}
END_TEST

START_TEST(rollout_allocates_per_rollout_not_per_step)
{
    fx f;
    if (!alloc_count_works())
        return;
    crl_env *env = fx_env(&f, "backend = countenv\nid = Count-v0\nnum_envs = 2");
    crl_error e = { 0 };
    long calls[2];
    int64_t steps[2] = { 10, 2000 };
    for (int k = 0; k < 2; k++) {
        crl_env_set_seed(env, 1);
        alloc_count_start();
        crl_td *r = crl_env_rollout(env, steps[k], NULL, NULL, false, true, NULL, &e);
        calls[k] = alloc_count_stop();
        ck_assert_msg(r != NULL, "%s", e.message);
        ck_assert_int_eq(crl_td_batch_shape(r)[1], steps[k]);
        crl_td_unref(r);
    }
    ck_assert_int_eq(calls[0], calls[1]);
    fx_close(&f);
}
END_TEST

static Suite *env_suite(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, options_table);
    tcase_add_test(tc, single_env_basics);
    tcase_add_test(tc, spec_getters_as_torchrl);
    tcase_add_test(tc, seed_chain_readme_figures);
    tcase_add_test(tc, batched_env_basics);
    tcase_add_test(tc, specs_repr_layout);
    tcase_add_test(tc, backend_options_and_schema);
    tcase_add_test(tc, config_errors);
    tcase_add_test(tc, env_desc_parse_once_make_many);
    tcase_add_test(tc, env_desc_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("step");
    tcase_add_test(tc, reset_layout);
    tcase_add_test(tc, step_layout_and_values);
    tcase_add_test(tc, step_mdp_semantics);
    tcase_add_test(tc, seed_determinism_and_chain);
    tcase_add_test(tc, frame_skip_sums_and_stops);
    tcase_add_test(tc, autoreset_off);
    tcase_add_test(tc, autoreset_next_step);
    tcase_add_test(tc, autoreset_same_step);
    tcase_add_test(tc, partial_reset);
    tcase_add_test(tc, reset_from_state_replays);
    tcase_add_test(tc, return_state_off);
    tcase_add_test(tc, per_env_ids);
    tcase_add_test(tc, max_episode_steps_truncates);
    tcase_add_test(tc, from_pixels_keys);
    suite_add_tcase(s, tc);

    tc = tcase_create("rollout");
    tcase_add_test(tc, rollout_single);
    tcase_add_test(tc, rollout_batched);
    tcase_add_test(tc, check_specs);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, bad_actions);
    tcase_add_test(tc, cached_steps_match_general);
    tcase_add_test(tc, cached_step_honours_replacements);
    tcase_add_test(tc, cached_step_rejects_bad_actions);
    tcase_add_test(tc, bad_calls);
    suite_add_tcase(s, tc);

    tc = tcase_create("alloc");
    tcase_add_test(tc, zero_alloc_steady_state);
    tcase_add_test(tc, rollout_allocates_per_rollout_not_per_step);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(env_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
