/* A trained policy loaded from a checkpoint directory (crl/trainer.h: crl_policy), and the evaluation
 * episodes the trainer and a loaded policy share (eval-private.h). */
#include "config.h"
#include "crl-private.h"
#include "config-private.h"
#include "eval-private.h"

#include <crl/checkpoint.h>
#include <crl/transform.h>

#include <glib.h>
#include <math.h>
#include <string.h>

/* ---- evaluation episodes ----------------------------------------------------------------- */

uint64_t crl__eval_seed(uint64_t seed, int64_t frames)
{
    return crl_seed_next((seed ^ 0xe7a1e7a1ULL) + (uint64_t)frames);
}

int crl__keep_raw_reward(crl_host *host, crl_env *env, bool *kept, crl_error *err)
{
    *kept = false;
    if (crl_env_transform_count(env) == 0)
        return CRL_OK;
    /* a chain of a third party's transforms only, without the transforms plugin: raw rewards unknown */
    if (!crl_host_lookup(host, CRL_KIND_TRANSFORM, "RenameTransform", NULL))
        return CRL_OK;
    static const char *const kv[] = { "in_keys=reward", "out_keys=" CRL__RAW_REWARD, "create_copy=true", NULL };
    crl_error e;
    crl_error_clear(&e);
    crl_transform *tf = crl_transform_new(host, "RenameTransform", kv, &e);
    if (!tf)
        return crl_error_prefix(&e, "keeping the raw reward: "), crl_error_pass(err, &e, CRL_E_CONFIG);
    int rc = crl_env_insert_transform(env, 0, tf, err);
    if (rc)
        return crl_error_prefix(err, "keeping the raw reward: "), rc;
    *kept = true;
    return CRL_OK;
}

/* Mean and population std of x[0..n). */
static void mean_std(const double *x, int64_t n, double *mean, double *std)
{
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++)
        m += x[i];
    m = n ? m / (double)n : NAN;
    for (int64_t i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *std = n ? sqrt(v / (double)n) : NAN;
}

int crl__eval_hook_set(crl_eval_hook *dst, const crl_eval_hook *hook, crl_error *err)
{
    if (!hook) {
        memset(dst, 0, sizeof *dst);
        return CRL_OK;
    }
    if (hook->struct_size < sizeof *hook || !hook->event)
        return crl_error_set(err, CRL_E_INVALID, "eval hook: %s", !hook->event ? "no event function"
                             : "struct_size is smaller than crl_eval_hook");
    *dst = *hook;
    return CRL_OK;
}

typedef struct hooked {
    crl_policy_fn fn;
    void *user;
    const crl_eval_hook *hook;
    int64_t frames;
} hooked;

static int hooked_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    hooked *h = user;
    int rc = h->hook->event(h->hook->user, CRL_EVAL_STEP, env, td, h->frames, err);
    return rc ? rc : h->fn(h->user, env, td, err);
}

int crl__eval_episodes(crl_env *env, crl_policy_fn fn, void *user, int64_t max_steps, uint64_t seed,
                       int64_t episodes, bool raw, const crl_eval_hook *hook, int64_t frames, crl_eval_result *out,
                       crl_error *err)
{
    crl_env_set_seed(env, seed);
    bool watch = hook && hook->event;
    hooked h = { fn, user, hook, frames };
    int rc = watch ? hook->event(hook->user, CRL_EVAL_BEGIN, env, NULL, frames, err) : CRL_OK;
    double *ret = g_new(double, episodes), *rawr = g_new(double, episodes);
    /* an env without transforms has no "raw_reward": its reward is the raw one */
    const char *raw_key = !raw ? NULL : crl_env_transform_count(env) ? "next." CRL__RAW_REWARD : "next.reward";
    int64_t got = 0;
    while (!rc && got < episodes) {
        crl_error re;
        crl_error_clear(&re);
        crl_td *ro = crl_env_rollout(env, max_steps, watch ? hooked_policy : fn, watch ? (void *)&h : user, false,
                                     true, NULL, &re);
        if (!ro) {
            rc = crl_error_pass(err, &re, CRL_E_RUNTIME);
            crl_error_prefix(err, "evaluation: ");
            break;
        }
        if (watch && (rc = hook->event(hook->user, CRL_EVAL_ROLLOUT_END, env, ro, frames, err))) {
            crl_td_unref(ro);
            break;
        }
        crl_tensor *r = crl_td_get(ro, "next.reward"), *d = crl_td_get(ro, "next.done");
        crl_tensor *rr = raw_key ? crl_td_get(ro, raw_key) : NULL;
        int nb = crl_td_batch_ndim(ro);
        int64_t T = crl_td_batch_shape(ro)[nb - 1], n = crl_tensor_numel(r) / T;
        /* rows of [N, T] (n = N) or [T] (n = 1); reward and done have a trailing 1 */
        for (int64_t e = 0; e < n && got < episodes; e++) {
            double acc = 0, racc = rr ? 0 : NAN;
            for (int64_t s = 0; s < T; s++) {
                acc += crl_tensor_flat_get(r, e * T + s);
                if (rr)
                    racc += crl_tensor_flat_get(rr, e * T + s);
                if (crl_tensor_flat_get(d, e * T + s) != 0.0)
                    break;
            }
            ret[got] = acc;
            rawr[got] = racc;
            got++;
        }
        crl_td_unref(ro);
    }
    if (watch) {
        crl_error he;
        crl_error_clear(&he);
        int hrc = hook->event(hook->user, CRL_EVAL_END, env, NULL, frames, rc ? &he : err);
        rc = rc ? rc : hrc;
    }
    if (rc) {
        g_free(ret);
        g_free(rawr);
        return rc;
    }
    out->episodes = got;
    mean_std(ret, got, &out->mean, &out->std);
    mean_std(rawr, got, &out->raw_mean, &out->raw_std);
    out->returns = ret;   /* crl_free is g_free */
    out->raw_returns = rawr;
    return CRL_OK;
}

/* ---- a loaded policy ----------------------------------------------------------------------- */

struct crl_policy {
    crl_env *env;
    const crl_loss_ops *ops;
    void *loss;
    crl_rng rng;
    uint64_t seed;
    int64_t frames, max_steps, episodes;
    bool raw;
    crl_eval_hook hook;
};

void crl_policy_free(crl_policy *p)
{
    if (!p)
        return;
    if (p->loss)
        p->ops->destroy(p->loss);
    crl_env_free(p->env);
    g_free(p);
}

/* The frame count of "trainer/counters" (f64 number 1 of 6), checked. */
static int read_frames(const crl_ckpt_reader *r, int64_t *frames, crl_error *err)
{
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    const uint8_t *c = crl_ckpt_section(r, "trainer/counters", &len, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    double f = len == 48 ? crl_ckpt_get_f64(c + 8) : -1;
    if (!(f >= 0 && f <= 0x1p53 && f == floor(f)))
        return crl_error_set(err, CRL_E_CORRUPT, "%s: section 'trainer/counters': %zu bytes, frames %g: a "
                             "trainer checkpoint has 6 counters of 8 bytes, frames a whole number in [0, 2^53]",
                             crl_ckpt_path(r), len, f);
    *frames = (int64_t)f;
    return CRL_OK;
}

crl_policy *crl_policy_load(crl_host *host, const crl_config *cfg, const char *dir, crl_error *err)
{
    if (!host || !cfg || !dir) {
        crl_error_set(err, CRL_E_INVALID, "crl_policy_load: %s is NULL", !host ? "host" : !cfg ? "config" : "dir");
        return NULL;
    }
    crl_policy *p = g_new0(crl_policy, 1);
    crl_opts *o = NULL;
    crl_ckpt_reader *r = NULL;
    crl_td *stats = NULL;
    crl_error e;
    crl_error_clear(&e);
    int64_t seed = 0;
    int rc = crl__config_section_opts(cfg, "train", crl_train_options(), &o, err);
    if (!rc && !(rc = crl_opts_int(o, "seed", &seed, err)) && !(rc = crl_opts_int(o, "eval_max_steps",
                                                                                  &p->max_steps, err)))
        rc = crl_opts_int(o, "eval_episodes", &p->episodes, err);
    p->seed = (uint64_t)seed;
    crl_opts_free(o);
    if (!rc && !(p->env = crl_env_from_config(host, cfg, "env", &e)))
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    if (!rc)
        rc = crl__keep_raw_reward(host, p->env, &p->raw, err);
    if (!rc)
        p->raw = p->raw || crl_env_transform_count(p->env) == 0;
    if (!rc)
        rc = crl_loss_from_config(host, cfg, "loss", crl_env_full_observation_spec(p->env),
                                  crl_env_full_action_spec(p->env), p->seed, &p->ops, &p->loss, err);
    char *path = g_build_filename(dir, "trainer.ckpt", NULL);
    if (!rc && !(r = crl_ckpt_reader_open(path, "crl.train", 1, &e)))
        rc = crl_error_pass(err, &e, CRL_E_IO);
    g_free(path);
    if (!rc)
        rc = read_frames(r, &p->frames, err);
    if (!rc)
        rc = p->ops->load(p->loss, r, "loss", err);
    /* the statistics the training env's transforms had (none: the env learns none) */
    if (!rc && crl_ckpt_has(r, "trainer/transforms/td") && !(stats = crl_ckpt_read_td(r, "trainer/transforms", &e)))
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (!rc && stats && (rc = crl_env_load_transforms_state(p->env, stats, true, err)))
        crl_error_prefix(err, "%s/trainer.ckpt: section 'trainer/transforms': ", dir);
    crl_td_unref(stats);
    crl_ckpt_reader_free(r);
    crl_rng_init(&p->rng, p->seed, 2);  /* the trainer's evaluation stream */
    if (rc) {
        crl_policy_free(p);
        return NULL;
    }
    return p;
}

crl_env *crl_policy_env(const crl_policy *p) { return p ? p->env : NULL; }
int64_t crl_policy_frames(const crl_policy *p) { return p ? p->frames : -1; }
int64_t crl_policy_eval_episodes(const crl_policy *p) { return p ? p->episodes : 0; }

int crl_policy_act(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)env;
    crl_policy *p = user;
    if (!p || !td)
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_act: the %s is NULL", !p ? "policy" : "TensorDict");
    return p->ops->act(p->loss, td, CRL_EXPLORE_MODE, &p->rng, err);
}

int crl_policy_evaluate(crl_policy *p, int64_t episodes, crl_eval_result *out, crl_error *err)
{
    if (!p || !out || out->struct_size < sizeof *out)
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_evaluate: %s", !p ? "the policy is NULL"
                             : !out ? "the result is NULL" : "struct_size is smaller than crl_eval_result");
    out->episodes = 0;
    out->returns = out->raw_returns = NULL;
    out->mean = out->std = out->raw_mean = out->raw_std = NAN;
    if (episodes < 1)
        return crl_error_set(err, CRL_E_INVALID, "evaluation: %lld episodes; ask for at least 1", (long long)episodes);
    return crl__eval_episodes(p->env, crl_policy_act, p, p->max_steps, crl__eval_seed(p->seed, p->frames), episodes,
                              p->raw, &p->hook, p->frames, out, err);
}

int crl_policy_set_eval_hook(crl_policy *p, const crl_eval_hook *hook, crl_error *err)
{
    if (!p)
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_set_eval_hook: the policy is NULL");
    return crl__eval_hook_set(&p->hook, hook, err);
}
