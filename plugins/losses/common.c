/* plugins/losses: helpers shared by the losses (options, specs, batch access, checkpoints). */
#include "config.h"
#include "losses.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ls_net_opts_read(const crl_opts *opts, const char *who, ls_net_opts *out, crl_error *err)
{
    size_t n;
    const double *cells;
    const char *act, *key;
    int rc;
    if ((rc = crl_opts_string(opts, "in_key", &key, err)) ||
        (rc = crl_opts_doubles(opts, "num_cells", &n, &cells, err)) ||
        (rc = crl_opts_string(opts, "activation", &act, err)) || (rc = crl_activation_from_name(act, &out->act, err)))
        return rc;
    if (!*key || strlen(key) >= sizeof out->in_key)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_key: an observation key of 1 to %zu bytes", who,
                             crl_opts_section(opts), sizeof out->in_key - 1);
    strcpy(out->in_key, key);
    if (n > LS_MAX_CELLS)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] num_cells: at most %d hidden layers", who,
                             crl_opts_section(opts), LS_MAX_CELLS);
    out->n_cells = (int)n;
    for (size_t i = 0; i < n; i++) {
        if (cells[i] < 1 || cells[i] != floor(cells[i]) || cells[i] > 1e6)
            return crl_error_set(err, CRL_E_CONFIG, "%s: %s: [%s] num_cells: %g is not a layer width (1..1000000)",
                                 who, crl_opts_origin(opts, "num_cells"), crl_opts_section(opts), cells[i]);
        out->cells[i] = (int64_t)cells[i];
    }
    return CRL_OK;
}

int ls_obs_shape(const crl_spec *obs_spec, const char *key, const char *who, int *nd, int64_t *shape,
                 bool *images_u8, crl_error *err)
{
    if (images_u8)
        *images_u8 = false;
    const crl_spec *s = crl_spec_get_kind(obs_spec) == CRL_SPEC_COMPOSITE ? crl_spec_composite_get(obs_spec, key)
                                                                           : obs_spec;
    if (!s) {
        char keys[512] = "";
        for (size_t i = 0; i < crl_spec_composite_len(obs_spec); i++) {
            size_t l = strlen(keys);
            snprintf(keys + l, sizeof keys - l, "%s'%s'", i ? ", " : "", crl_spec_composite_key_at(obs_spec, i));
        }
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the env has no observation '%s' (it has %s); set in_key",
                             who, key, keys);
    }
    bool u8 = images_u8 && crl_spec_get_kind(s) != CRL_SPEC_COMPOSITE && crl_spec_dtype(s) == CRL_U8;
    if (crl_spec_get_kind(s) == CRL_SPEC_COMPOSITE || (crl_spec_dtype(s) != CRL_F32 && !u8))
        return crl_error_set(err, CRL_E_DTYPE, "%s: observation '%s' is %s, but the networks read float32 "
                             "(add a transform that makes it so: ToTensorImage for pixels)", who, key,
                             crl_spec_get_kind(s) == CRL_SPEC_COMPOSITE ? "a Composite"
                                                                       : crl_dtype_name(crl_spec_dtype(s)));
    if (crl_spec_ndim(s) < 1 || crl_spec_shape(s)[crl_spec_ndim(s) - 1] < 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: observation '%s' has no feature dim", who, key);
    /* The dims after the batch's: [4] for a vector, [C, H, W] for pixels. */
    int bdims = s != obs_spec ? crl_spec_ndim(obs_spec) : crl_spec_ndim(s) - 1;
    *nd = crl_spec_ndim(s) - bdims;
    if (*nd < 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: observation '%s' has no feature dim", who, key);
    for (int d = 0; d < *nd; d++)
        shape[d] = crl_spec_shape(s)[bdims + d];
    if (u8 && *nd != 3)
        return crl_error_set(err, CRL_E_DTYPE, "%s: observation '%s' is uint8 but not an image [C, H, W] (it has %d "
                             "dims after the batch's); a network reads uint8 only as frames for a conv encoder (cast "
                             "it to float32 otherwise)", who, key, *nd);
    if (images_u8)
        *images_u8 = u8;
    return CRL_OK;
}

int ls_obs_features(const crl_spec *obs_spec, const char *key, const char *who, int64_t *out, crl_error *err)
{
    int nd;
    int64_t shape[CRL_MAX_DIMS];
    int rc = ls_obs_shape(obs_spec, key, who, &nd, shape, NULL, err);
    if (rc)
        return rc;
    /* Only the last dim becomes the input width: more dims after the batch's
     * (pixels [C, H, W]) would feed the first layer the wrong size. */
    if (nd != 1) {
        char dims[160] = "";
        for (int d = 0; d < nd; d++) {
            size_t l = strlen(dims);
            snprintf(dims + l, sizeof dims - l, "%s%lld", d ? ", " : "", (long long)shape[d]);
        }
        return crl_error_set(err, CRL_E_SHAPE, "%s: observation '%s' is [%s] per env, but the networks read vectors; "
                             "flatten it (a FlattenObservation transform) or set in_key to a vector observation",
                             who, key, dims);
    }
    *out = shape[0];
    return CRL_OK;
}

const crl_spec *ls_action_leaf(const crl_spec *action_spec, const char *who, crl_error *err)
{
    if (crl_spec_get_kind(action_spec) != CRL_SPEC_COMPOSITE)
        return action_spec;
    const crl_spec *s = crl_spec_composite_get(action_spec, "action");
    if (!s)
        crl_error_set(err, CRL_E_NOT_FOUND, "%s: the env's action spec has no 'action' entry", who);
    return s;
}

crl_mlp *ls_net(const crl_opts *opts, const char *role, const char *name, int nd, const int64_t *shape,
                int64_t out, const ls_net_opts *no, crl_rng *rng, crl_error *err)
{
    crl_net_defaults def = { sizeof def, no->cells, no->n_cells, no->act };
    return crl_net_new(opts, role, name, nd, shape, out, &def, rng, err);
}

crl_mlp *ls_mlp(const crl_opts *opts, const char *role, const char *name, int64_t in, int64_t out,
                const ls_net_opts *no, crl_rng *rng, crl_error *err)
{
    return ls_net(opts, role, name, 1, &in, out, no, rng, err);
}

int64_t ls_rows(const crl_td *td)
{
    int64_t rows = 1;
    for (int d = 0; d < crl_td_batch_ndim(td); d++)
        rows *= crl_td_batch_shape(td)[d];
    return rows;
}

int ls_batch_f32(crl_td *batch, const char *key, int64_t rows, int64_t width, const char *who, const float **data,
                 crl_tensor **owned, crl_error *err)
{
    *owned = NULL;
    crl_tensor *t = crl_td_get(batch, key);
    if (!t)
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no '%s'", who, key);
    if (crl_tensor_numel(t) != rows * width)
        return crl_error_set(err, CRL_E_SHAPE, "%s: '%s' holds %lld values, expected %lld (%lld rows x %lld)", who,
                             key, (long long)crl_tensor_numel(t), (long long)(rows * width), (long long)rows,
                             (long long)width);
    if (crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t)) {
        *data = crl_tensor_data(t);
        return CRL_OK;
    }
    crl_error e;
    crl_error_clear(&e);
    if (!(*owned = crl_tensor_cast(t, CRL_F32, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    *data = crl_tensor_data(*owned);
    return CRL_OK;
}

int ls_set_scalar(crl_td *losses, const char *key, double v, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_tensor_new(CRL_F32, 0, NULL, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_flat_set(t, 0, v);
    int rc = crl_td_set(losses, key, t, err);
    crl_tensor_unref(t);
    return rc;
}

int ls_set_rows(crl_td *batch, const char *key, const float *v, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_tensor_new(CRL_F32, crl_td_batch_ndim(batch), crl_td_batch_shape(batch), &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    memcpy(crl_tensor_data(t), v, crl_tensor_nbytes(t));
    int rc = crl_td_set(batch, key, t, err);
    crl_tensor_unref(t);
    return rc;
}

int ls_save_doubles(crl_ckpt_writer *w, const char *prefix, const char *name, const double *v, size_t n,
                    crl_error *err)
{
    char sec[CRL_CKPT_NAME_MAX + 1];
    snprintf(sec, sizeof sec, "%s/%s", prefix, name);
    uint8_t *b = malloc(n ? 8 * n : 1);
    if (!b)
        return crl_error_set(err, CRL_E_NOMEM, "section '%s': out of memory", sec);
    for (size_t i = 0; i < n; i++)
        crl_ckpt_put_f64(b + 8 * i, v[i]);
    int rc = crl_ckpt_write(w, sec, b, 8 * n, err);
    free(b);
    return rc;
}

/* Section PREFIX/NAME (its name into sec) holding exactly `want` bytes (`what` says of what, for the
 * message), or NULL with *rc set. */
static const uint8_t *sized_section(const crl_ckpt_reader *r, const char *prefix, const char *name, size_t want,
                                    const char *what, char sec[CRL_CKPT_NAME_MAX + 1], int *rc, crl_error *err)
{
    snprintf(sec, CRL_CKPT_NAME_MAX + 1, "%s/%s", prefix, name);
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    const uint8_t *b = crl_ckpt_section(r, sec, &len, &e);
    if (!b) {
        *rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
        return NULL;
    }
    if (len != want) {
        *rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s' holds %zu bytes; expected %zu (%s)",
                            crl_ckpt_path(r), sec, len, want, what);
        return NULL;
    }
    return b;
}

int ls_load_doubles(const crl_ckpt_reader *r, const char *prefix, const char *name, double *v, size_t n,
                    crl_error *err)
{
    char sec[CRL_CKPT_NAME_MAX + 1], what[48];
    snprintf(what, sizeof what, "%zu doubles", n);
    int rc;
    const uint8_t *b = sized_section(r, prefix, name, 8 * n, what, sec, &rc, err);
    if (!b)
        return rc;
    for (size_t i = 0; i < n; i++)
        v[i] = crl_ckpt_get_f64(b + 8 * i);
    return CRL_OK;
}

int ls_check_field(const crl_ckpt_reader *r, const char *prefix, const char *name, const char *field, double v,
                   bool ok, const char *want, crl_error *err)
{
    if (ok)
        return CRL_OK;
    return crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s/%s': %s = %g; expected %s", crl_ckpt_path(r), prefix,
                         name, field, v, want);
}

int ls_check_count(const crl_ckpt_reader *r, const char *prefix, const char *name, const char *field, double v,
                   crl_error *err)
{
    return ls_check_field(r, prefix, name, field, v, v >= 0 && v <= 0x1p53 && v == floor(v),
                          "a whole number in [0, 2^53]", err);
}

int ls_save_rng(crl_ckpt_writer *w, const char *prefix, const crl_rng *rng, crl_error *err)
{
    char sec[CRL_CKPT_NAME_MAX + 1];
    uint8_t b[CRL_CKPT_RNG_BYTES];
    snprintf(sec, sizeof sec, "%s/rng", prefix);
    crl_ckpt_put_rng(b, rng);
    return crl_ckpt_write(w, sec, b, sizeof b, err);
}

int ls_load_rng(const crl_ckpt_reader *r, const char *prefix, crl_rng *rng, crl_error *err)
{
    char sec[CRL_CKPT_NAME_MAX + 1];
    int rc;
    const uint8_t *b = sized_section(r, prefix, "rng", CRL_CKPT_RNG_BYTES, "a random stream", sec, &rc, err);
    if (!b)
        return rc;
    if (!crl_ckpt_get_rng(b, rng))
        return crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s': word index %u or reserved word %u (bytes 40-47) "
                             "is no stream's (index 0..4, reserved 0)", crl_ckpt_path(r), sec,
                             (unsigned)crl_ckpt_get_u32(b + 40), (unsigned)crl_ckpt_get_u32(b + 44));
    return CRL_OK;
}

int64_t ls_anneal_calls(int64_t calls, int64_t frames, int64_t steps)
{
    /* After steps / frames + 1 calls the value has passed its end by a whole step and is clamped there. */
    int64_t enough = (steps > 0 ? steps : 0) / (frames > 0 ? frames : 1) + 2;
    return calls < enough ? calls : enough;
}

int ls_mlp_save(crl_mlp *m, crl_ckpt_writer *w, const char *prefix, const char *name, crl_error *err)
{
    char sec[CRL_CKPT_NAME_MAX + 1];
    snprintf(sec, sizeof sec, "%s/%s", prefix, name);
    return crl_mlp_save(m, w, sec, err);
}

int ls_mlp_load(crl_mlp *m, const crl_ckpt_reader *r, const char *prefix, const char *name, crl_error *err)
{
    char sec[CRL_CKPT_NAME_MAX + 1];
    snprintf(sec, sizeof sec, "%s/%s", prefix, name);
    return crl_mlp_load(m, r, sec, err);
}

double ls_distance(bool smooth_l1, double d, double *grad)
{
    if (!smooth_l1) {
        *grad = 2 * d;
        return d * d;
    }
    if (fabs(d) < 1) {
        *grad = d;
        return 0.5 * d * d;
    }
    *grad = d > 0 ? 1 : -1;
    return fabs(d) - 0.5;
}

int ls_action_index(crl_td *batch, int64_t rows, int64_t n, const char *who, int64_t *idx, crl_error *err)
{
    crl_tensor *action = crl_td_get(batch, "action");
    if (!action)
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no 'action'", who);
    /* One value per row is an index, n a one-hot (categorical_action_encoding true or false); with n = 1 both
     * read as action 0 once checked. */
    bool onehot = crl_tensor_numel(action) == rows * n && (n > 1 || crl_tensor_ndim(action) > crl_td_batch_ndim(batch));
    if (!onehot && crl_tensor_numel(action) != rows)
        return crl_error_set(err, CRL_E_SHAPE, "%s: 'action' holds %lld values for %lld rows (expected an index or "
                             "a one-hot of %lld per row)", who, (long long)crl_tensor_numel(action), (long long)rows,
                             (long long)n);
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = 0;
        if (onehot) {
            int64_t ones = 0;
            bool binary = true;
            for (int64_t j = 0; j < n; j++) {
                double v = crl_tensor_flat_get(action, r * n + j);
                binary &= v == 0 || v == 1;
                if (v == 1) {
                    a = j;
                    ones++;
                }
            }
            if (!binary || ones != 1)
                return crl_error_set(err, CRL_E_RANGE, "%s: 'action' row %lld is not one-hot (%lld ones among %lld "
                                     "values%s)", who, (long long)r, (long long)ones, (long long)n,
                                     binary ? "" : ", and values other than 0 and 1");
        } else {
            a = (int64_t)crl_tensor_flat_get(action, r);
        }
        if (a < 0 || a >= n)
            return crl_error_set(err, CRL_E_RANGE, "%s: action %lld of row %lld is outside [0, %lld)", who,
                                 (long long)a, (long long)r, (long long)n);
        idx[r] = a;
    }
    return CRL_OK;
}

int ls_drop_keys(crl_td *td, const char *const *keys, crl_error *err)
{
    for (size_t i = 0; keys[i]; i++) {
        int rc = crl_td_has(td, keys[i]) ? crl_td_del(td, keys[i], err) : CRL_OK;
        if (rc)
            return rc;
    }
    return CRL_OK;
}

int ls_discrete_n(const crl_spec *action_spec, const char *who, const char *instead, int64_t *n, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    const crl_spec *act = ls_action_leaf(action_spec, who, &e);
    if (!act)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    crl_spec_kind k = crl_spec_get_kind(act);
    if (k != CRL_SPEC_CATEGORICAL && k != CRL_SPEC_ONEHOT)
        return crl_error_set(err, CRL_E_INVALID, "%s: needs a discrete action (Categorical or OneHot), the env's is "
                             "%s; use %s for continuous actions", who, crl_spec_kind_name(k), instead);
    *n = crl_spec_n(act);
    return CRL_OK;
}

int ls_batch_terminal(crl_td *batch, int64_t rows, const char *who, const float **data, crl_tensor **owned,
                      crl_error *err)
{
    *owned = NULL;
    const char *key = crl_td_get(batch, "next.terminated") ? "next.terminated" : "next.done";
    if (!crl_td_get(batch, key))
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has neither 'next.terminated' nor 'next.done'",
                             who);
    return ls_batch_f32(batch, key, rows, 1, who, data, owned, err);
}

int ls_set_vec(crl_td *td, const char *key, const float *v, int64_t n, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_tensor_new(CRL_F32, 1, &n, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    memcpy(crl_tensor_data(t), v, (size_t)n * sizeof *v);
    int rc = crl_td_set(td, key, t, err);
    crl_tensor_unref(t);
    return rc;
}

const char *const ls_net_keys[] = { "in_key", "num_cells", "activation", NULL };

int ls_reject_set(const crl_opts *opts, const char *who, const char *const *keys, crl_error *err)
{
    for (size_t i = 0; keys[i]; i++)
        if (crl_opts_is_set(opts, keys[i]))
            return crl_error_set(err, CRL_E_CONFIG, "%s: %s: '%s' is decided by the modules the loss was given "
                                 "(their networks, keys and exploration); drop it", who,
                                 crl_opts_origin(opts, keys[i]), keys[i]);
    return CRL_OK;
}

int ls_module_key(crl_tdmodule *m, const char *who, const char *what, const char **key, crl_error *err)
{
    size_t n = crl_tdmodule_num_in_keys(m);
    if (n != 1)
        return crl_error_set(err, CRL_E_INVALID, "%s: the %s module '%s' reads %zu keys; this loss takes a %s reading "
                             "one observation key", who, what, crl_mlp_name(crl_tdmodule_net_get(m)), n, what);
    *key = crl_tdmodule_in_key(m, 0);
    return CRL_OK;
}

int ls_rnn_env_check(const crl_spec *obs_spec, const crl_rnn_module *m, const char *who, const char *role,
                     int64_t hidden, crl_error *err)
{
    const char *kn = crl_rnn_kind_name(crl_rnn_kind_get(crl_rnn_module_net_get((crl_rnn_module *)m)));
    bool comp = crl_spec_get_kind(obs_spec) == CRL_SPEC_COMPOSITE;
    for (int i = 0; i < 3; i++) {
        const char *key = i < 2 ? crl_rnn_module_state_key(m, i) : "is_init";
        if (!key)
            continue;
        const crl_spec *s = comp ? crl_spec_composite_get(obs_spec, key) : NULL;
        int n = s ? crl_spec_ndim(s) : 0;
        bool ok = s && (i == 2 || (n >= 2 && crl_spec_shape(s)[n - 2] == 1 && crl_spec_shape(s)[n - 1] == hidden &&
                                   crl_spec_dtype(s) == CRL_F32));
        if (ok)
            continue;
        if (i == 2)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [net.%s] type = %s resets its state where 'is_init' is set, "
                                 "and the env has no 'is_init': add a transform with type = InitTracker", who, role,
                                 kn);
        return crl_error_set(err, CRL_E_CONFIG, "%s: [net.%s] type = %s carries its state in '%s' [1, %lld], which the "
                             "env %s: add a transform with type = TensorDictPrimer and primers.%s = float32 [1, %lld] "
                             "0", who, role, kn, key, (long long)hidden, s ? "has with another shape or dtype"
                             : "does not have", key, (long long)hidden);
    }
    return CRL_OK;
}

int ls_put_scalar(crl_td *losses, const char *key, double v, crl_error *err)
{
    crl_tensor *t = crl_td_get(losses, key);
    if (t && crl_tensor_dtype(t) == CRL_F32 && crl_tensor_ndim(t) == 0) {
        crl_tensor_flat_set(t, 0, v);
        return CRL_OK;
    }
    return ls_set_scalar(losses, key, v, err);
}

int ls_put_rows(crl_td *batch, const char *key, const float *v, crl_error *err)
{
    crl_tensor *t = crl_td_get(batch, key);
    int nb = crl_td_batch_ndim(batch);
    if (t && crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t) && crl_tensor_ndim(t) == nb &&
        !memcmp(crl_tensor_shape(t), crl_td_batch_shape(batch), (size_t)nb * sizeof(int64_t))) {
        memcpy(crl_tensor_data(t), v, crl_tensor_nbytes(t));
        return CRL_OK;
    }
    return ls_set_rows(batch, key, v, err);
}
