/* Check suite for the envpool plugin: EnvPool's API (tests/python/fake_envpool) through the host env API,
 * step for step against tests/python/envpool_reference.py driving the same module. */
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
#define REFERENCE PYDIR "/envpool_reference.py"
#define PYPATH PYDIR "/fake_envpool:" PYDIR "/fake_gymnasium:" PYDIR "/fake_gym:" PYDIR

typedef crl_test_pyenv fx;

/* A host with envpool loaded and the env of "[env] backend = envpool" plus env_ini.  Returns the env's
 * status; a failure before the env (config, host, plugin) fails the test. */
static int fx_open(fx *f, const char *env_ini)
{
    char *ini = g_strdup_printf("[plugin.envpool]\npython_path = %s/fake_envpool, %s/fake_gymnasium, %s/fake_gym, %s\n\n"
                                "[env]\nbackend = envpool\n%s\n", PYDIR, PYDIR, PYDIR, PYDIR, env_ini);
    int rc = crl_test_pyenv_open(f, ini, (const char *const[]){ "envpool", NULL });
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

static bool continuous(const char *task)
{
    return strcmp(task, "CartPole-v1") != 0;
}

/* The reference's action(t, i). */
static void put_action(crl_tensor *a, const char *task, int64_t t, int64_t i, int64_t row)
{
    if (continuous(task))
        ((float *)crl_tensor_data(a))[row] = (float)(((7 * t + 3 * i) % 9) / 4.0 - 1.0);
    else
        ((int64_t *)crl_tensor_data(a))[row] = (3 * t + 5 * i + t / 7) % 2;
}

/* num envs of task on `executor` (inline, serial, threads with num_workers), seed S, `steps` steps through
 * step_and_maybe_reset, each line compared with the reference's. */
static void check_sync(const char *task, const char *env_type, const char *executor, int64_t workers, int64_t num,
                       int64_t steps, int64_t max_steps, uint64_t seed)
{
    char nw[48] = "";
    if (workers)
        g_snprintf(nw, sizeof nw, "num_workers = %lld", (long long)workers);
    char *ini = g_strdup_printf("id = %s\nnum_envs = %lld\nenv_type = %s\nexecutor = %s\n%s\nmax_episode_steps = "
                                "%lld\nauto_reset = next_step\n", task, (long long)num, env_type, executor, nw,
                                (long long)max_steps);
    fx f;
    fx_must_open(&f, ini);
    g_free(ini);
    /* The reference's blocks: crl's executor splits num envs into `workers` blocks, each seeded from the chain. */
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
    char **ref = reference((const char *const[]){ "sync", task, env_type, st, ms, blocks->str, NULL });
    g_string_free(blocks, TRUE);

    crl_env_set_seed(f.env, seed);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td, "reset: %s", f.err.message);
    int64_t one[1] = { num };
    crl_td *next = crl_td_new(1, one, &f.err);
    int64_t ends = 0;
    size_t line = 0;
    for (int64_t t = 0; t < steps; t++) {
        crl_tensor *a = crl_tensor_new(continuous(task) ? CRL_F32 : CRL_I64, continuous(task) ? 2 : 1,
                                       (int64_t[]){ num, 1 }, &f.err);
        for (int64_t i = 0; i < num; i++)
            put_action(a, task, t, i, i);
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
            ck_assert_msg(ref[line] && !strcmp(got->str, ref[line]), "%s %s, executor %s: step %lld env %lld:\n"
                          "  crl:       %s\n  reference: %s", task, env_type, executor, (long long)t, (long long)i,
                          got->str, ref[line] ? ref[line] : "(none)");
            ends += ((const uint8_t *)crl_tensor_data(crl_td_get(td, "next.done")))[i] != 0;
            g_string_free(got, TRUE);
        }
        crl_td *tmp = td;
        td = next;
        next = tmp;
    }
    ck_assert_msg(ends > 0, "%s: no episode ended in %lld steps: the resets were not compared", task, (long long)steps);
    g_strfreev(ref);
    crl_td_unref(td);
    crl_td_unref(next);
    crl_test_pyenv_close(&f);
}

START_TEST(test_sync_inline)
{
    check_sync("CartPole-v1", "gymnasium", "inline", 0, 5, 120, 500, 7);
    check_sync("CartPole-v1", "gym", "inline", 0, 4, 90, 500, 8);
    check_sync("Pendulum-v1", "gymnasium", "inline", 0, 3, 70, 25, 9);
    check_sync("Pendulum-v1", "gym", "inline", 0, 3, 70, 30, 10);
}
END_TEST

START_TEST(test_sync_executors)
{
    check_sync("CartPole-v1", "gymnasium", "serial", 2, 5, 80, 500, 11);
    check_sync("CartPole-v1", "gymnasium", "threads", 2, 5, 80, 500, 12);
    check_sync("Pendulum-v1", "gym", "threads", 3, 4, 60, 20, 13);
    /* Worker processes re-exec'd with their own interpreter, each with the pool of its block. */
    check_sync("CartPole-v1", "gymnasium", "processes", 2, 5, 80, 500, 14);
    check_sync("Pendulum-v1", "gym", "processes", 2, 4, 60, 20, 15);
}
END_TEST

/* batch_size < num_envs on the threads executor: send/recv, each env's results against a pool of its own. */
static void check_async(const char *task, int64_t num, int64_t batch, int64_t rounds, int64_t max_steps, uint64_t seed)
{
    char *ini = g_strdup_printf("id = %s\nnum_envs = %lld\nexecutor = threads\nnum_workers = 2\nbatch_size = %lld\n"
                                "max_episode_steps = %lld\n", task, (long long)num, (long long)batch,
                                (long long)max_steps);
    fx f;
    fx_must_open(&f, ini);
    g_free(ini);
    crl_env_set_seed(f.env, seed);
    ck_assert_msg(crl_env_async_reset(f.env, &f.err) == CRL_OK, "async_reset: %s", f.err.message);
    GPtrArray **per = g_new0(GPtrArray *, num);
    int64_t *sent = g_new0(int64_t, num), *steps = g_new0(int64_t, num);
    bool *ended = g_new0(bool, num);
    for (int64_t i = 0; i < num; i++)
        per[i] = g_ptr_array_new_with_free_func(g_free);
    for (int64_t r = 0; r < rounds; r++) {
        crl_td *got = crl_env_recv(f.env, &f.err);
        ck_assert_msg(got, "recv %lld: %s", (long long)r, f.err.message);
        const int64_t *ids = crl_tensor_data(crl_td_get(got, "env_id"));
        crl_td *act = crl_td_new(1, (int64_t[]){ batch }, &f.err);
        crl_tensor *idt = crl_tensor_new(CRL_I64, 1, (int64_t[]){ batch }, &f.err);
        crl_tensor *a = crl_tensor_new(continuous(task) ? CRL_F32 : CRL_I64, continuous(task) ? 2 : 1,
                                       (int64_t[]){ batch, 1 }, &f.err);
        for (int64_t k = 0; k < batch; k++) {
            int64_t i = ids[k];
            GString *s = g_string_new(NULL);
            g_string_append_printf(s, "%lld %lld | ", (long long)i, (long long)sent[i]);
            crl_test_fmt_row(s, crl_td_get(got, "observation"), k);
            g_string_append(s, " | ");
            crl_test_fmt_row(s, crl_td_get(got, "reward"), k);
            g_string_append(s, " ");
            crl_test_fmt_row(s, crl_td_get(got, "terminated"), k);
            g_string_append(s, " ");
            crl_test_fmt_row(s, crl_td_get(got, "truncated"), k);
            bool end = ((const uint8_t *)crl_tensor_data(crl_td_get(got, "done")))[k] != 0;
            g_ptr_array_add(per[i], g_string_free(s, FALSE));
            /* The next send of an ended env is crl's reset of it (its action ignored). */
            if (ended[i])
                steps[i] = 0;
            ended[i] = end;
            ((int64_t *)crl_tensor_data(idt))[k] = i;
            put_action(a, task, steps[i], i, k);
            if (!end)
                steps[i]++;
            sent[i]++;
        }
        ck_assert_int_eq(crl_td_set(act, "env_id", idt, &f.err), CRL_OK);
        ck_assert_int_eq(crl_td_set(act, "action", a, &f.err), CRL_OK);
        ck_assert_msg(crl_env_send(f.env, act, &f.err) == CRL_OK, "send: %s", f.err.message);
        crl_tensor_unref(idt);
        crl_tensor_unref(a);
        crl_td_unref(act);
        crl_td_unref(got);
    }
    int64_t most = 0;
    GString *seeds = g_string_new(NULL);
    uint64_t s = seed;
    for (int64_t i = 0; i < num; i++) {
        most = MAX(most, (int64_t)per[i]->len);
        g_string_append_printf(seeds, "%s%llu", i ? "," : "", (unsigned long long)s);
        s = crl_seed_next(s);
    }
    char ns[32], ms[32];
    g_snprintf(ns, sizeof ns, "%lld", (long long)most);
    g_snprintf(ms, sizeof ms, "%lld", (long long)max_steps);
    char **ref = reference((const char *const[]){ "async", task, "gymnasium", ns, ms, seeds->str, NULL });
    g_string_free(seeds, TRUE);
    /* The reference lists env k's results in order, most + 1 of them per env. */
    int64_t compared = 0;
    for (int64_t i = 0; i < num; i++) {
        ck_assert_msg(per[i]->len > 1, "env %lld was received only %u times", (long long)i, per[i]->len);
        for (guint j = 0; j < per[i]->len; j++, compared++) {
            const char *want = ref[i * (most + 1) + j];
            ck_assert_msg(want && !strcmp(want, per[i]->pdata[j]), "%s async env %lld result %u:\n  crl:       %s\n"
                          "  reference: %s", task, (long long)i, j, (const char *)per[i]->pdata[j],
                          want ? want : "(none)");
        }
        g_ptr_array_unref(per[i]);
    }
    ck_assert_int_eq(compared, rounds * batch);
    g_strfreev(ref);
    g_free(per);
    g_free(sent);
    g_free(steps);
    g_free(ended);
    crl_test_pyenv_close(&f);
}

/* batch_size < num_envs with executor = inline: EnvPool's own send/recv, every recv against the reference in
 * order. */
static void check_native(const char *task, const char *env_type, int64_t num, int64_t batch, int64_t rounds,
                         int64_t max_steps, uint64_t seed)
{
    char *ini = g_strdup_printf("id = %s\nnum_envs = %lld\nbatch_size = %lld\nenv_type = %s\nmax_episode_steps = "
                                "%lld\n", task, (long long)num, (long long)batch, env_type, (long long)max_steps);
    fx f;
    fx_must_open(&f, ini);
    g_free(ini);
    ck_assert_int_eq(crl_env_batch_size(f.env), batch);
    char rs[32], ms[32], spec[96];
    g_snprintf(rs, sizeof rs, "%lld", (long long)rounds);
    g_snprintf(ms, sizeof ms, "%lld", (long long)max_steps);
    g_snprintf(spec, sizeof spec, "%lld:%lld:%llu", (long long)num, (long long)batch, (unsigned long long)seed);
    char **ref = reference((const char *const[]){ "native", task, env_type, rs, ms, spec, NULL });
    /* Sync calls are refused on an async env. */
    ck_assert_ptr_null(crl_env_reset(f.env, NULL, &f.err));
    EXPECT_HAS(f.err.message, "crl_env_async_reset");
    crl_env_set_seed(f.env, seed);
    ck_assert_msg(crl_env_async_reset(f.env, &f.err) == CRL_OK, "async_reset: %s", f.err.message);
    int64_t *count = g_new0(int64_t, num), *steps = g_new0(int64_t, num), ends = 0;
    bool *ended = g_new0(bool, num);
    size_t line = 0;
    for (int64_t r = 0; r < rounds; r++) {
        crl_td *got = crl_env_recv(f.env, &f.err);
        ck_assert_msg(got, "recv %lld: %s", (long long)r, f.err.message);
        const int64_t *ids = crl_tensor_data(crl_td_get(got, "env_id"));
        crl_td *act = crl_td_new(1, (int64_t[]){ batch }, &f.err);
        crl_tensor *idt = crl_tensor_new(CRL_I64, 1, (int64_t[]){ batch }, &f.err);
        crl_tensor *a = crl_tensor_new(continuous(task) ? CRL_F32 : CRL_I64, continuous(task) ? 2 : 1,
                                       (int64_t[]){ batch, 1 }, &f.err);
        for (int64_t k = 0; k < batch; k++, line++) {
            int64_t i = ids[k];
            GString *s = g_string_new(NULL);
            g_string_append_printf(s, "%lld %lld | ", (long long)i, (long long)count[i]++);
            crl_test_fmt_row(s, crl_td_get(got, "observation"), k);
            g_string_append(s, " | ");
            crl_test_fmt_row(s, crl_td_get(got, "reward"), k);
            g_string_append(s, " ");
            crl_test_fmt_row(s, crl_td_get(got, "terminated"), k);
            g_string_append(s, " ");
            crl_test_fmt_row(s, crl_td_get(got, "truncated"), k);
            ck_assert_msg(ref[line] && !strcmp(s->str, ref[line]), "%s %s native async, result %zu:\n  crl:       %s\n"
                          "  reference: %s", task, env_type, line, s->str, ref[line] ? ref[line] : "(none)");
            g_string_free(s, TRUE);
            bool end = ((const uint8_t *)crl_tensor_data(crl_td_get(got, "done")))[k] != 0;
            ends += end;
            if (ended[i])
                steps[i] = 0;
            ended[i] = end;
            ((int64_t *)crl_tensor_data(idt))[k] = i;
            put_action(a, task, steps[i], i, k);
            if (!end)
                steps[i]++;
        }
        ck_assert_int_eq(crl_td_set(act, "env_id", idt, &f.err), CRL_OK);
        ck_assert_int_eq(crl_td_set(act, "action", a, &f.err), CRL_OK);
        ck_assert_msg(crl_env_send(f.env, act, &f.err) == CRL_OK, "send: %s", f.err.message);
        crl_tensor_unref(idt);
        crl_tensor_unref(a);
        crl_td_unref(act);
        crl_td_unref(got);
    }
    ck_assert_msg(ends > 0, "no episode ended in %lld recvs: the auto-resets were not compared", (long long)rounds);
    /* A recv with too few envs in flight is an error, not a hang; so is sending an env in flight. */
    for (int64_t r = 0; r < num / batch; r++) {
        crl_td *got = crl_env_recv(f.env, &f.err);
        ck_assert_msg(got, "draining recv: %s", f.err.message);
        crl_td_unref(got);
    }
    ck_assert_ptr_null(crl_env_recv(f.env, &f.err));
    EXPECT_HAS(f.err.message, "in flight but batch_size");
    g_strfreev(ref);
    g_free(count);
    g_free(steps);
    g_free(ended);
    crl_test_pyenv_close(&f);
}

START_TEST(test_async_native)
{
    check_native("CartPole-v1", "gymnasium", 6, 2, 200, 500, 31);
    check_native("Pendulum-v1", "gym", 5, 3, 60, 9, 32);
    check_native("CartPole-v1", "gymnasium", 4, 1, 150, 30, 33);
}
END_TEST

START_TEST(test_async_threads)
{
    check_async("CartPole-v1", 6, 2, 150, 500, 21);
    check_async("Pendulum-v1", 5, 3, 60, 12, 22);
}
END_TEST

START_TEST(test_specs)
{
    fx f;
    fx_must_open(&f, "id = Pendulum-v1\nnum_envs = 3");
    const crl_spec *o = crl_spec_composite_get(crl_env_observation_spec(f.env), "observation");
    ck_assert(o);
    ck_assert_int_eq(crl_spec_ndim(o), 2);
    ck_assert_int_eq(crl_spec_shape(o)[0], 3);
    ck_assert_int_eq(crl_spec_shape(o)[1], 3);
    const crl_spec *a = crl_spec_composite_get(crl_env_full_action_spec(f.env), "action");
    ck_assert(a);
    ck_assert_int_eq(crl_spec_dtype(a), CRL_F32);
    ck_assert_int_eq(crl_spec_shape(a)[1], 1);
    ck_assert_int_eq(crl_env_max_episode_steps(f.env), 200);
    crl_test_pyenv_close(&f);
    fx_must_open(&f, "id = CartPole-v1\nnum_envs = 2\nmax_episode_steps = 9");
    a = crl_spec_composite_get(crl_env_full_action_spec(f.env), "action");
    ck_assert_int_eq(crl_spec_dtype(a), CRL_I64);
    ck_assert_int_eq(crl_spec_ndim(a), 1);
    ck_assert_int_eq(crl_env_max_episode_steps(f.env), 9);
    ck_assert_msg(crl_env_check_specs(f.env, 40, &f.err) == CRL_OK, "check_specs: %s", f.err.message);
    crl_test_pyenv_close(&f);
}
END_TEST

START_TEST(test_render)
{
    fx f;
    fx_must_open(&f, "id = CartPole-v1\nnum_envs = 2\nkwargs.render_mode = rgb_array\nkwargs.render_width = 40\n"
                     "kwargs.render_height = 30");
    ck_assert_int_eq(crl_env_render_height(f.env), 30);
    ck_assert_int_eq(crl_env_render_width(f.env), 40);
    crl_env_set_seed(f.env, 3);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert(td);
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 30, 40, 3 }, &f.err);
    ck_assert_msg(crl_env_render(f.env, 1, frame, &f.err) == CRL_OK, "render: %s", f.err.message);
    /* The fake draws the cart as a black column on white. */
    const uint8_t *px = crl_tensor_data(frame);
    int black = 0, white = 0;
    for (int k = 0; k < 30 * 40 * 3; k++) {
        black += px[k] == 0;
        white += px[k] == 255;
    }
    ck_assert_int_gt(black, 0);
    ck_assert_int_gt(white, 0);
    crl_tensor_unref(frame);
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* from_pixels asks for rgb_array itself and gives a pixels observation. */
    fx_must_open(&f, "id = Pendulum-v1\nnum_envs = 2\nfrom_pixels = true");
    ck_assert(crl_spec_composite_get(crl_env_observation_spec(f.env), "pixels"));
    crl_test_pyenv_close(&f);
}
END_TEST

START_TEST(test_errors)
{
    expect_make_error("id = CartPol-v1", CRL_E_NOT_FOUND, "did you mean CartPole-v1");
    expect_make_error("id = CartPole-v1\nauto_reset = same_step", CRL_E_CONFIG, "auto_reset = next_step");
    expect_make_error("id = CartPole-v1\nkwargs.num_envs = 3", CRL_E_CONFIG, "comes from [env] num_envs");
    expect_make_error("id = CartPole-v1\nkwargs.no_such_key = 3", CRL_E_INVALID, "unknown config keys");
    /* EnvPool's own async mode takes neither frame skipping nor pixels, nor same_step. */
    expect_make_error("id = CartPole-v1\nnum_envs = 4\nbatch_size = 2\nframe_skip = 2", CRL_E_CONFIG,
                      "own async mode");
    expect_make_error("id = CartPole-v1\nnum_envs = 4\nbatch_size = 2\nfrom_pixels = true", CRL_E_CONFIG,
                      "own async mode");
    expect_make_error("id = CartPole-v1\nnum_envs = 4\nbatch_size = 2\nauto_reset = same_step", CRL_E_CONFIG,
                      "same_step");
    /* A partial reset right after a new seed cannot reseed part of a pool. */
    fx f;
    fx_must_open(&f, "id = CartPole-v1\nnum_envs = 3");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert(td);
    crl_env_set_seed(f.env, 5);
    crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, (int64_t[]){ 3, 1 }, &f.err);
    ((uint8_t *)crl_tensor_data(m))[1] = 1;
    ck_assert_int_eq(crl_td_set(td, "_reset", m, &f.err), CRL_OK);
    crl_tensor_unref(m);
    crl_td *r = crl_env_reset(f.env, td, &f.err);
    ck_assert_ptr_null(r);
    EXPECT_HAS(f.err.message, "reset of all 3 envs together");
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* An env that raises: the step's error names the backend, the task and the exception. */
    fx_must_open(&f, "id = Faulty-v0\nnum_envs = 2\nkwargs.fail_at = 3");
    td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert(td);
    int rc = CRL_OK;
    for (int t = 0; t < 5 && rc == CRL_OK; t++) {
        crl_tensor *a = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 2 }, &f.err);
        ck_assert_int_eq(crl_td_set(td, "action", a, &f.err), CRL_OK);
        crl_tensor_unref(a);
        rc = crl_env_step(f.env, td, &f.err);
    }
    ck_assert_int_eq(rc, CRL_E_RUNTIME);
    EXPECT_HAS(f.err.message, "envpool: Faulty-v0: step");
    EXPECT_HAS(f.err.message, "the simulator failed at step 3");
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    /* ... and in async mode the failing send is reported, every later call repeats it, async_reset starts over. */
    fx_must_open(&f, "id = Faulty-v0\nnum_envs = 4\nbatch_size = 2\nkwargs.fail_at = 2");
    ck_assert_int_eq(crl_env_async_reset(f.env, &f.err), CRL_OK);
    rc = CRL_OK;
    for (int turn = 0; turn < 8 && rc == CRL_OK; turn++) {
        crl_td *got = crl_env_recv(f.env, &f.err);
        ck_assert_msg(got, "recv: %s", f.err.message);
        crl_td *act = crl_td_new(1, (int64_t[]){ 2 }, &f.err);
        crl_tensor *ids = crl_tensor_clone(crl_td_get(got, "env_id"), &f.err);
        crl_tensor *a = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 2 }, &f.err);
        crl_td_set(act, "env_id", ids, &f.err);
        crl_td_set(act, "action", a, &f.err);
        rc = crl_env_send(f.env, act, &f.err);
        crl_tensor_unref(ids);
        crl_tensor_unref(a);
        crl_td_unref(act);
        crl_td_unref(got);
    }
    ck_assert_int_eq(rc, CRL_E_RUNTIME);
    EXPECT_HAS(f.err.message, "send");
    EXPECT_HAS(f.err.message, "the simulator failed at step 2");
    ck_assert_ptr_null(crl_env_recv(f.env, &f.err));
    EXPECT_HAS(f.err.message, "stopped after an error");
    ck_assert_msg(crl_env_async_reset(f.env, &f.err) == CRL_OK, "async_reset after a failure: %s", f.err.message);
    crl_td *again = crl_env_recv(f.env, &f.err);
    ck_assert_msg(again, "recv after async_reset: %s", f.err.message);
    crl_td_unref(again);
    crl_test_pyenv_close(&f);
    /* Rendering without a frame size. */
    fx_must_open(&f, "id = CartPole-v1");
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){ 2, 2, 3 }, &f.err);
    ck_assert_int_ne(crl_env_render(f.env, 0, frame, &f.err), CRL_OK);
    crl_tensor_unref(frame);
    crl_test_pyenv_close(&f);
}
END_TEST

static Suite *envpool_suite(void)
{
    Suite *s = suite_create("envpool");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sync_inline);
    tcase_add_test(tc, test_sync_executors);
    tcase_add_test(tc, test_async_threads);
    tcase_add_test(tc, test_async_native);
    suite_add_tcase(s, tc);
    tc = tcase_create("behaviour");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_specs);
    tcase_add_test(tc, test_render);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!getenv("CRL_PLUGIN_PATH"))
        setenv("CRL_PLUGIN_PATH", ENVPOOL_PLUGIN_DIR, 1);
    if (getenv("CRL_TEST_VALGRIND"))
        setenv("PYTHONMALLOC", "malloc", 1);
    setenv("PYTHONWARNINGS", "ignore", 1);
    SRunner *sr = srunner_create(envpool_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
