/* Shared helpers of the standard transforms: key pairs, spec and td lookups, registration. */
#include "config.h"
#include "transforms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tf_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void tf_keys_free(tf_keys *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n; i++) {
        free(k->in ? k->in[i] : NULL);
        free(k->out ? k->out[i] : NULL);
    }
    free(k->in);
    free(k->out);
    k->n = 0;
    k->in = k->out = NULL;
}

int tf_keys_read(const crl_opts *o, const char *in_name, const char *out_name, bool allow_empty, const char *who,
                 tf_keys *k, crl_error *err)
{
    size_t nin = 0, nout = 0;
    int rc;
    const char *const *in = NULL, *const *out = NULL;
    memset(k, 0, sizeof *k);
    if ((rc = crl_opts_list(o, in_name, &nin, &in, err)))
        return rc;
    if (out_name && (rc = crl_opts_list(o, out_name, &nout, &out, err)))
        return rc;
    if (nin == 0 && !allow_empty)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: %s is empty; name at least one key", crl_opts_origin(o, in_name),
                             crl_opts_section(o), in_name, who);
    if (nout != 0 && nout != nin)
        return crl_error_set(err, CRL_E_CONFIG,
                             "%s: [%s] %s has %zu keys but %s (%s) has %zu; give one out key per in key, or none "
                             "to write in place",
                             crl_opts_origin(o, out_name), crl_opts_section(o), out_name, nout, in_name,
                             crl_opts_origin(o, in_name), nin);
    k->in = calloc(nin ? nin : 1, sizeof *k->in);
    k->out = calloc(nin ? nin : 1, sizeof *k->out);
    if (!k->in || !k->out) {
        tf_keys_free(k);
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    }
    for (size_t i = 0; i < nin; i++) {
        k->n = i + 1;
        k->in[i] = tf_strdup(in[i]);
        k->out[i] = tf_strdup(nout ? out[i] : in[i]);
        if (!k->in[i] || !k->out[i]) {
            tf_keys_free(k);
            return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        }
    }
    return CRL_OK;
}

crl_spec **tf_specs_owner(crl_transform_specs *s, const char *key, crl_spec **leaf)
{
    crl_spec **members[] = { &s->observation, &s->reward, &s->done, &s->state, &s->action };
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        crl_spec *c = *members[i];
        crl_spec *l = c ? crl_spec_composite_get(c, key) : NULL;
        if (l) {
            if (leaf)
                *leaf = l;
            return members[i];
        }
    }
    return NULL;
}

static void append_leaves(char *buf, size_t cap, size_t *len, const crl_spec *c, const char *prefix)
{
    for (size_t i = 0; c && i < crl_spec_composite_len(c); i++) {
        const char *k = crl_spec_composite_key_at(c, i);
        crl_spec *child = crl_spec_composite_at(c, i);
        char full[512];
        snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", k);
        if (crl_spec_get_kind(child) == CRL_SPEC_COMPOSITE) {
            append_leaves(buf, cap, len, child, full);
            continue;
        }
        if (*len < cap)
            *len += (size_t)snprintf(buf + *len, cap - *len, "%s'%s'", *len ? ", " : "", full);
    }
}

crl_spec *tf_specs_need(crl_transform_specs *s, const char *key, const char *who, crl_error *err)
{
    crl_spec *leaf = NULL;
    if (tf_specs_owner(s, key, &leaf) && crl_spec_get_kind(leaf) != CRL_SPEC_COMPOSITE)
        return leaf;
    char avail[768] = "";
    size_t len = 0;
    append_leaves(avail, sizeof avail, &len, s->observation, "");
    append_leaves(avail, sizeof avail, &len, s->reward, "");
    append_leaves(avail, sizeof avail, &len, s->done, "");
    append_leaves(avail, sizeof avail, &len, s->state, "");
    append_leaves(avail, sizeof avail, &len, s->action, "");
    crl_error_set(err, CRL_E_NOT_FOUND, "%s: key '%s' is not among the env's outputs; available keys: %s", who, key,
                  len ? avail : "(none)");
    return NULL;
}

crl_tensor *tf_td_need(const crl_td *td, const char *key, const char *who, crl_error *err)
{
    crl_tensor *t = crl_td_get(td, key);
    if (!t)
        crl_transform_missing_td_key(err, who, key, td);
    return t;
}

int tf_specs_put(crl_transform_specs *s, const char *key, crl_spec *child, crl_error *err)
{
    crl_spec **owner = tf_specs_owner(s, key, NULL);
    if (!owner)
        owner = &s->observation;
    int rc = crl_spec_composite_set(*owner, key, child, err);
    crl_spec_unref(child);
    return rc;
}

int tf_register(crl_host *host, const char *name, const char *description, const crl_option *options,
                const crl_transform_ops *ops, crl_error *err)
{
    crl_component c = { sizeof(crl_component), CRL_KIND_TRANSFORM, name, description, options, ops };
    return crl_host_register(host, &c, err);
}

/* Appends s quoted as Python does ('it\'s') at out + *len (out may be NULL: count only). */
static void put_pystr(char *out, size_t *len, const char *s, size_t n)
{
    if (out)
        out[*len] = '\'';
    ++*len;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'' || s[i] == '\\') {
            if (out)
                out[*len] = '\\';
            ++*len;
        }
        if (out)
            out[*len] = s[i];
        ++*len;
    }
    if (out)
        out[*len] = '\'';
    ++*len;
}

static void put_raw(char *out, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (out)
        memcpy(out + *len, s, n);
    *len += n;
}

static size_t pylist(char *out, size_t n, char *const *keys)
{
    size_t len = 0;
    put_raw(out, &len, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            put_raw(out, &len, ", ");
        const char *k = keys[i];
        if (!strchr(k, '.')) {
            put_pystr(out, &len, k, strlen(k));
            continue;
        }
        put_raw(out, &len, "(");
        for (const char *p = k;;) {
            const char *dot = strchr(p, '.');
            put_pystr(out, &len, p, dot ? (size_t)(dot - p) : strlen(p));
            if (!dot)
                break;
            put_raw(out, &len, ", ");
            p = dot + 1;
        }
        put_raw(out, &len, ")");
    }
    put_raw(out, &len, "]");
    return len;
}

char *tf_pylist(size_t n, char *const *keys)
{
    char *out = malloc(pylist(NULL, n, keys) + 1);
    if (out)
        out[pylist(out, n, keys)] = '\0';
    return out;
}
