/* StepPenalty: a transform.  Subtracts `penalty` from the reward of every step (TorchRL-style in_keys /
 * out_keys: reads "reward", writes it in place unless out_keys names another key), so an agent learns to
 * reach the goal in fewer steps.
 *
 * What it shows: create from validated options, transform_specs checking the key it needs (and adding the
 * out key's spec when it is a new one), and call writing through crl_transform_output, which reuses the
 * tensor already there so a rollout allocates nothing per step.  The host uses `call` on each step's "next"
 * and standalone on replay samples; `reset` keeps it off the reset output, which has no reward. */
#include "example.h"

#include <crl/transform_backend.h>

#include <stdlib.h>
#include <string.h>

typedef struct penalty {
    double penalty;
    char in_key[64], out_key[64];
} penalty;

static int penalty_create(const crl_opts *opts, void **out, crl_error *err)
{
    double p;
    size_t nin, nout;
    const char *const *in, *const *outk;
    int rc;
    if ((rc = crl_opts_double(opts, "penalty", &p, err)) || (rc = crl_opts_list(opts, "in_keys", &nin, &in, err)) ||
        (rc = crl_opts_list(opts, "out_keys", &nout, &outk, err)))
        return rc;
    if (nin != 1 || nout > 1 || strlen(in[0]) >= 64 || (nout && strlen(outk[0]) >= 64))
        return crl_error_set(err, CRL_E_CONFIG, "%s: StepPenalty takes one in_key and at most one out_key "
                             "(each under 64 bytes), e.g. in_keys = reward", crl_opts_origin(opts, "in_keys"));
    penalty *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "StepPenalty: out of memory");
    t->penalty = p;
    strcpy(t->in_key, in[0]);
    strcpy(t->out_key, nout ? outk[0] : in[0]); /* empty out_keys: in place, as TorchRL */
    *out = t;
    return CRL_OK;
}

static int penalty_specs(void *tp, crl_transform_specs *specs, crl_error *err)
{
    penalty *t = tp;
    crl_spec *leaf = crl_spec_composite_get(specs->reward, t->in_key);
    if (!leaf)
        return crl_transform_missing_key(err, "StepPenalty", t->in_key, specs->reward, "reward spec");
    if (crl_spec_dtype(leaf) != CRL_F32)
        return crl_error_set(err, CRL_E_DTYPE, "StepPenalty: '%s' is %s; it needs float32 rewards", t->in_key,
                             crl_dtype_name(crl_spec_dtype(leaf)));
    if (strcmp(t->out_key, t->in_key) != 0) {
        /* A new key: declare it with the reward's shape, unbounded. */
        crl_spec *out = crl_spec_unbounded(CRL_F32, crl_spec_ndim(leaf), crl_spec_shape(leaf), err);
        if (!out)
            return CRL_E_NOMEM;
        int rc = crl_spec_composite_set(specs->reward, t->out_key, out, err);
        crl_spec_unref(out); /* set took its own reference */
        return rc;
    }
    return CRL_OK;
}

static int penalty_call(void *tp, crl_td *td, crl_error *err)
{
    penalty *t = tp;
    crl_tensor *in = crl_td_get(td, t->in_key);
    if (!in)
        return crl_transform_missing_td_key(err, "StepPenalty", t->in_key, td);
    if (crl_tensor_dtype(in) != CRL_F32)
        return crl_error_set(err, CRL_E_DTYPE, "StepPenalty: '%s' is %s, not float32", t->in_key,
                             crl_dtype_name(crl_tensor_dtype(in)));
    /* A contiguous reference of our own: the output may replace the entry (and drop the td's reference)
     * when it is the same key. */
    crl_error local;
    crl_tensor *src = crl_tensor_contiguous(in, &local);
    if (!src)
        return crl_error_pass(err, &local, CRL_E_NOMEM);
    crl_tensor *out = crl_transform_output(td, t->out_key, CRL_F32, crl_tensor_ndim(src), crl_tensor_shape(src),
                                           err);
    if (!out) {
        crl_tensor_unref(src);
        return CRL_E_NOMEM;
    }
    const float *s = crl_tensor_data(src);
    float *d = crl_tensor_data(out);
    for (int64_t i = 0, n = crl_tensor_numel(src); i < n; i++)
        d[i] = s[i] - (float)t->penalty;
    crl_tensor_unref(src);
    return CRL_OK;
}

/* A reset's output has no reward: nothing to do (without this hook the host would call `call` on it). */
static int penalty_reset(void *tp, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    (void)tp, (void)ctx, (void)td, (void)mask, (void)err;
    return CRL_OK;
}

static void penalty_destroy(void *tp)
{
    free(tp);
}

static const crl_transform_ops penalty_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = penalty_create,
    .transform_specs = penalty_specs,
    .call = penalty_call,
    .reset = penalty_reset,
    .destroy = penalty_destroy,
};

static const crl_option penalty_options[] = {
    { "penalty", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.01", 0, 1e6, NULL, "subtracted from every step's reward" },
    { "in_keys", CRL_OPT_LIST, 0, "reward", 0, 0, NULL, "the reward key read" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where the result goes (empty: in place)" },
    CRL_OPTIONS_END
};

const crl_component example_penalty_component = {
    sizeof(crl_component), CRL_KIND_TRANSFORM, "StepPenalty", "reward minus a fixed penalty per step",
    penalty_options, &penalty_ops
};
