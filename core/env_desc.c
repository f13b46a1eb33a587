/* The typed env description: an [env] section parsed and validated once (backend, id, env settings,
 * executor settings, per-env option sets, transforms), before any env or backend instance exists. */
#include "env-desc-private.h"
#include "config-private.h"

#include <crl/config.h>
#include <crl/host.h>
#include <string.h>

static const crl_option env_options[] = {
    { "backend", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: the env backend component, e.g. classic (list them with 'crl envs')" },
    { "id", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "required: an env id the backend offers, e.g. CartPole-v1" },
    { "num_envs", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 16777216, NULL,
      "envs in the batch (batch shape [num_envs]); 0: one env with batch shape [], as TorchRL's GymEnv" },
    { "frame_skip", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1000000, NULL,
      "repeat each action this many frames, summing the rewards; an env that ends stops early" },
    { "from_pixels", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "add a \"pixels\" uint8 [H, W, 3] observation rendered after every reset and step" },
    { "pixels_only", CRL_OPT_BOOL, 0, NULL, 0, 0, NULL,
      "with from_pixels: leave the backend's observation keys out, keep only \"pixels\"; unset: true with "
      "from_pixels (TorchRL's default), false without" },
    { "auto_reset", CRL_OPT_ENUM, 0, "off", 0, 0, "off|next_step|same_step",
      "an env whose episode ended: off = reset it yourself (TorchRL's EnvBase; stepping it is an error), "
      "next_step = the next step resets it (EnvPool), same_step = it resets inside the step that ended it" },
    { "project_actions", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "bring out-of-domain actions into the action spec (clamp, round) instead of failing" },
    { "max_episode_steps", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e15, NULL,
      "set truncated after this many base-env steps of an episode; 0: the backend's default" },
    { "seed", CRL_OPT_INT, 0, "0", 0, 0, NULL,
      "env i is seeded with element i of the seed chain starting here (see crl_env_set_seed)" },
    { "return_state", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "put the backend's simulator state (classic, dm_control: float64 \"state\") into every reset and step "
      "output and the state spec; off, as TorchRL's GymEnv and DMControlEnv, the env keeps it to itself and "
      "crl_env_reset_from_state still takes it" },
    { "transforms", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "transforms applied in this order (TorchRL's TransformedEnv + Compose): each NAME needs a [transform.NAME] "
      "section whose 'type' names the transform" },
    /* The executor (exec.c): how the num_envs envs are stepped. */
    { "executor", CRL_OPT_ENUM, 0, "inline", 0, 0, "inline|serial|threads|processes",
      "inline = the backend steps all num_envs itself; serial = one backend instance per worker block, stepped in "
      "order; threads = the blocks on a pool of worker threads; processes = in worker processes over shared memory" },
    { "num_workers", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 4096, NULL,
      "worker blocks of envs (at most num_envs); 0: one per core (threads, processes), 1 (serial)" },
    { "batch_size", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 16777216, NULL,
      "0 or num_envs: sync steps of all envs; less: async send/recv, each recv returns the first batch_size envs "
      "to finish (executor = threads, or inline with a backend that has an async mode of its own: envpool)" },
    { "pin_threads", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "pin worker i to core i mod cores (threads)" },
    /* A healthy job takes microseconds to a few seconds (a large block of pixel envs rendered in software under
     * valgrind on a loaded machine); five minutes is far past that, yet a hung worker is still an error. */
    { "step_timeout", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "300", 0, 1e6, NULL,
      "seconds a worker may take for one step, reset or render of its envs before it counts as hung, is killed "
      "and the call fails with CRL_E_TIMEOUT (processes); time this process spends stopped (Ctrl-Z, a debugger) "
      "does not count; 0: no limit" },
    { "on_worker_failure", CRL_OPT_ENUM, 0, "fail", 0, 0, "fail|restart",
      "a worker that crashes, hangs or exits: fail = the step fails naming the envs; restart = its envs come back, "
      "their episodes truncated (processes)" },
    { "max_restarts", CRL_OPT_INT, CRL_OPT_RANGE, "3", 0, 1000000, NULL,
      "with on_worker_failure = restart: restarts allowed before a failure is an error" },
    { "worker_transforms", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "transforms run inside each worker on its own envs (TorchRL's ParallelEnv of TransformedEnvs), before the "
      "batch is assembled; [env] transforms then run on the whole batch in the parent.  Needs an executor" },
    { "per_env.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL,
      "per_env.KEY = v0, v1, ...: backend option KEY, or id, with one value per env (needs an executor other than "
      "inline); envs of different ids must have the same specs (TorchRL's ParallelEnv of several create "
      "functions)" },
    CRL_OPTIONS_END
};

static const crl_option no_options[] = { CRL_OPTIONS_END };

const crl_option *crl_env_options(void)
{
    return env_options;
}

/* ---- the backend -------------------------------------------------------------------------- */

static int take_ops(crl_env_desc *d, const crl_component *comp, crl_error *err)
{
    const crl_env_ops *ops = comp->ops;
    if (!ops || ops->struct_size < sizeof(uint32_t))
        return crl_error_set(err, CRL_E_PLUGIN, "env backend '%s' (plugin '%s') registered no ops: fix the plugin",
                             d->backend, d->plugin);
    size_t n = ops->struct_size < sizeof d->ops ? ops->struct_size : sizeof d->ops;
    memcpy(&d->ops, ops, n);
    const char *missing = !d->ops.make ? "make" : !d->ops.bind ? "bind" : !d->ops.reset ? "reset"
                          : !d->ops.step ? "step" : !d->ops.close ? "close" : NULL;
    if (missing)
        return crl_error_set(err, CRL_E_PLUGIN, "env backend '%s' (plugin '%s') has no %s in its crl_env_ops: fix "
                             "the plugin", d->backend, d->plugin, missing);
    return CRL_OK;
}

/* `id` among the backend's ids; `what` names where it was given ("id = 'X'"), origin its FILE:LINE. */
static int check_id_at(const crl_env_desc *d, const char *id, const char *origin, const char *what, crl_error *err)
{
    const char *const *ids = d->ops.list ? d->ops.list() : NULL;
    if (!ids)
        return CRL_OK; /* the backend's make judges the id */
    for (const char *const *p = ids; *p; p++)
        if (!strcmp(*p, id))
            return CRL_OK;
    GString *all = g_string_new(NULL);
    for (const char *const *p = ids; *p; p++)
        g_string_append_printf(all, "%s%s", all->len ? ", " : "", *p);
    const char *hint = crl_did_you_mean(id, (const char *const *)ids);
    GString *hintmsg = g_string_new(NULL);
    if (hint)
        g_string_printf(hintmsg, "did you mean '%s'? ", hint);
    crl_error_set(err, CRL_E_NOT_FOUND, "%s%s[%s] %s: env backend '%s' has no such env; %sits envs: %s",
                  origin ? origin : "", origin ? ": " : "", d->section, what, d->backend, hintmsg->str,
                  all->len ? all->str : "none");
    g_string_free(hintmsg, TRUE);
    g_string_free(all, TRUE);
    return CRL_E_NOT_FOUND;
}

static int check_id(const crl_env_desc *d, const crl_config *cfg, crl_error *err)
{
    const char *origin = crl_config_origin(cfg, d->section, "id");
    if (!origin)
        origin = crl_config_origin(cfg, d->section, "domain");
    char *what = g_strdup_printf("id = '%s'", d->id);
    int rc = check_id_at(d, d->id, origin, what, err);
    g_free(what);
    return rc;
}

/* ---- env and executor settings ------------------------------------------------------------ */

static int read_exec_options(crl_env_desc *d, crl_error *err)
{
    const crl_opts *o = d->opts;
    crl__exec_opts *out = &d->xo;
    const int64_t num = d->num;
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
    const char *sec = d->section;
    if (out->batch_size > num)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " exceeds num_envs = %"
                             G_GINT64_FORMAT "; use at most num_envs (or 0 for sync steps of all envs)",
                             crl_opts_origin(o, "batch_size"), sec, (gint64)out->batch_size, (gint64)num);
    if (out->batch_size == num)
        out->batch_size = 0;  /* a batch of all envs is the sync mode */
    /* The backend's own async mode (EnvPool's send/recv) serves executor = inline. */
    bool native = d->ops.async_reset && d->ops.send && d->ops.recv;
    if (out->batch_size > 0 && (out->kind != CRL__EXEC_INLINE || native)) {
        if (out->kind == CRL__EXEC_INLINE && (d->frame_skip > 1 || d->from_pixels))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " < num_envs runs the "
                                 "%s backend's own async mode, which takes neither frame_skip > 1 nor from_pixels; "
                                 "drop those, or set executor = threads", crl_opts_origin(o, "batch_size"), sec,
                                 (gint64)out->batch_size, d->backend);
        if (out->kind != CRL__EXEC_THREADS && out->kind != CRL__EXEC_INLINE)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " < num_envs (async "
                                 "send/recv) needs executor = threads, not %s; set executor = threads, or drop "
                                 "batch_size", crl_opts_origin(o, "batch_size"), sec, (gint64)out->batch_size, kind);
        if (d->autoreset == CRL_AUTORESET_SAME_STEP)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] auto_reset = same_step cannot be combined with async "
                                 "send/recv (batch_size < num_envs), which resets an ended env at its next send as "
                                 "EnvPool does; set auto_reset = next_step or off", crl_opts_origin(o, "auto_reset"),
                                 sec);
        if (d->nwtf > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] worker_transforms cannot be combined with async "
                                 "send/recv (batch_size < num_envs); drop batch_size, or worker_transforms",
                                 d->wtf_at, sec);
        if (d->ntf > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] transforms cannot be combined with async send/recv "
                                 "(batch_size < num_envs): a recv holds an arbitrary subset of the envs; drop "
                                 "batch_size, or apply the transforms to the received batches", d->tf_at, sec);
    }
    if (out->kind == CRL__EXEC_INLINE) {
        if (out->batch_size > 0 && !native)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] batch_size = %" G_GINT64_FORMAT " < num_envs needs an "
                                 "executor (async send/recv); set executor = threads, or drop batch_size (the %s "
                                 "backend has no async mode of its own)", crl_opts_origin(o, "batch_size"), sec,
                                 (gint64)out->batch_size, d->backend);
        if (d->nwtf > 0)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] worker_transforms run inside the executor's workers; set "
                                 "executor = serial, threads or processes (or use transforms, which run in this "
                                 "process)", d->wtf_at, sec);
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

static int read_env_options(crl_env_desc *d, crl_error *err)
{
    const crl_opts *o = d->opts;
    int64_t num = 0, seed = 0;
    const char *ar = NULL;
    int rc = crl_opts_int(o, "num_envs", &num, err);
    if (!rc)
        rc = crl_opts_int(o, "frame_skip", &d->frame_skip, err);
    if (!rc)
        rc = crl_opts_bool(o, "from_pixels", &d->from_pixels, err);
    /* TorchRL's wrappers default to pixels_only=True once from_pixels is on. */
    d->pixels_only = d->from_pixels;
    if (!rc && crl_opts_is_set(o, "pixels_only"))
        rc = crl_opts_bool(o, "pixels_only", &d->pixels_only, err);
    if (!rc)
        rc = crl_opts_bool(o, "return_state", &d->return_state, err);
    if (!rc)
        rc = crl_opts_string(o, "auto_reset", &ar, err);
    if (!rc)
        rc = crl_opts_bool(o, "project_actions", &d->project_actions, err);
    if (!rc)
        rc = crl_opts_int(o, "max_episode_steps", &d->max_steps, err);
    if (!rc)
        rc = crl_opts_int(o, "seed", &seed, err);
    if (rc)
        return rc;
    d->seed = (uint64_t)seed;
    d->num = num > 0 ? num : 1;
    d->batch_ndim = num > 0 ? 1 : 0;
    d->autoreset = !strcmp(ar, "next_step") ? CRL_AUTORESET_NEXT_STEP
                   : !strcmp(ar, "same_step") ? CRL_AUTORESET_SAME_STEP
                                              : CRL_AUTORESET_OFF;
    if (d->pixels_only && !d->from_pixels)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] pixels_only = true needs from_pixels = true; set "
                             "from_pixels = true or drop pixels_only",
                             crl_opts_origin(o, "pixels_only"), d->section);
    return CRL_OK;
}

/* ---- transforms ----------------------------------------------------------------------------- */

/* The transforms a list key names, each [transform.NAME] parsed. */
static int read_transforms(crl_env_desc *d, const crl_config *cfg, const char *key, crl__tf_desc **out, size_t *nout,
                           char **at, crl_error *err)
{
    size_t n = 0;
    const char *const *names = NULL;
    int rc = crl_opts_list(d->opts, key, &n, &names, err);
    if (rc || n == 0)
        return rc;
    const char *origin = crl_opts_origin(d->opts, key);
    *at = g_strdup(origin ? origin : "?");
    if (d->autoreset == CRL_AUTORESET_SAME_STEP && out == &d->tf)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: [%s] transforms cannot be combined with auto_reset = "
                             "same_step (%s; the reset observation would bypass the transforms); set auto_reset = "
                             "next_step or off", *at, d->section, crl_opts_origin(d->opts, "auto_reset"));
    *out = g_new0(crl__tf_desc, n);
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        if (!*name || strchr(name, '.') || strchr(name, ' '))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: '%s' is not a transform name (no dots or blanks; "
                                 "each NAME has a [transform.NAME] section)", *at, d->section, key, name);
        char *ts = g_strconcat("transform.", name, NULL);
        if (!crl_config_has_section(cfg, ts))
            rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s names '%s' but there is no [%s] section; add it with "
                               "'type = ...' naming the transform", *at, d->section, key, name, ts);
        else
            rc = crl__tf_desc_from_config(d->host, cfg, ts, &(*out)[i], err);
        g_free(ts);
        if (rc)
            return rc;
        (*nout)++;
    }
    return CRL_OK;
}

/* ---- per-env option sets ---------------------------------------------------------------------- */

static bool table_declares(const crl_option *t, const char *name)
{
    for (; t && t->type != CRL_OPT_END; t++)
        if (!(t->flags & CRL_OPT_PREFIX) && !strcmp(t->name, name))
            return true;
    return false;
}

static int unknown_per_env_key(const crl_env_desc *d, const crl_option *table, const char *key, const char *name,
                               const char *origin, crl_error *err)
{
    GPtrArray *names = g_ptr_array_new();
    for (const crl_option *t = table; t && t->type != CRL_OPT_END; t++)
        g_ptr_array_add(names, (gpointer)t->name);
    g_ptr_array_add(names, NULL);
    const char *hint = crl_did_you_mean(name, (const char *const *)names->pdata);
    GString *all = g_string_new("");
    for (guint i = 0; i + 1 < names->len; i++)
        g_string_append_printf(all, "%s%s", i ? ", " : "", (const char *)names->pdata[i]);
    if (hint)
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: '%s' is not an option of env backend '%s'; did you mean "
                      "'per_env.%s'?", origin, d->section, key, name, d->backend, hint);
    else
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: '%s' is not an option of env backend '%s'; per_env takes the "
                      "backend's options (%s)", origin, d->section, key, name, d->backend,
                      all->len ? all->str : "it has none");
    g_string_free(all, TRUE);
    g_ptr_array_free(names, TRUE);
    return CRL_E_CONFIG;
}

/* per_env.id's values: each one the backend offers; d->id becomes the distinct ones in order ("a, b"), what
 * messages and crl_env_id show.  The specs are compared when the instances are made (exec.c). */
static int per_env_ids(crl_env_desc *d, const char *const *ids, const char *origin, crl_error *err)
{
    GString *distinct = g_string_new(NULL);
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    int rc = CRL_OK;
    for (int64_t i = 0; !rc && i < d->num; i++) {
        char what[96];
        g_snprintf(what, sizeof what, "per_env.id value %" G_GINT64_FORMAT " = '%s'", (gint64)i, ids[i]);
        rc = check_id_at(d, ids[i], origin, what, err);
        if (!rc && g_hash_table_add(seen, (gpointer)ids[i]))
            g_string_append_printf(distinct, "%s%s", distinct->len ? ", " : "", ids[i]);
    }
    g_hash_table_unref(seen);
    if (rc) {
        g_string_free(distinct, TRUE);
        return rc;
    }
    d->env_ids = g_new0(char *, (gsize)d->num + 1);
    for (int64_t i = 0; i < d->num; i++)
        d->env_ids[i] = g_strdup(ids[i]);
    g_free(d->id);
    d->id = g_string_free(distinct, FALSE);
    d->ids_at = g_strdup(origin);
    return CRL_OK;
}

/* per_env.KEY = v0, v1, ...: each KEY a backend option (or id), each list num long; env i's option set is the
 * section's with every KEY's i-th value in place. */
static int read_per_env(crl_env_desc *d, const crl_option *table, crl_error *err)
{
    size_t n = crl_opts_prefixed_count(d->opts, "per_env.");
    if (!n)
        return CRL_OK;
    const char **names = g_new0(const char *, n), **origins = g_new0(const char *, n);
    char ***vals = g_new0(char **, n);
    int rc = CRL_OK;
    for (size_t k = 0; !rc && k < n; k++) {
        const char *key = crl_opts_prefixed_key(d->opts, "per_env.", k);
        names[k] = key + strlen("per_env.");
        origins[k] = crl__opts_prefixed_origin(d->opts, "per_env.", k);
        if (!origins[k])
            origins[k] = "command line";
        if (!table_declares(table, names[k]) && strcmp(names[k], "id")) {
            rc = unknown_per_env_key(d, table, key, names[k], origins[k], err);
            break;
        }
        const char *raw = crl_opts_prefixed_value(d->opts, "per_env.", k);
        vals[k] = g_strsplit(raw ? raw : "", ",", -1);
        guint len = g_strv_length(vals[k]);
        for (guint i = 0; i < len; i++)
            g_strstrip(vals[k][i]);
        guint given = len == 1 && !*vals[k][0] ? 0 : len;
        if ((int64_t)given != d->num) {
            rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s has %u value%s but there %s %" G_GINT64_FORMAT " env%s; "
                               "give one value per env (v0, v1, ...)", origins[k], d->section, key, given,
                               given == 1 ? "" : "s", d->num == 1 ? "is" : "are", (gint64)d->num,
                               d->num == 1 ? "" : "s");
            break;
        }
        for (guint i = 0; !rc && i < len; i++)
            if (!*vals[k][i])
                rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: the value for env %u is empty; give one value per "
                                   "env", origins[k], d->section, key, i);
        if (!rc && !strcmp(names[k], "id"))
            rc = per_env_ids(d, (const char *const *)vals[k], origins[k], err);
    }
    if (!rc) {
        d->env_opts = g_new0(crl_opts *, (gsize)d->num);
        d->env_what = g_new0(char *, (gsize)d->num + 1);
    }
    const char **v = g_new0(const char *, n);
    for (int64_t i = 0; !rc && i < d->num; i++) {
        GString *what = g_string_new("");
        for (size_t k = 0; k < n; k++) {
            v[k] = vals[k][i];
            g_string_append_printf(what, "%sper_env.%s = %s from %s", k ? ", " : "", names[k], v[k], origins[k]);
        }
        d->env_what[i] = g_string_free(what, FALSE);
        crl_error local;
        crl_error_clear(&local);
        d->env_opts[i] = crl__opts_override(d->opts, names, v, origins, n, &local);
        if (!d->env_opts[i]) {
            rc = crl_error_pass(err, &local, CRL_E_RUNTIME);
            crl_error_prefix(err, "[%s] env %" G_GINT64_FORMAT " (%s): ", d->section, (gint64)i, d->env_what[i]);
        }
    }
    g_free(v);
    for (size_t k = 0; k < n; k++)
        g_strfreev(vals[k]);
    g_free(vals);
    g_free(names);
    g_free(origins);
    return rc;
}

/* ---- the description ------------------------------------------------------------------------- */

void crl_env_desc_free(crl_env_desc *d)
{
    if (!d)
        return;
    for (int64_t i = 0; d->env_opts && i < d->num; i++)
        crl_opts_free(d->env_opts[i]);
    g_free(d->env_opts);
    g_strfreev(d->env_what);
    g_strfreev(d->env_ids);
    g_free(d->ids_at);
    for (size_t i = 0; d->tf && i < d->ntf; i++)
        crl__tf_desc_clear(&d->tf[i]);
    g_free(d->tf);
    for (size_t i = 0; d->wtf && i < d->nwtf; i++)
        crl__tf_desc_clear(&d->wtf[i]);
    g_free(d->wtf);
    g_free(d->tf_at);
    g_free(d->wtf_at);
    crl_opts_free(d->opts);
    g_free(d->section);
    g_free(d->backend);
    g_free(d->plugin);
    g_free(d->id);
    g_free(d);
}

static int parse(crl_env_desc *d, const crl_config *cfg, crl_error *err)
{
    const char *section = d->section;
    const char *backend = crl_config_get(cfg, section, "backend");
    if (!backend || !*backend)
        return crl_error_set(err, CRL_E_CONFIG, "[%s] backend is required but not set; add 'backend = NAME' under "
                             "[%s] (list the env backends with 'crl envs')", section, section);
    crl_error e;
    crl_error_clear(&e);
    const crl_component *comp = crl_host_lookup(d->host, CRL_KIND_ENV, backend, &e);
    if (!comp) {
        const char *origin = crl_config_origin(cfg, section, "backend");
        return crl_error_set(err, e.code ? e.code : CRL_E_NOT_FOUND, "%s: [%s] backend = '%s': %s", origin, section,
                             backend, e.message);
    }
    d->backend = g_strdup(comp->name);
    const char *owner = crl_host_component_owner(d->host, CRL_KIND_ENV, comp->name);
    d->plugin = g_strdup(owner ? owner : "?");
    const crl_option *table = comp->options ? comp->options : no_options;
    const crl_option *tables[2] = { env_options, table };
    int rc = take_ops(d, comp, err);
    if (!rc)
        rc = crl__config_check_keys(cfg, section, tables, 2, err);
    if (!rc) {
        crl_error_clear(&e);
        if (!(d->opts = crl_config_opts(cfg, section, tables, 2, &e)))
            rc = crl_error_pass(err, &e, CRL_E_RUNTIME);
    }
    if (!rc)
        rc = read_env_options(d, err);
    if (!rc) {
        const char *id = crl_config_get(cfg, section, "id");
        /* Backends with DOMAIN/TASK ids (dm_control) also take them as two keys. */
        const char *domain = crl_config_get(cfg, section, "domain");
        const char *task = crl_config_get(cfg, section, "task");
        const char *per_env_id = crl_config_get(cfg, section, "per_env.id");
        if ((!id || !*id) && domain && *domain && task && *task)
            d->id = g_strdup_printf("%s/%s", domain, task);
        else if ((!id || !*id) && per_env_id && *per_env_id)
            d->id = g_strdup(""); /* read_per_env names the ids */
        else if (!id || !*id)
            rc = crl_error_set(err, CRL_E_CONFIG, "[%s] id is required but not set; add 'id = NAME' under [%s] "
                               "(list the ids with 'crl envs %s')", section, section, d->backend);
        else
            d->id = g_strdup(id);
    }
    if (!rc && *d->id)
        rc = check_id(d, cfg, err);
    if (!rc)
        rc = read_transforms(d, cfg, "transforms", &d->tf, &d->ntf, &d->tf_at, err);
    if (!rc)
        rc = read_transforms(d, cfg, "worker_transforms", &d->wtf, &d->nwtf, &d->wtf_at, err);
    if (!rc)
        rc = read_exec_options(d, err);
    if (!rc)
        rc = read_per_env(d, table, err);
    return rc;
}

crl_env_desc *crl_env_desc_from_config(crl_host *host, const crl_config *cfg, const char *section, crl_error *err)
{
    if (!host || !cfg || !section) {
        crl_error_set(err, CRL_E_INVALID, "crl_env_desc_from_config: %s is NULL",
                      !host ? "host" : !cfg ? "config" : "section");
        return NULL;
    }
    crl_env_desc *d = g_new0(crl_env_desc, 1);
    d->host = host;
    d->section = g_strdup(section);
    if (parse(d, cfg, err)) {
        crl_env_desc_free(d);
        return NULL;
    }
    return d;
}

crl_env_desc *crl__env_desc_inner(const crl_env_desc *d, int64_t start, int64_t count, crl_error *err)
{
    crl_env_desc *in = g_new0(crl_env_desc, 1);
    in->host = d->host;
    in->section = g_strdup(d->section);
    in->backend = g_strdup(d->backend);
    in->plugin = g_strdup(d->plugin);
    in->id = g_strdup(crl__env_desc_id_at(d, start));
    in->ops = d->ops;
    in->num = count;
    in->batch_ndim = 1;
    in->frame_skip = 1;
    in->from_pixels = d->from_pixels;
    in->pixels_only = d->pixels_only;
    /* The outer env reads its state through the inner env's outputs, and hides it there unless asked. */
    in->return_state = true;
    in->project_actions = d->project_actions;
    /* The outer env steps an ended env once more before it resets it (exec_wenv.c). */
    in->autoreset = CRL_AUTORESET_NEXT_STEP;
    in->max_steps = d->max_steps;
    in->xo.kind = CRL__EXEC_INLINE;
    in->opts = crl__opts_copy(d->env_opts ? d->env_opts[start] : d->opts, err);
    int rc = in->opts ? CRL_OK : CRL_E_NOMEM;
    if (!rc && d->nwtf) {
        in->tf = g_new0(crl__tf_desc, d->nwtf);
        in->tf_at = g_strdup(d->wtf_at);
        for (size_t i = 0; !rc && i < d->nwtf; i++)
            if (!(rc = crl__tf_desc_copy(&in->tf[i], &d->wtf[i], err)))
                in->ntf++;
    }
    if (rc) {
        crl_env_desc_free(in);
        return NULL;
    }
    return in;
}

/* ---- queries -------------------------------------------------------------------------------- */

const char *crl_env_desc_backend(const crl_env_desc *d) { return d ? d->backend : NULL; }
const char *crl_env_desc_id(const crl_env_desc *d) { return d ? d->id : NULL; }
const char *crl_env_desc_section(const crl_env_desc *d) { return d ? d->section : NULL; }
int64_t crl_env_desc_num_envs(const crl_env_desc *d) { return d ? (d->batch_ndim ? d->num : 0) : 0; }
size_t crl_env_desc_transform_count(const crl_env_desc *d) { return d ? d->ntf : 0; }

const char *crl_env_desc_transform_at(const crl_env_desc *d, size_t i)
{
    return d && i < d->ntf ? d->tf[i].name : NULL;
}
