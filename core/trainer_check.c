/* Validation before work (crl_experiment_check): every description of an experiment built and checked,
 * no env reset or stepped; and training's cross-section rules, which crl_trainer_from_config shares. */
#include "crl-private.h"
#include "config-private.h"
#include "check-private.h"
#include "replay-private.h"
#include "examples-private.h"

#include <crl/trainer.h>

#include <stddef.h>
#include <string.h>

/* ---- training's rules across sections ------------------------------------------------------ */

int crl__trainer_check_collector(const crl_opts *ocoll, bool remote, int64_t *init_random, crl_error *err)
{
    int64_t k, ir;
    bool sync;
    int rc;
    if ((rc = crl_opts_int(ocoll, "num_collectors", &k, err)) || (rc = crl_opts_bool(ocoll, "sync", &sync, err)) ||
        (rc = crl_opts_int(ocoll, "init_random_frames", &ir, err)))
        return rc;
    if (init_random)
        *init_random = ir;
    /* async sub-collectors keep collecting while the learner updates: only in other processes, each with
     * its own policy copy that the updates do not touch */
    if (!sync && !remote)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [collector] sync = false: training with asynchronous "
                             "sub-collectors needs them in other processes ([distributed] backend = mpi under "
                             "mpirun); use sync = true here", crl_opts_origin(ocoll, "sync"));
    return CRL_OK;
}

/* [distributed] backend = mpi: the sub-collectors run in other processes. */
static bool mpi_backend(const crl_config *cfg)
{
    const char *b = crl_config_get(cfg, "distributed", "backend");
    return b && !strcmp(b, "mpi");
}

/* "FILE:LINE" of section.key, else of section.alt, else "default". */
static const char *origin_of(const crl_config *cfg, const char *section, const char *key, const char *alt)
{
    const char *o = crl_config_origin(cfg, section, key);
    if (!o && alt)
        o = crl_config_origin(cfg, section, alt);
    return o ? o : "default";
}

/* The [net.*] section of a recurrent network (type = lstm or gru), or NULL.  Only a loss that builds one
 * gets this far with such a section: crl_loss_from_config refuses it for the others. */
static const char *recurrent_section(const crl_config *cfg)
{
    for (size_t i = 0; i < crl_config_section_count(cfg); i++) {
        const char *s = crl_config_section_at(cfg, i), *type = crl_config_get(cfg, s, "type");
        if (!strncmp(s, "net.", 4) && type && (!strcmp(type, "lstm") || !strcmp(type, "gru")))
            return s;
    }
    return NULL;
}

/* An off-policy loss with a recurrent network learns from [batch_size / L, L] slices of consecutive steps of
 * one trajectory: the replay's slice sampler draws them (whole, within one env's trajectory) and the
 * trainer reshapes the batch to them. */
static int check_sequences(const crl_config *cfg, const char *loss_type, int64_t seq_len, int64_t run_len,
                           const crl_replay *rb, crl_error *err)
{
    const char *net = recurrent_section(cfg), *sec = rb->section;
    if (!net) {
        if (seq_len > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [train] sequence_length = %lld: loss '%s' has no recurrent "
                                 "network ([net.q] type = lstm or gru) and learns from single steps; drop "
                                 "sequence_length", origin_of(cfg, "train", "sequence_length", NULL),
                                 (long long)seq_len, loss_type);
        return CRL_OK;
    }
    const char *type = crl_config_get(cfg, net, "type");
    if (seq_len <= 0)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] type = %s: loss '%s' learns from slices of consecutive "
                             "steps: set [train] sequence_length (e.g. 8) and [%s] sampler = slice, slice_len = the "
                             "same, traj_key = collector.traj_ids", origin_of(cfg, net, "type", NULL), net, type,
                             loss_type, sec);
    if (seq_len > rb->capacity)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [train] sequence_length = %lld is more than [%s] capacity = "
                             "%lld: no slice fits in the buffer; lower sequence_length or raise capacity",
                             origin_of(cfg, "train", "sequence_length", NULL), (long long)seq_len, sec,
                             (long long)rb->capacity);
    if (rb->sampler != CRL__SAMPLER_SLICE)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] sampler = %s: the recurrent [%s] learns from slices of "
                             "[train] sequence_length = %lld consecutive steps; set sampler = slice, slice_len = "
                             "%lld, traj_key = collector.traj_ids", origin_of(cfg, sec, "sampler", "capacity"), sec,
                             crl__replay_sampler_name(rb->sampler), net, (long long)seq_len, (long long)seq_len);
    size_t per = rb->slice_len ? rb->slice_len : rb->batch_size / rb->num_slices;
    if ((int64_t)per != seq_len || rb->batch_size % per)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = %zu makes slices of %zu steps (batch_size = %zu), not "
                             "the [train] sequence_length = %lld the loss learns from; set slice_len = %lld and a "
                             "batch_size that it divides", origin_of(cfg, sec, rb->slice_len ? "slice_len" : "num_slices",
                             "sampler"), sec, rb->slice_len ? "slice_len" : "num_slices",
                             rb->slice_len ? rb->slice_len : rb->num_slices, per, rb->batch_size, (long long)seq_len,
                             (long long)seq_len);
    if (!rb->strict_length)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] strict_length = false: short slices would not fill the "
                             "[batch_size / %lld, %lld] sequences the loss learns from; drop strict_length",
                             origin_of(cfg, sec, "strict_length", NULL), sec, (long long)seq_len, (long long)seq_len);
    /* The collector stores its envs' steps one env after another: without trajectory ids a slice would run
     * from one env's steps into the next env's. */
    if (!rb->traj_key)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] sampler = slice without traj_key: a slice could run from "
                             "one env's steps into another's, whose stored recurrent state does not follow; set "
                             "traj_key = collector.traj_ids", origin_of(cfg, sec, "sampler", NULL), sec);
    /* Each batch goes into the buffer one env after another: an env's steps are contiguous (a run the slice
     * sampler can cut slices from) only within a batch. */
    if (run_len > 0 && run_len < seq_len)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [collector] frames_per_batch stores each env's steps in runs of "
                             "%lld (frames_per_batch / the envs of all sub-collectors), and no slice of [train] "
                             "sequence_length = %lld fits in one: raise frames_per_batch to at least %lld times the "
                             "envs, or lower sequence_length", origin_of(cfg, "collector", "frames_per_batch", NULL),
                             (long long)run_len, (long long)seq_len, (long long)seq_len);
    return CRL_OK;
}

int crl__trainer_check_loss(const crl_config *cfg, const char *loss_type, bool on_policy, int64_t init_random,
                            int64_t seq_len, int64_t run_len, const crl_replay *rb, crl_error *err)
{
    if (on_policy) {
        if (init_random > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [collector] init_random_frames = %lld: loss '%s' learns "
                                 "on-policy, from the log-probabilities of its own actions, which random frames do "
                                 "not have; drop init_random_frames", origin_of(cfg, "collector",
                                 "init_random_frames", NULL), (long long)init_random, loss_type);
        return CRL_OK;
    }
    if (!rb) {
        const char *o = crl_config_origin(cfg, "loss", "type");
        return crl_error_set(err, CRL_E_CONFIG, "%s%sloss '%s' learns off-policy from a replay buffer: add a [replay] "
                             "section (capacity, batch_size; see %s/cartpole-dqn.ini)", o ? o : "",
                             o ? ": " : "", loss_type, crl__examples_dir());
    }
    const char *sec = rb->section;
    if (rb->batch_size == 0)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = 0: loss '%s' samples batch_size items for "
                             "each update; give at least 1, or drop the key for the default",
                             origin_of(cfg, sec, "batch_size", NULL), sec, loss_type);
    if ((int64_t)rb->batch_size > rb->capacity)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %zu is more than capacity = %lld: the buffer "
                             "never holds a batch, so no update would run; lower batch_size or raise capacity",
                             origin_of(cfg, sec, "batch_size", "capacity"), sec, rb->batch_size,
                             (long long)rb->capacity);
    if (rb->sampler == CRL__SAMPLER_NOREPL && rb->drop_last)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] drop_last = true: the updates sample without end, and the "
                             "first exhausted epoch would stop the run; drop it (or use sampler = random)",
                             origin_of(cfg, sec, "drop_last", NULL), sec);
    return check_sequences(cfg, loss_type, seq_len, run_len, rb, err);
}

int64_t crl__trainer_run_len(int64_t frames_per_batch, int64_t envs)
{
    return envs > 1 ? frames_per_batch / envs : 0;
}

/* ---- validation ------------------------------------------------------------------------------ */

/* Where the message names the origin ("FILE:LINE: ") of some value of cfg
 * earliest; -1 when it names none.  *len receives the origin's length. */
static ptrdiff_t first_origin(const crl_config *cfg, const char *msg, size_t *len)
{
    ptrdiff_t best = -1;
    for (size_t s = 0; s < crl_config_section_count(cfg); s++) {
        const char *sec = crl_config_section_at(cfg, s);
        for (size_t k = 0; k < crl_config_key_count(cfg, sec); k++) {
            const char *o = crl_config_origin(cfg, sec, crl_config_key_at(cfg, sec, k));
            size_t n = o ? strlen(o) : 0;
            for (const char *p = n ? strstr(msg, o) : NULL; p; p = strstr(p + 1, o)) {
                if (p[n] != ':' || p[n + 1] != ' ')
                    continue;
                if (best < 0 || p - msg < best || (p - msg == best && n > *len)) {
                    best = p - msg;
                    *len = n;
                }
                break;
            }
        }
    }
    return best;
}

/* A component built from the config failed with rc: a value error (range,
 * unknown name, shape, dtype, unsupported combination) is the config's,
 * reported as CRL_E_CONFIG starting with the "FILE:LINE: " the message
 * names (moved to the front, where editors and people look), or else that
 * of section.key (or of the section's first key); other codes (memory,
 * I/O, plugins) pass unchanged.  err is set. */
static int config_error(const crl_config *cfg, const char *section, const char *key, int rc, const crl_error *in,
                        crl_error *out)
{
    switch (rc) {
    case CRL_E_CONFIG:
    case CRL_E_INVALID:
    case CRL_E_NOT_FOUND:
    case CRL_E_RANGE:
    case CRL_E_SHAPE:
    case CRL_E_DTYPE:
    case CRL_E_UNSUPPORTED:
        break;
    default:
        return crl_error_pass(out, in, rc);
    }
    size_t n = 0;
    ptrdiff_t at = first_origin(cfg, in->message, &n);
    char *msg;
    if (at > 0) {
        msg = g_strdup_printf("%.*s: %.*s%s", (int)n, in->message + at, (int)at, in->message,
                              in->message + at + (ptrdiff_t)n + 2);
    } else {
        const char *o = NULL;
        if (at < 0) {
            o = key ? crl_config_origin(cfg, section, key) : NULL;
            if (!o && crl_config_key_count(cfg, section) > 0)
                o = crl_config_origin(cfg, section, crl_config_key_at(cfg, section, 0));
        }
        msg = o ? g_strdup_printf("%s: %s", o, in->message) : g_strdup(in->message);
    }
    /* in may be out: the message was copied first. */
    crl_error_set(out, CRL_E_CONFIG, "%s", msg);
    g_free(msg);
    return CRL_E_CONFIG;
}

/* The env's description (every config rule of [env] and its transforms), then the env itself, dry, for the
 * transformed specs the loss's networks are sized from. */
static crl_env *check_env(crl_host *host, const crl_config *cfg, const char *section, crl_error *err)
{
    crl_env_desc *d = crl_env_desc_from_config(host, cfg, section, err);
    if (!d)
        return NULL;
    bool was = crl__tchain_dry();
    crl__tchain_set_dry(true);
    crl_env *env = crl_env_new(d, err);
    crl__tchain_set_dry(was);
    crl_env_desc_free(d);
    return env;
}

int crl_experiment_check(crl_host *host, const crl_config *cfg, const crl_schema *schema, unsigned flags,
                         crl_error *err)
{
    if (!host || !cfg)
        return crl_error_set(err, CRL_E_INVALID, "crl_experiment_check: %s is NULL", !host ? "host" : "cfg");
    /* Every step reports into e, which config_error may rewrite; the caller's err gets it at the end. */
    crl_error e;
    crl_error_clear(&e);
    int rc = schema ? crl_config_validate(cfg, schema, &e) : CRL_OK;
    if (rc)
        return crl_error_pass(err, &e, rc);
    bool train = (flags & CRL_CHECK_TRAIN) || crl_config_has_section(cfg, "loss");
    crl_opts *otrain = NULL, *ooptim = NULL, *ocoll = NULL;
    crl_env *env = NULL;
    crl_replay *rb = NULL;
    int64_t seed = 0, init_random = 0;
    if (train) {
        const char *type;
        crl_optim_kind kind;
        if ((rc = crl__config_section_opts(cfg, "train", crl_train_options(), &otrain, &e)) ||
            (rc = crl_opts_int(otrain, "seed", &seed, &e)) ||
            (rc = crl__config_section_opts(cfg, "optim", crl_optim_section_options(), &ooptim, &e)) ||
            (rc = crl_opts_string(ooptim, "type", &type, &e)) ||
            (rc = config_error(cfg, "optim", "type", crl_optim_kind_from_name(type, &kind, &e), &e, &e)) ||
            (rc = crl__config_section_opts(cfg, "collector", crl_collector_options(), &ocoll, &e)) ||
            (rc = crl__trainer_check_collector(ocoll, mpi_backend(cfg), &init_random, &e)))
            goto out;
    }
    if (train || crl_config_has_section(cfg, "env") || crl_config_has_section(cfg, "collector")) {
        if (!(env = check_env(host, cfg, "env", &e))) {
            rc = config_error(cfg, "env", "id", e.code, &e, &e);
            goto out;
        }
    }
    if ((train || crl_config_has_section(cfg, "collector")) &&
        (rc = crl__collector_check_config(cfg, "collector", "env", env, &e)))
        goto out;
    if (crl_config_has_section(cfg, "replay") && !(rb = crl__replay_configure(host, cfg, "replay", &e))) {
        rc = config_error(cfg, "replay", "storage", e.code, &e, &e);
        goto out;
    }
    if (train) {
        const crl_loss_ops *ops = NULL;
        void *loss = NULL;
        if ((rc = crl_loss_from_config(host, cfg, "loss", crl_env_full_observation_spec(env), crl_env_full_action_spec(env),
                                       (uint64_t)seed, &ops, &loss, &e))) {
            rc = config_error(cfg, "loss", "type", rc, &e, &e);
            goto out;
        }
        bool on_policy = (ops->flags & CRL_LOSS_ON_POLICY) != 0;
        ops->destroy(loss);
        int64_t seq_len = 0, fpb = 0, k = 1;
        if ((rc = crl_opts_int(otrain, "sequence_length", &seq_len, &e)) ||
            (rc = crl_opts_int(ocoll, "frames_per_batch", &fpb, &e)) ||
            (rc = crl_opts_int(ocoll, "num_collectors", &k, &e)) ||
            (rc = crl__trainer_check_loss(cfg, crl_config_get(cfg, "loss", "type"), on_policy, init_random, seq_len,
                                          crl__trainer_run_len(fpb, k * crl_env_num(env)), rb, &e)))
            goto out;
    }
out:
    crl_replay_free(rb);
    crl_env_free(env);
    crl_opts_free(otrain);
    crl_opts_free(ooptim);
    crl_opts_free(ocoll);
    return rc ? crl_error_pass(err, &e, rc) : CRL_OK;
}
