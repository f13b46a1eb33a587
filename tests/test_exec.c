/* Check suite: the executor layer (serial, threads, processes): equivalence with inline, per-env options, errors. */
#include "config.h"
#define _GNU_SOURCE 1 /* sched_getaffinity */
#include <sched.h>

#include <check.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/transform.h>

/* The executor behind an env (blocks, instances), for the clamping checks. */
#include "env-private.h"
#include "exec-private.h"
#include "keep-cairo.h"
#include "host-fixture.h"

#define EXPECT_OK(call, e) ck_assert_msg((call) == CRL_OK, "%s: %s", #call, (e).message)

/* ---- fixtures ---------------------------------------------------------------------- */

typedef crl_test_host fx;

/* A host with classic, transforms and faultenv; `ini` holds [env] and friends. */
static void fx_open(fx *f, const char *ini)
{
    crl_test_host_open(f, "classic, transforms, faultenv", ini);
}

static void fx_close(fx *f)
{
    crl_test_host_close(f);
}

/* [env] from `lines`; NULL with e set on failure.  The host stays in f. */
static crl_env *env_try(fx *f, const char *lines, crl_error *e)
{
    char *ini = g_strdup_printf("[env]\n%s\n", lines);
    fx_open(f, ini);
    g_free(ini);
    return crl_env_from_config(f->host, f->cfg, "env", e);
}

static crl_env *env_new(fx *f, const char *lines)
{
    crl_error e = { 0 };
    crl_env *env = env_try(f, lines, &e);
    ck_assert_msg(env != NULL, "env from\n%s\n: %s", lines, e.message);
    return env;
}

static bool processes_unavailable(const crl_error *e)
{
    return e->code == CRL_E_UNSUPPORTED;
}

/* ---- recorded rollouts ---------------------------------------------------------------- */

static void append_leaf(GByteArray *out, const crl_td *td, const char *key)
{
    const crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no '%s' in the step output", key);
    crl_tensor *c = crl_tensor_contiguous((crl_tensor *)t, NULL);
    ck_assert_ptr_nonnull(c);
    g_byte_array_append(out, crl_tensor_data(c), (guint)crl_tensor_nbytes(c));
    crl_tensor_unref(c);
}

/* Actions from rng into td's "action" (OneHot or Categorical int64, or Bounded float32). */
static void fill_actions(crl_env *env, crl_td *td, crl_rng *rng)
{
    const crl_spec *as = crl_env_action_spec(env);
    crl_tensor *a = crl_spec_zero(as, NULL);
    ck_assert_ptr_nonnull(a);
    int64_t n = crl_tensor_numel(a);
    if (crl_spec_get_kind(as) == CRL_SPEC_ONEHOT) {
        int64_t *p = crl_tensor_data(a), k = crl_spec_n(as);
        for (int64_t r = 0; r < n / k; r++)
            p[r * k + (int64_t)crl_rng_below(rng, (uint64_t)k)] = 1;
    } else if (crl_tensor_dtype(a) == CRL_I64) {
        int64_t *p = crl_tensor_data(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = (int64_t)crl_rng_below(rng, (uint64_t)crl_spec_n(as));
    } else {
        float *p = crl_tensor_data(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)crl_rng_range(rng, -2.0, 2.0);
    }
    ck_assert_int_eq(crl_td_set(td, "action", a, NULL), CRL_OK);
    crl_tensor_unref(a);
}

/* `steps` steps from seed 123 with actions from a fixed rng, a partial
 * reset (_reset from the same rng) every 29 steps; every output byte is
 * appended to the result. */
static GByteArray *record(crl_env *env, int steps, bool with_pixels)
{
    crl_error e = { 0 };
    GByteArray *out = g_byte_array_new();
    uint64_t next = crl_env_set_seed(env, 123);
    g_byte_array_append(out, (const guint8 *)&next, sizeof next);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "reset: %s", e.message);
    append_leaf(out, td, "observation");
    crl_rng rng;
    crl_rng_init(&rng, 99, 0);
    int64_t num = crl_env_num(env);
    bool batched = crl_env_batch_ndim(env) == 1;
    for (int s = 0; s < steps; s++) {
        fill_actions(env, td, &rng);
        EXPECT_OK(crl_env_step(env, td, &e), e);
        append_leaf(out, td, "next.observation");
        append_leaf(out, td, "next.reward");
        append_leaf(out, td, "next.done");
        append_leaf(out, td, "next.terminated");
        append_leaf(out, td, "next.truncated");
        if (with_pixels)
            append_leaf(out, td, "next.pixels");
        crl_td *nx = crl_env_step_mdp(env, td, &e);
        ck_assert_msg(nx != NULL, "step_mdp: %s", e.message);
        crl_td_unref(td);
        td = nx;
        if (batched && s % 29 == 28) {
            int64_t shape[2] = { num, 1 };
            crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shape, NULL);
            uint8_t *p = crl_tensor_data(m);
            for (int64_t i = 0; i < num; i++)
                p[i] = crl_rng_below(&rng, 2) ? 1 : 0;
            ck_assert_int_eq(crl_td_set(td, "_reset", m, NULL), CRL_OK);
            crl_tensor_unref(m);
            crl_td *r = crl_env_reset(env, td, &e);
            ck_assert_msg(r != NULL, "partial reset: %s", e.message);
            crl_td_unref(r);
            append_leaf(out, td, "observation");
        }
    }
    crl_td_unref(td);
    return out;
}

static void assert_same(const GByteArray *a, const GByteArray *b, const char *what)
{
    ck_assert_msg(a->len == b->len, "%s: %u bytes recorded, inline %u", what, b->len, a->len);
    if (memcmp(a->data, b->data, a->len) != 0) {
        guint at = 0;
        while (a->data[at] == b->data[at])
            at++;
        ck_abort_msg("%s: differs from inline at byte %u of %u", what, at, a->len);
    }
}

/* ---- equivalence ----------------------------------------------------------------------- */

static const char *const ids[] = { "CartPole-v1", "Pendulum-v1" };
static const int nums[] = { 0, 1, 3, 8 };
static const char *const execs[] = {
    "executor = serial",
    "executor = serial\nnum_workers = 3",
    "executor = threads",
    "executor = threads\nnum_workers = 3",
    "executor = threads\nnum_workers = 5\npin_threads = true",
    "executor = processes\nnum_workers = 3",
};

/* pin_threads pins to CPUs this process may use, which need not include CPU 0 (taskset, cpuset cgroups):
 * with the first allowed CPU taken away, the threads and async pools still start.  (A pool has workers to
 * pin only with 2 or more CPUs left, so on a 2-CPU machine this runs unpinned; from 3 CPUs up it fails for
 * a pool that pins worker i to CPU i.) */
START_TEST(test_pin_threads_in_cpuset)
{
    cpu_set_t saved, rest;
    ck_assert_int_eq(sched_getaffinity(0, sizeof saved, &saved), 0);
    rest = saved;
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &saved))
            first = c;
    if (CPU_COUNT(&saved) > 1)
        CPU_CLR(first, &rest);
    ck_assert_int_eq(sched_setaffinity(0, sizeof rest, &rest), 0);
    int top = CPU_COUNT(&rest);
    static const char *const pinned[] = {
        "backend = classic\nid = CartPole-v1\nnum_envs = 4\nexecutor = threads\nnum_workers = 2\npin_threads = true",
        "backend = classic\nid = CartPole-v1\nnum_envs = 4\nexecutor = threads\nnum_workers = 2\npin_threads = true\n"
        "batch_size = 2",
    };
    for (size_t k = 0; k < G_N_ELEMENTS(pinned); k++) {
        fx f;
        crl_env *env = env_new(&f, pinned[k]);
        ck_assert_msg(env != NULL, "pinned within %d CPUs: %s", top, pinned[k]);
        crl_error e = { 0 };
        if (strstr(pinned[k], "batch_size")) {
            ck_assert_msg(crl_env_async_reset(env, &e) == CRL_OK, "pinned within %d CPUs: %s", top, e.message);
        } else {
            crl_td *td = crl_env_reset(env, NULL, &e);
            ck_assert_msg(td != NULL, "pinned within %d CPUs: %s", top, e.message);
            crl_td_unref(td);
        }
        crl_env_free(env);
        fx_close(&f);
    }
    ck_assert_int_eq(sched_setaffinity(0, sizeof saved, &saved), 0);
}
END_TEST

START_TEST(test_equivalence)
{
    const char *id = ids[_i / 4];
    int num = nums[_i % 4];
    fx f;
    char *base = g_strdup_printf("backend = classic\nid = %s\nnum_envs = %d\nauto_reset = next_step", id, num);
    crl_env *ref = env_new(&f, base);
    GByteArray *want = record(ref, 300, false);
    crl_env_free(ref);
    fx_close(&f);
    for (size_t k = 0; k < G_N_ELEMENTS(execs); k++) {
        char *lines = g_strdup_printf("%s\n%s", base, execs[k]);
        crl_error e = { 0 };
        crl_env *env = env_try(&f, lines, &e);
        if (!env && strstr(execs[k], "processes") && processes_unavailable(&e)) {
            printf("note: %s num_envs %d: processes executor unavailable (%s); skipped\n", id, num, e.message);
            fx_close(&f);
            g_free(lines);
            continue;
        }
        ck_assert_msg(env != NULL, "%s: %s", lines, e.message);
        ck_assert_int_eq(crl_env_num(env), num ? num : 1);
        ck_assert_int_eq(crl_env_batch_ndim(env), num ? 1 : 0);
        GByteArray *got = record(env, 300, false);
        char what[160];
        g_snprintf(what, sizeof what, "%s num_envs %d [%s]", id, num, execs[k]);
        assert_same(want, got, what);
        g_byte_array_unref(got);
        crl_env_free(env);
        fx_close(&f);
        g_free(lines);
    }
    g_byte_array_unref(want);
    g_free(base);
}
END_TEST

/* The specs an executor declares are the inline env's. */
START_TEST(test_specs_match_inline)
{
    fx f, g;
    crl_env *a = env_new(&f, "backend = classic\nid = Pendulum-v1\nnum_envs = 5");
    crl_env *b = env_new(&g, "backend = classic\nid = Pendulum-v1\nnum_envs = 5\nexecutor = threads\nnum_workers = 2");
    char *ra = crl_env_specs_repr(a), *rb = crl_env_specs_repr(b);
    ck_assert_str_eq(ra, rb);
    ck_assert(crl_spec_equal(crl_env_observation_spec(a), crl_env_observation_spec(b)));
    ck_assert(crl_spec_equal(crl_env_action_spec(a), crl_env_action_spec(b)));
    ck_assert_int_eq(crl_env_max_episode_steps(b), 200);
    ck_assert_int_eq(crl_env_batch_size(b), 5);
    ck_assert_int_eq(crl_env_batch_size(a), 5);
    ck_assert_int_eq(crl_env_restarts(b), 0);
    crl_free(ra);
    crl_free(rb);
    crl_env_free(a);
    crl_env_free(b);
    fx_close(&f);
    fx_close(&g);
}
END_TEST

/* Seed chain: set_seed returns the element after the last env's. */
START_TEST(test_seed_chain)
{
    fx f;
    crl_env *env = env_new(&f, "backend = classic\nid = CartPole-v1\nnum_envs = 7\nexecutor = threads\nnum_workers = 3");
    uint64_t want = 5;
    for (int i = 0; i < 7; i++)
        want = crl_seed_next(want);
    ck_assert_uint_eq(crl_env_set_seed(env, 5), want);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

/* ---- per-env options ----------------------------------------------------------------------- */

/* Env i of a batch with per_env.g = gs equals a single env made with g = gs[i]
 * and seed = chain element i, under the same actions. */
static void per_env_case(const char *executor)
{
    static const char *gs[3] = { "9.8", "10.0", "2.5" };
    const int T = 60;
    fx f;
    char *lines = g_strdup_printf("backend = classic\nid = Pendulum-v1\nnum_envs = 3\n%s\nper_env.g = %s, %s, %s",
                                  executor, gs[0], gs[1], gs[2]);
    crl_env *env = env_new(&f, lines);
    g_free(lines);
    crl_error e = { 0 };
    crl_env_set_seed(env, 77);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    crl_rng rng;
    crl_rng_init(&rng, 3, 0);
    float acts[60][3], obs[60][3][3];
    for (int s = 0; s < T; s++) {
        fill_actions(env, td, &rng);
        memcpy(acts[s], crl_tensor_data(crl_td_get(td, "action")), sizeof acts[s]);
        EXPECT_OK(crl_env_step(env, td, &e), e);
        memcpy(obs[s], crl_tensor_data(crl_td_get(td, "next.observation")), sizeof obs[s]);
        crl_td *nx = crl_env_step_mdp(env, td, &e);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    crl_env_free(env);
    fx_close(&f);
    uint64_t seed = 77;
    for (int i = 0; i < 3; i++, seed = crl_seed_next(seed)) {
        char *one = g_strdup_printf("backend = classic\nid = Pendulum-v1\nnum_envs = 1\ng = %s", gs[i]);
        crl_env *s1 = env_new(&f, one);
        g_free(one);
        crl_env_set_seed(s1, seed);
        crl_td *t1 = crl_env_reset(s1, NULL, &e);
        ck_assert_ptr_nonnull(t1);
        for (int s = 0; s < T; s++) {
            int64_t shape[2] = { 1, 1 };
            crl_tensor *a = crl_tensor_new(CRL_F32, 2, shape, NULL);
            *(float *)crl_tensor_data(a) = acts[s][i];
            crl_td_set(t1, "action", a, NULL);
            crl_tensor_unref(a);
            EXPECT_OK(crl_env_step(s1, t1, &e), e);
            const float *o = crl_tensor_data(crl_td_get(t1, "next.observation"));
            ck_assert_msg(memcmp(o, obs[s][i], sizeof obs[s][i]) == 0,
                          "%s: env %d (g = %s) differs from a single env with that g at step %d", executor, i, gs[i], s);
            crl_td *nx = crl_env_step_mdp(s1, t1, &e);
            crl_td_unref(t1);
            t1 = nx;
        }
        crl_td_unref(t1);
        crl_env_free(s1);
        fx_close(&f);
    }
    /* Different gravity really gives different dynamics. */
    ck_assert_msg(memcmp(obs[T - 1][1], obs[T - 1][2], sizeof obs[0][0]) != 0 ||
                  memcmp(obs[0][1], obs[0][2], sizeof obs[0][0]) != 0, "per-env g had no effect");
}

START_TEST(test_per_env_serial) { per_env_case("executor = serial"); }
END_TEST

START_TEST(test_per_env_threads) { per_env_case("executor = threads\nnum_workers = 2"); }
END_TEST

/* Per-env bounds: max_torque per env gives elementwise action bounds. */
START_TEST(test_per_env_bounds)
{
    fx f;
    crl_env *env = env_new(&f, "backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = serial\n"
                               "per_env.max_torque = 1, 2, 3");
    const crl_spec *a = crl_env_action_spec(env);
    ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_BOUNDED);
    crl_tensor *h = crl_tensor_contiguous((crl_tensor *)crl_spec_high(a), NULL);
    crl_tensor *l = crl_tensor_contiguous((crl_tensor *)crl_spec_low(a), NULL);
    const double *hp = crl_tensor_data(h), *lp = crl_tensor_data(l);
    for (int i = 0; i < 3; i++) {
        ck_assert(hp[i] == i + 1.0);
        ck_assert(lp[i] == -(i + 1.0));
    }
    crl_tensor_unref(h);
    crl_tensor_unref(l);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

/* ---- render, pixels, transforms -------------------------------------------------------------- */

START_TEST(test_render_and_pixels)
{
    fx f;
    const char *base = "backend = classic\nid = CartPole-v1\nnum_envs = 3\nauto_reset = next_step\nfrom_pixels = true\n"
                       "pixels_only = false";
    crl_env *ref = env_new(&f, base);
    GByteArray *want = record(ref, 40, true);
    int64_t shape[3] = { crl_env_render_height(ref), crl_env_render_width(ref), 3 };
    crl_tensor *fa = crl_tensor_new(CRL_U8, 3, shape, NULL), *fb = crl_tensor_new(CRL_U8, 3, shape, NULL);
    crl_error e = { 0 };
    EXPECT_OK(crl_env_render(ref, 2, fa, &e), e);
    crl_env_free(ref);
    fx_close(&f);
    static const char *const kinds[] = { "executor = threads\nnum_workers = 2", "executor = serial\nnum_workers = 2",
                                         "executor = processes\nnum_workers = 2" };
    for (size_t k = 0; k < G_N_ELEMENTS(kinds); k++) {
        char *lines = g_strdup_printf("%s\n%s", base, kinds[k]);
        crl_env *env = env_try(&f, lines, &e);
        g_free(lines);
        if (!env && k == 2 && processes_unavailable(&e)) {
            printf("note: processes executor unavailable (%s); render through it skipped\n", e.message);
            fx_close(&f);
            continue;
        }
        ck_assert_msg(env != NULL, "%s: %s", kinds[k], e.message);
        GByteArray *got = record(env, 40, true);
        assert_same(want, got, kinds[k]);
        g_byte_array_unref(got);
        memset(crl_tensor_data(fb), 0, crl_tensor_nbytes(fb));
        EXPECT_OK(crl_env_render(env, 2, fb, &e), e);
        ck_assert_msg(memcmp(crl_tensor_data(fa), crl_tensor_data(fb), crl_tensor_nbytes(fa)) == 0,
                      "%s: render(2) differs from inline", kinds[k]);
        ck_assert_int_eq(crl_env_render(env, 3, fb, &e), CRL_E_RANGE);
        crl_env_free(env);
        fx_close(&f);
    }
    crl_tensor_unref(fa);
    crl_tensor_unref(fb);
    g_byte_array_unref(want);
}
END_TEST

START_TEST(test_transforms_on_top)
{
    fx f;
    const char *base = "backend = classic\nid = CartPole-v1\nnum_envs = 4\nauto_reset = next_step\ntransforms = rs, sc\n"
                       "[transform.rs]\ntype = RewardSum\n[transform.sc]\ntype = StepCounter";
    crl_env *ref = env_new(&f, base);
    GByteArray *want = record(ref, 100, false);
    crl_env_free(ref);
    fx_close(&f);
    /* The executor keys belong to [env], which the transform sections follow. */
    char *lines = g_strdup_printf("executor = serial\nnum_workers = 3\n%s", base);
    crl_env *env = env_new(&f, lines);
    g_free(lines);
    ck_assert_uint_eq(crl_env_transform_count(env), 2);
    GByteArray *got = record(env, 100, false);
    assert_same(want, got, "transforms over serial");
    crl_env_free(env);
    fx_close(&f);
    g_byte_array_unref(want);
    g_byte_array_unref(got);
}
END_TEST

/* Every leaf of a and b (the same keys) holds the same bytes. */
static void assert_same_td(const crl_td *a, const crl_td *b, const char *what, int step)
{
    char **ka = crl_td_leaf_keys(a, NULL), **kb = crl_td_leaf_keys(b, NULL);
    size_t na = 0, nb = 0;
    while (ka[na])
        na++;
    while (kb[nb])
        nb++;
    ck_assert_msg(na == nb, "%s, step %d: %zu keys vs %zu", what, step, na, nb);
    for (size_t i = 0; i < na; i++) {
        crl_tensor *x = crl_td_get(a, ka[i]), *y = crl_td_get(b, ka[i]);
        ck_assert_msg(y != NULL, "%s, step %d: no '%s'", what, step, ka[i]);
        crl_tensor *xc = crl_tensor_contiguous(x, NULL), *yc = crl_tensor_contiguous(y, NULL);
        ck_assert_msg(crl_tensor_nbytes(xc) == crl_tensor_nbytes(yc) &&
                          memcmp(crl_tensor_data(xc), crl_tensor_data(yc), crl_tensor_nbytes(xc)) == 0,
                      "%s, step %d: '%s' differs", what, step, ka[i]);
        crl_tensor_unref(xc);
        crl_tensor_unref(yc);
    }
    crl_free(ka);
    crl_free(kb);
}

/* worker_transforms (the chain inside each worker) gives what the same chain
 * gives in the parent: every key, every step, through auto-resets (a short
 * time limit), partial resets and a reseed, for every executor. */
static void worker_tf_case(const char *autoreset)
{
    static const char *const kinds[] = { "executor = serial\nnum_workers = 2", "executor = threads\nnum_workers = 3",
                                         "executor = processes\nnum_workers = 2" };
    const char *tf = "[transform.rs]\ntype = RewardSum\n[transform.sc]\ntype = StepCounter\n"
                     "[transform.cf]\ntype = CatFrames\nN = 3\ndim = -1\nin_keys = observation\n";
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 5\nauto_reset = %s\n"
                                "max_episode_steps = 17\ntransforms = rs, sc, cf\n", autoreset);
    for (size_t k = 0; k < G_N_ELEMENTS(kinds); k++) {
        char *wini = g_strdup_printf("[w]\nbackend = classic\nid = CartPole-v1\nnum_envs = 5\nauto_reset = %s\n"
                                     "max_episode_steps = 17\nworker_transforms = rs, sc, cf\n%s\n%s%s",
                                     autoreset, kinds[k], tf, ini);
        fx f;
        fx_open(&f, wini);
        g_free(wini);
        crl_error e = { 0 };
        crl_env *p = crl_env_from_config(f.host, f.cfg, "env", &e);
        ck_assert_msg(p != NULL, "%s", e.message);
        crl_env *w = crl_env_from_config(f.host, f.cfg, "w", &e);
        if (!w && processes_unavailable(&e)) {
            crl_env_free(p);
            fx_close(&f);
            continue;
        }
        ck_assert_msg(w != NULL, "%s: %s", kinds[k], e.message);
        ck_assert_uint_eq(crl_env_transform_count(w), 0);
        char *ps = crl_env_specs_repr(p), *ws = crl_env_specs_repr(w);
        ck_assert_str_eq(ws, ps);
        crl_free(ps);
        crl_free(ws);
        crl_env_set_seed(p, 31);
        crl_env_set_seed(w, 31);
        crl_td *tp = crl_env_reset(p, NULL, &e), *tw = crl_env_reset(w, NULL, &e);
        ck_assert_msg(tp && tw, "%s", e.message);
        assert_same_td(tp, tw, kinds[k], -1);
        crl_rng rng;
        crl_rng_init(&rng, 4, 0);
        bool off = !strcmp(autoreset, "off");
        for (int s = 0; s < 90; s++) {
            fill_actions(p, tp, &rng);
            crl_td_set(tw, "action", crl_td_get(tp, "action"), NULL);
            EXPECT_OK(crl_env_step(p, tp, &e), e);
            EXPECT_OK(crl_env_step(w, tw, &e), e);
            assert_same_td(tp, tw, kinds[k], s);
            crl_td *np = crl_env_step_mdp(p, tp, &e), *nw = crl_env_step_mdp(w, tw, &e);
            crl_td_unref(tp);
            crl_td_unref(tw);
            tp = np;
            tw = nw;
            /* auto_reset = off: reset what ended; every 23 steps a random partial reset too */
            int64_t shape[2] = { 5, 1 };
            crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shape, NULL);
            uint8_t *mp = crl_tensor_data(m);
            bool any = false;
            for (int i = 0; i < 5; i++) {
                mp[i] = (off && crl_tensor_flat_get(crl_td_get(tp, "done"), i) != 0.0) ||
                        (s % 23 == 22 && crl_rng_below(&rng, 2));
                any |= mp[i];
            }
            if (s == 60) {
                crl_env_set_seed(p, 5);
                crl_env_set_seed(w, 5);
            }
            if (any || s == 60) {
                crl_td_set(tp, "_reset", m, NULL);
                crl_td_set(tw, "_reset", m, NULL);
                crl_td *rp = crl_env_reset(p, tp, &e), *rw = crl_env_reset(w, tw, &e);
                ck_assert_msg(rp && rw, "%s", e.message);
                crl_td_unref(rp);
                crl_td_unref(rw);
                assert_same_td(tp, tw, kinds[k], s);
            }
            crl_tensor_unref(m);
        }
        crl_td_unref(tp);
        crl_td_unref(tw);
        crl_env_free(p);
        crl_env_free(w);
        fx_close(&f);
    }
    g_free(ini);
}

START_TEST(test_worker_transforms_next_step) { worker_tf_case("next_step"); }
END_TEST
START_TEST(test_worker_transforms_off) { worker_tf_case("off"); }
END_TEST

/* Both places at once: the worker chain's outputs go through the parent's chain. */
START_TEST(test_worker_and_parent_transforms)
{
    fx f;
    crl_env *env = env_new(&f, "backend = classic\nid = Pendulum-v1\nnum_envs = 4\nexecutor = threads\n"
                               "worker_transforms = sc\ntransforms = rs\n"
                               "[transform.sc]\ntype = StepCounter\n[transform.rs]\ntype = RewardSum");
    ck_assert_uint_eq(crl_env_transform_count(env), 1);
    crl_error e = { 0 };
    EXPECT_OK(crl_env_check_specs(env, 20, &e), e);
    crl_td *td = crl_env_rollout(env, 7, NULL, NULL, false, true, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    ck_assert(crl_td_has(td, "next.step_count") && crl_td_has(td, "next.episode_reward"));
    ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(td, "next.step_count"), 6), 7.0);
    crl_td_unref(td);
    crl_env_free(env);
    fx_close(&f);
    /* worker_transforms need an executor; a bad name is the inner env's error with its file:line */
    crl_env *bad = env_try(&f, "backend = classic\nid = CartPole-v1\nnum_envs = 2\nworker_transforms = sc\n"
                               "[transform.sc]\ntype = StepCounter", &e);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "test.ini:") && strstr(e.message, "set executor = serial"), "%s", e.message);
    fx_close(&f);
    bad = env_try(&f, "backend = classic\nid = CartPole-v1\nnum_envs = 2\nexecutor = serial\n"
                      "worker_transforms = nope\n", &e);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "transform.nope") && strstr(e.message, "test.ini:"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* ---- options and bad input --------------------------------------------------------------- */

static crl__exec *exec_of(crl_env *env)
{
    return (crl__exec *)env->benv;
}

START_TEST(test_workers_clamped)
{
    fx f;
    crl_env *env = env_new(&f, "backend = classic\nid = CartPole-v1\nnum_envs = 3\nexecutor = threads\nnum_workers = 16");
    crl__exec *x = exec_of(env);
    ck_assert_uint_eq(x->nblocks, 3);
    ck_assert_uint_eq(x->ninst, 3);
    ck_assert_int_eq(x->o.num_workers, 3);
    crl_env_free(env);
    fx_close(&f);
    /* Odd blocks: 8 envs over 3 workers are 3 + 3 + 2, one instance each. */
    env = env_new(&f, "backend = classic\nid = CartPole-v1\nnum_envs = 8\nexecutor = serial\nnum_workers = 3");
    x = exec_of(env);
    ck_assert_uint_eq(x->nblocks, 3);
    ck_assert_uint_eq(x->ninst, 3);
    ck_assert_int_eq(x->blocks[0].count, 3);
    ck_assert_int_eq(x->blocks[1].count, 3);
    ck_assert_int_eq(x->blocks[2].count, 2);
    ck_assert_int_eq(x->inst[2].start, 6);
    crl_env_free(env);
    fx_close(&f);
    /* Serial defaults to one block; a single env (num_envs = 0) is fine. */
    env = env_new(&f, "backend = classic\nid = CartPole-v1\nnum_envs = 0\nexecutor = threads");
    x = exec_of(env);
    ck_assert_uint_eq(x->nblocks, 1);
    ck_assert_int_eq(crl_env_batch_ndim(env), 0);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

static void expect_config_error(const char *lines, int code, const char *const *needles)
{
    fx f;
    crl_error e = { 0 };
    crl_env *env = env_try(&f, lines, &e);
    ck_assert_msg(env == NULL, "expected an error for\n%s", lines);
    ck_assert_msg(e.code == code, "code %s (want %s): %s", crl_status_name(e.code), crl_status_name(code), e.message);
    for (; *needles; needles++)
        ck_assert_msg(strstr(e.message, *needles), "'%s' not in: %s", *needles, e.message);
    fx_close(&f);
}

START_TEST(test_bad_input)
{
    /* test.ini line 1 is [plugins], 2 load, 3 [env], 4 backend, 5 id, 6 num_envs, 7 executor, 8 per_env. */
    const char *wrong_len[] = { "per_env.g", "test.ini:8", "2 values", "3 envs", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = serial\nper_env.g = 1, 2",
                        CRL_E_CONFIG, wrong_len);
    const char *unknown[] = { "per_env.gg", "test.ini:8", "did you mean 'per_env.g'", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = serial\nper_env.gg = 1, 2, 3",
                        CRL_E_CONFIG, unknown);
    const char *bad_value[] = { "env 1", "per_env.g = abc", "test.ini:8", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = threads\nper_env.g = 1, abc, 3",
                        CRL_E_CONFIG, bad_value);
    /* Checked by the backend's make, for env 2's instance: a config error naming the line. */
    const char *out_of_range[] = { "env 2", "per_env.g = 5000", "test.ini:8", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = serial\nper_env.g = 1, 2, 5000",
                        CRL_E_CONFIG, out_of_range);
    const char *empty_item[] = { "per_env.g", "env 1", "empty", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = serial\nper_env.g = 1, , 3",
                        CRL_E_CONFIG, empty_item);
    const char *inline_per_env[] = { "per_env.g", "executor = serial", "test.ini:7", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nper_env.g = 1, 2, 3",
                        CRL_E_CONFIG, inline_per_env);
    const char *big_batch[] = { "batch_size = 9", "num_envs = 3", "test.ini:7", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nbatch_size = 9\nexecutor = threads",
                        CRL_E_CONFIG, big_batch);
    const char *inline_batch[] = { "batch_size = 2", "executor = threads", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nbatch_size = 2",
                        CRL_E_CONFIG, inline_batch);
    const char *bad_kind[] = { "executor", "test.ini:7", NULL };
    expect_config_error("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = fibers", CRL_E_CONFIG, bad_kind);
}
END_TEST

/* A backend error inside a worker's block names the global envs and comes back. */
START_TEST(test_step_error_routed)
{
    for (int k = 0; k < 2; k++) {
        fx f;
        crl_env *env = env_new(&f, k ? "backend = faultenv\nid = Fault-v0\nnum_envs = 8\nexecutor = threads\nnum_workers = 4"
                                     : "backend = faultenv\nid = Fault-v0\nnum_envs = 8\nexecutor = serial\nnum_workers = 4");
        crl_error e = { 0 };
        crl_td *td = crl_env_reset(env, NULL, &e);
        ck_assert_ptr_nonnull(td);
        int64_t n = 8;
        crl_tensor *a = crl_tensor_new(CRL_I64, 1, &n, NULL);
        int64_t *p = crl_tensor_data(a);
        for (int i = 0; i < 8; i++)
            p[i] = i == 5 ? 2 : 0;
        crl_td_set(td, "action", a, NULL);
        crl_tensor_unref(a);
        int rc = crl_env_step(env, td, &e);
        ck_assert_msg(rc == CRL_E_RUNTIME, "rc %d: %s", rc, e.message);
        ck_assert_msg(strstr(e.message, "envs 4..5 (the backend's envs 0..1)"), "no env range in: %s", e.message);
        /* The executor still works after the failed step. */
        p = crl_tensor_data(crl_td_get(td, "action"));
        p[5] = 0;
        EXPECT_OK(crl_env_step(env, td, &e), e);
        crl_td_unref(td);
        crl_env_free(env);
        fx_close(&f);
    }
}
END_TEST

/* ---- shared VecNorm in the workers ------------------------------------------------------- */

/* CartPole x6 on 3 workers, each running VecNorm over the named statistics `name` (NULL: the worker's own),
 * recorded as record() does. */
static GByteArray *vecnorm_run(const char *exec, const char *name, bool *skipped)
{
    char *lines = g_strdup_printf("backend = classic\nid = CartPole-v1\nnum_envs = 6\n%s\nnum_workers = 3\n"
                                  "auto_reset = next_step\nworker_transforms = vn\n"
                                  "[transform.vn]\ntype = VecNorm\nin_keys = observation, reward\n%s%s",
                                  exec, name ? "shared = true\nshm_name = " : "", name ? name : "");
    fx f;
    crl_error e = { 0 };
    crl_env *env = env_try(&f, lines, &e);
    g_free(lines);
    *skipped = !env && processes_unavailable(&e);
    if (*skipped) {
        fx_close(&f);
        return NULL;
    }
    ck_assert_msg(env != NULL, "%s: %s", exec, e.message);
    GByteArray *out = record(env, 70, false);
    crl_env_free(env);
    fx_close(&f);
    return out;
}

/* TorchRL's ParallelEnv of TransformedEnv(base, VecNorm) with shared statistics: the workers take turns
 * (crl_transform_ctx_wait_turn), so every run of every executor gives the serial executor's bytes. */
START_TEST(test_shared_vecnorm_workers_bitwise)
{
    char name[64];
    bool skipped;
    int run = 0;
#define VN_NAME() (snprintf(name, sizeof name, "/crl-test-exec-vn-%d-%d", (int)getpid(), run++), name)
    GByteArray *serial = vecnorm_run("executor = serial", VN_NAME(), &skipped);
    static const char *const kinds[] = { "executor = processes", "executor = processes", "executor = threads",
                                         "executor = threads" };
    for (size_t k = 0; k < G_N_ELEMENTS(kinds); k++) {
        GByteArray *got = vecnorm_run(kinds[k], VN_NAME(), &skipped);
        if (skipped)
            continue;
        assert_same(serial, got, kinds[k]);
        g_byte_array_free(got, TRUE);
    }
    /* The statistics really are shared: each worker's own give other bytes. */
    GByteArray *own = vecnorm_run("executor = serial", NULL, &skipped);
    ck_assert(own->len == serial->len && memcmp(own->data, serial->data, own->len) != 0);
    g_byte_array_free(own, TRUE);
    g_byte_array_free(serial, TRUE);
#undef VN_NAME
}
END_TEST

/* A worker that crashes releases the workers waiting for its turn: the step comes back with only its envs
 * restarted.  (Were they not released, the step would wait step_timeout = 600 s, past this test's timeout.) */
START_TEST(test_shared_vecnorm_worker_crash)
{
    char lines[512];
    snprintf(lines, sizeof lines, "backend = faultenv\nid = Fault-v0\nnum_envs = 4\nexecutor = processes\n"
             "num_workers = 2\non_worker_failure = restart\nstep_timeout = 600\nauto_reset = next_step\n"
             "worker_transforms = vn\n[transform.vn]\ntype = VecNorm\nin_keys = observation\nshared = true\n"
             "shm_name = /crl-test-exec-vncrash-%d", (int)getpid());
    fx f;
    crl_error e = { 0 };
    crl_env *env = env_try(&f, lines, &e);
    if (!env && processes_unavailable(&e)) {
        fx_close(&f);
        return;
    }
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    int64_t shape[1] = { 4 };
    crl_tensor *a = crl_tensor_new(CRL_I64, 1, shape, &e);
    int64_t *ap = crl_tensor_data(a);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 4; i++)
            ap[i] = s == 1 && i == 0 ? 2 : 0; /* step 1: env 0 (worker 0) crashes */
        ck_assert_int_eq(crl_td_set(td, "action", a, NULL), CRL_OK);
        EXPECT_OK(crl_env_step(env, td, &e), e);
        crl_td *nx = crl_env_step_mdp(env, td, &e);
        ck_assert_msg(nx != NULL, "%s", e.message);
        crl_td_unref(td);
        td = nx;
    }
    ck_assert_int_eq(crl_env_restarts(env), 1);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_env_free(env);
    fx_close(&f);
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("equivalence");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_equivalence, 0, 8);
    tcase_add_test(tc, test_pin_threads_in_cpuset);
    tcase_add_test(tc, test_specs_match_inline);
    tcase_add_test(tc, test_seed_chain);
    suite_add_tcase(s, tc);
    tc = tcase_create("per_env");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_per_env_serial);
    tcase_add_test(tc, test_per_env_threads);
    tcase_add_test(tc, test_per_env_bounds);
    suite_add_tcase(s, tc);
    tc = tcase_create("features");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_render_and_pixels);
    tcase_add_test(tc, test_transforms_on_top);
    tcase_add_test(tc, test_worker_transforms_next_step);
    tcase_add_test(tc, test_worker_transforms_off);
    tcase_add_test(tc, test_worker_and_parent_transforms);
    tcase_add_test(tc, test_shared_vecnorm_workers_bitwise);
    tcase_add_test(tc, test_shared_vecnorm_worker_crash);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_workers_clamped);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_step_error_routed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(exec_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
