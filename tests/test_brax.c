/* Check suite for the brax plugin: Brax's envs API on JAX (tests/python/fake_brax, fake_jax) through the host env
 * API, step for step against tests/python/brax_reference.py, the State pytree as crl's state spec. */
#include <check.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/rng.h>

#include "pyenv-fixture.h"

#define PYDIR TEST_SRCDIR "/python"
#define REFERENCE PYDIR "/brax_reference.py"
#define PYPATH PYDIR "/fake_brax:" PYDIR "/fake_jax"

typedef crl_test_pyenv fx;

/* A host with brax loaded and the env of "[env] backend = brax" plus env_ini.  Returns the env's
 * status; a failure before the env (config, host, plugin) fails the test. */
static int fx_open(fx *f, const char *env_ini)
{
    char *ini = g_strdup_printf("[plugin.brax]\npython_path = %s/fake_brax, %s/fake_jax\n\n"
                                "[env]\nbackend = brax\n%s\n", PYDIR, PYDIR, env_ini);
    int rc = crl_test_pyenv_open(f, ini, (const char *const[]){ "brax", NULL });
    g_free(ini);
    return rc;
}

static void fx_must_open(fx *f, const char *env_ini)
{
    crl_test_pyenv_expect_made(f, fx_open(f, env_ini), env_ini);
}

static void expect_make_error(const char *env_ini, int code, const char *needle)
{
    fx f;
    crl_test_pyenv_expect_failed(&f, fx_open(&f, env_ini), code, (const char *const[]){ needle, NULL });
    crl_test_pyenv_close(&f);
}

/* The reference's lines (argv after the script). */
static char **reference(const char *const *args)
{
    return crl_test_python_lines(CRL_PYTHON, REFERENCE, PYPATH, args);
}

/* The reference's action(t, i). */
static float action_of(int64_t t, int64_t i)
{
    return (float)(((5 * t + 3 * i) % 9) / 4.0 - 1.0);
}

static crl_tensor *actions(int64_t num, int64_t t, crl_error *err)
{
    crl_tensor *a = crl_tensor_new(CRL_F32, 2, (int64_t[]){ num, 1 }, err);
    ck_assert(a);
    for (int64_t i = 0; i < num; i++)
        ((float *)crl_tensor_data(a))[i] = action_of(t, i);
    return a;
}

/* num envs on `executor` (workers blocks), seed, `steps` steps through step_and_maybe_reset against the
 * reference, line by line. */
static void check_sync(const char *executor, int64_t workers, int64_t num, int64_t steps, int64_t max_steps,
                       uint64_t seed)
{
    char nw[48] = "";
    if (workers)
        g_snprintf(nw, sizeof nw, "num_workers = %lld", (long long)workers);
    char *ini = g_strdup_printf("id = inverted_pendulum\nnum_envs = %lld\nexecutor = %s\n%s\nmax_episode_steps = "
                                "%lld\nauto_reset = next_step\n", (long long)num, executor, nw, (long long)max_steps);
    fx f;
    fx_must_open(&f, ini);
    g_free(ini);
    int64_t nb = workers ? workers : 1;
    GString *blocks = g_string_new(NULL);
    uint64_t s = seed;
    for (int64_t b = 0, start = 0; b < nb; b++) {
        int64_t count = num / nb + (b < num % nb ? 1 : 0);
        uint64_t bs = s;
        for (int64_t k = 0; k < count; k++)
            s = crl_seed_next(s);
        g_string_append_printf(blocks, "%s%lld:%lld:%llu", b ? "," : "", (long long)start, (long long)count,
                               (unsigned long long)bs);
        start += count;
    }
    char st[32], ms[32];
    g_snprintf(st, sizeof st, "%lld", (long long)steps);
    g_snprintf(ms, sizeof ms, "%lld", (long long)max_steps);
    char **ref = reference((const char *const[]){ "inverted_pendulum", st, ms, blocks->str, NULL });
    g_string_free(blocks, TRUE);

    crl_env_set_seed(f.env, seed);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td, "reset: %s", f.err.message);
    crl_td *next = crl_td_new(1, (int64_t[]){ num }, &f.err);
    int64_t terms = 0, truncs = 0;
    size_t line = 0;
    for (int64_t t = 0; t < steps; t++) {
        crl_tensor *a = actions(num, t, &f.err);
        ck_assert_int_eq(crl_td_set(td, "action", a, &f.err), CRL_OK);
        crl_tensor_unref(a);
        int rc = crl_env_step_and_maybe_reset(f.env, td, next, &f.err);
        ck_assert_msg(rc == CRL_OK, "step %lld: %s", (long long)t, f.err.message);
        for (int64_t i = 0; i < num; i++, line++) {
            GString *got = g_string_new(NULL);
            g_string_append_printf(got, "%lld %lld | ", (long long)t, (long long)i);
            crl_test_fmt_row(got, crl_td_get(td, "next.observation"), i);
            g_string_append(got, " | ");
            crl_test_fmt_row(got, crl_td_get(td, "next.reward"), i);
            g_string_append(got, " ");
            crl_test_fmt_row(got, crl_td_get(td, "next.terminated"), i);
            g_string_append(got, " ");
            crl_test_fmt_row(got, crl_td_get(td, "next.truncated"), i);
            g_string_append(got, " | ");
            crl_test_fmt_row(got, crl_td_get(next, "observation"), i);
            ck_assert_msg(ref[line] && !strcmp(got->str, ref[line]), "executor %s: step %lld env %lld:\n"
                          "  crl:       %s\n  reference: %s", executor, (long long)t, (long long)i, got->str,
                          ref[line] ? ref[line] : "(none)");
            terms += ((const uint8_t *)crl_tensor_data(crl_td_get(td, "next.terminated")))[i] != 0;
            truncs += ((const uint8_t *)crl_tensor_data(crl_td_get(td, "next.truncated")))[i] != 0;
            g_string_free(got, TRUE);
        }
        crl_td *tmp = td;
        td = next;
        next = tmp;
    }
    ck_assert_msg(terms > 0 && truncs > 0, "%lld terminations and %lld truncations in %lld steps: the resets were "
                  "not both compared", (long long)terms, (long long)truncs, (long long)steps);
    g_strfreev(ref);
    crl_td_unref(td);
    crl_td_unref(next);
    crl_test_pyenv_close(&f);
}

START_TEST(test_reference_inline)
{
    check_sync("inline", 0, 4, 120, 30, 5);
    check_sync("inline", 0, 2, 120, 25, 6);
}
END_TEST

START_TEST(test_reference_executors)
{
    check_sync("serial", 2, 5, 100, 30, 7);
    check_sync("threads", 2, 4, 100, 25, 8);
    check_sync("processes", 2, 4, 100, 25, 9);
}
END_TEST

START_TEST(test_specs)
{
    fx f;
    fx_must_open(&f, "id = inverted_pendulum\nnum_envs = 3\nreturn_state = true");
    const crl_spec *o = crl_spec_composite_get(crl_env_observation_spec(f.env), "observation");
    ck_assert(o && crl_spec_dtype(o) == CRL_F32 && crl_spec_shape(o)[0] == 3 && crl_spec_shape(o)[1] == 4);
    const crl_spec *a = crl_spec_composite_get(crl_env_full_action_spec(f.env), "action");
    ck_assert(a && crl_spec_get_kind(a) == CRL_SPEC_BOUNDED && crl_spec_dtype(a) == CRL_F32);
    ck_assert_int_eq(crl_spec_shape(a)[1], 1);
    const crl_spec *r = crl_spec_composite_get(crl_env_full_reward_spec(f.env), "reward");
    ck_assert(r && crl_spec_ndim(r) == 2 && crl_spec_shape(r)[1] == 1);
    const crl_spec *st = crl_env_state_spec(f.env);
    static const char *const keys[] = { "state.obs", "state.reward", "state.done", "state.pipeline_state.q",
                                        "state.pipeline_state.qd", "state.metrics.distance", "state.info.rng" };
    for (size_t k = 0; k < G_N_ELEMENTS(keys); k++)
        ck_assert_msg(crl_spec_composite_get(st, keys[k]), "no state leaf '%s'", keys[k]);
    /* JAX's uint32 keys widen to int64; per-env scalars stay [num]. */
    ck_assert_int_eq(crl_spec_dtype(crl_spec_composite_get(st, "state.info.rng")), CRL_I64);
    ck_assert_int_eq(crl_spec_ndim(crl_spec_composite_get(st, "state.reward")), 1);
    ck_assert_msg(crl_env_check_specs(f.env, 30, &f.err) == CRL_OK, "check_specs: %s", f.err.message);
    crl_test_pyenv_close(&f);
}
END_TEST

static crl_td *run(fx *f, int64_t num, uint64_t seed, int64_t steps)
{
    crl_env_set_seed(f->env, seed);
    crl_td *td = crl_env_reset(f->env, NULL, &f->err);
    ck_assert_msg(td, "%s", f->err.message);
    for (int64_t t = 0; t < steps; t++) {
        crl_tensor *a = actions(num, t, &f->err);
        ck_assert_int_eq(crl_td_set(td, "action", a, &f->err), CRL_OK);
        crl_tensor_unref(a);
        ck_assert_msg(crl_env_step_and_maybe_reset(f->env, td, td, &f->err) == CRL_OK, "%s", f->err.message);
    }
    return td;
}

static void expect_same(const crl_td *a, const crl_td *b, const char *key, int64_t row)
{
    GString *x = g_string_new(NULL), *y = g_string_new(NULL);
    crl_test_fmt_row(x, crl_td_get(a, key), row);
    crl_test_fmt_row(y, crl_td_get(b, key), row);
    ck_assert_msg(!strcmp(x->str, y->str), "'%s' row %lld: %s vs %s", key, (long long)row, x->str, y->str);
    g_string_free(x, TRUE);
    g_string_free(y, TRUE);
}

/* The dotted keys of every leaf of a Composite. */
static void leaf_keys(const crl_spec *c, const char *prefix, GPtrArray *out)
{
    for (size_t k = 0; k < crl_spec_composite_len(c); k++) {
        char *key = g_strconcat(prefix, *prefix ? "." : "", crl_spec_composite_key_at(c, k), NULL);
        const crl_spec *sub = crl_spec_composite_at(c, k);
        if (crl_spec_get_kind(sub) == CRL_SPEC_COMPOSITE) {
            leaf_keys(sub, key, out);
            g_free(key);
        } else {
            g_ptr_array_add(out, key);
        }
    }
}

/* A state taken from one env and given to another (reset_from_state) continues exactly as the first. */
START_TEST(test_reset_from_state)
{
    fx fa, fb;
    fx_must_open(&fa, "id = inverted_pendulum\nnum_envs = 3\nauto_reset = next_step\nreturn_state = true");
    fx_must_open(&fb, "id = inverted_pendulum\nnum_envs = 3\nauto_reset = next_step\nreturn_state = true");
    crl_td *ta = run(&fa, 3, 1, 7);
    crl_td *tb = run(&fb, 3, 99, 3);
    GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
    leaf_keys(crl_env_state_spec(fb.env), "", keys);
    ck_assert_uint_eq(keys->len, 7);
    for (guint k = 0; k < keys->len; k++) {
        const char *key = keys->pdata[k];
        crl_tensor *v = crl_td_get(ta, key);
        ck_assert_msg(v, "the root has no '%s'", key);
        crl_tensor *c = crl_tensor_clone(v, &fb.err);
        ck_assert_int_eq(crl_td_set(tb, key, c, &fb.err), CRL_OK);
        crl_tensor_unref(c);
    }
    g_ptr_array_unref(keys);
    /* Env 1 alone first: the others keep their own state. */
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, (int64_t[]){ 3, 1 }, &fb.err);
    ((uint8_t *)crl_tensor_data(m))[1] = 1;
    ck_assert_int_eq(crl_td_set(tb, "_reset", m, &fb.err), CRL_OK);
    crl_tensor_unref(m);
    crl_td *r = crl_env_reset_from_state(fb.env, tb, &fb.err);
    ck_assert_msg(r, "reset_from_state: %s", fb.err.message);
    crl_td_unref(r);
    expect_same(ta, tb, "observation", 1);
    GString *x = g_string_new(NULL), *y = g_string_new(NULL);
    crl_test_fmt_row(x, crl_td_get(ta, "observation"), 0);
    crl_test_fmt_row(y, crl_td_get(tb, "observation"), 0);
    ck_assert_msg(strcmp(x->str, y->str) != 0, "env 0 took the given state though it was not in _reset");
    g_string_free(x, TRUE);
    g_string_free(y, TRUE);
    /* Then all, and both step alike from there. */
    r = crl_env_reset_from_state(fb.env, tb, &fb.err);
    ck_assert_msg(r, "reset_from_state: %s", fb.err.message);
    crl_td_unref(r);
    for (int64_t t = 0; t < 12; t++) {
        crl_tensor *a = actions(3, t + 40, &fa.err);
        ck_assert_int_eq(crl_td_set(ta, "action", a, &fa.err), CRL_OK);
        ck_assert_int_eq(crl_td_set(tb, "action", a, &fb.err), CRL_OK);
        crl_tensor_unref(a);
        ck_assert_msg(crl_env_step(fa.env, ta, &fa.err) == CRL_OK, "%s", fa.err.message);
        ck_assert_msg(crl_env_step(fb.env, tb, &fb.err) == CRL_OK, "%s", fb.err.message);
        for (int64_t i = 0; i < 3; i++) {
            expect_same(ta, tb, "next.observation", i);
            expect_same(ta, tb, "next.reward", i);
            expect_same(ta, tb, "next.terminated", i);
            expect_same(ta, tb, "next.state.pipeline_state.qd", i);
        }
        bool any = false;
        for (int64_t i = 0; i < 3; i++)
            any |= ((const uint8_t *)crl_tensor_data(crl_td_get(ta, "next.done")))[i] != 0;
        if (any)
            break;
        crl_td *na = crl_env_step_mdp(fa.env, ta, &fa.err), *nb = crl_env_step_mdp(fb.env, tb, &fb.err);
        ck_assert(na && nb);
        crl_td_unref(ta);
        crl_td_unref(tb);
        ta = na;
        tb = nb;
    }
    crl_td_unref(ta);
    crl_td_unref(tb);
    crl_test_pyenv_close(&fa);
    crl_test_pyenv_close(&fb);
}
END_TEST

START_TEST(test_errors)
{
    expect_make_error("id = inverted_pendulm", CRL_E_NOT_FOUND, "did you mean inverted_pendulum");
    expect_make_error("id = inverted_pendulum\nkwargs.no_such = 1", CRL_E_INVALID, "no_such");
    expect_make_error("id = inverted_pendulum\nkwargs.1st = 1", CRL_E_CONFIG,
                      "[env] kwargs.1st: '1st' is not a Python keyword argument name");
    /* The state spec is required from a reset_from_state: a missing leaf is named. */
    fx f;
    fx_must_open(&f, "id = inverted_pendulum\nnum_envs = 2");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert(td);
    crl_td *bare = crl_td_new(1, (int64_t[]){ 2 }, &f.err);
    ck_assert_ptr_null(crl_env_reset_from_state(f.env, bare, &f.err));
    EXPECT_HAS(f.err.message, "state.");
    crl_td_unref(bare);
    crl_td_unref(td);
    /* Brax envs do not render. */
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 2, 2, 3 }, &f.err);
    ck_assert_int_eq(crl_env_render(f.env, 0, frame, &f.err), CRL_E_UNSUPPORTED);
    crl_tensor_unref(frame);
    crl_test_pyenv_close(&f);
}
END_TEST

static Suite *brax_suite(void)
{
    Suite *s = suite_create("brax");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reference_inline);
    tcase_add_test(tc, test_reference_executors);
    suite_add_tcase(s, tc);
    tc = tcase_create("behaviour");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_specs);
    tcase_add_test(tc, test_reset_from_state);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!getenv("CRL_PLUGIN_PATH"))
        setenv("CRL_PLUGIN_PATH", BRAX_PLUGIN_DIR, 1);
    if (getenv("CRL_TEST_VALGRIND"))
        setenv("PYTHONMALLOC", "malloc", 1);
    setenv("PYTHONWARNINGS", "ignore", 1);
    SRunner *sr = srunner_create(brax_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
