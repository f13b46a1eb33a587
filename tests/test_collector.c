/* Check suite for the data collectors (sync, multi sync, multi async) over the classic envs. */
#include <check.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/collector.h>
#include <crl/crl.h>
#include <crl/replay.h>

#include "cli-schema.h"
#include "host-fixture.h"
#include "keep-cairo.h"

#define EXPECT_OK(call, e) ck_assert_msg((call) == CRL_OK, "%s: %s", #call, (e).message)

typedef struct fx {
    crl_test_host h;
    crl_config *cfg;
    crl_host *host;
    crl_collector *c;
} fx;

/* Build the config from `ini` (classic and replay loaded) and the collector
 * over [collector] and [env]; NULL with err set on failure. */
static crl_collector *fx_open(fx *f, const char *ini, crl_policy_fn policy, void *user, crl_error *err)
{
    memset(f, 0, sizeof *f);
    crl_test_host_open(&f->h, "classic, replay", ini);
    f->cfg = f->h.cfg;
    f->host = f->h.host;
    f->c = crl_collector_from_config(f->host, f->cfg, "collector", "env", policy, user, err);
    return f->c;
}

static crl_collector *fx_ok(fx *f, const char *ini, crl_policy_fn policy, void *user)
{
    crl_error e = { 0 };
    crl_collector *c = fx_open(f, ini, policy, user, &e);
    ck_assert_msg(c != NULL, "crl_collector_from_config: %s", e.message);
    return c;
}

static void fx_close(fx *f)
{
    crl_collector_free(f->c);
    crl_test_host_close(&f->h);
    memset(f, 0, sizeof *f);
}

static crl_td *next_ok(crl_collector *c)
{
    crl_error e = { 0 };
    crl_td *td = crl_collector_next(c, &e);
    ck_assert_msg(td != NULL, "crl_collector_next: %s", e.code ? e.message : "ended early");
    return td;
}

static void assert_shape(const crl_tensor *t, int nd, const int64_t *shape, const char *what)
{
    ck_assert_msg(t != NULL, "%s is missing", what);
    ck_assert_int_eq(crl_tensor_ndim(t), nd);
    for (int d = 0; d < nd; d++)
        ck_assert_msg(crl_tensor_shape(t)[d] == shape[d], "%s dim %d: %" PRId64 " != %" PRId64, what, d,
                      crl_tensor_shape(t)[d], shape[d]);
}

static double at(const crl_td *td, const char *key, int64_t pos)
{
    crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no %s", key);
    return crl_tensor_flat_get(t, pos);
}

/* A linear policy for Pendulum (nn.Linear(3, 1) with fixed weights), clamped
 * to the action domain; counts its calls (atomically: multi collectors call
 * it from several threads). */
typedef struct lin {
    gint calls;
    int fail_at;      /* call number that fails (1-based), 0 never */
    double constant;  /* NAN: linear */
} lin;

static int lin_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)env;
    lin *p = user;
    int n = g_atomic_int_add(&p->calls, 1) + 1;
    if (p->fail_at && n == p->fail_at)
        return crl_error_set(err, CRL_E_RUNTIME, "boom at call %d", n);
    crl_tensor *obs = crl_td_get(td, "observation");
    int64_t num = crl_tensor_numel(obs) / 3, shape[2] = { num, 1 };
    int nd = crl_tensor_ndim(obs);
    crl_tensor *a = crl_tensor_new(CRL_F32, nd, shape, err);
    if (nd == 1)
        a = (crl_tensor_unref(a), crl_tensor_new(CRL_F32, 1, (int64_t[]){ 1 }, err));
    for (int64_t i = 0; i < num; i++) {
        double v = isnan(p->constant) ? 0.3 * crl_tensor_flat_get(obs, 3 * i) - 0.2 * crl_tensor_flat_get(obs, 3 * i + 1) +
                                            0.1 * crl_tensor_flat_get(obs, 3 * i + 2)
                                      : p->constant;
        crl_tensor_flat_set(a, i, v < -2 ? -2 : v > 2 ? 2 : v);
    }
    int rc = crl_td_set(td, "action", a, err);
    crl_tensor_unref(a);
    return rc;
}

static const char *const torchrl_keys[] = {
    "action", "collector.traj_ids", "done", "next.done", "next.observation", "next.reward",
    "next.terminated", "next.truncated", "observation", "terminated", "truncated", NULL
};

/* The keys of TorchRL's printout, and their shapes for batch bs (nb dims). */
static void check_pendulum_layout(const crl_td *td, int nb, const int64_t *bs, bool worker)
{
    char **keys = crl_td_leaf_keys(td, NULL);
    ck_assert_ptr_nonnull(keys);
    size_t n = 0;
    while (keys[n])
        n++;
    /* TorchRL's keys and collector.worker when async: nothing else (no "state": the classic envs keep
     * theirs unless [env] return_state = true) */
    ck_assert_uint_eq(n, worker ? 12 : 11);
    for (size_t i = 0; torchrl_keys[i]; i++)
        ck_assert_msg(crl_td_has(td, torchrl_keys[i]), "missing %s", torchrl_keys[i]);
    ck_assert(!crl_td_has(td, "state") && !crl_td_has(td, "next.state"));
    crl_free(keys);
    ck_assert_int_eq(crl_td_batch_ndim(td), nb);
    for (int d = 0; d < nb; d++)
        ck_assert_int_eq(crl_td_batch_shape(td)[d], bs[d]);
    int64_t s[CRL_MAX_DIMS];
    memcpy(s, bs, sizeof(int64_t) * (size_t)nb);
    s[nb] = 1;
    const char *one[] = { "action", "done", "terminated", "truncated", "next.done", "next.reward",
                          "next.terminated", "next.truncated" };
    for (size_t i = 0; i < G_N_ELEMENTS(one); i++)
        assert_shape(crl_td_get(td, one[i]), nb + 1, s, one[i]);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "action")), CRL_F32);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "next.reward")), CRL_F32);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "done")), CRL_BOOL);
    s[nb] = 3;
    assert_shape(crl_td_get(td, "observation"), nb + 1, s, "observation");
    assert_shape(crl_td_get(td, "next.observation"), nb + 1, s, "next.observation");
    assert_shape(crl_td_get(td, "collector.traj_ids"), nb, bs, "traj_ids");
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "collector.traj_ids")), CRL_I64);
    if (worker)
        assert_shape(crl_td_get(td, "collector.worker"), nb, bs, "worker");
}

#define PENDULUM_MULTI                                                                                   \
    "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\nseed = 5\n"                              \
    "[collector]\nframes_per_batch = 60\ntotal_frames = 240\nmax_frames_per_traj = -1\nnum_collectors = 2\n"

/* The intro demo's MultiSyncDataCollector: 2 sub-collectors x 3 envs x 10 steps, 4 batches. */
START_TEST(test_multi_sync_layout)
{
    fx f;
    lin p = { 0, 0, NAN };
    crl_collector *c = fx_ok(&f, PENDULUM_MULTI, lin_policy, &p);
    ck_assert_uint_eq(crl_collector_num_envs(c), 2);
    ck_assert_ptr_nonnull(crl_collector_env(c, 1));
    ck_assert_ptr_null(crl_collector_env(c, 2));
    int i = 0;
    crl_error e = { 0 };
    crl_td *td;
    while ((td = crl_collector_next(c, &e)) != NULL) {
        check_pendulum_layout(td, 3, (int64_t[]){ 2, 3, 10 }, false);
        if (i == 0)  /* Pendulum does not end in 10 steps: one trajectory per env, ids = env index */
            for (int64_t r = 0; r < 6; r++)
                for (int64_t t = 0; t < 10; t++)
                    ck_assert_int_eq((int64_t)at(td, "collector.traj_ids", r * 10 + t), r);
        crl_td_unref(td);
        i++;
    }
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_int_eq(i - 1, 3);  /* TorchRL prints i == 3 */
    ck_assert_int_eq(crl_collector_frames(c), 240);
    ck_assert_int_eq(g_atomic_int_get(&p.calls), 240 / 3);
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_OK);
    fx_close(&f);
}
END_TEST

/* MultiaSyncDataCollector: each batch is one sub-collector's [3, 20], with collector.worker. */
START_TEST(test_multi_async_layout)
{
    fx f;
    lin p = { 0, 0, NAN };
    crl_collector *c = fx_ok(&f, PENDULUM_MULTI "sync = false\n", lin_policy, &p);
    int i = 0, per[2] = { 0, 0 };
    crl_error e = { 0 };
    crl_td *td;
    while ((td = crl_collector_next(c, &e)) != NULL) {
        check_pendulum_layout(td, 2, (int64_t[]){ 3, 20 }, true);
        int w = (int)at(td, "collector.worker", 0);
        ck_assert(w == 0 || w == 1);
        for (int64_t j = 0; j < 60; j++)
            ck_assert_int_eq((int)at(td, "collector.worker", j), w);
        per[w]++;
        /* worker w's envs keep their trajectory (Pendulum runs 200 steps): ids 3w + i */
        for (int64_t r = 0; r < 3; r++)
            ck_assert_int_eq((int64_t)at(td, "collector.traj_ids", r * 20), 3 * w + r);
        crl_td_unref(td);
        i++;
    }
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_int_eq(i, 4);
    ck_assert_int_gt(per[0], 0);
    ck_assert_int_gt(per[1], 0);
    ck_assert_int_eq(crl_collector_frames(c), 240);
    ck_assert_int_eq(g_atomic_int_get(&p.calls), 240 / 3);
    fx_close(&f);
}
END_TEST

/* Every sub-collector of an async collector delivers, and the frames add up. */
START_TEST(test_multi_async_all_workers)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n"
                             "[collector]\nframes_per_batch = 40\ntotal_frames = 480\nnum_collectors = 3\nsync = false\n",
                             NULL, NULL);
    int per[3] = { 0, 0, 0 };
    crl_td *td;
    crl_error e = { 0 };
    int64_t frames = 0, maxid = 5;
    GHashTable *owner = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    while ((td = crl_collector_next(c, &e)) != NULL) {
        int w = (int)at(td, "collector.worker", 0);
        ck_assert(w >= 0 && w < 3);
        per[w]++;
        frames += 40;
        /* ids are unique to one (worker, env) */
        for (int64_t t = 0; t < 20; t++)
            for (int64_t r = 0; r < 2; r++) {
                int64_t id = (int64_t)at(td, "collector.traj_ids", r * 20 + t);
                gpointer o = g_hash_table_lookup(owner, &id);
                if (o) {
                    ck_assert_int_eq(GPOINTER_TO_INT(o), 1 + w * 2 + (int)r);
                } else if (id < 6) {  /* each env's first trajectory: its global index */
                    ck_assert_int_eq(id, w * 2 + r);
                    g_hash_table_insert(owner, g_memdup2(&id, sizeof id), GINT_TO_POINTER(1 + w * 2 + (int)r));
                } else {
                    ck_assert_msg(id > maxid, "new id %" PRId64 " not above %" PRId64, id, maxid);
                    maxid = id;
                    g_hash_table_insert(owner, g_memdup2(&id, sizeof id), GINT_TO_POINTER(1 + w * 2 + (int)r));
                }
            }
        crl_td_unref(td);
    }
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_int_eq(frames, 480);
    for (int w = 0; w < 3; w++)
        ck_assert_msg(per[w] > 0, "worker %d delivered nothing", w);
    g_hash_table_destroy(owner);
    fx_close(&f);
}
END_TEST

/* Follows each env across batches: observation continuity within a trajectory,
 * ids that change exactly after done, never reused, growing as episodes start. */
typedef struct tracker {
    int64_t n;
    int64_t *last_id;      /* per env, -1 before the first frame */
    bool *last_done;
    float *last_next_obs;  /* [n, obs_dim] */
    int64_t obs_dim;
    GHashTable *ended;     /* ids whose trajectory ended */
    int64_t maxid;
    int64_t episodes;
} tracker;

static void tracker_init(tracker *k, int64_t n, int64_t obs_dim)
{
    k->n = n;
    k->obs_dim = obs_dim;
    k->last_id = g_new(int64_t, n);
    k->last_done = g_new0(bool, n);
    k->last_next_obs = g_new0(float, n * obs_dim);
    for (int64_t i = 0; i < n; i++)
        k->last_id[i] = -1;
    k->ended = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    k->maxid = n - 1;
    k->episodes = 0;
}

static void tracker_clear(tracker *k)
{
    g_free(k->last_id);
    g_free(k->last_done);
    g_free(k->last_next_obs);
    g_hash_table_destroy(k->ended);
}

/* td is [n, T]; continuity of the observation is checked within a trajectory
 * unless same_step (the root then holds the reset observation only after an end). */
static void tracker_feed(tracker *k, const crl_td *td, bool reset_each)
{
    int64_t T = crl_td_batch_shape(td)[1], D = k->obs_dim;
    /* time-major: new ids are handed out in time order, then env order */
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < k->n; i++) {
            int64_t p = i * T + t;
            int64_t id = (int64_t)at(td, "collector.traj_ids", p);
            if (k->last_id[i] < 0) {
                ck_assert_int_eq(id, i);
            } else if (k->last_done[i] || (reset_each && t == 0)) {
                ck_assert_msg(id != k->last_id[i], "env %" PRId64 " frame %" PRId64 ": id kept after done", i, t);
                ck_assert_msg(!g_hash_table_contains(k->ended, &id), "id %" PRId64 " reused", id);
                ck_assert_msg(id == k->maxid + 1, "new id %" PRId64 " is not the next one (%" PRId64 ")", id,
                              k->maxid + 1);
                k->maxid = id;
                g_hash_table_add(k->ended, g_memdup2(&k->last_id[i], sizeof(int64_t)));
                k->episodes++;
            } else {
                ck_assert_msg(id == k->last_id[i], "env %" PRId64 " batch step %" PRId64 ": id changed from %" PRId64
                              " to %" PRId64 " without done", i, t, k->last_id[i], id);
                for (int64_t d = 0; d < D; d++)
                    ck_assert_msg(fabs(at(td, "observation", p * D + d) - k->last_next_obs[i * D + d]) < 1e-6,
                                  "env %" PRId64 " step %" PRId64 ": observation != previous next.observation", i, t);
            }
            k->last_id[i] = id;
            k->last_done[i] = at(td, "next.done", p) != 0;
            for (int64_t d = 0; d < D; d++)
                k->last_next_obs[i * D + d] = (float)at(td, "next.observation", p * D + d);
        }
}

static void run_traj_check(const char *mode)
{
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 4\nseed = 11\nauto_reset = %s\n"
                                "[collector]\nframes_per_batch = 100\ntotal_frames = 1000\n", mode);
    fx f;
    crl_collector *c = fx_ok(&f, ini, NULL, NULL);
    g_free(ini);
    tracker k;
    tracker_init(&k, 4, 4);
    crl_td *td;
    crl_error e = { 0 };
    int batches = 0;
    while ((td = crl_collector_next(c, &e)) != NULL) {
        ck_assert_int_eq(crl_td_batch_ndim(td), 2);
        ck_assert_int_eq(crl_td_batch_shape(td)[0], 4);
        ck_assert_int_eq(crl_td_batch_shape(td)[1], 25);
        tracker_feed(&k, td, false);
        crl_td_unref(td);
        batches++;
    }
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_int_eq(batches, 10);
    ck_assert_msg(k.episodes >= 10, "%s: only %" PRId64 " CartPole episodes ended in 1000 random frames", mode,
                  k.episodes);
    tracker_clear(&k);
    fx_close(&f);
}

START_TEST(test_traj_ids_off) { run_traj_check("off"); }
END_TEST
START_TEST(test_traj_ids_next_step) { run_traj_check("next_step"); }
END_TEST

/* same_step: next keeps the final observation, the next root holds the reset one. */
START_TEST(test_traj_ids_same_step) { run_traj_check("same_step"); }
END_TEST

START_TEST(test_reset_at_each_iter)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\n"
                             "[collector]\nframes_per_batch = 20\ntotal_frames = 60\nreset_at_each_iter = true\n",
                             NULL, NULL);
    tracker k;
    tracker_init(&k, 2, 3);
    for (int b = 0; b < 3; b++) {
        crl_td *td = next_ok(c);
        tracker_feed(&k, td, true);
        crl_td_unref(td);
    }
    ck_assert_int_eq(k.episodes, 4);  /* batches 2 and 3 start new trajectories in both envs */
    ck_assert_int_eq(k.maxid, 5);
    tracker_clear(&k);
    fx_close(&f);
}
END_TEST

/* total_frames: a multiple gives full batches; otherwise the last batch is
 * shorter, its T rounded up so every env steps equally. */
START_TEST(test_total_frames)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\n"
                             "[collector]\nframes_per_batch = 60\ntotal_frames = 200\n",
                             NULL, NULL);
    int64_t Ts[4] = { 20, 20, 20, 7 };
    for (int b = 0; b < 4; b++) {
        crl_td *td = next_ok(c);
        ck_assert_int_eq(crl_td_batch_shape(td)[0], 3);
        ck_assert_int_eq(crl_td_batch_shape(td)[1], Ts[b]);
        crl_td_unref(td);
    }
    ck_assert_int_eq(crl_collector_frames(c), 201);
    crl_error e = { 0 };
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_OK);
    fx_close(&f);

    /* multi sync: T of the last batch covers what is left over all sub-collectors */
    c = fx_ok(&f, PENDULUM_MULTI, NULL, NULL);
    crl_collector_free(c);
    f.c = NULL;
    const char *over = "[collector]\ntotal_frames = 150\n";
    EXPECT_OK(crl_config_load_buffer(f.cfg, "override.ini", over, strlen(over), CRL_LAYER_OVERRIDE, &e), e);
    c = f.c = crl_collector_from_config(f.host, f.cfg, "collector", "env", NULL, NULL, &e);
    ck_assert_msg(c != NULL, "%s", e.message);
    int64_t mT[3] = { 10, 10, 5 };
    for (int b = 0; b < 3; b++) {
        crl_td *td = next_ok(c);
        ck_assert_int_eq(crl_td_batch_shape(td)[0], 2);
        ck_assert_int_eq(crl_td_batch_shape(td)[2], mT[b]);
        crl_td_unref(td);
    }
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_int_eq(crl_collector_frames(c), 150);
    fx_close(&f);
}
END_TEST

/* Endless collector (total_frames = -1) and shutdown of a running async collector. */
START_TEST(test_endless_and_shutdown)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n"
                             "[collector]\nframes_per_batch = 10\nnum_collectors = 2\nsync = false\n",
                             NULL, NULL);
    for (int b = 0; b < 7; b++)
        crl_td_unref(next_ok(c));
    ck_assert_int_eq(crl_collector_frames(c), 70);
    crl_collector_shutdown(c);
    crl_error e = { 0 };
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_OK);
    crl_collector_shutdown(c);
    fx_close(&f);
    /* freed while the workers are still collecting */
    c = fx_ok(&f,
              "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n"
              "[collector]\nframes_per_batch = 10\nnum_collectors = 3\nsync = false\n",
              NULL, NULL);
    crl_td_unref(next_ok(c));
    fx_close(&f);
}
END_TEST

/* init_random_frames: random actions (no policy call) while fewer frames were collected. */
START_TEST(test_init_random_frames)
{
    fx f;
    lin p = { 0, 0, 0.5 };
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\n"
                             "[collector]\nframes_per_batch = 20\ntotal_frames = 100\ninit_random_frames = 50\n",
                             lin_policy, &p);
    int64_t step = 0;
    for (int b = 0; b < 5; b++) {
        crl_td *td = next_ok(c);
        for (int64_t t = 0; t < 10; t++, step++) {
            bool random = step * 2 < 50;
            for (int64_t i = 0; i < 2; i++) {
                double a = at(td, "action", i * 10 + t);
                if (random)
                    ck_assert_msg(a != 0.5f, "step %" PRId64 ": the policy's action in a random frame", step);
                else
                    ck_assert_msg(a == 0.5f, "step %" PRId64 ": action %g is not the policy's", step, a);
            }
        }
        crl_td_unref(td);
    }
    ck_assert_int_eq(g_atomic_int_get(&p.calls), 25);  /* steps 25..49 */
    fx_close(&f);
}
END_TEST

/* max_frames_per_traj truncates: truncated and done every 7 frames, a new id after. */
static void run_max_frames(const char *mode)
{
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\nauto_reset = %s\n"
                                "[collector]\nframes_per_batch = 20\ntotal_frames = 80\nmax_frames_per_traj = 7\n",
                                mode);
    fx f;
    crl_collector *c = fx_ok(&f, ini, NULL, NULL);
    g_free(ini);
    tracker k;
    tracker_init(&k, 2, 3);
    int64_t step = 0;
    for (int b = 0; b < 4; b++) {
        crl_td *td = next_ok(c);
        tracker_feed(&k, td, false);
        for (int64_t t = 0; t < 10; t++, step++)
            for (int64_t i = 0; i < 2; i++) {
                bool end = (step + 1) % 7 == 0;
                ck_assert_int_eq(at(td, "next.truncated", i * 10 + t) != 0, end);
                ck_assert_int_eq(at(td, "next.done", i * 10 + t) != 0, end);
                ck_assert_int_eq(at(td, "next.terminated", i * 10 + t) != 0, 0);
                /* the root flags after a truncation are those of the reset */
                ck_assert_int_eq(at(td, "truncated", i * 10 + t) != 0, 0);
                ck_assert_int_eq((int64_t)at(td, "collector.traj_ids", i * 10 + t), 2 * (step / 7) + i);
            }
        crl_td_unref(td);
    }
    ck_assert_int_eq(k.episodes, 2 * 5);
    tracker_clear(&k);
    fx_close(&f);
}

START_TEST(test_max_frames_off) { run_max_frames("off"); }
END_TEST
START_TEST(test_max_frames_same_step) { run_max_frames("same_step"); }
END_TEST

/* split_trajs: [trajectories, longest], zero padded, collector.mask; the same frames as unsplit. */
START_TEST(test_split_trajs)
{
    const char *base = "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\nseed = 3\n"
                       "[collector]\nframes_per_batch = 100\ntotal_frames = 200\n";
    fx fa, fb;
    crl_collector *a = fx_ok(&fa, base, NULL, NULL);
    char *ini = g_strconcat(base, "split_trajs = true\n", NULL);
    crl_collector *b = fx_ok(&fb, ini, NULL, NULL);
    g_free(ini);
    for (int it = 0; it < 2; it++) {
        crl_td *u = next_ok(a), *s = next_ok(b);
        ck_assert_int_eq(crl_td_batch_ndim(s), 2);
        int64_t S = crl_td_batch_shape(s)[0], L = crl_td_batch_shape(s)[1];
        crl_tensor *mask = crl_td_get(s, "collector.mask");
        assert_shape(mask, 2, (int64_t[]){ S, L }, "mask");
        ck_assert_int_eq(crl_tensor_dtype(mask), CRL_BOOL);
        assert_shape(crl_td_get(s, "observation"), 3, (int64_t[]){ S, L, 4 }, "observation");
        assert_shape(crl_td_get(s, "next.reward"), 3, (int64_t[]){ S, L, 1 }, "next.reward");
        ck_assert(!crl_td_has(u, "collector.mask"));
        /* walk the unsplit batch env by env; each run of one id is the next row */
        int64_t row = 0, col = 0, longest = 0, total = 0;
        for (int64_t i = 0; i < 2; i++)
            for (int64_t t = 0; t < 50; t++) {
                int64_t p = i * 50 + t;
                if (t > 0 && at(u, "collector.traj_ids", p) != at(u, "collector.traj_ids", p - 1)) {
                    for (int64_t x = col; x < L; x++) {
                        ck_assert(crl_tensor_flat_get(mask, row * L + x) == 0);
                        ck_assert(at(s, "observation", (row * L + x) * 4) == 0);
                        ck_assert(at(s, "collector.traj_ids", row * L + x) == 0);
                    }
                    row++;
                    col = 0;
                } else if (t == 0 && i > 0) {
                    row++;
                    col = 0;
                }
                ck_assert(crl_tensor_flat_get(mask, row * L + col) != 0);
                ck_assert(at(s, "collector.traj_ids", row * L + col) == at(u, "collector.traj_ids", p));
                for (int d = 0; d < 4; d++)
                    ck_assert(at(s, "observation", (row * L + col) * 4 + d) == at(u, "observation", p * 4 + d));
                ck_assert(at(s, "next.done", row * L + col) == at(u, "next.done", p));
                col++;
                total++;
                if (col > longest)
                    longest = col;
            }
        ck_assert_int_eq(row + 1, S);
        ck_assert_int_eq(longest, L);
        ck_assert_int_eq(total, 100);
        ck_assert_msg(S > 2, "CartPole should end within 50 random steps");
        crl_td_unref(u);
        crl_td_unref(s);
    }
    fx_close(&fa);
    fx_close(&fb);
}
END_TEST

/* Multi sync with split_trajs: rows come from every sub-collector's envs. */
START_TEST(test_split_trajs_multi)
{
    fx f;
    crl_collector *c = fx_ok(&f, PENDULUM_MULTI "split_trajs = true\n", NULL, NULL);
    crl_td *td = next_ok(c);
    ck_assert_int_eq(crl_td_batch_shape(td)[0], 6);
    ck_assert_int_eq(crl_td_batch_shape(td)[1], 10);
    for (int64_t j = 0; j < 60; j++)
        ck_assert(at(td, "collector.mask", j) != 0);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

static crl_td *collect_all(crl_collector *c, int n)
{
    crl_td **tds = g_new0(crl_td *, n);
    for (int i = 0; i < n; i++)
        tds[i] = next_ok(c);
    crl_error e = { 0 };
    crl_td *all = crl_td_stack(tds, (size_t)n, 0, &e);
    ck_assert_msg(all != NULL, "%s", e.message);
    for (int i = 0; i < n; i++)
        crl_td_unref(tds[i]);
    g_free(tds);
    return all;
}

/* Same seed, same batches (multi sync over threads and the single collector);
 * sub-collector 1's envs continue sub-collector 0's seed chain. */
START_TEST(test_deterministic)
{
    const char *ini = "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 3\nseed = 7\n"
                      "[collector]\nframes_per_batch = 60\ntotal_frames = 300\nnum_collectors = 2\n";
    fx f1, f2;
    crl_collector *a = fx_ok(&f1, ini, NULL, NULL), *b = fx_ok(&f2, ini, NULL, NULL);
    crl_td *ra = collect_all(a, 5), *rb = collect_all(b, 5);
    ck_assert(crl_td_equal(ra, rb));
    crl_td_unref(rb);
    fx_close(&f2);
    /* another seed differs */
    char *other = g_strdup(ini);
    other[strstr(other, "seed = 7") - other + 7] = '8';
    b = fx_ok(&f2, other, NULL, NULL);
    g_free(other);
    rb = collect_all(b, 5);
    ck_assert(!crl_td_equal(ra, rb));
    crl_td_unref(rb);
    fx_close(&f2);
    /* one env of 6 from seed 7: envs 3..5 start as sub-collector 1's envs 0..2 */
    fx f3;
    b = fx_ok(&f3,
              "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 6\nseed = 7\n"
              "[collector]\nframes_per_batch = 6\ntotal_frames = 6\n",
              NULL, NULL);
    crl_td *single = next_ok(b);
    for (int64_t k = 0; k < 2; k++)
        for (int64_t i = 0; i < 3; i++)
            for (int d = 0; d < 4; d++)
                ck_assert_msg(at(ra, "observation", (((0 * 2 + k) * 3 + i) * 10) * 4 + d) ==
                                  at(single, "observation", (k * 3 + i) * 4 + d),
                              "sub-collector %" PRId64 " env %" PRId64 " does not continue the seed chain", k, i);
    crl_td_unref(single);
    fx_close(&f3);
    crl_td_unref(ra);
    fx_close(&f1);
}
END_TEST

/* The replay buffer receives exactly the frames, flattened to [frames]. */
START_TEST(test_replay)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\n"
                             "[collector]\nframes_per_batch = 30\ntotal_frames = 90\n"
                             "[replay]\ncapacity = 1000\n",
                             NULL, NULL);
    crl_error e = { 0 };
    crl_replay *rb = crl_replay_from_config(f.host, f.cfg, "replay", &e);
    ck_assert_msg(rb != NULL, "%s", e.message);
    crl_collector_set_replay(c, rb);
    int64_t base = 0;
    crl_td *td;
    while ((td = crl_collector_next(c, &e)) != NULL) {
        ck_assert_uint_eq(crl_replay_len(rb), (size_t)(base + 30));
        /* item base + i * 10 + t is env i's step t */
        for (int64_t i = 0; i < 3; i++)
            for (int64_t t = 0; t < 10; t += 3) {
                crl_td *item = crl_replay_get(rb, base + i * 10 + t, &e);
                ck_assert_msg(item != NULL, "%s", e.message);
                for (int d = 0; d < 3; d++)
                    ck_assert(at(item, "observation", d) == at(td, "observation", (i * 10 + t) * 3 + d));
                ck_assert(at(item, "next.reward", 0) == at(td, "next.reward", i * 10 + t));
                ck_assert(at(item, "collector.traj_ids", 0) == at(td, "collector.traj_ids", i * 10 + t));
                crl_td_unref(item);
            }
        base += 30;
        crl_td_unref(td);
    }
    ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_uint_eq(crl_replay_len(rb), 90);
    crl_collector_set_replay(c, NULL);
    crl_replay_free(rb);  /* before the host that holds its storage plugin */
    fx_close(&f);
}
END_TEST

static void expect_config_error(const char *ini, int code, const char *const *needles)
{
    fx f;
    crl_error e = { 0 };
    crl_collector *c = fx_open(&f, ini, NULL, NULL, &e);
    ck_assert_ptr_null(c);
    ck_assert_msg(e.code == code, "code %s, message: %s", crl_status_name(e.code), e.message);
    for (size_t i = 0; needles[i]; i++)
        ck_assert_msg(strstr(e.message, needles[i]), "'%s' not in: %s", needles[i], e.message);
    fx_close(&f);
}

START_TEST(test_bad_config)
{
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\n"
                        "[collector]\nframes_per_batch = 61\n",
                        CRL_E_CONFIG,
                        (const char *const[]){ "test.ini:", "frames_per_batch = 61", "num_envs = 3", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 3\n"
                        "[collector]\nframes_per_batch = 63\nnum_collectors = 2\n",
                        CRL_E_CONFIG,
                        (const char *const[]){ "frames_per_batch = 63", "num_collectors", "multiple of 6", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\n[collector]\nframes_per_bach = 10\n",
                        CRL_E_CONFIG, (const char *const[]){ "frames_per_bach", "frames_per_batch", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\n[collector]\ntotal_frames = 10\n", CRL_E_CONFIG,
                        (const char *const[]){ "[collector] frames_per_batch is required", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\n[collector]\nframes_per_batch = 10\n"
                        "total_frames = 0\n",
                        CRL_E_CONFIG, (const char *const[]){ "test.ini:", "total_frames = 0", "-1", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\n[collector]\nframes_per_batch = 10\n"
                        "num_collectors = 0\n",
                        CRL_E_CONFIG, (const char *const[]){ "num_collectors", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v1\n[collector]\nframes_per_batch = 10\n"
                        "sync = maybe\n",
                        CRL_E_CONFIG, (const char *const[]){ "sync", "maybe", NULL });
    expect_config_error("[env]\nbackend = classic\nid = Pendulum-v2\n[collector]\nframes_per_batch = 10\n",
                        CRL_E_NOT_FOUND, (const char *const[]){ "Pendulum-v2", NULL });
    crl_error e = { 0 };
    ck_assert_ptr_null(crl_collector_from_config(NULL, NULL, "collector", "env", NULL, NULL, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_collector_next(NULL, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_int_eq(crl_collector_frames(NULL), 0);
    crl_collector_free(NULL);
}
END_TEST

/* A failing policy stops the collector with the frame number; later calls repeat the error. */
START_TEST(test_policy_error)
{
    fx f;
    lin p = { 0, 3, NAN };
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\n"
                             "[collector]\nframes_per_batch = 20\ntotal_frames = 100\n",
                             lin_policy, &p);
    crl_error e = { 0 };
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_E_RUNTIME);
    ck_assert_msg(strstr(e.message, "frame 4 ") && strstr(e.message, "policy") && strstr(e.message, "boom at call 3") &&
                      strstr(e.message, "[collector]"),
                  "%s", e.message);
    crl_error e2 = { 0 };
    ck_assert_ptr_null(crl_collector_next(c, &e2));
    ck_assert_int_eq(e2.code, CRL_E_RUNTIME);
    ck_assert_str_eq(e2.message, e.message);
    fx_close(&f);

    /* in a sub-collector's thread: the error names it */
    lin q = { 0, 5, NAN };
    c = fx_ok(&f, PENDULUM_MULTI, lin_policy, &q);
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_E_RUNTIME);
    ck_assert_msg(strstr(e.message, "sub-collector ") && strstr(e.message, "boom at call 5"), "%s", e.message);
    fx_close(&f);

    lin r = { 0, 2, NAN };
    c = fx_ok(&f, PENDULUM_MULTI "sync = false\n", lin_policy, &r);
    ck_assert_ptr_null(crl_collector_next(c, &e));
    ck_assert_int_eq(e.code, CRL_E_RUNTIME);
    ck_assert_msg(strstr(e.message, "sub-collector ") && strstr(e.message, "boom at call 2"), "%s", e.message);
    fx_close(&f);
}
END_TEST

/* A single env (no num_envs, batch []) gives batches of [T]. */
START_TEST(test_single_env)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = CartPole-v1\n"
                             "[collector]\nframes_per_batch = 50\ntotal_frames = 100\nsplit_trajs = false\n",
                             NULL, NULL);
    crl_td *td = next_ok(c);
    ck_assert_int_eq(crl_td_batch_ndim(td), 1);
    ck_assert_int_eq(crl_td_batch_shape(td)[0], 50);
    assert_shape(crl_td_get(td, "collector.traj_ids"), 1, (int64_t[]){ 50 }, "traj_ids");
    assert_shape(crl_td_get(td, "observation"), 2, (int64_t[]){ 50, 4 }, "observation");
    ck_assert_int_eq((int64_t)at(td, "collector.traj_ids", 0), 0);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* crl's schema declares [collector] with the collector's table: validate accepts its keys and rejects typos. */
START_TEST(test_schema)
{
    fx f;
    crl_collector *c = fx_ok(&f,
                             "[env]\nbackend = classic\nid = CartPole-v1\n"
                             "[collector]\nframes_per_batch = 50\nnum_collectors = 2\nsync = false\n",
                             NULL, NULL);
    (void)c;
    crl_error e = { 0 };
    crl_schema *s = crl__cli_schema_new(f.host, &e);
    ck_assert_msg(s != NULL, "%s", e.message);
    EXPECT_OK(crl_config_validate(f.cfg, s, &e), e);
    const char *over = "[collector]\nsplit_traj = true\n";
    EXPECT_OK(crl_config_load_buffer(f.cfg, "override.ini", over, strlen(over), CRL_LAYER_OVERRIDE, &e), e);
    ck_assert_int_eq(crl_config_validate(f.cfg, s, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "split_trajs"), "%s", e.message);
    crl_schema_free(s);
    fx_close(&f);
}
END_TEST

static void add_ret(void *user, double ret)
{
    GArray *a = user;
    g_array_append_val(a, ret);
}

/* A [1, 3] batch: ids, rewards, dones (and a mask when mask is non-NULL). */
static crl_td *returns_batch(const int64_t *ids, const float *rew, const bool *done, const bool *mask)
{
    int64_t bs[2] = { 1, 3 }, fs[3] = { 1, 3, 1 };
    crl_td *td = crl_td_new(2, bs, NULL);
    crl_tensor *i = crl_tensor_new(CRL_I64, 2, bs, NULL), *r = crl_tensor_new(CRL_F32, 3, fs, NULL),
               *d = crl_tensor_new(CRL_BOOL, 3, fs, NULL);
    memcpy(crl_tensor_data(i), ids, 3 * sizeof *ids);
    memcpy(crl_tensor_data(r), rew, 3 * sizeof *rew);
    memcpy(crl_tensor_data(d), done, 3 * sizeof *done);
    crl_td_set(td, "collector.traj_ids", i, NULL);
    crl_td_set(td, "next.reward", r, NULL);
    crl_td_set(td, "next.done", d, NULL);
    if (mask) {
        crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, bs, NULL);
        memcpy(crl_tensor_data(m), mask, 3 * sizeof *mask);
        crl_td_set(td, "collector.mask", m, NULL);
        crl_tensor_unref(m);
    }
    crl_tensor_unref(i);
    crl_tensor_unref(r);
    crl_tensor_unref(d);
    return td;
}

/* Episode returns carry over batches by trajectory id; padding is skipped. */
START_TEST(test_returns)
{
    crl_returns *r = crl_returns_new();
    GArray *got = g_array_new(FALSE, FALSE, sizeof(double));
    crl_td *b1 = returns_batch((int64_t[]){ 0, 0, 1 }, (float[]){ 1, 2, 4 }, (bool[]){ false, true, false }, NULL);
    crl_td *b2 = returns_batch((int64_t[]){ 1, 1, 0 }, (float[]){ 8, 16, 99 }, (bool[]){ false, true, true },
                               (bool[]){ true, true, false });
    ck_assert_int_eq(crl_returns_add(r, b1, add_ret, got), 1);
    ck_assert_int_eq(crl_returns_add(r, b2, add_ret, got), 1);
    ck_assert_uint_eq(got->len, 2);
    ck_assert_double_eq(g_array_index(got, double, 0), 3.0);   /* traj 0: 1 + 2 */
    ck_assert_double_eq(g_array_index(got, double, 1), 28.0);  /* traj 1: 4 + 8 + 16, across batches */
    /* a td without the keys adds nothing */
    crl_td *empty = crl_td_new(0, NULL, NULL);
    ck_assert_int_eq(crl_returns_add(r, empty, add_ret, got), 0);
    ck_assert_int_eq(crl_returns_add(NULL, b1, add_ret, got), 0);
    crl_td_unref(empty);
    crl_td_unref(b1);
    crl_td_unref(b2);
    g_array_free(got, TRUE);
    crl_returns_free(r);
    crl_returns_free(NULL);
}
END_TEST

static Suite *collector_suite(void)
{
    Suite *s = suite_create("collector");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_multi_sync_layout);
    tcase_add_test(tc, test_multi_async_layout);
    tcase_add_test(tc, test_multi_async_all_workers);
    tcase_add_test(tc, test_traj_ids_off);
    tcase_add_test(tc, test_traj_ids_next_step);
    tcase_add_test(tc, test_traj_ids_same_step);
    tcase_add_test(tc, test_reset_at_each_iter);
    tcase_add_test(tc, test_total_frames);
    tcase_add_test(tc, test_endless_and_shutdown);
    tcase_add_test(tc, test_init_random_frames);
    tcase_add_test(tc, test_max_frames_off);
    tcase_add_test(tc, test_max_frames_same_step);
    tcase_add_test(tc, test_split_trajs);
    tcase_add_test(tc, test_split_trajs_multi);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_replay);
    tcase_add_test(tc, test_bad_config);
    tcase_add_test(tc, test_policy_error);
    tcase_add_test(tc, test_single_env);
    tcase_add_test(tc, test_schema);
    tcase_add_test(tc, test_returns);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(collector_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
