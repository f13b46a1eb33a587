/* Config-only training: env + collector + replay buffer + loss + optimizer (crl/trainer.h). */
#include "config.h"
#include "crl-private.h"
#include "config-private.h"
#include "check-private.h"
#include "checkpoint-private.h"
#include "nn-private.h"
#include "replay-private.h"
#include "eval-private.h"
#include "carry-private.h"

#include <crl/trainer.h>
#include <crl/transform.h>

#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const crl_option loss_section_options[] = {
    /* no REQUIRED flag: the schema declares [loss] for every config; crl_trainer_from_config enforces it */
    { "type", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "the loss component (dqn, ppo, ...; see 'crl plugins --verbose'); its own options follow in this section" },
    CRL_OPTIONS_END
};

static const crl_option optim_options[] = {
    { "type", CRL_OPT_ENUM, 0, "adam", 0, 0, "sgd|adam|adamw|rmsprop", "optimizer (PyTorch's formulas)" },
    { "lr", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.001", 1e-12, 10, NULL, "learning rate" },
    { "weight_decay", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0", 0, 1, NULL, "weight decay (AdamW: decoupled)" },
    /* above 0, as crl_optim_set takes it: an eps of 0 is refused here, before any work */
    { "eps", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1e-8", 1e-300, 1, NULL, "epsilon of Adam, AdamW and RMSprop (> 0)" },
    { "max_grad_norm", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0", 0, 1e12, NULL,
      "clip the global gradient norm to this before each step (0: no clipping)" },
    CRL_OPTIONS_END
};

static const crl_option train_options[] = {
    { "seed", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 9.2e18, NULL,
      "seeds the networks, exploration, minibatch order and evaluation env ([env] seed seeds the training env)" },
    { "num_updates", CRL_OPT_INT, CRL_OPT_RANGE, "1", 0, 1e9, NULL,
      "off-policy: optimizer steps per collected batch (the update-to-data ratio)" },
    { "epochs", CRL_OPT_INT, CRL_OPT_RANGE, "4", 1, 1e6, NULL, "on-policy: passes over each collected batch" },
    { "minibatch_size", CRL_OPT_INT, CRL_OPT_RANGE, "64", 1, 1e9, NULL,
      "on-policy: rows per minibatch (the last one of an epoch may be smaller)" },
    { "sequence_length", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e9, NULL,
      "recurrent networks: on-policy, cut each env's steps into slices of this many and draw minibatches of "
      "whole slices [minibatch_size / sequence_length, sequence_length]; off-policy, learn from the replay's "
      "slices (sampler = slice, slice_len = this) as [batch_size / sequence_length, sequence_length] (0: single "
      "rows)" },
    { "eval_interval", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e18, NULL,
      "evaluate every this many frames (0: only at the end)" },
    { "eval_episodes", CRL_OPT_INT, CRL_OPT_RANGE, "5", 0, 1e6, NULL,
      "episodes of the exploration-free policy per evaluation (0: no evaluation), on an env built from [env] whose "
      "transforms normalise with the training env's statistics, frozen (VecNorm, ObservationNorm)" },
    { "eval_max_steps", CRL_OPT_INT, CRL_OPT_RANGE, "1000", 1, 1e9, NULL,
      "an evaluation episode is cut after this many steps" },
    { "log_interval", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e18, NULL,
      "frames between metrics.csv rows and plain progress lines (0: a row per batch, a line at most every 5 s)" },
    { "checkpoint_interval", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e18, NULL,
      "frames between checkpoints in the run directory (0: only at the end)" },
    { "run_dir", CRL_OPT_STRING, 0, "", 0, 0, NULL,
      "run directory of crl run, or the sweep directory of crl run --seeds (empty: runs/NAME-YYYYmmdd-HHMMSS)" },
    { "stop_return", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL,
      "stop once an evaluation's mean return reaches this (unset: run all total_frames)" },
    /* crl run's; metrics.csv is always written (curve.png and --resume read it) */
    { "loggers", CRL_OPT_LIST, 0, "csv", 0, 0, NULL,
      "where crl run logs its metrics rows, any of: csv (metrics.csv, always written), jsonl (metrics.jsonl, a "
      "JSON object a row), tensorboard (events.out.tfevents.* for TensorBoard, scalars train/*, eval/*, perf/fps "
      "by frame)" },
    { "record_video", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "crl run: write env 0's first episode of each evaluation as an MP4, RUN_DIR/videos/eval-FRAMES.mp4 (needs a "
      "crl built with FFmpeg and an env that renders)" },
    /* The return stop_return reads: "raw" (the backend's reward, before RewardScaling, VecNorm and the other
     * [env] transforms) or "transformed" (the reward the loss trains on). */
    { "stop_on", CRL_OPT_ENUM, 0, "raw", 0, 0, "raw|transformed",
      "which evaluation return stop_return reads: raw (the backend's reward, before the [env] transforms) or "
      "transformed (the reward the loss sees)" },
    CRL_OPTIONS_END
};

const crl_option *crl_loss_section_options(void) { return loss_section_options; }
const crl_option *crl_optim_section_options(void) { return optim_options; }
const crl_option *crl_train_options(void) { return train_options; }

#define RECENT 10

struct crl_trainer {
    crl_host *host;
    const crl_config *cfg;
    crl_env *eval_env;
    crl_collector *coll;
    crl_replay *rb;
    crl_loss_ops ops;
    void *loss;
    crl_optim **optims;  /* one per parameter vector of the loss */
    size_t n_optims;
    crl_rng rng;          /* exploration and minibatch order */
    crl_rng eval_rng;
    uint64_t seed;
    bool prioritized;
    double max_grad_norm, stop_return;
    bool has_stop;
    int64_t num_updates, epochs, minibatch, seq_len, eval_interval, eval_episodes, eval_max_steps, init_random;
    int64_t batch_size, optim_steps;
    crl_td *losses;
    crl_returns *returns; /* episode returns across batches */
    double recent[RECENT];
    int64_t episodes;
    /* the same for the backend's reward (raw_key: where the batches hold it, NULL unknown) */
    const char *raw_key;
    bool stop_raw;
    crl_eval_hook eval_hook;   /* observer of evaluations (event NULL: none) */
    crl_returns *raw_returns;
    double recent_raw[RECENT];
    int64_t raw_episodes;
    double last_loss;
    /* where the run stands (kept across crl_trainer_run calls and checkpoints) */
    int64_t frames, batches, next_eval;
    /* every action the policy took, in order: a resumed run re-collects
     * the same frames with them (fast-forward) to rebuild the env and
     * collector state bitwise, without the env backends saving theirs */
    GByteArray *actions;
    bool ff;
    size_t ff_pos;
    /* the frame counts at which a batch shorter than frames_per_batch ended
     * (a run's total_frames cut it), in order: the re-collection of a resume
     * ends its batches there too (reset_at_each_iter makes them matter) */
    GArray *cuts;
    int64_t fpb;
    /* the state the policy carries between steps (carry-private.h): what it writes under "next", found
     * once; a resume's checkpoint copy of each sub-collector's, put back after re-collecting (NULL: the
     * checkpoint kept none, carry_absent then says whether it should have) */
    crl_td *carry_tmpl;
    crl_td **carry_saved;
    size_t n_carry_saved;
    bool carry_absent;
    /* sub-collectors with their own policies (crl/trainer.h): local copies, or remote ones */
    bool copies_mode;
    crl_policy_copy **copies;
    size_t ncopies;
    int64_t sync_interval, synced_steps;
    bool published;
    GByteArray *pub_weights;  /* the weights of the last sync (checkpoints keep them for the copies) */
    int64_t nsubs;            /* sub-collectors */
    bool sync;
    bool has_remote;
    crl_trainer_remote remote;
};

static const crl_option no_options[] = { CRL_OPTIONS_END };

/* A buffer of images written into every checkpoint can take gigabytes and minutes each time: say how much,
 * and how to turn it off.  Each item holds the observations twice (and "next."). */
static void warn_replay_size(crl_host *host, const crl_config *cfg, const crl_replay *rb, crl_env *env)
{
    const crl_spec *obs = env ? crl_env_full_observation_spec(env) : NULL;
    if (!rb->checkpoint || !obs || crl_spec_get_kind(obs) != CRL_SPEC_COMPOSITE)
        return;
    int bn = crl_spec_ndim(obs);
    double bytes = 0;
    bool images = false;
    for (size_t i = 0; i < crl_spec_composite_len(obs); i++) {
        const crl_spec *s = crl_spec_composite_get(obs, crl_spec_composite_key_at(obs, i));
        if (!s || crl_spec_get_kind(s) == CRL_SPEC_COMPOSITE)
            continue;
        double n = (double)crl_dtype_size(crl_spec_dtype(s));
        for (int d = bn; d < crl_spec_ndim(s); d++)
            n *= (double)crl_spec_shape(s)[d];
        images |= crl_spec_ndim(s) - bn >= 3;
        bytes += 2 * n;
    }
    bytes *= (double)rb->capacity;
    if (!images)
        return;
    const char *o = crl_config_origin(cfg, rb->section, "checkpoint");
    crl_host_log(host, CRL_LOG_WARNING, "%s%s[%s] checkpoint = true: the buffer holds image observations, about "
                 "%.0f bytes (%.2f GiB) at capacity %lld, written into every checkpoint; set [%s] checkpoint = false "
                 "to leave it out (a resume then refills it from the re-collected frames)", o ? o : "", o ? ": " : "",
                 rb->section, bytes, bytes / 1073741824.0, (long long)rb->capacity, rb->section);
}

int crl_loss_from_config(crl_host *host, const crl_config *cfg, const char *section, const crl_spec *obs_spec,
                         const crl_spec *action_spec, uint64_t seed, const crl_loss_ops **ops_out, void **st,
                         crl_error *err)
{
    const char *type = crl_config_get(cfg, section, "type");
    if (!type)
        return crl_error_set(err, CRL_E_CONFIG, "[%s] has no 'type': name the loss (type = dqn, ppo, ...)", section);
    crl_error e;
    crl_error_clear(&e);
    const crl_component *comp = crl_host_lookup(host, CRL_KIND_LOSS, type, &e);
    if (!comp)
        return crl_error_set(err, e.code ? e.code : CRL_E_NOT_FOUND, "%s: [%s] type = '%s': %s",
                             crl_config_origin(cfg, section, "type"), section, type, e.message);
    const crl_loss_ops *ops = comp->ops;
    if (!ops || ops->struct_size < offsetof(crl_loss_ops, load) + sizeof ops->load || !ops->create ||
        !ops->destroy || !ops->act || !ops->num_params || !ops->param || !ops->forward || !ops->save || !ops->load ||
        ((ops->flags & CRL_LOSS_ON_POLICY) && !ops->prepare))
        return crl_error_set(err, CRL_E_PLUGIN, "loss '%s' (plugin '%s') has incomplete ops", type,
                             crl_host_component_owner(host, CRL_KIND_LOSS, type));
    const crl_option *tables[2] = { loss_section_options, comp->options ? comp->options : no_options };
    int rc = crl__config_check_keys(cfg, section, tables, 2, err);
    if (rc)
        return rc;
    crl_error_clear(&e);
    crl__nets *nets = crl__nets_new(cfg, &e);
    if (!nets)
        return crl_error_pass(err, &e, CRL_E_CONFIG);
    crl_opts *o = crl_config_opts(cfg, section, tables, 2, &e);
    if (!o) {
        crl__nets_free(nets);
        return crl_error_pass(err, &e, CRL_E_CONFIG);
    }
    crl__opts_set_nets(o, nets);
    crl_error_clear(&e);
    rc = ops->create(o, obs_spec, action_spec, seed, st, &e);
    crl_opts_free(o);
    char who[96];
    snprintf(who, sizeof who, "loss '%s'", type);
    if (!rc && (rc = crl__nets_check_used(nets, who, &e))) {
        ops->destroy(*st);
        *st = NULL;   /* nothing is handed back on error */
    } else if (rc && !(rc == CRL_E_CONFIG && strstr(e.message, ": [net.")))   /* a [net.*] key names itself */
        crl_error_prefix(&e, "%s: [%s] type = %s: ", crl_config_origin(cfg, section, "type"), section, type);
    else if (!rc)
        *ops_out = ops;
    crl__nets_free(nets);
    return rc ? crl_error_pass(err, &e, rc) : CRL_OK;
}

static int read_train(crl_trainer *t, const crl_opts *o, crl_error *err)
{
    int64_t seed;
    int rc;
    if ((rc = crl_opts_int(o, "seed", &seed, err)) || (rc = crl_opts_int(o, "num_updates", &t->num_updates, err)) ||
        (rc = crl_opts_int(o, "epochs", &t->epochs, err)) ||
        (rc = crl_opts_int(o, "minibatch_size", &t->minibatch, err)) ||
        (rc = crl_opts_int(o, "sequence_length", &t->seq_len, err)) ||
        (rc = crl_opts_int(o, "eval_interval", &t->eval_interval, err)) ||
        (rc = crl_opts_int(o, "eval_episodes", &t->eval_episodes, err)) ||
        (rc = crl_opts_int(o, "eval_max_steps", &t->eval_max_steps, err)))
        return rc;
    t->seed = (uint64_t)seed;
    const char *stop_on;
    if ((rc = crl_opts_string(o, "stop_on", &stop_on, err)))
        return rc;
    t->stop_raw = !strcmp(stop_on, "raw");
    t->has_stop = crl_opts_is_set(o, "stop_return");
    if (t->has_stop && (rc = crl_opts_double(o, "stop_return", &t->stop_return, err)))
        return rc;
    return CRL_OK;
}

static int build_optim(crl_trainer *t, const crl_opts *o, crl_error *err)
{
    const char *type;
    double lr, wd, eps;
    crl_optim_kind kind;
    int rc;
    if ((rc = crl_opts_string(o, "type", &type, err)) || (rc = crl_optim_kind_from_name(type, &kind, err)) ||
        (rc = crl_opts_double(o, "lr", &lr, err)) || (rc = crl_opts_double(o, "weight_decay", &wd, err)) ||
        (rc = crl_opts_double(o, "eps", &eps, err)) ||
        (rc = crl_opts_double(o, "max_grad_norm", &t->max_grad_norm, err)))
        return rc;
    size_t n = t->ops.num_params(t->loss);
    t->optims = g_new0(crl_optim *, n ? n : 1);
    t->n_optims = n;
    for (size_t i = 0; i < n; i++) {
        const char *name;
        crl_tensor *p, *g;
        crl_error e;
        crl_error_clear(&e);
        if (!(t->optims[i] = crl_optim_new(kind, lr, &e)))
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = crl_optim_set(t->optims[i], "weight_decay", wd, err)) ||
            (kind != CRL_OPTIM_SGD && (rc = crl_optim_set(t->optims[i], "eps", eps, err))))
            return crl_error_prefix(err, "[optim]: "), rc;
        if ((rc = t->ops.param(t->loss, i, &name, &p, &g, err)) || (rc = crl_optim_add(t->optims[i], p, g, err)))
            return rc;
    }
    return CRL_OK;
}

static int collect_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)env;
    crl_trainer *t = user;
    int rc = t->ops.act(t->loss, td, t->ff ? CRL_EXPLORE_MODE : CRL_EXPLORE_RANDOM, &t->rng, err);
    if (rc)
        return rc;
    crl_tensor *a = crl_td_get(td, "action");
    if (!a || !crl_tensor_is_contiguous(a))
        return crl_error_set(err, CRL_E_INVALID, "trainer: the policy wrote no contiguous 'action'");
    size_t n = crl_tensor_nbytes(a);
    if (!t->ff) {
        g_byte_array_append(t->actions, crl_tensor_data(a), (guint)n);
        return CRL_OK;
    }
    /* fast-forward: the recorded action replaces the policy's */
    if (t->ff_pos + n > t->actions->len)
        return crl_error_set(err, CRL_E_CORRUPT, "resume: the checkpoint's actions end at byte %zu, frame needs %zu "
                             "more", t->ff_pos, n);
    memcpy(crl_tensor_data(a), t->actions->data + t->ff_pos, n);
    t->ff_pos += n;
    return CRL_OK;
}

/* Sub-collector k's policy copy acts for its env. */
static int copy_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    crl_trainer *t = user;
    for (size_t k = 0; k < t->ncopies; k++)
        if (crl_collector_env(t->coll, k) == env)
            return crl_policy_copy_act(t->copies[k], env, td, err);
    return crl_error_set(err, CRL_E_INVALID, "trainer: a policy call for an env of no sub-collector");
}

static int stamp_batch(void *user, size_t k, crl_td *batch, crl_error *err)
{
    crl_trainer *t = user;
    return crl_policy_copy_stamp(t->copies[k], batch, err);
}

/* Before each batch: the copies get the exploration schedule, and the weights when sync_interval
 * optimizer steps passed since they last did (always before the first batch). */
static int publish_policy(crl_trainer *t, crl_error *err)
{
    bool due = !t->published || t->optim_steps - t->synced_steps >= t->sync_interval;
    if (due) {
        t->synced_steps = t->optim_steps;
        t->published = true;
        g_byte_array_set_size(t->pub_weights, (guint)crl_trainer_weights_size(t));
        int rc = crl_trainer_weights(t, t->pub_weights->data, t->pub_weights->len, err);
        if (rc)
            return rc;
    }
    if (t->has_remote)
        return t->remote.publish(t->remote.user, t, t->synced_steps, t->frames, due, err);
    int rc = CRL_OK;
    for (size_t k = 0; k < t->ncopies && !rc; k++)
        rc = crl_policy_copy_set(t->copies[k], t->synced_steps, t->frames, due ? t->pub_weights->data : NULL,
                                 due ? t->pub_weights->len : 0, err);
    return rc;
}

static int eval_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)env;
    crl_trainer *t = user;
    return t->ops.act(t->loss, td, CRL_EXPLORE_MODE, &t->eval_rng, err);
}

/* Every local env of the trainer (the collector's, the evaluation env) keeps its raw reward. */
static int keep_raw_rewards(crl_trainer *t, crl_error *err)
{
    bool all = true, any = false, none_chained = true;
    int rc = CRL_OK;
    size_t n = t->has_remote ? 0 : crl_collector_num_envs(t->coll);
    for (size_t k = 0; k < n && !rc; k++) {
        crl_env *env = crl_collector_env(t->coll, k);
        bool kept;
        none_chained = none_chained && crl_env_transform_count(env) == 0;
        rc = crl__keep_raw_reward(t->host, env, &kept, err);
        all = all && kept;
        any = any || kept;
    }
    if (!rc && t->eval_env) {
        bool kept;
        rc = crl__keep_raw_reward(t->host, t->eval_env, &kept, err);
    }
    if (rc)
        return rc;
    if (t->has_remote)
        t->raw_key = crl_config_get(t->cfg, "env", "transforms") &&
                     *crl_config_get(t->cfg, "env", "transforms") ? NULL : "next.reward";
    else
        t->raw_key = none_chained ? "next.reward" : any && all ? "next." CRL__RAW_REWARD : NULL;
    return CRL_OK;
}

const char *crl_trainer_raw_reward_key(const crl_trainer *t) { return t ? t->raw_key : NULL; }

static crl_trainer *build(crl_host *host, const crl_config *cfg, const crl_trainer_remote *remote, crl_error *err)
{
    crl_trainer *t = g_new0(crl_trainer, 1);
    if (remote) {
        t->has_remote = true;
        t->remote = *remote;
    }
    t->host = host;
    t->cfg = cfg;
    t->last_loss = NAN;
    t->actions = g_byte_array_new();
    t->pub_weights = g_byte_array_new();
    t->cuts = g_array_new(FALSE, FALSE, sizeof(int64_t));
    t->returns = crl_returns_new();
    t->raw_returns = crl_returns_new();
    crl_opts *otrain = NULL, *ooptim = NULL, *ocoll = NULL, *odist = NULL;
    /* Each part checks the sections it reads against its own tables; the whole config (unknown sections)
     * is the application's to validate against the schema it assembles. */
    int rc = crl__config_section_opts(cfg, "train", train_options, &otrain, err);
    if (!rc)
        rc = read_train(t, otrain, err);
    if (!rc)
        rc = crl__config_section_opts(cfg, "collector", crl_collector_options(), &ocoll, err);
    if (!rc)
        rc = crl__trainer_check_collector(ocoll, t->has_remote, &t->init_random, err);
    if (!rc)
        rc = crl_opts_int(ocoll, "frames_per_batch", &t->fpb, err);
    if (!rc)
        rc = crl__config_section_opts(cfg, "distributed", crl_distributed_options(), &odist, err);
    const char *backend = "none";
    int64_t ncoll = 1;
    if (!rc && !(rc = crl_opts_string(odist, "backend", &backend, err)) &&
        !(rc = crl_opts_int(odist, "sync_interval", &t->sync_interval, err)))
        rc = crl_opts_int(ocoll, "num_collectors", &ncoll, err);
    if (!rc)
        rc = crl_opts_bool(ocoll, "sync", &t->sync, err);
    t->nsubs = ncoll;
    if (!rc && !t->has_remote && strcmp(backend, "none"))
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [distributed] backend = %s: this trainer runs its sub-collectors "
                           "in this process; start the run with mpirun -np K crl run (or set backend = none)",
                           crl_opts_origin(odist, "backend"), backend);
    t->copies_mode = t->has_remote || ncoll > 1 || crl_config_has_section(cfg, "distributed");
    crl_error e;
    crl_error_clear(&e);
    if (!rc && t->has_remote)
        t->coll = crl_collector_from_config_remote(host, cfg, "collector", "env", t->remote.collector, t->remote.user,
                                                   &e);
    else if (!rc)
        t->coll = crl_collector_from_config(host, cfg, "collector", "env", t->copies_mode ? copy_policy : collect_policy,
                                            t, &e);
    if (!rc && !t->coll)
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    crl_env *env = t->coll ? crl_collector_env(t->coll, 0) : NULL;
    if (!rc && t->copies_mode && !t->has_remote) {
        t->ncopies = crl_collector_num_envs(t->coll);
        t->copies = g_new0(crl_policy_copy *, t->ncopies);
        for (size_t k = 0; k < t->ncopies && !rc; k++)
            if (!(t->copies[k] = crl_policy_copy_new(host, cfg, env, k, &e)))
                rc = crl_error_pass(err, &e, CRL_E_CONFIG);
        crl_collector_set_batch_fn(t->coll, stamp_batch, t);
    }
    const crl_loss_ops *ops = NULL;
    if (!rc && !(rc = crl_loss_from_config(host, cfg, "loss", crl_env_full_observation_spec(env),
                                           crl_env_full_action_spec(env), t->seed, &ops, &t->loss, err)))
        memcpy(&t->ops, ops, ops->struct_size < sizeof t->ops ? ops->struct_size : sizeof t->ops);
    bool on_policy = (t->ops.flags & CRL_LOSS_ON_POLICY) != 0;
    if (!rc && !on_policy && crl_config_has_section(cfg, "replay") &&
        !(t->rb = crl_replay_from_config(host, cfg, "replay", &e)))
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    if (!rc && !(rc = crl__trainer_check_loss(cfg, crl_config_get(cfg, "loss", "type"), on_policy, t->init_random,
                                              t->seq_len, crl__trainer_run_len(t->fpb, ncoll * crl_env_num(env)),
                                              t->rb, err)) && t->rb) {
        crl_collector_set_replay(t->coll, t->rb);
        warn_replay_size(host, cfg, t->rb, env);
        const char *s = crl_config_get(cfg, "replay", "sampler");
        t->prioritized = s && !strcmp(s, "prioritized");
        t->batch_size = (int64_t)crl_replay_batch_size(t->rb);  /* the buffer owns its default */
    }
    if (!rc && !(rc = crl__config_section_opts(cfg, "optim", optim_options, &ooptim, err)))
        rc = build_optim(t, ooptim, err);
    if (!rc && t->eval_episodes > 0) {
        if (!(t->eval_env = crl_env_from_config(host, cfg, "env", &e)))
            rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    }
    if (!rc)
        rc = keep_raw_rewards(t, err);
    if (!rc && !(t->losses = crl_td_new(0, NULL, &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    t->next_eval = t->eval_interval > 0 ? t->eval_interval : INT64_MAX;
    crl_rng_init(&t->rng, t->seed, 1);
    crl_rng_init(&t->eval_rng, t->seed, 2);
    crl_opts_free(otrain);
    crl_opts_free(ooptim);
    crl_opts_free(ocoll);
    crl_opts_free(odist);
    if (rc) {
        crl_trainer_free(t);
        return NULL;
    }
    return t;
}

crl_trainer *crl_trainer_from_config(crl_host *host, const crl_config *cfg, crl_error *err)
{
    return build(host, cfg, NULL, err);
}

crl_trainer *crl_trainer_from_config_remote(crl_host *host, const crl_config *cfg, const crl_trainer_remote *remote,
                                            crl_error *err)
{
    if (!remote || remote->struct_size < sizeof *remote || !remote->collector || !remote->publish) {
        crl_error_set(err, CRL_E_INVALID, "crl_trainer_from_config_remote: incomplete remote ops");
        return NULL;
    }
    return build(host, cfg, remote, err);
}

/* Sub-collectors whose TensorDicts are here and still between batches when a checkpoint is written: their
 * policy's carried state goes through checkpoints.  Remote ones (mpirun) keep theirs in their processes. */
static size_t carry_subs(const crl_trainer *t)
{
    return t->has_remote || !t->sync || !t->coll ? 0 : crl_collector_num_envs(t->coll);
}

static void carry_clear(crl_trainer *t)
{
    for (size_t k = 0; k < t->n_carry_saved; k++)
        crl_td_unref(t->carry_saved[k]);
    g_free(t->carry_saved);
    t->carry_saved = NULL;
    t->n_carry_saved = 0;
}

/* What the policy carries (found once: it depends on the config only). */
static int carry_template(crl_trainer *t, const crl_td **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    if (!t->carry_tmpl &&
        !(t->carry_tmpl = crl__carry_template(&t->ops, t->loss, crl_collector_env(t->coll, 0), &t->rng, &e)))
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    *out = t->carry_tmpl;
    return CRL_OK;
}

void crl_trainer_free(crl_trainer *t)
{
    if (!t)
        return;
    crl_collector_free(t->coll);
    for (size_t k = 0; k < t->ncopies; k++)
        crl_policy_copy_free(t->copies[k]);
    g_free(t->copies);
    crl_replay_free(t->rb);
    crl_env_free(t->eval_env);
    for (size_t i = 0; i < t->n_optims; i++)
        crl_optim_free(t->optims[i]);
    g_free(t->optims);
    if (t->loss)
        t->ops.destroy(t->loss);
    crl_td_unref(t->losses);
    crl_returns_free(t->returns);
    crl_returns_free(t->raw_returns);
    g_byte_array_free(t->actions, TRUE);
    g_byte_array_free(t->pub_weights, TRUE);
    g_array_free(t->cuts, TRUE);
    carry_clear(t);
    crl_td_unref(t->carry_tmpl);
    g_free(t);
}

const crl_loss_ops *crl_trainer_loss_ops(const crl_trainer *t) { return &t->ops; }
void *crl_trainer_loss_state(const crl_trainer *t) { return t->loss; }
crl_optim *crl_trainer_optim(const crl_trainer *t, size_t i) { return i < t->n_optims ? t->optims[i] : NULL; }
crl_replay *crl_trainer_replay(const crl_trainer *t) { return t->rb; }
crl_collector *crl_trainer_collector(const crl_trainer *t) { return t->coll; }
crl_env *crl_trainer_eval_env(const crl_trainer *t) { return t ? t->eval_env : NULL; }

/* A completed episode's return into the recent-returns ring. */
static void record_return(void *user, double ret)
{
    crl_trainer *t = user;
    t->recent[t->episodes % RECENT] = ret;
    t->episodes++;
}

static void record_raw_return(void *user, double ret)
{
    crl_trainer *t = user;
    t->recent_raw[t->raw_episodes % RECENT] = ret;
    t->raw_episodes++;
}

static void tally(crl_trainer *t, const crl_td *td)
{
    crl_returns_add(t->returns, td, record_return, t);
    if (t->raw_key)
        crl_returns_add_key(t->raw_returns, td, t->raw_key, record_raw_return, t);
}

/* Sum of the loss_* terms the loss wrote. */
static double loss_sum(const crl_td *losses)
{
    double s = 0;
    for (size_t i = 0; i < crl_td_len(losses); i++)
        if (!strncmp(crl_td_key_at(losses, i), "loss", 4) && crl_td_tensor_at(losses, i))
            s += crl_tensor_flat_get(crl_td_tensor_at(losses, i), 0);
    return s;
}

/* One optimizer update on batch: zero, forward, clip, step, target update. */
static int update_on(crl_trainer *t, crl_td *batch, crl_error *err)
{
    for (size_t i = 0; i < t->n_optims; i++)
        crl_optim_zero_grad(t->optims[i]);
    int rc = t->ops.forward(t->loss, batch, t->losses, err);
    if (rc)
        return rc;
    double l = loss_sum(t->losses);
    if (!isfinite(l))
        return crl_error_set(err, CRL_E_RUNTIME, "loss '%s': the loss is not finite (%g)",
                             crl_config_get(t->cfg, "loss", "type"), l);
    for (size_t i = 0; i < t->n_optims; i++) {
        if (t->ops.param_active && !t->ops.param_active(t->loss, i))
            continue;
        if (t->max_grad_norm > 0 && !isfinite(crl_optim_clip_grad_norm(t->optims[i], t->max_grad_norm)))
            return crl_error_set(err, CRL_E_RUNTIME, "loss '%s': a gradient is not finite",
                                 crl_config_get(t->cfg, "loss", "type"));
    }
    /* every check passed before the first step: a failure changes nothing */
    for (size_t i = 0; i < t->n_optims; i++)
        if ((!t->ops.param_active || t->ops.param_active(t->loss, i)) && (rc = crl_optim_step(t->optims[i], err)))
            return rc;
    if (t->ops.update && (rc = t->ops.update(t->loss, err)))
        return rc;
    t->last_loss = l;
    t->optim_steps++;
    return CRL_OK;
}

static int train_off_policy(crl_trainer *t, int64_t frames, crl_error *err)
{
    if (frames < t->init_random || (int64_t)crl_replay_len(t->rb) < t->batch_size)
        return CRL_OK;
    for (int64_t u = 0; u < t->num_updates; u++) {
        crl_error e;
        crl_error_clear(&e);
        crl_td *b = crl_replay_sample(t->rb, 0, &e);
        if (!b)
            return crl_error_pass(err, &e, CRL_E_RUNTIME);
        if (t->seq_len > 0) {
            /* the slice sampler's whole slices, one after another: [slices, sequence_length] */
            int64_t n = crl__td_rows(b), shape[2] = { n / t->seq_len, t->seq_len };
            crl_td *s = crl_td_reshape(b, 2, shape, &e);
            crl_td_unref(b);
            if (!(b = s))
                return crl_error_pass(err, &e, CRL_E_RUNTIME);
        }
        int rc = update_on(t, b, err);
        if (!rc && t->prioritized)
            rc = crl_replay_update_td_priority(t->rb, b, err);
        crl_td_unref(b);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* A [rows] view of every leaf of td (batch dims flattened), contiguous. */
static crl_td *flatten(crl_td *td, int64_t rows, crl_error *err)
{
    char **keys = crl_td_leaf_keys(td, err);
    if (!keys)
        return NULL;
    crl_td *out = crl_td_new(1, &rows, err);
    int nb = crl_td_batch_ndim(td);
    for (size_t i = 0; out && keys[i]; i++) {
        crl_tensor *x = crl_td_get(td, keys[i]);
        int64_t shape[CRL_MAX_DIMS];
        int nd = crl_tensor_ndim(x) - nb + 1;
        shape[0] = rows;
        for (int d = 1; d < nd; d++)
            shape[d] = crl_tensor_shape(x)[nb + d - 1];
        crl_tensor *v = crl_tensor_reshape(x, nd, shape, err), *c = v ? crl_tensor_contiguous(v, err) : NULL;
        if (!c || crl_td_set(out, keys[i], c, err)) {
            crl_td_unref(out);
            out = NULL;
        }
        crl_tensor_unref(v);
        crl_tensor_unref(c);
    }
    crl_free(keys);
    return out;
}

/* Rows idx[0..m) of a flat td, copied. */
/* Rows idx[0..m) of flat; with L > 0, as a [m / L, L] batch (slices of L rows). */
static crl_td *gather(crl_td *flat, const int64_t *idx, int64_t m, int64_t L, crl_error *err)
{
    char **keys = crl_td_leaf_keys(flat, err);
    if (!keys)
        return NULL;
    int lead = L > 0 ? 2 : 1;
    int64_t bshape[2] = { L > 0 ? m / L : m, L };
    crl_td *out = crl_td_new(lead, bshape, err);
    for (size_t i = 0; out && keys[i]; i++) {
        crl_tensor *x = crl_td_get(flat, keys[i]);
        int64_t shape[CRL_MAX_DIMS + 1];
        int nd = crl_tensor_ndim(x) + lead - 1;
        if (nd > CRL_MAX_DIMS) {
            crl_error_set(err, CRL_E_SHAPE, "trainer: key '%s' has too many dims to cut into slices", keys[i]);
            crl_td_unref(out);
            out = NULL;
            break;
        }
        memcpy(shape + lead - 1, crl_tensor_shape(x), sizeof(int64_t) * (size_t)crl_tensor_ndim(x));
        memcpy(shape, bshape, sizeof(int64_t) * (size_t)lead);
        crl_tensor *y = crl_tensor_new(crl_tensor_dtype(x), nd, shape, err);
        if (!y) {
            crl_td_unref(out);
            out = NULL;
            break;
        }
        size_t row = crl_tensor_nbytes(x) / (size_t)crl_tensor_shape(x)[0];
        const char *src = crl_tensor_data(x);
        char *dst = crl_tensor_data(y);
        for (int64_t r = 0; r < m; r++)
            memcpy(dst + (size_t)r * row, src + (size_t)idx[r] * row, row);
        if (crl_td_set(out, keys[i], y, err)) {
            crl_td_unref(out);
            out = NULL;
        }
        crl_tensor_unref(y);
    }
    crl_free(keys);
    return out;
}

/* A [rows, T] view of a [..., T] batch (sync sub-collectors stack theirs into [K, N, T]): value
 * estimators take [T] or [N, T], and rows of one env never mix across the merged dims. */
static crl_td *merge_lead(crl_td *td, crl_error *err)
{
    int nb = crl_td_batch_ndim(td);
    const int64_t *bs = crl_td_batch_shape(td);
    int64_t two[2] = { 1, bs[nb - 1] };
    for (int d = 0; d < nb - 1; d++)
        two[0] *= bs[d];
    char **keys = crl_td_leaf_keys(td, err);
    if (!keys)
        return NULL;
    crl_td *out = crl_td_new(2, two, err);
    for (size_t i = 0; out && keys[i]; i++) {
        crl_tensor *x = crl_td_get(td, keys[i]);
        int64_t shape[CRL_MAX_DIMS];
        int nd = crl_tensor_ndim(x) - nb + 2;
        shape[0] = two[0];
        shape[1] = two[1];
        for (int d = 2; d < nd; d++)
            shape[d] = crl_tensor_shape(x)[nb + d - 2];
        crl_tensor *v = crl_tensor_reshape(x, nd, shape, err);
        if (!v || crl_td_set(out, keys[i], v, err)) {
            crl_td_unref(out);
            out = NULL;
        }
        crl_tensor_unref(v);
    }
    crl_free(keys);
    return out;
}

static int train_on_policy(crl_trainer *t, crl_td *batch, crl_error *err)
{
    if (crl_td_batch_ndim(batch) > 2) {
        crl_error me;
        crl_error_clear(&me);
        crl_td *m = merge_lead(batch, &me);
        if (!m)
            return crl_error_pass(err, &me, CRL_E_NOMEM);
        int rc = train_on_policy(t, m, err);
        crl_td_unref(m);
        return rc;
    }
    int rc = t->ops.prepare(t->loss, batch, err);
    if (rc)
        return rc;
    int64_t rows = 1;
    for (int d = 0; d < crl_td_batch_ndim(batch); d++)
        rows *= crl_td_batch_shape(batch)[d];
    /* Slices: each env's T steps cut into T / L slices of L in order (rows n*T + t), drawn whole.  A batch
     * whose T the length does not divide (the last, cut at total_frames) takes the largest one that does. */
    int64_t L = t->seq_len > 0 ? t->seq_len : 1, T = crl_td_batch_shape(batch)[crl_td_batch_ndim(batch) - 1];
    if (t->seq_len > 0 && crl_td_batch_ndim(batch) != 2)
        return crl_error_set(err, CRL_E_SHAPE, "[train] sequence_length: the batch has %d batch dims, not [envs, "
                             "steps]", crl_td_batch_ndim(batch));
    while (T % L)
        L--;
    crl_error le;
    crl_error_clear(&le);
    crl_td *flat = flatten(batch, rows, &le);
    if (!flat)
        return crl_error_pass(err, &le, CRL_E_NOMEM);
    int64_t units = rows / L, per = t->minibatch / L > 0 ? t->minibatch / L : 1;
    int64_t *perm = g_new(int64_t, units), *idx = g_new(int64_t, per * L);
    for (int64_t e = 0; e < t->epochs && !rc; e++) {
        for (int64_t i = 0; i < units; i++)
            perm[i] = i;
        for (int64_t i = units - 1; i > 0; i--) {  /* Fisher-Yates */
            int64_t j = (int64_t)crl_rng_below(&t->rng, (uint64_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        for (int64_t s = 0; s < units && !rc; s += per) {
            int64_t m = units - s < per ? units - s : per;
            for (int64_t u = 0; u < m; u++)
                for (int64_t k = 0; k < L; k++)
                    idx[u * L + k] = perm[s + u] * L + k;
            crl_td *mb = gather(flat, idx, m * L, t->seq_len > 0 ? L : 0, &le);
            rc = mb ? update_on(t, mb, err) : crl_error_pass(err, &le, CRL_E_NOMEM);
            crl_td_unref(mb);
        }
    }
    g_free(perm);
    g_free(idx);
    crl_td_unref(flat);
    return rc;
}

/* The evaluation env normalises with the training env's statistics as they stand, frozen (TorchRL's
 * VecNorm frozen_copy, ObservationNorm's loc and scale): its own VecNorm would start from nothing and
 * learn from the evaluation episodes, its ObservationNorm measure another rollout.  With several
 * sub-collectors, those of the first one's env.  A remote trainer has no training env here. */
static int sync_eval_stats(crl_trainer *t, crl_error *err)
{
    crl_env *train = t->has_remote || !t->coll ? NULL : crl_collector_env(t->coll, 0);
    if (!train || !crl_env_transform_count(t->eval_env))
        return CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    crl_td *st = crl_env_transforms_state(train, &e);
    if (!st)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_env_load_transforms_state(t->eval_env, st, true, err);
    crl_td_unref(st);
    return rc;
}

int crl_trainer_evaluate_ex(crl_trainer *t, int64_t episodes, crl_eval_result *out, crl_error *err)
{
    if (!t || !out || out->struct_size < sizeof *out)
        return crl_error_set(err, CRL_E_INVALID, "crl_trainer_evaluate_ex: %s", !t ? "the trainer is NULL"
                             : !out ? "the result is NULL" : "struct_size is smaller than crl_eval_result");
    out->episodes = 0;
    out->returns = out->raw_returns = NULL;
    out->mean = out->std = out->raw_mean = out->raw_std = NAN;
    if (!t->eval_env)
        return crl_error_set(err, CRL_E_INVALID, "no evaluation env: set [train] eval_episodes > 0");
    if (episodes < 1)
        return crl_error_set(err, CRL_E_INVALID, "evaluation: %lld episodes; ask for at least 1", (long long)episodes);
    int rc = sync_eval_stats(t, err);
    if (rc)
        return crl_error_prefix(err, "evaluation: "), rc;
    /* Each evaluation seeds its env from the frame count: evaluations are
     * reproducible and independent of those before (resumed runs included). */
    return crl__eval_episodes(t->eval_env, eval_policy, t, t->eval_max_steps, crl__eval_seed(t->seed, t->frames),
                              episodes, t->raw_key != NULL, &t->eval_hook, t->frames, out, err);
}

int crl_trainer_set_eval_hook(crl_trainer *t, const crl_eval_hook *hook, crl_error *err)
{
    if (!t)
        return crl_error_set(err, CRL_E_INVALID, "crl_trainer_set_eval_hook: the trainer is NULL");
    return crl__eval_hook_set(&t->eval_hook, hook, err);
}

int crl_trainer_evaluate(crl_trainer *t, int64_t episodes, double *mean_return, crl_error *err)
{
    crl_eval_result res = { sizeof res, 0, NULL, NULL, NAN, NAN, NAN, NAN };
    int rc = crl_trainer_evaluate_ex(t, episodes, &res, err);
    if (!rc && mean_return)
        *mean_return = res.mean;
    crl_free(res.returns);
    crl_free(res.raw_returns);
    return rc;
}

/* One evaluation of the run loop into s. */
static int run_eval(crl_trainer *t, crl_train_stats *s, crl_error *err)
{
    crl_eval_result res = { sizeof res, 0, NULL, NULL, NAN, NAN, NAN, NAN };
    int rc = crl_trainer_evaluate_ex(t, t->eval_episodes, &res, err);
    if (!rc) {
        s->eval_return = res.mean;
        s->eval_raw_return = res.raw_mean;
        s->evaluated = true;
    }
    crl_free(res.returns);
    crl_free(res.raw_returns);
    return rc;
}

static void fill_stats(crl_trainer *t, crl_train_stats *s, gint64 t0)
{
    s->frames = t->frames;
    s->batches = t->batches;
    s->optim_steps = t->optim_steps;
    s->episodes = t->episodes;
    if (t->episodes) {
        int64_t k = t->episodes < RECENT ? t->episodes : RECENT;
        double sum = 0;
        for (int64_t i = 0; i < k; i++)
            sum += t->recent[i];
        s->recent_return = sum / (double)k;
    }
    if (t->raw_episodes) {
        int64_t k = t->raw_episodes < RECENT ? t->raw_episodes : RECENT;
        double sum = 0;
        for (int64_t i = 0; i < k; i++)
            sum += t->recent_raw[i];
        s->recent_raw_return = sum / (double)k;
    }
    s->loss = t->last_loss;
    s->seconds = (double)(g_get_monotonic_time() - t0) / 1e6;
    s->fps = s->seconds > 0 ? (double)t->frames / s->seconds : 0;
}

int crl_trainer_run(crl_trainer *t, crl_train_progress_fn progress, void *user, crl_error *err)
{
    gint64 t0 = g_get_monotonic_time();
    crl_train_stats s = { sizeof s, 0, 0, 0, 0, NAN, NAN, 0, 0, NAN, false, false, NAN, NAN };
    crl_td *batch;
    int rc = CRL_OK;
    /* NULL from the collector is its end or its error: only its own code tells which */
    crl_error ce;
    crl_error_clear(&ce);
    for (;;) {
        if (t->copies_mode && (rc = publish_policy(t, err)))
            break;
        if (!(batch = crl_collector_next(t->coll, &ce)))
            break;
        int64_t frames = crl_collector_frames(t->coll);
        if (t->ops.explore_step)
            t->ops.explore_step(t->loss, frames - t->frames);
        if (frames - t->frames < t->fpb)
            g_array_append_val(t->cuts, frames);
        t->frames = frames;
        t->batches++;
        tally(t, batch);
        rc = (t->ops.flags & CRL_LOSS_ON_POLICY) ? train_on_policy(t, batch, err)
                                                 : train_off_policy(t, frames, err);
        crl_td_unref(batch);
        if (rc) {
            crl_error_prefix(err, "frame %lld: ", (long long)frames);
            break;
        }
        fill_stats(t, &s, t0);
        s.evaluated = false;
        if (frames >= t->next_eval && t->eval_episodes > 0) {
            if ((rc = run_eval(t, &s, err)))
                break;
            while (t->next_eval <= frames)
                t->next_eval += t->eval_interval;
        }
        bool stop = t->has_stop && s.evaluated && (t->stop_raw ? s.eval_raw_return : s.eval_return) >= t->stop_return;
        if (progress && (rc = progress(user, t, &s, err)))
            break;
        if (stop)
            break;
    }
    if (!rc && ce.code)
        rc = crl_error_pass(err, &ce, CRL_E_RUNTIME);
    if (!rc) {
        if (!s.evaluated && t->eval_episodes > 0) {
            fill_stats(t, &s, t0);
            if ((rc = run_eval(t, &s, err)))
                return rc;
        }
        s.done = true;
        s.seconds = (double)(g_get_monotonic_time() - t0) / 1e6;
        if (progress)
            rc = progress(user, t, &s, err);
    }
    return rc;
}

int64_t crl_trainer_frames(const crl_trainer *t) { return t->frames; }

/* A trainer checkpoint: kind "crl.train" version 1, every number little-endian.
 *   "trainer/counters"  6 f64: optimizer steps, frames, batches, the frame of the next evaluation, the
 *                       last loss, the bytes of "trainer/actions".  The counts are whole numbers in
 *                       [0, 2^53] (the next evaluation up to 2^63, which is never); the last loss is any
 *                       double (NaN: none yet)
 *   "trainer/rng"       the exploration stream (crl_ckpt_put_rng: 12 u32)
 *   "trainer/actions"   every action the policy took, in order, elements of the env's action dtype
 *   "trainer/cuts"      f64 each: the frame counts, increasing, in (0, frames], at which a batch shorter
 *                       than frames_per_batch ended (total_frames cut it); absent from older files: none
 *   "trainer/transforms/..."  crl_ckpt_write_td of crl_env_transforms_state of the training env (VecNorm's
 *                       sums, ObservationNorm's loc and scale, keyed by chain index); absent when no
 *                       transform learns anything (and from older files)
 *   "trainer/carried/<k>/..."  crl_ckpt_write_td of the state the policy carries between steps (what its
 *                       act writes under "next": recurrent_state_h/_c, recurrent_state) as it stands in
 *                       sub-collector k's TensorDict, for every local sub-collector that collected;
 *                       absent for a policy that carries nothing, under mpirun, and from older files (a
 *                       resume of a recurrent policy then recomputes it, not bitwise, and says so)
 *   "optim/<i>/..."     crl_optim_save of parameter vector i;  "loss/...": the loss's own save */
#define TRAIN_KIND "crl.train"
#define N_COUNTERS 6
enum { C_OPTIM_STEPS, C_FRAMES, C_BATCHES, C_NEXT_EVAL, C_LAST_LOSS, C_ACTION_BYTES };
static const char *const counter_names[N_COUNTERS] = { "optimizer steps", "frames", "batches",
                                                       "next evaluation", "last loss", "action bytes" };

/* Bytes per element of the recorded actions (the env's "action" leaf), 0 when the spec names no dtype. */
static size_t action_elem_size(const crl_trainer *t)
{
    const crl_spec *s = crl_env_full_action_spec(crl_collector_env(t->coll, 0));
    if (s && crl_spec_get_kind(s) == CRL_SPEC_COMPOSITE)
        s = crl_spec_composite_get(s, "action");
    crl_dtype dt = s ? crl_spec_dtype(s) : CRL_DTYPE_COUNT;
    return (unsigned)dt < CRL_DTYPE_COUNT ? crl_dtype_size(dt) : 0;
}

/* Sub-collector k's policy copy as a checkpoint keeps it. */
static int copy_state(crl_trainer *t, size_t k, crl_policy_copy_state *st, crl_error *err)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    if (t->has_remote)
        return t->remote.struct_size >= offsetof(crl_trainer_remote, copy_state) + sizeof t->remote.copy_state &&
                       t->remote.copy_state
                   ? t->remote.copy_state(t->remote.user, k, st, err)
                   : crl_error_set(err, CRL_E_UNSUPPORTED, "checkpoint: the remote sub-collectors give no state");
    if (crl_policy_copy_get_state(t->copies[k], st))
        return crl_error_set(err, CRL_E_INVALID, "checkpoint: sub-collector %zu has no policy copy", k);
    return CRL_OK;
}

/* Weights (crl_trainer_weights' layout: the loss's parameter vectors in order) to or from little-endian,
 * each vector by its own element size. */
static void weights_le_copy(const crl_trainer *t, uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < t->ops.num_params(t->loss) && off < n; i++) {
        const char *name;
        crl_tensor *p = NULL, *g = NULL;
        if (t->ops.param(t->loss, i, &name, &p, &g, NULL) || !p)
            break;
        size_t m = crl_tensor_nbytes(p), es = crl_dtype_size(crl_tensor_dtype(p));
        m = m < n - off ? m : n - off;
        crl__ckpt_le_copy(dst + off, src + off, es ? es : 1, m / (es ? es : 1));
        off += m;
    }
    if (off < n)
        memcpy(dst + off, src + off, n - off);
}

/* The copies' sections (runs with num_collectors > 1 or [distributed]):
 *   "copies/counters"   4 f64: sub-collectors, the version (optimizer steps) of the last sync's weights,
 *                       1 when a sync happened (else 0), the bytes of "copies/weights"
 *   "copies/weights"    the weights of the last sync (crl_trainer_weights' layout, each parameter
 *                       vector's elements little-endian)
 *   "copies/<k>/state"  3 f64: sub-collector k's copy's version, exploration frames, action bytes
 *   "copies/<k>/rng"    its exploration stream;  "copies/<k>/actions": every action it took, in order */
static int save_copies(crl_trainer *t, crl_ckpt_writer *w, crl_error *err)
{
    size_t esize = action_elem_size(t);
    esize = esize ? esize : 1;
    uint8_t c[32], r[CRL_CKPT_RNG_BYTES];
    crl_ckpt_put_f64(c, (double)t->nsubs);
    crl_ckpt_put_f64(c + 8, (double)t->synced_steps);
    crl_ckpt_put_f64(c + 16, t->published ? 1.0 : 0.0);
    crl_ckpt_put_f64(c + 24, (double)t->pub_weights->len);
    int rc = crl_ckpt_write(w, "copies/counters", c, sizeof c, err);
    uint8_t *wle = g_try_malloc(t->pub_weights->len ? t->pub_weights->len : 1);
    if (!wle)
        return crl_error_set(err, CRL_E_NOMEM, "checkpoint: no memory for %u weight bytes", t->pub_weights->len);
    weights_le_copy(t, wle, t->pub_weights->data, t->pub_weights->len);
    if (!rc)
        rc = crl_ckpt_write(w, "copies/weights", wle, t->pub_weights->len, err);
    g_free(wle);
    for (size_t k = 0; k < (size_t)t->nsubs && !rc; k++) {
        crl_policy_copy_state st;
        if ((rc = copy_state(t, k, &st, err)))
            break;
        char name[64];
        crl_ckpt_put_f64(c, (double)st.version);
        crl_ckpt_put_f64(c + 8, (double)st.explore_frames);
        crl_ckpt_put_f64(c + 16, (double)st.actions_len);
        crl_ckpt_put_rng(r, &st.rng);
        uint8_t *le = g_try_malloc(st.actions_len ? st.actions_len : 1);
        if (!le)
            return crl_error_set(err, CRL_E_NOMEM, "checkpoint: no memory for %zu action bytes", st.actions_len);
        crl__ckpt_le_copy(le, st.actions, esize, st.actions_len / esize);
        snprintf(name, sizeof name, "copies/%zu/state", k);
        rc = crl_ckpt_write(w, name, c, 24, err);
        snprintf(name, sizeof name, "copies/%zu/rng", k);
        if (!rc)
            rc = crl_ckpt_write(w, name, r, sizeof r, err);
        snprintf(name, sizeof name, "copies/%zu/actions", k);
        if (!rc)
            rc = crl_ckpt_write(w, name, le, st.actions_len, err);
        g_free(le);
    }
    return rc;
}

/* "trainer/transforms": the statistics of the training env's transforms (crl_env_transforms_state of the
 * first sub-collector's env), for a policy loaded from the checkpoint to normalise as the run evaluated.
 * Absent when they learn nothing, or the envs run elsewhere.  A resume rebuilds them by collecting. */
static int save_transform_stats(crl_trainer *t, crl_ckpt_writer *w, crl_error *err)
{
    crl_env *env = t->has_remote || !t->coll ? NULL : crl_collector_env(t->coll, 0);
    if (!env || !crl_env_transform_count(env))
        return CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    crl_td *st = crl_env_transforms_state(env, &e);
    if (!st)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_td_len(st) ? crl_ckpt_write_td(w, "trainer/transforms", st, err) : CRL_OK;
    crl_td_unref(st);
    return rc;
}

/* "trainer/carried/<k>": each local sub-collector's carried state, between batches. */
static int save_carried(crl_trainer *t, crl_ckpt_writer *w, crl_error *err)
{
    int rc = CRL_OK;
    for (size_t k = 0; k < carry_subs(t) && !rc; k++) {
        const crl_td *cur = crl__collector_current(t->coll, k), *tmpl = NULL;
        /* nothing for a policy that carries nothing: its checkpoints stay those of an mpirun run */
        if (cur && !(rc = carry_template(t, &tmpl, err)) && crl_td_len(tmpl))
            rc = crl__carry_save(w, k, cur, tmpl, err);
    }
    return rc;
}

int crl_trainer_save(crl_trainer *t, const char *path, crl_error *err)
{
    size_t esize = action_elem_size(t), alen = t->actions->len;
    bool swap = !crl_ckpt_host_is_le() && esize != 1 && alen;
    if (swap && esize == 0)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: the env's action spec has no 'action' dtype, so the "
                             "recorded actions cannot be written little-endian", path);
    uint8_t *actions = swap ? g_try_malloc(alen) : NULL;
    if (swap && !actions)
        return crl_error_set(err, CRL_E_NOMEM, "%s: no memory for the %zu action bytes", path, alen);
    if (swap)
        crl_ckpt_byteswap_copy(actions, t->actions->data, esize, alen / esize);
    const double counters[N_COUNTERS] = { (double)t->optim_steps, (double)t->frames, (double)t->batches,
                                          (double)t->next_eval, t->last_loss, (double)alen };
    uint8_t cbytes[8 * N_COUNTERS], rbytes[CRL_CKPT_RNG_BYTES];
    for (int i = 0; i < N_COUNTERS; i++)
        crl_ckpt_put_f64(cbytes + 8 * i, counters[i]);
    crl_ckpt_put_rng(rbytes, &t->rng);
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, TRAIN_KIND, 1, &e);
    if (!w) {
        g_free(actions);
        return crl_error_pass(err, &e, CRL_E_IO);
    }
    int rc = t->ops.save(t->loss, w, "loss", err);
    for (size_t i = 0; i < t->n_optims && !rc; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "optim/%zu", i);
        rc = crl_optim_save(t->optims[i], w, prefix, err);
    }
    uint8_t *cuts = g_malloc(8 * (size_t)t->cuts->len + 1);
    for (guint i = 0; i < t->cuts->len; i++)
        crl_ckpt_put_f64(cuts + 8 * i, (double)g_array_index(t->cuts, int64_t, i));
    if (!rc && !(rc = crl_ckpt_write(w, "trainer/counters", cbytes, sizeof cbytes, err)) &&
        !(rc = crl_ckpt_write(w, "trainer/rng", rbytes, sizeof rbytes, err)) &&
        !(rc = crl_ckpt_write(w, "trainer/actions", actions ? actions : t->actions->data, alen, err)))
        rc = crl_ckpt_write(w, "trainer/cuts", cuts, 8 * (size_t)t->cuts->len, err);
    g_free(cuts);
    if (!rc && t->copies_mode)
        rc = save_copies(t, w, err);
    if (!rc)
        rc = save_transform_stats(t, w, err);
    if (!rc)
        rc = save_carried(t, w, err);
    g_free(actions);
    if (rc) {
        crl_ckpt_writer_abort(w);
        return rc;
    }
    return crl_ckpt_writer_close(w, err);
}

/* The sections "trainer/..." read and checked; nothing of the trainer changes. */
typedef struct train_state {
    double c[N_COUNTERS];
    int64_t optim_steps, frames, batches, next_eval;
    crl_rng rng;
    const uint8_t *actions;
    size_t alen;
    const uint8_t *cuts;  /* ncuts f64 */
    size_t ncuts;
} train_state;

static int bad_section(const crl_ckpt_reader *r, const char *sec, size_t at, crl_error *err, const char *fmt, ...)
    CRL_PRINTF(5, 6);
static int bad_section(const crl_ckpt_reader *r, const char *sec, size_t at, crl_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": section '%s': %s", crl_ckpt_path(r),
                  crl__ckpt_section_offset(r, sec) + at, sec, what);
    g_free(what);
    return CRL_E_CORRUPT;
}

static int read_train_state(const crl_trainer *t, const crl_ckpt_reader *r, train_state *ts, crl_error *err)
{
    const char *sec = "trainer/counters";
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    const uint8_t *p = crl_ckpt_section(r, sec, &len, &e);
    if (!p)
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (len != 8 * N_COUNTERS)
        return bad_section(r, sec, 0, err, "%zu bytes; a trainer checkpoint has %d counters of 8", len, N_COUNTERS);
    for (int i = 0; i < N_COUNTERS; i++) {
        double v = ts->c[i] = crl_ckpt_get_f64(p + 8 * i);
        /* The next evaluation may be as far as [train] eval_interval allows, and 2^63 is how INT64_MAX, "no
         * evaluation", reads as a double. */
        double max = i == C_NEXT_EVAL ? 0x1p63 : 0x1p53;
        if (i != C_LAST_LOSS && !(v >= 0 && v <= max && v == floor(v)))
            return bad_section(r, sec, 8 * (size_t)i, err, "%s = %g is not a whole number in [0, 2^%d]",
                               counter_names[i], v, i == C_NEXT_EVAL ? 63 : 53);
    }
    ts->optim_steps = (int64_t)ts->c[C_OPTIM_STEPS];
    ts->frames = (int64_t)ts->c[C_FRAMES];
    ts->batches = (int64_t)ts->c[C_BATCHES];
    ts->next_eval = ts->c[C_NEXT_EVAL] == 0x1p63 ? INT64_MAX : (int64_t)ts->c[C_NEXT_EVAL];
    if (ts->batches > ts->frames)
        return bad_section(r, sec, 8 * C_BATCHES, err, "%" PRId64 " batches of %" PRId64 " frames: a batch has "
                           "a frame at least", ts->batches, ts->frames);
    sec = "trainer/rng";
    if (!(p = crl_ckpt_section(r, sec, &len, &e)))
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (len != CRL_CKPT_RNG_BYTES)
        return bad_section(r, sec, 0, err, "%zu bytes; a random stream has %d", len, CRL_CKPT_RNG_BYTES);
    if (!crl_ckpt_get_rng(p, &ts->rng))
        return bad_section(r, sec, 40, err, "word index %" PRIu32 " or reserved word %" PRIu32 " is no stream's "
                           "(index 0..4, reserved 0)", crl_ckpt_get_u32(p + 40), crl_ckpt_get_u32(p + 44));
    sec = "trainer/actions";
    if (!(ts->actions = crl_ckpt_section(r, sec, &ts->alen, &e)))
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    size_t esize = action_elem_size(t);
    if ((double)ts->alen != ts->c[C_ACTION_BYTES])
        return bad_section(r, sec, 0, err, "%zu bytes, but section 'trainer/counters' says %.0f", ts->alen,
                           ts->c[C_ACTION_BYTES]);
    if (esize && ts->alen % esize)
        return bad_section(r, sec, 0, err, "%zu bytes is no whole number of the env's %zu-byte actions", ts->alen,
                           esize);
    if (ts->alen > G_MAXUINT)
        return bad_section(r, sec, 0, err, "%zu bytes; a trainer records at most %u", ts->alen, G_MAXUINT);
    sec = "trainer/cuts";
    ts->cuts = NULL;
    ts->ncuts = 0;
    if (!crl_ckpt_has(r, sec))
        return CRL_OK;
    if (!(ts->cuts = crl_ckpt_section(r, sec, &len, &e)))
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (len % 8)
        return bad_section(r, sec, 0, err, "%zu bytes is no whole number of 8-byte frame counts", len);
    ts->ncuts = len / 8;
    double prev = 0;
    for (size_t i = 0; i < ts->ncuts; i++) {
        double v = crl_ckpt_get_f64(ts->cuts + 8 * i);
        if (!(v > prev && v <= (double)ts->frames && v == floor(v)))
            return bad_section(r, sec, 8 * i, err, "frame count %g is not a whole number above the one before "
                               "(%g) and at most the %" PRId64 " frames", v, prev, ts->frames);
        prev = v;
    }
    return CRL_OK;
}

/* The carried states of a checkpoint of `frames` frames, read and checked: *out NULL when it has none
 * (*absent: it should have, being written before crl kept them), else one per local sub-collector. */
static int read_carried(crl_trainer *t, const crl_ckpt_reader *r, int64_t frames, crl_td ***out, bool *absent,
                        crl_error *err)
{
    size_t n = carry_subs(t), have = 0, missing = 0;
    *out = NULL;
    *absent = false;
    for (size_t k = n; k-- > 0;) {
        if (crl__carry_has(r, k))
            have++;
        else
            missing = k;
    }
    if (!n || !frames)
        return CRL_OK;
    if (!have) {
        *absent = true;
        return CRL_OK;
    }
    if (have < n)
        return crl_error_set(err, CRL_E_CORRUPT, "%s: no section '" CRL__CARRY_PREFIX "/%zu/td': the checkpoint "
                             "keeps the policy's carried state for %zu of its %zu sub-collectors", crl_ckpt_path(r),
                             missing, have, n);
    const crl_td *tmpl;
    int rc = carry_template(t, &tmpl, err);
    if (rc)
        return rc;
    crl_td **saved = g_new0(crl_td *, n);
    for (size_t k = 0; k < n && !rc; k++) {
        crl_error e;
        crl_error_clear(&e);
        if (!(saved[k] = crl__carry_read(r, k, tmpl, &e)))
            rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
    }
    if (rc) {
        for (size_t k = 0; k < n; k++)
            crl_td_unref(saved[k]);
        g_free(saved);
        return rc;
    }
    *out = saved;
    return CRL_OK;
}

/* Resume: the checkpoint's carried states into the trainer, to be put back after re-collecting (after
 * read_copies checked the number of sub-collectors). */
static int load_carried(crl_trainer *t, const char *path, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, TRAIN_KIND, 1, &e);
    if (!r)
        return crl_error_pass(err, &e, CRL_E_IO);
    crl_td **saved = NULL;
    bool absent = false;
    int rc = read_carried(t, r, t->frames, &saved, &absent, err);
    crl_ckpt_reader_free(r);
    carry_clear(t);
    t->carry_saved = saved;
    t->n_carry_saved = saved ? carry_subs(t) : 0;
    t->carry_absent = absent;
    return rc;
}

/* Load the loss, the optimizers and the counters; with `actions`, also the
 * recorded actions.  The trainer's sections and every optimizer's are
 * checked first and the loss validates before it changes anything, so a
 * bad file changes nothing. */
static int load_file(crl_trainer *t, const char *path, bool actions, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, TRAIN_KIND, 1, &e);
    if (!r)
        return crl_error_pass(err, &e, CRL_E_IO);
    train_state ts;
    int rc = read_train_state(t, r, &ts, err);
    for (size_t i = 0; i < t->n_optims && !rc; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "optim/%zu", i);
        rc = crl__optim_check_load(t->optims[i], r, prefix, err);
    }
    if (!rc)
        rc = t->ops.load(t->loss, r, "loss", err);
    if (!rc) {
        for (size_t i = 0; i < t->n_optims; i++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "optim/%zu", i);
            crl__optim_apply_load(t->optims[i], r, prefix);
        }
        t->optim_steps = ts.optim_steps;
        t->last_loss = ts.c[C_LAST_LOSS];
        t->rng = ts.rng;
        if (actions) {
            t->frames = ts.frames;
            t->batches = ts.batches;
            t->next_eval = ts.next_eval;
            size_t esize = action_elem_size(t);
            esize = esize ? esize : 1;
            g_byte_array_set_size(t->actions, (guint)ts.alen);
            crl__ckpt_le_copy(t->actions->data, ts.actions, esize, ts.alen / esize);
            g_array_set_size(t->cuts, 0);
            for (size_t i = 0; i < ts.ncuts; i++) {
                int64_t cut = (int64_t)crl_ckpt_get_f64(ts.cuts + 8 * i);
                g_array_append_val(t->cuts, cut);
            }
        }
    }
    crl_ckpt_reader_free(r);
    return rc;
}

int crl_trainer_load(crl_trainer *t, const char *path, crl_error *err)
{
    return load_file(t, path, false, err);
}

/* The settings of the trainer's config, as files and overrides gave them (no defaults), as INI text. */
static char *settings_text(const crl_config *cfg)
{
    char *ini = crl_config_to_ini(cfg);
    char *s = g_strconcat("; the settings of the run that wrote this checkpoint (files and overrides, no defaults): "
                          "crl run --resume compares them with its own and reloads them\n\n", ini, NULL);
    crl_free(ini);
    return s;
}

int crl_trainer_checkpoint(crl_trainer *t, const char *dir, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    char *tmp = crl_ckpt_dir_begin(dir, &e);
    if (!tmp)
        return crl_error_pass(err, &e, CRL_E_IO);
    char *model = g_build_filename(tmp, "trainer.ckpt", NULL);
    int rc = crl_trainer_save(t, model, err);
    g_free(model);
    if (!rc) {
        char *path = g_build_filename(tmp, CRL_TRAINER_SETTINGS_FILE, NULL), *text = settings_text(t->cfg);
        GError *ge = NULL;
        if (!g_file_set_contents(path, text, -1, &ge)) {
            rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", path, ge->message);
            g_error_free(ge);
        }
        g_free(path);
        g_free(text);
    }
    if (!rc && t->rb && t->rb->checkpoint) {
        char *rdir = g_build_filename(tmp, "replay", NULL);
        rc = crl_replay_dump(t->rb, rdir, err);
        g_free(rdir);
    }
    if (!rc)
        rc = crl_ckpt_dir_commit(tmp, dir, err);
    else
        crl_ckpt_dir_abort(tmp);
    crl_free(tmp);
    if (rc)
        crl_error_prefix(err, "checkpoint '%s': ", dir);
    return rc;
}

/* The copies' sections of a checkpoint, read and checked. */
typedef struct copies_ckpt {
    int64_t synced_steps;
    bool published;
    GByteArray *weights;
    crl_policy_copy_state *st;  /* nsubs; actions point into actions[k] */
    GByteArray **actions;
} copies_ckpt;

static void copies_ckpt_clear(copies_ckpt *cc, size_t n)
{
    if (cc->weights)
        g_byte_array_free(cc->weights, TRUE);
    for (size_t k = 0; cc->actions && k < n; k++)
        if (cc->actions[k])
            g_byte_array_free(cc->actions[k], TRUE);
    g_free(cc->actions);
    g_free(cc->st);
    memset(cc, 0, sizeof *cc);
}

static bool whole(double v) { return v >= 0 && v <= 0x1p53 && v == floor(v); }

static int read_copies(crl_trainer *t, const char *path, copies_ckpt *cc, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, TRAIN_KIND, 1, &e);
    if (!r)
        return crl_error_pass(err, &e, CRL_E_IO);
    size_t n = (size_t)t->nsubs, len = 0, esize = action_elem_size(t);
    esize = esize ? esize : 1;
    cc->st = g_new0(crl_policy_copy_state, n);
    cc->actions = g_new0(GByteArray *, n);
    cc->weights = g_byte_array_new();
    int rc = CRL_OK;
    const char *sec = "copies/counters";
    const uint8_t *p = NULL;
    if (!crl_ckpt_has(r, sec)) {
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: no section '%s': the checkpointed run had one sub-collector "
                           "acting with the learner's policy; resume it with [collector] num_collectors = 1 and no "
                           "[distributed] section", path, sec);
        goto out;
    }
    if (!(p = crl_ckpt_section(r, sec, &len, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        goto out;
    }
    double v[4];
    for (int i = 0; i < 4 && len == 32; i++)
        v[i] = crl_ckpt_get_f64(p + 8 * i);
    if (len != 32 || !whole(v[0]) || !whole(v[1]) || (v[2] != 0 && v[2] != 1) || !whole(v[3])) {
        rc = bad_section(r, sec, 0, err, "not 4 whole numbers (sub-collectors, version, synced 0/1, bytes)");
        goto out;
    }
    if ((int64_t)v[0] != t->nsubs) {
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: the checkpointed run had %.0f sub-collectors, this one has %lld: "
                           "keep [collector] num_collectors (under mpirun, the collector ranks) as it was", path, v[0],
                           (long long)t->nsubs);
        goto out;
    }
    cc->synced_steps = (int64_t)v[1];
    cc->published = v[2] == 1;
    sec = "copies/weights";
    if (!(p = crl_ckpt_section(r, sec, &len, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        goto out;
    }
    if ((double)len != v[3] || (cc->published && len != crl_trainer_weights_size(t))) {
        rc = bad_section(r, sec, 0, err, "%zu bytes; the counters say %.0f, the loss's weights are %zu", len, v[3],
                         crl_trainer_weights_size(t));
        goto out;
    }
    g_byte_array_set_size(cc->weights, (guint)len);
    weights_le_copy(t, cc->weights->data, p, len);
    for (size_t k = 0; k < n; k++) {
        char name[64];
        crl_policy_copy_state *st = &cc->st[k];
        st->struct_size = sizeof *st;
        snprintf(name, sizeof name, "copies/%zu/state", k);
        if (!(p = crl_ckpt_section(r, name, &len, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
            goto out;
        }
        double s[3];
        for (int i = 0; i < 3 && len == 24; i++)
            s[i] = crl_ckpt_get_f64(p + 8 * i);
        if (len != 24 || !whole(s[0]) || !whole(s[1]) || !whole(s[2]) || s[2] > G_MAXUINT) {
            rc = bad_section(r, name, 0, err, "not 3 whole numbers (version, exploration frames, action bytes)");
            goto out;
        }
        st->version = (int64_t)s[0];
        st->explore_frames = (int64_t)s[1];
        snprintf(name, sizeof name, "copies/%zu/rng", k);
        if (!(p = crl_ckpt_section(r, name, &len, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
            goto out;
        }
        if (len != CRL_CKPT_RNG_BYTES || !crl_ckpt_get_rng(p, &st->rng)) {
            rc = bad_section(r, name, 0, err, "no random stream (%zu bytes)", len);
            goto out;
        }
        snprintf(name, sizeof name, "copies/%zu/actions", k);
        if (!(p = crl_ckpt_section(r, name, &len, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
            goto out;
        }
        if ((double)len != s[2] || len % esize) {
            rc = bad_section(r, name, 0, err, "%zu bytes; its state says %.0f of the env's %zu-byte actions", len,
                             s[2], esize);
            goto out;
        }
        cc->actions[k] = g_byte_array_sized_new((guint)len);
        g_byte_array_set_size(cc->actions[k], (guint)len);
        crl__ckpt_le_copy(cc->actions[k]->data, p, esize, len / esize);
        st->actions = cc->actions[k]->data;
        st->actions_len = len;
    }
out:
    crl_ckpt_reader_free(r);
    return rc;
}

/* After re-collecting: each sub-collector's TensorDict takes the carried state of the checkpoint, or a
 * warning says it was recomputed. */
static int restore_carried(crl_trainer *t, const char *dir, crl_error *err)
{
    int rc = CRL_OK;
    for (size_t k = 0; k < t->n_carry_saved && !rc; k++) {
        crl_td *cur = crl__collector_current(t->coll, k);
        rc = cur ? crl__carry_restore(cur, t->carry_saved[k], k, err)
                 : crl_error_set(err, CRL_E_INVALID, "sub-collector %zu re-collected nothing to take its carried "
                                 "state", k);
    }
    carry_clear(t);
    bool unkept = t->carry_absent || (t->has_remote && t->frames > 0);
    const crl_td *tmpl = NULL;
    if (rc || !unkept || (rc = carry_template(t, &tmpl, err)) || !crl_td_len(tmpl))
        return rc;
    char *names = crl__carry_names(tmpl);
    crl_host_log(t->host, CRL_LOG_WARNING, "resume from '%s': %s, so re-collecting recomputed the state the policy "
                 "carries (%s) with the checkpoint's parameters instead of those each step was taken with: the run "
                 "goes on close to the uninterrupted one, not bitwise", dir,
                 t->has_remote ? "the collector ranks' carried state is not checkpointed under mpirun"
                               : "the checkpoint keeps no carried state (an older crl wrote it)", names);
    g_free(names);
    return CRL_OK;
}

/* Resume, the copies' side: hand each sub-collector its actions to replay (done = false), or its state
 * and the last sync's weights after re-collecting (done = true). */
static int resume_copies(crl_trainer *t, copies_ckpt *cc, bool done, crl_error *err)
{
    int rc = CRL_OK;
    for (size_t k = 0; k < (size_t)t->nsubs && !rc; k++) {
        crl_policy_copy_state st = cc->st[k];
        /* a copy acting with older weights than the last sync's (async) restarts with the last sync's */
        if (cc->published && st.version != cc->synced_steps)
            st.version = cc->synced_steps;
        const void *w = cc->published ? cc->weights->data : NULL;
        size_t wn = cc->published ? cc->weights->len : 0;
        if (t->has_remote)
            rc = t->remote.struct_size >= offsetof(crl_trainer_remote, resume) + sizeof t->remote.resume &&
                         t->remote.resume
                     ? t->remote.resume(t->remote.user, k, &st, w, wn, done, err)
                     : crl_error_set(err, CRL_E_UNSUPPORTED, "the remote sub-collectors cannot resume");
        else if (!done)
            rc = crl_policy_copy_replay(t->copies[k], st.actions, st.actions_len, err);
        else
            rc = crl_policy_copy_restore(t->copies[k], &st, w, wn, err);
        if (rc && t->nsubs > 1)
            crl_error_prefix(err, "sub-collector %zu: ", k);
    }
    return rc;
}

int crl_trainer_resume(crl_trainer *t, const char *dir, crl_error *err)
{
    if (t->frames || t->batches)
        return crl_error_set(err, CRL_E_INVALID, "resume: this trainer has run already; resume a new one");
    if (t->copies_mode && !t->sync)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "resume from '%s': an asynchronous run ([collector] sync = "
                             "false) cannot be resumed: which sub-collector's batch came when is not recorded, so its "
                             "frames cannot be re-collected; start it anew, or run with sync = true", dir);
    char *model = g_build_filename(dir, "trainer.ckpt", NULL);
    copies_ckpt cc;
    memset(&cc, 0, sizeof cc);
    int rc = load_file(t, model, true, err);
    if (!rc && t->copies_mode)
        rc = read_copies(t, model, &cc, err);
    if (!rc)
        rc = load_carried(t, model, err);
    if (!rc && t->copies_mode)
        rc = resume_copies(t, &cc, false, err);
    g_free(model);
    if (rc) {
        copies_ckpt_clear(&cc, (size_t)t->nsubs);
        return crl_error_prefix(err, "resume from '%s': ", dir), rc;
    }
    /* Re-collect the checkpoint's frames with the recorded actions, in the batches they were collected in:
     * full ones, and a shorter one ending at each cut and at the checkpoint's frame count. */
    int64_t target = t->frames;
    int64_t total = crl__collector_limit(t->coll, target);
    if (total >= 0 && total < target) {
        crl__collector_limit(t->coll, total);
        rc = crl_error_set(err, CRL_E_CONFIG, "resume: the checkpoint holds %lld frames but [collector] "
                           "total_frames = %lld stops before; raise total_frames", (long long)target,
                           (long long)total);
        copies_ckpt_clear(&cc, (size_t)t->nsubs);
        return crl_error_prefix(err, "resume from '%s': ", dir), rc;
    }
    crl_rng keep = t->rng;
    t->ff = true;
    t->ff_pos = 0;
    /* without the buffer in the checkpoint, the re-collected frames refill it */
    crl_collector_set_replay(t->coll, t->rb && !t->rb->checkpoint ? t->rb : NULL);
    guint cut = 0;
    while (crl_collector_frames(t->coll) < target) {
        int64_t at = crl_collector_frames(t->coll);
        while (cut < t->cuts->len && g_array_index(t->cuts, int64_t, cut) <= at)
            cut++;
        crl__collector_limit(t->coll, cut < t->cuts->len ? g_array_index(t->cuts, int64_t, cut) : target);
        crl_error e;
        crl_error_clear(&e);
        crl_td *b = crl_collector_next(t->coll, &e);
        if (!b) {
            rc = e.code ? crl_error_pass(err, &e, CRL_E_RUNTIME)
                        : crl_error_set(err, CRL_E_CONFIG, "resume: re-collecting ended at frame %lld, before the "
                                        "checkpoint's %lld", (long long)at, (long long)target);
            break;
        }
        tally(t, b);
        crl_td_unref(b);
    }
    crl__collector_limit(t->coll, total);
    t->ff = false;
    t->rng = keep;
    if (!rc && crl_collector_frames(t->coll) != target)
        rc = crl_error_set(err, CRL_E_CONFIG, "resume: re-collecting stopped at frame %lld, not at the checkpoint's "
                           "%lld: keep [collector] frames_per_batch as it was",
                           (long long)crl_collector_frames(t->coll), (long long)target);
    if (!rc && t->ff_pos != t->actions->len)
        rc = crl_error_set(err, CRL_E_CONFIG, "resume: re-collecting used %zu of the %u recorded action bytes: the "
                           "config differs from the checkpointed run's (env, collector)", t->ff_pos,
                           t->actions->len);
    if (!rc)
        rc = restore_carried(t, dir, err);
    else
        carry_clear(t);
    if (!rc && t->copies_mode && !(rc = resume_copies(t, &cc, true, err))) {
        t->synced_steps = cc.synced_steps;
        t->published = cc.published;
        g_byte_array_set_size(t->pub_weights, 0);
        g_byte_array_append(t->pub_weights, cc.weights->data, cc.weights->len);
    }
    copies_ckpt_clear(&cc, (size_t)t->nsubs);
    if (!rc && t->rb) {
        crl_collector_set_replay(t->coll, t->rb);
        char *rdir = g_build_filename(dir, "replay", NULL);
        rc = t->rb->checkpoint ? crl_replay_load(t->rb, rdir, err) : CRL_OK;
        g_free(rdir);
    }
    if (rc)
        crl_error_prefix(err, "resume from '%s': ", dir);
    return rc;
}
