/* Helpers shared by the action, key and episode-control transforms: spec recasting, key lists, per-env rows. */
#include "config.h"
#include "action_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

crl_spec *tfa_spec_cast(const crl_spec *s, crl_dtype dt, crl_error *err)
{
    int nd = crl_spec_ndim(s);
    const int64_t *sh = crl_spec_shape(s);
    switch (crl_spec_get_kind(s)) {
    case CRL_SPEC_UNBOUNDED:
        return crl_spec_unbounded(dt, nd, sh, err);
    case CRL_SPEC_BOUNDED:
        return crl_spec_bounded_t(dt, crl_spec_low(s), crl_spec_high(s), err);
    case CRL_SPEC_CATEGORICAL:
        return crl_spec_categorical(crl_spec_n(s), dt, nd, sh, err);
    case CRL_SPEC_ONEHOT:
        return crl_spec_onehot(crl_spec_n(s), dt, nd, sh, err);
    case CRL_SPEC_MULTI_CATEGORICAL:
        return crl_spec_multi_categorical(crl_spec_nvec(s), dt, nd, sh, err);
    case CRL_SPEC_MULTI_ONEHOT:
        return crl_spec_multi_onehot(crl_spec_nvec(s), crl_spec_nvec_len(s), dt, nd, sh, err);
    case CRL_SPEC_BINARY:
        return crl_spec_binary(crl_spec_n(s), dt, nd, sh, err);
    default:
        crl_error_set(err, CRL_E_INVALID, "cannot cast a Composite spec to %s", crl_dtype_name(dt));
        return NULL;
    }
}

size_t tfa_strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

bool tfa_strv_has(char *const *v, const char *s)
{
    for (size_t i = 0; v && v[i]; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

void tfa_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static bool push(char ***v, size_t *n, size_t *cap, const char *s)
{
    if (*n + 2 > *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        char **nv = realloc(*v, nc * sizeof *nv);
        if (!nv)
            return false;
        *v = nv;
        *cap = nc;
    }
    char *d = tf_strdup(s);
    if (!d)
        return false;
    (*v)[(*n)++] = d;
    (*v)[*n] = NULL;
    return true;
}

static bool collect(const crl_spec *c, const char *prefix, char ***v, size_t *n, size_t *cap)
{
    for (size_t i = 0; c && i < crl_spec_composite_len(c); i++) {
        const char *k = crl_spec_composite_key_at(c, i);
        crl_spec *child = crl_spec_composite_at(c, i);
        size_t len = strlen(prefix) + strlen(k) + 2;
        char *full = malloc(len);
        if (!full)
            return false;
        snprintf(full, len, "%s%s%s", prefix, *prefix ? "." : "", k);
        bool ok = crl_spec_get_kind(child) == CRL_SPEC_COMPOSITE ? collect(child, full, v, n, cap)
                                                                 : push(v, n, cap, full);
        free(full);
        if (!ok)
            return false;
    }
    return true;
}

char **tfa_spec_leaf_keys(const crl_spec *comp)
{
    char **v = calloc(1, sizeof *v);
    size_t n = 0, cap = 1;
    if (!v)
        return NULL;
    if (!collect(comp, "", &v, &n, &cap)) {
        tfa_strv_free(v);
        return NULL;
    }
    return v;
}

int tfa_keys_from(tf_keys *k, char *const *v, const char *who, crl_error *err)
{
    size_t n = tfa_strv_len(v);
    memset(k, 0, sizeof *k);
    k->in = calloc(n ? n : 1, sizeof *k->in);
    k->out = calloc(n ? n : 1, sizeof *k->out);
    if (!k->in || !k->out) {
        tf_keys_free(k);
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    }
    for (size_t i = 0; i < n; i++) {
        k->n = i + 1;
        k->in[i] = tf_strdup(v[i]);
        k->out[i] = tf_strdup(v[i]);
        if (!k->in[i] || !k->out[i]) {
            tf_keys_free(k);
            return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        }
    }
    return CRL_OK;
}

int tfa_opt_dtype(const crl_opts *o, const char *name, crl_dtype *out, crl_error *err)
{
    const char *s = NULL;
    int rc;
    if ((rc = crl_opts_string(o, name, &s, err)))
        return rc;
    if (!crl_dtype_from_name(s, out))
        return crl_error_set(err, CRL_E_CONFIG,
                             "%s: [%s] %s = '%s' is not a dtype; use one of bool, uint8, int8, int16, int32, "
                             "int64, float16, float32, float64",
                             crl_opts_origin(o, name), crl_opts_section(o), name, s);
    return CRL_OK;
}

bool tfa_flag(const crl_tensor *t, int64_t i)
{
    return crl_tensor_flat_get(t, i) != 0.0;
}

void tfa_set_flag(crl_tensor *t, int64_t i, bool v)
{
    crl_tensor_flat_set(t, i, v ? 1.0 : 0.0);
}

int64_t tfa_row_elems(const crl_tensor *t, int64_t num)
{
    return num > 0 ? crl_tensor_numel(t) / num : 0;
}

void tfa_row_copy(crl_tensor *dst, const crl_tensor *src, int64_t i, int64_t num)
{
    int64_t r = tfa_row_elems(src, num);
    if (crl_tensor_is_contiguous(dst) && crl_tensor_is_contiguous(src) &&
        crl_tensor_dtype(dst) == crl_tensor_dtype(src)) {
        size_t es = crl_dtype_size(crl_tensor_dtype(src));
        memcpy((char *)crl_tensor_data(dst) + (size_t)(i * r) * es,
               (const char *)crl_tensor_data(src) + (size_t)(i * r) * es, (size_t)r * es);
        return;
    }
    for (int64_t j = 0; j < r; j++)
        crl_tensor_flat_set(dst, i * r + j, crl_tensor_flat_get(src, i * r + j));
}

const char *tfa_env_label(char *buf, size_t n, int64_t i, int64_t num)
{
    if (num <= 1)
        snprintf(buf, n, "env %lld (the only env)", (long long)i);
    else
        snprintf(buf, n, "env %lld of %lld", (long long)i, (long long)num);
    return buf;
}
