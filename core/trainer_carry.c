/* The policy's carried state (recurrent_state_*) through the trainer's checkpoints (carry-private.h). */
#include "config.h"
#include "carry-private.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

crl_td *crl__carry_template(const crl_loss_ops *ops, void *loss, const crl_env *env, const crl_rng *rng,
                            crl_error *err)
{
    const crl_spec *obs = env ? crl_env_full_observation_spec(env) : NULL;
    if (!ops || !ops->act || !obs) {
        crl_error_set(err, CRL_E_INVALID, "the policy's carried state: no %s", !obs ? "env" : "policy");
        return NULL;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_td *probe = crl_spec_zero_td(obs, &e);
    if (!probe) {
        crl_error_pass(err, &e, CRL_E_NOMEM);
        return NULL;
    }
    /* the mode draws nothing; a copy keeps the caller's stream out of reach all the same */
    crl_rng scratch = *rng;
    int rc = ops->act(loss, probe, CRL_EXPLORE_MODE, &scratch, &e);
    crl_td *tmpl = NULL;
    if (rc) {
        crl_error_pass(err, &e, CRL_E_RUNTIME);
        crl_error_prefix(err, "the policy's carried state: acting on the env's observation spec: ");
    } else {
        crl_td *next = crl_td_get_td(probe, "next");
        tmpl = next ? crl_td_clone(next, &e)
                    : crl_td_new(crl_td_batch_ndim(probe), crl_td_batch_shape(probe), &e);
        if (!tmpl)
            crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    crl_td_unref(probe);
    return tmpl;
}

char *crl__carry_names(const crl_td *tmpl)
{
    char **keys = crl_td_leaf_keys(tmpl, NULL);
    char *s = keys ? g_strjoinv(", ", keys) : g_strdup("?");
    crl_free(keys);
    return s;
}

static char *prefix_of(size_t k)
{
    return g_strdup_printf(CRL__CARRY_PREFIX "/%zu", k);
}

int crl__carry_save(crl_ckpt_writer *w, size_t k, const crl_td *cur, const crl_td *tmpl, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    char **keys = crl_td_leaf_keys(tmpl, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    /* step_mdp moved what the policy wrote under "next" to the root, where its next step reads it */
    crl_td *sel = crl_td_select(cur, (const char *const *)keys, true, &e);
    crl_free(keys);
    if (!sel) {
        int rc = crl_error_pass(err, &e, CRL_E_INVALID);
        return crl_error_prefix(err, "sub-collector %zu: the policy's carried state: ", k), rc;
    }
    char *prefix = prefix_of(k);
    int rc = crl_ckpt_write_td(w, prefix, sel, err);
    g_free(prefix);
    crl_td_unref(sel);
    return rc;
}

bool crl__carry_has(const crl_ckpt_reader *r, size_t k)
{
    char *sec = g_strdup_printf(CRL__CARRY_PREFIX "/%zu/td", k);
    bool has = crl_ckpt_has(r, sec);
    g_free(sec);
    return has;
}

static char *describe(const crl_tensor *t)
{
    GString *s = g_string_new(crl_dtype_name(crl_tensor_dtype(t)));
    g_string_append(s, " [");
    for (int d = 0; d < crl_tensor_ndim(t); d++)
        g_string_append_printf(s, "%s%lld", d ? ", " : "", (long long)crl_tensor_shape(t)[d]);
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

/* Every leaf of a is in b with its dtype and shape; the first that is not in *bad (NULL: all are). */
static int first_misfit(const crl_td *a, const crl_td *b, char **bad, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    char **keys = crl_td_leaf_keys(a, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    *bad = NULL;
    for (size_t i = 0; keys[i] && !*bad; i++) {
        crl_tensor *x = crl_td_get(a, keys[i]), *y = crl_td_get(b, keys[i]);
        if (!y || crl_tensor_dtype(x) != crl_tensor_dtype(y) || !crl_tensor_same_shape(x, y))
            *bad = g_strdup(keys[i]);
    }
    crl_free(keys);
    return CRL_OK;
}

crl_td *crl__carry_read(const crl_ckpt_reader *r, size_t k, const crl_td *tmpl, crl_error *err)
{
    char *prefix = prefix_of(k), *sec = g_strconcat(prefix, "/td", NULL);
    crl_error e;
    crl_error_clear(&e);
    crl_td *td = crl_ckpt_read_td(r, prefix, &e);
    char *bad = NULL;
    int rc = td ? CRL_OK : crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (!rc && !(rc = first_misfit(tmpl, td, &bad, err)) && bad) {
        crl_tensor *want = crl_td_get(tmpl, bad), *got = crl_td_get(td, bad);
        char *ws = describe(want), *gs = got ? describe(got) : NULL;
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s': the policy carries '%s' as %s, the checkpoint %s%s",
                           crl_ckpt_path(r), sec, bad, ws, gs ? "holds " : "has none", gs ? gs : "");
        g_free(ws);
        g_free(gs);
    } else if (!rc && !(rc = first_misfit(td, tmpl, &bad, err)) && bad) {
        char *names = crl_td_len(tmpl) ? crl__carry_names(tmpl) : g_strdup("none");
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s': '%s' is no state the policy carries (it carries "
                           "%s)", crl_ckpt_path(r), sec, bad, names);
        g_free(names);
    }
    g_free(bad);
    g_free(sec);
    g_free(prefix);
    if (rc) {
        crl_td_unref(td);
        return NULL;
    }
    return td;
}

int crl__carry_restore(crl_td *cur, const crl_td *saved, size_t k, crl_error *err)
{
    char *bad = NULL;
    int rc = first_misfit(saved, cur, &bad, err);
    if (!rc && bad)
        rc = crl_error_set(err, CRL_E_INVALID, "sub-collector %zu: its TensorDict has no '%s' of the checkpoint's "
                           "dtype and shape to take the carried state", k, bad);
    g_free(bad);
    if (rc)
        return rc;
    crl_error e;
    crl_error_clear(&e);
    char **keys = crl_td_leaf_keys(saved, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    for (size_t i = 0; keys[i] && !rc; i++)
        rc = crl_tensor_copy(crl_td_get(cur, keys[i]), crl_td_get(saved, keys[i]), err);
    crl_free(keys);
    return rc;
}
