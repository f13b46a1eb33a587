/* crl bench batched: env steps/s for the inline, serial, threads and processes executors and async send/recv, on
 * classic control and on dm_control tasks, plus process start-up. */
#include "config.h"
#include "cli-private.h"

#include <crl/actor.h>
#include <crl/env.h>
#include <crl/env_backend.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BANK 64          /* async: pre-drawn action batches, reused in turn */
#define STARTUP_RUNS 5

static const char *const kinds[] = { "inline", "serial", "threads", "processes" };
enum { NKINDS = 4 };

/* [env] with the executor (default workers: 1 for serial, one per core else);
 * next_step auto-reset, so the loop never stops for ended envs. */
static int bench_open(crl__bench_stepper *b, crl_host *host, const char *backend, const char *id, int64_t num,
                      const char *kind, crl_error *err)
{
    char *text = g_strdup_printf("[env]\nbackend = %s\nid = %s\nnum_envs = %" G_GINT64_FORMAT "\n"
                                 "auto_reset = next_step\nexecutor = %s\nseed = 7\n", backend, id, num, kind);
    int rc = crl__bench_stepper_open(b, host, "crl bench batched", text, NULL, err);
    g_free(text);
    return rc;
}

static void fmt_rate(char *buf, size_t n, double r)
{
    if (r >= 1e6)
        g_snprintf(buf, n, "%.2fM", r / 1e6);
    else if (r >= 1e3)
        g_snprintf(buf, n, "%.1fk", r / 1e3);
    else
        g_snprintf(buf, n, "%.0f", r);
}

/* One row: env steps/s of every kind at num envs, and the ratios to serial. */
static int row(crl_host *host, const char *backend, const char *id, int64_t num, double seconds, crl_error *err)
{
    double rate[NKINDS];
    char note[NKINDS][200];
    for (int k = 0; k < NKINDS; k++) {
        rate[k] = -1;
        note[k][0] = '\0';
        crl__bench_stepper b;
        crl_error e = { 0 };
        if (bench_open(&b, host, backend, id, num, kinds[k], &e)) {
            /* processes may be missing on this platform; anything else is a failure. */
            if (k == 3) {
                g_snprintf(note[k], sizeof note[k], "%s", e.message);
                continue;
            }
            return crl_error_pass(err, &e, CRL_E_INVALID);
        }
        crl_bench_result r = crl__bench_measure(crl__bench_stepper_run, &b, seconds, 16);
        if (b.failed) {
            int rc = crl_error_pass(err, &b.err, CRL_E_RUNTIME);
            crl__bench_stepper_close(&b);
            return rc;
        }
        rate[k] = 1e9 / r.ns_per_op * (double)num;
        crl__bench_stepper_close(&b);
    }
    printf("  %-12s %5" G_GINT64_FORMAT, id, (gint64)num);
    for (int k = 0; k < NKINDS; k++) {
        if (rate[k] < 0) {
            printf("  %-20s", "unavailable");
            continue;
        }
        char r[32], cell[64];
        fmt_rate(r, sizeof r, rate[k]);
        g_snprintf(cell, sizeof cell, "%s (%.2fx)", r, rate[k] / rate[1]);
        printf("  %-20s", cell);
    }
    printf("\n");
    for (int k = 0; k < NKINDS; k++)
        if (note[k][0] && num == 1 && !strcmp(id, "CartPole-v1"))
            printf("      (%s unavailable: %s)\n", kinds[k], note[k]);
    return CRL_OK;
}

/* A policy in the loop (below). */
struct bench_policy;
static int policy_act(struct bench_policy *p, crl_td *td, crl_error *err);

/* Async (EnvPool's send/recv): recv batch_size envs, send their actions back. */
typedef struct {
    crl_config *cfg;
    crl_env *env;
    crl_td *send;            /* [B]: env_id and action, refilled from each recv */
    crl_tensor *bank[BANK];  /* [B] actions */
    struct bench_policy *pol;  /* borrowed; when set, the actions come from it instead of the bank */
    int64_t next, B;
    crl_error err;
    bool failed;
} bench_async;

static void async_close(bench_async *b)
{
    crl_td_unref(b->send);
    for (int i = 0; i < BANK; i++)
        crl_tensor_unref(b->bank[i]);
    crl_env_free(b->env);
    crl_config_free(b->cfg);
    memset(b, 0, sizeof *b);
}

static int async_open(bench_async *b, crl_host *host, const char *backend, const char *id, int64_t num, int64_t B,
                      crl_error *err)
{
    memset(b, 0, sizeof *b);
    b->B = B;
    char *text = g_strdup_printf("[env]\nbackend = %s\nid = %s\nnum_envs = %" G_GINT64_FORMAT "\n"
                                 "executor = threads\nbatch_size = %" G_GINT64_FORMAT "\nseed = 7\n", backend, id,
                                 (gint64)num, (gint64)B);
    int rc = CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    if (!(b->cfg = crl_config_new(&e)) ||
        crl_config_load_buffer(b->cfg, "crl bench batched", text, strlen(text), CRL_LAYER_FILE, &e) ||
        !(b->env = crl_env_from_config(host, b->cfg, "env", &e)))
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
    g_free(text);
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    const crl_spec *leaf = rc ? NULL : crl_spec_composite_get(crl_env_full_action_spec(b->env), "action");
    /* B rows of a [num] draw: in the domain of every env. */
    for (int i = 0; !rc && i < BANK; i++) {
        crl_tensor *all = crl_spec_rand(leaf, &rng, &e);
        if (!all || !(b->bank[i] = crl_tensor_slice(all, 0, 0, B, 1, &e)))
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(all);
    }
    if (!rc && !(b->send = crl_td_new(1, &B, &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!rc)
        rc = crl_env_async_reset(b->env, err);
    if (rc)
        async_close(b);
    return rc;
}

/* One op: recv B envs, send B actions back to them: the bank's, or with an actor its actions for the
 * observations just received (written into the received TensorDict, which holds their env_id). */
static void run_async(void *p, uint64_t n)
{
    bench_async *b = p;
    for (uint64_t i = 0; i < n && !b->failed; i++) {
        crl_td *got = crl_env_recv(b->env, &b->err);
        if (got && b->pol) {
            if (policy_act(b->pol, got, &b->err) || crl_env_send(b->env, got, &b->err))
                b->failed = true;
        } else if (!got || crl_td_set(b->send, "env_id", crl_td_get(got, "env_id"), &b->err) ||
            crl_td_set(b->send, "action", b->bank[b->next++ % BANK], &b->err) ||
            crl_env_send(b->env, b->send, &b->err))
            b->failed = true;
        crl_td_unref(got);
    }
}

/* Async rows: env steps/s with batch_size = N/2 and N/4, next to sync threads at the same N. */
static int async_rows(crl_host *host, const char *backend, const char *id, int64_t num, double seconds, crl_error *err)
{
    crl__bench_stepper s;
    int rc = bench_open(&s, host, backend, id, num, "threads", err);
    if (rc)
        return rc;
    crl_bench_result rs = crl__bench_measure(crl__bench_stepper_run, &s, seconds, 16);
    bool sf = s.failed;
    if (sf)
        rc = crl_error_pass(err, &s.err, CRL_E_RUNTIME);
    crl__bench_stepper_close(&s);
    if (sf)
        return rc;
    double sync_rate = 1e9 / rs.ns_per_op * (double)num;
    char r[32];
    fmt_rate(r, sizeof r, sync_rate);
    printf("  %-12s %5" G_GINT64_FORMAT "  threads sync %s", id, (gint64)num, r);
    static const int64_t divs[] = { 2, 4 };
    for (size_t d = 0; d < G_N_ELEMENTS(divs); d++) {
        int64_t B = num / divs[d];
        bench_async b;
        if ((rc = async_open(&b, host, backend, id, num, B, err)))
            return rc;
        crl_bench_result ra = crl__bench_measure(run_async, &b, seconds, 16);
        bool fa = b.failed;
        if (fa)
            rc = crl_error_pass(err, &b.err, CRL_E_RUNTIME);
        async_close(&b);
        if (fa)
            return rc;
        double rate = 1e9 / ra.ns_per_op * (double)B;
        fmt_rate(r, sizeof r, rate);
        printf("   async batch_size %" G_GINT64_FORMAT ": %s (%.2fx sync)", (gint64)B, r, rate / sync_rate);
    }
    printf("\n");
    return CRL_OK;
}

/* crl_env_from_config + first reset of 8 processes workers, 8 envs. */
static void startup(crl_host *host)
{
    double ms[STARTUP_RUNS];
    for (int i = 0; i < STARTUP_RUNS; i++) {
        crl_error e = { 0 };
        const char *text = "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 8\nexecutor = processes\n"
                           "num_workers = 8\n";
        crl_config *cfg = crl_config_new(&e);
        gint64 t0 = g_get_monotonic_time();
        crl_env *env = NULL;
        crl_td *td = NULL;
        if (cfg && !crl_config_load_buffer(cfg, "crl bench batched", text, strlen(text), CRL_LAYER_FILE, &e))
            env = crl_env_from_config(host, cfg, "env", &e);
        if (env)
            td = crl_env_reset(env, NULL, &e);
        gint64 t1 = g_get_monotonic_time();
        crl_td_unref(td);
        crl_env_free(env);
        crl_config_free(cfg);
        if (!td) {
            printf("  processes start-up: unavailable (%s)\n", e.message);
            return;
        }
        ms[i] = (double)(t1 - t0) / 1e3;
    }
    double med = crl__bench_median(ms, STARTUP_RUNS);
    printf("  processes start-up (crl_env_from_config + first reset, 8 workers, 8 CartPole envs): median %.2f ms, "
           "min %.2f ms over %d runs (target: under 100 ms)\n", med, ms[0], STARTUP_RUNS);
}

/* dm_control tasks: steps of tens to hundreds of microseconds whose cost varies with contacts, the case
 * executors are for.  One line per task; a task this build's plugin lacks is skipped with a note. */
static const struct {
    const char *id;
    int64_t nums[2];
} dmc_rows[] = {
    { "cheetah/run", { 8, 32 } },
    { "walker/walk", { 8, 32 } },
    { "humanoid/walk", { 8, 32 } },
};

/* The dm_control plugin on the path, else the one this build made; false when neither loads. */
static bool dm_control_load(crl_host *host, crl_error *err)
{
    if (crl_host_find(host, CRL_KIND_ENV, "dm_control") || !crl_host_load_name(host, "dm_control", err))
        return true;
#ifdef CRL_DM_CONTROL_BUILD_PLUGIN
    crl_error e;
    crl_error_clear(&e);
    if (g_file_test(CRL_DM_CONTROL_BUILD_PLUGIN, G_FILE_TEST_IS_REGULAR) &&
        !crl_host_load_path(host, CRL_DM_CONTROL_BUILD_PLUGIN, &e))
        return true;
#endif
    return false;
}

static bool dm_control_has(crl_host *host, const char *id)
{
    const crl_component *comp = crl_host_find(host, CRL_KIND_ENV, "dm_control");
    const crl_env_ops *ops = comp ? crl__cli_env_ops(comp) : NULL;
    for (const char *const *p = ops ? ops->list() : NULL; p && *p; p++)
        if (!strcmp(*p, id))
            return true;
    return false;
}

/* ---- a policy in the loop ----------------------------------------------------------------------------
 *
 * EnvPool's case for async is overlap: while the caller runs the policy on the batch it received, the pool
 * steps the other envs.  In sync mode the env threads idle while the caller computes the policy, and the
 * caller idles while the envs step.  Per env step, with E the serial env step and P the policy at the batch
 * the caller runs it on, sync threads on c cores take at best P_N + E/c and async with every core busy all
 * the time (P_B + E)/c, so async's ceiling over sync threads is (c P_N + E)/(P_B + E): on 2 cores with
 * P_B = P_N, (2P + E)/(P + E), between 1x (envs dominate) and 2x (the policy does).
 *
 * The policy is TorchRL's TD3/DDPG actor at its MuJoCo default size (SB3's SAC too): MLP [256, 256], ReLU,
 * tanh into the action bounds, weights drawn from a fixed seed, over the task's observation keys
 * concatenated (TorchRL's CatTensors), on the caller's thread with one OpenBLAS thread so that it takes no
 * core from the env threads.  The network's size is the standard one, not chosen for the figures. */
#define POLICY_SEED 3
#define POLICY_CELLS 256

/* The actor, and what feeds it: it reads float rows and writes a float32 "action", while dm_control's actions
 * are float64 (TorchRL casts them with DoubleToFloat's inverse), so it runs on a scratch TensorDict holding
 * the observations (shared, not copied) and its action is cast into one of the spec's dtype. */
typedef struct bench_policy {
    crl_det_actor *actor;
    char **keys;         /* the observation leaves; NULL-terminated */
    crl_td *scratch;     /* batch [rows] */
    crl_tensor *act;     /* [rows, d] of the spec's dtype */
    crl_dtype dtype;
    int64_t d;
} bench_policy;

static void policy_free(bench_policy *p)
{
    crl_det_actor_free(p->actor);
    g_strfreev(p->keys);
    crl_td_unref(p->scratch);
    crl_tensor_unref(p->act);
    memset(p, 0, sizeof *p);
}

/* The actor for env's observation and action specs (every env of a task has the same, so one policy serves
 * every executor's env). */
static int policy_init(bench_policy *p, crl_env *env, crl_error *err)
{
    memset(p, 0, sizeof *p);
    const crl_spec *obs = crl_env_full_observation_spec(env);
    const crl_spec *act = crl_env_action_spec(env);
    int bn = crl_env_batch_ndim(env);
    size_t n = crl_spec_composite_len(obs), k = 0;
    p->keys = g_new0(char *, n + 1);
    int64_t in = 0;
    for (size_t i = 0; i < n; i++) {
        const crl_spec *leaf = crl_spec_composite_at(obs, i);
        if (crl_spec_get_kind(leaf) == CRL_SPEC_COMPOSITE)
            continue;
        int64_t f = 1;
        for (int j = bn; j < crl_spec_ndim(leaf); j++)
            f *= crl_spec_shape(leaf)[j];
        in += f;
        p->keys[k++] = g_strdup(crl_spec_composite_key_at(obs, i));
    }
    if (!k || !act || crl_spec_ndim(act) <= bn || !crl_dtype_is_float(crl_spec_dtype(act))) {
        policy_free(p);
        return crl_error_set(err, CRL_E_INVALID, "a policy in the loop needs observation leaves (%zu here) and a "
                             "continuous action", k);
    }
    p->dtype = crl_spec_dtype(act);
    p->d = crl_spec_shape(act)[crl_spec_ndim(act) - 1];
    static const int64_t cells[] = { POLICY_CELLS, POLICY_CELLS };
    crl_rng rng;
    crl_rng_init(&rng, POLICY_SEED, 0);
    crl_mlp *net = crl_mlp_new("policy", in, p->d, cells, 2, CRL_ACT_RELU, false, &rng, err);
    if (net)
        p->actor = crl_det_actor_new(net, (const char *const *)p->keys, act, err);
    crl_mlp_unref(net);
    if (!p->actor) {
        policy_free(p);
        return CRL_E_INVALID;
    }
    return CRL_OK;
}

/* td's "action" from its observations (td has batch [rows]). */
static int policy_act(struct bench_policy *p, crl_td *td, crl_error *err)
{
    int64_t rows = crl_td_batch_shape(td)[0];
    if (!p->scratch || crl_td_batch_shape(p->scratch)[0] != rows) {
        crl_td_unref(p->scratch);
        crl_tensor_unref(p->act);
        p->act = NULL;
        int64_t shape[2] = { rows, p->d };
        if (!(p->scratch = crl_td_new(1, &rows, err)) || !(p->act = crl_tensor_new(p->dtype, 2, shape, err)))
            return CRL_E_NOMEM;
    }
    for (char **k = p->keys; *k; k++) {
        crl_tensor *t = crl_td_get(td, *k);
        if (!t)
            return crl_error_set(err, CRL_E_NOT_FOUND, "policy: observation '%s' is not in the TensorDict", *k);
        int rc = crl_td_set(p->scratch, *k, t, err);
        if (rc)
            return rc;
    }
    int rc = crl_det_actor_act(p->actor, p->scratch, CRL_EXPLORE_MODE, NULL, err);
    if (!rc)
        rc = crl_tensor_copy(p->act, crl_td_get(p->scratch, "action"), err);
    if (!rc)
        rc = crl_td_set(td, "action", p->act, err);
    return rc;
}

/* The policy alone on a batch of observations. */
typedef struct {
    bench_policy *pol;
    crl_td *td;
    crl_error err;
    bool failed;
} bench_act;

static void run_act(void *p, uint64_t n)
{
    bench_act *b = p;
    for (uint64_t i = 0; i < n && !b->failed; i++)
        if (policy_act(b->pol, b->td, &b->err))
            b->failed = true;
}

/* Sync with the policy: the actor over all N observations, then crl_env_step + step_mdp_into of all N. */
typedef struct {
    crl__bench_stepper s;
    bench_policy *pol;  /* borrowed */
} bench_psync;

static void run_psync(void *p, uint64_t n)
{
    bench_psync *b = p;
    crl__bench_stepper *s = &b->s;
    for (uint64_t i = 0; i < n && !s->failed; i++) {
        crl_td *td = s->td[s->cur], *next = s->td[s->cur ^ 1];
        if (policy_act(b->pol, td, &s->err) || crl_env_step(s->env, td, &s->err) ||
            crl_env_step_mdp_into(s->env, td, next, &s->err)) {
            s->failed = true;
            return;
        }
        s->cur ^= 1;
    }
}

/* Measurements taken in turns (each loop for seconds / TURNS in every turn), so load that comes and goes on
 * a shared machine falls on all of them; figures are the median turn's. */
#define TURNS 5

/* One task at num envs with the policy: serial and threads, async at batch_size N/2 and N/4 with its
 * ceiling, and the policy's cost next to the env's.  E is the serial loop's time per env step less the
 * policy's: the physics under the policy's actions, which can cost more or less than the pure rows' random
 * ones (a walker that falls has more contacts). */
static int policy_row(crl_host *host, const char *id, int64_t num, double seconds, crl_error *err)
{
    enum { SERIAL, THREADS, NSYNC };
    static const char *const sync_kinds[NSYNC] = { "serial", "threads" };
    static const int64_t divs[] = { 1, 2, 4 };  /* the policy's batch: N, then the async batch sizes */
    enum { NDIVS = G_N_ELEMENTS(divs) };
    bench_policy pol = { 0 };
    bench_psync ps[NSYNC] = { { .pol = &pol }, { .pol = &pol } };
    bench_async as[NDIVS] = { { 0 } };
    bench_act act[NDIVS] = { { 0 } };
    double p_ns[NDIVS][TURNS], rate[NSYNC][TURNS], arate[NDIVS][TURNS], ratio[NDIVS][TURNS], tratio[TURNS];
    int rc = CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    for (int k = 0; !rc && k < NSYNC; k++)
        rc = bench_open(&ps[k].s, host, "dm_control", id, num, sync_kinds[k], err);
    if (!rc)
        rc = policy_init(&pol, ps[SERIAL].s.env, err);
    /* The policy alone: on a copy of the observations of the first reset. */
    crl_td *sel = rc ? NULL : crl_td_select(ps[SERIAL].s.td[0], (const char *const *)pol.keys, true, &e);
    crl_td *obs = sel ? crl_td_clone(sel, &e) : NULL;
    crl_td_unref(sel);
    if (!rc && !obs)
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    for (int d = 0; !rc && d < NDIVS; d++) {
        act[d].pol = &pol;
        if (!(act[d].td = crl_td_slice(obs, 0, 0, num / divs[d], 1, &e)))
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    for (int d = 1; !rc && d < NDIVS; d++)
        if (!(rc = async_open(&as[d], host, "dm_control", id, num, num / divs[d], err)))
            as[d].pol = &pol;
    for (int t = 0; !rc && t < TURNS; t++) {
        /* Short warm-ups after the first turn: enough for envs an async loop left in flight to finish. */
        uint64_t warm = t ? 2 : 16;
        for (int d = 0; !rc && d < NDIVS; d++) {
            crl_bench_result r = crl__bench_measure(run_act, &act[d], seconds / TURNS, warm);
            p_ns[d][t] = r.ns_per_op / (double)(num / divs[d]);
            if (act[d].failed)
                rc = crl_error_pass(err, &act[d].err, CRL_E_RUNTIME);
        }
        for (int k = 0; !rc && k < NSYNC; k++) {
            crl_bench_result r = crl__bench_measure(run_psync, &ps[k], seconds / TURNS, warm);
            rate[k][t] = 1e9 / r.ns_per_op * (double)num;
            if (ps[k].s.failed)
                rc = crl_error_pass(err, &ps[k].s.err, CRL_E_RUNTIME);
        }
        for (int d = 1; !rc && d < NDIVS; d++) {
            crl_bench_result r = crl__bench_measure(run_async, &as[d], seconds / TURNS, warm);
            arate[d][t] = 1e9 / r.ns_per_op * (double)(num / divs[d]);
            ratio[d][t] = arate[d][t] / rate[THREADS][t];
            if (as[d].failed)
                rc = crl_error_pass(err, &as[d].err, CRL_E_RUNTIME);
        }
        if (!rc)
            tratio[t] = rate[THREADS][t] / rate[SERIAL][t];
    }
    for (int d = 0; d < NDIVS; d++) {
        crl_td_unref(act[d].td);
        if (d)
            async_close(&as[d]);
    }
    crl_td_unref(obs);
    for (int k = 0; k < NSYNC; k++)
        crl__bench_stepper_close(&ps[k].s);
    policy_free(&pol);
    if (rc)
        return rc;
    double p[NDIVS];
    for (int d = 0; d < NDIVS; d++)
        p[d] = crl__bench_median(p_ns[d], TURNS);
    double serial = crl__bench_median(rate[SERIAL], TURNS), threads = crl__bench_median(rate[THREADS], TURNS);
    double e_ns = 1e9 / serial - p[0], c = g_get_num_processors();
    char r1[32], r2[32];
    printf("  %-12s %5" G_GINT64_FORMAT "  E %.1f us  P %.1f us at batch %" G_GINT64_FORMAT " (P/E %.2f)", id,
           (gint64)num, e_ns / 1e3, p[0] / 1e3, (gint64)num, p[0] / e_ns);
    for (int d = 1; d < NDIVS; d++)
        printf(", %.1f us at %" G_GINT64_FORMAT, p[d] / 1e3, (gint64)(num / divs[d]));
    printf("\n");
    fmt_rate(r1, sizeof r1, serial);
    fmt_rate(r2, sizeof r2, threads);
    printf("  %-12s %5" G_GINT64_FORMAT "  serial %s  threads %s (%.2fx serial)", id, (gint64)num, r1, r2,
           crl__bench_median(tratio, TURNS));
    for (int d = 1; d < NDIVS; d++) {
        fmt_rate(r1, sizeof r1, crl__bench_median(arate[d], TURNS));
        printf("  async batch_size %" G_GINT64_FORMAT ": %s (%.2fx sync; ceiling %.2fx)", (gint64)(num / divs[d]),
               r1, crl__bench_median(ratio[d], TURNS), (c * p[0] + e_ns) / (p[d] + e_ns));
    }
    printf("\n");
    return CRL_OK;
}

static int dm_control_rows(crl_host *host, double seconds, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    if (!dm_control_load(host, &e)) {
        printf("  dm_control tasks: unavailable (%s)\n", e.message);
        return CRL_OK;
    }
    printf("  dm_control (sync: crl_env_step + step_mdp_into over N envs):\n");
    for (size_t i = 0; i < G_N_ELEMENTS(dmc_rows); i++) {
        if (!dm_control_has(host, dmc_rows[i].id)) {
            printf("  %-12s  (not in this build's dm_control plugin)\n", dmc_rows[i].id);
            continue;
        }
        for (size_t j = 0; j < G_N_ELEMENTS(dmc_rows[i].nums); j++) {
            int rc = row(host, "dm_control", dmc_rows[i].id, dmc_rows[i].nums[j], seconds, err);
            if (rc)
                return rc;
        }
    }
    printf("  dm_control async send/recv (threads, one instance per env):\n");
    for (size_t i = 0; i < G_N_ELEMENTS(dmc_rows); i++)
        for (size_t j = 0; dm_control_has(host, dmc_rows[i].id) && j < G_N_ELEMENTS(dmc_rows[i].nums); j++) {
            int rc = async_rows(host, "dm_control", dmc_rows[i].id, dmc_rows[i].nums[j], seconds, err);
            if (rc)
                return rc;
        }
    crl__blas_single_thread();
    printf("  dm_control with a policy in the loop (TD3/DDPG actor: MLP [%d, %d] ReLU, tanh into the bounds, over the "
           "observation keys concatenated, on the caller's thread, one OpenBLAS thread; E = serial env step and P = "
           "policy, per env; async ceiling on %u cores: (cores * P_N + E) / (P_B + E)):\n", POLICY_CELLS,
           POLICY_CELLS, g_get_num_processors());
    for (size_t i = 0; i < G_N_ELEMENTS(dmc_rows); i++)
        for (size_t j = 0; dm_control_has(host, dmc_rows[i].id) && j < G_N_ELEMENTS(dmc_rows[i].nums); j++) {
            int rc = policy_row(host, dmc_rows[i].id, dmc_rows[i].nums[j], seconds, err);
            if (rc)
                return rc;
        }
    return CRL_OK;
}

int crl__bench_batched(double seconds)
{
    crl_error err = { 0 };
    crl_config *cfg = NULL;
    crl_host *host = NULL;
    int status = CRL_EXIT_RUNTIME;
    if (crl__bench_classic_host(&cfg, &host, &err))
        goto out;
    printf("crl bench batched (%.2f s per measurement, %u cores; env steps/s through crl_env_step + step_mdp_into, "
           "ratio to serial in this run; workers: serial 1, threads and processes one per core; next_step "
           "auto-reset)\n", seconds, g_get_num_processors());
    printf("  %-12s %5s", "env", "N");
    for (int k = 0; k < NKINDS; k++)
        printf("  %-20s", kinds[k]);
    printf("\n");
    static const char *const ids[] = { "CartPole-v1", "Pendulum-v1" };
    static const int64_t nums[] = { 1, 8, 64, 1024 };
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
        for (size_t j = 0; j < G_N_ELEMENTS(nums); j++)
            if (row(host, "classic", ids[i], nums[j], seconds, &err))
                goto out;
    printf("  async send/recv (threads, one instance per env; steps/s = received envs per second):\n");
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
        for (size_t j = 2; j < G_N_ELEMENTS(nums); j++)
            if (async_rows(host, "classic", ids[i], nums[j], seconds, &err))
                goto out;
    /* Before the dm_control rows: forking a worker copies this process's page tables, and those rows leave
     * it holding 1-3 GB (their MuJoCo instances' memory, the policy rows' four loops open at once), which
     * made the start-up 40x slower (about 220 ms against 5.5 ms). */
    startup(host);
    if (dm_control_rows(host, seconds, &err))
        goto out;
    status = CRL_EXIT_OK;
out:
    if (err.code)
        crl__cli_print_error("bench batched", &err);
    crl_host_free(host);
    crl_config_free(cfg);
    return status;
}
