/* step_mdp: move a step's "next" entries to the root (TorchRL's torchrl.envs.utils.step_mdp). */
#include "env-private.h"
#include "transform-private.h"

#include <string.h>

#define MDP_MAX_DEPTH 64

typedef struct mdp_walk {
    crl_env *env;
    const char *path[MDP_MAX_DEPTH];
    int depth;
    crl__mdp_slot *rec; /* the plan being recorded; NULL once it cannot be */
} mdp_walk;

/* Keys in entries and key handles are interned: pointer equality is string
 * equality. */

/* path + leaf spells exactly the components of k. */
static bool path_is(const mdp_walk *w, const char *leaf, const crl_td_key *k)
{
    if (k->n != (size_t)w->depth + 1)
        return false;
    for (int i = 0; i < w->depth; i++)
        if (k->comp[i] != w->path[i])
            return false;
    return k->comp[w->depth] == leaf;
}

/* Rewards never reach the root; at the root, actions do not stay. */
static bool excluded(const mdp_walk *w, const char *leaf, bool root)
{
    const crl_env *env = w->env;
    const crl__tchain *c = env->chain;
    if (c) {
        for (size_t i = 0; i < c->nrew; i++)
            if (path_is(w, leaf, c->rew_keys[i]))
                return true;
        for (size_t i = 0; root && i < c->nact; i++)
            if (path_is(w, leaf, c->act_keys[i]))
                return true;
        return false;
    }
    for (size_t i = 0; i < env->nleaves; i++) {
        const crl__env_leaf *l = &env->leaves[i];
        if ((l->role == CRL__ROLE_REWARD || (root && l->role == CRL__ROLE_ACTION)) && path_is(w, leaf, l->k))
            return true;
    }
    return false;
}

/* The entry at a (dotless, interned) key, as crl_td_get / crl_td_get_td /
 * crl_td_has see it. */
static inline crl__td_entry *entry(const crl_td *td, const char *key)
{
    return key ? crl__td_find_interned(td, key) : NULL;
}

/* Entry i as crl_td_key_at / crl_td_tensor_at / crl_td_td_at see it. */
static inline const crl__td_entry *entry_at(const crl_td *td, size_t i)
{
    return i < td->len ? &td->entries[i] : NULL;
}

/* ---- recording the plan ------------------------------------------------------------ */

static int rec_pin(mdp_walk *w, const crl_td *td)
{
    crl__mdp_slot *p = w->rec;
    if (!p)
        return -1;
    for (size_t i = 0; i < p->npins; i++)
        if (p->pins[i].td == td)
            return (int)i;
    if (p->npins == CRL__MDP_PINS) {
        w->rec = NULL;
        return -1;
    }
    p->pins[p->npins].td = td;
    p->pins[p->npins].layout = crl__td_layout(td);
    p->pins[p->npins].stamp = crl__td_stamp(td);
    return (int)p->npins++;
}

/* Decide a put as put_tensor does (see env-private.h). */
bool crl__env_mdp_decide(crl__mdp_op *op, crl_tensor *d, const crl_tensor *s)
{
    op->dt = d;
    op->st = s;
    if (d == s) {
        op->mode = CRL__MDP_SKIP;
        return true;
    }
    if (!d || d->dtype != s->dtype || !crl_tensor_same_shape(d, s))
        return false;
    /* crl_tensor_copy is one memmove exactly when both are contiguous. */
    if (crl__tensor_contiguous(d) && crl__tensor_contiguous(s)) {
        op->mode = CRL__MDP_MOVE;
        op->dd = d->data;
        op->sd = s->data;
        op->n = crl_tensor_nbytes(d);
        op->cls = crl__env_move_class(op->n);
    } else {
        op->mode = CRL__MDP_COPY;
    }
    return true;
}

/* A put from se into de (their tds were pinned on entering the level). */
static void rec_op(mdp_walk *w, const crl__td_entry *se, crl__td_entry *de)
{
    crl__mdp_slot *p = w->rec;
    if (!p)
        return;
    if (p->nops == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->ops = g_renew(crl__mdp_op, p->ops, p->cap);
    }
    crl__mdp_op *op = &p->ops[p->nops++];
    memset(op, 0, sizeof *op);
    op->se = se;
    op->de = de;
    op->ss = se->stamp;
    op->ds = de->stamp;
    crl__env_mdp_decide(op, de->tensor, se->tensor);
}

/* ---- the general walk ---------------------------------------------------------------- */

/* Store the values of entry se at the same key of dst_level, reusing a
 * tensor that fits. */
static int put_tensor(mdp_walk *w, const crl__td_entry *se, crl_td *dst_level, crl_error *err)
{
    crl_tensor *src = se->tensor;
    crl__td_entry *de = entry(dst_level, se->key);
    crl_tensor *d = de ? de->tensor : NULL;
    if (d == src) {
        rec_op(w, se, de);
        return CRL_OK;
    }
    if (d && crl_tensor_dtype(d) == crl_tensor_dtype(src) && crl_tensor_same_shape(d, src)) {
        rec_op(w, se, de);
        return crl_tensor_copy(d, src, err);
    }
    w->rec = NULL;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *c = crl_tensor_clone(src, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_td_set(dst_level, se->key, c, err);
    crl_tensor_unref(c);
    return rc;
}

static crl_td *dst_sub(mdp_walk *w, crl_td *dst_level, const char *key, const crl_td *src_sub, crl_error *err)
{
    crl__td_entry *e = entry(dst_level, key);
    if (e && e->td)
        return e->td;
    w->rec = NULL;
    crl_td *d = crl_td_new(crl_td_batch_ndim(src_sub), crl_td_batch_shape(src_sub), err);
    if (!d)
        return NULL;
    int rc = crl_td_set_td(dst_level, key, d, err);
    crl_td_unref(d);
    return rc ? NULL : crl_td_get_td(dst_level, key);
}

static int push(mdp_walk *w, const char *key, crl_error *err)
{
    if (w->depth >= MDP_MAX_DEPTH)
        return crl_error_set(err, CRL_E_INVALID, "step_mdp: keys nest deeper than %d levels", MDP_MAX_DEPTH);
    w->path[w->depth++] = key;
    return CRL_OK;
}

/* Root entries that are not actions, rewards, "next", or superseded by an
 * entry of next at the same key. */
static int keep_root(mdp_walk *w, const crl_td *level, const crl_td *next_level, crl_td *dst_level, crl_error *err)
{
    rec_pin(w, level);
    if (next_level)
        rec_pin(w, next_level);
    rec_pin(w, dst_level);
    size_t n = crl_td_len(level);
    for (size_t i = 0; i < n; i++) {
        const crl__td_entry *e = entry_at(level, i);
        const char *key = e ? e->key : NULL;
        if (w->depth == 0 && key == w->env->next_key)
            continue;
        crl_tensor *t = e ? e->tensor : NULL;
        if (t) {
            if (excluded(w, key, true) || (next_level && entry(next_level, key)))
                continue;
            int rc = put_tensor(w, e, dst_level, err);
            if (rc)
                return rc;
            continue;
        }
        crl_td *sub = e ? e->td : NULL;
        const crl__td_entry *ne = next_level ? entry(next_level, key) : NULL;
        crl_td *next_sub = ne ? ne->td : NULL;
        if (next_level && !next_sub && ne && ne->tensor)
            continue;
        crl_error de;
        crl_error_clear(&de);
        crl_td *d = dst_sub(w, dst_level, key, sub, &de);
        int rc = d ? push(w, key, err) : crl_error_pass(err, &de, CRL_E_INVALID);
        if (rc)
            return rc;
        rc = keep_root(w, sub, next_sub, d, err);
        w->depth--;
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* Every entry of next but the rewards, at the same key of dst. */
static int copy_next(mdp_walk *w, const crl_td *next_level, crl_td *dst_level, crl_error *err)
{
    rec_pin(w, next_level);
    rec_pin(w, dst_level);
    size_t n = crl_td_len(next_level);
    for (size_t i = 0; i < n; i++) {
        const crl__td_entry *e = entry_at(next_level, i);
        const char *key = e ? e->key : NULL;
        crl_tensor *t = e ? e->tensor : NULL;
        int rc;
        if (t) {
            if (excluded(w, key, false))
                continue;
            if ((rc = put_tensor(w, e, dst_level, err)))
                return rc;
            continue;
        }
        crl_td *sub = e ? e->td : NULL;
        crl_error de;
        crl_error_clear(&de);
        crl_td *d = dst_sub(w, dst_level, key, sub, &de);
        rc = d ? push(w, key, err) : crl_error_pass(err, &de, CRL_E_INVALID);
        if (rc)
            return rc;
        rc = copy_next(w, sub, d, err);
        w->depth--;
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* ---- the plan cache ------------------------------------------------------------------
 *
 * A slot is the list of puts the general walk made for (src, dst), and the
 * tds it looked at.  The walk's choices depend only on the keys of those
 * tds (their layouts) and on the tensors in the entries it put from and
 * into; while the layouts hold, the entries stay, and the choice of a put
 * whose tds kept their stamps stays too.  Others are decided again from
 * the tensors now in their entries, exactly as put_tensor decides. */

/* The slot for (src, dst) when it still describes them, else NULL. */
static crl__mdp_slot *mdp_lookup(crl_env *env, const crl_td *src, const crl_td *dst)
{
    crl__mdp_slot *p = NULL;
    for (int k = 0; k < CRL__ENV_SLOTS && !p; k++)
        if (env->mdp_slots[k].npins && env->mdp_slots[k].src == src && env->mdp_slots[k].dst == dst)
            p = &env->mdp_slots[k];
    if (!p)
        return NULL;
    /* A td whose stamp held kept its layout too: the common case is one
     * compare per pin (each read only after its parents held). */
    size_t held = 0;
    while (held < p->npins && crl__td_stamp(p->pins[held].td) == p->pins[held].stamp)
        held++;
    if (held == p->npins)
        return p;
    bool moved = false;
    for (size_t i = 0; i < p->npins; i++) {
        const crl_td *t = p->pins[i].td;
        if (crl__td_layout(t) != p->pins[i].layout)
            return NULL;
        moved |= crl__td_stamp(t) != p->pins[i].stamp;
    }
    /* No td's stamp moved: no entry's did. */
    if (!moved)
        return p;
    for (size_t j = 0; j < p->nops; j++) {
        crl__mdp_op *op = &p->ops[j];
        if (op->se->stamp == op->ss && op->de->stamp == op->ds)
            continue;
        if (!crl__env_mdp_decide(op, op->de->tensor, op->se->tensor))
            return NULL;
        op->ss = op->se->stamp;
        op->ds = op->de->stamp;
    }
    for (size_t i = 0; i < p->npins; i++)
        p->pins[i].stamp = crl__td_stamp(p->pins[i].td);
    return p;
}

crl__mdp_slot *crl__env_mdp_plan(crl_env *env, const crl_td *src, const crl_td *dst)
{
    return mdp_lookup(env, src, dst);
}

/* After a walk that recorded into scratch: keep the plan if no td it
 * looked at changed its keys meanwhile. */
static void mdp_keep(crl_env *env, const crl_td *src, const crl_td *dst)
{
    crl__mdp_slot *s = &env->mdp_scratch;
    for (size_t i = 0; i < s->npins; i++)
        if (crl__td_layout(s->pins[i].td) != s->pins[i].layout || crl__td_stamp(s->pins[i].td) != s->pins[i].stamp)
            return;
    s->src = src;
    s->dst = dst;
    crl__mdp_slot *slot = NULL;
    for (int k = 0; k < CRL__ENV_SLOTS && !slot; k++)
        if (env->mdp_slots[k].npins && env->mdp_slots[k].src == src && env->mdp_slots[k].dst == dst)
            slot = &env->mdp_slots[k];
    if (!slot) {
        slot = &env->mdp_slots[env->mdp_rr];
        env->mdp_rr = (env->mdp_rr + 1) % CRL__ENV_SLOTS;
    }
    crl__mdp_slot t = *slot;
    *slot = *s;
    *s = t;
    s->npins = 0;
}

/* The general walk, recording the plan; CRL_E_NOT_FOUND (unprefixed)
 * without "next". */
static __attribute__((noinline)) int mdp_general(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err)
{
    const crl__td_entry *ne = entry(td, env->next_key);
    const crl_td *next = ne ? ne->td : NULL;
    if (!next)
        return crl_error_set(err, CRL_E_NOT_FOUND, "step_mdp: the TensorDict has no 'next' entries; call "
                             "crl_env_step on it first");
    mdp_walk w;
    w.env = env;
    w.depth = 0;
    w.rec = &env->mdp_scratch;
    w.rec->npins = 0;
    w.rec->nops = 0;
    /* td first: next and dst's pins follow it (next is its child). */
    rec_pin(&w, td);
    rec_pin(&w, next);
    rec_pin(&w, dst);
    int rc = keep_root(&w, td, next, dst, err);
    if (!rc)
        rc = copy_next(&w, next, dst, err);
    if (!rc && w.rec)
        mdp_keep(env, td, dst);
    if (rc)
        crl_error_prefix(err, "step_mdp: ");
    return rc;
}

/* same_step: the envs that ended were reset inside the step; their root
 * entries are the reset ones. */
static __attribute__((noinline)) void mdp_reset_rows(crl_env *env, crl_td *dst)
{
    int64_t *idx = env->ridx, k = -1;
    for (size_t j = 0; j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        if (!l->rst || !l->exposed)
            continue;
        crl_tensor *d = crl_td_get_k(dst, l->k);
        if (!d || crl_tensor_dtype(d) != crl_tensor_dtype(l->ubuf) || !crl_tensor_same_shape(d, l->ubuf))
            continue;
        if (crl__tensor_contiguous(d)) {
            /* Row i of a contiguous tensor shaped like ubuf is row_bytes at
             * i * row_bytes, as in the buffers. */
            if (k < 0)
                k = crl__env_mask_list(env->just_reset, env->num, idx);
            crl__env_copy_rows(d->data, crl_tensor_data(l->rst), l->row_bytes, idx, k);
        } else {
            for (int64_t i = 0; i < env->num; i++)
                if (env->just_reset[i])
                    crl__env_row_to_user(env, d, l, l->rst, i);
        }
    }
}

int crl__env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err)
{
    crl__mdp_slot *plan = mdp_lookup(env, td, dst);
    int rc;
    if (plan) {
        env->mdp_fast++;
        if ((rc = crl__env_mdp_run(plan->ops, plan->nops, err))) {
            crl_error_prefix(err, "step_mdp: ");
            return rc;
        }
    } else {
        env->mdp_slow++;
        if ((rc = mdp_general(env, td, dst, err)))
            return rc;
    }
    if (env->autoreset == CRL_AUTORESET_SAME_STEP && env->any_just_reset)
        mdp_reset_rows(env, dst);
    return CRL_OK;
}

static int check_args(const crl_env *env, const crl_td *td, const char *fn, crl_error *err)
{
    if (!env || !td)
        return crl_error_set(err, CRL_E_INVALID, "%s: %s is NULL", fn, !env ? "env" : "the TensorDict");
    return CRL_OK;
}

crl_td *crl_env_step_mdp(crl_env *env, const crl_td *td, crl_error *err)
{
    if (check_args(env, td, "step_mdp", err))
        return NULL;
    crl_td *dst = crl_td_new(crl_td_batch_ndim(td), crl_td_batch_shape(td), err);
    if (dst && crl__env_step_mdp_into(env, td, dst, err)) {
        crl_td_unref(dst);
        return NULL;
    }
    return dst;
}

int crl_env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err)
{
    int rc = check_args(env, td, "step_mdp_into", err);
    if (rc)
        return rc;
    if (!dst)
        return crl_error_set(err, CRL_E_INVALID, "step_mdp_into: the destination TensorDict is NULL");
    int nd = td->batch_ndim;
    bool same = dst->batch_ndim == nd;
    for (int i = 0; same && i < nd; i++)
        same = dst->batch_shape[i] == td->batch_shape[i];
    if (!same) {
        char *a = crl__env_dims(nd, crl_td_batch_shape(td));
        char *b = crl__env_dims(crl_td_batch_ndim(dst), crl_td_batch_shape(dst));
        crl_error_set(err, CRL_E_SHAPE, "step_mdp_into: the destination has batch shape %s but the source has %s", b, a);
        crl_free(a);
        crl_free(b);
        return CRL_E_SHAPE;
    }
    return crl__env_step_mdp_into(env, td, dst, err);
}
