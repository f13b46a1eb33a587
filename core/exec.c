/* The executor layer: instances of the real backend per worker block (or per env), combined specs, dispatch. */
#include "exec-private.h"
#include "env-private.h"
#include "env-desc-private.h"
#include "config-private.h"

#include "spin-private.h"

#include <crl/config.h>
#include <crl/host.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>

/* ---- the executor behind an env --------------------------------------------------------- */

crl__exec *crl__exec_of(const crl_env *env)
{
    return env && env->benv && env->ops.step == crl__exec_env_ops.step ? (crl__exec *)env->benv : NULL;
}

int64_t crl_env_batch_size(const crl_env *env)
{
    if (!env)
        return 0;
    const crl__exec *x = crl__exec_of(env);
    return x && x->o.batch_size > 0 && x->o.batch_size < x->num ? x->o.batch_size : env->num;
}

int64_t crl_env_restarts(const crl_env *env)
{
    const crl__exec *x = crl__exec_of(env);
    return x && x->o.kind == CRL__EXEC_PROCESSES ? crl__exec_procs_restarts(x) : 0;
}

static const crl__exec_kind *kind_of(crl__exec_kind_id k)
{
    switch (k) {
    case CRL__EXEC_THREADS: return &crl__exec_kind_threads;
    case CRL__EXEC_PROCESSES: return &crl__exec_kind_processes;
    default: return &crl__exec_kind_serial;
    }
}

static void exec_free(crl__exec *x)
{
    if (!x)
        return;
    for (size_t k = 0; k < x->ninst; k++) {
        if (x->inst[k].benv)
            x->real.close(x->inst[k].benv);
        crl_td_unref(x->inst[k].view);
        g_free(x->inst[k].id);
        crl_opts_free(x->inst[k].opts);
    }
    crl_td_unref(x->buffers);
    g_free(x->plugin);
    if (x->turns)
        munmap(x->turns, sizeof *x->turns);
    g_free(x->inst);
    g_free(x->ids_at);
    g_free(x->blocks);
    g_free(x->block_err);
    g_free(x->restarted);
    g_free(x);
}

/* ---- combined specs ---------------------------------------------------------------------- */

static crl_spec *combine(const crl__exec *x, crl_spec *const *parts, const char *key, crl_error *err);

/* "Bounded float32 [4]": a leaf spec without its batch dim. */
static char *leaf_brief(const crl_spec *s)
{
    if (crl_spec_get_kind(s) == CRL_SPEC_COMPOSITE) {
        GString *g = g_string_new("Composite {");
        for (size_t i = 0; i < crl_spec_composite_len(s); i++)
            g_string_append_printf(g, "%s%s", i ? ", " : "", crl_spec_composite_key_at(s, i));
        g_string_append(g, "}");
        return g_string_free(g, FALSE);
    }
    int nd = crl_spec_ndim(s);
    GString *g = g_string_new(NULL);
    g_string_printf(g, "%s %s [", crl_spec_kind_name(crl_spec_get_kind(s)), crl_dtype_name(crl_spec_dtype(s)));
    for (int d = 1; d < nd; d++)
        g_string_append_printf(g, "%s%" G_GINT64_FORMAT, d > 1 ? ", " : "", (gint64)crl_spec_shape(s)[d]);
    g_string_append(g, "]");
    return g_string_free(g, FALSE);
}

/* a0/ak: the two specs that differ (for the message), or NULL. */
static int spec_mismatch(const crl__exec *x, size_t k, const char *key, const char *what, const crl_spec *a0,
                         const crl_spec *ak, crl_error *err)
{
    const crl__exec_inst *in = &x->inst[k], *first = &x->inst[0];
    char *b0 = a0 ? leaf_brief(a0) : NULL, *bk = ak ? leaf_brief(ak) : NULL;
    bool ids_differ = in->id && first->id && strcmp(in->id, first->id);
    if (ids_differ) {
        crl_error_set(err, CRL_E_CONFIG, "%s%sper_env.id: spec '%s' of env %" G_GINT64_FORMAT " (id %s) differs from that "
                      "of env 0 (id %s): %s%s%s%s%s%s; envs of different ids share one batch only when their specs "
                      "match (kinds, dtypes, shapes, categories), so give ids whose specs agree or use one id",
                      x->ids_at ? x->ids_at : "", x->ids_at ? ": " : "", key, (gint64)in->start, in->id, first->id,
                      what, b0 ? ", " : "", b0 ? b0 : "",
                      b0 ? " (env 0) vs " : "", bk ? bk : "", bk ? " (this env)" : "");
    } else {
        crl_error_set(err, CRL_E_PLUGIN, "spec '%s' of envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") differs from "
                      "that of env 0 (%s%s%s%s%s); every env of a batch needs the same kinds, dtypes and shapes (a "
                      "per_env option may not change them)", key, (gint64)in->start,
                      (gint64)(in->start + in->count), what, b0 ? ": " : "", b0 ? b0 : "", b0 ? " vs " : "",
                      bk ? bk : "");
    }
    g_free(b0);
    g_free(bk);
    return ids_differ ? CRL_E_CONFIG : CRL_E_PLUGIN;
}

static crl_spec *combine_composite(const crl__exec *x, crl_spec *const *parts, const char *key, crl_error *err)
{
    crl_spec *out = crl_spec_composite(1, &x->num, err);
    size_t n = out ? crl_spec_composite_len(parts[0]) : 0;
    crl_spec **sub = out ? g_new0(crl_spec *, x->ninst) : NULL;
    for (size_t c = 0; out && c < n; c++) {
        const char *ck = crl_spec_composite_key_at(parts[0], c);
        char *full = *key ? g_strconcat(key, ".", ck, NULL) : g_strdup(ck);
        bool ok = true;
        for (size_t k = 0; k < x->ninst && ok; k++) {
            sub[k] = crl_spec_composite_get(parts[k], ck);
            if (!sub[k] || crl_spec_composite_len(parts[k]) != n) {
                spec_mismatch(x, k, full, "other keys", parts[0], parts[k], err);
                ok = false;
            }
        }
        crl_spec *child = ok ? combine(x, sub, full, err) : NULL;
        if (!child || crl_spec_composite_set(out, ck, child, err)) {
            crl_spec_unref(out);
            out = NULL;
        }
        crl_spec_unref(child);
        g_free(full);
    }
    g_free(sub);
    return out;
}

/* Bounded: the instances' bounds, row by row, as elementwise bounds [num, ...]. */
static crl_spec *combine_bounded(const crl__exec *x, crl_spec *const *parts, crl_error *err)
{
    int nd = crl_spec_ndim(parts[0]);
    int64_t shape[16];
    memcpy(shape, crl_spec_shape(parts[0]), sizeof(int64_t) * (size_t)nd);
    shape[0] = x->num;
    crl_tensor *lo = crl_tensor_new(CRL_F64, nd, shape, err);
    crl_tensor *hi = lo ? crl_tensor_new(CRL_F64, nd, shape, err) : NULL;
    crl_spec *out = NULL;
    int rc = hi ? CRL_OK : CRL_E_NOMEM;
    for (size_t k = 0; !rc && k < x->ninst; k++) {
        const crl__exec_inst *in = &x->inst[k];
        crl_tensor *dl = crl_tensor_slice(lo, 0, in->start, in->start + in->count, 1, err);
        crl_tensor *dh = dl ? crl_tensor_slice(hi, 0, in->start, in->start + in->count, 1, err) : NULL;
        rc = !dh ? CRL_E_NOMEM : crl_tensor_copy(dl, crl_spec_low(parts[k]), err);
        if (!rc)
            rc = crl_tensor_copy(dh, crl_spec_high(parts[k]), err);
        crl_tensor_unref(dl);
        crl_tensor_unref(dh);
    }
    if (!rc)
        out = crl_spec_bounded_t(crl_spec_dtype(parts[0]), lo, hi, err);
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    return out;
}

static crl_spec *combine(const crl__exec *x, crl_spec *const *parts, const char *key, crl_error *err)
{
    crl_spec_kind kind = crl_spec_get_kind(parts[0]);
    if (kind == CRL_SPEC_COMPOSITE) {
        for (size_t k = 1; k < x->ninst; k++)
            if (crl_spec_get_kind(parts[k]) != kind) {
                spec_mismatch(x, k, key, "another kind", parts[0], parts[k], err);
                return NULL;
            }
        return combine_composite(x, parts, key, err);
    }
    int nd = crl_spec_ndim(parts[0]);
    if (nd < 1 || nd > 16) {
        crl_error_set(err, CRL_E_PLUGIN, "spec '%s' of the backend has no batch dim", key);
        return NULL;
    }
    for (size_t k = 0; k < x->ninst; k++) {
        const crl_spec *p = parts[k];
        if (crl_spec_ndim(p) < 1 || crl_spec_shape(p)[0] != x->inst[k].count) {
            crl_error_set(err, CRL_E_PLUGIN, "spec '%s' of the instance made for %" G_GINT64_FORMAT " envs has batch "
                          "dim %" G_GINT64_FORMAT "; fix the backend's make", key, (gint64)x->inst[k].count,
                          (gint64)(crl_spec_ndim(p) ? crl_spec_shape(p)[0] : 0));
            return NULL;
        }
        if (crl_spec_get_kind(p) != kind || crl_spec_dtype(p) != crl_spec_dtype(parts[0]) || crl_spec_ndim(p) != nd
            || memcmp(crl_spec_shape(p) + 1, crl_spec_shape(parts[0]) + 1, sizeof(int64_t) * (size_t)(nd - 1))) {
            spec_mismatch(x, k, key, "another kind, dtype or shape", parts[0], p, err);
            return NULL;
        }
    }
    if (kind == CRL_SPEC_BOUNDED)
        return combine_bounded(x, parts, err);
    /* Every other kind: the same row spec for every env, expanded to [num]. */
    crl_spec *row = crl__spec_drop_batch(parts[0], err);
    for (size_t k = 1; row && k < x->ninst; k++) {
        crl_spec *r = crl__spec_drop_batch(parts[k], err);
        bool same = r && crl_spec_equal(r, row);
        crl_spec_unref(r);
        if (!same) {
            spec_mismatch(x, k, key, "other categories or values", parts[0], parts[k], err);
            crl_spec_unref(row);
            return NULL;
        }
    }
    crl_spec *out = row ? crl_spec_expand(row, 1, &x->num, err) : NULL;
    crl_spec_unref(row);
    return out;
}

/* ---- make ------------------------------------------------------------------------------------ */

static void specs_clear(crl_env_specs *s)
{
    crl_spec_unref(s->observation);
    crl_spec_unref(s->action);
    crl_spec_unref(s->reward);
    crl_spec_unref(s->done);
    crl_spec_unref(s->state);
    crl_spec_unref(s->info);
    s->observation = s->action = s->reward = s->done = s->state = s->info = NULL;
}

/* Worker blocks: nblocks as even as possible (the first num % nblocks one larger). */
static void make_blocks(crl__exec *x, int64_t nblocks)
{
    x->nblocks = (size_t)nblocks;
    x->blocks = g_new0(crl__exec_block, x->nblocks);
    int64_t start = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        crl__exec_block *bl = &x->blocks[b];
        bl->start = start;
        bl->count = x->num / nblocks + (b < x->num % nblocks ? 1 : 0);
        start += bl->count;
    }
}

/* Every instance's error names its envs, and for per-env option sets its own values. */
static void prefix_inst(const crl__exec *x, const crl_env_desc *d, const crl__exec_inst *in, bool inner,
                        crl_error *err)
{
    if (d->env_what)
        crl_error_prefix(err, "%senv %" G_GINT64_FORMAT " (%s): ", inner ? "worker_transforms, " : "",
                         (gint64)in->start, d->env_what[in->start]);
    else if (inner)
        crl_error_prefix(err, "worker_transforms, envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "): ",
                         (gint64)in->start, (gint64)(in->start + in->count));
    else
        crl_error_prefix(err, "envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") of %s executor: ",
                         (gint64)in->start, (gint64)(in->start + in->count), x->kind->name);
}

/* What env.c calls after every backend step (through env->after_backend_step). */
static void after_step(crl_env *env)
{
    crl__exec_mark_restarted(crl__exec_of(env), env);
}

/* ---- the turn order ------------------------------------------------------------------------ */

/* With a worker chain that asked for turns (crl_transform_ctx_use_turns at bind, which ran in make), give
 * every inner env its place.  Serial needs none: it runs the instances in order. */
static int turns_setup(crl__exec *x, crl_error *err)
{
    bool want = false;
    for (size_t k = 0; k < x->ninst && !want; k++) {
        crl_env *inner = crl__wenv_inner(x->inst[k].benv);
        want = inner && inner->wants_turns;
    }
    if (!want)
        return CRL_OK;
    void *m = mmap(NULL, sizeof *x->turns, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return crl_error_set(err, CRL_E_NOMEM, "%s executor: cannot map the workers' turn page: %s", x->kind->name,
                             g_strerror(errno));
    x->turns = m;
    for (size_t k = 0; k < x->ninst; k++) {
        crl_env *inner = crl__wenv_inner(x->inst[k].benv);
        inner->turn_word = &x->turns->word;
        inner->turn_abort = &x->turns->abort;
        inner->turn_index = (uint32_t)k;
    }
    return CRL_OK;
}

/* Instance k's job is over (done, skipped or failed): hand the turn to k + 1. */
static void turn_pass(crl__exec *x, size_t k)
{
    crl__exec_turns *t = x->turns;
    if (!t)
        return;
    crl__turn_wait(&t->word, &t->abort, (uint32_t)k);
    if (atomic_load(&t->abort))
        return;
    atomic_store_explicit(&t->word, (uint32_t)k + 1, memory_order_release);
    crl__futex_wake_shared(&t->word, INT_MAX);
}

/* Before each job, while no worker runs. */
static void turns_rewind(crl__exec *x)
{
    if (x->turns) {
        atomic_store(&x->turns->word, 0);
        atomic_store(&x->turns->abort, 0);
    }
}

int crl__exec_make(crl_env *env, const crl_env_desc *d, crl_env_specs *specs, crl__env_factory make_inner,
                   crl_error *err)
{
    const crl__exec_opts *xo = &d->xo;
    crl__exec *x = g_new0(crl__exec, 1);
    x->env = env;
    x->real = d->ops;
    x->backend_step = d->ops.step;
    x->o = *xo;
    x->num = env->num;
    x->kind = kind_of(xo->kind);
    x->host = d->host;
    x->plugin = g_strdup(d->plugin);
    if (xo->kind == CRL__EXEC_PROCESSES)
        x->reexec_prepare = crl__exec_reexec_prepare;
    int64_t nw = xo->num_workers > 0 ? xo->num_workers
                 : xo->kind == CRL__EXEC_SERIAL ? 1 : (int64_t)g_get_num_processors();
    if (nw > x->num)
        nw = x->num;
    if (nw < 1)
        nw = 1;
    make_blocks(x, nw);
    x->block_err = g_new0(crl_error, x->nblocks);
    x->restarted = g_new0(bool, (gsize)x->num);

    /* One instance per env with per-env options, and for async (one env
     * steps alone); else one per block. */
    bool one_each = d->env_opts || (xo->batch_size > 0 && xo->batch_size < x->num);
    x->ninst = one_each ? (size_t)x->num : x->nblocks;
    x->inst = g_new0(crl__exec_inst, x->ninst);
    for (size_t b = 0, k = 0; b < x->nblocks; b++) {
        crl__exec_block *bl = &x->blocks[b];
        bl->first = k;
        bl->ninst = one_each ? (size_t)bl->count : 1;
        for (size_t j = 0; j < bl->ninst; j++, k++) {
            x->inst[k].start = one_each ? bl->start + (int64_t)j : bl->start;
            x->inst[k].count = one_each ? 1 : bl->count;
        }
    }

    /* worker_transforms: every instance is an inner env with that chain. */
    if (d->nwtf) {
        /* The inner envs render; the outer one sees "pixels" as an observation. */
        env->from_pixels = env->pixels_only = false;
        x->real = crl__wenv_ops;
    }
    int rc = CRL_OK;
    crl_env_specs *parts = g_new0(crl_env_specs, x->ninst);
    for (size_t k = 0; !rc && k < x->ninst; k++) {
        crl__exec_inst *in = &x->inst[k];
        in->id = g_strdup(crl__env_desc_id_at(d, in->start));
        if (k == 0 && d->ids_at)
            x->ids_at = g_strdup(d->ids_at);
        parts[k].struct_size = sizeof parts[k];
        if (d->nwtf) {
            crl_env_desc *inner = crl__env_desc_inner(d, in->start, in->count, err);
            rc = inner ? crl__wenv_make(inner, make_inner, &parts[k], &in->benv, err) : CRL_E_NOMEM;
            crl_env_desc_free(inner);
        } else {
            const crl_opts *own = d->env_opts ? d->env_opts[in->start] : d->opts;
            if (xo->kind == CRL__EXEC_PROCESSES && !(in->opts = crl__opts_copy(own, err)))
                rc = CRL_E_CONFIG;
            if (!rc)
                rc = d->ops.make(in->id, in->count, own, &parts[k], &in->benv, err);
            if (!rc && !in->benv)
                rc = crl_error_set(err, CRL_E_PLUGIN, "make returned no env");
            if (!rc && (!parts[k].observation || !parts[k].action || !parts[k].reward || !parts[k].done))
                rc = crl_error_set(err, CRL_E_PLUGIN, "make declared no %s spec",
                                   !parts[k].observation ? "observation" : !parts[k].action ? "action"
                                   : !parts[k].reward ? "reward" : "done");
        }
        if (rc)
            prefix_inst(x, d, in, d->nwtf > 0, err);
    }

    /* Combined specs along the batch dim. */
    crl_spec **col = g_new0(crl_spec *, x->ninst);
    static const char *const names[6] = { "observation", "action", "reward", "done", "state", "info" };
    crl_spec *out[6] = { NULL };
    for (int s = 0; !rc && s < 6; s++) {
        size_t have = 0;
        for (size_t k = 0; k < x->ninst; k++) {
            crl_env_specs *p = &parts[k];
            crl_spec *const all[6] = { p->observation, p->action, p->reward, p->done, p->state, p->info };
            col[k] = all[s];
            have += all[s] != NULL;
        }
        if (have == 0)
            continue;
        if (have != x->ninst) {
            size_t k = 1;
            while (k < x->ninst && (col[k] != NULL) == (col[0] != NULL))
                k++;
            if (k < x->ninst && strcmp(x->inst[k].id, x->inst[0].id))
                rc = crl_error_set(err, CRL_E_CONFIG, "%s%sper_env.id: env %" G_GINT64_FORMAT " (id %s) %s a %s "
                                   "spec and env 0 (id %s) %s; envs of different ids share one batch only when "
                                   "their specs match, so give ids whose specs agree or use one id",
                                   x->ids_at ? x->ids_at : "", x->ids_at ? ": " : "", (gint64)x->inst[k].start,
                                   x->inst[k].id, col[k] ? "declares" : "declares no", names[s], x->inst[0].id,
                                   col[0] ? "does" : "does not");
            else
                rc = crl_error_set(err, CRL_E_PLUGIN, "some instances declare a %s spec and some do not", names[s]);
            break;
        }
        crl_error local;
        crl_error_clear(&local);
        out[s] = combine(x, col, "", &local);
        if (!out[s]) {
            rc = crl_error_pass(err, &local, CRL_E_RUNTIME);
            crl_error_prefix(err, "%s spec: ", names[s]);
        }
    }
    g_free(col);
    /* One time limit and frame size serve the batch: ids that differ there need [env] max_episode_steps, or
     * cannot render together. */
    for (size_t k = 1; !rc && k < x->ninst; k++) {
        const crl_env_specs *p0 = &parts[0], *pk = &parts[k];
        if (pk->max_episode_steps != p0->max_episode_steps && d->max_steps == 0)
            rc = crl_error_set(err, CRL_E_CONFIG, "%s%sper_env.id: env %" G_GINT64_FORMAT " (id %s) ends its "
                               "episodes after %" G_GINT64_FORMAT " steps but env 0 (id %s) after %" G_GINT64_FORMAT
                               "; set [%s] max_episode_steps to give the batch one time limit",
                               d->ids_at ? d->ids_at : "", d->ids_at ? ": " : "", (gint64)x->inst[k].start,
                               x->inst[k].id, (gint64)pk->max_episode_steps, x->inst[0].id,
                               (gint64)p0->max_episode_steps, d->section);
        else if ((pk->render_height != p0->render_height || pk->render_width != p0->render_width) &&
                 d->from_pixels)
            rc = crl_error_set(err, CRL_E_CONFIG, "%s%sper_env.id: env %" G_GINT64_FORMAT " (id %s) renders %dx%d "
                               "frames but env 0 (id %s) %dx%d; pixels need one frame size for the batch: use ids "
                               "that render alike, or leave from_pixels off", d->ids_at ? d->ids_at : "",
                               d->ids_at ? ": " : "", (gint64)x->inst[k].start, x->inst[k].id,
                               (int)pk->render_width, (int)pk->render_height, x->inst[0].id,
                               (int)p0->render_width, (int)p0->render_height);
    }
    if (!rc) {
        specs->observation = out[0];
        specs->action = out[1];
        specs->reward = out[2];
        specs->done = out[3];
        specs->state = out[4];
        specs->info = out[5];
        specs->max_episode_steps = parts[0].max_episode_steps;
        specs->render_height = parts[0].render_height;
        specs->render_width = parts[0].render_width;
    } else {
        for (int s = 0; s < 6; s++)
            crl_spec_unref(out[s]);
    }
    for (size_t k = 0; k < x->ninst; k++)
        specs_clear(&parts[k]);
    g_free(parts);
    if (rc) {
        exec_free(x);
        return rc;
    }
    if (d->nwtf && (xo->kind == CRL__EXEC_THREADS || xo->kind == CRL__EXEC_PROCESSES) &&
        (rc = turns_setup(x, err))) {
        exec_free(x);
        return rc;
    }
    env->ops = crl__exec_env_ops;
    env->benv = x;
    env->after_backend_step = after_step;
    env->async_batch = crl__exec_is_async(x) ? x->o.batch_size : 0;
    return CRL_OK;
}

/* ---- running a block ------------------------------------------------------------------------ */

int crl__exec_run_block(crl__exec *x, size_t b, crl_error *err)
{
    const crl__exec_block *bl = &x->blocks[b];
    for (size_t k = bl->first; k < bl->first + bl->ninst; k++) {
        const crl__exec_inst *in = &x->inst[k];
        int rc = CRL_OK;
        if (x->job == CRL__JOB_STEP) {
            rc = x->real.step(in->benv, err);
        } else {
            const bool *m = x->mask ? x->mask + in->start : NULL;
            bool any = !m;
            for (int64_t i = 0; i < in->count && !any; i++)
                any = m[i];
            if (any)
                rc = x->real.reset(in->benv, m, x->seeds ? x->seeds + in->start : NULL, x->from_state, err);
        }
        turn_pass(x, k);
        if (rc) {
            /* The workers after this one must not wait for the instances left out. */
            for (size_t j = k + 1; j < bl->first + bl->ninst; j++)
                turn_pass(x, j);
            /* The backend numbers its envs from 0 within the instance. */
            if (in->count == 1)
                crl_error_prefix(err, "env %" G_GINT64_FORMAT " (the backend's env 0): ", (gint64)in->start);
            else
                crl_error_prefix(err, "envs %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT " (the backend's envs 0..%"
                                 G_GINT64_FORMAT "): ", (gint64)in->start, (gint64)(in->start + in->count - 1),
                                 (gint64)(in->count - 1));
            return rc;
        }
    }
    return CRL_OK;
}

/* ---- the ops env.c calls ------------------------------------------------------------------- */

static int exec_bind(void *benv, crl_td *buffers, crl_error *err)
{
    crl__exec *x = benv;
    crl_td_unref(x->buffers);
    x->buffers = crl_td_ref(buffers);
    for (size_t k = 0; k < x->ninst; k++) {
        crl__exec_inst *in = &x->inst[k];
        crl_td_unref(in->view);
        crl_error local;
        crl_error_clear(&local);
        in->view = crl_td_slice(buffers, 0, in->start, in->start + in->count, 1, &local);
        if (!in->view)
            return crl_error_pass(err, &local, CRL_E_RUNTIME);
        int rc = x->real.bind(in->benv, in->view, err);
        if (rc) {
            crl_error_prefix(err, "envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "): ", (gint64)in->start,
                             (gint64)(in->start + in->count));
            return rc;
        }
    }
    int rc = x->kind->start ? x->kind->start(x, err) : CRL_OK;
    if (rc)
        crl_error_prefix(err, "%s executor: ", x->kind->name);
    return rc;
}

static int exec_reset(void *benv, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    crl__exec *x = benv;
    turns_rewind(x);
    x->job = CRL__JOB_RESET;
    x->mask = mask;
    x->seeds = seeds;
    x->from_state = from_state;
    int rc = x->kind->run(x, err);
    x->job = CRL__JOB_NONE;
    x->mask = NULL;
    x->seeds = NULL;
    return rc;
}

static int exec_step(void *benv, crl_error *err)
{
    crl__exec *x = benv;
    turns_rewind(x);
    x->job = CRL__JOB_STEP;
    int rc = x->kind->run(x, err);
    x->job = CRL__JOB_NONE;
    return rc;
}

static int exec_render(void *benv, int64_t i, uint8_t *rgb, crl_error *err)
{
    crl__exec *x = benv;
    if (!x->real.render)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "the backend cannot render");
    if (i < 0 || i >= x->num)
        return crl_error_set(err, CRL_E_RANGE, "env index %" G_GINT64_FORMAT " is out of range (0..%" G_GINT64_FORMAT
                             ")", (gint64)i, (gint64)(x->num - 1));
    /* Worker processes own the stepped instances; the parent's copies are stale. */
    if (x->o.kind == CRL__EXEC_PROCESSES)
        return crl__exec_procs_render(x, i, rgb, err);
    /* The instance holding env i: instances are in env order. */
    size_t lo = 0, hi = x->ninst;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (x->inst[mid].start <= i)
            lo = mid;
        else
            hi = mid;
    }
    return x->real.render(x->inst[lo].benv, i - x->inst[lo].start, rgb, err);
}

static void exec_close(void *benv)
{
    crl__exec *x = benv;
    if (!x)
        return;
    crl__exec_async_free(x);
    if (x->kind && x->kind->stop)
        x->kind->stop(x);
    exec_free(x);
}

const crl_env_ops crl__exec_env_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = NULL,
    .make = NULL,
    .bind = exec_bind,
    .reset = exec_reset,
    .step = exec_step,
    .render = exec_render,
    .close = exec_close,
};
