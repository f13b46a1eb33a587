/* Check suite for exec_reexec: Python (gym) envs on the processes executor, in re-exec'd crl-env-worker processes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#include "pyenv-fixture.h"

#define PYDIR TEST_SRCDIR "/python"

static char *tmpdir;

typedef crl_test_pyenv fx;

/* A host with gym (and transforms when CRL_TEST_LOAD_TRANSFORMS is set) loaded and the env of "[env] backend =
 * gym" plus env_ini; the env's status. */
static int fx_open(fx *f, const char *env_ini)
{
    char *ini = g_strdup_printf("[plugin.gym]\npython_path = %s, %s/fake_gymnasium\n\n[env]\nbackend = gym\n"
                                "categorical_action_encoding = true\n%s\n", PYDIR, PYDIR, env_ini);
    const char *const plugins[] = { "gym", getenv("CRL_TEST_LOAD_TRANSFORMS") ? "transforms" : NULL, NULL };
    int rc = crl_test_pyenv_open(f, ini, plugins);
    g_free(ini);
    return rc;
}

static void fx_must_open(fx *f, const char *env_ini)
{
    crl_test_pyenv_expect_made(f, fx_open(f, env_ini), env_ini);
}

/* Every leaf of a and b, bit for bit. */
static void expect_bitwise(crl_td *a, crl_td *b)
{
    crl_error e = { 0 };
    char **ka = crl_td_leaf_keys(a, &e), **kb = crl_td_leaf_keys(b, &e);
    ck_assert_ptr_nonnull(ka);
    ck_assert_ptr_nonnull(kb);
    size_t n = 0;
    for (; ka[n]; n++) {
        ck_assert_msg(kb[n] && !strcmp(ka[n], kb[n]), "leaf %zu: %s vs %s", n, ka[n], kb[n] ? kb[n] : "(none)");
        crl_tensor *ta = crl_td_get(a, ka[n]), *tb = crl_td_get(b, kb[n]);
        ck_assert_int_eq(crl_tensor_dtype(ta), crl_tensor_dtype(tb));
        ck_assert_int_eq(crl_tensor_nbytes(ta), crl_tensor_nbytes(tb));
        ck_assert_msg(crl_tensor_is_contiguous(ta) && crl_tensor_is_contiguous(tb), "%s not contiguous", ka[n]);
        ck_assert_msg(memcmp(crl_tensor_data(ta), crl_tensor_data(tb), crl_tensor_nbytes(ta)) == 0,
                      "leaf %s differs between inline and processes", ka[n]);
    }
    ck_assert_ptr_null(kb[n]);
    ck_assert_uint_gt(n, 4);
    crl_free(ka);
    crl_free(kb);
}

/* A rollout of `steps` with random actions (the host's seeded draws), ended episodes reset. */
static crl_td *roll(const char *env_ini, int64_t steps, int64_t *restarts)
{
    fx f;
    fx_must_open(&f, env_ini);
    crl_env_set_seed(f.env, 1234);
    crl_td *r = crl_env_rollout(f.env, steps, NULL, NULL, false, true, NULL, &f.err);
    ck_assert_msg(r != NULL, "rollout of\n%s\nfailed: %s", env_ini, f.err.message);
    if (restarts)
        *restarts = crl_env_restarts(f.env);
    crl_test_pyenv_close(&f);
    return r;
}

/* The rollouts of `common` on `reference` and on processes at 2 and 3 workers, bit for bit. */
static void expect_same_rollouts_with(const char *common, int64_t steps, const char *reference)
{
    char *a = g_strdup_printf("%s\nexecutor = %s\n", common, reference);
    char *b = g_strdup_printf("%s\nexecutor = processes\nnum_workers = 2\n", common);
    char *c = g_strdup_printf("%s\nexecutor = processes\nnum_workers = 3\n", common);
    crl_td *ra = roll(a, steps, NULL), *rb = roll(b, steps, NULL), *rc = roll(c, steps, NULL);
    expect_bitwise(ra, rb);
    expect_bitwise(ra, rc);
    crl_td_unref(ra);
    crl_td_unref(rb);
    crl_td_unref(rc);
    g_free(a);
    g_free(b);
    g_free(c);
}

static void expect_same_rollouts(const char *common, int64_t steps)
{
    expect_same_rollouts_with(common, steps, "inline");
}

/* CartPole: auto-resets (seeded through crl's seed chain), kwargs (prefixed options) in the worker too. */
START_TEST(bitwise_cartpole)
{
    expect_same_rollouts("id = cp\nentry_point = crl_testenvs.cartpole:CartPoleEnv\nkwargs.max_episode_steps = 30\n"
                         "num_envs = 5\nseed = 7\nauto_reset = next_step", 120);
}
END_TEST

/* Nested Dict/Tuple observations of four dtypes, seeded episode lengths. */
START_TEST(bitwise_dict)
{
    expect_same_rollouts("id = TestDict-v0\nnum_envs = 4\nseed = 3\nauto_reset = same_step", 60);
}
END_TEST

/* One instance per env (per_env options): each worker makes its envs with their own option sets. */
START_TEST(bitwise_per_env)
{
    expect_same_rollouts_with("id = cp\nkwargs.max_episode_steps = 9\nnum_envs = 4\nseed = 11\n"
                              "per_env.entry_point = crl_testenvs.cartpole:CartPoleEnv, "
                              "crl_testenvs.benchenv:CostlyCartPoleEnv, crl_testenvs.cartpole:CartPoleEnv, "
                              "crl_testenvs.benchenv:CostlyCartPoleEnv", 40, "serial");
}
END_TEST

/* Rendering happens in the worker that steps the env: the same frames as inline. */
START_TEST(render_in_worker)
{
    const char *common = "id = cp\nentry_point = crl_testenvs.cartpole:CartPoleEnv\nkwargs.render_mode = rgb_array\n"
                         "num_envs = 3\nseed = 5";
    fx fi, fp;
    char *a = g_strdup_printf("%s\nexecutor = inline\n", common), *b = g_strdup_printf("%s\nexecutor = processes\n"
                                                                                       "num_workers = 2\n", common);
    fx_must_open(&fi, a);
    fx_must_open(&fp, b);
    crl_td *ti = crl_env_reset(fi.env, NULL, &fi.err), *tp = crl_env_reset(fp.env, NULL, &fp.err);
    ck_assert_ptr_nonnull(ti);
    ck_assert_ptr_nonnull(tp);
    int64_t shape[3] = { crl_env_render_height(fi.env), crl_env_render_width(fi.env), 3 };
    ck_assert_int_gt(shape[0], 0);
    ck_assert_int_eq(crl_env_render_height(fp.env), shape[0]);
    crl_tensor *fri = crl_tensor_new(CRL_U8, 3, shape, &fi.err), *frp = crl_tensor_new(CRL_U8, 3, shape, &fp.err);
    for (int s = 0; s < 4; s++) {
        for (int64_t i = 0; i < 3; i++) {
            ck_assert_msg(crl_env_render(fi.env, i, fri, &fi.err) == CRL_OK, "%s", fi.err.message);
            ck_assert_msg(crl_env_render(fp.env, i, frp, &fp.err) == CRL_OK, "%s", fp.err.message);
            ck_assert(memcmp(crl_tensor_data(fri), crl_tensor_data(frp), crl_tensor_nbytes(fri)) == 0);
        }
        crl_tensor *act = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 3 }, &fi.err);
        for (int i = 0; i < 3; i++)
            ((int64_t *)crl_tensor_data(act))[i] = (s + i) & 1;
        ck_assert_int_eq(crl_td_set(ti, "action", act, &fi.err), CRL_OK);
        ck_assert_int_eq(crl_td_set(tp, "action", act, &fp.err), CRL_OK);
        crl_tensor_unref(act);
        ck_assert_msg(crl_env_step(fi.env, ti, &fi.err) == CRL_OK, "%s", fi.err.message);
        ck_assert_msg(crl_env_step(fp.env, tp, &fp.err) == CRL_OK, "%s", fp.err.message);
        ck_assert_int_eq(crl_env_step_mdp_into(fi.env, ti, ti, &fi.err), CRL_OK);
        ck_assert_int_eq(crl_env_step_mdp_into(fp.env, tp, tp, &fp.err), CRL_OK);
    }
    crl_tensor_unref(fri);
    crl_tensor_unref(frp);
    crl_td_unref(ti);
    crl_td_unref(tp);
    crl_test_pyenv_close(&fi);
    crl_test_pyenv_close(&fp);
    g_free(a);
    g_free(b);
}
END_TEST

/* ---- hostile envs ---------------------------------------------------------------------------- */

/* Step a KillingEnv (2 envs, 2 workers) until the error; its code and message. */
static int step_until_failure(const char *how, const char *extra, crl_error *out)
{
    char *ini = g_strdup_printf("id = killer\nentry_point = crl_testenvs.hostile:KillingEnv\nkwargs.how = %s\n"
                                "kwargs.at_step = 2\nnum_envs = 2\nseed = 1\nexecutor = processes\nnum_workers = 2\n"
                                "%s", how, extra);
    fx f;
    fx_must_open(&f, ini);
    g_free(ini);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    int rc = CRL_OK;
    for (int s = 0; s < 5 && !rc; s++) {
        rc = crl_env_rand_step(f.env, td, &f.err);
        if (!rc)
            rc = crl_env_step_mdp_into(f.env, td, td, &f.err);
    }
    ck_assert_msg(rc != CRL_OK, "a %s env stepped 5 times without a failure", how);
    *out = f.err;
    /* The env is unusable now, and says why. */
    crl_error again = { 0 };
    ck_assert_int_eq(crl_env_rand_step(f.env, td, &again), CRL_E_INVALID);
    EXPECT_HAS(again.message, "unusable");
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
    return rc;
}

START_TEST(hostile_segv)
{
    crl_error e;
    ck_assert_int_eq(step_until_failure("segv", "", &e), CRL_E_CRASH);
    EXPECT_HAS(e.message, "gym/killer");
    EXPECT_HAS(e.message, "env 0");
    EXPECT_HAS(e.message, "killed by signal 11");
    EXPECT_HAS(e.message, "during step");
    EXPECT_HAS(e.message, "(worker 0 of 2)");
}
END_TEST

START_TEST(hostile_exit)
{
    crl_error e;
    ck_assert_int_eq(step_until_failure("exit", "kwargs.exit_status = 0", &e), CRL_E_CRASH);
    EXPECT_HAS(e.message, "gym/killer");
    EXPECT_HAS(e.message, "exited with status 0 during step");
    EXPECT_HAS(e.message, "worker 0 of 2");
}
END_TEST

START_TEST(hostile_hang)
{
    crl_error e;
    ck_assert_int_eq(step_until_failure("hang", "step_timeout = 0.5", &e), CRL_E_TIMEOUT);
    EXPECT_HAS(e.message, "gym/killer");
    EXPECT_HAS(e.message, "did not finish within step_timeout = 0.5 s and was killed during step");
}
END_TEST

/* on_worker_failure = restart: a new crl-env-worker takes over; the episode is cut (truncated) and goes on. */
static void expect_restarts(const char *how, const char *extra)
{
    char *ini = g_strdup_printf("id = killer\nentry_point = crl_testenvs.hostile:KillingEnv\nkwargs.how = %s\n"
                                "kwargs.at_step = 2\nnum_envs = 2\nseed = 1\nexecutor = processes\nnum_workers = 2\n"
                                "on_worker_failure = restart\nmax_restarts = 8\nauto_reset = next_step\n%s", how,
                                extra);
    fx f;
    fx_must_open(&f, ini);
    g_free(ini);
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    bool truncated = false;
    for (int s = 0; s < 4; s++) {
        ck_assert_msg(crl_env_rand_step(f.env, td, &f.err) == CRL_OK, "step %d: %s", s, f.err.message);
        crl_tensor *tr = crl_td_get(td, "next.truncated");
        ck_assert_ptr_nonnull(tr);
        truncated = truncated || ((const bool *)crl_tensor_data(tr))[0];
        ck_assert_int_eq(crl_env_step_mdp_into(f.env, td, td, &f.err), CRL_OK);
    }
    ck_assert_int_ge(crl_env_restarts(f.env), 2);  /* both workers, at least once */
    ck_assert_msg(truncated, "the episode of a restarted worker's env did not end truncated");
    crl_td_unref(td);
    crl_test_pyenv_close(&f);
}

START_TEST(restart_segv)
{
    expect_restarts("segv", "");
}
END_TEST

START_TEST(restart_exit)
{
    expect_restarts("exit", "");
}
END_TEST

START_TEST(restart_hang)
{
    expect_restarts("hang", "step_timeout = 0.5");
}
END_TEST

/* Runs fn with stderr into a file; what it wrote. */
static char *capture_stderr(void (*fn)(void *), void *user)
{
    char *path = g_build_filename(tmpdir, "stderr.txt", NULL);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    close(fd);
    fn(user);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    g_free(path);
    return text;
}

static void free_fx(void *user)
{
    crl_test_pyenv_close(user);
}

/* An exception in close() runs in the worker (it closes its own envs at quit) and is reported naming it. */
START_TEST(close_raises)
{
    fx f;
    fx_must_open(&f, "id = closer\nentry_point = crl_testenvs.hostile:CloseRaisingEnv\nnum_envs = 2\n"
                     "executor = processes\nnum_workers = 2");
    crl_td *td = crl_env_reset(f.env, NULL, &f.err);
    ck_assert_msg(td != NULL, "%s", f.err.message);
    ck_assert_int_eq(crl_env_rand_step(f.env, td, &f.err), CRL_OK);
    crl_td_unref(td);
    char *out = capture_stderr(free_fx, &f);
    EXPECT_HAS(out, "worker 1 (env 1 of gym/closer) failed while closing its envs");
    EXPECT_HAS(out, "boom in close");
    g_free(out);
}
END_TEST

/* A worker that cannot make its envs says why, and nothing is left running. */
START_TEST(make_fails_in_worker)
{
    char *count = g_build_filename(tmpdir, "makes.txt", NULL);
    g_unlink(count);
    char *ini = g_strdup_printf("id = k\nentry_point = crl_testenvs.hostile:KillingEnv\nkwargs.how = none\n"
                                "kwargs.count_file = '%s'\nkwargs.max_makes = 1\nexecutor = processes\n"
                                "num_workers = 1", count);
    fx f;
    ck_assert_int_ne(fx_open(&f, ini), CRL_OK);
    EXPECT_HAS(f.err.message, "worker 0 (env 0 of gym/k) could not start");
    EXPECT_HAS(f.err.message, "construction 2 > max_makes = 1");
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
    crl_test_pyenv_close(&f);
    g_free(ini);
    g_free(count);
}
END_TEST

START_TEST(missing_worker_program)
{
    setenv("CRL_ENV_WORKER", "/nonexistent/crl-env-worker", 1);
    fx f;
    ck_assert_int_eq(fx_open(&f, "id = CartPole-v1\nnum_envs = 2\nexecutor = processes"), CRL_E_PLUGIN);
    EXPECT_HAS(f.err.message, "/nonexistent");
    EXPECT_HAS(f.err.message, "crl-env-worker");
    EXPECT_HAS(f.err.message, "CRL_ENV_WORKER");
    crl_test_pyenv_close(&f);
}
END_TEST

START_TEST(worker_transforms_refused)
{
    fx f;
    setenv("CRL_TEST_LOAD_TRANSFORMS", "1", 1);
    int rc = fx_open(&f, "id = CartPole-v1\nnum_envs = 2\nexecutor = processes\n"
                         "worker_transforms = steps\n[transform.steps]\ntype = StepCounter");
    ck_assert_msg(rc == CRL_E_UNSUPPORTED, "%s: %s", crl_status_name(rc), f.err.message);
    EXPECT_HAS(f.err.message, "worker_transforms");
    EXPECT_HAS(f.err.message, "gym/CartPole-v1");
    crl_test_pyenv_close(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exec_reexec");
    TCase *tc = tcase_create("reexec");
    /* Each env start-up imports numpy in a fresh interpreter per worker. */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bitwise_cartpole);
    tcase_add_test(tc, bitwise_dict);
    tcase_add_test(tc, bitwise_per_env);
    tcase_add_test(tc, render_in_worker);
    tcase_add_test(tc, hostile_segv);
    tcase_add_test(tc, hostile_exit);
    tcase_add_test(tc, hostile_hang);
    tcase_add_test(tc, restart_segv);
    tcase_add_test(tc, restart_exit);
    tcase_add_test(tc, restart_hang);
    tcase_add_test(tc, close_raises);
    tcase_add_test(tc, make_fails_in_worker);
    tcase_add_test(tc, missing_worker_program);
    tcase_add_test(tc, worker_transforms_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!getenv("CRL_PLUGIN_PATH"))
        setenv("CRL_PLUGIN_PATH", GYM_PLUGIN_DIR, 1);
    if (getenv("CRL_TEST_VALGRIND"))
        setenv("PYTHONMALLOC", "malloc", 1);
    setenv("PYTHONWARNINGS", "ignore", 1);
    /* Sanitizer builds: the workers' segfault must stay a SIGSEGV (ASan would turn it into exit status 1). */
    const char *asan = getenv("ASAN_OPTIONS");
    char *opts = g_strdup_printf("%s%shandle_segv=0", asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    g_free(opts);
    tmpdir = g_dir_make_tmp("crl-test-reexec-XXXXXX", NULL);
    if (!tmpdir)
        return 1;
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char *files[] = { "stderr.txt", "makes.txt" };
    for (size_t i = 0; i < 2; i++) {
        char *p = g_build_filename(tmpdir, files[i], NULL);
        g_unlink(p);
        g_free(p);
    }
    g_rmdir(tmpdir);
    g_free(tmpdir);
    return failed ? 1 : 0;
}
