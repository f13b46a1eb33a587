/* TorchRL's check_env_specs (a short random rollout checked against every spec) and the specs' printed form. */
#include "env-private.h"
#include "transform-private.h"

#include <string.h>

static void spec_leaf_keys(const crl_spec *comp, const char *prefix, GHashTable *out)
{
    for (size_t i = 0; i < crl_spec_composite_len(comp); i++) {
        const crl_spec *c = crl_spec_composite_at(comp, i);
        char *full = prefix ? g_strconcat(prefix, ".", crl_spec_composite_key_at(comp, i), NULL)
                            : g_strdup(crl_spec_composite_key_at(comp, i));
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE) {
            spec_leaf_keys(c, full, out);
            g_free(full);
        } else {
            g_hash_table_add(out, full);
        }
    }
}

/* What one step leaves in a td: the transformed layout when there is a chain. */
static const crl_spec *full_spec(const crl_env *env)
{
    return env->chain ? env->chain->full_spec : env->full_spec;
}

static int check_step(crl_env *env, crl_td *step_td, int64_t t, GHashTable *expected, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    if (crl_spec_check_td(full_spec(env), step_td, &e))
        return crl_error_set(err, e.code, "check_env_specs: step %" G_GINT64_FORMAT ": %s", (gint64)t, e.message);
    crl_error_clear(&e);
    char **keys = crl_td_leaf_keys(step_td, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = CRL_OK;
    for (size_t i = 0; keys[i] && !rc; i++)
        if (!g_hash_table_contains(expected, keys[i]))
            rc = crl_error_set(err, CRL_E_INVALID, "check_env_specs: step %" G_GINT64_FORMAT ": key '%s' is in the "
                               "rollout but in no spec", (gint64)t, keys[i]);
    crl_free(keys);
    return rc;
}

int crl_env_check_specs(crl_env *env, int64_t steps, crl_error *err)
{
    if (!env)
        return crl_error_set(err, CRL_E_INVALID, "check_env_specs: env is NULL");
    if (steps < 1)
        return crl_error_set(err, CRL_E_INVALID, "check_env_specs: steps is %" G_GINT64_FORMAT "; give at least 1",
                             (gint64)steps);
    crl_error e;
    crl_error_clear(&e);
    crl_td *r = crl_env_rollout(env, steps, NULL, NULL, false, true, NULL, &e);
    if (!r) {
        crl_error_prefix(&e, "check_env_specs: ");
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    }
    GHashTable *expected = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    spec_leaf_keys(full_spec(env), NULL, expected);
    int b = env->batch_ndim;
    int64_t T = crl_td_batch_shape(r)[b];
    int rc = CRL_OK;
    for (int64_t t = 0; t < T && !rc; t++) {
        crl_td *st = crl_td_index(r, b, t, &e);
        rc = st ? check_step(env, st, t, expected, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_td_unref(st);
    }
    g_hash_table_unref(expected);
    crl_td_unref(r);
    return rc;
}

/* TorchRL's env.action_spec / env.reward_spec give the leaf when there is
 * only one. */
char *crl_env_specs_repr(const crl_env *env)
{
    if (!env)
        return NULL;
    const char *names[] = { "observation_spec", "action_spec", "reward_spec", "done_spec", "state_spec" };
    const crl_spec *specs[] = { crl_env_observation_spec(env), crl_env_action_spec(env), crl_env_reward_spec(env),
                                crl_env_done_spec(env), crl_env_state_spec(env) };
    GString *s = g_string_new(NULL);
    for (int i = 0; i < 5; i++) {
        char *r = crl_spec_repr(specs[i]);
        g_string_append_printf(s, "%s:\n%s\n", names[i], r ? r : "");
        crl_free(r);
    }
    return g_string_free(s, FALSE);
}

crl_spec *crl_env_backend_done_spec(int64_t num, crl_error *err)
{
    int64_t shape[2] = { num, 1 };
    crl_spec *c = crl_spec_composite(1, &num, err);
    static const char *const keys[] = { "done", "terminated", "truncated" };
    for (size_t k = 0; c && k < G_N_ELEMENTS(keys); k++) {
        crl_spec *leaf = crl_spec_categorical(2, CRL_BOOL, 2, shape, err);
        if (!leaf || crl_spec_composite_set(c, keys[k], leaf, err) != CRL_OK) {
            crl_spec_unref(c);
            c = NULL;
        }
        crl_spec_unref(leaf);
    }
    return c;
}

void *crl_env_backend_buffer(crl_td *buffers, const char *who, const char *key, crl_dtype dt, int64_t num,
                             int64_t dim, int *rc, crl_error *err)
{
    if (*rc != CRL_OK)
        return NULL;
    crl_tensor *t = buffers ? crl_td_get(buffers, key) : NULL;
    if (!t) {
        *rc = crl_error_set(err, CRL_E_NOT_FOUND, "%s: bind: no '%s' buffer; the host must allocate one per spec leaf",
                            who, key);
        return NULL;
    }
    if (crl_tensor_dtype(t) != dt) {
        *rc = crl_error_set(err, CRL_E_DTYPE, "%s: bind: buffer '%s' is %s, expected %s", who, key,
                            crl_dtype_name(crl_tensor_dtype(t)), crl_dtype_name(dt));
        return NULL;
    }
    int ndim = dim ? 2 : 1;
    const int64_t *shape = crl_tensor_shape(t);
    if (crl_tensor_ndim(t) != ndim || shape[0] != num || (dim && shape[1] != dim)) {
        char *got = crl_shape_repr(crl_tensor_ndim(t), shape);
        int64_t want_shape[2] = { num, dim };
        char *want = crl_shape_repr(ndim, want_shape);
        *rc = crl_error_set(err, CRL_E_SHAPE, "%s: bind: buffer '%s' has shape %s, expected %s", who, key,
                            got ? got : "?", want ? want : "?");
        crl_free(got);
        crl_free(want);
        return NULL;
    }
    if (crl_tensor_device(t).type != CRL_DEVICE_CPU || !crl_tensor_is_contiguous(t)) {
        *rc = crl_error_set(err, CRL_E_INVALID, "%s: bind: buffer '%s' must be a contiguous cpu tensor", who, key);
        return NULL;
    }
    return crl_tensor_data(t);
}
