/* step_and_maybe_reset: one step, step_mdp into the next root, and a reset of the envs that ended
 * (TorchRL's EnvBase.step_and_maybe_reset), fused over the step and step_mdp caches. */
#include "env-private.h"

#include <string.h>

#define FN "step_and_maybe_reset"

/* ---- the fused slots ---------------------------------------------------------------------
 *
 * A slot is made after a general call on a (td, next_root) pair, from the
 * step slot of td and the step_mdp plan of (td, next_root) that call left
 * valid, and holds copies of both under one list of pins.  It is looked at
 * as those are (see env-private.h): while every pinned td keeps its layout
 * the entries stay; an entry whose stamp moved is checked again, as
 * step_lookup and the plan lookup check them. */

static void slot_clear(crl__smr_slot *p)
{
    g_free(p->io);
    g_free(p->ops);
    g_free(p->moves);
    g_free(p->xops);
    memset(p, 0, sizeof *p);
}

void crl__env_smr_free(crl_env *env)
{
    if (!env->smr_slots)
        return;
    for (int k = 0; k < CRL__ENV_SLOTS; k++)
        slot_clear(&env->smr_slots[k]);
    g_free(env->smr_slots);
    env->smr_slots = env->smr_next = NULL;
}

/* The moves and the other puts, from io and ops as they stand.  Each
 * output but a reward has one put, found by its source entry (the
 * output's entry in td's "next"); it must be a MOVE, since the move and a
 * reset write into the root's tensor directly.  False when one is not. */
static bool derive(crl_env *env, crl__smr_slot *p)
{
    const crl__step_io *out = p->io + env->nact;
    for (size_t j = 0; j < p->nops; j++)
        p->xops[j] = 1;
    /* Sorted by size class (the hot path has a loop per class). */
    static const uint8_t order[] = { CRL__MOVE_1, CRL__MOVE_4_7, CRL__MOVE_8_16, CRL__MOVE_17_32, CRL__MOVE_NONE,
                                     CRL__MOVE_2_3, CRL__MOVE_BIG };
    size_t count[G_N_ELEMENTS(order)] = { 0 }, n = 0;
    for (size_t c = 0; c < G_N_ELEMENTS(order); c++) {
        for (size_t k = 0; k < env->nout; k++) {
            if (out[k].cls != order[c])
                continue;
            crl__smr_move *m = &p->moves[n++];
            count[c]++;
            m->l = out[k].l;
            m->s = out[k].udata;
            m->n = out[k].n;
            m->cls = out[k].cls;
            /* A reward stays behind: its second store goes to the same place. */
            m->d1 = m->d2 = out[k].data;
            if (m->l->role == CRL__ROLE_REWARD)
                continue;
            size_t j = 0;
            while (j < p->nops && p->ops[j].se != out[k].e)
                j++;
            if (j == p->nops || p->ops[j].mode != CRL__MDP_MOVE)
                return false;
            m->d2 = p->ops[j].dd;
            p->xops[j] = 0;
        }
    }
    const crl__smr_move *end = p->moves;
    for (size_t c = 0; c < 4; c++)
        p->ends[c] = end += count[c];
    p->ends[4] = p->moves + n;
    p->nx = 0;
    for (size_t j = 0; j < p->nops; j++)
        if (p->xops[j])
            p->xops[p->nx++] = j;
    return true;
}

/* After a general call that left the step slot of td and the plan of
 * (td, root) valid: a fused slot for the pair.  Nothing happens when one
 * of them is missing (the next general call tries again). */
static void slot_make(crl_env *env, const crl_td *td, const crl_td *root)
{
    if (env->chain || env->pixels_leaf || env->frame_skip != 1)
        return;
    crl__step_slot *ss = crl__env_step_slot(env, td);
    crl__mdp_slot *ms = ss ? crl__env_mdp_plan(env, td, root) : NULL;
    if (!ms)
        return;
    if (!env->smr_slots)
        env->smr_slots = g_new0(crl__smr_slot, CRL__ENV_SLOTS);
    crl__smr_slot *p = NULL;
    for (int k = 0; k < CRL__ENV_SLOTS && !p; k++)
        if (env->smr_slots[k].npins && env->smr_slots[k].td == td && env->smr_slots[k].root == root)
            p = &env->smr_slots[k];
    if (!p) {
        p = &env->smr_slots[env->smr_rr];
        env->smr_rr = (env->smr_rr + 1) % CRL__ENV_SLOTS;
    }
    p->npins = 0;
    if (!p->io) {
        p->io = g_new0(crl__step_io, env->nleaves + 1);
        p->moves = g_new0(crl__smr_move, env->nleaves + 1);
    }
    if (p->ops_cap < ms->nops || !p->ops) {
        p->ops_cap = ms->nops + 1;
        p->ops = g_renew(crl__mdp_op, p->ops, p->ops_cap);
        p->xops = g_renew(size_t, p->xops, p->ops_cap);
    }
    memcpy(p->io, ss->io, sizeof(crl__step_io) * (env->nact + env->nout));
    if (ms->nops)
        memcpy(p->ops, ms->ops, sizeof(crl__mdp_op) * ms->nops);
    p->nops = ms->nops;
    if (!derive(env, p))
        return;
    size_t np = 0;
    crl__td_pin *pins = p->pins;
    for (size_t i = 0; i < ss->npins + ms->npins; i++) {
        const crl__td_pin *pin = i < ss->npins ? &ss->pins[i] : &ms->pins[i - ss->npins];
        size_t j = 0;
        while (j < np && pins[j].td != pin->td)
            j++;
        if (j < np)
            continue;
        if (np == G_N_ELEMENTS(p->pins))
            return;
        pins[np++] = *pin;
    }
    p->td = td;
    p->root = root;
    p->npins = np;
    p->partner = NULL;
    for (int k = 0; k < CRL__ENV_SLOTS; k++) {
        crl__smr_slot *q = &env->smr_slots[k];
        if (q->npins && q->td == root && q->root == td) {
            p->partner = q;
            q->partner = p;
        }
    }
}

/* Entries whose stamp moved hold other tensors now: check them again, as
 * the step and plan lookups would.  False when one no longer fits. */
static __attribute__((noinline)) bool slot_refresh(crl_env *env, crl__smr_slot *p)
{
    crl__step_io *io = p->io, *end = io + env->nact + env->nout;
    for (; io < end; io++) {
        if (io->e->stamp == io->stamp)
            continue;
        const crl_tensor *t = io->e->tensor;
        if (!crl__env_fits_contig(t, io->l))
            return false;
        io->data = t->data;
        io->stamp = io->e->stamp;
    }
    for (size_t j = 0; j < p->nops; j++) {
        crl__mdp_op *op = &p->ops[j];
        if (op->se->stamp == op->ss && op->de->stamp == op->ds)
            continue;
        if (!crl__env_mdp_decide(op, op->de->tensor, op->se->tensor))
            return false;
        op->ss = op->se->stamp;
        op->ds = op->de->stamp;
    }
    if (!derive(env, p))
        return false;
    for (size_t i = 0; i < p->npins; i++)
        p->pins[i].stamp = crl__td_stamp(p->pins[i].td);
    return true;
}

/* The slot that still describes (td, root) and that the cached path may
 * take, else NULL: every case the quick check in the public function
 * does not settle. */
static crl__smr_slot *slot_lookup(crl_env *env, const crl_td *td, const crl_td *root)
{
    crl__smr_slot *p = env->smr_slots, *found = NULL;
    if (!p || env->chain)
        return NULL;
    for (int k = 0; k < CRL__ENV_SLOTS && !found; k++)
        if (p[k].npins && p[k].td == td && p[k].root == root)
            found = &p[k];
    if (!found)
        return NULL;
    /* A layout never changes without the stamp.  Pins are parents first,
     * and a parent whose layout holds still owns its subs, so each pin is
     * read only after the ones before it held. */
    p = found;
    bool moved = false;
    for (size_t i = 0; i < p->npins; i++) {
        if (crl__td_layout(p->pins[i].td) != p->pins[i].layout) {
            p->npins = 0;
            return NULL;
        }
        moved |= crl__td_stamp(p->pins[i].td) != p->pins[i].stamp;
    }
    if (moved && !slot_refresh(env, p)) {
        p->npins = 0;
        return NULL;
    }
    /* An env waiting for a reset (a step alone ended it, or an error
     * left it so) takes the general path, which knows every case. */
    for (int64_t i = 0; i < env->num; i++)
        if (env->needs_reset[i])
            return NULL;
    return p;
}

/* ---- the reset ------------------------------------------------------------------------------ */

/* The envs that ended in the step just made start over: reset by the step
 * itself under same_step, here otherwise; their rows of the root become
 * the reset values. */
static __attribute__((noinline)) int fused_reset(crl_env *env, const crl__smr_slot *p, crl_error *err)
{
    const bool *mask = env->just_reset;
    if (env->autoreset != CRL_AUTORESET_SAME_STEP) {
        /* backend_reset clears done_now for the envs it resets. */
        memcpy(env->mask, env->done_now, sizeof(bool) * (size_t)env->num);
        int rc = crl__env_reset_backend(env, NULL, env->mask, false, err);
        if (rc)
            return rc;
        mask = env->mask;
    }
    int64_t *idx = env->ridx, k = crl__env_mask_list(mask, env->num, idx);
    for (size_t r = 0; r < env->nout; r++) {
        const crl__smr_move *m = &p->moves[r];
        if (m->l->role != CRL__ROLE_REWARD)
            crl__env_copy_rows(m->d2, m->l->bdata, m->l->row_bytes, idx, k);
    }
    return CRL_OK;
}

int crl__env_smr_finish(crl_env *env, const crl__smr_slot *p, bool any_done, crl_error *err)
{
    /* The puts of step_mdp that do not come from an output. */
    for (size_t j = 0; j < p->nx; j++) {
        int rc = crl__env_mdp_run(&p->ops[p->xops[j]], 1, err);
        if (rc)
            return crl__env_smr_fail(rc, err);
    }
    int rc = any_done ? fused_reset(env, p, err) : CRL_OK;
    return rc ? crl__env_smr_fail(rc, err) : CRL_OK;
}

int crl__env_smr_fail(int rc, crl_error *err)
{
    crl_error_prefix(err, FN ": ");
    return rc;
}

/* ---- the general path ------------------------------------------------------------------------ */

/* step, step_mdp_into, and a masked reset of the envs that ended, through
 * the public paths (the transform chain included). */
static __attribute__((noinline)) int general(crl_env *env, crl_td *td, crl_td *root, crl_error *err)
{
    env->smr_slow++;
    /* Before anything runs, so a wrong root changes nothing. */
    int rc = crl__env_check_batch(env, root, "next_root", err);
    if (rc || (rc = crl_env_step(env, td, err)) || (rc = crl__env_step_mdp_into(env, td, root, err)))
        return rc;
    if (env->autoreset != CRL_AUTORESET_SAME_STEP) {
        uint8_t any = 0;
        for (int64_t i = 0; i < env->num; i++)
            any |= (uint8_t)env->done_now[i];
        if (any) {
            memcpy(env->mask, env->done_now, sizeof(bool) * (size_t)env->num);
            if ((rc = crl__env_reset_through(env, root, env->mask, false, err)))
                return rc;
        }
    }
    slot_make(env, td, root);
    return CRL_OK;
}

/* Everything but the quick case: argument errors, the slot looked up
 * and checked in full, or the general path. */
static __attribute__((noinline)) int slow(crl_env *env, crl_td *td, crl_td *root, crl_error *err)
{
    if (!env || !td || !root)
        return crl_error_set(err, CRL_E_INVALID, FN ": %s is NULL", !env ? "env" : !td ? "the TensorDict" : "next_root");
    crl__smr_slot *p = slot_lookup(env, td, root);
    if (p) {
        env->smr_fast++;
        env->smr_next = p->partner;
        return crl__env_step_fused(env, p, err);
    }
    int rc = general(env, td, root, err);
    return rc ? crl__env_smr_fail(rc, err) : CRL_OK;
}

int crl_env_step_and_maybe_reset(crl_env *env, crl_td *td, crl_td *next_root, crl_error *err)
{
    /* The quick case, kept free of calls but the tail ones: the pair of
     * the last call swapped (or the same pair in place), whose every pinned
     * td kept its stamp (so its layout and entries too), no transform
     * chain, no env waiting for a reset. */
    crl__smr_slot *p = env && td && next_root ? env->smr_next : NULL;
    if (__builtin_expect(p && p->td == td && p->root == next_root && !env->chain, 1)) {
        const crl__td_pin *pin = p->pins, *end = pin + p->npins;
        while (pin < end && crl__td_stamp(pin->td) == pin->stamp)
            pin++;
        uint8_t pend = 0;
        for (int64_t i = 0; i < env->num; i++)
            pend |= (uint8_t)env->needs_reset[i];
        /* npins is 0 for a slot dropped. */
        if (__builtin_expect(pin == end && p->npins && !pend, 1)) {
            env->smr_fast++;
            env->smr_next = p->partner;
            return crl__env_step_fused(env, p, err);
        }
    }
    return slow(env, td, next_root, err);
}
