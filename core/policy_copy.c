/* A copy of the training policy for one sub-collector, and the [distributed] options (crl/trainer.h).
 *
 * Sub-collector k acts with its own copy of the loss, seeded as the trainer's, its own exploration
 * stream (train seed, stream POLICY_STREAM + k) and weights the trainer hands over every sync_interval
 * optimizer steps.  Whether the copy lives on a thread of the trainer's process or in another process
 * (crl run's mpi backend), the same calls give the same actions, so both runs are bitwise equal. */
#include "crl-private.h"
#include "config-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <string.h>

/* Exploration streams of the copies: after the trainer's own (1: exploration and minibatches, 2:
 * evaluation). */
#define POLICY_STREAM 16

static const crl_option distributed_options[] = {
    { "backend", CRL_OPT_ENUM, 0, "none", 0, 0, "none|mpi",
      "none: every sub-collector runs in this process; mpi: rank 0 of mpirun learns, ranks 1..K-1 are "
      "sub-collectors 0..K-2 (start with mpirun -np K crl run)" },
    { "sync_interval", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1e12, NULL,
      "the sub-collectors' policies get the learner's weights every this many optimizer steps (checked "
      "before each batch is requested)" },
    { "timeout", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "600", 0.1, 1e7, NULL,
      "mpi: seconds the learner waits for a collector rank's batch before it ends the job naming that rank" },
    CRL_OPTIONS_END
};

const crl_option *crl_distributed_options(void) { return distributed_options; }

struct crl_policy_copy {
    const crl_loss_ops *ops;
    void *loss;
    crl_rng rng;
    int64_t version, explore_frames;
    size_t weights_size;
    /* every action the copy took, in order; while replaying (a resume re-collects its frames) the
     * recorded ones replace the policy's from ff_pos on */
    GByteArray *actions;
    bool ff;
    size_t ff_pos;
};

/* Bytes of the loss's parameter vectors, in order. */
static size_t weights_size(const crl_loss_ops *ops, void *loss)
{
    size_t n = 0;
    for (size_t i = 0; i < ops->num_params(loss); i++) {
        const char *name;
        crl_tensor *p = NULL, *g = NULL;
        if (ops->param(loss, i, &name, &p, &g, NULL) == CRL_OK && p)
            n += crl_tensor_nbytes(p);
    }
    return n;
}

/* Copy the parameter vectors to (out = true) or from buf. */
static int move_weights(const crl_loss_ops *ops, void *loss, void *buf, size_t nbytes, bool out, crl_error *err)
{
    size_t off = 0;
    for (size_t i = 0; i < ops->num_params(loss); i++) {
        const char *name;
        crl_tensor *p = NULL, *g = NULL;
        int rc = ops->param(loss, i, &name, &p, &g, err);
        if (rc)
            return rc;
        size_t n = crl_tensor_nbytes(p);
        if (!crl_tensor_is_contiguous(p) || off + n > nbytes)
            return crl_error_set(err, CRL_E_INVALID, "policy weights: parameter vector %zu ('%s') %s", i, name,
                                 off + n > nbytes ? "runs past the weights given" : "is not contiguous");
        if (out)
            memcpy((char *)buf + off, crl_tensor_data(p), n);
        else
            memcpy(crl_tensor_data(p), (const char *)buf + off, n);
        off += n;
    }
    if (off != nbytes)
        return crl_error_set(err, CRL_E_INVALID, "policy weights: %zu bytes given, the loss has %zu", nbytes, off);
    return CRL_OK;
}

size_t crl_trainer_weights_size(const crl_trainer *t)
{
    return t ? weights_size(crl_trainer_loss_ops(t), crl_trainer_loss_state(t)) : 0;
}

int crl_trainer_weights(const crl_trainer *t, void *buf, size_t nbytes, crl_error *err)
{
    if (!t || (!buf && nbytes))
        return crl_error_set(err, CRL_E_INVALID, "crl_trainer_weights: %s is NULL", !t ? "trainer" : "buf");
    return move_weights(crl_trainer_loss_ops(t), crl_trainer_loss_state(t), buf, nbytes, true, err);
}

crl_policy_copy *crl_policy_copy_new(crl_host *host, const crl_config *cfg, const crl_env *env, size_t index,
                                     crl_error *err)
{
    if (!host || !cfg || !env) {
        crl_error_set(err, CRL_E_INVALID, "crl_policy_copy_new: %s is NULL", !host ? "host" : !cfg ? "cfg" : "env");
        return NULL;
    }
    int64_t seed = 0;
    if (crl_config_get_int(cfg, "train", "seed", 0, &seed, err))
        return NULL;
    crl_policy_copy *p = g_new0(crl_policy_copy, 1);
    /* the trainer's seed: the copy starts with the learner's initial weights even before the first sync */
    if (crl_loss_from_config(host, cfg, "loss", crl_env_full_observation_spec(env), crl_env_full_action_spec(env),
                             (uint64_t)seed, &p->ops, &p->loss, err)) {
        g_free(p);
        return NULL;
    }
    crl_rng_init(&p->rng, (uint64_t)seed, POLICY_STREAM + (uint64_t)index);
    p->weights_size = weights_size(p->ops, p->loss);
    p->actions = g_byte_array_new();
    return p;
}

void crl_policy_copy_free(crl_policy_copy *p)
{
    if (!p)
        return;
    if (p->loss)
        p->ops->destroy(p->loss);
    g_byte_array_free(p->actions, TRUE);
    g_free(p);
}

size_t crl_policy_copy_weights_size(const crl_policy_copy *p) { return p ? p->weights_size : 0; }
int64_t crl_policy_copy_version(const crl_policy_copy *p) { return p ? p->version : -1; }

int crl_policy_copy_set(crl_policy_copy *p, int64_t version, int64_t explore_frames, const void *weights,
                        size_t nbytes, crl_error *err)
{
    if (!p)
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_copy_set: policy copy is NULL");
    if (explore_frames < p->explore_frames)
        return crl_error_set(err, CRL_E_INVALID, "policy copy: the exploration schedule stands at frame %lld, "
                             "it cannot go back to %lld", (long long)p->explore_frames, (long long)explore_frames);
    if (weights) {
        int rc = move_weights(p->ops, p->loss, (void *)weights, nbytes, false, err);
        if (rc)
            return rc;
        p->version = version;
    }
    if (explore_frames > p->explore_frames && p->ops->explore_step)
        p->ops->explore_step(p->loss, explore_frames - p->explore_frames);
    p->explore_frames = explore_frames;
    return CRL_OK;
}

int crl_policy_copy_act(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)env;
    crl_policy_copy *p = user;
    /* replaying: the policy only fills the td (its action is replaced), without touching the stream */
    crl_rng scratch = p->rng;
    int rc = p->ops->act(p->loss, td, p->ff ? CRL_EXPLORE_MODE : CRL_EXPLORE_RANDOM, p->ff ? &scratch : &p->rng,
                         err);
    if (rc)
        return rc;
    crl_tensor *a = crl_td_get(td, "action");
    if (!a || !crl_tensor_is_contiguous(a))
        return crl_error_set(err, CRL_E_INVALID, "policy copy: the policy wrote no contiguous 'action'");
    size_t n = crl_tensor_nbytes(a);
    if (!p->ff) {
        if ((uint64_t)p->actions->len + n > G_MAXUINT)
            return crl_error_set(err, CRL_E_NOMEM, "policy copy: more than %u bytes of actions recorded", G_MAXUINT);
        g_byte_array_append(p->actions, crl_tensor_data(a), (guint)n);
        return CRL_OK;
    }
    if (p->ff_pos + n > p->actions->len)
        return crl_error_set(err, CRL_E_CORRUPT, "resume: the sub-collector's recorded actions end at byte %zu, "
                             "its frame needs %zu more", p->ff_pos, n);
    memcpy(crl_tensor_data(a), p->actions->data + p->ff_pos, n);
    p->ff_pos += n;
    return CRL_OK;
}

int crl_policy_copy_get_state(const crl_policy_copy *p, crl_policy_copy_state *st)
{
    if (!p || !st || st->struct_size < sizeof *st)
        return CRL_E_INVALID;
    st->version = p->version;
    st->explore_frames = p->explore_frames;
    st->rng = p->rng;
    st->actions = p->actions->data;
    st->actions_len = p->actions->len;
    return CRL_OK;
}

int crl_policy_copy_replay(crl_policy_copy *p, const void *actions, size_t nbytes, crl_error *err)
{
    if (!p || (!actions && nbytes))
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_copy_replay: %s is NULL", !p ? "policy copy" : "actions");
    if (p->actions->len || p->explore_frames || p->version)
        return crl_error_set(err, CRL_E_INVALID, "resume: this policy copy has acted already; replay on a new one");
    if (nbytes > G_MAXUINT)
        return crl_error_set(err, CRL_E_INVALID, "resume: %zu bytes of actions; a copy records at most %u", nbytes,
                             G_MAXUINT);
    g_byte_array_append(p->actions, actions, (guint)nbytes);
    p->ff = true;
    p->ff_pos = 0;
    return CRL_OK;
}

int crl_policy_copy_restore(crl_policy_copy *p, const crl_policy_copy_state *st, const void *weights, size_t nbytes,
                            crl_error *err)
{
    if (!p || !st || st->struct_size < sizeof *st)
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_copy_restore: %s", !p ? "policy copy is NULL"
                             : "no state (or an older struct_size)");
    if (p->ff && p->ff_pos != p->actions->len)
        return crl_error_set(err, CRL_E_CONFIG, "resume: the sub-collector re-collected with %zu of its %u recorded "
                             "action bytes: the config differs from the checkpointed run's (env, collector)",
                             p->ff_pos, p->actions->len);
    if (st->explore_frames < 0 || st->version < 0)
        return crl_error_set(err, CRL_E_INVALID, "resume: a policy copy's version and frames are >= 0");
    int rc = crl_policy_copy_set(p, st->version, st->explore_frames, weights, nbytes, err);
    if (rc)
        return rc;
    if (!weights)
        p->version = st->version;
    p->rng = st->rng;
    p->ff = false;
    return CRL_OK;
}

int crl_policy_copy_stamp(const crl_policy_copy *p, crl_td *batch, crl_error *err)
{
    if (!p || !batch)
        return crl_error_set(err, CRL_E_INVALID, "crl_policy_copy_stamp: %s is NULL", !p ? "policy copy" : "batch");
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *v = crl_tensor_new(CRL_I64, crl_td_batch_ndim(batch), crl_td_batch_shape(batch), &e);
    if (!v)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_fill(v, (double)p->version);
    int rc = crl_td_set(batch, "collector.policy_version", v, err);
    crl_tensor_unref(v);
    return rc;
}
