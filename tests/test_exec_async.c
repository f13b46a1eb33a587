/* Check suite: async send/recv (EnvPool's design) on the threads executor: routing by env_id, auto-reset, errors. */
#include "config.h"

#include <check.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/transform.h>

#include "keep-cairo.h"
#include "host-fixture.h"

#define EXPECT_OK(call, e) ck_assert_msg((call) == CRL_OK, "%s: %s", #call, (e).message)

typedef crl_test_host fx;

/* A host with classic, transforms and faultenv over `ini`. */
static void fx_open(fx *f, const char *ini)
{
    crl_test_host_open(f, "classic, transforms, faultenv", ini);
}

static void fx_close(fx *f)
{
    crl_test_host_close(f);
}

static crl_env *env_of(fx *f, const char *section)
{
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(f->host, f->cfg, section, &e);
    ck_assert_msg(env != NULL, "[%s]: %s", section, e.message);
    return env;
}

/* A send of actions acts[0..k) (one value each: CartPole's index, written
 * one-hot when the spec is OneHot, or Pendulum's float32 [1]) to envs ids[0..k). */
static crl_td *send_td(const crl_env *env, const int64_t *ids, const double *acts, int64_t k)
{
    crl_td *td = crl_td_new(1, &k, NULL);
    crl_tensor *idt = crl_tensor_new(CRL_I64, 1, &k, NULL);
    memcpy(crl_tensor_data(idt), ids, sizeof(int64_t) * (size_t)k);
    ck_assert_int_eq(crl_td_set(td, "env_id", idt, NULL), CRL_OK);
    crl_tensor_unref(idt);
    const crl_spec *as = crl_env_action_spec(env);
    int nd = crl_spec_ndim(as);
    int64_t shape[8];
    memcpy(shape, crl_spec_shape(as), sizeof(int64_t) * (size_t)nd);
    shape[0] = k;
    crl_tensor *a = crl_tensor_new(crl_spec_dtype(as), nd, shape, NULL);
    if (crl_spec_get_kind(as) == CRL_SPEC_ONEHOT) {
        crl_tensor_fill(a, 0);
        for (int64_t m = 0; m < k; m++)
            crl_tensor_flat_set(a, m * crl_spec_n(as) + (int64_t)acts[m], 1);
    } else {
        for (int64_t m = 0; m < k; m++)
            crl_tensor_flat_set(a, m, acts[m]);
    }
    ck_assert_int_eq(crl_td_set(td, "action", a, NULL), CRL_OK);
    crl_tensor_unref(a);
    return td;
}

static int send_acts(crl_env *env, const int64_t *ids, const double *acts, int64_t k, crl_error *e)
{
    crl_td *td = send_td(env, ids, acts, k);
    int rc = crl_env_send(env, td, e);
    crl_td_unref(td);
    return rc;
}

/* Row m of key in a recv batch equals the single env's value (bitwise). */
static void assert_row(const crl_td *got, int64_t m, const crl_td *ref, const char *ref_key, const char *key,
                       int64_t env_id, int step)
{
    crl_tensor *g = crl_td_get(got, key), *r = crl_td_get(ref, ref_key);
    ck_assert_msg(g && r, "missing %s / %s", key, ref_key);
    crl_tensor *row = crl_tensor_index(g, 0, m, NULL);
    crl_tensor *rc = crl_tensor_contiguous(r, NULL), *gc = crl_tensor_contiguous(row, NULL);
    ck_assert_uint_eq(crl_tensor_nbytes(rc), crl_tensor_nbytes(gc));
    ck_assert_msg(memcmp(crl_tensor_data(rc), crl_tensor_data(gc), crl_tensor_nbytes(rc)) == 0,
                  "env %lld, exchange %d: '%s' differs from the single env's", (long long)env_id, step, key);
    crl_tensor_unref(row);
    crl_tensor_unref(rc);
    crl_tensor_unref(gc);
}

/* Drive an async env of N envs (batch_size B) in varied patterns and check
 * every received row against N single envs (auto_reset = next_step, the
 * same seed chain element, the same actions). */
static void routing_case(const char *id, const char *extra, int64_t N, int64_t B, int workers, int exchanges)
{
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = %s\nnum_envs = %lld\nexecutor = threads\n"
                                "num_workers = %d\nbatch_size = %lld\nmax_episode_steps = 13\n%s\n"
                                "[ref]\nbackend = classic\nid = %s\nauto_reset = next_step\nmax_episode_steps = 13\n%s\n",
                                id, (long long)N, workers, (long long)B, extra, id, extra);
    fx f;
    fx_open(&f, ini);
    g_free(ini);
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    ck_assert_int_eq(crl_env_batch_size(env), B);
    crl_env **ref = g_new0(crl_env *, N);
    crl_td **cur = g_new0(crl_td *, N);
    uint64_t s = 77;
    for (int64_t i = 0; i < N; i++) {
        ref[i] = env_of(&f, "ref");
        crl_env_set_seed(ref[i], s);
        s = crl_seed_next(s);
        cur[i] = crl_env_reset(ref[i], NULL, &e);
        ck_assert_msg(cur[i] != NULL, "%s", e.message);
    }
    ck_assert_uint_eq(crl_env_set_seed(env, 77), s);
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    bool pendulum = !strcmp(id, "Pendulum-v1");
    /* first[i]: env i's next recv is its first reset (the single env's root);
     * after that every recv is the single env's "next" (a next_step reset
     * writes the reset values there, as the async env's auto-reset does). */
    bool *first = g_new0(bool, N), *was_done = g_new0(bool, N);
    for (int64_t i = 0; i < N; i++)
        first[i] = true;
    crl_rng rng;
    crl_rng_init(&rng, 5, 0);
    int64_t *held = g_new0(int64_t, N), nheld = 0, resets = 0, ends = 0;
    for (int x = 0; x < exchanges; x++) {
        crl_td *got = crl_env_recv(env, &e);
        ck_assert_msg(got != NULL, "recv %d: %s", x, e.message);
        ck_assert_int_eq(crl_td_batch_shape(got)[0], B);
        const int64_t *gid = crl_tensor_data(crl_td_get(got, "env_id"));
        for (int64_t m = 0; m < B; m++) {
            int64_t i = gid[m];
            ck_assert(i >= 0 && i < N);
            bool done = crl_tensor_flat_get(crl_td_get(got, "done"), m) != 0.0;
            if (first[i]) {
                assert_row(got, m, cur[i], "observation", "observation", i, x);
                ck_assert(!done);
                first[i] = false;
            } else {
                assert_row(got, m, cur[i], "next.observation", "observation", i, x);
                assert_row(got, m, cur[i], "next.reward", "reward", i, x);
                assert_row(got, m, cur[i], "next.done", "done", i, x);
                assert_row(got, m, cur[i], "next.terminated", "terminated", i, x);
                assert_row(got, m, cur[i], "next.truncated", "truncated", i, x);
                if (was_done[i]) {
                    /* the auto-reset: reward 0, flags false */
                    resets++;
                    ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(got, "reward"), m), 0.0);
                    ck_assert(!done);
                }
                crl_td *nx = crl_env_step_mdp(ref[i], cur[i], &e);
                ck_assert_msg(nx != NULL, "%s", e.message);
                crl_td_unref(cur[i]);
                cur[i] = nx;
            }
            ends += done;
            was_done[i] = done;
            held[nheld++] = i;
        }
        crl_td_unref(got);
        /* Send back a random subset of what is held, enough to keep B in flight. */
        int64_t in_flight = N - nheld, k = nheld;
        if (crl_rng_below(&rng, 2)) {
            int64_t least = B - in_flight > 1 ? B - in_flight : 1;
            k = least + (int64_t)crl_rng_below(&rng, (uint64_t)(nheld - least + 1));
        }
        for (int64_t a = nheld - 1; a > 0; a--) {
            int64_t b = (int64_t)crl_rng_below(&rng, (uint64_t)a + 1), t = held[a];
            held[a] = held[b];
            held[b] = t;
        }
        double *acts = g_new0(double, k);
        for (int64_t m = 0; m < k; m++) {
            int64_t i = held[m];
            acts[m] = pendulum ? crl_rng_range(&rng, -2.0, 2.0) : (double)crl_rng_below(&rng, 2);
            /* the same action on the single env */
            crl_td *one = send_td(env, &i, &acts[m], 1);
            crl_tensor *row = crl_tensor_index(crl_td_get(one, "action"), 0, 0, NULL);
            ck_assert_int_eq(crl_td_set(cur[i], "action", row, NULL), CRL_OK);
            crl_tensor_unref(row);
            crl_td_unref(one);
            EXPECT_OK(crl_env_step(ref[i], cur[i], &e), e);
        }
        EXPECT_OK(send_acts(env, held, acts, k, &e), e);
        g_free(acts);
        memmove(held, held + k, sizeof(int64_t) * (size_t)(nheld - k));
        nheld -= k;
    }
    /* Episodes ended and were reset along the way (time limit 13). */
    ck_assert_int_gt(ends, 0);
    ck_assert_int_gt(resets, 0);
    for (int64_t i = 0; i < N; i++) {
        crl_td_unref(cur[i]);
        crl_env_free(ref[i]);
    }
    g_free(held);
    g_free(first);
    g_free(was_done);
    g_free(ref);
    g_free(cur);
    crl_env_free(env);  /* with envs still in flight */
    fx_close(&f);
}

START_TEST(test_routing_cartpole) { routing_case("CartPole-v1", "", 7, 3, 2, 120); }
END_TEST
START_TEST(test_routing_pendulum_frame_skip) { routing_case("Pendulum-v1", "frame_skip = 2", 5, 2, 3, 80); }
END_TEST
START_TEST(test_routing_batch_one) { routing_case("CartPole-v1", "", 4, 1, 2, 100); }
END_TEST
/* One worker: no helper thread, the caller steps every env inside recv. */
START_TEST(test_routing_caller_only) { routing_case("CartPole-v1", "", 5, 2, 1, 100); }
END_TEST

/* Per-env options reach the right instance: env i's Pendulum runs with its own g. */
START_TEST(test_per_env_async)
{
    fx f;
    fx_open(&f, "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = threads\nbatch_size = 3\n"
                "per_env.g = 1.0, 10.0, 30.0\n");
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    ck_assert_int_eq(crl_env_batch_size(env), 3);  /* batch_size = num_envs: sync */
    crl_env_free(env);
    fx_close(&f);
    fx_open(&f, "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = threads\nbatch_size = 1\n"
                "per_env.g = 1.0, 10.0, 30.0\n"
                "[a]\nbackend = classic\nid = Pendulum-v1\ng = 1.0\n[b]\nbackend = classic\nid = Pendulum-v1\ng = 10.0\n"
                "[c]\nbackend = classic\nid = Pendulum-v1\ng = 30.0\n");
    env = env_of(&f, "env");
    const char *secs[3] = { "a", "b", "c" };
    crl_env *ref[3];
    crl_td *cur[3];
    uint64_t s = 9;
    for (int i = 0; i < 3; i++) {
        ref[i] = env_of(&f, secs[i]);
        crl_env_set_seed(ref[i], s);
        s = crl_seed_next(s);
        cur[i] = crl_env_reset(ref[i], NULL, &e);
    }
    crl_env_set_seed(env, 9);
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    for (int r = 0; r < 3; r++) {
        crl_td *got = crl_env_recv(env, &e);
        ck_assert_msg(got != NULL, "%s", e.message);
        int64_t i = (int64_t)crl_tensor_flat_get(crl_td_get(got, "env_id"), 0);
        assert_row(got, 0, cur[i], "observation", "observation", i, r);
        crl_td_unref(got);
    }
    /* zero torque for every env: only gravity differs */
    for (int t = 0; t < 4; t++) {
        int64_t ids[3] = { 2, 0, 1 };
        double acts[3] = { 0, 0, 0 };
        EXPECT_OK(send_acts(env, ids, acts, 3, &e), e);
        for (int i = 0; i < 3; i++) {
            crl_td *one = send_td(env, &ids[i], &acts[i], 1);
            crl_tensor *row = crl_tensor_index(crl_td_get(one, "action"), 0, 0, NULL);
            crl_td_set(cur[i], "action", row, NULL);
            crl_tensor_unref(row);
            crl_td_unref(one);
            EXPECT_OK(crl_env_step(ref[i], cur[i], &e), e);
        }
        for (int r = 0; r < 3; r++) {
            crl_td *got = crl_env_recv(env, &e);
            ck_assert_msg(got != NULL, "%s", e.message);
            int64_t i = (int64_t)crl_tensor_flat_get(crl_td_get(got, "env_id"), 0);
            assert_row(got, 0, cur[i], "next.observation", "observation", i, t);
            crl_td_unref(got);
        }
        for (int i = 0; i < 3; i++) {
            crl_td *nx = crl_env_step_mdp(ref[i], cur[i], &e);
            crl_td_unref(cur[i]);
            cur[i] = nx;
        }
    }
    for (int i = 0; i < 3; i++) {
        crl_td_unref(cur[i]);
        crl_env_free(ref[i]);
    }
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

static void expect_err(int rc, const crl_error *e, int code, const char *needle)
{
    ck_assert_msg(rc == code, "code %s (%s), expected %s", crl_status_name(rc), e->message, crl_status_name(code));
    ck_assert_msg(strstr(e->message, needle), "'%s' not in: %s", needle, e->message);
}

/* Send/recv in the wrong order, bad ids and bad actions are clear errors that change nothing. */
START_TEST(test_wrong_order_and_bad_input)
{
    fx f;
    fx_open(&f, "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 4\nexecutor = threads\nbatch_size = 2\n"
                "[sync]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 4\nexecutor = threads\n");
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    int64_t ids[4] = { 0, 1, 2, 3 };
    double acts[4] = { 0.5, -0.5, 1, 2 };
    /* before async_reset */
    ck_assert_ptr_null(crl_env_recv(env, &e));
    expect_err(e.code, &e, CRL_E_INVALID, "crl_env_async_reset first");
    expect_err(send_acts(env, ids, acts, 2, &e), &e, CRL_E_INVALID, "crl_env_async_reset first");
    /* the sync API is refused, naming the async calls */
    ck_assert_ptr_null(crl_env_reset(env, NULL, &e));
    expect_err(e.code, &e, CRL_E_INVALID, "crl_env_send");
    crl_td *td = crl_td_new(1, (int64_t[]){ 4 }, NULL);
    expect_err(crl_env_step(env, td, &e), &e, CRL_E_INVALID, "batch_size = 2 < num_envs = 4");
    expect_err(crl_env_check_specs(env, 3, &e), &e, CRL_E_INVALID, "async");
    crl_td_unref(td);
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    /* every env is in flight after the reset */
    expect_err(send_acts(env, ids, acts, 1, &e), &e, CRL_E_INVALID, "env 0 is already in flight");
    crl_td *a = crl_env_recv(env, &e), *b = crl_env_recv(env, &e);
    ck_assert_msg(a && b, "%s", e.message);
    /* nothing in flight now: a recv is an error, never a hang */
    ck_assert_ptr_null(crl_env_recv(env, &e));
    expect_err(e.code, &e, CRL_E_INVALID, "0 envs are in flight but batch_size = 2");
    int64_t dup[2] = { 1, 1 }, out[1] = { 4 };
    expect_err(send_acts(env, dup, acts, 2, &e), &e, CRL_E_INVALID, "env_id 1 appears twice");
    expect_err(send_acts(env, out, acts, 1, &e), &e, CRL_E_RANGE, "env_id 4");
    double bad[2] = { 0.5, 7.0 };
    expect_err(send_acts(env, ids, bad, 2, &e), &e, CRL_E_RANGE, "env 1");
    double nan2[2] = { NAN, 0 };
    expect_err(send_acts(env, ids, nan2, 2, &e), &e, CRL_E_INVALID, "NaN");
    /* missing env_id, wrong dtype */
    crl_td *noid = send_td(env, ids, acts, 2);
    crl_td_del(noid, "env_id", NULL);
    expect_err(crl_env_send(env, noid, &e), &e, CRL_E_NOT_FOUND, "env_id");
    crl_td_unref(noid);
    crl_td *wrong = send_td(env, ids, acts, 2);
    crl_tensor *i64 = crl_tensor_new(CRL_I64, 2, (int64_t[]){ 2, 1 }, NULL);
    crl_td_set(wrong, "action", i64, NULL);
    crl_tensor_unref(i64);
    expect_err(crl_env_send(env, wrong, &e), &e, CRL_E_DTYPE, "expected float32 [2, 1]");
    crl_td_unref(wrong);
    /* after all that, one recv still needs 2 in flight: only 1 was sent */
    EXPECT_OK(send_acts(env, ids, acts, 1, &e), e);
    ck_assert_ptr_null(crl_env_recv(env, &e));
    expect_err(e.code, &e, CRL_E_INVALID, "1 env is in flight");
    EXPECT_OK(send_acts(env, ids + 1, acts + 1, 1, &e), e);
    crl_td *c = crl_env_recv(env, &e);
    ck_assert_msg(c != NULL, "%s", e.message);
    crl_td_unref(a);
    crl_td_unref(b);
    crl_td_unref(c);
    /* send/recv on a sync env */
    crl_env *sync = env_of(&f, "sync");
    ck_assert_int_eq(crl_env_batch_size(sync), 4);
    expect_err(crl_env_async_reset(sync, &e), &e, CRL_E_INVALID, "steps synchronously");
    ck_assert_ptr_null(crl_env_recv(sync, &e));
    expect_err(e.code, &e, CRL_E_INVALID, "steps synchronously");
    crl_env_free(sync);
    /* no transforms on an async env */
    crl_transform *t = crl_transform_new(f.host, "StepCounter", NULL, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    expect_err(crl_env_append_transform(env, t, &e), &e, CRL_E_UNSUPPORTED, "async");
    crl_env_free(env);
    ck_assert_int_eq(crl_env_async_reset(NULL, &e), CRL_E_INVALID);
    fx_close(&f);
}
END_TEST

static void config_err(const char *lines, int code, const char *needle)
{
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\n%s\n"
                                "[transform.c]\ntype = StepCounter\n", lines);
    fx f;
    fx_open(&f, ini);
    g_free(ini);
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_ptr_null(env);
    expect_err(e.code, &e, code, needle);
    ck_assert_msg(strstr(e.message, "test.ini:"), "no file:line in: %s", e.message);
    fx_close(&f);
}

START_TEST(test_config_errors)
{
    config_err("num_envs = 4\nexecutor = threads\nbatch_size = 5", CRL_E_CONFIG, "exceeds num_envs = 4");
    config_err("num_envs = 4\nexecutor = serial\nbatch_size = 2", CRL_E_CONFIG, "needs executor = threads");
    config_err("num_envs = 4\nexecutor = processes\nbatch_size = 2", CRL_E_CONFIG, "needs executor = threads");
    config_err("num_envs = 4\nbatch_size = 2", CRL_E_CONFIG, "needs an executor");
    config_err("num_envs = 4\nexecutor = threads\nbatch_size = 2\nauto_reset = same_step", CRL_E_CONFIG,
               "same_step");
    config_err("num_envs = 4\nexecutor = threads\nbatch_size = 2\ntransforms = c", CRL_E_CONFIG,
               "transforms cannot be combined with async");
}
END_TEST

/* A backend error inside a worker comes back from recv naming the env; the
 * env then refuses until async_reset starts it again. */
START_TEST(test_backend_error)
{
    fx f;
    fx_open(&f, "[env]\nbackend = faultenv\nid = Fault-v0\nnum_envs = 3\nexecutor = threads\nbatch_size = 1\n");
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    for (int r = 0; r < 3; r++) {
        crl_td *got = crl_env_recv(env, &e);
        ck_assert_msg(got != NULL, "%s", e.message);
        crl_td_unref(got);
    }
    int64_t ids[3] = { 0, 1, 2 };
    double acts[3] = { 0, 2, 0 };  /* env 1 "crashes": in this process faultenv returns an error instead */
    EXPECT_OK(send_acts(env, ids, acts, 3, &e), e);
    crl_td *got = NULL;
    int ok = 0;
    for (int r = 0; r < 3; r++) {
        got = crl_env_recv(env, &e);
        if (!got)
            break;
        ok++;
        crl_td_unref(got);
    }
    ck_assert_ptr_null(got);
    expect_err(e.code, &e, CRL_E_RUNTIME, "env 1");
    ck_assert_int_le(ok, 2);
    crl_error e2 = { 0 };
    expect_err(send_acts(env, ids, acts, 1, &e2), &e2, CRL_E_RUNTIME, "call crl_env_async_reset");
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    for (int r = 0; r < 3; r++) {
        crl_td *g2 = crl_env_recv(env, &e);
        ck_assert_msg(g2 != NULL, "%s", e.message);
        ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(g2, "done"), 0), 0.0);
        crl_td_unref(g2);
    }
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

/* Pixels come back with their env's frame. */
START_TEST(test_pixels)
{
    fx f;
    fx_open(&f, "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 3\nexecutor = threads\nbatch_size = 2\n"
                "from_pixels = true\n");
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    crl_td *got = crl_env_recv(env, &e);
    ck_assert_msg(got != NULL, "%s", e.message);
    crl_tensor *px = crl_td_get(got, "pixels");
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(crl_tensor_ndim(px), 4);
    ck_assert_int_eq(crl_tensor_shape(px)[0], 2);
    ck_assert_int_eq(crl_tensor_shape(px)[3], 3);
    /* the frame of env_id[0] is the one render draws for it */
    int64_t i = (int64_t)crl_tensor_flat_get(crl_td_get(got, "env_id"), 0);
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, crl_tensor_shape(px) + 1, NULL);
    EXPECT_OK(crl_env_render(env, i, frame, &e), e);
    crl_tensor *row = crl_tensor_index(px, 0, 0, NULL);
    crl_tensor *rc = crl_tensor_contiguous(row, NULL);
    ck_assert(memcmp(crl_tensor_data(rc), crl_tensor_data(frame), crl_tensor_nbytes(frame)) == 0);
    size_t nonwhite = 0;
    const uint8_t *p = crl_tensor_data(rc);
    for (size_t q = 0; q < crl_tensor_nbytes(rc); q++)
        nonwhite += p[q] != 255;
    ck_assert_uint_gt(nonwhite, 100);
    crl_tensor_unref(rc);
    crl_tensor_unref(row);
    crl_tensor_unref(frame);
    crl_td_unref(got);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

/* Many fast exchanges with several workers pushing results at once: every
 * recv gets its batch (a pop racing a push into an earlier slot once lost
 * its semaphore unit and hung here), and every env comes back once per send. */
START_TEST(test_stress)
{
    fx f;
    fx_open(&f, "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 64\nexecutor = threads\nnum_workers = 2\n"
                "batch_size = 32\nauto_reset = next_step\n");
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    int64_t *count = g_new0(int64_t, 64);
    double acts[32] = { 0, 1, 1, 0 };
    for (int x = 0; x < 2000; x++) {
        crl_td *got = crl_env_recv(env, &e);
        ck_assert_msg(got != NULL, "recv %d: %s", x, e.message);
        const int64_t *ids = crl_tensor_data(crl_td_get(got, "env_id"));
        for (int m = 0; m < 32; m++)
            count[ids[m]]++;
        EXPECT_OK(send_acts(env, ids, acts, 32, &e), e);
        crl_td_unref(got);
    }
    int64_t total = 0;
    for (int i = 0; i < 64; i++) {
        ck_assert_int_gt(count[i], 0);
        total += count[i];
    }
    ck_assert_int_eq(total, 64000);
    g_free(count);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

/* recv's tensors share one allocation: each is contiguous and 64-byte aligned like crl_tensor_new's, none
 * overlaps another (writing one changes no other), and one kept past its TensorDict and later recvs keeps
 * its values. */
START_TEST(test_recv_tensors_own_rows)
{
    fx f;
    fx_open(&f, "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 5\nexecutor = threads\nnum_workers = 2\n"
                "batch_size = 3\n");
    crl_error e = { 0 };
    crl_env *env = env_of(&f, "env");
    EXPECT_OK(crl_env_async_reset(env, &e), e);
    crl_td *got = crl_env_recv(env, &e);
    ck_assert_msg(got != NULL, "%s", e.message);
    size_t n = crl_td_len(got);
    ck_assert_uint_ge(n, 6);  /* env_id, observation, reward, done, terminated, truncated */
    crl_tensor **kept = g_new0(crl_tensor *, n), **copy = g_new0(crl_tensor *, n);
    for (size_t i = 0; i < n; i++) {
        crl_tensor *t = crl_td_tensor_at(got, i);
        ck_assert_msg(t != NULL, "'%s' is not a tensor", crl_td_key_at(got, i));
        ck_assert_int_eq(crl_tensor_shape(t)[0], 3);
        ck_assert(crl_tensor_is_contiguous(t));
        ck_assert_msg(((uintptr_t)crl_tensor_data(t) & 63) == 0, "'%s' is not 64-byte aligned", crl_td_key_at(got, i));
        kept[i] = crl_tensor_ref(t);
        copy[i] = crl_tensor_clone(t, NULL);
    }
    /* Overwrite each in turn with 0xA5 bytes: the others keep their values. */
    for (size_t i = 0; i < n; i++) {
        memset(crl_tensor_data(kept[i]), 0xA5, crl_tensor_nbytes(kept[i]));
        for (size_t j = i + 1; j < n; j++)
            ck_assert_msg(!memcmp(crl_tensor_data(kept[j]), crl_tensor_data(copy[j]), crl_tensor_nbytes(copy[j])),
                          "writing '%s' changed '%s'", crl_td_key_at(got, i), crl_td_key_at(got, j));
        memcpy(crl_tensor_data(kept[i]), crl_tensor_data(copy[i]), crl_tensor_nbytes(copy[i]));
    }
    const int64_t *ids = crl_tensor_data(crl_td_get(got, "env_id"));
    int64_t sent[3] = { ids[0], ids[1], ids[2] };
    crl_td_unref(got);
    double acts[3] = { 0.5, -1, 2 };
    for (int x = 0; x < 20; x++) {
        EXPECT_OK(send_acts(env, sent, acts, 3, &e), e);
        crl_td *g2 = crl_env_recv(env, &e);
        ck_assert_msg(g2 != NULL, "recv %d: %s", x, e.message);
        memcpy(sent, crl_tensor_data(crl_td_get(g2, "env_id")), sizeof sent);
        crl_td_unref(g2);
    }
    for (size_t i = 0; i < n; i++) {
        ck_assert(!memcmp(crl_tensor_data(kept[i]), crl_tensor_data(copy[i]), crl_tensor_nbytes(copy[i])));
        crl_tensor_unref(kept[i]);
        crl_tensor_unref(copy[i]);
    }
    g_free(kept);
    g_free(copy);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

static Suite *async_suite(void)
{
    Suite *s = suite_create("exec_async");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_routing_cartpole);
    tcase_add_test(tc, test_routing_pendulum_frame_skip);
    tcase_add_test(tc, test_routing_batch_one);
    tcase_add_test(tc, test_routing_caller_only);
    tcase_add_test(tc, test_per_env_async);
    tcase_add_test(tc, test_wrong_order_and_bad_input);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_backend_error);
    tcase_add_test(tc, test_pixels);
    tcase_add_test(tc, test_stress);
    tcase_add_test(tc, test_recv_tensors_own_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(async_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
