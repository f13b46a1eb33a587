/* crl bench envs: classic env steps/s through the host env API against the
 * bare backend (ops->step on buffers we bind ourselves), single env and a
 * 1024-env batch, plus a bit-exactness check of the two paths; then the ffi
 * backend against a native plugin wrapping the same C library. */
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <glib.h>
#include <string.h>

#define BATCH 1024
#define EXACT_STEPS 200
#define EXACT_SEED 20240601u

/* The only leaf of a Composite (what the classic backend declares). */
static const crl_spec *leaf_of(const crl_spec *comp, const char *key)
{
    return comp ? crl_spec_composite_get(comp, key) : NULL;
}

/* ---- the host env API ---------------------------------------------------- */

typedef struct {
    crl_config *cfg;
    crl_env *env;
    crl_td *td[2];
    int cur;
    crl_tensor **actions; /* views of the bank in the env's action shape */
    const crl__bench_bank *bank;
    int64_t k, next;
    crl_td_key *action_key;
    crl_error err;
    bool failed;
} host_env;

static void host_close(host_env *h)
{
    for (int64_t i = 0; h->actions && i < h->k; i++)
        crl_tensor_unref(h->actions[i]);
    g_free(h->actions);
    crl_td_unref(h->td[0]);
    crl_td_unref(h->td[1]);
    crl_td_key_free(h->action_key);
    crl_env_free(h->env);
    crl_config_free(h->cfg);
    memset(h, 0, sizeof *h);
}

/* An env from an [env] section's text (auto_reset = same_step is added). */
static int host_open_text(host_env *h, crl_host *host, const char *section, crl_error *err)
{
    memset(h, 0, sizeof *h);
    char *text = g_strdup_printf("[env]\n%sauto_reset = same_step\n", section);
    int rc = CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    if (!(h->cfg = crl_config_new(&e)) ||
        crl_config_load_buffer(h->cfg, "crl bench envs", text, strlen(text), CRL_LAYER_FILE, &e) ||
        !(h->env = crl_env_from_config(host, h->cfg, "env", &e)) || !(h->action_key = crl_td_key_new("action", &e)))
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
    g_free(text);
    if (rc)
        host_close(h);
    return rc;
}

/* [env] backend = classic, id, num_envs (0: a single env of batch []),
 * same-step auto-reset, so ended envs reset inside the step as the bare
 * loop resets them right after it. */
static int host_open(host_env *h, crl_host *host, const char *id, int64_t num, crl_error *err)
{
    char *section = num ? g_strdup_printf("backend = classic\nid = %s\nnum_envs = %" G_GINT64_FORMAT "\n", id,
                                          (gint64)num)
                        : g_strdup_printf("backend = classic\nid = %s\n", id);
    int rc = host_open_text(h, host, section, err);
    g_free(section);
    return rc;
}

/* Views of the bank's steps shaped like the env's action leaf. */
static int host_bind_bank(host_env *h, const crl__bench_bank *bank, crl_error *err)
{
    const crl_spec *leaf = crl_spec_composite_get(crl_env_full_action_spec(h->env), "action");
    if (!leaf)
        return crl_error_set(err, CRL_E_INVALID, "%s has no 'action' spec", crl_env_id(h->env));
    crl_dtype dt = crl_spec_dtype(leaf);
    int64_t numel = 1;
    for (int i = 0; i < crl_spec_ndim(leaf); i++)
        numel *= crl_spec_shape(leaf)[i];
    if ((size_t)numel * crl_dtype_size(dt) != bank->step_bytes)
        return crl_error_set(err, CRL_E_SHAPE, "%s: the host's action (%zu bytes) differs from the backend's (%zu)",
                             crl_env_id(h->env), (size_t)numel * crl_dtype_size(dt), bank->step_bytes);
    h->k = bank->k;
    h->bank = bank;
    h->actions = g_new0(crl_tensor *, (gsize)bank->k);
    crl_error e;
    crl_error_clear(&e);
    for (int64_t i = 0; i < bank->k; i++)
        if (!(h->actions[i] = crl_tensor_wrap(bank->data + (size_t)i * bank->step_bytes, dt, crl_spec_ndim(leaf),
                                              crl_spec_shape(leaf), NULL, NULL, NULL, &e)))
            return crl_error_pass(err, &e, CRL_E_NOMEM);
    return CRL_OK;
}

static int host_reset(host_env *h, crl_error *err)
{
    crl_td_unref(h->td[0]);
    crl_td_unref(h->td[1]);
    h->td[1] = NULL;
    h->cur = 0;
    crl_error e;
    crl_error_clear(&e);
    if (!(h->td[0] = crl_env_reset(h->env, NULL, &e)))
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    if (!(h->td[1] = crl_td_new(crl_env_batch_ndim(h->env), crl_env_batch_shape(h->env), &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    return CRL_OK;
}

/* step + step_mdp_into between two TensorDicts reused forever. */
static void run_host(void *p, uint64_t n)
{
    host_env *h = p;
    for (uint64_t i = 0; i < n && !h->failed; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        if (crl_td_set_k(td, h->action_key, h->actions[h->next++ % h->k], &h->err) ||
            crl_env_step(h->env, td, &h->err) || crl_env_step_mdp_into(h->env, td, next, &h->err)) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* Write the next pre-drawn action into the td's own action tensor, as a
 * policy that fills its output in place does (no new tensor per step). */
static int host_write_action(host_env *h, crl_td *td)
{
    crl_tensor *src = h->actions[h->next++ % h->k];
    crl_tensor *dst = crl_td_get_k(td, h->action_key);
    if (!dst)
        return crl_td_set_k(td, h->action_key, src, &h->err);
    memcpy(crl_tensor_data(dst), crl_tensor_data(src), crl_tensor_nbytes(src));
    return CRL_OK;
}

static void run_host_inplace(void *p, uint64_t n)
{
    host_env *h = p;
    for (uint64_t i = 0; i < n && !h->failed; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        if (host_write_action(h, td) || crl_env_step(h->env, td, &h->err) ||
            crl_env_step_mdp_into(h->env, td, next, &h->err)) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* crl_env_step_and_maybe_reset between the same two TensorDicts, the
 * action written in place as for run_host_inplace. */
static void run_host_fused(void *p, uint64_t n)
{
    host_env *h = p;
    for (uint64_t i = 0; i < n && !h->failed; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        if (host_write_action(h, td) || crl_env_step_and_maybe_reset(h->env, td, next, &h->err)) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* The data of both tds' action tensors, looked up once per run: a policy
 * that holds its output tensor writes there, as the bare loop writes its
 * buffer.  The runs below never replace those tensors. */
static bool host_hold(host_env *h, uint8_t **held)
{
    for (int j = 0; j < 2; j++) {
        if (!crl_td_get_k(h->td[j], h->action_key) && host_write_action(h, h->td[j])) {
            h->failed = true;
            return false;
        }
        held[j] = crl_tensor_data(crl_td_get_k(h->td[j], h->action_key));
    }
    return true;
}

static inline void held_action(host_env *h, uint8_t *dst)
{
    const crl__bench_bank *bank = h->bank;
    memcpy(dst, bank->data + (size_t)(h->next++ % bank->k) * bank->step_bytes, bank->step_bytes);
}

/* run_host_inplace, the action written through the held pointer. */
static void run_host_inplace_held(void *p, uint64_t n)
{
    host_env *h = p;
    uint8_t *held[2];
    if (!host_hold(h, held))
        return;
    for (uint64_t i = 0; i < n; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        held_action(h, held[h->cur]);
        if (crl_env_step(h->env, td, &h->err) || crl_env_step_mdp_into(h->env, td, next, &h->err)) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* run_host_fused, the action written through the held pointer. */
static void run_host_fused_held(void *p, uint64_t n)
{
    host_env *h = p;
    uint8_t *held[2];
    if (!host_hold(h, held))
        return;
    for (uint64_t i = 0; i < n; i++) {
        crl_td *td = h->td[h->cur], *next = h->td[h->cur ^ 1];
        held_action(h, held[h->cur]);
        if (crl_env_step_and_maybe_reset(h->env, td, next, &h->err)) {
            h->failed = true;
            return;
        }
        h->cur ^= 1;
    }
}

/* crl_env_step alone on one td (no step_mdp), the host's share of a step. */
static void run_host_step_only(void *p, uint64_t n)
{
    host_env *h = p;
    crl_td *td = h->td[h->cur];
    for (uint64_t i = 0; i < n && !h->failed; i++)
        if (host_write_action(h, td) || crl_env_step(h->env, td, &h->err))
            h->failed = true;
}

/* ---- bit-exactness: host rollout vs the bare loop ------------------------ */

typedef struct {
    const crl__bench_bank *bank;
    crl_td_key *key;
    int64_t t;
} replay;

static int replay_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    replay *r = user;
    crl_tensor *dst = crl_td_get_k(td, r->key);
    const crl_spec *leaf = crl_spec_composite_get(crl_env_full_action_spec(env), "action");
    const uint8_t *src = r->bank->data + (size_t)(r->t++ % r->bank->k) * r->bank->step_bytes;
    if (dst && crl_tensor_is_contiguous(dst) && crl_tensor_nbytes(dst) == r->bank->step_bytes &&
        crl_tensor_dtype(dst) == crl_spec_dtype(leaf)) {
        memcpy(crl_tensor_data(dst), src, r->bank->step_bytes);
        return CRL_OK;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_spec_zero(leaf, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    memcpy(crl_tensor_data(t), src, r->bank->step_bytes);
    int rc = crl_td_set_k(td, r->key, t, err);
    crl_tensor_unref(t);
    return rc;
}

/* Compare the host's [num, T, ...] leaf with the bare loop's records
 * [T, num, ...] bit for bit; describes the first difference in why. */
static bool same_bits(const crl_tensor *host, const uint8_t *bare, int64_t num, int64_t steps, size_t per_env,
                      const char *what, char *why, size_t why_len)
{
    if (!host || crl_tensor_nbytes(host) != (size_t)(num * steps) * per_env) {
        g_snprintf(why, why_len, "%s: the host rollout's tensor has another size", what);
        return false;
    }
    crl_tensor *c = crl_tensor_contiguous((crl_tensor *)host, NULL);
    if (!c) {
        g_snprintf(why, why_len, "%s: out of memory", what);
        return false;
    }
    const uint8_t *h = crl_tensor_data(c);
    bool same = true;
    for (int64_t e = 0; e < num && same; e++)
        for (int64_t t = 0; t < steps && same; t++)
            if (memcmp(h + (size_t)(e * steps + t) * per_env, bare + (size_t)(t * num + e) * per_env, per_env)) {
                g_snprintf(why, why_len, "%s differs first at env %" G_GINT64_FORMAT " step %" G_GINT64_FORMAT, what,
                           (gint64)e, (gint64)t);
                same = false;
            }
    crl_tensor_unref(c);
    return same;
}

static int bit_exact(crl_host *host, const crl_config *cfg, const char *id, bool *exact, char *why,
                     size_t why_len, crl_error *err)
{
    crl__bench_backend b;
    crl_env_specs specs;
    host_env h;
    crl__bench_bank bank = { 0 };
    crl_td *out = NULL;
    uint8_t *obs = NULL, *rew = NULL, *done = NULL;
    int rc;
    *exact = false;
    if ((rc = crl__bench_backend_open(&b, host, cfg, "classic", id, BATCH, EXACT_SEED, &specs, err)))
        return rc;
    if ((rc = host_open(&h, host, id, BATCH, err)))
        goto out;
    if ((rc = crl__bench_bank_fill(&bank, leaf_of(specs.action, "action"), EXACT_STEPS, EXACT_SEED + 1, err)))
        goto out;
    b.bank = &bank;
    size_t obs_env = b.obs_bytes / (size_t)BATCH;
    obs = g_malloc((gsize)EXACT_STEPS * b.obs_bytes);
    rew = g_malloc((gsize)EXACT_STEPS * BATCH * sizeof(float));
    done = g_malloc((gsize)EXACT_STEPS * BATCH);
    const crl_tensor *rt = crl_td_get(b.buffers, "reward");
    if (!rt || crl_tensor_nbytes(rt) != BATCH * sizeof(float)) {
        rc = crl_error_set(err, CRL_E_INVALID, "classic/%s: reward is not float32 [%d, 1]", id, BATCH);
        goto out;
    }
    for (int64_t t = 0; t < EXACT_STEPS; t++) {
        /* Record what the step wrote before ended envs are reset. */
        memcpy(b.action, bank.data + (size_t)t * bank.step_bytes, bank.step_bytes);
        if ((rc = b.ops->step(b.env, err)))
            goto out;
        memcpy(obs + (size_t)t * b.obs_bytes, b.obs, b.obs_bytes);
        memcpy(rew + (size_t)t * BATCH * sizeof(float), crl_tensor_data(rt), BATCH * sizeof(float));
        bool any = false;
        for (int64_t i = 0; i < BATCH; i++) {
            bool ended = b.terminated[i] || b.truncated[i] || (b.max_steps > 0 && ++b.elapsed[i] >= b.max_steps);
            done[t * BATCH + i] = ended;
            b.mask[i] = ended;
            any |= ended;
            if (ended)
                b.elapsed[i] = 0;
        }
        if (any && (rc = b.ops->reset(b.env, b.mask, NULL, false, err)))
            goto out;
    }
    crl_env_set_seed(h.env, EXACT_SEED);
    replay r = { &bank, NULL, 0 };
    crl_error e;
    crl_error_clear(&e);
    if (!(r.key = crl_td_key_new("action", &e))) {
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
        goto out;
    }
    out = crl_env_rollout(h.env, EXACT_STEPS, replay_policy, &r, false, true, NULL, &e);
    crl_td_key_free(r.key);
    if (!out) {
        rc = crl_error_pass(err, &e, CRL_E_RUNTIME);
        goto out;
    }
    *exact = same_bits(crl_td_get(out, "next.observation"), obs, BATCH, EXACT_STEPS, obs_env, "next.observation",
                       why, why_len) &&
             same_bits(crl_td_get(out, "next.reward"), rew, BATCH, EXACT_STEPS, sizeof(float), "next.reward", why,
                       why_len) &&
             same_bits(crl_td_get(out, "next.done"), done, BATCH, EXACT_STEPS, 1, "next.done", why, why_len);
    rc = CRL_OK;
out:
    crl_td_unref(out);
    g_free(obs);
    g_free(rew);
    g_free(done);
    crl__bench_bank_free(&bank);
    host_close(&h);
    crl__bench_backend_close(&b, &specs);
    return rc;
}

/* ---- figures ------------------------------------------------------------- */

/* The same runs timed in turn, `rounds` times each for seconds / rounds,
 * keeping each one's best: on a shared machine a burst of load then hits
 * one round, not one run. */
static void measure_turns(void (*const *fn)(void *, uint64_t), void *const *state, size_t k, double seconds,
                          int rounds, crl_bench_result *best)
{
    for (size_t j = 0; j < k; j++)
        best[j] = (crl_bench_result){ 0, 0 };
    for (int r = 0; r < rounds; r++)
        for (size_t j = 0; j < k; j++) {
            crl_bench_result x = crl__bench_measure(fn[j], state[j], seconds / rounds, 100);
            if (!best[j].ops || x.ns_per_op < best[j].ns_per_op)
                best[j] = x;
        }
}

static void report(const char *what, crl_bench_result r, int64_t envs)
{
    double ns_env = r.ns_per_op / (double)envs;
    printf("  %-40s %10.2f ns/env-step  %8.2f M env-steps/s\n", what, ns_env, 1e3 / ns_env);
}

/* Host vs bare for num envs (0: one env of batch []); their ratio. */
static int compare(crl_host *host, const crl_config *cfg, const char *id, int64_t num, double seconds,
                   crl_error *err)
{
    int64_t envs = num ? num : 1;
    crl__bench_backend b;
    crl_env_specs specs;
    host_env h;
    crl__bench_bank bank = { 0 };
    int rc;
    if ((rc = crl__bench_backend_open(&b, host, cfg, "classic", id, envs, 0, &specs, err)))
        return rc;
    if ((rc = host_open(&h, host, id, num, err)))
        goto out;
    if ((rc = crl__bench_bank_fill(&bank, leaf_of(specs.action, "action"), num ? 64 : 4096, 1, err)) ||
        (rc = host_bind_bank(&h, &bank, err)))
        goto out;
    b.bank = &bank;
    crl_env_set_seed(h.env, 0);
    if ((rc = host_reset(&h, err)))
        goto out;
    crl_bench_result rb = crl__bench_measure(crl__bench_backend_run, &b, seconds, 100);
    if (b.failed) {
        rc = crl_error_pass(err, &b.err, CRL_E_RUNTIME);
        goto out;
    }
    crl_bench_result rh = crl__bench_measure(run_host, &h, seconds, 100);
    crl_bench_result ri = { 0, 0 }, rs = { 0, 0 }, rf = { 0, 0 };
    if (!h.failed)
        ri = crl__bench_measure(run_host_inplace, &h, seconds, 100);
    if (!h.failed)
        rs = crl__bench_measure(run_host_step_only, &h, seconds, 100);
    if (!h.failed)
        rf = crl__bench_measure(run_host_fused, &h, seconds, 100);
    /* One env: bare, before and after timed in turns, side by side. */
    crl_bench_result turns[3] = { { 0, 0 } };
    if (!num && !h.failed) {
        void (*const fns[3])(void *, uint64_t) = { crl__bench_backend_run, run_host_inplace_held, run_host_fused_held };
        void *const states[3] = { &b, &h, &h };
        measure_turns(fns, states, 3, 3 * seconds, 6, turns);
    }
    if (b.failed || h.failed) {
        rc = crl_error_pass(err, b.failed ? &b.err : &h.err, CRL_E_RUNTIME);
        goto out;
    }
    printf("%s, %s:\n", id, num ? "1024 envs in one process" : "one env");
    report("bare backend: ops->step (+ masked reset)", rb, envs);
    report("host: crl_env_step alone (action in place)", rs, envs);
    report("host: step + step_mdp_into (action in place)", ri, envs);
    report("host: step + step_mdp_into (new action tensor)", rh, envs);
    report("host: step_and_maybe_reset (action in place)", rf, envs);
    const struct {
        const char *what;
        crl_bench_result r;
    } lines[] = { { "crl_env_step", rs }, { "step + step_mdp_into", ri }, { "step_and_maybe_reset", rf } };
    for (size_t j = 0; j < G_N_ELEMENTS(lines); j++) {
        double overhead = (lines[j].r.ns_per_op / rb.ns_per_op - 1.0) * 100.0;
        printf("  host overhead, %s: %+.1f%% (host/bare time %.2fx; target < 20%%): %s\n", lines[j].what, overhead,
               lines[j].r.ns_per_op / rb.ns_per_op, overhead < 20.0 ? "met" : "missed");
    }
    if (!num) {
        printf("  one env, side by side (timed in turns, best of 6 each; the action written through a pointer held "
               "across steps, as the bare loop writes its buffer):\n");
        const char *what[3] = { "bare backend step", "before: step + step_mdp_into", "after: step_and_maybe_reset" };
        for (int j = 0; j < 3; j++)
            printf("    %-30s %8.2f ns/step  %5.2fx bare%s\n", what[j], turns[j].ns_per_op,
                   turns[j].ns_per_op / turns[0].ns_per_op,
                   j < 2 ? "" : turns[j].ns_per_op / turns[0].ns_per_op < 1.2 ? " (target < 1.20x): met"
                                                                          : " (target < 1.20x): missed");
    }
    if (num) {
        /* The throughput target is CartPole's; other envs cost more per step. */
        double msps = 1e3 * (double)envs / rh.ns_per_op;
        bool target = !strcmp(id, "CartPole-v1");
        printf("  host batch throughput: %.1f M env-steps/s on one core%s%s\n", msps,
               target ? " (target >= 20 M/s): " : "", target ? (msps >= 20.0 ? "met" : "missed") : "");
    }
out:
    crl__bench_bank_free(&bank);
    host_close(&h);
    crl__bench_backend_close(&b, &specs);
    return rc;
}

/* The ffi backend describing tests/ffi/springmass.c's library vs env/smnative (tests/plugins/smnative.c),
 * which wraps the same library by hand: both through the host (step_and_maybe_reset, the action written in
 * place), timed in turns.  Skipped, with a line saying why, when the library or a plugin is not found. */
static int bench_ffi(crl_host *host, double seconds, crl_error *err)
{
    const char *lib = g_getenv("CRL_BENCH_FFI_LIB");
    if (!lib || !*lib) {
        printf("ffi vs native: skipped (set CRL_BENCH_FFI_LIB to the springmass example library, "
               "tests/ffi/.libs/libspringmass.so in a build tree)\n");
        return CRL_OK;
    }
    static const char *const needed[] = { "ffi", "smnative" };
    for (size_t j = 0; j < G_N_ELEMENTS(needed); j++) {
        crl_error e;
        crl_error_clear(&e);
        if (!crl_host_find(host, CRL_KIND_ENV, needed[j]) && crl_host_load_name(host, needed[j], &e)) {
            printf("ffi vs native: skipped (plugin %s is not on CRL_PLUGIN_PATH: %s)\n", needed[j], e.message);
            return CRL_OK;
        }
    }
    printf("ffi vs native (springmass from %s; the same library through [env] backend = ffi and through a "
           "hand-written plugin; host step_and_maybe_reset, timed in turns, best of 6):\n", lib);
    static const int64_t nums[] = { 1, BATCH };
    for (size_t j = 0; j < G_N_ELEMENTS(nums); j++) {
        char *ffi_text = g_strdup_printf(
            "backend = ffi\nid = springmass\nlibrary = %s\nmake = handle sm_make()\n"
            "seeding = void sm_seed(handle, seed)\nreset = void sm_reset(handle, double *observation)\n"
            "step = int32 sm_step(handle, const double *action, double *observation, double *reward, "
            "uint8 *terminated) ok=0\nfree = void sm_free(handle)\nobservation_shape = 2\naction_shape = 1\n"
            "max_episode_steps = 200\nnum_envs = %" G_GINT64_FORMAT "\n", lib, (gint64)nums[j]);
        /* The same library's batch interface: one ffi_call per step for all envs. */
        char *batch_text = g_strdup_printf(
            "backend = ffi\nid = springmass\nlibrary = %s\ncalls = batch\nmake = handle sm_batch_make(count)\n"
            "seeding = void sm_batch_seed(handle, seeds, mask, count)\n"
            "reset = void sm_batch_reset(handle, mask, double *observation, count)\n"
            "step = int32 sm_batch_step(handle, const double *action, double *observation, double *reward, "
            "uint8 *terminated, count) ok=0\nfree = void sm_batch_free(handle)\nobservation_shape = 2\n"
            "action_shape = 1\nmax_episode_steps = 200\nnum_envs = %" G_GINT64_FORMAT "\n", lib, (gint64)nums[j]);
        char *native_text = g_strdup_printf("backend = smnative\nid = springmass\nlibrary = %s\n"
                                            "max_episode_steps = 200\nnum_envs = %" G_GINT64_FORMAT "\n", lib,
                                            (gint64)nums[j]);
        host_env hf, hn, hb;
        crl__bench_bank bank = { 0 };
        int rc = host_open_text(&hf, host, ffi_text, err);
        if (!rc && (rc = host_open_text(&hn, host, native_text, err)))
            host_close(&hf);
        if (!rc && (rc = host_open_text(&hb, host, batch_text, err))) {
            host_close(&hf);
            host_close(&hn);
        }
        g_free(ffi_text);
        g_free(native_text);
        g_free(batch_text);
        if (rc)
            return rc;
        if (!(rc = crl__bench_bank_fill(&bank, leaf_of(crl_env_full_action_spec(hf.env), "action"), 64, 1, err)) &&
            !(rc = host_bind_bank(&hf, &bank, err)) && !(rc = host_bind_bank(&hn, &bank, err)) &&
            !(rc = host_bind_bank(&hb, &bank, err))) {
            crl_env_set_seed(hf.env, 0);
            crl_env_set_seed(hn.env, 0);
            crl_env_set_seed(hb.env, 0);
            if (!(rc = host_reset(&hf, err)) && !(rc = host_reset(&hn, err)))
                rc = host_reset(&hb, err);
        }
        if (!rc) {
            crl_bench_result best[3];
            void (*const fns[3])(void *, uint64_t) = { run_host_fused_held, run_host_fused_held, run_host_fused_held };
            void *const states[3] = { &hn, &hf, &hb };
            measure_turns(fns, states, 3, 2 * seconds, 6, best);
            if (hn.failed || hf.failed || hb.failed) {
                rc = crl_error_pass(err, hn.failed ? &hn.err : hf.failed ? &hf.err : &hb.err, CRL_E_RUNTIME);
            } else {
                printf("  %" G_GINT64_FORMAT " env%s:\n", (gint64)nums[j], nums[j] == 1 ? "" : "s");
                report("native plugin (direct calls)", best[0], nums[j]);
                report("ffi backend (ffi_call per env)", best[1], nums[j]);
                report("ffi backend, calls = batch", best[2], nums[j]);
                printf("    ffi/native time: %.2fx per env, %.2fx batch\n", best[1].ns_per_op / best[0].ns_per_op,
                       best[2].ns_per_op / best[0].ns_per_op);
            }
        }
        crl__bench_bank_free(&bank);
        host_close(&hf);
        host_close(&hn);
        host_close(&hb);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

int crl__bench_envs(double seconds)
{
    crl_error err = { 0 };
    crl_config *cfg = NULL;
    crl_host *host = NULL;
    int status = CRL_EXIT_RUNTIME;
    if (crl__bench_classic_host(&cfg, &host, &err))
        goto out;
    printf("crl bench envs (%.2f s per measurement; random actions drawn beforehand; ended envs reset)\n", seconds);
    static const char *const ids[] = { "CartPole-v1", "Pendulum-v1" };
    bool all_exact = true;
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++) {
        if (compare(host, cfg, ids[i], 0, seconds, &err) || compare(host, cfg, ids[i], BATCH, seconds, &err))
            goto out;
        bool exact = false;
        char why[256] = "";
        if (bit_exact(host, cfg, ids[i], &exact, why, sizeof why, &err))
            goto out;
        printf("  bit-exact: %s (%s, %d envs x %d steps, seed %u: host rollout vs bare backend, observations, "
               "rewards, dones)%s%s\n", exact ? "yes" : "no", ids[i], BATCH, EXACT_STEPS, EXACT_SEED,
               exact ? "" : ": ", exact ? "" : why);
        all_exact &= exact;
    }
    if (bench_ffi(host, seconds, &err))
        goto out;
    status = all_exact ? CRL_EXIT_OK : CRL_EXIT_RUNTIME;
out:
    if (err.code)
        crl__cli_print_error("bench envs", &err);
    crl_host_free(host);
    crl_config_free(cfg);
    return status;
}
