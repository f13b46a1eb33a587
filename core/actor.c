/* What every actor shares: exploration type names, the action space read from the env's spec, discrete action encodings. */
#include "nn-private.h"

#include <math.h>

int crl_exploration_from_name(const char *name, crl_exploration *out, crl_error *err)
{
    static const struct { const char *name; crl_exploration e; } t[] = {
        { "random", CRL_EXPLORE_RANDOM }, { "mode", CRL_EXPLORE_MODE },
        { "deterministic", CRL_EXPLORE_MODE }, { "mean", CRL_EXPLORE_MEAN },
    };
    for (size_t i = 0; name && i < G_N_ELEMENTS(t); i++)
        if (!g_ascii_strcasecmp(name, t[i].name)) {
            *out = t[i].e;
            return CRL_OK;
        }
    return crl_error_set(err, CRL_E_INVALID, "unknown exploration type '%s': use random, mode or mean",
                         name ? name : "(null)");
}

int crl__action_space_init(crl__action_space *s, const char *who, const crl_spec *spec, bool discrete,
                           crl_error *err)
{
    memset(s, 0, sizeof *s);
    if (!spec)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': no action spec given", who);
    s->kind = crl_spec_get_kind(spec);
    s->dtype = crl_spec_dtype(spec);
    int nd = crl_spec_ndim(spec);
    if (discrete) {
        if (s->kind != CRL_SPEC_CATEGORICAL && s->kind != CRL_SPEC_ONEHOT)
            return crl_error_set(err, CRL_E_INVALID, "module '%s': the action spec is %s but this actor needs "
                                 "Categorical or OneHot actions", who, crl_spec_kind_name(s->kind));
        s->n = crl_spec_n(spec);
        return CRL_OK;
    }
    if (s->kind != CRL_SPEC_BOUNDED && s->kind != CRL_SPEC_UNBOUNDED)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': the action spec is %s but this actor needs "
                             "Bounded or Unbounded (continuous) actions", who, crl_spec_kind_name(s->kind));
    if (nd < 1 || !crl_dtype_is_float(s->dtype))
        return crl_error_set(err, CRL_E_INVALID, "module '%s': continuous actions need a float spec with a last "
                             "(action) dim, got %s with %d dims", who, crl_dtype_name(s->dtype), nd);
    s->d = crl_spec_shape(spec)[nd - 1];
    if (s->kind == CRL_SPEC_BOUNDED) {
        s->low = g_new(float, s->d);
        s->high = g_new(float, s->d);
        for (int64_t j = 0; j < s->d; j++) {
            double lo = crl_tensor_flat_get(crl_spec_low(spec), j), hi = crl_tensor_flat_get(crl_spec_high(spec), j);
            if (!isfinite(lo) || !isfinite(hi) || !(lo < hi)) {
                crl__action_space_clear(s);
                return crl_error_set(err, CRL_E_INVALID, "module '%s': action dim %" PRId64 " has bounds [%g, %g]; "
                                     "squashing needs finite low < high (use an Unbounded spec otherwise)", who, j, lo, hi);
            }
            s->low[j] = (float)lo;
            s->high[j] = (float)hi;
        }
    }
    return CRL_OK;
}

void crl__action_space_clear(crl__action_space *s)
{
    g_free(s->low);
    g_free(s->high);
    s->low = s->high = NULL;
}

/* The action tensor: [batch...] for indices, [batch..., n] for one-hot,
 * reused when td already holds one of that dtype and shape. */
static crl_tensor *class_tensor(const char *who, crl_td *td, const crl_td_key *k, const crl__action_space *s,
                                crl_error *err)
{
    int bn = crl_td_batch_ndim(td), nd = bn + (s->kind == CRL_SPEC_ONEHOT);
    int64_t shape[CRL_MAX_DIMS];
    if (nd > CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_SHAPE, "module '%s': too many batch dims", who);
        return NULL;
    }
    memcpy(shape, crl_td_batch_shape(td), (size_t)bn * sizeof *shape);
    if (nd > bn)
        shape[bn] = s->n;
    crl_tensor *t = crl_td_get_k(td, k);
    if (t && crl_tensor_dtype(t) == s->dtype && crl_tensor_ndim(t) == nd &&
        !memcmp(crl_tensor_shape(t), shape, (size_t)nd * sizeof *shape))
        return t;
    t = crl_tensor_new(s->dtype, nd, shape, err);
    int rc = t ? crl_td_set_k(td, k, t, err) : CRL_E_NOMEM;
    crl_tensor_unref(t);
    return rc ? NULL : t;
}

int crl__write_classes(const char *who, crl_td *td, const crl_td_key *k, const crl__action_space *s,
                       const int64_t *idx, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = class_tensor(who, td, k, s, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int64_t rows = crl__td_rows(td);
    if (s->kind == CRL_SPEC_ONEHOT) {
        crl_tensor_fill(t, 0);
        for (int64_t r = 0; r < rows; r++)
            crl_tensor_flat_set(t, r * s->n + idx[r], 1);
    } else if (s->dtype == CRL_I64 && crl_tensor_is_contiguous(t)) {
        memcpy(crl_tensor_data(t), idx, (size_t)rows * sizeof *idx);
    } else {
        for (int64_t r = 0; r < rows; r++)
            crl_tensor_flat_set(t, r, (double)idx[r]);
    }
    return CRL_OK;
}

int crl__read_classes(const char *who, const crl_td *td, const crl_td_key *k, const crl__action_space *s,
                      int64_t *idx, crl_error *err)
{
    const crl_tensor *t = crl_td_get_k(td, k);
    int64_t rows = crl__td_rows(td), per = s->kind == CRL_SPEC_ONEHOT ? s->n : 1;
    if (!t)
        return crl_error_set(err, CRL_E_NOT_FOUND, "module '%s': the TensorDict has no '%s' to evaluate", who,
                             crl_td_key_str(k));
    if (crl_tensor_numel(t) != rows * per) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': '%s' has shape %s but %" PRId64 " rows of %s were expected",
                             who, crl_td_key_str(k), crl__shape_fmt(b, crl_tensor_ndim(t), crl_tensor_shape(t)), rows,
                             per > 1 ? "one-hot vectors" : "class indices");
    }
    for (int64_t r = 0; r < rows; r++) {
        if (per > 1) {
            idx[r] = -1;
            for (int64_t j = 0; j < per; j++)
                if (crl_tensor_flat_get(t, r * per + j) > 0.5) {
                    idx[r] = j;
                    break;
                }
        } else {
            idx[r] = (int64_t)crl_tensor_flat_get(t, r);
        }
        if (idx[r] < 0 || idx[r] >= s->n)
            return crl_error_set(err, CRL_E_RANGE, "module '%s': '%s' row %" PRId64 " is not an action in [0, %" PRId64 ")",
                                 who, crl_td_key_str(k), r, s->n);
    }
    return CRL_OK;
}

int crl__actor_base_init(crl__actor_base *b, crl_mlp *net, const char *const *in_keys, const crl_spec *spec,
                         bool discrete, int64_t per, const char *out_key, const char *what, const char *why,
                         crl_error *err)
{
    memset(b, 0, sizeof *b);
    if (!net)
        return crl_error_set(err, CRL_E_INVALID, "%s: no network given", what);
    int rc = crl__action_space_init(&b->space, net->name, spec, discrete, err);
    if (rc)
        return rc;
    int64_t want = per * (discrete ? b->space.n : b->space.d);
    if (crl_mlp_out_features(net) != want)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': the network gives %" PRId64 " outputs but %s needs %" PRId64
                             " (%s)", net->name, crl_mlp_out_features(net), what, want, why);
    crl_error e;
    crl_error_clear(&e);
    if (!(b->mod = crl_tdmodule_new(net, in_keys, out_key, &e)) || !(b->k_action = crl_td_key_new("action", &e)))
        return crl_error_pass(err, &e, CRL_E_INVALID);
    return CRL_OK;
}

void crl__actor_base_clear(crl__actor_base *b)
{
    crl_tdmodule_free(b->mod);
    crl__action_space_clear(&b->space);
    crl_td_key_free(b->k_action);
    memset(b, 0, sizeof *b);
}

int crl__anneal_set(crl__anneal *an, const char *what, double init, double end, int64_t steps, double lo, double hi,
                    crl_error *err)
{
    if (!(init >= lo && init <= hi && end >= lo && end <= hi) || steps < 1)
        return crl_error_set(err, CRL_E_RANGE, "%s: the schedule's start (%g) and end (%g) must be in [%g, %g] and "
                             "annealing_num_steps (%" PRId64 ") >= 1", what, init, end, lo, hi, steps);
    an->init = an->value = init;
    an->end = end;
    an->steps = steps;
    return CRL_OK;
}

/* Linear, never past the end (either direction). */
void crl__anneal_step(crl__anneal *an, int64_t frames)
{
    if (!an->steps)
        return;
    an->value -= (double)frames * (an->init - an->end) / (double)an->steps;
    if ((an->init >= an->end) == (an->value < an->end))
        an->value = an->end;
}
