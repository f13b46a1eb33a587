/* DoubleToFloat and DTypeCastTransform: cast observation leaves forward and action leaves back on the inverse. */
#include "config.h"
#include "action_group.h"

#include <stdlib.h>
#include <string.h>

typedef struct dtc {
    const char *type;
    crl_dtype din, dout;
    tf_keys keys, inv;      /* forward: in -> out; inverse: out (outer) -> in (parent) */
    bool auto_keys, auto_inv, resolved;
} dtc;

static void dtc_destroy(void *p)
{
    dtc *t = p;
    if (!t)
        return;
    tf_keys_free(&t->keys);
    tf_keys_free(&t->inv);
    free(t);
}

static int dtc_create_common(const crl_opts *o, const char *type, crl_dtype din, crl_dtype dout, void **out,
                             crl_error *err)
{
    dtc *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", type);
    t->type = type;
    t->din = din;
    t->dout = dout;
    if (din == dout) {
        free(t);
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] dtype_in and dtype_out are both %s (%s); give two "
                             "different dtypes", crl_opts_origin(o, "dtype_out"), crl_opts_section(o),
                             crl_dtype_name(din), type);
    }
    int rc;
    if ((rc = tf_keys_read(o, "in_keys", "out_keys", true, type, &t->keys, err)) ||
        (rc = tf_keys_read(o, "in_keys_inv", "out_keys_inv", true, type, &t->inv, err))) {
        dtc_destroy(t);
        return rc;
    }
    t->auto_keys = t->keys.n == 0;
    t->auto_inv = t->inv.n == 0;
    *out = t;
    return CRL_OK;
}

static int d2f_create(const crl_opts *o, void **out, crl_error *err)
{
    return dtc_create_common(o, "DoubleToFloat", CRL_F64, CRL_F32, out, err);
}

static int cast_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_dtype din, dout;
    int rc;
    if ((rc = tfa_opt_dtype(o, "dtype_in", &din, err)) || (rc = tfa_opt_dtype(o, "dtype_out", &dout, err)))
        return rc;
    return dtc_create_common(o, "DTypeCastTransform", din, dout, out, err);
}

/* Keys of comp's leaves that have dtype dt. */
static int auto_keys(const crl_spec *comp, crl_dtype dt, tf_keys *k, const char *who, crl_error *err)
{
    char **all = tfa_spec_leaf_keys(comp);
    if (!all)
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    size_t w = 0;
    for (size_t i = 0; all[i]; i++) {
        if (crl_spec_dtype(crl_spec_composite_get(comp, all[i])) == dt)
            all[w++] = all[i];
        else
            free(all[i]);
    }
    all[w] = NULL;
    tf_keys_free(k);
    int rc = tfa_keys_from(k, all, who, err);
    tfa_strv_free(all);
    return rc;
}

static int dtc_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    dtc *t = p;
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if (t->auto_keys && (rc = auto_keys(s->observation, t->din, &t->keys, t->type, err)))
        return rc;
    if (t->auto_inv && (rc = auto_keys(s->action, t->din, &t->inv, t->type, err)))
        return rc;
    t->resolved = true;
    for (size_t i = 0; i < t->keys.n; i++) {
        crl_spec *leaf = tf_specs_need(s, t->keys.in[i], t->type, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        if (crl_spec_dtype(leaf) != t->din)
            return crl_error_set(err, CRL_E_DTYPE, "%s: key '%s' is %s, but this transform casts %s to %s; "
                                 "name a %s key in in_keys", t->type, t->keys.in[i],
                                 crl_dtype_name(crl_spec_dtype(leaf)), crl_dtype_name(t->din),
                                 crl_dtype_name(t->dout), crl_dtype_name(t->din));
        crl_spec *c = tfa_spec_cast(leaf, t->dout, &e);
        if (!c)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        if ((rc = tf_specs_put(s, t->keys.out[i], c, err)))
            return rc;
    }
    for (size_t i = 0; i < t->inv.n; i++) {
        crl_spec *leaf = crl_spec_composite_get(s->action, t->inv.in[i]);
        if (!leaf || crl_spec_get_kind(leaf) == CRL_SPEC_COMPOSITE)
            return crl_transform_missing_key(err, t->type, t->inv.in[i], s->action, "action spec");
        if (crl_spec_dtype(leaf) != t->din)
            return crl_error_set(err, CRL_E_DTYPE, "%s: action key '%s' is %s, but in_keys_inv casts %s back "
                                 "to %s; name a %s action in in_keys_inv", t->type, t->inv.in[i],
                                 crl_dtype_name(crl_spec_dtype(leaf)), crl_dtype_name(t->dout),
                                 crl_dtype_name(t->din), crl_dtype_name(t->din));
        crl_spec *c = tfa_spec_cast(leaf, t->dout, &e);
        if (!c)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        rc = crl_spec_composite_set(s->action, t->inv.out[i], c, err);
        crl_spec_unref(c);
        if (rc)
            return rc;
        if (strcmp(t->inv.in[i], t->inv.out[i]) != 0 && (rc = crl_spec_composite_del(s->action, t->inv.in[i], err)))
            return rc;
    }
    return CRL_OK;
}

/* Replace td[dst] by a cast copy of td[src]. */
static int cast_entry(crl_td *td, const char *src, const char *dst, crl_dtype from, crl_dtype to, const char *who,
                      crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, src, who, &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    if (crl_tensor_dtype(x) != from)
        return crl_error_set(err, CRL_E_DTYPE, "%s: key '%s' is %s, expected %s", who, src,
                             crl_dtype_name(crl_tensor_dtype(x)), crl_dtype_name(from));
    crl_tensor *y = crl_tensor_cast(x, to, &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_td_set(td, dst, y, err);
    crl_tensor_unref(y);
    return rc;
}

static int dtc_call(void *p, crl_td *td, crl_error *err)
{
    dtc *t = p;
    int rc = CRL_OK;
    if (t->auto_keys && !t->resolved) {
        /* Standalone without specs: every leaf of dtype_in, as TorchRL does with in_keys=None. */
        crl_error e;
        crl_error_clear(&e);
        char **keys = crl_td_leaf_keys(td, &e);
        if (!keys)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        for (size_t i = 0; keys[i] && !rc; i++)
            if (crl_tensor_dtype(crl_td_get(td, keys[i])) == t->din)
                rc = cast_entry(td, keys[i], keys[i], t->din, t->dout, t->type, err);
        crl_free(keys);
        return rc;
    }
    for (size_t i = 0; i < t->keys.n; i++)
        if ((rc = cast_entry(td, t->keys.in[i], t->keys.out[i], t->din, t->dout, t->type, err)))
            return rc;
    return CRL_OK;
}

static int dtc_inv(void *p, crl_td *td, crl_error *err)
{
    dtc *t = p;
    int rc;
    for (size_t i = 0; i < t->inv.n; i++) {
        if ((rc = cast_entry(td, t->inv.out[i], t->inv.in[i], t->dout, t->din, t->type, err)))
            return rc;
        if (strcmp(t->inv.in[i], t->inv.out[i]) != 0 && (rc = crl_td_del(td, t->inv.out[i], err)))
            return rc;
    }
    return CRL_OK;
}

static const crl_transform_ops dtc_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = d2f_create,
    .transform_specs = dtc_specs,
    .call = dtc_call,
    .inv = dtc_inv,
    .destroy = dtc_destroy,
};
static const crl_transform_ops cast_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = cast_create,
    .transform_specs = dtc_specs,
    .call = dtc_call,
    .inv = dtc_inv,
    .destroy = dtc_destroy,
};

#define KEY_OPTIONS                                                                                                 \
    { "in_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL,                                                                   \
      "observation keys to cast; empty: every observation leaf of dtype_in" },                                      \
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where the cast values go; empty: in place" },                   \
    { "in_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL,                                                               \
      "the parent's action keys to cast back to dtype_in; empty: every action leaf of dtype_in" },                  \
    { "out_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL, "the action keys as the policy sees them; empty: the same" }

static const crl_option d2f_options[] = { KEY_OPTIONS, CRL_OPTIONS_END };
static const crl_option cast_options[] = {
    { "dtype_in", CRL_OPT_STRING, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "the dtype the parent produces and expects" },
    { "dtype_out", CRL_OPT_STRING, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "the dtype seen after this transform" },
    KEY_OPTIONS,
    CRL_OPTIONS_END
};

int tfa_register_dtype(crl_host *host, crl_error *err)
{
    int rc = tf_register(host, "DoubleToFloat",
                         "cast float64 observations to float32, and float32 actions back to float64", d2f_options,
                         &dtc_ops, err);
    if (rc)
        return rc;
    return tf_register(host, "DTypeCastTransform",
                       "cast leaves from dtype_in to dtype_out (actions back on the inverse)", cast_options, &cast_ops,
                       err);
}
