/* TorchRL's LSTMModule / GRUModule: a recurrent network whose state travels in the TensorDict
 * (recurrent_state_* keys in, ("next", ...) out, zeroed where is_init), one step per row or, in recurrent
 * mode, sequences along the last batch dim. */
#include "nn-private.h"
#include <crl/rnn.h>

struct crl_rnn_module {
    crl_rnn *net;
    bool recurrent;
    int n_state;
    crl_td_key *in, *out, *init, *state[2], *next_state[2];
    int64_t N, T;                 /* of the last forward */
    crl_tensor *x, *h0, *c0, *is_init;   /* [N, T, F], [N, H] x 2, [N, T] */
    crl_tensor *y, *gout;         /* infer's output [N, T, H], backward's grad_out [N, T, H] */
};

static const char *const STATE_KEYS[2][2] = { { "recurrent_state_h", "recurrent_state_c" }, { "recurrent_state", NULL } };

crl_rnn_module *crl_rnn_module_new(crl_rnn *net, const char *in_key, const char *out_key, crl_error *err)
{
    if (!net) {
        crl_error_set(err, CRL_E_INVALID, "recurrent TensorDict module: no network given");
        return NULL;
    }
    const char *who = crl_rnn_name(net);
    crl_rnn_module *mod = g_new0(crl_rnn_module, 1);
    mod->net = crl_rnn_ref(net);
    bool lstm = crl_rnn_kind_get(net) == CRL_RNN_LSTM;
    mod->n_state = lstm ? 2 : 1;
    int rc = CRL_OK;
    if (!(mod->in = crl_td_key_new(in_key ? in_key : "", err)) || !(mod->out = crl_td_key_new(out_key ? out_key : "", err)) ||
        !(mod->init = crl_td_key_new("is_init", err)))
        rc = CRL_E_INVALID;
    for (int i = 0; !rc && i < mod->n_state; i++) {
        const char *k = STATE_KEYS[lstm ? 0 : 1][i];
        char *nk = g_strconcat("next.", k, NULL);
        if (!(mod->state[i] = crl_td_key_new(k, err)) || !(mod->next_state[i] = crl_td_key_new(nk, err)))
            rc = CRL_E_INVALID;
        g_free(nk);
    }
    if (rc) {
        crl_error_prefix(err, "module '%s': ", who);
        crl_rnn_module_free(mod);
        return NULL;
    }
    return mod;
}

void crl_rnn_module_free(crl_rnn_module *mod)
{
    if (!mod)
        return;
    crl_td_key_free(mod->in);
    crl_td_key_free(mod->out);
    crl_td_key_free(mod->init);
    for (int i = 0; i < 2; i++) {
        crl_td_key_free(mod->state[i]);
        crl_td_key_free(mod->next_state[i]);
    }
    crl_tensor *ts[] = { mod->x, mod->h0, mod->c0, mod->is_init, mod->y, mod->gout };
    for (size_t i = 0; i < G_N_ELEMENTS(ts); i++)
        crl_tensor_unref(ts[i]);
    crl_rnn_unref(mod->net);
    g_free(mod);
}

crl_rnn *crl_rnn_module_net_get(crl_rnn_module *mod) { return mod->net; }
void crl_rnn_module_set_recurrent_mode(crl_rnn_module *mod, bool recurrent) { mod->recurrent = recurrent; }
const char *crl_rnn_module_state_key(const crl_rnn_module *mod, int i)
{
    return mod && i >= 0 && i < mod->n_state ? crl_td_key_str(mod->state[i]) : NULL;
}

static int buf(crl_tensor **t, int ndim, const int64_t *shape, crl_error *err)
{
    if (*t && crl_tensor_ndim(*t) == ndim && !memcmp(crl_tensor_shape(*t), shape, (size_t)ndim * sizeof *shape))
        return CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *n = crl_tensor_new(CRL_F32, ndim, shape, &e);
    if (!n)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(*t);
    *t = n;
    return CRL_OK;
}

/* Whether t is [batch..., extra...] for the td's batch dims. */
static bool has_shape(const crl_td *td, const crl_tensor *t, int n_extra, const int64_t *extra)
{
    int bn = crl_td_batch_ndim(td);
    if (crl_tensor_ndim(t) != bn + n_extra || memcmp(crl_tensor_shape(t), crl_td_batch_shape(td), (size_t)bn * sizeof(int64_t)))
        return false;
    return !n_extra || !memcmp(crl_tensor_shape(t) + bn, extra, (size_t)n_extra * sizeof *extra);
}

static int bad_shape(const crl_rnn_module *mod, const crl_td *td, const crl_td_key *k, const crl_tensor *t,
                     const char *expects, crl_error *err)
{
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    return crl_error_set(err, CRL_E_SHAPE, "module '%s': key '%s' has shape %s but the %s expects the batch dims %s "
                         "then %s", crl_rnn_name(mod->net), crl_td_key_str(k),
                         crl__shape_fmt(b, crl_tensor_ndim(t), crl_tensor_shape(t)),
                         crl_rnn_kind_get(mod->net) == CRL_RNN_LSTM ? "LSTM" : "GRU",
                         crl__shape_fmt(c, crl_td_batch_ndim(td), crl_td_batch_shape(td)), expects);
}

/* Read the inputs into mod's buffers: x [N, T, F], the states at each sequence's first step, is_init. */
static int gather(crl_rnn_module *mod, const crl_td *td, bool *have_state, bool *have_init, crl_error *err)
{
    const char *who = crl_rnn_name(mod->net);
    int bn = crl_td_batch_ndim(td);
    int64_t F = crl_rnn_input_size(mod->net), H = crl_rnn_hidden_size(mod->net), rows = crl__td_rows(td);
    if (rows < 1)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': the TensorDict has an empty batch", who);
    if (mod->recurrent && bn < 1)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': recurrent mode needs a TensorDict whose last batch dim "
                             "is time (this one has no batch dims)", who);
    int64_t T = mod->recurrent ? crl_td_batch_shape(td)[bn - 1] : 1, N = rows / T;
    const crl_tensor *x = crl_td_get_k(td, mod->in);
    if (!x) {
        char **keys = crl_td_leaf_keys(td, NULL);
        GString *s = g_string_new(NULL);
        for (size_t i = 0; keys && keys[i]; i++)
            g_string_append_printf(s, "%s'%s'", i ? ", " : "", keys[i]);
        int rc = crl_error_set(err, CRL_E_NOT_FOUND, "module '%s': in_key '%s' is not in the TensorDict (it has %s)",
                               who, crl_td_key_str(mod->in), s->len ? s->str : "no keys");
        g_string_free(s, TRUE);
        crl_free(keys);
        return rc;
    }
    char what[48];
    snprintf(what, sizeof what, "[%" PRId64 "]", F);
    if (!has_shape(td, x, 1, &F))
        return bad_shape(mod, td, mod->in, x, what, err);
    int rc;
    if ((rc = buf(&mod->x, 3, (int64_t[]){ N, T, F }, err)) || (rc = buf(&mod->h0, 2, (int64_t[]){ N, H }, err)) ||
        (rc = buf(&mod->c0, 2, (int64_t[]){ N, H }, err)) || (rc = buf(&mod->is_init, 2, (int64_t[]){ N, T }, err)))
        return rc;
    float *xd = crl_tensor_data(mod->x);
    if (crl_tensor_dtype(x) == CRL_F32 && crl_tensor_is_contiguous(x))
        memcpy(xd, crl_tensor_data(x), (size_t)(rows * F) * sizeof *xd);
    else
        for (int64_t i = 0; i < rows * F; i++)
            xd[i] = (float)crl_tensor_flat_get(x, i);
    /* The state entering each sequence: its first step's entry, [batch..., 1, H]. */
    int64_t one_h[2] = { 1, H };
    *have_state = false;
    for (int s = 0; s < mod->n_state; s++) {
        const crl_tensor *st = crl_td_get_k(td, mod->state[s]);
        float *d = crl_tensor_data(s ? mod->c0 : mod->h0);
        if (!st) {
            memset(d, 0, (size_t)(N * H) * sizeof *d);
            continue;
        }
        snprintf(what, sizeof what, "[1, %" PRId64 "] (num_layers, hidden_size)", H);
        if (!has_shape(td, st, 2, one_h))
            return bad_shape(mod, td, mod->state[s], st, what, err);
        *have_state = true;
        bool fast = crl_tensor_dtype(st) == CRL_F32 && crl_tensor_is_contiguous(st);
        for (int64_t n = 0; n < N; n++)
            if (fast)
                memcpy(d + n * H, (const float *)crl_tensor_data(st) + n * T * H, (size_t)H * sizeof *d);
            else
                for (int64_t j = 0; j < H; j++)
                    d[n * H + j] = (float)crl_tensor_flat_get(st, n * T * H + j);
    }
    const crl_tensor *ii = crl_td_get_k(td, mod->init);
    *have_init = ii != NULL;
    if (ii) {
        int64_t one = 1;
        if (!has_shape(td, ii, 1, &one) && !has_shape(td, ii, 0, NULL))
            return bad_shape(mod, td, mod->init, ii, "[1] (or nothing)", err);
        float *d = crl_tensor_data(mod->is_init);
        for (int64_t i = 0; i < rows; i++)
            d[i] = crl_tensor_flat_get(ii, i) != 0 ? 1.0f : 0.0f;
    }
    mod->N = N;
    mod->T = T;
    return CRL_OK;
}

/* Set key to a float32 [batch..., extra...] tensor (in place when one is there) and return its data. */
static float *out_tensor(const char *who, crl_td *td, const crl_td_key *k, int n_extra, const int64_t *extra,
                         crl_error *err)
{
    crl_tensor *t = crl_td_get_k(td, k);
    if (t && crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t) && has_shape(td, t, n_extra, extra))
        return crl_tensor_data(t);
    int bn = crl_td_batch_ndim(td);
    if (bn + n_extra > CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_SHAPE, "module '%s': key '%s': too many batch dims", who, crl_td_key_str(k));
        return NULL;
    }
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, crl_td_batch_shape(td), (size_t)bn * sizeof *shape);
    memcpy(shape + bn, extra, (size_t)n_extra * sizeof *shape);
    crl_error e;
    crl_error_clear(&e);
    t = crl_tensor_new(CRL_F32, bn + n_extra, shape, &e);
    if (!t) {
        crl_error_pass(err, &e, CRL_E_NOMEM);
        return NULL;
    }
    int rc = crl_td_set_k(td, k, t, err);
    crl_tensor_unref(t);
    if (rc) {
        crl_error_prefix(err, "module '%s': ", who);
        return NULL;
    }
    return crl_tensor_data(t);
}

static int run(crl_rnn_module *mod, crl_td *td, bool cache, crl_error *err)
{
    bool have_state = false, have_init = false;
    int rc = gather(mod, td, &have_state, &have_init, err);
    if (rc)
        return rc;
    const char *who = crl_rnn_name(mod->net);
    int64_t N = mod->N, T = mod->T, H = crl_rnn_hidden_size(mod->net);
    bool lstm = mod->n_state == 2;
    const crl_tensor *y;
    if (cache) {
        y = crl_rnn_forward(mod->net, mod->x, have_state ? mod->h0 : NULL, have_state && lstm ? mod->c0 : NULL,
                            have_init ? mod->is_init : NULL, err);
        if (!y)
            return CRL_E_INVALID;
    } else {
        if ((rc = buf(&mod->y, 3, (int64_t[]){ N, T, H }, err)) ||
            (rc = crl_rnn_infer(mod->net, mod->x, have_state ? mod->h0 : NULL, have_state && lstm ? mod->c0 : NULL,
                                have_init ? mod->is_init : NULL, mod->y, NULL, NULL, err)))
            return rc;
        y = mod->y;
    }
    float *o = out_tensor(who, td, mod->out, 1, &H, err);
    if (!o)
        return CRL_E_INVALID;
    memcpy(o, crl_tensor_data(y), (size_t)(N * T * H) * sizeof *o);
    /* Each step's state, from the network's time-major [(T+1), N, H] to the td's [N, T, 1, H]. */
    int64_t one_h[2] = { 1, H };
    for (int s = 0; s < mod->n_state; s++) {
        const float *st = crl__rnn_states(mod->net, !cache, s == 1);
        float *d = out_tensor(who, td, mod->next_state[s], 2, one_h, err);
        if (!d)
            return CRL_E_INVALID;
        for (int64_t n = 0; n < N; n++)
            for (int64_t t = 0; t < T; t++)
                memcpy(d + (n * T + t) * H, st + ((t + 1) * N + n) * H, (size_t)H * sizeof *d);
    }
    return CRL_OK;
}

int crl_rnn_module_forward(crl_rnn_module *mod, crl_td *td, crl_error *err)
{
    return run(mod, td, true, err);
}

int crl_rnn_module_infer(crl_rnn_module *mod, crl_td *td, crl_error *err)
{
    return run(mod, td, false, err);
}

int crl_rnn_module_backward(crl_rnn_module *mod, const crl_tensor *grad_out, crl_tensor **grad_in, crl_error *err)
{
    const char *who = crl_rnn_name(mod->net);
    if (!crl_rnn_last_h(mod->net) || !mod->N)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': backward needs a crl_rnn_module_forward first", who);
    int64_t N = mod->N, T = mod->T, H = crl_rnn_hidden_size(mod->net);
    if (!grad_out || crl_tensor_numel(grad_out) != N * T * H || crl_tensor_ndim(grad_out) < 1 ||
        crl_tensor_shape(grad_out)[crl_tensor_ndim(grad_out) - 1] != H) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': grad_out has shape %s but the last forward wrote %" PRId64
                             " rows of %" PRId64 " features to '%s'", who,
                             grad_out ? crl__shape_fmt(b, crl_tensor_ndim(grad_out), crl_tensor_shape(grad_out)) : "NULL",
                             N * T, H, crl_td_key_str(mod->out));
    }
    int rc = buf(&mod->gout, 3, (int64_t[]){ N, T, H }, err);
    if (rc)
        return rc;
    float *g = crl_tensor_data(mod->gout);
    if (crl_tensor_dtype(grad_out) == CRL_F32 && crl_tensor_is_contiguous(grad_out))
        memcpy(g, crl_tensor_data(grad_out), (size_t)(N * T * H) * sizeof *g);
    else
        for (int64_t i = 0; i < N * T * H; i++)
            g[i] = (float)crl_tensor_flat_get(grad_out, i);
    return crl_rnn_backward(mod->net, mod->gout, NULL, NULL, grad_in, NULL, NULL, err);
}
