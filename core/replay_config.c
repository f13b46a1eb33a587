/* The replay buffer's [replay] options, its state, construction from INI or key=value strings. */
#include "replay-private.h"
#include "config-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const crl_option replay_options[] = {
    /* no declared default: the schema's selector would then demand a
     * storage plugin for every config, even one without [replay] */
    { "storage", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "the storage component: list, tensor or memmap (plugins/replay; unset: list); its own options go in "
      "this section" },
    { "capacity", CRL_OPT_INT, CRL_OPT_RANGE, "1000", 1, 1099511627776.0, NULL,
      "slots in the buffer (TorchRL's max_size)" },
    { "sampler", CRL_OPT_ENUM, 0, "random", 0, 0, "random|without_replacement|prioritized|slice",
      "how batches are drawn: random (uniform with replacement), without_replacement (epochs), prioritized "
      "(P(i) ~ p_i^alpha), slice (contiguous runs of one trajectory)" },
    { "writer", CRL_OPT_ENUM, 0, "round_robin", 0, 0, "round_robin|max_value",
      "which slot an item goes to: round_robin (oldest first), max_value (keep the top capacity items by rank_key)" },
    /* the one default of the training batch size: the trainer reads it from the buffer */
    { "batch_size", CRL_OPT_INT, CRL_OPT_RANGE, "256", 0, 1073741824.0, NULL,
      "items per sampled batch (crl run's updates sample this many); 0: give it to every crl_replay_sample call" },
    { "seed", CRL_OPT_INT, 0, "0", 0, 0, NULL, "seed of the sampler's random stream" },
    { "alpha", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.6", 1e-300, 1e300, NULL,
      "prioritized: priority exponent, P(i) = p_i^alpha / sum_k p_k^alpha" },
    { "beta", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.4", 0, 1e300, NULL,
      "prioritized: importance-weight exponent, w_i = (N P(i))^-beta / max_j w_j" },
    { "beta_end", CRL_OPT_DOUBLE, CRL_OPT_RANGE, NULL, 0, 1e300, NULL,
      "prioritized: anneal beta linearly to this value over beta_steps sample calls" },
    { "beta_steps", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 1e18, NULL,
      "prioritized: sample calls over which beta reaches beta_end (0: no annealing)" },
    { "eps", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1e-8", 0, 1e300, NULL,
      "prioritized: added to every priority before the exponent" },
    { "priority_key", CRL_OPT_STRING, 0, "td_error", 0, 0, NULL,
      "prioritized: the entry crl_replay_update_td_priority reads priorities from" },
    { "drop_last", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "without_replacement: drop the short last batch of an epoch" },
    { "shuffle", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "without_replacement: a new random order every epoch (false: storage order)" },
    { "num_slices", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 1073741824.0, NULL,
      "slice: slices per batch (slice length = batch_size / num_slices); give this or slice_len" },
    { "slice_len", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 1073741824.0, NULL,
      "slice: items per slice (num_slices = batch_size / slice_len); give this or num_slices" },
    { "traj_key", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "slice: trajectories are runs of one value of this entry (e.g. episode); unset: use end_key" },
    { "end_key", CRL_OPT_STRING, 0, "next.done", 0, 0, NULL,
      "slice: without traj_key, a trajectory ends at an item where this entry is true" },
    { "strict_length", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "slice: only trajectories of at least slice_len items (false: shorter ones give short slices)" },
    { "rank_key", CRL_OPT_STRING, 0, "next.reward", 0, 0, NULL,
      "max_value: the scalar entry items are ranked by" },
    { "checkpoint", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "write the buffer's contents into crl run's checkpoints (false: pixel buffers; a resume refills it with "
      "the re-collected frames)" },
    { "transforms", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "transforms applied to every sampled batch, in order; each NAME needs a [transform.NAME] section" },
    CRL_OPTIONS_END
};

static const crl_option no_options[] = { CRL_OPTIONS_END };

static const char *const sampler_names[] = { "random", "without_replacement", "prioritized", "slice" };
static const char *const writer_names[] = { "round_robin", "max_value" };

const crl_option *crl_replay_options(void)
{
    return replay_options;
}

const char *crl__replay_sampler_name(int kind)
{
    return kind >= 0 && kind < 4 ? sampler_names[kind] : "?";
}

const char *crl__replay_writer_name(int kind)
{
    return kind >= 0 && kind < 2 ? writer_names[kind] : "?";
}

/* ---- state ------------------------------------------------------------------- */

void crl__replay_free_state(crl_replay *rb)
{
    g_free(rb->filled);
    rb->filled = NULL;
    g_free(rb->dense);
    rb->dense = NULL;
    crl__sampler_norepl_free(rb->norepl);
    rb->norepl = NULL;
    crl__sampler_prio_free(rb->prio);
    rb->prio = NULL;
    crl__slice_free(rb->slice);
    rb->slice = NULL;
    crl__maxheap_fini(&rb->maxh);
}

int crl__replay_alloc_state(crl_replay *rb, crl_error *err)
{
    size_t cap = (size_t)rb->capacity;
    rb->filled = g_try_new0(uint8_t, cap);
    if (!rb->filled)
        return crl_error_set(err, CRL_E_NOMEM, "replay: out of memory for capacity %zu", cap);
    rb->nfilled = 0;
    rb->high = 0;
    rb->write_count = 0;
    rb->next_free = 0;
    rb->dense_dirty = true;
    rb->epoch_over = false;
    crl_error e;
    crl_error_clear(&e);
    if (rb->sampler == CRL__SAMPLER_NOREPL &&
        !(rb->norepl = crl__sampler_norepl_new(cap, rb->drop_last, rb->shuffle, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    if (rb->sampler == CRL__SAMPLER_PRIO &&
        !(rb->prio = crl__sampler_prio_new(cap, rb->alpha, crl__replay_current_beta(rb), rb->eps, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    if (rb->sampler == CRL__SAMPLER_SLICE && !(rb->slice = crl__slice_new(cap, rb->traj_k != NULL, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    if (rb->writer == CRL__WRITER_MAX_VALUE)
        return crl__maxheap_init(&rb->maxh, cap, err);
    return CRL_OK;
}

/* ---- construction ------------------------------------------------------------ */


static int enum_index(const char *const *names, size_t n, const char *v)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], v))
            return (int)i;
    return -1;
}

/* A key that only one sampler or writer reads, given with another. */
static int reject_foreign(const crl_opts *o, const char *section, const char *const *keys, const char *owner,
                          const char *current, crl_error *err)
{
    for (size_t i = 0; keys[i]; i++)
        if (crl_opts_is_set(o, keys[i]))
            return crl_error_set(err, CRL_E_CONFIG,
                                 "%s: [%s] %s applies to %s only, and this buffer uses %s; remove it or change "
                                 "the %s",
                                 crl_opts_origin(o, keys[i]), section, keys[i], owner, current,
                                 strstr(owner, "writer") ? "writer" : "sampler");
    return CRL_OK;
}

static int key_handle(const char *key, const char *name, const crl_opts *o, const char *section, crl_td_key **out,
                      char **copy, crl_error *err)
{
    *out = crl_td_key_new(key, NULL);
    if (!*out)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = '%s' is not a valid key (empty path component)",
                             crl_opts_origin(o, name), section, name, key);
    *copy = g_strdup(key);
    return CRL_OK;
}

static int read_options(crl_replay *rb, const crl_opts *o, crl_error *err)
{
    const char *sec = rb->section;
    const char *sampler, *writer, *s;
    int64_t cap, bs, seed, v;
    int rc;
    if ((rc = crl_opts_int(o, "capacity", &cap, err)) || (rc = crl_opts_string(o, "sampler", &sampler, err)) ||
        (rc = crl_opts_string(o, "writer", &writer, err)) || (rc = crl_opts_int(o, "batch_size", &bs, err)) ||
        (rc = crl_opts_int(o, "seed", &seed, err)) || (rc = crl_opts_bool(o, "checkpoint", &rb->checkpoint, err)))
        return rc;
    rb->capacity = cap;
    rb->batch_size = (size_t)bs;
    rb->seed = (uint64_t)seed;
    crl_rng_init(&rb->rng, rb->seed, 0);
    rb->sampler = enum_index(sampler_names, 4, sampler);
    rb->writer = enum_index(writer_names, 2, writer);
    static const char *const prio_keys[] = { "alpha", "beta", "beta_end", "beta_steps", "eps", "priority_key", NULL };
    static const char *const norepl_keys[] = { "drop_last", "shuffle", NULL };
    static const char *const slice_keys[] = { "num_slices", "slice_len", "traj_key", "end_key", "strict_length", NULL };
    static const char *const maxv_keys[] = { "rank_key", NULL };
    if ((rb->sampler != CRL__SAMPLER_PRIO &&
         reject_foreign(o, sec, prio_keys, "sampler = prioritized", sampler, err)) ||
        (rb->sampler != CRL__SAMPLER_NOREPL &&
         reject_foreign(o, sec, norepl_keys, "sampler = without_replacement", sampler, err)) ||
        (rb->sampler != CRL__SAMPLER_SLICE && reject_foreign(o, sec, slice_keys, "sampler = slice", sampler, err)) ||
        (rb->writer != CRL__WRITER_MAX_VALUE &&
         reject_foreign(o, sec, maxv_keys, "writer = max_value", writer, err)))
        return CRL_E_CONFIG;
    rb->beta_end = NAN;
    if (rb->sampler == CRL__SAMPLER_PRIO) {
        if ((rc = crl_opts_double(o, "alpha", &rb->alpha, err)) || (rc = crl_opts_double(o, "beta", &rb->beta0, err)) ||
            (rc = crl_opts_double(o, "eps", &rb->eps, err)) ||
            (rc = crl_opts_int(o, "beta_steps", &rb->beta_steps, err)) ||
            (rc = crl_opts_string(o, "priority_key", &s, err)))
            return rc;
        if (crl_opts_is_set(o, "beta_end") && (rc = crl_opts_double(o, "beta_end", &rb->beta_end, err)))
            return rc;
        if (isnan(rb->beta_end) != (rb->beta_steps == 0))
            return crl_error_set(err, CRL_E_CONFIG,
                                 "[%s] beta annealing needs both beta_end and beta_steps > 0 (%s); give both or "
                                 "neither",
                                 sec, isnan(rb->beta_end) ? "beta_steps is set, beta_end is not"
                                                          : "beta_end is set, beta_steps is 0");
        rb->priority_key = g_strdup(s);
    }
    if (rb->sampler == CRL__SAMPLER_NOREPL && ((rc = crl_opts_bool(o, "drop_last", &rb->drop_last, err)) ||
                                               (rc = crl_opts_bool(o, "shuffle", &rb->shuffle, err))))
        return rc;
    if (rb->sampler == CRL__SAMPLER_SLICE) {
        bool has_n = crl_opts_is_set(o, "num_slices"), has_l = crl_opts_is_set(o, "slice_len");
        if (has_n == has_l)
            return crl_error_set(err, CRL_E_CONFIG,
                                 has_n ? "%s: [%s] sampler = slice takes num_slices or slice_len, not both; remove "
                                         "one"
                                       : "%s: [%s] sampler = slice needs num_slices or slice_len (exactly one); add "
                                         "e.g. 'slice_len = 8'",
                                 has_n ? crl_opts_origin(o, "slice_len") : crl_opts_origin(o, "sampler"), sec);
        if ((rc = crl_opts_int(o, has_n ? "num_slices" : "slice_len", &v, err)) ||
            (rc = crl_opts_bool(o, "strict_length", &rb->strict_length, err)))
            return rc;
        if (has_n)
            rb->num_slices = (size_t)v;
        else
            rb->slice_len = (size_t)v;
        if (rb->batch_size && rb->batch_size % (size_t)v)
            return crl_error_set(err, CRL_E_CONFIG,
                                 "%s: [%s] batch_size = %zu%s is not a multiple of %s = %" PRId64
                                 "; make it one (TorchRL's SliceSampler requires it)",
                                 crl_opts_origin(o, has_n ? "num_slices" : "slice_len"), sec, rb->batch_size,
                                 crl_opts_is_set(o, "batch_size") ? "" : " (the default)",
                                 has_n ? "num_slices" : "slice_len", v);
        if (rb->writer != CRL__WRITER_ROUND_ROBIN)
            return crl_error_set(err, CRL_E_CONFIG,
                                 "%s: [%s] sampler = slice needs writer = round_robin (trajectories are runs in "
                                 "write order; max_value keeps no order)",
                                 crl_opts_origin(o, "writer"), sec);
        if (crl_opts_is_set(o, "traj_key")) {
            if (crl_opts_is_set(o, "end_key"))
                return crl_error_set(err, CRL_E_CONFIG,
                                     "%s: [%s] give traj_key or end_key, not both (trajectories are found by one)",
                                     crl_opts_origin(o, "end_key"), sec);
            if ((rc = crl_opts_string(o, "traj_key", &s, err)) ||
                (rc = key_handle(s, "traj_key", o, sec, &rb->traj_k, &rb->traj_key, err)))
                return rc;
        } else if ((rc = crl_opts_string(o, "end_key", &s, err)) ||
                   (rc = key_handle(s, "end_key", o, sec, &rb->end_k, &rb->end_key, err))) {
            return rc;
        }
    }
    if (rb->writer == CRL__WRITER_MAX_VALUE && ((rc = crl_opts_string(o, "rank_key", &s, err)) ||
                                                (rc = key_handle(s, "rank_key", o, sec, &rb->rank_k, &rb->rank_key,
                                                                 err))))
        return rc;
    return CRL_OK;
}

static int open_storage(crl_replay *rb, const crl_component *comp, crl_error *err)
{
    const crl_storage_ops *ops = comp->ops;
    if (!ops || ops->struct_size < offsetof(crl_storage_ops, open) + sizeof ops->open)
        return crl_error_set(err, CRL_E_PLUGIN, "replay: storage '%s' has no ops table", rb->storage_name);
    size_t n = ops->struct_size < sizeof rb->ops ? ops->struct_size : sizeof rb->ops;
    memset(&rb->ops, 0, sizeof rb->ops);
    memcpy(&rb->ops, ops, n);
    if (!rb->ops.open || !rb->ops.set || !rb->ops.get || !rb->ops.len || !rb->ops.close)
        return crl_error_set(err, CRL_E_PLUGIN,
                             "replay: storage '%s' (plugin '%s') lacks %s; it cannot serve as a storage",
                             rb->storage_name, crl_host_component_owner(rb->host, CRL_KIND_STORAGE, rb->storage_name),
                             !rb->ops.open ? "open" : !rb->ops.set ? "set" : !rb->ops.get ? "get"
                                                    : !rb->ops.len ? "len" : "close");
    void *st = NULL;
    int rc = rb->ops.open(rb->opts, rb->capacity, &st, err);
    if (rc || !st) {
        if (!rc)
            rc = crl_error_set(err, CRL_E_PLUGIN, "storage '%s' open returned no storage", rb->storage_name);
        crl_error_prefix(err, "[%s] storage = %s: ", rb->section, rb->storage_name);
        return rc;
    }
    rb->st = st;
    return CRL_OK;
}

static int build_transforms(crl_replay *rb, const crl_config *cfg, crl_error *err)
{
    size_t n;
    const char *const *names;
    int lrc = crl_opts_list(rb->opts, "transforms", &n, &names, err);
    if (lrc)
        return lrc;
    for (size_t i = 0; i < n; i++) {
        char *sec = g_strconcat("transform.", names[i], NULL);
        if (!crl_config_has_section(cfg, sec)) {
            int rc = crl_error_set(err, CRL_E_CONFIG,
                                   "%s: [%s] transforms names '%s' but there is no [%s] section; add one with "
                                   "'type = ...' (from code, use crl_replay_append_transform)",
                                   crl_opts_origin(rb->opts, "transforms"), rb->section, names[i], sec);
            g_free(sec);
            return rc;
        }
        crl_error e;
        crl_error_clear(&e);
        crl_transform *t = crl_transform_from_config(rb->host, cfg, sec, &e);
        g_free(sec);
        if (!t)
            return crl_error_pass(err, &e, CRL_E_CONFIG);
        g_ptr_array_add(rb->transforms, t);
    }
    return CRL_OK;
}

/* The buffer's configuration: options, sampler and writer settings,
 * transforms; no state and no storage yet.  *comp receives the storage
 * component. */
static crl_replay *configure(crl_host *host, const crl_config *cfg, const char *section,
                             const crl_component **comp_out, crl_error *err)
{
    const char *storage = crl_config_get(cfg, section, "storage");
    if (!storage)
        storage = "list";
    crl_error e;
    crl_error_clear(&e);
    const crl_component *comp = crl_host_lookup(host, CRL_KIND_STORAGE, storage, &e);
    if (!comp) {
        const char *origin = crl_config_origin(cfg, section, "storage");
        crl_error_set(err, e.code ? e.code : CRL_E_NOT_FOUND, "%s: [%s] storage = '%s': %s",
                      origin ? origin : "default", section, storage, e.message);
        return NULL;
    }
    crl_replay *rb = g_new0(crl_replay, 1);
    rb->host = host;
    rb->section = g_strdup(section);
    rb->storage_name = g_strdup(comp->name);
    rb->transforms = g_ptr_array_new_with_free_func((GDestroyNotify)crl_transform_free);
    const crl_option *tables[2] = { replay_options, comp->options ? comp->options : no_options };
    int rc = crl__config_check_keys(cfg, section, tables, 2, err);
    if (!rc && !(rb->opts = crl_config_opts(cfg, section, tables, 2, &e)))
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    if (!rc)
        rc = read_options(rb, rb->opts, err);
    if (!rc)
        rc = build_transforms(rb, cfg, err);
    if (rc) {
        crl_replay_free(rb);
        return NULL;
    }
    *comp_out = comp;
    return rb;
}

crl_replay *crl__replay_configure(crl_host *host, const crl_config *cfg, const char *section, crl_error *err)
{
    const crl_component *comp;
    return configure(host, cfg, section, &comp, err);
}

crl_replay *crl_replay_from_config(crl_host *host, const crl_config *cfg, const char *section, crl_error *err)
{
    if (!host || !cfg || !section) {
        crl_error_set(err, CRL_E_INVALID, "crl_replay_from_config: %s is NULL",
                      !host ? "host" : !cfg ? "config" : "section");
        return NULL;
    }
    const crl_component *comp = NULL;
    crl_replay *rb = configure(host, cfg, section, &comp, err);
    if (!rb)
        return NULL;
    int rc = crl__replay_alloc_state(rb, err);
    if (!rc)
        rc = open_storage(rb, comp, err);
    if (!rc && (rc = crl__replay_sync_from_storage(rb, err)))
        crl_error_prefix(err, "[%s] resuming storage '%s': ", section, rb->storage_name);
    if (rc) {
        crl_replay_free(rb);
        return NULL;
    }
    return rb;
}

crl_replay *crl_replay_new(crl_host *host, const char *const *kv, crl_error *err)
{
    crl_config *cfg = crl_config_new(err);
    if (!cfg)
        return NULL;
    crl__section *sec = crl__config_ensure_section(cfg, "replay", "arguments");
    for (size_t i = 0; kv && kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        char origin[32];
        g_snprintf(origin, sizeof origin, "argument %zu", i + 1);
        if (!eq || eq == kv[i]) {
            crl_error_set(err, CRL_E_CONFIG, "%s: '%s' is not key=value; write e.g. 'capacity=1000'", origin, kv[i]);
            crl_config_free(cfg);
            return NULL;
        }
        char *key = g_strstrip(g_strndup(kv[i], (size_t)(eq - kv[i])));
        char *value = g_strstrip(g_strdup(eq + 1));
        if (crl__section_entry(sec, key)) {
            crl_error_set(err, CRL_E_CONFIG, "%s: key '%s' given twice; give it once", origin, key);
            g_free(key);
            g_free(value);
            crl_config_free(cfg);
            return NULL;
        }
        crl__section_add(sec, key, value, origin, CRL_LAYER_OVERRIDE);
        g_free(key);
        g_free(value);
    }
    crl_replay *rb = crl_replay_from_config(host, cfg, "replay", err);
    crl_config_free(cfg);
    return rb;
}

void crl_replay_free(crl_replay *rb)
{
    if (!rb)
        return;
    if (rb->st)
        rb->ops.close(rb->st);
    crl__replay_free_state(rb);
    if (rb->transforms)
        g_ptr_array_free(rb->transforms, TRUE);
    crl_opts_free(rb->opts);
    crl_td_key_free(rb->traj_k);
    crl_td_key_free(rb->end_k);
    crl_td_key_free(rb->rank_k);
    g_free(rb->traj_key);
    g_free(rb->end_key);
    g_free(rb->rank_key);
    g_free(rb->priority_key);
    g_free(rb->scratch_idx);
    g_free(rb->scratch_w);
    g_free(rb->scratch_trunc);
    g_free(rb->section);
    g_free(rb->storage_name);
    g_free(rb);
}
