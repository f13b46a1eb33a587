/* Internals of the env host shared by env.c, env_mdp.c, env_rollout.c and env_check.c. */
#ifndef CRL_ENV_PRIVATE_H
#define CRL_ENV_PRIVATE_H

#include "crl-private.h"
#include "td-private.h"
#include "config-private.h"
#include <crl/env.h>

/* What a buffer leaf is to the host. */
typedef enum crl__env_role {
    CRL__ROLE_OBS = 0,     /* observation leaf (hidden from the user with pixels_only) */
    CRL__ROLE_INFO,        /* info leaf: shown to the user like an observation */
    CRL__ROLE_PIXELS,      /* "pixels", host-owned, filled by render */
    CRL__ROLE_ACTION,
    CRL__ROLE_REWARD,
    CRL__ROLE_DONE,
    CRL__ROLE_TERMINATED,
    CRL__ROLE_TRUNCATED,
    CRL__ROLE_STATE
} crl__env_role;

/* One leaf of the backend's specs (or "pixels") with its buffers. */
typedef struct crl__env_leaf {
    char *key;              /* dotted key, relative to the root (reset) or "next" (step) */
    int role;               /* crl__env_role */
    bool exposed;           /* part of the user's TensorDicts and specs */
    crl_spec *spec;         /* leaf spec with batch [num] (a reference) */
    crl_spec *uspec;        /* the same as the user sees it (batch [] or [num]) */
    crl_td_key *k;          /* key */
    crl_td_key *nk;         /* "next." + key */
    crl_tensor *buf;        /* contiguous [num, ...] buffer */
    crl_tensor *ubuf;       /* buf as the user sees it: buf itself, or env 0's row */
    crl_tensor *snap;       /* frame_skip > 1: an env's outputs when it ended early */
    crl_tensor *rst;        /* same_step: the reset values of the envs that just ended */
    double *acc;            /* frame_skip > 1, reward leaves: sums over the skipped frames */
    size_t row_bytes;       /* bytes of one env's row of buf */
    int64_t row_elems;      /* elements of one env's row */
    /* Hoisted for the step path (the buffers never move). */
    char *bdata;            /* buf's data */
    char *udata;            /* ubuf's data */
    size_t ubytes;          /* ubuf's bytes */
    int64_t numel;          /* buf's elements */
    bool ucontig;           /* ubuf is contiguous (always, but the fast path checks) */
    bool is_float;          /* buf's dtype is a float dtype (NaN check) */
    /* Action leaves: how to test the domain without crl_spec_is_in (see
     * prepare_domain in env.c). */
    int dom;
    double dom_n;           /* Categorical: n */
    int64_t dom_ni;
    const double *dom_lo, *dom_hi;  /* Bounded: the spec's f64 bounds */
    float *dom_flo, *dom_fhi;       /* Bounded float32: the same bounds as floats */
} crl__env_leaf;

/* ---- caches of the step path ----------------------------------------------
 *
 * The caches hold no references, so they never keep a td alive, and a
 * stale slot is harmless.  Every td a slot names is pinned with the layout
 * stamp it had and is looked at only after the pins before it held: pins
 * are listed parents first, a parent whose layout still holds still owns
 * the same sub-td pointers (so the child is alive), and the first pin is
 * the caller's own td.  The td pointer may be one that was freed and
 * reused for a new td; the new td took a stamp never handed out before, so
 * it cannot match.  Entry pointers into a pinned td stay valid while its
 * layout holds; an entry whose own stamp is unchanged still holds the very
 * tensor it held (it kept a reference all along), so data pointers taken
 * from it are valid too. */
#define CRL__ENV_SLOTS 4
#define CRL__ENV_PINS 8
#define CRL__MDP_PINS 16

typedef struct crl__td_pin {
    const crl_td *td;
    uint64_t layout, stamp;
} crl__td_pin;

/* Where a leaf's values come from (action) or go to (output, under "next"). */
typedef struct crl__step_io {
    crl__td_entry *e;       /* the entry in the user's td */
    uint64_t stamp;         /* e's stamp when data was taken */
    char *data;             /* its tensor's data: contiguous, the leaf's dtype and shape */
    crl__env_leaf *l;       /* the leaf */
    char *udata;            /* l->udata, l->ubytes */
    size_t n;
    uint8_t cls;            /* crl__env_move_class(n) */
} crl__step_io;

/* crl_env_step on one td, resolved and validated. */
typedef struct crl__step_slot {
    size_t npins;           /* 0: empty; pins[0] is the td */
    crl__td_pin pins[CRL__ENV_PINS];
    crl__step_io *io;       /* the action leaves (env->nact), then the outputs (env->nout) */
} crl__step_slot;

enum { CRL__MDP_SKIP, CRL__MDP_MOVE, CRL__MDP_COPY };

/* One put of step_mdp: src entry's values into dst entry's tensor. */
typedef struct crl__mdp_op {
    const crl__td_entry *se;
    crl__td_entry *de;
    uint64_t ss, ds;        /* their stamps when decided */
    crl_tensor *dt;         /* COPY: the tensors (de's and se's) */
    const crl_tensor *st;
    char *dd;               /* MOVE: memmove(dd, sd, n) */
    const char *sd;
    size_t n;
    uint8_t mode;
    uint8_t cls;            /* MOVE: crl__env_move_class(n) */
} crl__mdp_op;

/* step_mdp_into(src, dst) as the list of puts it makes. */
typedef struct crl__mdp_slot {
    const crl_td *src, *dst;
    size_t npins;           /* 0: empty */
    crl__td_pin pins[CRL__MDP_PINS];
    crl__mdp_op *ops;
    size_t nops, cap;
} crl__mdp_slot;

/* crl_env_step_and_maybe_reset on one (td, next_root) pair
 * (env_step_reset.c): the step slot's and the step_mdp plan's validated
 * pointers, copied into one slot so one check covers both.  Pins are the
 * step slot's, then the plan's not already there (parents first). */
typedef struct crl__smr_move {
    char *d1, *d2;            /* the output's entry in td's "next" and in next_root (d1 again for a reward) */
    const char *s;            /* the leaf's udata */
    const crl__env_leaf *l;
    size_t n;
    uint8_t cls;
} crl__smr_move;

typedef struct crl__smr_slot {
    const crl_td *td, *root;
    struct crl__smr_slot *partner;  /* the slot of (root, td), if any: the likely next call */
    size_t npins;             /* 0: empty */
    crl__td_pin pins[CRL__ENV_PINS + CRL__MDP_PINS];
    crl__step_io *io;         /* as a step slot's: actions (env->nact), outputs (env->nout) */
    crl__mdp_op *ops;         /* step_mdp's puts from td into next_root */
    size_t nops, ops_cap;
    /* Made from io and ops: each output moved into both tds at once, by
     * size class (one byte up to ends[0], then 4..7 bytes up to ends[1],
     * 8..16 up to ends[2], 17..32 up to ends[3], the rest up to ends[4]),
     * and the puts that do not come from an output (their indices in ops). */
    crl__smr_move *moves;     /* env->nout */
    const crl__smr_move *ends[5];
    size_t *xops, nx;
} crl__smr_slot;

struct crl_env {
    crl_host *host;
    char *section;
    char *backend;               /* component name */
    char *plugin;                /* plugin that registered it */
    char *id;
    crl_env_ops ops;             /* copied, missing trailing members NULL */
    void *benv;                  /* the backend's instance */

    int64_t num;
    int batch_ndim;              /* 0 (single env) or 1 */
    int64_t batch_shape[1];
    int64_t frame_skip;
    bool from_pixels, pixels_only, project_actions;
    bool return_state;           /* state leaves exposed (else bound and kept, but in no td or spec) */
    crl_autoreset autoreset;
    int64_t max_steps;           /* 0: none */
    int32_t render_h, render_w;

    crl_td *buffers;             /* what bind got: batch [num], one tensor per spec leaf */
    crl__env_leaf *leaves;       /* every leaf; pixels last when from_pixels */
    size_t nleaves;
    crl__env_leaf *done_leaf, *term_leaf, *trunc_leaf, *pixels_leaf;

    /* User-facing specs (batch as the user sees it). */
    crl_spec *obs_spec, *action_spec, *reward_spec, *done_spec, *state_spec;
    /* Everything one step leaves in a td: root keys plus "next". */
    crl_spec *full_spec;

    /* Per-env bookkeeping, num entries each. */
    int64_t *steps;              /* base-env steps since the last reset */
    bool *needs_reset;           /* ended and not reset yet */
    bool *just_reset;            /* same_step: reset inside the last step */
    bool *done_now;              /* done flag of the last step's output */
    bool *active;                /* scratch: still stepping in this frame-skip loop */
    bool *ended_early;           /* scratch: ended before the last skipped frame */
    bool *pending;               /* scratch: reset inside this step (next_step semantics) */
    bool *mask, *mask2;          /* scratch masks */
    bool *seed_pending;          /* a seed from set_seed waits for the env's next reset */
    uint64_t *seeds;
    int64_t *ridx;               /* scratch: env indices (crl__env_mask_list) */
    bool started;                /* reset ran at least once */
    bool any_just_reset;

    crl_rng rng;                 /* random actions */
    crl_td_key *reset_key;       /* "_reset" */
    const char *next_key;        /* "next", interned */

    /* Hoisted data of the done, terminated and truncated buffers. */
    uint8_t *done_p, *term_p, *trunc_p;
    /* Leaf indices, in leaf order: action leaves; exposed non-action
     * leaves (what a step writes under "next"). */
    size_t *act_idx, nact;
    size_t *out_idx, nout;

    /* Caches (see above); scratch is filled on a miss and swapped in. */
    crl__step_slot step_slots[CRL__ENV_SLOTS], step_scratch;
    unsigned step_rr;
    crl__mdp_slot mdp_slots[CRL__ENV_SLOTS], mdp_scratch;
    unsigned mdp_rr;
    /* The buffer td tree as it was when every buffer was last found in place. */
    crl__td_pin *buf_pins;
    size_t nbuf_pins, buf_pins_cap;

    /* How often the cached paths were taken (tests read these). */
    uint64_t step_fast, step_slow, mdp_fast, mdp_slow;
    /* crl_env_step_and_maybe_reset's slots (made on first use) and counters. */
    crl__smr_slot *smr_slots, *smr_next;
    unsigned smr_rr;
    uint64_t smr_fast, smr_slow;

    /* Set by what an executor puts below the base env (exec.c), so env.c knows no executor: called after
     * every backend step (processes: end the episodes of envs whose worker restarted), and the batch of an
     * async env (batch_size < num_envs: only send/recv; 0: synchronous). */
    void (*after_backend_step)(crl_env *env);
    int64_t async_batch;
    /* The backend's own async mode (executor = inline, ops.send/recv): exec_async.c's state for it, made by the
     * first crl_env_async_reset, and the function that frees it (called by crl_env_free). */
    void *native_async;
    void (*native_async_free)(crl_env *env);
    /* The chain's entry points, installed by transform_chain.c with the chain (env.c imports no transform
     * code); they stay set after the chain is gone, and do nothing then. */
    const struct crl__chain_ops *chain_ops;
    /* The transform chain (transform_chain.c), NULL without transforms:
     * then nothing on the step path looks at it but one test. */
    struct crl__tchain *chain;
    uint64_t seed;               /* the last seed given (the chain's rngs derive from it) */
    /* An inner env of worker_transforms under threads or processes (exec.c sets these): its place in the
     * executor's turn order (crl_transform_ctx_wait_turn).  turn_word NULL: no turns. */
    _Atomic uint32_t *turn_word;        /* instances that passed their turn in the current job (shared memory) */
    _Atomic uint32_t *turn_abort;       /* nonzero: a worker failed in this job; nobody waits any more */
    uint32_t turn_index;                /* this env's instance */
    bool wants_turns;                   /* a transform of its chain called crl_transform_ctx_use_turns */
};

typedef struct crl__chain_ops {
    int (*step)(crl_env *env, crl_td *td, crl_error *err);
    int (*reset)(crl_env *env, crl_td *td, const bool *mask, bool from_state, crl_error *err);
    void (*seed)(crl_env *env, uint64_t seed);
    void (*free)(crl_env *env);
} crl__chain_ops;

/* Building an env (env_make.c): the env a description names, with its fields but no backend yet. */
CRL_INTERNAL crl_env *crl__env_alloc(const crl_env_desc *d);
/* Then, once env->ops/env->benv hold the made backend (or executor) and sp its specs: leaves, buffers
 * (shared memory when `shared`), user specs, bookkeeping, and the backend's bind. */
CRL_INTERNAL int crl__env_attach(crl_env *env, crl_env_specs *sp, bool shared, crl_error *err);
/* Reset (mask NULL: all) into td through the transform chain if there is one. */
CRL_INTERNAL int crl__env_reset_through(crl_env *env, crl_td *td, const bool *mask, bool from_state,
                                        crl_error *err);
/* Frame bookkeeping, one implementation for every stepping path: after one base-env frame of env i
 * (counts, time limit, done, reward sums; true when its episode ended), and the frame-skip reward sums of
 * env i started before the first frame and written to its reward rows after the last. */
CRL_INTERNAL bool crl__env_frame_row(crl_env *env, int64_t i);
CRL_INTERNAL void crl__env_skip_begin(crl_env *env, int64_t i);
CRL_INTERNAL void crl__env_skip_end(crl_env *env, int64_t i);
/* The CRL_E_INVALID of a sync call (fn) on an async env. */
CRL_INTERNAL int crl__env_async_refuse(const crl_env *env, const char *fn, crl_error *err);

/* Size classes of crl__env_move_c: the small sizes of single envs are
 * inline copies, the rest memmove. */
enum { CRL__MOVE_NONE, CRL__MOVE_1, CRL__MOVE_2_3, CRL__MOVE_4_7, CRL__MOVE_8_16, CRL__MOVE_17_32, CRL__MOVE_BIG };

static inline uint8_t crl__env_move_class(size_t n)
{
    return n == 0 ? CRL__MOVE_NONE : n == 1 ? CRL__MOVE_1 : n < 4 ? CRL__MOVE_2_3 : n < 8 ? CRL__MOVE_4_7 : n <= 16 ? CRL__MOVE_8_16
           : n <= 32 ? CRL__MOVE_17_32 : CRL__MOVE_BIG;
}

/* memmove(d, s, n) for n of class cls.  The inline copies load the head
 * and tail words before any store, so overlap is fine. */
static inline void crl__env_move_c(void *d, const void *s, size_t n, uint8_t cls)
{
    const char *sc = s;
    char *dc = d;
    switch (cls) {
    case CRL__MOVE_1:
        *dc = *sc;
        return;
    case CRL__MOVE_2_3: {
        char a = sc[0], b = sc[n / 2], c = sc[n - 1];
        dc[0] = a;
        dc[n / 2] = b;
        dc[n - 1] = c;
        return;
    }
    case CRL__MOVE_4_7: {
        uint32_t a, b;
        __builtin_memcpy(&a, sc, 4);
        __builtin_memcpy(&b, sc + n - 4, 4);
        __builtin_memcpy(dc, &a, 4);
        __builtin_memcpy(dc + n - 4, &b, 4);
        return;
    }
    case CRL__MOVE_8_16: {
        uint64_t a, b;
        __builtin_memcpy(&a, sc, 8);
        __builtin_memcpy(&b, sc + n - 8, 8);
        __builtin_memcpy(dc, &a, 8);
        __builtin_memcpy(dc + n - 8, &b, 8);
        return;
    }
    case CRL__MOVE_17_32: {
        uint64_t w[4];
        __builtin_memcpy(w, sc, 16);
        __builtin_memcpy(&w[2], sc + n - 16, 16);
        __builtin_memcpy(dc, w, 16);
        __builtin_memcpy(dc + n - 16, &w[2], 16);
        return;
    }
    case CRL__MOVE_BIG:
        if (d != s)
            memmove(d, s, n);
        return;
    default:
        return;
    }
}

static inline void crl__env_move(void *d, const void *s, size_t n)
{
    crl__env_move_c(d, s, n, crl__env_move_class(n));
}

/* The indices of mask's true entries (all n when mask is NULL) into idx,
 * in order; returns how many.  No branch per entry. */
static inline int64_t crl__env_mask_list(const bool *mask, int64_t n, int64_t *idx)
{
    int64_t k = 0;
    if (!mask) {
        for (int64_t i = 0; i < n; i++)
            idx[i] = i;
        return n;
    }
    for (int64_t i = 0; i < n; i++) {
        idx[k] = i;
        k += mask[i] ? 1 : 0;
    }
    return k;
}

/* Copy rows idx[0..k) of row_bytes each from src to dst (same layout,
 * different tensors). */
static inline void crl__env_copy_rows(char *dst, const char *src, size_t row_bytes, const int64_t *idx, int64_t k)
{
    switch (row_bytes) {
    case 1:
        for (int64_t m = 0; m < k; m++)
            dst[idx[m]] = src[idx[m]];
        return;
    case 16:
        for (int64_t m = 0; m < k; m++)
            crl__env_move(dst + (size_t)idx[m] * 16, src + (size_t)idx[m] * 16, 16);
        return;
    default:
        for (int64_t m = 0; m < k; m++)
            memcpy(dst + (size_t)idx[m] * row_bytes, src + (size_t)idx[m] * row_bytes, row_bytes);
        return;
    }
}

/* The tensor can stand for the leaf's user buffer in a memmove: the dtype
 * and shape load_actions and put_leaf ask for, and contiguous. */
static inline bool crl__env_fits_contig(const crl_tensor *t, const crl__env_leaf *l)
{
    const crl_tensor *u = l->ubuf;
    if (!l->ucontig || t->dtype != u->dtype || t->ndim != u->ndim)
        return false;
    for (int i = 0; i < u->ndim; i++)
        if (t->shape[i] != u->shape[i])
            return false;
    return crl__tensor_contiguous(t);
}

/* Make the puts of a step_mdp plan. */
static inline int crl__env_mdp_run(const crl__mdp_op *ops, size_t n, crl_error *err)
{
    for (size_t j = 0; j < n; j++) {
        const crl__mdp_op *op = &ops[j];
        if (op->mode == CRL__MDP_MOVE) {
            crl__env_move_c(op->dd, op->sd, op->n, op->cls);
        } else if (op->mode == CRL__MDP_COPY) {
            int rc = crl_tensor_copy(op->dt, op->st, err);
            if (rc)
                return rc;
        }
    }
    return CRL_OK;
}

/* env.c */
/* Reset the envs in mask (NULL: all) and bring td's root entries up to
 * date for them (td non-NULL).  With from_state, td's state entries are
 * the start states. */
CRL_INTERNAL int crl__env_reset_into(crl_env *env, crl_td *td, const bool *mask, bool from_state,
                                     crl_error *err);
/* The two halves of crl__env_reset_into: reset the envs in mask (state
 * entries read from state_td with from_state), then bring td's root
 * entries up to date for the envs in mask (NULL: all). */
CRL_INTERNAL int crl__env_reset_backend(crl_env *env, const crl_td *state_td, const bool *mask, bool from_state,
                                        crl_error *err);
CRL_INTERNAL int crl__env_put_root(crl_env *env, crl_td *td, const bool *mask, crl_error *err);
/* crl_env_step without the transform chain. */
CRL_INTERNAL int crl__env_step_base(crl_env *env, crl_td *td, crl_error *err);
/* The action rows rows[0..k) just written into the action buffers: no
 * NaN, inside the spec (projected into it with project_actions).  Errors
 * name fn, the env index and the key. */
CRL_INTERNAL int crl__env_check_action_rows(crl_env *env, const int64_t *rows, int64_t k, const char *fn,
                                            crl_error *err);
/* Copy env i's row of a [num, ...] buffer into a user tensor (shaped like
 * the leaf's ubuf) / from a user tensor into the buffer row.  No allocation. */
CRL_INTERNAL void crl__env_row_to_user(const crl_env *env, crl_tensor *dst, const crl__env_leaf *l,
                                       const crl_tensor *src_buf, int64_t i);
/* Copy an n-dim block between strided layouts (byte strides), same dtype. */
CRL_INTERNAL void crl__env_block_copy(char *dst, const int64_t *dstr, const char *src, const int64_t *sstr,
                                      int ndim, const int64_t *shape, size_t es);
/* CRL_E_SHAPE unless td's batch shape is the env's; fn names the caller. */
CRL_INTERNAL int crl__env_check_batch(const crl_env *env, const crl_td *td, const char *fn, crl_error *err);
/* "[2, 3]" for messages; free with g_free. */
CRL_INTERNAL char *crl__env_dims(int nd, const int64_t *sh);
/* "env backend 'x' (id 'y')" for messages. */
CRL_INTERNAL const char *crl__env_name(const crl_env *env, char *buf, size_t n);
/* Drop the leading (batch) dim of a spec, keeping env 0's bounds.  New
 * reference or NULL with err set. */
CRL_INTERNAL crl_spec *crl__spec_drop_batch(const crl_spec *s, crl_error *err);

/* The step slot for td when it still describes td (stamps brought up to
 * date), else NULL. */
CRL_INTERNAL crl__step_slot *crl__env_step_slot(crl_env *env, const crl_td *td);
/* crl_env_step_and_maybe_reset's cached path, once env_step_reset.c has
 * found p valid (no chain, no pixels, frame_skip 1, no env waiting for a
 * reset): crl__env_step_base writing each output into td's "next" and
 * next_root at once, then crl__env_smr_finish when needed.  Errors are
 * prefixed as the public call's. */
CRL_INTERNAL int crl__env_step_fused(crl_env *env, const crl__smr_slot *p, crl_error *err);

/* env_mdp.c: step_mdp's core, td and dst non-NULL (may be the same). */
CRL_INTERNAL int crl__env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err);
/* The plan for step_mdp_into(src, dst) when it still describes them
 * (stamps and puts brought up to date), else NULL. */
CRL_INTERNAL crl__mdp_slot *crl__env_mdp_plan(crl_env *env, const crl_td *src, const crl_td *dst);
/* Decide a put as step_mdp does, given both tensors; false when it would
 * store a copy (a structural change). */
CRL_INTERNAL bool crl__env_mdp_decide(crl__mdp_op *op, crl_tensor *d, const crl_tensor *s);

/* env_step_reset.c */
CRL_INTERNAL void crl__env_smr_free(crl_env *env);
/* The rest of crl__env_step_fused after the moves: step_mdp's other puts,
 * then the reset of the envs that ended (any_done).  Returns rc. */
CRL_INTERNAL int crl__env_smr_finish(crl_env *env, const crl__smr_slot *p, bool any_done, crl_error *err);
/* Prefix err as crl_env_step_and_maybe_reset's errors; returns rc. */
CRL_INTERNAL int crl__env_smr_fail(int rc, crl_error *err);

/* env.c: TorchRL's rule for action_spec/reward_spec/done_spec: the one leaf of
 * a Composite that holds exactly one (at any depth), else the Composite
 * itself (none or several leaves).  A non-Composite is returned as is. */
CRL_INTERNAL const crl_spec *crl__spec_leaf_or_composite(const crl_spec *comp);

#endif
