/* Transforms standalone: building them from config or code, apply, spec rewrite, and the SDK helpers. */
#include "transform-private.h"
#include "env-private.h"
#include "spin-private.h"

#include <string.h>

static const crl_option section_options[] = {
    { "type", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: the registered transform, e.g. Resize (list them with 'crl plugins --verbose')" },
    CRL_OPTIONS_END
};

static const crl_option no_options[] = { CRL_OPTIONS_END };

const crl_option *crl_transform_section_options(void)
{
    return section_options;
}

/* ---- spec sets ---------------------------------------------------------------- */

void crl__tspecs_clear(crl_transform_specs *s)
{
    crl_spec_unref(s->observation);
    crl_spec_unref(s->action);
    crl_spec_unref(s->reward);
    crl_spec_unref(s->done);
    crl_spec_unref(s->state);
    s->observation = s->action = s->reward = s->done = s->state = NULL;
}

int crl__tspecs_clone(crl_transform_specs *dst, const crl_transform_specs *src, crl_error *err)
{
    memset(dst, 0, sizeof *dst);
    dst->struct_size = sizeof *dst;
    dst->batch_ndim = src->batch_ndim;
    dst->batch_shape = src->batch_shape;
    crl_spec *const in[5] = { src->observation, src->action, src->reward, src->done, src->state };
    crl_spec **out[5] = { &dst->observation, &dst->action, &dst->reward, &dst->done, &dst->state };
    crl_error e;
    crl_error_clear(&e);
    for (int i = 0; i < 5; i++) {
        *out[i] = in[i] ? crl_spec_clone(in[i], &e) : crl_spec_composite(src->batch_ndim, src->batch_shape, &e);
        if (!*out[i]) {
            crl__tspecs_clear(dst);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
    }
    return CRL_OK;
}

/* ---- construction ------------------------------------------------------------- */

static crl_transform *transform_make(crl_host *host, const crl_component *comp, const char *owner,
                                     const char *name, const crl_opts *opts, crl_error *err)
{
    const crl_transform_ops *ops = comp->ops;
    if (!ops || ops->struct_size < offsetof(crl_transform_ops, create) + sizeof ops->create || !ops->create) {
        crl_error_set(err, CRL_E_PLUGIN, "transform '%s' (plugin '%s') registered no crl_transform_ops with a create: "
                      "fix the plugin", comp->name, owner);
        return NULL;
    }
    crl_transform *t = g_new0(crl_transform, 1);
    size_t n = ops->struct_size < sizeof t->ops ? ops->struct_size : sizeof t->ops;
    memcpy(&t->ops, ops, n);
    t->host = host;
    t->type = g_strdup(comp->name);
    t->name = g_strdup(name);
    t->label = g_strdup_printf("transform '%s' (%s)", name, comp->name);
    t->ctx.tf = t;
    size_t nk = 0;
    const char *const *keys = NULL;
    /* An undeclared in_keys is no error: that transform prints keys=[]. */
    if (opts && crl_opts_list(opts, "in_keys", &nk, &keys, NULL) == CRL_OK) {
        t->in_keys = g_new0(char *, nk + 1);
        for (size_t i = 0; i < nk; i++)
            t->in_keys[i] = g_strdup(keys[i]);
    }
    int rc = t->ops.create(opts, &t->t, err);
    if (rc == CRL_OK && !t->t)
        rc = crl_error_set(err, CRL_E_PLUGIN, "create returned no transform: fix plugin '%s'", owner);
    if (rc) {
        crl_error_prefix(err, "%s: ", t->label);
        t->t = NULL;
        crl_transform_free(t);
        return NULL;
    }
    return t;
}

void crl__tf_desc_clear(crl__tf_desc *d)
{
    if (!d)
        return;
    g_free(d->name);
    g_free(d->section);
    g_free(d->owner);
    crl_opts_free(d->opts);
    memset(d, 0, sizeof *d);
}

int crl__tf_desc_copy(crl__tf_desc *dst, const crl__tf_desc *src, crl_error *err)
{
    memset(dst, 0, sizeof *dst);
    dst->opts = crl__opts_copy(src->opts, err);
    if (!dst->opts)
        return CRL_E_NOMEM;
    dst->name = g_strdup(src->name);
    dst->section = g_strdup(src->section);
    dst->owner = g_strdup(src->owner);
    dst->comp = src->comp;
    return CRL_OK;
}

int crl__tf_desc_from_config(crl_host *host, const crl_config *cfg, const char *section, crl__tf_desc *d,
                             crl_error *err)
{
    memset(d, 0, sizeof *d);
    if (!host || !cfg || !section)
        return crl_error_set(err, CRL_E_INVALID, "crl_transform_from_config: %s is NULL",
                             !host ? "host" : !cfg ? "config" : "section");
    if (strncmp(section, "transform.", 10) != 0 || !section[10] || strchr(section + 10, '.'))
        return crl_error_set(err, CRL_E_INVALID, "crl_transform_from_config: section '%s' is not of the form "
                             "transform.NAME", section);
    if (!crl_config_has_section(cfg, section))
        return crl_error_set(err, CRL_E_CONFIG, "there is no [%s] section; add one with 'type = ...' naming a "
                             "transform", section);
    const char *type = crl_config_get(cfg, section, "type");
    if (!type || !*type)
        return crl_error_set(err, CRL_E_CONFIG, "[%s] type is required but not set; add 'type = NAME' under [%s] (the "
                             "registered transforms are listed by 'crl plugins --verbose')", section, section);
    crl_error e;
    crl_error_clear(&e);
    const crl_component *comp = crl_host_lookup(host, CRL_KIND_TRANSFORM, type, &e);
    if (!comp) {
        const char *origin = crl_config_origin(cfg, section, "type");
        return crl_error_set(err, e.code ? e.code : CRL_E_NOT_FOUND, "%s: [%s] type = '%s': %s",
                             origin ? origin : "?", section, type, e.message);
    }
    const crl_option *tables[2] = { section_options, comp->options ? comp->options : no_options };
    int rc = crl__config_check_keys(cfg, section, tables, 2, err);
    if (rc)
        return rc;
    crl_error oe;
    crl_error_clear(&oe);
    d->opts = crl_config_opts(cfg, section, tables, 2, &oe);
    if (!d->opts)
        return crl_error_pass(err, &oe, CRL_E_RUNTIME);
    const char *owner = crl_host_component_owner(host, CRL_KIND_TRANSFORM, comp->name);
    d->comp = comp;
    d->owner = g_strdup(owner ? owner : "?");
    d->section = g_strdup(section);
    d->name = g_strdup(section + 10);
    return CRL_OK;
}

crl_transform *crl__transform_from_desc(crl_host *host, const crl__tf_desc *d, crl_error *err)
{
    return transform_make(host, d->comp, d->owner, d->name, d->opts, err);
}

crl_transform *crl_transform_from_config(crl_host *host, const crl_config *cfg, const char *section, crl_error *err)
{
    crl__tf_desc d;
    if (crl__tf_desc_from_config(host, cfg, section, &d, err))
        return NULL;
    crl_transform *t = crl__transform_from_desc(host, &d, err);
    crl__tf_desc_clear(&d);
    return t;
}

/* "argument N:2" (the line of the key in its one-key buffer) reads
 * "argument N" in messages. */
static void fix_origins(char *message, size_t nargs)
{
    for (size_t i = nargs; i >= 1; i--) {
        char pat[48];
        g_snprintf(pat, sizeof pat, "argument %zu:2", i);
        char *p;
        while ((p = strstr(message, pat)) != NULL)
            memmove(p + strlen(pat) - 2, p + strlen(pat), strlen(p + strlen(pat)) + 1);
    }
}

crl_transform *crl_transform_new(crl_host *host, const char *type, const char *const *kv, crl_error *err)
{
    if (!host || !type || !*type) {
        crl_error_set(err, CRL_E_INVALID, "crl_transform_new: %s is NULL or empty", !host ? "host" : "type");
        return NULL;
    }
    for (const char *p = type; *p; p++)
        if (!(g_ascii_isalnum(*p) || *p == '_' || *p == '-')) {
            crl_error_set(err, CRL_E_INVALID, "crl_transform_new: type '%s' is not a transform name (letters, digits, "
                          "'_' and '-')", type);
            return NULL;
        }
    crl_config *cfg = crl_config_new(err);
    if (!cfg)
        return NULL;
    char *section = g_strconcat("transform.", type, NULL);
    char *head = g_strdup_printf("[%s]\ntype = %s\n", section, type);
    /* a local error: its message is rewritten (fix_origins) before it is handed on */
    crl_error e;
    crl_error_clear(&e);
    int rc = crl_config_load_buffer(cfg, "type", head, strlen(head), CRL_LAYER_FILE, &e);
    g_free(head);
    size_t nargs = 0;
    for (size_t i = 0; !rc && kv && kv[i]; i++) {
        nargs = i + 1;
        const char *a = kv[i];
        const char *eq = strchr(a, '=');
        char *key = eq ? g_strstrip(g_strndup(a, (gsize)(eq - a))) : NULL;
        /* A value may hold brackets (a C signature's shapes); only a line break could start a section. */
        if (!eq || !*key || strpbrk(a, "\n\r") || strpbrk(key, "[]")) {
            rc = crl_error_set(&e, CRL_E_INVALID, "%s: argument %zu ('%s') is not a single key=value", section, i + 1,
                               a);
        } else if (!strcmp(key, "type")) {
            rc = crl_error_set(&e, CRL_E_INVALID, "%s: argument %zu sets 'type'; the type is crl_transform_new's own "
                               "argument", section, i + 1);
        } else {
            char *name = g_strdup_printf("argument %zu", i + 1);
            char *text = g_strdup_printf("[%s]\n%s = %s\n", section, key, eq + 1);
            rc = crl_config_load_buffer(cfg, name, text, strlen(text), CRL_LAYER_OVERRIDE, &e);
            g_free(name);
            g_free(text);
        }
        g_free(key);
    }
    crl_transform *t = rc ? NULL : crl_transform_from_config(host, cfg, section, &e);
    if (t) {
        g_free(t->name);
        t->name = g_strdup(type);
        g_free(t->label);
        t->label = g_strdup_printf("transform '%s' (%s)", type, t->type);
    }
    if (!t) {
        fix_origins(e.message, nargs);
        crl_error_pass(err, &e, CRL_E_INVALID);
    }
    g_free(section);
    crl_config_free(cfg);
    return t;
}

void crl_transform_free(crl_transform *t)
{
    if (!t)
        return;
    if (t->in_chain) {
        /* Freeing it would leave the chain with a dangling transform. */
        crl_host_log(t->host, CRL_LOG_ERROR, "crl_transform_free: %s belongs to an env's chain and was not freed; "
                     "the env frees it (or take it out with crl_env_remove_transform first)", t->label);
        return;
    }
    if (t->ops.destroy && t->t)
        t->ops.destroy(t->t);
    crl__tspecs_clear(&t->ctx.parent);
    g_strfreev(t->in_keys);
    g_free(t->type);
    g_free(t->name);
    g_free(t->label);
    g_free(t);
}

const char *crl_transform_type(const crl_transform *t)
{
    return t ? t->type : NULL;
}

const char *crl_transform_name(const crl_transform *t)
{
    return t ? t->name : NULL;
}

/* ---- standalone use --------------------------------------------------------------- */

int crl__transform_call(crl_transform *t, crl_td *td, crl_error *err)
{
    int rc = t->ops.call(t->t, td, err);
    if (rc)
        crl__error_label(err, t->label);
    return rc;
}

int crl_transform_apply(crl_transform *t, crl_td *td, crl_error *err)
{
    if (!t || !td)
        return crl_error_set(err, CRL_E_INVALID, "crl_transform_apply: %s is NULL", !t ? "transform" : "the TensorDict");
    if (!t->ops.call)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "%s acts only inside an env (on reset, step or actions) and "
                             "cannot be applied to a TensorDict on its own; put it in an env's transforms", t->label);
    return crl__transform_call(t, td, err);
}

crl_spec *crl_transform_observation_spec(crl_transform *t, const crl_spec *observation, crl_error *err)
{
    if (!t || !observation) {
        crl_error_set(err, CRL_E_INVALID, "crl_transform_observation_spec: %s is NULL",
                      !t ? "transform" : "observation");
        return NULL;
    }
    if (crl_spec_get_kind(observation) != CRL_SPEC_COMPOSITE) {
        crl_error_set(err, CRL_E_INVALID, "%s: crl_transform_observation_spec needs a Composite observation spec, not "
                      "a %s", t->label, crl_spec_kind_name(crl_spec_get_kind(observation)));
        return NULL;
    }
    crl_transform_specs in = { 0 }, s;
    in.struct_size = sizeof in;
    in.batch_ndim = crl_spec_ndim(observation);
    in.batch_shape = crl_spec_shape(observation);
    in.observation = (crl_spec *)observation;
    if (crl__tspecs_clone(&s, &in, err))
        return NULL;
    int rc = t->ops.transform_specs ? t->ops.transform_specs(t->t, &s, err) : CRL_OK;
    crl_spec *r = NULL;
    if (rc) {
        crl__error_label(err, t->label);
    } else if (!s.observation || crl_spec_get_kind(s.observation) != CRL_SPEC_COMPOSITE) {
        crl_error_set(err, CRL_E_PLUGIN, "%s: transform_specs left no Composite observation spec: fix the plugin",
                      t->label);
    } else {
        r = crl_spec_ref(s.observation);
    }
    crl__tspecs_clear(&s);
    return r;
}

/* ---- SDK helpers ---------------------------------------------------------------------- */

/* The inverse guard (see crl__transform_guard).  Inverses run on the thread
 * that steps the env, so one slot per thread is enough. */
static _Thread_local crl_td *guard_shallow;
static _Thread_local const crl_td *guard_orig;
static _Thread_local crl_td *guard_keep;

void crl__transform_guard(crl_td *shallow, const crl_td *orig, crl_td *keep)
{
    guard_shallow = shallow;
    guard_orig = orig;
    guard_keep = keep;
}

static bool fits(const crl_tensor *t, crl_dtype dt, int ndim, const int64_t *shape)
{
    if (!t || crl_tensor_dtype(t) != dt || crl_tensor_ndim(t) != ndim || !crl_tensor_is_contiguous(t))
        return false;
    return ndim == 0 || memcmp(crl_tensor_shape(t), shape, sizeof(int64_t) * (size_t)ndim) == 0;
}

crl_tensor *crl_transform_output(crl_td *td, const char *key, crl_dtype dt, int ndim, const int64_t *shape,
                                 crl_error *err)
{
    if (!td || !key || !*key || ndim < 0 || ndim > CRL_MAX_DIMS || (ndim > 0 && !shape)) {
        crl_error_set(err, CRL_E_INVALID, "crl_transform_output: bad arguments (key '%s', %d dims)", key ? key : "(null)",
                      ndim);
        return NULL;
    }
    crl_tensor *cur = crl_td_get(td, key);
    bool theirs = td == guard_shallow && cur && cur == crl_td_get(guard_orig, key);
    if (!theirs && fits(cur, dt, ndim, shape))
        return cur;
    if (theirs && guard_keep) {
        crl_tensor *k = crl_td_get(guard_keep, key);
        if (fits(k, dt, ndim, shape))
            return crl_td_set(td, key, k, err) ? NULL : k;
    }
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, err);
    if (!t)
        return NULL;
    int rc = crl_td_set(td, key, t, err);
    if (!rc && theirs && guard_keep)
        rc = crl_td_set(guard_keep, key, t, err);
    crl_tensor_unref(t);
    if (rc) {
        crl_error_prefix(err, "cannot store '%s': ", key);
        return NULL;
    }
    return t;
}

static void spec_leaves(const crl_spec *comp, const char *prefix, GString *out)
{
    for (size_t i = 0; i < crl_spec_composite_len(comp); i++) {
        const crl_spec *c = crl_spec_composite_at(comp, i);
        char *full = prefix ? g_strconcat(prefix, ".", crl_spec_composite_key_at(comp, i), NULL)
                            : g_strdup(crl_spec_composite_key_at(comp, i));
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE)
            spec_leaves(c, full, out);
        else
            g_string_append_printf(out, "%s%s", out->len ? ", " : "", full);
        g_free(full);
    }
}

int crl_transform_missing_key(crl_error *err, const char *who, const char *key, const crl_spec *comp, const char *what)
{
    GString *keys = g_string_new(NULL);
    if (comp && crl_spec_get_kind(comp) == CRL_SPEC_COMPOSITE)
        spec_leaves(comp, NULL, keys);
    crl_error_set(err, CRL_E_NOT_FOUND, "%s: key '%s' is not in the %s; available keys: %s", who ? who : "transform",
                  key ? key : "(null)", what ? what : "specs", keys->len ? keys->str : "none");
    g_string_free(keys, TRUE);
    return CRL_E_NOT_FOUND;
}

int crl_transform_missing_td_key(crl_error *err, const char *who, const char *key, const crl_td *td)
{
    char **keys = td ? crl_td_leaf_keys(td, NULL) : NULL;
    char *list = keys && keys[0] ? g_strjoinv(", ", keys) : g_strdup("none");
    crl_error_set(err, CRL_E_NOT_FOUND, "%s: key '%s' is not in the TensorDict; available keys: %s",
                  who ? who : "transform", key ? key : "(null)", list);
    g_free(list);
    crl_free(keys);
    return CRL_E_NOT_FOUND;
}

int crl__spec_rand_into_td(const crl_spec *comp, crl_rng *rng, crl_td *td, crl_error *err)
{
    for (size_t i = 0; i < crl_spec_composite_len(comp); i++) {
        const crl_spec *c = crl_spec_composite_at(comp, i);
        const char *k = crl_spec_composite_key_at(comp, i);
        int rc;
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE) {
            crl_td *sub = crl_td_get_td(td, k);
            if (!sub) {
                crl_error e;
                crl_error_clear(&e);
                sub = crl_td_new(crl_td_batch_ndim(td), crl_td_batch_shape(td), &e);
                rc = sub ? crl_td_set_td(td, k, sub, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
                crl_td_unref(sub);
                if (rc)
                    return rc;
            }
            if ((rc = crl__spec_rand_into_td(c, rng, sub, err)))
                return rc;
            continue;
        }
        crl_tensor *t = crl_td_get(td, k);
        if (t && crl_tensor_dtype(t) == crl_spec_dtype(c) && crl_tensor_ndim(t) == crl_spec_ndim(c) &&
            memcmp(crl_tensor_shape(t), crl_spec_shape(c), sizeof(int64_t) * (size_t)crl_spec_ndim(c)) == 0) {
            if ((rc = crl_spec_rand_into(c, rng, t, err)))
                return rc;
            continue;
        }
        crl_error e;
        crl_error_clear(&e);
        t = crl_spec_rand(c, rng, &e);
        rc = t ? crl_td_set(td, k, t, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(t);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* ---- the context's plain accessors -------------------------------------------------------- */

const int64_t *crl_transform_ctx_batch(const crl_transform_ctx *ctx, int *ndim)
{
    if (!ctx) {
        if (ndim)
            *ndim = 0;
        return NULL;
    }
    if (ndim)
        *ndim = ctx->parent.batch_ndim;
    return ctx->parent.batch_shape;
}

int64_t crl_transform_ctx_num(const crl_transform_ctx *ctx)
{
    return ctx && ctx->env ? crl_env_num(ctx->env) : 1;
}

const crl_transform_specs *crl_transform_ctx_parent_specs(const crl_transform_ctx *ctx)
{
    return ctx ? &ctx->parent : NULL;
}

void crl_transform_ctx_use_turns(crl_transform_ctx *ctx)
{
    if (ctx && ctx->env)
        ctx->env->wants_turns = true;
}

void crl_transform_ctx_wait_turn(crl_transform_ctx *ctx)
{
    crl_env *env = ctx ? ctx->env : NULL;
    if (env && env->turn_word)
        crl__turn_wait(env->turn_word, env->turn_abort, env->turn_index);
}

const crl_transform_specs *crl_transform_parent_specs(const crl_transform *t)
{
    return t && t->in_chain ? &t->ctx.parent : NULL;
}

crl_env *crl_transform_parent_env(const crl_transform *t, size_t *index)
{
    if (!t || !t->in_chain)
        return NULL;
    if (index)
        *index = t->ctx.index;
    return t->ctx.env;
}

const char *crl_transform_ctx_name(const crl_transform_ctx *ctx)
{
    return ctx && ctx->tf ? ctx->tf->label : "transform";
}

crl_rng *crl_transform_ctx_rng(crl_transform_ctx *ctx)
{
    return ctx ? &ctx->rng : NULL;
}

const bool *crl_transform_ctx_step_resets(const crl_transform_ctx *ctx)
{
    return ctx ? ctx->resets : NULL;
}
