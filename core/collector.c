/* Data collectors: TorchRL's SyncDataCollector, MultiSyncDataCollector and MultiaSyncDataCollector over crl_env. */
#include "crl-private.h"
#include "config-private.h"
#include "check-private.h"

#include <crl/collector.h>

#include <glib.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

static const crl_option collector_options[] = {
    /* no declared default and no REQUIRED flag: the schema declares [collector]
     * for every config; crl_collector_from_config enforces it */
    { "frames_per_batch", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 1e15, NULL,
      "frames per batch (all envs and, with sync multi collectors, all sub-collectors); a multiple of num_envs "
      "(times num_collectors when sync)" },
    { "total_frames", CRL_OPT_INT, CRL_OPT_RANGE, "-1", -1, 1e18, NULL,
      "frames to collect in all; -1: endless.  When not a multiple of frames_per_batch the last batch is "
      "shorter: T = ceil(frames left / envs stepping), so up to num_envs - 1 (sync multi: num_collectors x "
      "num_envs - 1) frames beyond total_frames are collected and counted" },
    { "init_random_frames", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e18, NULL,
      "each sub-collector's first frames use random actions (the policy is not called), counted per step of "
      "all its envs" },
    { "max_frames_per_traj", CRL_OPT_INT, CRL_OPT_RANGE, "0", -1, 1e18, NULL,
      "truncate trajectories at this many frames (truncated and done set, the env reset); 0 or -1: no limit" },
    { "num_collectors", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1024, NULL,
      "sub-collectors, each on its own thread over its own env built from the env section; > 1: multi collector" },
    { "sync", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "true: stack one batch of every sub-collector ([num_collectors, N, T]); false: hand out each "
      "sub-collector's batch as soon as it is ready, with collector.worker" },
    { "split_trajs", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "split each batch into trajectories: [trajectories, longest] padded with zeros, plus collector.mask" },
    { "reset_at_each_iter", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "reset every env at the start of each batch (new trajectories) instead of continuing them" },
    CRL_OPTIONS_END
};

const crl_option *crl_collector_options(void) { return collector_options; }

typedef enum { SUB_IDLE, SUB_REQUESTED, SUB_READY } sub_state;

/* One sub-collector: its env, the running root state, and (multi) its thread. */
typedef struct sub {
    crl_collector *c;
    size_t index;
    crl_env *env;
    int64_t num;                 /* envs in the batch */
    int bndim;
    int64_t bshape[CRL_MAX_DIMS];
    crl_td *cur;                 /* root state the next step starts from; NULL before the first reset */
    crl_tensor *rmask;           /* bool [batch..., 1], the "_reset" entry */
    bool *newtraj;               /* [num]: env i's next frame starts a trajectory */
    bool *done;                  /* [num] scratch */
    bool *forced;                /* [num] scratch */
    int64_t *traj_len;           /* [num] frames in the current trajectory */
    int64_t frames;              /* frames this sub-collector stepped */
    int64_t *cur_ids;            /* [num] global traj id of each env's current trajectory (main thread) */
    /* thread protocol, under c->lock */
    pthread_t thread;
    bool has_thread;
    sub_state state;
    int64_t req_T;
    crl_td *result;
    bool *result_new;            /* [num * T]: frame (i, t) starts a trajectory */
    int result_rc;
    crl_error result_err;
} sub;

struct crl_collector {
    crl_host *host;
    char *section;
    int64_t fpb, total, init_random, max_traj;
    size_t K;
    bool sync, split, reset_each;
    bool threaded;
    crl_policy_fn policy;
    void *user;
    crl_replay *rb;
    sub *subs;
    int64_t N;                   /* envs per sub-collector */
    int64_t T;                   /* steps per full batch (per sub-collector) */
    int64_t handed;              /* frames handed out */
    int64_t requested;           /* async: frames requested from the workers */
    int64_t next_id;             /* next trajectory id */
    bool failed;
    crl_error fail_err;
    bool stopped;
    pthread_mutex_t lock;        /* pthreads rather than GMutex: helgrind and drd understand them */
    pthread_cond_t cond;
    GQueue ready;                /* async: indices of sub-collectors with a result, in completion order */
    bool quit;
    /* remote sub-collectors (crl_collector_from_config_remote): no threads, no envs past sub 0's */
    bool has_remote;
    crl_collector_remote remote;
    void *ruser;
    crl_collector_batch_fn batch_fn;
    void *batch_user;
};

/* ---- one sub-collector's rollout ------------------------------------------------------------ */

static int read_bool_leaf(const crl_td *td, const char *key, int64_t n, bool *out, crl_error *err)
{
    crl_tensor *t = crl_td_get(td, key);
    if (!t || crl_tensor_numel(t) != n)
        return crl_error_set(err, CRL_E_INVALID, "collector: the step wrote no '%s' of %" PRId64 " values", key, n);
    for (int64_t i = 0; i < n; i++)
        out[i] = crl_tensor_flat_get(t, i) != 0.0;
    return CRL_OK;
}

/* Reset the envs whose mask is set through a "_reset" entry. */
static int masked_reset(sub *s, const bool *mask, crl_error *err)
{
    for (int64_t i = 0; i < s->num; i++)
        crl_tensor_flat_set(s->rmask, i, mask[i] ? 1.0 : 0.0);
    int rc = crl_td_set(s->cur, "_reset", s->rmask, err);
    if (rc)
        return rc;
    crl_error e;
    crl_error_clear(&e);
    crl_td *r = crl_env_reset(s->env, s->cur, &e);
    if (!r)
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    crl_td_unref(r);
    return CRL_OK;
}

static int full_reset(sub *s, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *r = crl_env_reset(s->env, s->cur, &e);
    if (!r)
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    if (!s->cur)
        s->cur = r;
    else
        crl_td_unref(r);
    return CRL_OK;
}

/* The [batch..., T] output, laid out from the keys of the first step. */
static crl_td *alloc_out(sub *s, int64_t T, char ***keys_out, crl_error *err)
{
    int64_t bs[CRL_MAX_DIMS];
    memcpy(bs, s->bshape, sizeof(int64_t) * (size_t)s->bndim);
    bs[s->bndim] = T;
    crl_td *out = crl_td_new(s->bndim + 1, bs, err);
    char **keys = out ? crl_td_leaf_keys(s->cur, err) : NULL;
    if (!keys) {
        crl_td_unref(out);
        return NULL;
    }
    for (size_t i = 0; keys[i]; i++) {
        crl_tensor *src = crl_td_get(s->cur, keys[i]);
        int nd = crl_tensor_ndim(src);
        if (nd + 1 > CRL_MAX_DIMS || nd < s->bndim) {
            crl_error_set(err, CRL_E_SHAPE, "collector: key '%s' has %d dims; it cannot take the time dim", keys[i],
                          nd);
            goto fail;
        }
        int64_t shape[CRL_MAX_DIMS];
        const int64_t *ss = crl_tensor_shape(src);
        memcpy(shape, ss, sizeof(int64_t) * (size_t)s->bndim);
        shape[s->bndim] = T;
        memcpy(shape + s->bndim + 1, ss + s->bndim, sizeof(int64_t) * (size_t)(nd - s->bndim));
        crl_tensor *t = crl_tensor_new(crl_tensor_dtype(src), nd + 1, shape, err);
        int rc = t ? crl_td_set(out, keys[i], t, err) : CRL_E_NOMEM;
        crl_tensor_unref(t);
        if (rc)
            goto fail;
    }
    *keys_out = keys;
    return out;
fail:
    crl_free(keys);
    crl_td_unref(out);
    return NULL;
}

static int store_step(sub *s, crl_td *out, char **keys, int64_t t, crl_error *err)
{
    size_t n = 0;
    for (; keys[n]; n++) {
        crl_tensor *src = crl_td_get(s->cur, keys[n]);
        if (!src)
            return crl_error_set(err, CRL_E_INVALID, "collector: key '%s' is gone at batch step %" PRId64 "; a "
                                 "policy must write the same keys at every step", keys[n], t);
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *dst = crl_tensor_index(crl_td_get(out, keys[n]), s->bndim, t, &e);
        if (!dst)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        int rc = CRL_OK;
        if (crl_tensor_dtype(src) != crl_tensor_dtype(dst) || !crl_tensor_same_shape(src, dst))
            rc = crl_error_set(err, CRL_E_SHAPE, "collector: key '%s' changed dtype or shape at batch step %" PRId64
                               "; a policy must write the same keys at every step", keys[n], t);
        else
            rc = crl_tensor_copy(dst, src, err);
        crl_tensor_unref(dst);
        if (rc)
            return rc;
    }
    crl_error e;
    crl_error_clear(&e);
    char **now = crl_td_leaf_keys(s->cur, &e);
    if (!now)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    size_t m = 0;
    while (now[m])
        m++;
    int rc = CRL_OK;
    if (m != n) {
        const char *extra = "?";
        for (size_t i = 0; i < m; i++) {
            bool found = false;
            for (size_t j = 0; j < n && !found; j++)
                found = strcmp(now[i], keys[j]) == 0;
            if (!found) {
                extra = now[i];
                break;
            }
        }
        rc = crl_error_set(err, CRL_E_INVALID, "collector: key '%s' appeared at batch step %" PRId64 "; a policy "
                           "must write the same keys at every step", extra, t);
    }
    crl_free(now);
    return rc;
}

static void sub_prefix(const sub *s, crl_error *err)
{
    if (s->c->K > 1 || s->c->threaded)
        crl_error_prefix(err, "collector [%s]: sub-collector %zu: ", s->c->section, s->index);
    else
        crl_error_prefix(err, "collector [%s]: ", s->c->section);
}

/* Step T times; a new [batch..., T] TensorDict in *out and the trajectory
 * starts in new_flags[i * T + t]. */
static int sub_collect(sub *s, int64_t T, crl_td **out_p, bool **new_p, crl_error *err)
{
    crl_collector *c = s->c;
    int64_t n = s->num;
    int rc = CRL_OK;
    *out_p = NULL;
    *new_p = NULL;
    if (!s->cur || c->reset_each) {
        bool first = !s->cur;
        if ((rc = full_reset(s, err))) {
            crl_error_prefix(err, "reset: ");
            sub_prefix(s, err);
            return rc;
        }
        for (int64_t i = 0; i < n; i++) {
            s->newtraj[i] = !first;
            s->traj_len[i] = 0;
        }
    }
    crl_autoreset mode = crl_env_autoreset(s->env);
    crl_td *out = NULL;
    char **keys = NULL;
    bool *flags = g_new0(bool, (gsize)(n * T));
    for (int64_t t = 0; t < T && !rc; t++) {
        bool random = s->frames < c->init_random;
        if (random || !c->policy)
            rc = crl_env_rand_action(s->env, s->cur, err);
        else if ((rc = c->policy(c->user, s->env, s->cur, err)) != CRL_OK)
            crl_error_prefix(err, "frame %" PRId64 " (batch step %" PRId64 "): policy: ", s->frames, t);
        if (rc)
            break;
        if ((rc = crl_env_step(s->env, s->cur, err))) {
            crl_error_prefix(err, "frame %" PRId64 " (batch step %" PRId64 "): step: ", s->frames, t);
            break;
        }
        if ((rc = read_bool_leaf(s->cur, "next.done", n, s->done, err)))
            break;
        bool any_forced = false, any_done = false;
        for (int64_t i = 0; i < n; i++) {
            flags[i * T + t] = s->newtraj[i];
            s->traj_len[i] = s->newtraj[i] ? 1 : s->traj_len[i] + 1;
            s->forced[i] = c->max_traj > 0 && s->traj_len[i] >= c->max_traj && !s->done[i];
            any_forced |= s->forced[i];
        }
        if (any_forced) {
            crl_tensor *tr = crl_td_get(s->cur, "next.truncated"), *dn = crl_td_get(s->cur, "next.done");
            if (!tr || !dn || crl_tensor_numel(tr) != n || crl_tensor_numel(dn) != n) {
                rc = crl_error_set(err, CRL_E_INVALID, "collector: max_frames_per_traj needs 'next.truncated' and "
                                   "'next.done' of one value per env");
                break;
            }
            for (int64_t i = 0; i < n; i++)
                if (s->forced[i]) {
                    crl_tensor_flat_set(tr, i, 1.0);
                    crl_tensor_flat_set(dn, i, 1.0);
                }
        }
        crl_error e;
        crl_error_clear(&e);
        if (t == 0 && !(out = alloc_out(s, T, &keys, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            break;
        }
        if ((rc = store_step(s, out, keys, t, err)))
            break;
        s->frames += n;
        if ((rc = crl_env_step_mdp_into(s->env, s->cur, s->cur, err)))
            break;
        /* The envs the env itself does not reset: all that ended with auto_reset off, and
         * those we truncated (an auto-resetting env did not see their end). */
        for (int64_t i = 0; i < n; i++) {
            bool ended = s->done[i] || s->forced[i];
            s->newtraj[i] = ended;
            s->done[i] = s->forced[i] || (mode == CRL_AUTORESET_OFF && s->done[i]);
            any_done |= s->done[i];
        }
        if (any_done && (rc = masked_reset(s, s->done, err)))
            crl_error_prefix(err, "frame %" PRId64 ": reset: ", s->frames - n);
    }
    crl_free(keys);
    if (!rc && c->batch_fn && (rc = c->batch_fn(c->batch_user, s->index, out, err)))
        crl_error_prefix(err, "after its batch: ");
    if (rc) {
        sub_prefix(s, err);
        crl_td_unref(out);
        g_free(flags);
        return rc;
    }
    *out_p = out;
    *new_p = flags;
    return CRL_OK;
}

static void sub_clear(sub *s)
{
    crl_td_unref(s->cur);
    crl_tensor_unref(s->rmask);
    crl_td_unref(s->result);
    g_free(s->result_new);
    g_free(s->newtraj);
    g_free(s->done);
    g_free(s->forced);
    g_free(s->traj_len);
    g_free(s->cur_ids);
    crl_env_free(s->env);
}

/* ---- trajectory ids, split, flatten ------------------------------------------------------ */

/* Give each frame of the outs of subs idx[0..n) its trajectory id, in time order then
 * sub-collector then env, so ids grow as episodes start. */
static int assign_ids(crl_collector *c, const size_t *idx, crl_td *const *outs, bool *const *flags, size_t n,
                      int64_t T, crl_error *err)
{
    crl_tensor **ids = g_new0(crl_tensor *, n);
    int rc = CRL_OK;
    for (size_t k = 0; k < n && !rc; k++) {
        const sub *s = &c->subs[idx[k]];
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, s->bshape, sizeof(int64_t) * (size_t)s->bndim);
        shape[s->bndim] = T;
        crl_error e;
        crl_error_clear(&e);
        if (!(ids[k] = crl_tensor_new(CRL_I64, s->bndim + 1, shape, &e)))
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    for (int64_t t = 0; t < T && !rc; t++)
        for (size_t k = 0; k < n; k++) {
            sub *s = &c->subs[idx[k]];
            int64_t *d = crl_tensor_data(ids[k]);
            for (int64_t i = 0; i < s->num; i++) {
                if (flags[k][i * T + t])
                    s->cur_ids[i] = c->next_id++;
                d[i * T + t] = s->cur_ids[i];
            }
        }
    for (size_t k = 0; k < n; k++) {
        if (!rc)
            rc = crl_td_set(outs[k], "collector.traj_ids", ids[k], err);
        crl_tensor_unref(ids[k]);
    }
    g_free(ids);
    return rc;
}

/* A view of td whose first nb batch dims are merged into one. */
static crl_td *merge_batch(crl_td *td, int nb, crl_error *err)
{
    int bnd = crl_td_batch_ndim(td);
    const int64_t *bs = crl_td_batch_shape(td);
    int64_t rows = 1;
    for (int d = 0; d < nb; d++)
        rows *= bs[d];
    int64_t nbs[CRL_MAX_DIMS];
    nbs[0] = rows;
    memcpy(nbs + 1, bs + nb, sizeof(int64_t) * (size_t)(bnd - nb));
    crl_td *flat = crl_td_new(bnd - nb + 1, nbs, err);
    char **keys = flat ? crl_td_leaf_keys(td, err) : NULL;
    if (!keys) {
        crl_td_unref(flat);
        return NULL;
    }
    int rc = CRL_OK;
    for (size_t i = 0; keys[i] && !rc; i++) {
        crl_tensor *t = crl_td_get(td, keys[i]);
        int nd = crl_tensor_ndim(t);
        int64_t shape[CRL_MAX_DIMS];
        shape[0] = rows;
        memcpy(shape + 1, crl_tensor_shape(t) + nb, sizeof(int64_t) * (size_t)(nd - nb));
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *v = crl_tensor_reshape(t, nd - nb + 1, shape, &e);
        rc = v ? crl_td_set(flat, keys[i], v, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(v);
    }
    crl_free(keys);
    if (rc) {
        crl_td_unref(flat);
        return NULL;
    }
    return flat;
}

typedef struct seg {
    int64_t row, start, len;
} seg;

/* TorchRL's split_trajectories: [rows, T] -> [trajectories, longest], zero padded, with "collector.mask". */
static crl_td *split_trajs(crl_td *batch, crl_error *err)
{
    int nb = crl_td_batch_ndim(batch);
    crl_td *rows = merge_batch(batch, nb - 1, err);
    if (!rows)
        return NULL;
    int64_t R = crl_td_batch_shape(rows)[0], T = crl_td_batch_shape(rows)[1];
    const int64_t *ids = crl_tensor_data(crl_td_get(rows, "collector.traj_ids"));
    crl_tensor *idc = NULL;
    if (!crl_tensor_is_contiguous(crl_td_get(rows, "collector.traj_ids"))) {
        idc = crl_tensor_contiguous(crl_td_get(rows, "collector.traj_ids"), err);
        if (!idc) {
            crl_td_unref(rows);
            return NULL;
        }
        ids = crl_tensor_data(idc);
    }
    GArray *segs = g_array_new(FALSE, FALSE, sizeof(seg));
    int64_t L = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t t = 0; t < T; t++) {
            if (t == 0 || ids[r * T + t] != ids[r * T + t - 1]) {
                seg s = { r, t, 0 };
                g_array_append_val(segs, s);
            }
            seg *last = &g_array_index(segs, seg, segs->len - 1);
            if (++last->len > L)
                L = last->len;
        }
    crl_tensor_unref(idc);
    int64_t S = segs->len, bs[2] = { S, L };
    crl_error e;
    crl_error_clear(&e);
    crl_td *out = crl_td_new(2, bs, &e);
    char **keys = out ? crl_td_leaf_keys(rows, &e) : NULL;
    int rc = keys ? CRL_OK : crl_error_pass(err, &e, CRL_E_NOMEM);
    for (size_t i = 0; !rc && keys[i]; i++) {
        crl_tensor *src = crl_td_get(rows, keys[i]);
        int nd = crl_tensor_ndim(src);
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_tensor_shape(src), sizeof(int64_t) * (size_t)nd);
        shape[0] = S;
        shape[1] = L;
        crl_tensor *dst = crl_tensor_new(crl_tensor_dtype(src), nd, shape, &e);
        if (!dst) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            break;
        }
        crl_tensor_fill(dst, 0);
        for (int64_t k = 0; k < S && !rc; k++) {
            const seg *g = &g_array_index(segs, seg, k);
            crl_tensor *a = crl_tensor_index(src, 0, g->row, &e);
            crl_tensor *as = a ? crl_tensor_slice(a, 0, g->start, g->start + g->len, 1, &e) : NULL;
            crl_tensor *b = as ? crl_tensor_index(dst, 0, k, &e) : NULL;
            crl_tensor *bs2 = b ? crl_tensor_slice(b, 0, 0, g->len, 1, &e) : NULL;
            rc = bs2 ? crl_tensor_copy(bs2, as, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(a);
            crl_tensor_unref(as);
            crl_tensor_unref(b);
            crl_tensor_unref(bs2);
        }
        if (!rc)
            rc = crl_td_set(out, keys[i], dst, err);
        crl_tensor_unref(dst);
    }
    if (!rc) {
        crl_tensor *mask = crl_tensor_new(CRL_BOOL, 2, bs, &e);
        if (!mask) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        } else {
            bool *m = crl_tensor_data(mask);
            memset(m, 0, (size_t)(S * L));
            for (int64_t k = 0; k < S; k++)
                memset(m + k * L, 1, (size_t)g_array_index(segs, seg, k).len);
            rc = crl_td_set(out, "collector.mask", mask, err);
            crl_tensor_unref(mask);
        }
    }
    crl_free(keys);
    g_array_free(segs, TRUE);
    crl_td_unref(rows);
    if (rc) {
        crl_td_unref(out);
        return NULL;
    }
    return out;
}

/* Hand a finished batch out: extend the replay buffer with it flattened, then split it. */
static crl_td *finish(crl_collector *c, crl_td *batch, crl_error *err)
{
    int nb = crl_td_batch_ndim(batch);
    int64_t frames = 1;
    for (int d = 0; d < nb; d++)
        frames *= crl_td_batch_shape(batch)[d];
    if (c->rb) {
        /* the failure is kept for later calls, so it is recorded even when err is NULL */
        crl_error e;
        crl_error_clear(&e);
        crl_td *flat = merge_batch(batch, nb, &e);
        int rc = flat ? crl_replay_extend(c->rb, flat, NULL, &e) : crl_error_pass(&e, &e, CRL_E_NOMEM);
        crl_td_unref(flat);
        if (rc) {
            crl_error_prefix(&e, "collector [%s]: extending the replay buffer: ", c->section);
            crl_td_unref(batch);
            c->failed = true;
            crl_error_pass(&c->fail_err, &e, rc);
            crl_error_pass(err, &e, rc);
            return NULL;
        }
    }
    c->handed += frames;
    if (!c->split)
        return batch;
    crl_td *s = split_trajs(batch, err);
    crl_td_unref(batch);
    if (!s)
        crl_error_prefix(err, "collector [%s]: split_trajs: ", c->section);
    return s;
}

/* ---- threads ---------------------------------------------------------------------------- */

static void *worker_main(void *data)
{
    sub *s = data;
    crl_collector *c = s->c;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (s->state != SUB_REQUESTED && !c->quit)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->quit)
            break;
        int64_t T = s->req_T;
        pthread_mutex_unlock(&c->lock);
        crl_td *out = NULL;
        bool *flags = NULL;
        crl_error e;
        crl_error_clear(&e);
        int rc = sub_collect(s, T, &out, &flags, &e);
        pthread_mutex_lock(&c->lock);
        s->result = out;
        s->result_new = flags;
        s->result_rc = rc;
        s->result_err = e;
        s->state = SUB_READY;
        g_queue_push_tail(&c->ready, GSIZE_TO_POINTER(s->index));
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static int request(crl_collector *c, sub *s, int64_t T, crl_error *err)
{
    s->req_T = T;
    s->state = SUB_REQUESTED;
    if (c->has_remote) {
        int rc = c->remote.request(c->ruser, s->index, T, err);
        if (rc)
            crl_error_prefix(err, "collector [%s]: remote sub-collector %zu: ", c->section, s->index);
        return rc;
    }
    pthread_cond_broadcast(&c->cond);
    return CRL_OK;
}

/* Remote: block until one requested batch is back, and file it as that sub-collector's result. */
static int remote_wait_one(crl_collector *c, crl_error *err)
{
    size_t k = 0;
    crl_td *out = NULL;
    bool *starts = NULL;
    int rc = c->remote.wait(c->ruser, &k, &out, &starts, err);
    if (rc)
        return rc;
    sub *s = k < c->K ? &c->subs[k] : NULL;
    bool fits = s && s->state == SUB_REQUESTED && out && starts && crl_td_batch_ndim(out) == s->bndim + 1 &&
                crl_td_batch_shape(out)[s->bndim] == s->req_T &&
                !memcmp(crl_td_batch_shape(out), s->bshape, sizeof(int64_t) * (size_t)s->bndim);
    if (!fits) {
        crl_td_unref(out);
        crl_free(starts);
        return crl_error_set(err, CRL_E_RUNTIME, "collector [%s]: remote sub-collector %zu sent a batch it was not "
                             "asked for (or of another shape)", c->section, k);
    }
    s->result = out;
    s->result_new = starts;
    s->result_rc = CRL_OK;
    s->state = SUB_READY;
    g_queue_push_tail(&c->ready, GSIZE_TO_POINTER(k));
    return CRL_OK;
}

/* Steps per sub-collector for a batch when `remaining` frames are left to give
 * out over `width` envs (rounded up), at most a full batch. */
static int64_t steps_for(const crl_collector *c, int64_t remaining, int64_t width)
{
    if (c->total < 0)
        return c->T;
    int64_t T = (remaining + width - 1) / width;
    return T < c->T ? T : c->T;
}

/* ---- public API ------------------------------------------------------------------------- */

static int opt_int(const crl_opts *o, const char *name, int64_t *out, crl_error *err)
{
    return crl_opts_int(o, name, out, err);
}

/* What [section] says, read and checked on its own. */
typedef struct settings {
    int64_t fpb, total, init_random, max_traj, K;
    bool sync, split, reset_each;
} settings;

static int read_settings(const crl_opts *o, const char *section, const char *env_section, settings *st,
                         crl_error *err)
{
    int rc;
    if (!crl_opts_is_set(o, "frames_per_batch"))
        return crl_error_set(err, CRL_E_CONFIG, "[%s] frames_per_batch is required: add 'frames_per_batch = N' "
                             "(frames per batch, a multiple of [%s] num_envs)", section, env_section);
    if ((rc = opt_int(o, "frames_per_batch", &st->fpb, err)) || (rc = opt_int(o, "total_frames", &st->total, err)) ||
        (rc = opt_int(o, "init_random_frames", &st->init_random, err)) ||
        (rc = opt_int(o, "max_frames_per_traj", &st->max_traj, err)) ||
        (rc = opt_int(o, "num_collectors", &st->K, err)) || (rc = crl_opts_bool(o, "sync", &st->sync, err)) ||
        (rc = crl_opts_bool(o, "split_trajs", &st->split, err)) ||
        (rc = crl_opts_bool(o, "reset_at_each_iter", &st->reset_each, err)))
        return rc;
    if (st->total == 0)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] total_frames = 0: give a positive number of frames, or -1 "
                             "for an endless collector", crl_opts_origin(o, "total_frames"), section);
    return CRL_OK;
}

/* What [section] asks of the env each sub-collector steps: synchronous
 * steps, and frames_per_batch a multiple of its N envs (times the
 * sub-collectors when sync). */
static int check_env_fit(const crl_config *cfg, const crl_opts *o, const char *section, const char *env_section,
                         const settings *st, const crl_env *env, crl_error *err)
{
    int64_t N = crl_env_num(env);
    if (crl_env_batch_size(env) < N) {
        const char *bo = crl_config_origin(cfg, env_section, "batch_size");
        return crl_error_set(err, CRL_E_CONFIG, "%s%s[%s] batch_size = %" PRId64 " < num_envs = %" PRId64 " makes the "
                             "env async (send/recv), but collector [%s] steps all its envs together; drop batch_size "
                             "(or set it to num_envs)", bo ? bo : "", bo ? ": " : "", env_section,
                             crl_env_batch_size(env), N, section);
    }
    int64_t width = st->sync ? st->K * N : N;
    if (st->fpb % width == 0)
        return CRL_OK;
    const char *eo = crl_config_origin(cfg, env_section, "num_envs");
    if (st->sync && st->K > 1)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] frames_per_batch = %" PRId64 " is not a multiple of "
                             "num_collectors x num_envs = %" PRId64 " x %" PRId64 " (num_envs from %s in [%s]): every "
                             "env of every sub-collector steps the same number of times; use a multiple of %" PRId64,
                             crl_opts_origin(o, "frames_per_batch"), section, st->fpb, st->K, N, eo ? eo : "default",
                             env_section, width);
    return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] frames_per_batch = %" PRId64 " is not a multiple of "
                         "num_envs = %" PRId64 " (%s in [%s]): every env steps the same number of times; use a "
                         "multiple of %" PRId64, crl_opts_origin(o, "frames_per_batch"), section, st->fpb, N,
                         eo ? eo : "default", env_section, width);
}

int crl__collector_check_config(const crl_config *cfg, const char *section, const char *env_section,
                                const crl_env *env, crl_error *err)
{
    const crl_option *tables[1] = { collector_options };
    int rc = crl__config_check_keys(cfg, section, tables, 1, err);
    if (rc)
        return rc;
    crl_error e;
    crl_error_clear(&e);
    crl_opts *o = crl_config_opts(cfg, section, tables, 1, &e);
    if (!o)
        return crl_error_pass(err, &e, CRL_E_CONFIG);
    settings st = { 0 };
    rc = read_settings(o, section, env_section, &st, err);
    if (!rc)
        rc = check_env_fit(cfg, o, section, env_section, &st, env, err);
    crl_opts_free(o);
    return rc;
}

/* Local sub-collectors (remote NULL, only >= SIZE_MAX), remote ones (remote set) or the one sub-collector
 * `only` of the collector [section] describes. */
static crl_collector *build(crl_host *host, const crl_config *cfg, const char *section, const char *env_section,
                            crl_policy_fn policy, void *user, const crl_collector_remote *remote, void *ruser,
                            size_t only, crl_error *err)
{
    if (!host || !cfg || !section || !env_section) {
        crl_error_set(err, CRL_E_INVALID, "crl_collector_from_config: %s is NULL",
                      !host ? "host" : !cfg ? "config" : !section ? "section" : "env_section");
        return NULL;
    }
    const crl_option *tables[1] = { collector_options };
    if (crl__config_check_keys(cfg, section, tables, 1, err))
        return NULL;
    crl_opts *o = crl_config_opts(cfg, section, tables, 1, err);
    if (!o)
        return NULL;
    crl_collector *c = g_new0(crl_collector, 1);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    g_queue_init(&c->ready);
    c->host = host;
    c->section = g_strdup(section);
    c->policy = policy;
    c->user = user;
    settings st = { 0 };
    int rc = read_settings(o, section, env_section, &st, err);
    if (rc)
        goto out;
    c->fpb = st.fpb;
    c->total = st.total;
    c->init_random = st.init_random;
    c->max_traj = st.max_traj;
    c->sync = st.sync;
    c->split = st.split;
    c->reset_each = st.reset_each;
    if (only != SIZE_MAX && only >= (size_t)st.K) {
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] num_collectors = %lld has no sub-collector %zu",
                           crl_opts_origin(o, "num_collectors"), section, (long long)st.K, only);
        goto out;
    }
    c->K = only != SIZE_MAX ? 1 : (size_t)st.K;
    c->threaded = !remote && only == SIZE_MAX && (st.K > 1 || !c->sync);
    if (remote) {
        c->has_remote = true;
        c->remote = *remote;
        c->ruser = ruser;
    }
    c->subs = g_new0(sub, c->K);
    int64_t seed = 0;
    if ((rc = crl_config_get_int(cfg, env_section, "seed", 0, &seed, err)))
        goto out;
    uint64_t chain = (uint64_t)seed;
    for (size_t k = 0; k < c->K; k++) {
        sub *s = &c->subs[k];
        s->c = c;
        s->index = only != SIZE_MAX ? only : k;
        crl_error e;
        crl_error_clear(&e);
        if (remote && k > 0) {
            /* runs elsewhere: only its batch layout (sub-collector 0's) is needed here */
            s->num = c->subs[0].num;
            s->bndim = c->subs[0].bndim;
            memcpy(s->bshape, c->subs[0].bshape, sizeof s->bshape);
        } else {
            if (!(s->env = crl_env_from_config(host, cfg, env_section, &e))) {
                rc = crl_error_pass(err, &e, CRL_E_CONFIG);
                if (c->K > 1 || only != SIZE_MAX)
                    crl_error_prefix(err, "collector [%s]: sub-collector %zu: ", section, s->index);
                goto out;
            }
            /* Sub-collector k's envs continue the seed chain after k-1's. */
            for (size_t j = 0; j < (only != SIZE_MAX ? only : 0) * (size_t)crl_env_num(s->env); j++)
                chain = crl_seed_next(chain);
            chain = crl_env_set_seed(s->env, chain);
            s->num = crl_env_num(s->env);
            s->bndim = crl_env_batch_ndim(s->env);
            if (s->bndim + 1 >= CRL_MAX_DIMS) {
                rc = crl_error_set(err, CRL_E_SHAPE, "collector [%s]: the env's batch has %d dims; a collector "
                                   "needs room for the time dim and a sub-collector dim", section, s->bndim);
                goto out;
            }
            memcpy(s->bshape, crl_env_batch_shape(s->env), sizeof(int64_t) * (size_t)s->bndim);
        }
        int64_t ms[CRL_MAX_DIMS];
        memcpy(ms, s->bshape, sizeof(int64_t) * (size_t)s->bndim);
        ms[s->bndim] = 1;
        if (!(s->rmask = crl_tensor_new(CRL_BOOL, s->bndim + 1, ms, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            goto out;
        }
        s->newtraj = g_new0(bool, (gsize)s->num);
        s->done = g_new0(bool, (gsize)s->num);
        s->forced = g_new0(bool, (gsize)s->num);
        s->traj_len = g_new0(int64_t, (gsize)s->num);
        s->cur_ids = g_new0(int64_t, (gsize)s->num);
        for (int64_t i = 0; i < s->num; i++)
            s->cur_ids[i] = (int64_t)k * s->num + i;
    }
    if (only != SIZE_MAX)
        c->K = 1;
    c->N = c->subs[0].num;
    c->next_id = (int64_t)c->K * c->N;
    int64_t width = c->sync ? (int64_t)c->K * c->N : c->N;
    if ((rc = check_env_fit(cfg, o, section, env_section, &st, c->subs[0].env, err)))
        goto out;
    c->T = c->fpb / width;
    if (c->threaded)
        for (size_t k = 0; k < c->K; k++) {
            int prc = pthread_create(&c->subs[k].thread, NULL, worker_main, &c->subs[k]);
            if (prc) {
                rc = crl_error_set(err, CRL_E_RUNTIME, "collector [%s]: cannot start the thread of sub-collector "
                                   "%zu: %s", section, k, g_strerror(prc));
                goto out;
            }
            c->subs[k].has_thread = true;
        }
out:
    crl_opts_free(o);
    if (rc) {
        crl_collector_free(c);
        return NULL;
    }
    return c;
}

crl_collector *crl_collector_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                         const char *env_section, crl_policy_fn policy, void *user, crl_error *err)
{
    return build(host, cfg, section, env_section, policy, user, NULL, NULL, SIZE_MAX, err);
}

crl_collector *crl_collector_from_config_remote(crl_host *host, const crl_config *cfg, const char *section,
                                                const char *env_section, const crl_collector_remote *remote,
                                                void *user, crl_error *err)
{
    if (!remote || remote->struct_size < sizeof *remote || !remote->request || !remote->wait) {
        crl_error_set(err, CRL_E_INVALID, "crl_collector_from_config_remote: incomplete remote ops");
        return NULL;
    }
    return build(host, cfg, section, env_section, NULL, NULL, remote, user, SIZE_MAX, err);
}

crl_collector *crl_collector_sub_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                             const char *env_section, size_t index, crl_policy_fn policy,
                                             void *user, crl_error *err)
{
    return build(host, cfg, section, env_section, policy, user, NULL, NULL, index, err);
}

int crl_collector_collect(crl_collector *c, int64_t T, crl_td **out, bool **starts, crl_error *err)
{
    if (!c || !out || !starts || T < 1)
        return crl_error_set(err, CRL_E_INVALID, "crl_collector_collect: %s", !c ? "collector is NULL"
                             : T < 1 ? "T < 1" : "out or starts is NULL");
    *out = NULL;
    *starts = NULL;
    if (c->threaded || c->has_remote || c->K != 1)
        return crl_error_set(err, CRL_E_INVALID, "collector [%s]: crl_collector_collect needs a collector of one "
                             "local sub-collector (crl_collector_sub_from_config)", c->section);
    int rc = sub_collect(&c->subs[0], T, out, starts, err);
    if (!rc)
        c->handed += T * c->subs[0].num;
    return rc;
}

void crl_collector_shutdown(crl_collector *c)
{
    if (!c || c->stopped)
        return;
    c->stopped = true;
    pthread_mutex_lock(&c->lock);
    c->quit = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    for (size_t k = 0; k < c->K; k++)
        if (c->subs && c->subs[k].has_thread) {
            pthread_join(c->subs[k].thread, NULL);
            c->subs[k].has_thread = false;
        }
}

void crl_collector_free(crl_collector *c)
{
    if (!c)
        return;
    crl_collector_shutdown(c);
    for (size_t k = 0; c->subs && k < c->K; k++)
        sub_clear(&c->subs[k]);
    g_free(c->subs);
    g_queue_clear(&c->ready);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    g_free(c->section);
    g_free(c);
}

void crl_collector_set_batch_fn(crl_collector *c, crl_collector_batch_fn fn, void *user)
{
    if (c) {
        c->batch_fn = fn;
        c->batch_user = user;
    }
}

void crl_collector_set_replay(crl_collector *c, crl_replay *rb)
{
    if (c)
        c->rb = rb;
}

int64_t crl_collector_frames(const crl_collector *c) { return c ? c->handed : 0; }

int64_t crl__collector_limit(crl_collector *c, int64_t total)
{
    int64_t old = c->total;
    c->total = total;
    return old;
}
crl_td *crl__collector_current(crl_collector *c, size_t k)
{
    return c && !c->has_remote && k < c->K ? c->subs[k].cur : NULL;
}
size_t crl_collector_num_envs(const crl_collector *c) { return c ? c->K : 0; }
crl_env *crl_collector_env(const crl_collector *c, size_t i) { return c && i < c->K ? c->subs[i].env : NULL; }

static crl_td *fail(crl_collector *c, const crl_error *src, crl_error *err)
{
    c->failed = true;
    c->fail_err = *src;
    crl_error_pass(err, src, CRL_E_RUNTIME);
    return NULL;
}

static crl_td *next_inline(crl_collector *c, int64_t T, crl_error *err)
{
    crl_td *out = NULL;
    bool *flags = NULL;
    crl_error e;
    crl_error_clear(&e);
    size_t zero = 0;
    if (sub_collect(&c->subs[0], T, &out, &flags, &e) || assign_ids(c, &zero, &out, &flags, 1, T, &e)) {
        g_free(flags);
        crl_td_unref(out);
        return fail(c, &e, err);
    }
    g_free(flags);
    return out;
}

/* Take sub-collector k's result (under the lock); NULL with e set on failure. */
static crl_td *take_result(sub *s, bool **flags, crl_error *e)
{
    crl_td *r = s->result;
    *flags = s->result_new;
    if (s->result_rc)
        crl_error_pass(e, &s->result_err, s->result_rc);
    s->result = NULL;
    s->result_new = NULL;
    s->state = SUB_IDLE;
    return s->result_rc ? NULL : r;
}

static crl_td *next_sync(crl_collector *c, int64_t T, crl_error *err)
{
    pthread_mutex_lock(&c->lock);
    crl_error re;
    crl_error_clear(&re);
    int rrc = CRL_OK;
    for (size_t k = 0; k < c->K && !rrc; k++)
        rrc = request(c, &c->subs[k], T, &re);
    for (;;) {
        size_t ready = 0;
        for (size_t k = 0; k < c->K; k++)
            ready += c->subs[k].state == SUB_READY;
        if (ready == c->K || rrc)
            break;
        if (c->has_remote)
            rrc = remote_wait_one(c, &re);
        else
            pthread_cond_wait(&c->cond, &c->lock);
    }
    if (rrc) {
        pthread_mutex_unlock(&c->lock);
        return fail(c, &re, err);
    }
    g_queue_clear(&c->ready);
    crl_td **outs = g_new0(crl_td *, c->K);
    bool **flags = g_new0(bool *, c->K);
    size_t *idx = g_new0(size_t, c->K);
    crl_error e;
    crl_error_clear(&e);
    bool bad = false;
    for (size_t k = 0; k < c->K; k++) {
        crl_error ek;
        crl_error_clear(&ek);
        idx[k] = k;
        outs[k] = take_result(&c->subs[k], &flags[k], &ek);
        if (!outs[k] && !bad) {
            bad = true;
            e = ek;
        }
    }
    pthread_mutex_unlock(&c->lock);
    crl_td *res = NULL;
    if (!bad && !assign_ids(c, idx, outs, flags, c->K, T, &e) && !(res = crl_td_stack(outs, c->K, 0, &e)))
        crl_error_prefix(&e, "collector [%s]: stacking the sub-collectors' batches: ", c->section);
    for (size_t k = 0; k < c->K; k++) {
        crl_td_unref(outs[k]);
        g_free(flags[k]);
    }
    g_free(outs);
    g_free(flags);
    g_free(idx);
    return res ? res : fail(c, &e, err);
}

static crl_td *next_async(crl_collector *c, crl_error *err)
{
    pthread_mutex_lock(&c->lock);
    /* Keep every idle sub-collector busy while the budget lasts. */
    for (size_t k = 0; k < c->K; k++) {
        sub *s = &c->subs[k];
        if (s->state != SUB_IDLE || (c->total >= 0 && c->requested >= c->total))
            continue;
        int64_t T = steps_for(c, c->total - c->requested, c->N);
        c->requested += T * c->N;
        crl_error re;
        crl_error_clear(&re);
        if (request(c, s, T, &re)) {
            pthread_mutex_unlock(&c->lock);
            return fail(c, &re, err);
        }
    }
    bool busy = false;
    for (size_t k = 0; k < c->K; k++)
        busy |= c->subs[k].state != SUB_IDLE;
    if (!busy) {
        pthread_mutex_unlock(&c->lock);
        return NULL;   /* every requested frame was handed out */
    }
    while (g_queue_is_empty(&c->ready)) {
        if (!c->has_remote) {
            pthread_cond_wait(&c->cond, &c->lock);
            continue;
        }
        crl_error re;
        crl_error_clear(&re);
        if (remote_wait_one(c, &re)) {
            pthread_mutex_unlock(&c->lock);
            return fail(c, &re, err);
        }
    }
    size_t k = GPOINTER_TO_SIZE(g_queue_pop_head(&c->ready));
    sub *s = &c->subs[k];
    int64_t T = s->req_T;
    bool *flags = NULL;
    crl_error e;
    crl_error_clear(&e);
    crl_td *out = take_result(s, &flags, &e);
    /* Its next batch is collected while the caller uses this one. */
    if (out && (c->total < 0 || c->requested < c->total)) {
        int64_t T2 = steps_for(c, c->total - c->requested, c->N);
        c->requested += T2 * c->N;
        if (request(c, s, T2, &e)) {
            crl_td_unref(out);
            out = NULL;
        }
    }
    pthread_mutex_unlock(&c->lock);
    crl_tensor *w = NULL;
    if (out && !assign_ids(c, &k, &out, &flags, 1, T, &e)) {
        crl_tensor *ids = crl_td_get(out, "collector.traj_ids");
        if ((w = crl_tensor_new(CRL_I64, crl_tensor_ndim(ids), crl_tensor_shape(ids), &e)) != NULL) {
            crl_tensor_fill(w, (double)k);
            if (!crl_td_set(out, "collector.worker", w, &e)) {
                crl_tensor_unref(w);
                g_free(flags);
                return out;
            }
        }
    }
    crl_tensor_unref(w);
    crl_td_unref(out);
    g_free(flags);
    return fail(c, &e, err);
}

crl_td *crl_collector_next(crl_collector *c, crl_error *err)
{
    if (!c) {
        crl_error_set(err, CRL_E_INVALID, "crl_collector_next: collector is NULL");
        return NULL;
    }
    if (c->failed) {
        crl_error_pass(err, &c->fail_err, CRL_E_RUNTIME);
        return NULL;
    }
    if (c->stopped || (c->total >= 0 && c->handed >= c->total)) {
        crl_error_clear(err);
        return NULL;
    }
    crl_td *batch;
    if (!c->threaded && !c->has_remote) {
        batch = next_inline(c, steps_for(c, c->total - c->handed, c->N), err);
    } else if (c->sync) {
        batch = next_sync(c, steps_for(c, c->total - c->handed, (int64_t)c->K * c->N), err);
    } else {
        crl_error e;
        crl_error_clear(&e);
        batch = next_async(c, &e);
        if (!batch) {
            crl_error_pass(err, &e, CRL_E_RUNTIME);
            return NULL;
        }
    }
    if (!batch)
        return NULL;
    return finish(c, batch, err);
}

/* ---- episode returns ------------------------------------------------------------------------ */

struct crl_returns {
    GHashTable *running;   /* traj id -> double *: the return so far */
};

crl_returns *crl_returns_new(void)
{
    crl_returns *r = g_new0(crl_returns, 1);
    r->running = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    return r;
}

void crl_returns_free(crl_returns *r)
{
    if (!r)
        return;
    g_hash_table_destroy(r->running);
    g_free(r);
}

int64_t crl_returns_add(crl_returns *r, const crl_td *batch, void (*done)(void *user, double ret), void *user)
{
    return crl_returns_add_key(r, batch, "next.reward", done, user);
}

int64_t crl_returns_add_key(crl_returns *r, const crl_td *batch, const char *key, void (*done)(void *user, double ret),
                            void *user)
{
    crl_tensor *ids = r && batch && key ? crl_td_get(batch, "collector.traj_ids") : NULL;
    crl_tensor *rew = ids ? crl_td_get(batch, key) : NULL, *dn = rew ? crl_td_get(batch, "next.done") : NULL;
    crl_tensor *mask = dn ? crl_td_get(batch, "collector.mask") : NULL;
    int64_t n = ids ? crl_tensor_numel(ids) : 0;
    if (!dn || !n)
        return 0;
    /* reward and done have a trailing dim per frame ([..., 1]) */
    int64_t rw = crl_tensor_numel(rew) / n, dw = crl_tensor_numel(dn) / n, completed = 0;
    for (int64_t p = 0; p < n; p++) {
        if (mask && crl_tensor_flat_get(mask, p) == 0.0)
            continue;
        gint64 id = (gint64)crl_tensor_flat_get(ids, p);
        double *acc = g_hash_table_lookup(r->running, &id);
        if (!acc) {
            gint64 *k = g_new(gint64, 1);
            *k = id;
            acc = g_new0(double, 1);
            g_hash_table_insert(r->running, k, acc);
        }
        *acc += crl_tensor_flat_get(rew, p * rw);
        if (crl_tensor_flat_get(dn, p * dw) != 0.0) {
            if (done)
                done(user, *acc);
            completed++;
            g_hash_table_remove(r->running, &id);
        }
    }
    return completed;
}
