/* The executor layer: instances of the real backend per worker block (or per env), combined specs, dispatch. */
#include "exec-private.h"
#include "env-private.h"
#include "config-private.h"

#include <crl/config.h>
#include <crl/host.h>
#include <string.h>

/* ---- options --------------------------------------------------------------------------- */

int crl__exec_read_options(const crl_opts *o, int64_t num, crl__exec_opts *out, crl_error *err)
{
    memset(out, 0, sizeof *out);
    const char *kind = NULL, *fail = NULL;
    int rc = crl_opts_string(o, "executor", &kind, err);
    if (!rc)
        rc = crl_opts_int(o, "num_workers", &out->num_workers, err);
    if (!rc)
        rc = crl_opts_int(o, "batch_size", &out->batch_size, err);
    if (!rc)
        rc = crl_opts_bool(o, "pin_threads", &out->pin_threads, err);
    if (!rc)
        rc = crl_opts_double(o, "step_timeout", &out->step_timeout, err);
    if (!rc)
        rc = crl_opts_string(o, "on_worker_failure", &fail, err);
    if (!rc)
        rc = crl_opts_int(o, "max_restarts", &out->max_restarts, err);
    if (rc)
        return rc;
    out->kind = !strcmp(kind, "serial") ? CRL__EXEC_SERIAL : !strcmp(kind, "threads") ? CRL__EXEC_THREADS
                : !strcmp(kind, "processes") ? CRL__EXEC_PROCESSES : CRL__EXEC_INLINE;
    out->on_failure = !strcmp(fail, "restart") ? CRL__FAIL_RESTART : CRL__FAIL_FAIL;
    const char *sec = crl_opts_section(o);
    if (out->batch_size > num)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " exceeds num_envs = %"
                             G_GINT64_FORMAT "; use at most num_envs (or 0 for sync steps of all envs)",
                             crl_opts_origin(o, "batch_size"), sec, (gint64)out->batch_size, (gint64)num);
    if (out->batch_size == num)
        out->batch_size = 0;  /* a batch of all envs is the sync mode */
    if (out->batch_size > 0 && out->kind != CRL__EXEC_INLINE) {
        const char *ar = NULL;
        size_t ntf = 0;
        const char *const *tfs = NULL;
        if (out->kind != CRL__EXEC_THREADS)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " < num_envs (async "
                                 "send/recv) needs executor = threads, not %s; set executor = threads, or drop "
                                 "batch_size", crl_opts_origin(o, "batch_size"), sec, (gint64)out->batch_size, kind);
        if (!crl_opts_string(o, "auto_reset", &ar, NULL) && ar && !strcmp(ar, "same_step"))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] auto_reset = same_step cannot be combined with async "
                                 "send/recv (batch_size < num_envs), which resets an ended env at its next send as "
                                 "EnvPool does; set auto_reset = next_step or off", crl_opts_origin(o, "auto_reset"),
                                 sec);
        if (!crl_opts_list(o, "worker_transforms", &ntf, &tfs, NULL) && ntf > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] worker_transforms cannot be combined with async "
                                 "send/recv (batch_size < num_envs); drop batch_size, or worker_transforms",
                                 crl_opts_origin(o, "worker_transforms"), sec);
        if (!crl_opts_list(o, "transforms", &ntf, &tfs, NULL) && ntf > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] transforms cannot be combined with async send/recv "
                                 "(batch_size < num_envs): a recv holds an arbitrary subset of the envs; drop "
                                 "batch_size, or apply the transforms to the received batches",
                                 crl_opts_origin(o, "transforms"), sec);
    }
    if (out->kind == CRL__EXEC_INLINE) {
        if (out->batch_size > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " < num_envs needs an "
                                 "executor (async send/recv); set executor = threads, or drop batch_size",
                                 crl_opts_origin(o, "batch_size"), sec, (gint64)out->batch_size);
        size_t nwt = 0;
        const char *const *wt = NULL;
        if (!crl_opts_list(o, "worker_transforms", &nwt, &wt, NULL) && nwt > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] worker_transforms run inside the executor's workers; set "
                                 "executor = serial, threads or processes (or use transforms, which run in this "
                                 "process)", crl_opts_origin(o, "worker_transforms"), sec);
        if (crl_opts_prefixed_count(o, "per_env.") > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: per-env options need one backend instance per env; "
                                 "set executor = serial (or threads, processes)", crl_opts_origin(o, "per_env."), sec,
                                 crl_opts_prefixed_key(o, "per_env.", 0));
    }
    /* More workers than envs would only idle. */
    if (out->num_workers > num)
        out->num_workers = num;
    return CRL_OK;
}

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
    }
    g_free(x->inst);
    g_free(x->blocks);
    g_free(x->block_err);
    g_free(x->restarted);
    g_free(x);
}

/* ---- per-env option sets ------------------------------------------------------------------ */

typedef struct per_env_key {
    const char *key;        /* "per_env.g" (borrowed from opts) */
    const char *name;       /* "g" */
    const char *origin;     /* FILE:LINE of per_env.g */
    char **vals;            /* num items */
} per_env_key;

static void per_env_free(per_env_key *pk, size_t n)
{
    for (size_t k = 0; k < n; k++)
        g_strfreev(pk[k].vals);
    g_free(pk);
}

static bool table_declares(const crl_option *t, const char *name)
{
    for (; t && t->type != CRL_OPT_END; t++)
        if (!(t->flags & CRL_OPT_PREFIX) && !strcmp(t->name, name))
            return true;
    return false;
}

/* The per_env.KEY lists: each KEY a backend option, each list num long. */
static int per_env_parse(const crl_env *env, const crl_config *cfg, const char *section, const crl_opts *opts,
                         const crl_option *table, per_env_key **out, size_t *nout, crl_error *err)
{
    size_t n = crl_opts_prefixed_count(opts, "per_env.");
    *out = NULL;
    *nout = 0;
    if (!n)
        return CRL_OK;
    per_env_key *pk = g_new0(per_env_key, n);
    for (size_t k = 0; k < n; k++) {
        per_env_key *p = &pk[k];
        p->key = crl_opts_prefixed_key(opts, "per_env.", k);
        p->name = p->key + strlen("per_env.");
        p->origin = crl_config_origin(cfg, section, p->key);
        if (!p->origin)
            p->origin = "command line";
        if (!table_declares(table, p->name)) {
            GPtrArray *names = g_ptr_array_new();
            for (const crl_option *t = table; t && t->type != CRL_OPT_END; t++)
                g_ptr_array_add(names, (gpointer)t->name);
            g_ptr_array_add(names, NULL);
            const char *hint = crl_did_you_mean(p->name, (const char *const *)names->pdata);
            GString *all = g_string_new("");
            for (guint i = 0; i + 1 < names->len; i++)
                g_string_append_printf(all, "%s%s", i ? ", " : "", (const char *)names->pdata[i]);
            if (hint)
                crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: '%s' is not an option of env backend '%s'; did you "
                              "mean 'per_env.%s'?", p->origin, section, p->key, p->name, env->backend, hint);
            else
                crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: '%s' is not an option of env backend '%s'; per_env "
                              "takes the backend's options (%s)", p->origin, section, p->key, p->name, env->backend,
                              all->len ? all->str : "it has none");
            g_string_free(all, TRUE);
            g_ptr_array_free(names, TRUE);
            per_env_free(pk, n);
            return CRL_E_CONFIG;
        }
        const char *raw = crl_opts_prefixed_value(opts, "per_env.", k);
        p->vals = g_strsplit(raw ? raw : "", ",", -1);
        guint len = g_strv_length(p->vals);
        for (guint i = 0; i < len; i++)
            g_strstrip(p->vals[i]);
        guint given = len == 1 && !*p->vals[0] ? 0 : len;
        if ((int64_t)given != env->num) {
            crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s has %u value%s but there %s %" G_GINT64_FORMAT " env%s; give "
                          "one value per env (v0, v1, ...)", p->origin, section, p->key, given, given == 1 ? "" : "s",
                          env->num == 1 ? "is" : "are", (gint64)env->num, env->num == 1 ? "" : "s");
            per_env_free(pk, n);
            return CRL_E_CONFIG;
        }
        for (guint i = 0; i < len; i++)
            if (!*p->vals[i]) {
                crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: the value for env %u is empty; give one value per env",
                              p->origin, section, p->key, i);
                per_env_free(pk, n);
                return CRL_E_CONFIG;
            }
    }
    *out = pk;
    *nout = n;
    return CRL_OK;
}

/* "per_env.g = 2.5 (test.ini:8), ..." for env i, for messages; g_free. */
static char *per_env_what(const per_env_key *pk, size_t npk, int64_t i)
{
    GString *s = g_string_new("");
    for (size_t k = 0; k < npk; k++)
        g_string_append_printf(s, "%s%s = %s from %s", k ? ", " : "", pk[k].key, pk[k].vals[i], pk[k].origin);
    return g_string_free(s, FALSE);
}

/* What an instance's own config changes in the section (worker_transforms:
 * the inner env's settings; NULL for a plain instance). */
typedef struct inner_env {
    int64_t count;
    const char *transforms;      /* the worker_transforms list, joined */
    const char *transforms_at;   /* its FILE:LINE */
    bool from_pixels, pixels_only;
} inner_env;

/* [env] keys an inner env does not take from the outer section. */
static bool outer_only(const char *key)
{
    static const char *const keys[] = { "executor", "num_workers", "batch_size", "pin_threads", "step_timeout",
                                        "on_worker_failure", "max_restarts", "worker_transforms", "transforms",
                                        "num_envs", "auto_reset", "frame_skip", "seed", "from_pixels",
                                        "pixels_only", NULL };
    for (size_t i = 0; keys[i]; i++)
        if (!strcmp(key, keys[i]))
            return true;
    return false;
}

/* Instance i's config: the section with each per_env KEY replaced by its
 * i-th value (tagged with per_env.KEY's origin; i < 0: no per-env values),
 * and for an inner env its own settings plus every [transform.*] section.
 * New config, free with crl_config_free. */
static crl_config *inst_config(const crl_config *cfg, const char *section, const per_env_key *pk, size_t npk,
                               int64_t i, const inner_env *ie, crl_error *err)
{
    crl_config *c = crl_config_new(err);
    if (!c)
        return NULL;
    const crl__section *src = crl__config_section(cfg, section);
    crl__section *dst = crl__config_ensure_section(c, section, src && src->origin ? src->origin : "command line");
    for (guint j = 0; src && j < src->entries->len; j++) {
        const crl__entry *e = g_ptr_array_index(src->entries, j);
        if (g_str_has_prefix(e->key, "per_env.") || (ie && outer_only(e->key)))
            continue;
        bool over = false;
        for (size_t k = 0; i >= 0 && k < npk && !over; k++)
            over = !strcmp(e->key, pk[k].name);
        if (!over)
            crl__section_add(dst, e->key, e->value, e->origin, e->layer);
    }
    for (size_t k = 0; i >= 0 && k < npk; k++)
        crl__section_add(dst, pk[k].name, pk[k].vals[i], pk[k].origin, CRL_LAYER_FILE);
    if (ie) {
        char num[32];
        g_snprintf(num, sizeof num, "%" G_GINT64_FORMAT, (gint64)ie->count);
        crl__section_add(dst, "num_envs", num, "worker_transforms", CRL_LAYER_FILE);
        crl__section_add(dst, "transforms", ie->transforms, ie->transforms_at, CRL_LAYER_FILE);
        crl__section_add(dst, "auto_reset", "next_step", "worker_transforms", CRL_LAYER_FILE);
        crl__section_add(dst, "from_pixels", ie->from_pixels ? "true" : "false", "worker_transforms", CRL_LAYER_FILE);
        crl__section_add(dst, "pixels_only", ie->pixels_only ? "true" : "false", "worker_transforms", CRL_LAYER_FILE);
        for (guint j = 0; j < cfg->sections->len; j++) {
            const crl__section *ts = g_ptr_array_index(cfg->sections, j);
            if (!g_str_has_prefix(ts->name, "transform."))
                continue;
            crl__section *td = crl__config_ensure_section(c, ts->name, ts->origin);
            for (guint q = 0; q < ts->entries->len; q++) {
                const crl__entry *e = g_ptr_array_index(ts->entries, q);
                crl__section_add(td, e->key, e->value, e->origin, e->layer);
            }
        }
    }
    return c;
}

/* Env i's option set (per_env values in place), validated. */
static crl_opts *per_env_opts(const crl_config *cfg, const char *section, const per_env_key *pk, size_t npk,
                              int64_t i, const crl_option *const *tables, crl_error *err)
{
    crl_config *c = inst_config(cfg, section, pk, npk, i, NULL, err);
    crl_opts *o = c ? crl_config_opts(c, section, tables, 2, err) : NULL;
    crl_config_free(c);
    return o;
}

/* ---- combined specs ---------------------------------------------------------------------- */

static crl_spec *combine(const crl__exec *x, crl_spec *const *parts, const char *key, crl_error *err);

static int spec_mismatch(const crl__exec *x, size_t k, const char *key, const char *what, crl_error *err)
{
    return crl_error_set(err, CRL_E_PLUGIN, "spec '%s' of envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") differs "
                         "from that of env 0 (%s); every env of a batch needs the same kinds, dtypes and shapes (a "
                         "per_env option may not change them)", key, (gint64)x->inst[k].start,
                         (gint64)(x->inst[k].start + x->inst[k].count), what);
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
                spec_mismatch(x, k, full, "other keys", err);
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
                spec_mismatch(x, k, key, "another kind", err);
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
            spec_mismatch(x, k, key, "another kind, dtype or shape", err);
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
            spec_mismatch(x, k, key, "other categories or values", err);
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

int crl__exec_make(crl_env *env, const crl_env_ops *real, const crl__exec_opts *xo, const crl_config *cfg,
                   const char *section, const crl_opts *opts, crl_env_specs *specs, crl_error *err)
{
    crl__exec *x = g_new0(crl__exec, 1);
    x->env = env;
    x->real = *real;
    x->backend_step = real->step;
    x->o = *xo;
    x->num = env->num;
    x->kind = kind_of(xo->kind);
    int64_t nw = xo->num_workers > 0 ? xo->num_workers
                 : xo->kind == CRL__EXEC_SERIAL ? 1 : (int64_t)g_get_num_processors();
    if (nw > x->num)
        nw = x->num;
    if (nw < 1)
        nw = 1;
    make_blocks(x, nw);
    x->block_err = g_new0(crl_error, x->nblocks);
    x->restarted = g_new0(bool, (gsize)x->num);

    const crl_component *comp = crl_host_find(env->host, CRL_KIND_ENV, env->backend);
    const crl_option *table = comp ? comp->options : NULL;
    static const crl_option none[] = { CRL_OPTIONS_END };
    const crl_option *tables[2] = { crl_env_options(), table ? table : none };
    per_env_key *pk = NULL;
    size_t npk = 0;
    int rc = per_env_parse(env, cfg, section, opts, table, &pk, &npk, err);
    /* One instance per env with per-env options, and for async (one env
     * steps alone); else one per block. */
    bool one_each = npk > 0 || (xo->batch_size > 0 && xo->batch_size < x->num);
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
    size_t nwt = 0;
    const char *const *wt = NULL;
    inner_env ie = { 0 };
    if (!rc)
        rc = crl_opts_list(opts, "worker_transforms", &nwt, &wt, err);
    char *wtj = nwt ? g_strjoinv(", ", (char **)wt) : NULL;
    if (nwt) {
        ie.transforms = wtj;
        ie.transforms_at = crl_opts_origin(opts, "worker_transforms");
        ie.from_pixels = env->from_pixels;
        ie.pixels_only = env->pixels_only;
        /* The inner envs render; the outer one sees "pixels" as an observation. */
        env->from_pixels = env->pixels_only = false;
        x->real = crl__wenv_ops;
    }
    crl_env_specs *parts = g_new0(crl_env_specs, x->ninst);
    for (size_t k = 0; !rc && k < x->ninst; k++) {
        crl__exec_inst *in = &x->inst[k];
        crl_opts *own = NULL;
        if (nwt) {
            ie.count = in->count;
            parts[k].struct_size = sizeof parts[k];
            crl_error e;
            crl_error_clear(&e);
            crl_config *c = inst_config(cfg, section, pk, npk, npk ? in->start : -1, &ie, &e);
            rc = c ? crl__wenv_make(env->host, c, section, &parts[k], &in->benv, err)
                   : crl_error_pass(err, &e, CRL_E_NOMEM);
            if (rc)
                crl_error_prefix(err, "worker_transforms, envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "): ",
                                 (gint64)in->start, (gint64)(in->start + in->count));
            continue;
        }
        if (npk) {
            crl_error e;
            crl_error_clear(&e);
            own = per_env_opts(cfg, section, pk, npk, in->start, tables, &e);
            if (!own) {
                rc = crl_error_pass(err, &e, CRL_E_CONFIG);
                char *what = per_env_what(pk, npk, in->start);
                crl_error_prefix(err, "[%s] env %" G_GINT64_FORMAT " (%s): ", section, (gint64)in->start, what);
                g_free(what);
                break;
            }
        }
        parts[k].struct_size = sizeof parts[k];
        rc = real->make(env->id, in->count, own ? own : opts, &parts[k], &in->benv, err);
        if (!rc && !in->benv)
            rc = crl_error_set(err, CRL_E_PLUGIN, "make returned no env");
        if (!rc && (!parts[k].observation || !parts[k].action || !parts[k].reward || !parts[k].done))
            rc = crl_error_set(err, CRL_E_PLUGIN, "make declared no %s spec",
                               !parts[k].observation ? "observation" : !parts[k].action ? "action"
                               : !parts[k].reward ? "reward" : "done");
        if (rc) {
            if (npk) {
                char *what = per_env_what(pk, npk, in->start);
                crl_error_prefix(err, "env %" G_GINT64_FORMAT " (%s): ", (gint64)in->start, what);
                g_free(what);
            } else
                crl_error_prefix(err, "envs [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") of %s executor: ",
                                 (gint64)in->start, (gint64)(in->start + in->count), x->kind->name);
        }
        crl_opts_free(own);
    }
    per_env_free(pk, npk);
    g_free(wtj);

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
            rc = crl_error_set(err, CRL_E_PLUGIN, "some instances declare a %s spec and some do not", names[s]);
            break;
        }
        crl_error e;
        crl_error_clear(&e);
        out[s] = combine(x, col, "", &e);
        if (!out[s]) {
            rc = crl_error_pass(err, &e, CRL_E_PLUGIN);
            crl_error_prefix(err, "%s spec: ", names[s]);
        }
    }
    g_free(col);
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
    env->ops = crl__exec_env_ops;
    env->benv = x;
    return CRL_OK;
}

/* ---- running a block ------------------------------------------------------------------------ */

int crl__exec_run_block(crl__exec *x, size_t b, crl_error *err)
{
    const crl__exec_block *bl = &x->blocks[b];
    for (size_t k = bl->first; k < bl->first + bl->ninst; k++) {
        const crl__exec_inst *in = &x->inst[k];
        int rc;
        if (x->job == CRL__JOB_STEP) {
            rc = x->real.step(in->benv, err);
        } else {
            const bool *m = x->mask ? x->mask + in->start : NULL;
            if (m) {
                bool any = false;
                for (int64_t i = 0; i < in->count && !any; i++)
                    any = m[i];
                if (!any)
                    continue;
            }
            rc = x->real.reset(in->benv, m, x->seeds ? x->seeds + in->start : NULL, x->from_state, err);
        }
        if (rc) {
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
    for (size_t k = 0; k < x->ninst; k++) {
        crl__exec_inst *in = &x->inst[k];
        crl_td_unref(in->view);
        crl_error e;
        crl_error_clear(&e);
        in->view = crl_td_slice(buffers, 0, in->start, in->start + in->count, 1, &e);
        if (!in->view)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
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
