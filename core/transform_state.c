/* The statistics an env's transforms learned, out and back in (TorchRL's state_dict of a Compose, and the
 * frozen copy of VecNorm an evaluation env normalises with). */
#include "transform-private.h"

#include <glib.h>
#include <stdio.h>

crl_td *crl_env_transforms_state(const crl_env *env, crl_error *err)
{
    if (!env) {
        crl_error_set(err, CRL_E_INVALID, "crl_env_transforms_state: the env is NULL");
        return NULL;
    }
    crl_td *out = crl_td_new(0, NULL, err);
    for (size_t i = 0; out && i < crl_env_transform_count(env); i++) {
        crl_transform *t = crl_env_transform_at(env, i);
        if (!t->ops.state || !t->ops.load_state)
            continue;
        crl_td *sub = crl_td_new(0, NULL, err);
        int rc = sub ? t->ops.state(t->t, sub, err) : CRL_E_NOMEM;
        if (rc)
            crl_error_prefix(err, "%s: state: ", t->label);
        char key[32];
        snprintf(key, sizeof key, "%zu", i);
        if (!rc && crl_td_len(sub) > 0)
            rc = crl_td_set_td(out, key, sub, err);
        crl_td_unref(sub);
        if (rc) {
            crl_td_unref(out);
            out = NULL;
        }
    }
    return out;
}

int crl_env_load_transforms_state(crl_env *env, const crl_td *state, bool freeze, crl_error *err)
{
    if (!env || !state)
        return crl_error_set(err, CRL_E_INVALID, "crl_env_load_transforms_state: the %s is NULL",
                             !env ? "env" : "state");
    size_t n = crl_env_transform_count(env);
    /* every entry names a transform that learns, before any takes its part */
    for (size_t j = 0; j < crl_td_len(state); j++) {
        const char *key = crl_td_key_at(state, j);
        char *end = NULL;
        guint64 i = g_ascii_strtoull(key, &end, 10);
        crl_transform *t = end && *end == '\0' && end != key && i < n ? crl_env_transform_at(env, (size_t)i) : NULL;
        if (!crl_td_td_at(state, j))
            return crl_error_set(err, CRL_E_INVALID, "transform statistics: entry '%s' is a tensor; each entry is "
                                 "a transform's index holding its statistics", key);
        if (!t)
            return crl_error_set(err, CRL_E_NOT_FOUND, "transform statistics: entry '%s' names no transform of the "
                                 "env's chain (%zu transforms): was the state made from another config?", key, n);
        if (!t->ops.state || !t->ops.load_state)
            return crl_error_set(err, CRL_E_NOT_FOUND, "transform statistics: entry '%s': %s learns no statistics: "
                                 "was the state made from another config?", key, t->label);
    }
    for (size_t j = 0; j < crl_td_len(state); j++) {
        crl_transform *t = crl_env_transform_at(env, (size_t)g_ascii_strtoull(crl_td_key_at(state, j), NULL, 10));
        int rc = t->ops.load_state(t->t, crl_td_td_at(state, j), freeze, err);
        if (rc)
            return crl_error_prefix(err, "%s: load_state: ", t->label), rc;
    }
    return CRL_OK;
}
