/* ExcludeTransform, SelectTransform, RenameTransform: which keys the env output (and input) carries, by name. */
#include "config.h"
#include "action_group.h"

#include <stdlib.h>
#include <string.h>

/* True when leaf is key or lies under it ("a.b" under "a"). */
static bool under(const char *leaf, const char *key)
{
    size_t n = strlen(key);
    return strncmp(leaf, key, n) == 0 && (leaf[n] == '\0' || leaf[n] == '.');
}

static bool is_env_member(crl_transform_specs *s, crl_spec **owner)
{
    return owner == &s->reward || owner == &s->done || owner == &s->action;
}

/* ---- ExcludeTransform ------------------------------------------------------ */

typedef struct keyset {
    char **keys;            /* NULL-terminated */
    char **keep;            /* Select: the env's reward/done/action leaves, NULL-terminated */
} keyset;

static void keyset_destroy(void *p)
{
    keyset *t = p;
    if (!t)
        return;
    tfa_strv_free(t->keys);
    tfa_strv_free(t->keep);
    free(t);
}

static int keyset_create(const crl_opts *o, const char *opt, const char *who, void **out, crl_error *err)
{
    size_t n = 0;
    int rc;
    const char *const *items = NULL;
    if ((rc = crl_opts_list(o, opt, &n, &items, err)))
        return rc;
    if (n == 0)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s is empty; name at least one key (%s)",
                             crl_opts_origin(o, opt), crl_opts_section(o), opt, who);
    keyset *t = calloc(1, sizeof *t);
    if (t)
        t->keys = calloc(n + 1, sizeof *t->keys);
    for (size_t i = 0; t && t->keys && i < n; i++)
        if (!(t->keys[i] = tf_strdup(items[i]))) {
            keyset_destroy(t);
            t = NULL;
        }
    if (!t || !t->keys) {
        keyset_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    }
    *out = t;
    return CRL_OK;
}

static int exclude_create(const crl_opts *o, void **out, crl_error *err)
{
    return keyset_create(o, "exclude_keys", "ExcludeTransform", out, err);
}

static int exclude_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    keyset *t = p;
    int rc;
    for (size_t i = 0; t->keys[i]; i++) {
        crl_spec **owner = tf_specs_owner(s, t->keys[i], NULL);
        if (!owner) {
            crl_error e;
            crl_error_clear(&e);
            tf_specs_need(s, t->keys[i], "ExcludeTransform", &e);   /* for its message */
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        }
        if (is_env_member(s, owner))
            return crl_error_set(err, CRL_E_CONFIG, "ExcludeTransform: '%s' is the env's %s; only observation "
                                 "and state keys can be excluded", t->keys[i],
                                 owner == &s->reward ? "reward" : owner == &s->done ? "done flag" : "action");
        if ((rc = crl_spec_composite_del(*owner, t->keys[i], err)))
            return rc;
    }
    return CRL_OK;
}

static int exclude_call(void *p, crl_td *td, crl_error *err)
{
    keyset *t = p;
    int rc;
    for (size_t i = 0; t->keys[i]; i++)
        if (crl_td_has(td, t->keys[i]) && (rc = crl_td_del(td, t->keys[i], err)))
            return rc;
    return CRL_OK;
}

static const crl_transform_ops exclude_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = exclude_create,
    .transform_specs = exclude_specs,
    .call = exclude_call,
    .destroy = keyset_destroy,
};

static const crl_option exclude_options[] = {
    { "exclude_keys", CRL_OPT_LIST, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "observation or state keys to drop" },
    CRL_OPTIONS_END
};

/* ---- SelectTransform ------------------------------------------------------- */

static int select_create(const crl_opts *o, void **out, crl_error *err)
{
    return keyset_create(o, "keys", "SelectTransform", out, err);
}

static bool selected(const keyset *t, const char *leaf)
{
    static const char *const always[] = { "done", "terminated", "truncated", "reward", "action", "_reset" };
    if (strncmp(leaf, "next.", 5) == 0)
        leaf += 5;
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (strcmp(leaf, always[i]) == 0)
            return true;
    for (size_t i = 0; t->keys[i]; i++)
        if (under(leaf, t->keys[i]))
            return true;
    return tfa_strv_has(t->keep, leaf);
}

/* Drop comp's leaves that are not selected. */
static int select_prune(const keyset *t, crl_spec *comp, crl_error *err)
{
    char **leaves = tfa_spec_leaf_keys(comp);
    if (!leaves)
        return crl_error_set(err, CRL_E_NOMEM, "SelectTransform: out of memory");
    int rc = CRL_OK;
    for (size_t i = 0; leaves[i] && !rc; i++)
        if (!selected(t, leaves[i]))
            rc = crl_spec_composite_del(comp, leaves[i], err);
    tfa_strv_free(leaves);
    return rc;
}

static int select_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    keyset *t = p;
    int rc;
    for (size_t i = 0; t->keys[i]; i++) {
        crl_spec *leaf = NULL;
        if (!tf_specs_owner(s, t->keys[i], &leaf)) {
            crl_error e;
            crl_error_clear(&e);
            tf_specs_need(s, t->keys[i], "SelectTransform", &e);   /* for its message */
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        }
    }
    /* Every reward, done and action leaf stays, whatever its name (TorchRL keeps them). */
    char **keep = NULL;
    const crl_spec *members[] = { s->reward, s->done, s->action };
    for (size_t m = 0; m < 3; m++) {
        char **more = tfa_spec_leaf_keys(members[m]);
        size_t a = tfa_strv_len(keep), b = tfa_strv_len(more);
        char **all = more ? realloc(keep, (a + b + 1) * sizeof *all) : NULL;
        if (!all) {
            tfa_strv_free(more);
            tfa_strv_free(keep);
            return crl_error_set(err, CRL_E_NOMEM, "SelectTransform: out of memory");
        }
        memcpy(all + a, more, (b + 1) * sizeof *all);
        free(more);
        keep = all;
    }
    tfa_strv_free(t->keep);
    t->keep = keep;
    if ((rc = select_prune(t, s->observation, err)) || (s->state && (rc = select_prune(t, s->state, err))))
        return rc;
    return CRL_OK;
}

static int select_call(void *p, crl_td *td, crl_error *err)
{
    keyset *t = p;
    crl_error e;
    crl_error_clear(&e);
    char **leaves = crl_td_leaf_keys(td, &e);
    if (!leaves)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = CRL_OK;
    for (size_t i = 0; leaves[i] && !rc; i++)
        if (!selected(t, leaves[i]))
            rc = crl_td_del(td, leaves[i], err);
    crl_free(leaves);
    return rc;
}

static const crl_transform_ops select_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = select_create,
    .transform_specs = select_specs,
    .call = select_call,
    .destroy = keyset_destroy,
};

static const crl_option select_options[] = {
    { "keys", CRL_OPT_LIST, CRL_OPT_REQUIRED, NULL, 0, 0, NULL,
      "observation or state keys to keep (reward, done flags and actions always stay)" },
    CRL_OPTIONS_END
};

/* ---- RenameTransform ------------------------------------------------------- */

typedef struct rename_t {
    tf_keys keys, inv;      /* inv: in = the parent's name, out = the name the policy writes */
    bool copy;
} rename_t;

static void rename_destroy(void *p)
{
    rename_t *t = p;
    if (!t)
        return;
    tf_keys_free(&t->keys);
    tf_keys_free(&t->inv);
    free(t);
}

static int rename_create(const crl_opts *o, void **out, crl_error *err)
{
    rename_t *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "RenameTransform: out of memory");
    int rc = crl_opts_bool(o, "create_copy", &t->copy, err);
    if (!rc)
        rc = tf_keys_read(o, "in_keys", "out_keys", true, "RenameTransform", &t->keys, err);
    if (!rc)
        rc = tf_keys_read(o, "in_keys_inv", "out_keys_inv", true, "RenameTransform", &t->inv, err);
    if (!rc && t->keys.n + t->inv.n == 0)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_keys and in_keys_inv are both empty; name the keys to "
                           "rename", crl_opts_origin(o, "in_keys"), crl_opts_section(o));
    if (!rc && !crl_opts_is_set(o, "out_keys") && t->keys.n)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] out_keys is not set; give the new name of each in_keys "
                           "entry", crl_opts_origin(o, "in_keys"), crl_opts_section(o));
    if (!rc && !crl_opts_is_set(o, "out_keys_inv") && t->inv.n)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] out_keys_inv is not set; give the name the policy writes "
                           "for each in_keys_inv entry", crl_opts_origin(o, "in_keys_inv"), crl_opts_section(o));
    if (rc) {
        rename_destroy(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

static int rename_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    rename_t *t = p;
    for (size_t i = 0; i < t->keys.n; i++) {
        crl_spec *leaf = NULL;
        crl_spec **owner = tf_specs_owner(s, t->keys.in[i], &leaf);
        if (!owner) {
            crl_error e;
            crl_error_clear(&e);
            tf_specs_need(s, t->keys.in[i], "RenameTransform", &e);   /* for its message */
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        }
        if (owner == &s->action)
            return crl_error_set(err, CRL_E_CONFIG, "RenameTransform: '%s' is an action; rename actions with "
                                 "in_keys_inv / out_keys_inv", t->keys.in[i]);
        bool fixed = owner == &s->reward || owner == &s->done;
        if (fixed && !t->copy)
            return crl_error_set(err, CRL_E_CONFIG, "RenameTransform: '%s' is the env's %s and cannot be renamed; "
                                 "set create_copy = true to add a copy under '%s'", t->keys.in[i],
                                 owner == &s->reward ? "reward" : "done flag", t->keys.out[i]);
        crl_spec_ref(leaf);
        int rc = crl_spec_composite_set(*owner, t->keys.out[i], leaf, err);
        if (!rc && !t->copy)
            rc = crl_spec_composite_del(*owner, t->keys.in[i], err);
        crl_spec_unref(leaf);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < t->inv.n; i++) {
        crl_spec *leaf = NULL;
        crl_spec **owner = tf_specs_owner(s, t->inv.in[i], &leaf);
        if (!owner || (owner != &s->action && owner != &s->state))
            return crl_transform_missing_key(err, "RenameTransform", t->inv.in[i], s->action, "action spec");
        crl_spec_ref(leaf);
        int rc = crl_spec_composite_set(*owner, t->inv.out[i], leaf, err);
        if (!rc && !t->copy)
            rc = crl_spec_composite_del(*owner, t->inv.in[i], err);
        crl_spec_unref(leaf);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* td[dst] = td[src] (a copy with create_copy); src dropped unless copying. */
static int move_entry(crl_td *td, const char *src, const char *dst, bool copy, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, src, "RenameTransform", &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    crl_tensor *y = copy ? crl_tensor_clone(x, &e) : crl_tensor_ref(x);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_td_set(td, dst, y, err);
    crl_tensor_unref(y);
    if (!rc && !copy && strcmp(src, dst) != 0)
        rc = crl_td_del(td, src, err);
    return rc;
}

static int rename_call(void *p, crl_td *td, crl_error *err)
{
    rename_t *t = p;
    int rc;
    for (size_t i = 0; i < t->keys.n; i++)
        if ((rc = move_entry(td, t->keys.in[i], t->keys.out[i], t->copy, err)))
            return rc;
    return CRL_OK;
}

/* A reset output has no reward: keys it lacks are skipped (TorchRL's missing-key tolerance on reset). */
static int rename_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    int rc;
    (void)ctx, (void)mask;
    rename_t *t = p;
    for (size_t i = 0; i < t->keys.n; i++)
        if (crl_td_has(td, t->keys.in[i]) && (rc = move_entry(td, t->keys.in[i], t->keys.out[i], t->copy, err)))
            return rc;
    return CRL_OK;
}

static int rename_inv(void *p, crl_td *td, crl_error *err)
{
    rename_t *t = p;
    int rc;
    for (size_t i = 0; i < t->inv.n; i++)
        if ((rc = move_entry(td, t->inv.out[i], t->inv.in[i], t->copy, err)))
            return rc;
    return CRL_OK;
}

static const crl_transform_ops rename_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = rename_create,
    .transform_specs = rename_specs,
    .call = rename_call,
    .reset = rename_reset,
    .inv = rename_inv,
    .destroy = rename_destroy,
};

static const crl_option rename_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "output keys to rename" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "their new names" },
    { "in_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL, "input (action) keys as the parent reads them" },
    { "out_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL, "the names the policy writes them under" },
    { "create_copy", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "copy under the new name and keep the old one (needed for reward and done)" },
    CRL_OPTIONS_END
};

int tfa_register_keys(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register(host, "ExcludeTransform", "drop observation or state keys", exclude_options, &exclude_ops,
                          err)) ||
        (rc = tf_register(host, "SelectTransform", "keep only the named observation or state keys", select_options,
                          &select_ops, err)))
        return rc;
    return tf_register(host, "RenameTransform", "rename output keys (and action keys on the inverse)",
                       rename_options, &rename_ops, err);
}
