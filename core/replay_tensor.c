/* Tensor-only replay buffers (TorchRL's ReplayBuffer over a ListStorage / LazyTensorStorage of plain tensors):
 * each tensor is stored as the one entry CRL_REPLAY_TENSOR_KEY of an item, so every storage, sampler, writer
 * and checkpoint of the TensorDict buffer serves it unchanged. */
#include "config.h"
#include "replay-private.h"

#include <glib.h>

/* *out: a td of batch [n] (extend) or [] (add) holding t. */
static int wrap_items(crl_tensor *t, bool batched, const char *fn, crl_td **out, crl_error *err)
{
    if (batched && crl_tensor_ndim(t) < 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: a 0-dim tensor holds one item; extend along the first dim of a "
                             "tensor of at least 1 dim (or use crl_replay_add_tensor)", fn);
    crl_error e;
    crl_error_clear(&e);
    crl_td *td = crl_td_new(batched ? 1 : 0, crl_tensor_shape(t), &e);
    if (!td || crl_td_set(td, CRL_REPLAY_TENSOR_KEY, t, &e)) {
        crl_td_unref(td);
        int rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_error_prefix(err, "%s: ", fn);
        return rc;
    }
    *out = td;
    return CRL_OK;
}

int crl_replay_add_tensor(crl_replay *rb, crl_tensor *item, int64_t *index, crl_error *err)
{
    if (!rb || !item)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_add_tensor: %s is NULL", !rb ? "buffer" : "item");
    crl_td *td = NULL;
    int rc = wrap_items(item, false, "crl_replay_add_tensor", &td, err);
    if (rc)
        return rc;
    rc = crl_replay_add(rb, td, index, err);
    crl_td_unref(td);
    return rc;
}

int crl_replay_extend_tensor(crl_replay *rb, crl_tensor *items, int64_t *index, crl_error *err)
{
    if (!rb || !items)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_extend_tensor: %s is NULL", !rb ? "buffer" : "items");
    crl_td *td = NULL;
    int rc = wrap_items(items, true, "crl_replay_extend_tensor", &td, err);
    if (rc)
        return rc;
    rc = crl_replay_extend(rb, td, index, err);
    crl_td_unref(td);
    return rc;
}

/* The stored tensor of a sampled or fetched td (a new reference), and the rest as *info when asked. */
static crl_tensor *unwrap(crl_td *td, crl_td **info, const char *fn, crl_error *err)
{
    crl_tensor *t = crl_td_get(td, CRL_REPLAY_TENSOR_KEY);
    if (!t) {
        char **keys = crl_td_leaf_keys(td, NULL);
        GString *s = g_string_new(NULL);
        for (size_t i = 0; keys && keys[i]; i++)
            g_string_append_printf(s, "%s'%s'", i ? ", " : "", keys[i]);
        crl_error_set(err, CRL_E_INVALID, "%s: this buffer holds TensorDicts (keys %s), not tensors; use "
                      "crl_replay_sample / crl_replay_get", fn, s->str);
        g_string_free(s, TRUE);
        crl_free(keys);
        crl_td_unref(td);
        return NULL;
    }
    crl_tensor_ref(t);
    if (info) {
        crl_td_del(td, CRL_REPLAY_TENSOR_KEY, NULL);
        *info = td;
    } else {
        crl_td_unref(td);
    }
    return t;
}

crl_tensor *crl_replay_sample_tensor(crl_replay *rb, size_t batch_size, crl_td **info, crl_error *err)
{
    if (info)
        *info = NULL;
    if (!rb) {
        crl_error_set(err, CRL_E_INVALID, "crl_replay_sample_tensor: buffer is NULL");
        return NULL;
    }
    crl_td *td = crl_replay_sample(rb, batch_size, err);
    return td ? unwrap(td, info, "crl_replay_sample_tensor", err) : NULL;
}

crl_tensor *crl_replay_get_tensor(crl_replay *rb, int64_t i, crl_error *err)
{
    if (!rb) {
        crl_error_set(err, CRL_E_INVALID, "crl_replay_get_tensor: buffer is NULL");
        return NULL;
    }
    crl_td *td = crl_replay_get(rb, i, err);
    return td ? unwrap(td, NULL, "crl_replay_get_tensor", err) : NULL;
}
