/* Replay buffer checkpoints: a manifest (config, writer, priorities, RNG, epoch) plus the storage's own files. */
#include "replay-private.h"

#include <crl/checkpoint.h>
#include <errno.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#define MANIFEST "replay.ckpt"
#define STORAGE_DIR "storage"
#define KIND "crl.replay"
#define KIND_VERSION 1

/* "state" section: little-endian 64-bit words */
enum { ST_WRITE_COUNT, ST_NFILLED, ST_HIGH, ST_BETA_COUNT, ST_BETA0, ST_MAX_PRIORITY, ST_EPOCH_OVER, ST_WORDS };

static uint64_t f2u(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static double u2f(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    memcpy(p, &v, 8);
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return GUINT64_FROM_LE(v);
}

/* The configuration a checkpoint must agree with, as "key=value\n" lines. */
static char *config_text(const crl_replay *rb)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "storage=%s\ncapacity=%" PRId64 "\nsampler=%s\nwriter=%s\n", rb->storage_name,
                           rb->capacity, crl__replay_sampler_name(rb->sampler), crl__replay_writer_name(rb->writer));
    if (rb->sampler == CRL__SAMPLER_PRIO)
        g_string_append_printf(s, "alpha=%.17g\neps=%.17g\n", rb->alpha, rb->eps);
    if (rb->writer == CRL__WRITER_MAX_VALUE)
        g_string_append_printf(s, "rank_key=%s\n", rb->rank_key);
    return g_string_free(s, FALSE);
}

static int write_f64_array(crl_ckpt_writer *w, const char *name, const double *v, size_t n, crl_error *err)
{
    uint8_t *buf = g_try_malloc(n ? n * 8 : 1);
    if (!buf)
        return crl_error_set(err, CRL_E_NOMEM, "replay dump: out of memory for section %s", name);
    for (size_t i = 0; i < n; i++)
        put_u64(buf + 8 * i, f2u(v[i]));
    int rc = crl_ckpt_write(w, name, buf, n * 8, err);
    g_free(buf);
    return rc;
}

static int write_manifest(crl_replay *rb, const char *path, crl_error *err)
{
    size_t cap = (size_t)rb->capacity;
    crl_error e;
    crl_error_clear(&e);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, KIND, KIND_VERSION, &e);
    if (!w)
        return crl_error_pass(err, &e, CRL_E_IO);
    char *cfg = config_text(rb);
    int rc = crl_ckpt_write(w, "config", cfg, strlen(cfg), err);
    g_free(cfg);
    if (!rc) {
        uint8_t st[ST_WORDS * 8];
        put_u64(st + 8 * ST_WRITE_COUNT, rb->write_count);
        put_u64(st + 8 * ST_NFILLED, rb->nfilled);
        put_u64(st + 8 * ST_HIGH, (uint64_t)rb->high);
        put_u64(st + 8 * ST_BETA_COUNT, rb->beta_count);
        put_u64(st + 8 * ST_BETA0, f2u(rb->beta0));
        put_u64(st + 8 * ST_MAX_PRIORITY, f2u(rb->prio ? crl__sampler_prio_max_priority(rb->prio) : 1.0));
        put_u64(st + 8 * ST_EPOCH_OVER, rb->epoch_over);
        rc = crl_ckpt_write(w, "state", st, sizeof st, err);
    }
    if (!rc) {
        uint8_t r[48];
        const uint32_t words[12] = { rb->rng.key[0], rb->rng.key[1], rb->rng.ctr[0], rb->rng.ctr[1],
                                     rb->rng.ctr[2], rb->rng.ctr[3], rb->rng.out[0], rb->rng.out[1],
                                     rb->rng.out[2], rb->rng.out[3], rb->rng.idx,    rb->rng.reserved };
        for (int i = 0; i < 12; i++) {
            uint32_t v = GUINT32_TO_LE(words[i]);
            memcpy(r + 4 * i, &v, 4);
        }
        rc = crl_ckpt_write(w, "rng", r, sizeof r, err);
    }
    if (!rc)
        rc = crl_ckpt_write(w, "filled", rb->filled, cap, err);
    if (!rc && rb->prio) {
        double *leaves = g_try_new0(double, cap);
        if (!leaves)
            rc = crl_error_set(err, CRL_E_NOMEM, "replay dump: out of memory for the priorities");
        for (size_t i = 0; leaves && i < cap; i++)
            if (rb->filled[i])
                crl__sumtree_get(crl__sampler_prio_tree(rb->prio), i, &leaves[i], NULL);
        if (!rc)
            rc = write_f64_array(w, "priorities", leaves, cap, err);
        g_free(leaves);
    }
    if (!rc && rb->norepl) {
        bool have;
        size_t len, pos;
        const int64_t *perm;
        crl__sampler_norepl_state(rb->norepl, &have, &len, &pos, &perm);
        uint8_t *buf = g_try_malloc(24 + 8 * len);
        if (!buf) {
            rc = crl_error_set(err, CRL_E_NOMEM, "replay dump: out of memory for the epoch");
        } else {
            put_u64(buf, have);
            put_u64(buf + 8, len);
            put_u64(buf + 16, pos);
            for (size_t i = 0; i < len; i++)
                put_u64(buf + 24 + 8 * i, (uint64_t)perm[i]);
            rc = crl_ckpt_write(w, "epoch", buf, 24 + 8 * len, err);
            g_free(buf);
        }
    }
    if (!rc && rb->writer == CRL__WRITER_MAX_VALUE) {
        double *ranks = g_try_new0(double, cap);
        if (!ranks)
            rc = crl_error_set(err, CRL_E_NOMEM, "replay dump: out of memory for the ranks");
        for (size_t i = 0; ranks && i < cap; i++)
            if (rb->filled[i])
                ranks[i] = rb->maxh.rank[i];
        if (!rc)
            rc = write_f64_array(w, "ranks", ranks, cap, err);
        g_free(ranks);
    }
    if (rc) {
        crl_ckpt_writer_abort(w);
        return rc;
    }
    return crl_ckpt_writer_close(w, err);
}

int crl_replay_dump(crl_replay *rb, const char *dir, crl_error *err)
{
    if (!rb || !dir)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_dump: %s is NULL", !rb ? "buffer" : "dir");
    if (!rb->ops.dump)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "replay dump: storage '%s' cannot be checkpointed (no dump)",
                             rb->storage_name);
    crl_error e;
    crl_error_clear(&e);
    char *tmp = crl_ckpt_dir_begin(dir, &e);
    if (!tmp)
        return crl_error_pass(err, &e, CRL_E_IO);
    char *manifest = g_build_filename(tmp, MANIFEST, NULL);
    char *sdir = g_build_filename(tmp, STORAGE_DIR, NULL);
    int rc = write_manifest(rb, manifest, err);
    if (!rc && g_mkdir(sdir, 0755) != 0)
        rc = crl_error_set(err, CRL_E_IO, "replay dump: cannot create %s: %s", sdir, g_strerror(errno));
    if (!rc && (rc = rb->ops.dump(rb->st, sdir, err)))
        crl_error_prefix(err, "replay dump: storage '%s': ", rb->storage_name);
    if (!rc)
        rc = crl_ckpt_dir_commit(tmp, dir, err);
    else
        crl_ckpt_dir_abort(tmp);
    g_free(manifest);
    g_free(sdir);
    crl_free(tmp);
    return rc;
}

/* ---- load ------------------------------------------------------------------------ */

/* What the manifest says, validated against the buffer's configuration. */
typedef struct {
    uint64_t st[ST_WORDS];
    crl_rng rng;
    const uint8_t *filled;
    const uint8_t *prio;     /* cap little-endian doubles */
    const uint8_t *ranks;
    bool have_epoch;
    size_t epoch_len, epoch_pos;
    int64_t *perm;
} manifest;

static int section_exact(const crl_ckpt_reader *r, const char *name, size_t want, const void **out, crl_error *err)
{
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    const void *p = crl_ckpt_section(r, name, &len, &e);
    if (!p)
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (len != want)
        return crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s' holds %zu bytes; expected %zu", crl_ckpt_path(r),
                             name, len, want);
    *out = p;
    return CRL_OK;
}

static int check_config(const crl_replay *rb, const crl_ckpt_reader *r, crl_error *err)
{
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    const char *p = crl_ckpt_section(r, "config", &len, &e);
    if (!p)
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    char *mine = config_text(rb);
    char *theirs = g_strndup(p, len);
    char **a = g_strsplit(mine, "\n", -1), **b = g_strsplit(theirs, "\n", -1);
    int rc = CRL_OK;
    for (size_t i = 0; a[i] && !rc; i++) {
        if (!*a[i])
            continue;
        const char *eq = strchr(a[i], '=');
        size_t klen = (size_t)(eq - a[i]);
        const char *other = NULL;
        for (size_t j = 0; b[j] && !other; j++)
            if (!strncmp(b[j], a[i], klen + 1))
                other = b[j] + klen + 1;
        if (!other || strcmp(other, eq + 1))
            rc = crl_error_set(err, CRL_E_CONFIG,
                               "replay load: %s: the checkpoint has %.*s = %s but this buffer has %s; configure "
                               "[%s] as it was when the checkpoint was written",
                               crl_ckpt_path(r), (int)klen, a[i], other ? other : "(none)", eq + 1, rb->section);
    }
    g_strfreev(a);
    g_strfreev(b);
    g_free(mine);
    g_free(theirs);
    return rc;
}

static int read_manifest(const crl_replay *rb, const crl_ckpt_reader *r, manifest *m, crl_error *err)
{
    size_t cap = (size_t)rb->capacity;
    const char *path = crl_ckpt_path(r);
    const void *p;
    int rc = check_config(rb, r, err);
    if (!rc && !(rc = section_exact(r, "state", ST_WORDS * 8, &p, err)))
        for (int i = 0; i < ST_WORDS; i++)
            m->st[i] = get_u64((const uint8_t *)p + 8 * i);
    if (rc)
        return rc;
    if (m->st[ST_NFILLED] > cap || m->st[ST_HIGH] > cap || m->st[ST_WRITE_COUNT] < m->st[ST_HIGH] ||
        m->st[ST_EPOCH_OVER] > 1 || !isfinite(u2f(m->st[ST_BETA0])) || u2f(m->st[ST_BETA0]) < 0)
        return crl_error_set(err, CRL_E_CORRUPT,
                             "%s: section 'state': %" PRIu64 " items up to slot %" PRIu64 " after %" PRIu64
                             " writes (beta %g) does not fit capacity %zu",
                             path, m->st[ST_NFILLED], m->st[ST_HIGH], m->st[ST_WRITE_COUNT], u2f(m->st[ST_BETA0]), cap);
    if ((rc = section_exact(r, "rng", 48, &p, err)))
        return rc;
    uint32_t wv[12];
    for (int i = 0; i < 12; i++) {
        memcpy(&wv[i], (const uint8_t *)p + 4 * i, 4);
        wv[i] = GUINT32_FROM_LE(wv[i]);
    }
    if (wv[10] > 4)
        return crl_error_set(err, CRL_E_CORRUPT, "%s: section 'rng': word index %u is past the block of 4", path,
                             wv[10]);
    m->rng.key[0] = wv[0];
    m->rng.key[1] = wv[1];
    for (int i = 0; i < 4; i++) {
        m->rng.ctr[i] = wv[2 + i];
        m->rng.out[i] = wv[6 + i];
    }
    m->rng.idx = wv[10];
    m->rng.reserved = wv[11];
    if ((rc = section_exact(r, "filled", cap, &p, err)))
        return rc;
    m->filled = p;
    uint64_t count = 0, high = 0;
    for (size_t i = 0; i < cap; i++) {
        if (m->filled[i] > 1)
            return crl_error_set(err, CRL_E_CORRUPT, "%s: section 'filled': byte %zu is %u, not 0 or 1", path, i,
                                 m->filled[i]);
        if (m->filled[i]) {
            count++;
            high = i + 1;
        }
    }
    if (count != m->st[ST_NFILLED] || high != m->st[ST_HIGH])
        return crl_error_set(err, CRL_E_CORRUPT,
                             "%s: section 'filled' marks %" PRIu64 " slots up to %" PRIu64 " but 'state' says %" PRIu64
                             " up to %" PRIu64,
                             path, count, high, m->st[ST_NFILLED], m->st[ST_HIGH]);
    if (rb->prio) {
        if ((rc = section_exact(r, "priorities", cap * 8, &p, err)))
            return rc;
        m->prio = p;
        double mp = u2f(m->st[ST_MAX_PRIORITY]);
        if (!isfinite(mp) || !(mp > 0))
            return crl_error_set(err, CRL_E_CORRUPT, "%s: section 'state': max priority %g is not finite and > 0",
                                 path, mp);
        /* A stored item's tree value is (p + eps)^alpha with p >= 0: never
         * below eps^alpha (kept a hair lower for pow's rounding). */
        double floor_v = pow(rb->eps, rb->alpha) * (1.0 - 1e-9);
        for (size_t i = 0; i < cap; i++) {
            double v = u2f(get_u64(m->prio + 8 * i));
            if (!isfinite(v) || v < 0 || (!m->filled[i] && v != 0))
                return crl_error_set(err, CRL_E_CORRUPT,
                                     "%s: section 'priorities': offset %zu: priority %g of slot %zu is %s", path,
                                     8 * i, v, i, m->filled[i] ? "not a finite number >= 0" : "set on an empty slot");
            if (m->filled[i] && v < floor_v)
                return crl_error_set(err, CRL_E_CORRUPT,
                                     "%s: section 'priorities': offset %zu: priority %g of slot %zu is below "
                                     "eps^alpha = %g, which no stored item can have", path, 8 * i, v, i,
                                     pow(rb->eps, rb->alpha));
        }
    }
    if (rb->norepl) {
        size_t len;
        crl_error se;
        crl_error_clear(&se);
        const uint8_t *e = crl_ckpt_section(r, "epoch", &len, &se);
        if (!e)
            return crl_error_pass(err, &se, CRL_E_CORRUPT);
        if (len < 24)
            return crl_error_set(err, CRL_E_CORRUPT, "%s: section 'epoch' holds %zu bytes; at least 24 expected", path,
                                 len);
        uint64_t have = get_u64(e), elen = get_u64(e + 8), epos = get_u64(e + 16);
        if (have > 1 || elen > cap || epos > elen || len != 24 + 8 * elen)
            return crl_error_set(err, CRL_E_CORRUPT,
                                 "%s: section 'epoch': epoch of %" PRIu64 " items at %" PRIu64 " in %zu bytes does "
                                 "not fit capacity %zu",
                                 path, elen, epos, len, cap);
        m->have_epoch = have;
        m->epoch_len = (size_t)elen;
        m->epoch_pos = (size_t)epos;
        m->perm = g_new(int64_t, elen ? elen : 1);
        for (size_t i = 0; i < elen; i++)
            m->perm[i] = (int64_t)get_u64(e + 24 + 8 * i);
    }
    if (rb->writer == CRL__WRITER_MAX_VALUE) {
        if ((rc = section_exact(r, "ranks", cap * 8, &p, err)))
            return rc;
        m->ranks = p;
        for (size_t i = 0; i < cap; i++)
            if (m->filled[i] && isnan(u2f(get_u64(m->ranks + 8 * i))))
                return crl_error_set(err, CRL_E_CORRUPT, "%s: section 'ranks': offset %zu: rank of slot %zu is NaN",
                                     path, 8 * i, i);
    }
    return CRL_OK;
}

/* The storage that was loaded must hold what the manifest says. */
static int check_storage(const crl_replay *rb, void *st, const manifest *m, const char *path, crl_error *err)
{
    int64_t len = rb->ops.len(st);
    if (len != (int64_t)m->st[ST_HIGH])
        return crl_error_set(err, CRL_E_CORRUPT,
                             "replay load: the storage holds %" PRId64 " slots but %s says %" PRIu64
                             "; the checkpoint's parts do not belong together",
                             len, path, m->st[ST_HIGH]);
    for (int64_t i = 0; i < len; i++) {
        bool has = !rb->ops.has || rb->ops.has(st, i);
        if (has != (m->filled[i] != 0))
            return crl_error_set(err, CRL_E_CORRUPT,
                                 "replay load: slot %" PRId64 " is %s in the storage but %s in %s", i,
                                 has ? "filled" : "empty", has ? "empty" : "filled", path);
    }
    if (rb->ops.write_count && rb->ops.write_count(st) != m->st[ST_WRITE_COUNT])
        return crl_error_set(err, CRL_E_CORRUPT,
                             "replay load: the storage counts %" PRIu64 " writes but %s says %" PRIu64,
                             rb->ops.write_count(st), path, m->st[ST_WRITE_COUNT]);
    return CRL_OK;
}

/* Build the state of `tmp` (a shallow copy of rb's configuration) over
 * storage st from the manifest. */
static int build_state(crl_replay *tmp, const manifest *m, crl_error *err)
{
    size_t cap = (size_t)tmp->capacity;
    tmp->beta0 = u2f(m->st[ST_BETA0]);
    tmp->beta_count = m->st[ST_BETA_COUNT];
    int rc = crl__replay_alloc_state(tmp, err);
    if (!rc)
        rc = crl__replay_sync_from_storage(tmp, err);
    if (rc)
        return rc;
    if (tmp->prio) {
        int64_t *slots = g_new(int64_t, tmp->nfilled ? tmp->nfilled : 1);
        double *leaves = g_new(double, tmp->nfilled ? tmp->nfilled : 1);
        size_t k = 0;
        for (size_t i = 0; i < cap; i++)
            if (m->filled[i]) {
                slots[k] = (int64_t)i;
                leaves[k++] = u2f(get_u64(m->prio + 8 * i));
            }
        rc = crl__sampler_prio_restore(tmp->prio, slots, leaves, k, u2f(m->st[ST_MAX_PRIORITY]), err);
        g_free(slots);
        g_free(leaves);
        if (!rc)
            rc = crl__sampler_prio_set_beta(tmp->prio, crl__replay_current_beta(tmp), err);
    }
    if (!rc && tmp->norepl)
        rc = crl__sampler_norepl_restore(tmp->norepl, m->have_epoch, m->epoch_len, m->epoch_pos, m->perm, err);
    if (!rc && tmp->writer == CRL__WRITER_MAX_VALUE) {
        crl__maxheap_clear(&tmp->maxh);
        for (size_t i = 0; i < cap; i++)
            if (m->filled[i])
                crl__maxheap_set(&tmp->maxh, (int64_t)i, u2f(get_u64(m->ranks + 8 * i)));
    }
    tmp->rng = m->rng;
    tmp->epoch_over = m->st[ST_EPOCH_OVER] != 0;
    return rc;
}

/* Move the state of src into rb (whose old state is freed). */
static void adopt_state(crl_replay *rb, crl_replay *src)
{
    crl__replay_free_state(rb);
    rb->filled = src->filled;
    rb->nfilled = src->nfilled;
    rb->high = src->high;
    rb->write_count = src->write_count;
    rb->next_free = src->next_free;
    rb->dense = src->dense;
    rb->dense_dirty = true;
    rb->norepl = src->norepl;
    rb->epoch_over = src->epoch_over;
    rb->prio = src->prio;
    rb->beta0 = src->beta0;
    rb->beta_count = src->beta_count;
    rb->slice = src->slice;
    rb->maxh = src->maxh;
    rb->rng = src->rng;
}

int crl_replay_load(crl_replay *rb, const char *dir, crl_error *err)
{
    if (!rb || !dir)
        return crl_error_set(err, CRL_E_INVALID, "crl_replay_load: %s is NULL", !rb ? "buffer" : "dir");
    if (!rb->ops.load)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "replay load: storage '%s' cannot load checkpoints (no load)",
                             rb->storage_name);
    char *path = g_build_filename(dir, MANIFEST, NULL);
    char *sdir = g_build_filename(dir, STORAGE_DIR, NULL);
    manifest m;
    memset(&m, 0, sizeof m);
    crl_replay tmp;
    memset(&tmp, 0, sizeof tmp);
    void *st = NULL;
    bool in_place = rb->ops.sync != NULL;   /* a durable storage owns its directory: load it in place */
    crl_error re;
    crl_error_clear(&re);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, KIND, KIND_VERSION, &re);
    int rc = r ? CRL_OK : crl_error_pass(err, &re, CRL_E_IO);
    if (!rc)
        rc = read_manifest(rb, r, &m, err);
    if (!rc && !in_place && (rc = rb->ops.open(rb->opts, rb->capacity, &st, err)))
        crl_error_prefix(err, "replay load: opening a fresh storage '%s': ", rb->storage_name);
    if (!rc) {
        void *target = in_place ? rb->st : st;
        if ((rc = rb->ops.load(target, sdir, err)))
            crl_error_prefix(err, "replay load: storage '%s': ", rb->storage_name);
        if (!rc)
            rc = check_storage(rb, target, &m, path, err);
        if (!rc) {
            tmp = *rb;
            tmp.st = target;
            tmp.filled = NULL;
            tmp.dense = NULL;
            tmp.norepl = NULL;
            tmp.prio = NULL;
            tmp.slice = NULL;
            memset(&tmp.maxh, 0, sizeof tmp.maxh);
            rc = build_state(&tmp, &m, err);
        }
        if (rc) {
            crl__replay_free_state(&tmp);
            if (in_place) {
                /* the storage may have changed under us: follow it */
                crl_error e;
                crl__replay_sync_from_storage(rb, &e);
            }
        } else {
            if (!in_place)
                rb->ops.close(rb->st);
            rb->st = target;
            st = NULL;
            adopt_state(rb, &tmp);
        }
    }
    if (st)
        rb->ops.close(st);
    crl_ckpt_reader_free(r);
    g_free(m.perm);
    g_free(path);
    g_free(sdir);
    return rc;
}
