/* An env's transform chain (TorchRL's TransformedEnv + Compose): specs, reset, step, inverses, parent calls. */
#include "transform-private.h"
#include "env-private.h"
#include "check-private.h"

#include <string.h>

/* Dry mode (check-private.h): this thread builds envs for validation, and a
 * bind reaching its parent is refused (dry_refused tells chain_set). */
static _Thread_local bool dry, dry_refused;

/* Each transform's random stream: the env's seed, this stream plus its index. */
#define TRANSFORM_STREAM UINT64_C(0x7472616e73000000)

static inline size_t chain_len(const crl__tchain *c)
{
    return c ? c->tf->len : 0;
}

static inline crl_transform *chain_at(const crl__tchain *c, size_t i)
{
    return g_ptr_array_index(c->tf, i);
}

/* ---- built state (specs, levels) ---------------------------------------------------- */

/* Everything a chain derives from its transforms; swapped in as a whole. */
typedef struct built {
    crl_transform_specs out;
    crl_spec *full_spec;
    crl__tlevel *lv;
    size_t nlv;
    bool *has_inv_below;
    bool check_action;
    crl_td_key **act_keys;
    crl_spec **act_specs;
    size_t nact;
    crl_td_key **rew_keys;
    crl_spec **rew_specs;
    size_t nrew;
} built;

static void built_clear(built *b)
{
    crl__tspecs_clear(&b->out);
    crl_spec_unref(b->full_spec);
    for (size_t i = 0; i < b->nlv; i++) {
        crl_td_unref(b->lv[i].shallow);
        crl_td_unref(b->lv[i].inv_keep);
        crl_td_unref(b->lv[i].rst);
        g_free(b->lv[i].resets);
    }
    g_free(b->lv);
    g_free(b->has_inv_below);
    for (size_t i = 0; i < b->nact; i++) {
        crl_td_key_free(b->act_keys[i]);
        crl_spec_unref(b->act_specs[i]);
    }
    g_free(b->act_keys);
    g_free(b->act_specs);
    for (size_t i = 0; i < b->nrew; i++) {
        crl_td_key_free(b->rew_keys[i]);
        crl_spec_unref(b->rew_specs[i]);
    }
    g_free(b->rew_keys);
    g_free(b->rew_specs);
    memset(b, 0, sizeof *b);
}

static void built_from_chain(built *b, crl__tchain *c)
{
    b->out = c->out;
    b->full_spec = c->full_spec;
    b->lv = c->lv;
    b->nlv = c->nlv;
    b->has_inv_below = c->has_inv_below;
    b->check_action = c->check_action;
    b->act_keys = c->act_keys;
    b->act_specs = c->act_specs;
    b->nact = c->nact;
    b->rew_keys = c->rew_keys;
    b->rew_specs = c->rew_specs;
    b->nrew = c->nrew;
}

static void built_into_chain(crl__tchain *c, const built *b)
{
    c->out = b->out;
    c->full_spec = b->full_spec;
    c->lv = b->lv;
    c->nlv = b->nlv;
    c->has_inv_below = b->has_inv_below;
    c->check_action = b->check_action;
    c->act_keys = b->act_keys;
    c->act_specs = b->act_specs;
    c->nact = b->nact;
    c->rew_keys = b->rew_keys;
    c->rew_specs = b->rew_specs;
    c->nrew = b->nrew;
}

static void base_specs(const crl_env *env, crl_transform_specs *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->batch_ndim = env->batch_ndim;
    s->batch_shape = env->batch_shape;
    s->observation = env->obs_spec;
    s->action = env->action_spec;
    s->reward = env->reward_spec;
    s->done = env->done_spec;
    s->state = env->state_spec;
}

static int merge_into(crl_spec *dst, const crl_spec *src, crl_error *err)
{
    for (size_t i = 0; i < crl_spec_composite_len(src); i++) {
        int rc = crl_spec_composite_set(dst, crl_spec_composite_key_at(src, i), crl_spec_composite_at(src, i), err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* One step's td: root = observation, action, done, state; next = the same
 * without action, plus reward (as build_user_specs in env.c). */
static crl_spec *full_spec_of(const crl_env *env, const crl_transform_specs *s, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_spec *full = crl_spec_composite(env->batch_ndim, env->batch_shape, &e);
    crl_spec *next = full ? crl_spec_composite(env->batch_ndim, env->batch_shape, &e) : NULL;
    int rc = next ? CRL_OK : crl_error_pass(err, &e, CRL_E_NOMEM);
    const crl_spec *root_parts[] = { s->observation, s->action, s->done, s->state };
    const crl_spec *next_parts[] = { s->observation, s->reward, s->done, s->state };
    for (int i = 0; !rc && i < 4; i++)
        rc = merge_into(full, root_parts[i], err);
    for (int i = 0; !rc && i < 4; i++)
        rc = merge_into(next, next_parts[i], err);
    if (!rc)
        rc = crl_spec_composite_set(full, "next", next, err);
    crl_spec_unref(next);
    if (rc) {
        crl_spec_unref(full);
        return NULL;
    }
    return full;
}

static int collect_leaves(built *b, const crl_spec *comp, const char *prefix, GPtrArray *keys, GPtrArray *specs,
                           crl_error *err)
{
    for (size_t i = 0; i < crl_spec_composite_len(comp); i++) {
        crl_spec *c = crl_spec_composite_at(comp, i);
        char *full = prefix ? g_strconcat(prefix, ".", crl_spec_composite_key_at(comp, i), NULL)
                            : g_strdup(crl_spec_composite_key_at(comp, i));
        int rc = CRL_OK;
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE) {
            rc = collect_leaves(b, c, full, keys, specs, err);
        } else {
            crl_error e;
            crl_error_clear(&e);
            crl_td_key *k = crl_td_key_new(full, &e);
            if (!k) {
                rc = crl_error_pass(err, &e, CRL_E_INVALID);
            } else {
                g_ptr_array_add(keys, k);
                g_ptr_array_add(specs, crl_spec_ref(c));
            }
        }
        g_free(full);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static const char *label_of(const crl_transform *t)
{
    return t->label;
}

static void name_error(crl_error *err, const crl_transform *t)
{
    crl__error_label(err, label_of(t));
}

static bool spec_set_ok(const crl_transform_specs *s)
{
    const crl_spec *m[5] = { s->observation, s->action, s->reward, s->done, s->state };
    for (int i = 0; i < 5; i++)
        if (!m[i] || crl_spec_get_kind(m[i]) != CRL_SPEC_COMPOSITE)
            return false;
    return true;
}

/* Run transform_specs of every transform of list in order.  sets[i] gets
 * the input of transform i; b the output and everything derived. */
static int compute(crl_env *env, GPtrArray *list, crl_transform_specs *sets, built *b, crl_error *err)
{
    size_t n = list->len;
    crl_transform_specs base;
    base_specs(env, &base);
    int rc = crl__tspecs_clone(&sets[0], &base, err);
    for (size_t i = 0; !rc && i < n; i++) {
        crl_transform *t = g_ptr_array_index(list, i);
        if ((rc = crl__tspecs_clone(&sets[i + 1], &sets[i], err)))
            break;
        if (t->ops.transform_specs && (rc = t->ops.transform_specs(t->t, &sets[i + 1], err))) {
            name_error(err, t);
            break;
        }
        if (!spec_set_ok(&sets[i + 1]))
            rc = crl_error_set(err, CRL_E_PLUGIN, "%s: transform_specs left a spec that is not a Composite: fix the "
                               "plugin", label_of(t));
        /* A transform may have replaced a member: keep the batch shape ours. */
        sets[i + 1].batch_ndim = env->batch_ndim;
        sets[i + 1].batch_shape = env->batch_shape;
    }
    if (rc)
        return rc;
    /* The output is its own copy: sets[n] stays the (unused) input of a
     * transform appended later. */
    if ((rc = crl__tspecs_clone(&b->out, &sets[n], err)))
        return rc;
    crl_error e;
    crl_error_clear(&e);
    if (!(b->full_spec = full_spec_of(env, &b->out, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    b->check_action = !crl_spec_equal(b->out.action, env->action_spec);
    GPtrArray *keys = g_ptr_array_new(), *specs = g_ptr_array_new();
    rc = collect_leaves(b, b->out.action, NULL, keys, specs, err);
    b->nact = keys->len;
    b->act_keys = (crl_td_key **)g_ptr_array_free(keys, FALSE);
    b->act_specs = (crl_spec **)g_ptr_array_free(specs, FALSE);
    if (rc)
        return rc;
    /* step_mdp leaves every reward of the transformed env behind (a copy
     * RenameTransform made too), as TorchRL excludes env.reward_keys. */
    keys = g_ptr_array_new();
    specs = g_ptr_array_new();
    rc = collect_leaves(b, b->out.reward, NULL, keys, specs, err);
    b->nrew = keys->len;
    b->rew_keys = (crl_td_key **)g_ptr_array_free(keys, FALSE);
    b->rew_specs = (crl_spec **)g_ptr_array_free(specs, FALSE);
    if (rc)
        return rc;
    b->nlv = n + 1;
    b->lv = g_new0(crl__tlevel, b->nlv);
    b->has_inv_below = g_new0(bool, b->nlv);
    for (size_t k = 0; k < b->nlv; k++) {
        b->lv[k].resets = g_new0(bool, (gsize)env->num);
        b->has_inv_below[k] = k > 0 && (b->has_inv_below[k - 1] ||
                                        ((crl_transform *)g_ptr_array_index(list, k - 1))->ops.inv != NULL);
    }
    return CRL_OK;
}

static void seed_ctx(crl__tchain *c, crl_transform *t)
{
    crl_rng_init(&t->ctx.rng, c->seed, TRANSFORM_STREAM + t->ctx.index);
}

static const crl__chain_ops chain_ops = {
    .step = crl__tchain_step,
    .reset = crl__tchain_reset,
    .seed = crl__tchain_seed,
    .free = crl__tchain_free,
};

/* Make `list` (borrowed pointers, the new order) the env's chain: specs,
 * then bind.  On error nothing changes (the old transforms are bound again
 * to their old places). */
static int chain_set(crl_env *env, GPtrArray *list, crl_error *err)
{
    crl__tchain *c = env->chain;
    size_t n = list->len;
    crl_transform_specs *sets = g_new0(crl_transform_specs, n + 1);
    built nb = { 0 };
    int rc = compute(env, list, sets, &nb, err);
    if (rc) {
        for (size_t i = 0; i <= n; i++)
            crl__tspecs_clear(&sets[i]);
        g_free(sets);
        built_clear(&nb);
        return rc;
    }
    /* Swap the new places in, remembering the old ones. */
    typedef struct old_place {
        crl_transform_specs parent;
        size_t index;
        bool in_chain;
        crl_env *env;
    } old_place;
    old_place *old = g_new0(old_place, n);
    for (size_t i = 0; i < n; i++) {
        crl_transform *t = g_ptr_array_index(list, i);
        old[i].parent = t->ctx.parent;
        old[i].index = t->ctx.index;
        old[i].in_chain = t->in_chain;
        old[i].env = t->ctx.env;
        t->ctx.parent = sets[i];
        t->ctx.index = i;
        t->ctx.env = env;
        t->ctx.resets = NULL;
        t->in_chain = true;
    }
    crl__tspecs_clear(&sets[n]);
    g_free(sets);
    uint64_t seed = c ? c->seed : env->seed;
    crl__tchain tmp = { .seed = seed };
    for (size_t i = 0; i < n; i++)
        seed_ctx(&tmp, g_ptr_array_index(list, i));
    /* Install the new chain before bind: a bind may reach its parent
     * (ObservationNorm's init_stats rolls it out).  The old one is kept
     * aside to come back on failure. */
    bool created = c == NULL;
    built ob = { 0 };
    GPtrArray *old_tf = NULL;
    if (created) {
        c = env->chain = g_new0(crl__tchain, 1);
        env->chain_ops = &chain_ops;
        c->tf = g_ptr_array_new();
        c->running = -1;
        c->seed = seed;
    } else {
        built_from_chain(&ob, c);
        old_tf = g_ptr_array_copy(c->tf, NULL, NULL);
    }
    built_into_chain(c, &nb);
    g_ptr_array_set_size(c->tf, 0);
    for (size_t i = 0; i < n; i++)
        g_ptr_array_add(c->tf, g_ptr_array_index(list, i));
    for (size_t i = 0; !rc && i < n; i++) {
        crl_transform *t = g_ptr_array_index(list, i);
        dry_refused = false;
        if (t->ops.bind && (rc = t->ops.bind(t->t, &t->ctx, err))) {
            if (dry && dry_refused) {
                /* validation: this bind's rollout is skipped; the specs stand without it */
                crl_error_clear(err);
                rc = CRL_OK;
            } else {
                name_error(err, t);
            }
        }
    }
    /* step_mdp's cached plans excluded the old chain's reward and action
     * keys; a bind may also have stepped the env. */
    for (size_t i = 0; i < CRL__ENV_SLOTS; i++)
        env->mdp_slots[i].npins = 0;
    if (rc) {
        built_clear(&nb);
        if (created) {
            g_ptr_array_free(c->tf, TRUE);
            g_free(c);
            c = env->chain = NULL;
        } else {
            built_into_chain(c, &ob);
            g_ptr_array_set_size(c->tf, 0);
            for (guint i = 0; i < old_tf->len; i++)
                g_ptr_array_add(c->tf, g_ptr_array_index(old_tf, i));
            g_ptr_array_unref(old_tf);
        }
        for (size_t i = 0; i < n; i++) {
            crl_transform *t = g_ptr_array_index(list, i);
            crl__tspecs_clear(&t->ctx.parent);
            t->ctx.parent = old[i].parent;
            t->ctx.index = old[i].index;
            t->in_chain = old[i].in_chain;
            t->ctx.env = old[i].env;
            if (c)
                seed_ctx(c, t);
        }
        /* Bring the old chain's transforms back to their places. */
        for (size_t i = 0; c && i < chain_len(c); i++) {
            crl_transform *t = chain_at(c, i);
            crl_error e = { 0 };
            if (t->ops.bind && t->ops.bind(t->t, &t->ctx, &e))
                crl_host_log(env->host, CRL_LOG_WARNING, "%s: bind again after a failed chain change: %s",
                             label_of(t), e.message);
        }
        if (c)
            c->need_reset = env->started;
        g_free(old);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        crl__tspecs_clear(&old[i].parent);
    g_free(old);
    if (!created) {
        built_clear(&ob);
        g_ptr_array_unref(old_tf);
    }
    c->need_reset = env->started;
    return CRL_OK;
}

/* Detach t from any chain: it keeps nothing of its place. */
static void detach(crl_transform *t)
{
    crl__tspecs_clear(&t->ctx.parent);
    t->ctx.env = NULL;
    t->ctx.index = 0;
    t->ctx.resets = NULL;
    t->in_chain = false;
}

void crl__tchain_free(crl_env *env)
{
    crl__tchain *c = env ? env->chain : NULL;
    if (!c)
        return;
    for (size_t i = 0; i < chain_len(c); i++) {
        crl_transform *t = chain_at(c, i);
        detach(t);
        crl_transform_free(t);
    }
    g_ptr_array_free(c->tf, TRUE);
    built b;
    built_from_chain(&b, c);
    built_clear(&b);
    g_free(c);
    env->chain = NULL;
}

void crl__tchain_seed(crl_env *env, uint64_t seed)
{
    crl__tchain *c = env ? env->chain : NULL;
    if (!c)
        return;
    c->seed = seed;
    for (size_t i = 0; i < chain_len(c); i++)
        seed_ctx(c, chain_at(c, i));
}

/* ---- the public chain API ------------------------------------------------------------ */

size_t crl_env_transform_count(const crl_env *env)
{
    return env ? chain_len(env->chain) : 0;
}

crl_transform *crl_env_transform_at(const crl_env *env, size_t i)
{
    if (!env || i >= chain_len(env->chain))
        return NULL;
    return chain_at(env->chain, i);
}

static int refuse_same_step(const crl_env *env, const char *what, crl_error *err)
{
    char nb[300];
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: %s has auto_reset = same_step, which transforms do not support "
                         "(the reset observation would bypass them); set [%s] auto_reset = next_step or off", what,
                         crl__env_name(env, nb, sizeof nb), env->section);
}

int crl_env_insert_transform(crl_env *env, size_t i, crl_transform *t, crl_error *err)
{
    if (!env || !t) {
        crl_transform_free(t && !t->in_chain ? t : NULL);
        return crl_error_set(err, CRL_E_INVALID, "insert_transform: %s is NULL", !env ? "env" : "transform");
    }
    if (t->in_chain)
        return crl_error_set(err, CRL_E_INVALID, "insert_transform: %s already belongs to a chain; remove it there "
                             "first (crl_env_remove_transform) or make a new one", label_of(t));
    size_t n = chain_len(env->chain);
    int rc = CRL_OK;
    if (env->autoreset == CRL_AUTORESET_SAME_STEP)
        rc = refuse_same_step(env, "insert_transform", err);
    else if (env->async_batch)
        rc = crl_error_set(err, CRL_E_UNSUPPORTED, "insert_transform: [%s] runs async (batch_size < num_envs), "
                           "which transforms do not support; apply them to the received batches", env->section);
    else if (i > n)
        rc = crl_error_set(err, CRL_E_RANGE, "insert_transform: index %zu is out of range; the chain has %zu "
                           "transform%s, so give 0..%zu", i, n, n == 1 ? "" : "s", n);
    if (rc) {
        crl_transform_free(t);
        return rc;
    }
    GPtrArray *list = g_ptr_array_sized_new((guint)n + 1);
    for (size_t j = 0; j < n; j++)
        g_ptr_array_add(list, chain_at(env->chain, j));
    g_ptr_array_insert(list, (gint)i, t);
    rc = chain_set(env, list, err);
    g_ptr_array_free(list, TRUE);
    if (rc) {
        crl_error_prefix(err, "insert_transform: ");
        detach(t);
        crl_transform_free(t);
    }
    return rc;
}

int crl_env_append_transform(crl_env *env, crl_transform *t, crl_error *err)
{
    return crl_env_insert_transform(env, crl_env_transform_count(env), t, err);
}

crl_transform *crl_env_remove_transform(crl_env *env, size_t i, crl_error *err)
{
    if (!env) {
        crl_error_set(err, CRL_E_INVALID, "remove_transform: env is NULL");
        return NULL;
    }
    size_t n = chain_len(env->chain);
    if (i >= n) {
        if (n)
            crl_error_set(err, CRL_E_RANGE, "remove_transform: index %zu is out of range; the chain has %zu "
                          "transform%s (0..%zu)", i, n, n == 1 ? "" : "s", n - 1);
        else
            crl_error_set(err, CRL_E_RANGE, "remove_transform: index %zu is out of range; the env has no transforms",
                          i);
        return NULL;
    }
    crl__tchain *c = env->chain;
    crl_transform *t = chain_at(c, i);
    if (n == 1) {
        /* Back to the plain env and its fast path. */
        g_ptr_array_set_size(c->tf, 0);
        crl__tchain_free(env);
        detach(t);
        return t;
    }
    GPtrArray *list = g_ptr_array_sized_new((guint)n);
    for (size_t j = 0; j < n; j++)
        if (j != i)
            g_ptr_array_add(list, chain_at(c, j));
    int rc = chain_set(env, list, err);
    g_ptr_array_free(list, TRUE);
    if (rc) {
        crl_error_prefix(err, "remove_transform: ");
        return NULL;
    }
    detach(t);
    return t;
}

const crl_spec *crl_env_base_observation_spec(const crl_env *env)
{
    return env ? env->obs_spec : NULL;
}

const crl_spec *crl_env_base_action_spec(const crl_env *env)
{
    return env ? crl__spec_leaf_or_composite(env->action_spec) : NULL;
}

const crl_spec *crl_env_base_full_action_spec(const crl_env *env)
{
    return env ? env->action_spec : NULL;
}

int crl__tchain_build(crl_env *env, const crl__tf_desc *tf, size_t n, crl_error *err)
{
    if (n == 0)
        return CRL_OK;
    GPtrArray *list = g_ptr_array_new_with_free_func((GDestroyNotify)crl_transform_free);
    int rc = CRL_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        crl_error local;
        crl_error_clear(&local);
        crl_transform *t = crl__transform_from_desc(env->host, &tf[i], &local);
        if (t)
            g_ptr_array_add(list, t);
        else
            rc = crl_error_pass(err, &local, CRL_E_RUNTIME);
    }
    if (!rc && (rc = chain_set(env, list, err)) == CRL_OK)
        g_ptr_array_set_free_func(list, NULL); /* the chain owns them now */
    else if (rc)
        for (guint i = 0; i < list->len; i++)
            detach(g_ptr_array_index(list, i));
    g_ptr_array_free(list, TRUE);
    return rc;
}

/* ---- reset -------------------------------------------------------------------------------- */

/* Reset hooks of transforms [0, k) on td. */
static int reset_hooks(crl_env *env, size_t k, crl_td *td, const bool *mask, crl_error *err)
{
    crl__tchain *c = env->chain;
    for (size_t i = 0; i < k; i++) {
        crl_transform *t = chain_at(c, i);
        int rc = CRL_OK;
        if (t->ops.reset) {
            if ((rc = t->ops.reset(t->t, &t->ctx, td, mask, err)))
                name_error(err, t);
        } else if (t->ops.call) {
            rc = crl__transform_call(t, td, err);
        }
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* dst's nested TensorDict at key, made (like ssub's batch) when dst holds
 * none there; a tensor in the way is dropped.  Borrowed, or NULL with err. */
static crl_td *dst_sub_td(crl_td *dst, const char *key, const crl_td *ssub, crl_error *err)
{
    crl_td *dsub = crl_td_get_td(dst, key);
    if (dsub)
        return dsub;
    if (crl_td_get(dst, key) && crl_td_del(dst, key, err))
        return NULL;
    dsub = crl_td_new(crl_td_batch_ndim(ssub), crl_td_batch_shape(ssub), err);
    int rc = dsub ? crl_td_set_td(dst, key, dsub, err) : CRL_E_NOMEM;
    crl_td_unref(dsub);
    return rc ? NULL : crl_td_get_td(dst, key);
}

/* Copy the rows of src's leaves in mask into dst (batch [num] or []). */
static int merge_rows(const crl_env *env, crl_td *dst, const crl_td *src, const bool *mask, crl_error *err)
{
    size_t n = crl_td_len(src);
    for (size_t j = 0; j < n; j++) {
        const char *key = crl_td_key_at(src, j);
        crl_td *ssub = crl_td_td_at(src, j);
        int rc = CRL_OK;
        if (ssub) {
            crl_error e;
            crl_error_clear(&e);
            crl_td *dsub = dst_sub_td(dst, key, ssub, &e);
            if (!dsub)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
            if ((rc = merge_rows(env, dsub, ssub, mask, err)))
                return rc;
            continue;
        }
        crl_tensor *s = crl_td_tensor_at(src, j);
        crl_tensor *d = crl_td_get(dst, key);
        if (!d || crl_tensor_dtype(d) != crl_tensor_dtype(s) || !crl_tensor_same_shape(d, s)) {
            /* The caller's td has nothing to keep for this key. */
            if (!d && crl_td_get_td(dst, key) && (rc = crl_td_del(dst, key, err)))
                return rc;
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *cl = crl_tensor_clone(s, &e);
            rc = cl ? crl_td_set(dst, key, cl, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(cl);
            if (rc)
                return rc;
            continue;
        }
        if (env->batch_ndim == 0) {
            if (mask[0] && (rc = crl_tensor_copy(d, s, err)))
                return rc;
            continue;
        }
        for (int64_t i = 0; i < env->num && !rc; i++) {
            if (!mask[i])
                continue;
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *dr = crl_tensor_index(d, 0, i, &e);
            crl_tensor *sr = dr ? crl_tensor_index(s, 0, i, &e) : NULL;
            rc = sr ? crl_tensor_copy(dr, sr, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(dr);
            crl_tensor_unref(sr);
        }
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* Reset the envs in mask through the env and transforms [0, k).  A partial
 * reset runs the hooks on a scratch td holding every env's base values, and
 * only the reset envs' rows reach td (TorchRL merges the same way), so the
 * other envs keep their transformed values untouched. */
static int reset_level(crl_env *env, size_t k, crl_td *td, const bool *mask, bool from_state, crl_error *err)
{
    bool partial = false;
    for (int64_t i = 0; mask && i < env->num && !partial; i++)
        partial = !mask[i];
    int rc;
    if (!partial || k == 0) {
        if ((rc = crl__env_reset_into(env, td, mask, from_state, err)))
            return rc;
        return reset_hooks(env, k, td, mask, err);
    }
    crl__tlevel *L = &env->chain->lv[k];
    crl_error e;
    crl_error_clear(&e);
    if (!L->rst && !(L->rst = crl_td_new(env->batch_ndim, env->batch_shape, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    if ((rc = crl__env_reset_backend(env, td, mask, from_state, err)) || (rc = crl__env_put_root(env, L->rst, NULL, err)) ||
        (rc = reset_hooks(env, k, L->rst, mask, err)))
        return rc;
    return merge_rows(env, td, L->rst, mask, err);
}

int crl__tchain_reset(crl_env *env, crl_td *td, const bool *mask, bool from_state, crl_error *err)
{
    crl__tchain *c = env->chain;
    if (!c)
        return crl__env_reset_into(env, td, mask, from_state, err);
    int rc = reset_level(env, chain_len(c), td, mask, from_state, err);
    bool all = true;
    for (int64_t i = 0; mask && i < env->num; i++)
        all = all && mask[i];
    if (!rc && all)
        c->need_reset = false;
    return rc;
}

/* ---- step ---------------------------------------------------------------------------------- */

/* Make dst a shallow copy of src: the same tensors, its own sub-tds (so an
 * inverse replacing a nested entry leaves src alone).  At the root "next"
 * is left out.  Entries already in place are kept, so a steady loop changes
 * nothing structural. */
static int sync_shallow(crl_td *dst, const crl_td *src, bool root, crl_error *err)
{
    size_t n = crl_td_len(src);
    int rc;
    for (size_t j = 0; j < n; j++) {
        const char *key = crl_td_key_at(src, j);
        if (root && !strcmp(key, "next"))
            continue;
        crl_tensor *t = crl_td_tensor_at(src, j);
        if (t) {
            if (crl_td_get(dst, key) == t)
                continue;
            if (crl_td_get_td(dst, key) && (rc = crl_td_del(dst, key, err)))
                return rc;
            if ((rc = crl_td_set(dst, key, t, err)))
                return rc;
            continue;
        }
        crl_td *ssub = crl_td_td_at(src, j);
        crl_error e;
        crl_error_clear(&e);
        crl_td *dsub = dst_sub_td(dst, key, ssub, &e);
        if (!dsub)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        if ((rc = sync_shallow(dsub, ssub, false, err)))
            return rc;
    }
    /* Entries src no longer has. */
    for (size_t j = crl_td_len(dst); j-- > 0;) {
        const char *key = crl_td_key_at(dst, j);
        if ((root && !strcmp(key, "next")) || crl_td_has(src, key))
            continue;
        if ((rc = crl_td_del(dst, key, err)))
            return rc;
    }
    return CRL_OK;
}

/* The base step for level k: on td itself when no transform below k has an
 * inverse, else on a shallow copy with the inverses of [0, k) applied in
 * reverse order.  td's "next" is the one the base wrote. */
static int base_step(crl_env *env, size_t k, crl_td *td, crl_error *err)
{
    crl__tchain *c = env->chain;
    if (!c->has_inv_below[k])
        return crl__env_step_base(env, td, err);
    crl__tlevel *L = &c->lv[k];
    crl_error e;
    crl_error_clear(&e);
    if (!L->shallow && !(L->shallow = crl_td_new(env->batch_ndim, env->batch_shape, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!L->inv_keep && !(L->inv_keep = crl_td_new(env->batch_ndim, env->batch_shape, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_td *s = L->shallow;
    int rc = sync_shallow(s, td, true, err);
    if (rc)
        return rc;
    /* The base writes into td's own "next" (or makes one), as without
     * transforms. */
    crl_td *tn = crl_td_get_td(td, "next");
    if (tn)
        rc = crl_td_get_td(s, "next") == tn ? CRL_OK : crl_td_set_td(s, "next", tn, err);
    else if (crl_td_has(s, "next"))
        rc = crl_td_del(s, "next", err);
    if (rc)
        return rc;
    crl__transform_guard(s, td, L->inv_keep);
    for (size_t i = k; i-- > 0 && !rc;) {
        crl_transform *t = chain_at(c, i);
        if (t->ops.inv && (rc = t->ops.inv(t->t, s, err)))
            name_error(err, t);
    }
    crl__transform_guard(NULL, NULL, NULL);
    if (rc || (rc = crl__env_step_base(env, s, err)))
        return rc;
    crl_td *sn = crl_td_get_td(s, "next");
    if (!sn)
        return crl_error_set(err, CRL_E_RUNTIME, "step: the env wrote no \"next\"");
    /* The copy keeps pointing at the caller's next, so a loop over the same
     * td changes no layout (and the base's step cache holds). */
    return sn != tn ? crl_td_set_td(td, "next", sn, err) : CRL_OK;
}

/* Done flags a transform set (StepCounter's truncation, TerminateTransform)
 * count as the env's: the next step resets (or refuses) those envs. */
static void take_done(crl_env *env, const crl_td *next)
{
    const crl_tensor *d = next ? crl_td_get(next, "done") : NULL;
    if (!d || crl_tensor_dtype(d) != CRL_BOOL || crl_tensor_numel(d) != env->num || !crl_tensor_is_contiguous(d))
        return;
    const uint8_t *p = crl_tensor_data(d);
    for (int64_t i = 0; i < env->num; i++) {
        bool dn = p[i] != 0;
        env->needs_reset[i] = env->needs_reset[i] || dn;
        env->done_now[i] = env->done_now[i] || dn;
    }
}

/* Step the env and transforms [0, k) (level k) with td. */
static int step_level(crl_env *env, size_t k, crl_td *td, crl_error *err)
{
    crl__tchain *c = env->chain;
    crl__tlevel *L = &c->lv[k];
    int rc = base_step(env, k, td, err);
    if (rc)
        return rc;
    memset(L->resets, 0, sizeof(bool) * (size_t)env->num);
    L->any_resets = false;
    if (env->autoreset == CRL_AUTORESET_NEXT_STEP)
        for (int64_t i = 0; i < env->num; i++)
            if (env->pending[i])
                L->resets[i] = L->any_resets = true;
    int prev = c->running;
    c->running = (int)k;
    for (size_t i = 0; i < k && !rc; i++) {
        crl_transform *t = chain_at(c, i);
        crl_td *next = crl_td_get_td(td, "next");
        if (!next) {
            rc = crl_error_set(err, CRL_E_RUNTIME, "step: \"next\" is gone from the TensorDict before %s; a transform "
                               "must not delete it", label_of(t));
            break;
        }
        t->ctx.resets = L->any_resets ? L->resets : NULL;
        if (t->ops.step) {
            if ((rc = t->ops.step(t->t, &t->ctx, td, next, err)))
                name_error(err, t);
        } else if (t->ops.call) {
            rc = crl__transform_call(t, next, err);
        }
        t->ctx.resets = NULL;
    }
    c->running = prev;
    if (!rc)
        take_done(env, crl_td_get_td(td, "next"));
    return rc;
}

static int check_outer_action(crl_env *env, const crl_td *td, crl_error *err)
{
    crl__tchain *c = env->chain;
    for (size_t j = 0; j < c->nact; j++) {
        const char *key = crl_td_key_str(c->act_keys[j]);
        const crl_spec *s = c->act_specs[j];
        crl_tensor *t = crl_td_get_k(td, c->act_keys[j]);
        if (!t)
            return crl_error_set(err, CRL_E_NOT_FOUND, "step: the TensorDict has no '%s'; write an action first (a "
                                 "policy, or crl_env_rand_action)", key);
        if (env->project_actions) {
            /* The base projects its own copy; only dtype and shape here. */
            if (crl_tensor_dtype(t) != crl_spec_dtype(s))
                return crl_error_set(err, CRL_E_DTYPE, "step: key '%s': expected dtype %s but got %s (see the "
                                     "transformed action spec)", key, crl_dtype_name(crl_spec_dtype(s)),
                                     crl_dtype_name(crl_tensor_dtype(t)));
            if (crl_tensor_ndim(t) != crl_spec_ndim(s) ||
                memcmp(crl_tensor_shape(t), crl_spec_shape(s), sizeof(int64_t) * (size_t)crl_spec_ndim(s)) != 0) {
                char *a = crl__env_dims(crl_spec_ndim(s), crl_spec_shape(s));
                char *b = crl__env_dims(crl_tensor_ndim(t), crl_tensor_shape(t));
                crl_error_set(err, CRL_E_SHAPE, "step: key '%s': expected shape %s but got %s (see the transformed "
                              "action spec)", key, a, b);
                crl_free(a);
                crl_free(b);
                return CRL_E_SHAPE;
            }
            continue;
        }
        int rc = crl_spec_check(s, t, key, err);
        if (rc) {
            crl_error_prefix(err, "step: ");
            return rc;
        }
    }
    return CRL_OK;
}

int crl__tchain_step(crl_env *env, crl_td *td, crl_error *err)
{
    crl__tchain *c = env->chain;
    int rc = crl__env_check_batch(env, td, "step", err);
    if (rc)
        return rc;
    if (!env->started)
        return crl__env_step_base(env, td, err); /* "was never reset" */
    if (c->need_reset) {
        char nb[300];
        return crl_error_set(err, CRL_E_INVALID, "step: the transforms of %s changed (append, insert or remove); "
                             "reset every env (crl_env_reset) before the next step", crl__env_name(env, nb, sizeof nb));
    }
    if (c->check_action && (rc = check_outer_action(env, td, err)))
        return rc;
    return step_level(env, chain_len(c), td, err);
}

/* ---- the parent, as a transform reaches it -------------------------------------------------- */

void crl__tchain_set_dry(bool on)
{
    dry = on;
    dry_refused = false;
}

bool crl__tchain_dry(void)
{
    return dry;
}

static int refuse_dry(const crl_transform_ctx *ctx, const char *fn, crl_error *err)
{
    dry_refused = true;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: %s: validation builds envs without resetting or stepping them",
                         fn, label_of(ctx->tf));
}

static int ctx_env(crl_transform_ctx *ctx, const char *fn, crl_env **env, crl_error *err)
{
    *env = ctx ? ctx->env : NULL;
    if (!*env || !(*env)->chain || ctx->index >= chain_len((*env)->chain) || chain_at((*env)->chain, ctx->index) != ctx->tf)
        return crl_error_set(err, CRL_E_INVALID, "%s: %s is not in an env's chain (standalone transforms have no "
                             "parent)", fn, ctx && ctx->tf ? label_of(ctx->tf) : "the transform");
    return CRL_OK;
}

int crl_transform_ctx_parent_step(crl_transform_ctx *ctx, crl_td *td, crl_error *err)
{
    crl_env *env;
    int rc = ctx_env(ctx, "parent_step", &env, err);
    if (rc || (rc = crl__env_check_batch(env, td, "parent_step", err)))
        return rc;
    if (dry)
        return refuse_dry(ctx, "parent_step", err);
    crl__tchain *c = env->chain;
    if ((rc = step_level(env, ctx->index, td, err)))
        return rc;
    /* The level running this transform's hook sees these resets too. */
    if (c->running >= 0 && (size_t)c->running > ctx->index) {
        crl__tlevel *up = &c->lv[c->running], *me = &c->lv[ctx->index];
        for (int64_t i = 0; i < env->num; i++)
            if (me->resets[i])
                up->resets[i] = up->any_resets = true;
    }
    return CRL_OK;
}

int crl_transform_ctx_parent_rand_action(crl_transform_ctx *ctx, crl_td *td, crl_error *err)
{
    crl_env *env;
    int rc = ctx_env(ctx, "parent_rand_action", &env, err);
    if (rc || (rc = crl__env_check_batch(env, td, "parent_rand_action", err)))
        return rc;
    if (dry)
        return refuse_dry(ctx, "parent_rand_action", err);
    if ((rc = crl__spec_rand_into_td(ctx->parent.action, &env->rng, td, err)))
        crl_error_prefix(err, "parent_rand_action: ");
    return rc;
}

int crl_transform_ctx_parent_reset(crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    crl_env *env;
    int rc = ctx_env(ctx, "parent_reset", &env, err);
    if (rc || (rc = crl__env_check_batch(env, td, "parent_reset", err)))
        return rc;
    if (dry)
        return refuse_dry(ctx, "parent_reset", err);
    return reset_level(env, ctx->index, td, mask, false, err);
}

int crl_transform_ctx_update_action_mask(crl_transform_ctx *ctx, const char *key, const crl_tensor *mask,
                                         crl_error *err)
{
    crl_env *env;
    int rc = ctx_env(ctx, "update_action_mask", &env, err);
    if (rc)
        return rc;
    crl__tchain *c = env->chain;
    for (size_t i = 0; key && i < c->nact; i++) {
        if (strcmp(crl_td_key_str(c->act_keys[i]), key) != 0)
            continue;
        if ((rc = crl_spec_update_mask(c->act_specs[i], mask, err))) {
            crl_error_prefix(err, "%s: action '%s': ", label_of(ctx->tf), key);
            return rc;
        }
        /* A masked action is checked before the inverses run. */
        c->check_action = c->check_action || mask != NULL;
        return CRL_OK;
    }
    return crl_error_set(err, CRL_E_NOT_FOUND, "%s: '%s' is not an action of the env (update_action_mask)",
                         label_of(ctx->tf), key ? key : "(null)");
}
