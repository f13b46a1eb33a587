/* Check suite for the replay buffer: samplers, writers, [replay] config, checkpoints, over an in-test storage. */
#include <check.h>
#include <crl/checkpoint.h>
#include <crl/replay.h>
#include <crl/rnn.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-schema.h"

/* Upper 0.1% points of the chi-square distribution (scipy.stats.chi2.ppf(0.999, df)). */
#define CHI2_999_DF99 148.2304
#define CHI2_999_DF4 18.4668
#define CHI2_999_DF16 39.2524

#define EXPECT_OK(call, e) ck_assert_msg((call) == CRL_OK, "%s: %s", #call, (e).message)

/* ---- the fixture storage: per-slot TensorDict clones ---------------------------
 * Component "fix" (memory) and "fixdur" (declares sync, so the buffer treats
 * it as durable).  Options: preload = N items written at open (obs = slot,
 * episode = slot / 5) except the slots listed in holes (a crash's gaps);
 * fail_at = the write number at which set fails (after writing the items
 * before it), -1 never. */
typedef struct {
    int64_t cap;
    crl_td **slot;
    uint64_t wc;
    int64_t fail_at;
} fix;

static const crl_option fix_options[] = {
    { "preload", CRL_OPT_INT, 0, "0", 0, 0, NULL, "items written at open" },
    { "holes", CRL_OPT_LIST, 0, "", 0, 0, NULL, "slots left empty by preload" },
    { "fail_at", CRL_OPT_INT, 0, "-1", 0, 0, NULL, "write number at which set fails" },
    CRL_OPTIONS_END
};

static crl_td *make_item(int64_t i, int64_t episode, bool done, crl_error *err)
{
    crl_td *td = crl_td_new(0, NULL, err);
    int64_t two = 2, one = 1;
    crl_tensor *obs = crl_tensor_new(CRL_F32, 1, &two, err);
    crl_tensor *ep = crl_tensor_new(CRL_I64, 0, NULL, err);
    crl_tensor *t = crl_tensor_new(CRL_I64, 0, NULL, err);
    crl_tensor *d = crl_tensor_new(CRL_BOOL, 1, &one, err);
    crl_tensor *r = crl_tensor_new(CRL_F32, 1, &one, err);
    ((float *)crl_tensor_data(obs))[0] = (float)i;
    ((float *)crl_tensor_data(obs))[1] = (float)-i;
    *(int64_t *)crl_tensor_data(ep) = episode;
    *(int64_t *)crl_tensor_data(t) = i;
    *(uint8_t *)crl_tensor_data(d) = done;
    *(float *)crl_tensor_data(r) = (float)i;
    crl_td_set(td, "obs", obs, err);
    crl_td_set(td, "episode", ep, err);
    crl_td_set(td, "t", t, err);
    crl_td_set(td, "next.done", d, err);
    crl_td_set(td, "next.reward", r, err);
    crl_tensor_unref(obs);
    crl_tensor_unref(ep);
    crl_tensor_unref(t);
    crl_tensor_unref(d);
    crl_tensor_unref(r);
    return td;
}

static int fix_open(const crl_opts *o, int64_t cap, void **out, crl_error *err)
{
    int64_t preload, fail_at;
    size_t nh;
    const char *const *holes;
    if (crl_opts_int(o, "preload", &preload, err) || crl_opts_int(o, "fail_at", &fail_at, err) ||
        crl_opts_list(o, "holes", &nh, &holes, err))
        return err->code;
    if (preload > cap)
        return crl_error_set(err, CRL_E_CONFIG, "fix: preload %" PRId64 " > capacity", preload);
    fix *f = g_new0(fix, 1);
    f->cap = cap;
    f->slot = g_new0(crl_td *, (size_t)cap);
    f->fail_at = fail_at;
    for (int64_t i = 0; i < preload; i++) {
        bool hole = false;
        for (size_t h = 0; h < nh; h++)
            hole |= atoll(holes[h]) == i;
        if (!hole)
            f->slot[i] = make_item(i, i / 5, i % 5 == 4, err);
    }
    f->wc = (uint64_t)preload;
    *out = f;
    return CRL_OK;
}

static int fix_set(void *st, const int64_t *idx, size_t n, const crl_td *items, crl_error *err)
{
    fix *f = st;
    for (size_t k = 0; k < n; k++) {
        if (f->fail_at >= 0 && f->wc == (uint64_t)f->fail_at)
            return crl_error_set(err, CRL_E_IO, "fix: injected failure at write %" PRIu64, f->wc);
        crl_td *v = crl_td_index((crl_td *)items, 0, (int64_t)k, err);
        crl_td *c = crl_td_clone(v, err);
        crl_td_unref(v);
        crl_td_unref(f->slot[idx[k]]);
        f->slot[idx[k]] = c;
        f->wc++;
    }
    return CRL_OK;
}

static crl_td *fix_get(void *st, const int64_t *idx, size_t n, crl_error *err)
{
    fix *f = st;
    crl_td **v = g_new(crl_td *, n ? n : 1);
    for (size_t k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= f->cap || !f->slot[idx[k]]) {
            g_free(v);
            crl_error_set(err, CRL_E_RANGE, "fix: slot %" PRId64 " is empty", idx[k]);
            return NULL;
        }
        v[k] = f->slot[idx[k]];
    }
    crl_td *r = crl_td_stack(v, n, 0, err);
    g_free(v);
    return r;
}

static int64_t fix_len(void *st)
{
    fix *f = st;
    int64_t n = 0;
    for (int64_t i = 0; i < f->cap; i++)
        if (f->slot[i])
            n = i + 1;
    return n;
}

static bool fix_has(void *st, int64_t i)
{
    fix *f = st;
    return i >= 0 && i < f->cap && f->slot[i];
}

static uint64_t fix_wc(void *st)
{
    return ((fix *)st)->wc;
}

static int fix_sync(void *st, crl_error *err)
{
    (void)st;
    (void)err;
    return CRL_OK;
}

static int fix_clear(void *st, crl_error *err)
{
    (void)err;
    fix *f = st;
    for (int64_t i = 0; i < f->cap; i++) {
        crl_td_unref(f->slot[i]);
        f->slot[i] = NULL;
    }
    f->wc = 0;
    return CRL_OK;
}

static int fix_dump(void *st, const char *dir, crl_error *err)
{
    fix *f = st;
    char *path = g_build_filename(dir, "fix.ckpt", NULL);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "test.fix", 1, err);
    g_free(path);
    if (!w)
        return err->code;
    uint8_t *filled = g_new0(uint8_t, (size_t)f->cap);
    for (int64_t i = 0; i < f->cap; i++)
        filled[i] = f->slot[i] != NULL;
    int rc = crl_ckpt_write(w, "wc", &f->wc, 8, err);
    if (!rc)
        rc = crl_ckpt_write(w, "filled", filled, (size_t)f->cap, err);
    for (int64_t i = 0; !rc && i < f->cap; i++)
        if (f->slot[i]) {
            char name[32];
            g_snprintf(name, sizeof name, "slot%" PRId64, i);
            rc = crl_ckpt_write_td(w, name, f->slot[i], err);
        }
    g_free(filled);
    if (rc) {
        crl_ckpt_writer_abort(w);
        return rc;
    }
    return crl_ckpt_writer_close(w, err);
}

static int fix_load(void *st, const char *dir, crl_error *err)
{
    fix *f = st;
    char *path = g_build_filename(dir, "fix.ckpt", NULL);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "test.fix", 1, err);
    g_free(path);
    if (!r)
        return err->code;
    uint64_t wc;
    uint8_t *filled = g_new0(uint8_t, (size_t)f->cap);
    crl_td **slot = g_new0(crl_td *, (size_t)f->cap);
    int rc = crl_ckpt_read(r, "wc", &wc, 8, err);
    if (!rc)
        rc = crl_ckpt_read(r, "filled", filled, (size_t)f->cap, err);
    for (int64_t i = 0; !rc && i < f->cap; i++)
        if (filled[i]) {
            char name[32];
            g_snprintf(name, sizeof name, "slot%" PRId64, i);
            if (!(slot[i] = crl_ckpt_read_td(r, name, err)))
                rc = err->code;
        }
    crl_ckpt_reader_free(r);
    g_free(filled);
    if (rc) {
        for (int64_t i = 0; i < f->cap; i++)
            crl_td_unref(slot[i]);
        g_free(slot);
        return rc;
    }
    fix_clear(f, NULL);
    g_free(f->slot);
    f->slot = slot;
    f->wc = wc;
    return CRL_OK;
}

static void fix_close(void *st)
{
    fix *f = st;
    if (!f)
        return;
    fix_clear(f, NULL);
    g_free(f->slot);
    g_free(f);
}

static const crl_storage_ops fix_ops = {
    sizeof(crl_storage_ops), 0, fix_open, fix_set, fix_get, fix_len, fix_has, fix_wc, NULL, fix_clear, fix_dump,
    fix_load, fix_close
};
static const crl_storage_ops fixdur_ops = {
    sizeof(crl_storage_ops), 0, fix_open, fix_set, fix_get, fix_len, fix_has, fix_wc, fix_sync, fix_clear, fix_dump,
    fix_load, fix_close
};

static int fix_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    static const crl_component c1 = { sizeof(crl_component), CRL_KIND_STORAGE, "fix", "test storage", fix_options,
                                      &fix_ops };
    static const crl_component c2 = { sizeof(crl_component), CRL_KIND_STORAGE, "fixdur", "test storage (durable)",
                                      fix_options, &fixdur_ops };
    return crl_host_register(host, &c1, err) || crl_host_register(host, &c2, err) ? err->code : CRL_OK;
}

static const crl_plugin_desc *fix_entry(void)
{
    static const crl_plugin_desc d = { CRL_ABI_MAJOR, CRL_ABI_MINOR, "replayfix", "1.0", "MIT",
                                       "replay test storages", fix_init, NULL, NULL, { 0 } };
    return &d;
}

/* ---- helpers ----------------------------------------------------------------- */

static crl_config *cfg;
static crl_host *host;

static void setup(void)
{
    crl_error e;
    cfg = crl_config_new(&e);
    host = crl_host_new(cfg, &e);
    ck_assert_ptr_nonnull(host);
    EXPECT_OK(crl_host_load_builtin(host, fix_entry, &e), e);
}

static void teardown(void)
{
    crl_host_free(host);
    crl_config_free(cfg);
}

/* A buffer from key=value strings ending with NULL. */
static crl_replay *rb_new(const char *first, ...)
{
    const char *kv[32];
    size_t n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        kv[n++] = s;
    va_end(ap);
    kv[n] = NULL;
    crl_error e;
    crl_replay *rb = crl_replay_new(host, kv, &e);
    ck_assert_msg(rb != NULL, "crl_replay_new: %s", e.message);
    return rb;
}

static int rb_error(crl_error *e, const char *first, ...)
{
    const char *kv[32];
    size_t n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        kv[n++] = s;
    va_end(ap);
    kv[n] = NULL;
    crl_replay *rb = crl_replay_new(host, kv, e);
    ck_assert_ptr_null(rb);
    return e->code;
}

/* Items i0..i0+n-1, episodes from ep[], done at episode ends. */
static crl_td *make_batch(int64_t i0, int64_t n, const int64_t *ep, const bool *done)
{
    crl_error e;
    crl_td **v = g_new(crl_td *, (size_t)n);
    for (int64_t k = 0; k < n; k++)
        v[k] = make_item(i0 + k, ep ? ep[k] : (i0 + k) / 5, done ? done[k] : (i0 + k) % 5 == 4, &e);
    crl_td *b = crl_td_stack(v, (size_t)n, 0, &e);
    for (int64_t k = 0; k < n; k++)
        crl_td_unref(v[k]);
    g_free(v);
    ck_assert_ptr_nonnull(b);
    return b;
}

static void fill(crl_replay *rb, int64_t i0, int64_t n)
{
    crl_error e;
    crl_td *b = make_batch(i0, n, NULL, NULL);
    EXPECT_OK(crl_replay_extend(rb, b, NULL, &e), e);
    crl_td_unref(b);
}

static const int64_t *index_of(const crl_td *td, int64_t *n)
{
    crl_tensor *t = crl_td_get(td, "index");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(crl_tensor_dtype(t), CRL_I64);
    *n = crl_tensor_shape(t)[0];
    return crl_tensor_data(t);
}

static int64_t t_at(const crl_td *td, int64_t k)
{
    return ((const int64_t *)crl_tensor_data(crl_td_get(td, "t")))[k];
}

static double chi_square(const double *obs, const double *exp, size_t bins)
{
    double x = 0;
    for (size_t b = 0; b < bins; b++)
        x += (obs[b] - exp[b]) * (obs[b] - exp[b]) / exp[b];
    return x;
}

/* ---- config ------------------------------------------------------------------- */

START_TEST(test_ini_errors)
{
    crl_error e;
    ck_assert_int_eq(rb_error(&e, "storage=fix", "sampler=prioritised", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "did you mean 'prioritized'") && strstr(e.message, "argument 2"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "sampler=slice", "batch_size=8", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "needs num_slices or slice_len"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "sampler=slice", "num_slices=2", "slice_len=4", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "not both") && strstr(e.message, "argument 4"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "sampler=slice", "slice_len=3", "batch_size=8", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "not a multiple"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "capacty=10", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "did you mean 'capacity'"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "alpha=0.5", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "alpha applies to sampler = prioritized"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "sampler=prioritized", "beta_end=1", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "beta_end and beta_steps"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fxi", NULL), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "storage = 'fxi'") && strstr(e.message, "fix"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "capacity", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "argument 2"), "%s", e.message);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "capacity=0", NULL), CRL_E_CONFIG);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "sampler=slice", "slice_len=2", "writer=max_value", NULL),
                     CRL_E_CONFIG);
    ck_assert_int_eq(rb_error(&e, "storage=fix", "preload=20", "capacity=10", NULL), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "preload"), "%s", e.message);

    /* from an INI file: FILE:LINE in messages, and crl's schema knows [replay] */
    crl_schema *s = crl__cli_schema_new(host, &e);
    ck_assert_msg(s != NULL, "%s", e.message);
    const char *ini = "[replay]\nstorage = fix\ncapacity = 8\nsampler = prioritzed\n";
    crl_config *c = crl_config_new(&e);
    EXPECT_OK(crl_config_load_buffer(c, "exp.ini", ini, strlen(ini), CRL_LAYER_FILE, &e), e);
    ck_assert_ptr_null(crl_replay_from_config(host, c, "replay", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "exp.ini:4") && strstr(e.message, "did you mean 'prioritized'"), "%s", e.message);
    ck_assert_int_eq(crl_config_validate(c, s, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "exp.ini:4"), "%s", e.message);
    crl_config_free(c);
    ini = "[replay]\nstorage = fix\ncapacity = 8\npreload = 3\nsampler = prioritized\nalpha = 0.5\n";
    c = crl_config_new(&e);
    EXPECT_OK(crl_config_load_buffer(c, "ok.ini", ini, strlen(ini), CRL_LAYER_FILE, &e), e);
    EXPECT_OK(crl_config_validate(c, s, &e), e);
    crl_schema_free(s);
    crl_replay *rb = crl_replay_from_config(host, c, "replay", &e);
    ck_assert_msg(rb != NULL, "%s", e.message);
    ck_assert_uint_eq(crl_replay_len(rb), 3);
    ck_assert_int_eq(crl_replay_capacity(rb), 8);
    ck_assert_uint_eq(crl_replay_batch_size(rb), 256);  /* the table's default */
    ck_assert_uint_eq(crl_replay_batch_size(NULL), 0);
    crl_replay_free(rb);
    crl_config_free(c);
    ini = "[replay]\nstorage = fix\ntransforms = norm\n";
    c = crl_config_new(&e);
    EXPECT_OK(crl_config_load_buffer(c, "t.ini", ini, strlen(ini), CRL_LAYER_FILE, &e), e);
    ck_assert_ptr_null(crl_replay_from_config(host, c, "replay", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "t.ini:3") && strstr(e.message, "[transform.norm]"), "%s", e.message);
    crl_config_free(c);
}
END_TEST

/* ---- add, extend, get, round robin, empty ---------------------------------------- */

START_TEST(test_add_extend_round_robin)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=10", NULL);
    ck_assert_uint_eq(crl_replay_len(rb), 0);
    ck_assert_ptr_null(crl_replay_sample(rb, 4, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    crl_td *it = make_item(100, 20, false, &e);
    int64_t slot = -5;
    EXPECT_OK(crl_replay_add(rb, it, &slot, &e), e);
    ck_assert_int_eq(slot, 0);
    crl_td *got = crl_replay_get(rb, 0, &e);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(crl_td_batch_ndim(got), 0);
    ck_assert(crl_td_equal(got, it));
    crl_td_unref(got);
    crl_td_unref(it);
    /* 14 more: slots 1..9 then wrap to 0..4 */
    crl_td *b = make_batch(1, 14, NULL, NULL);
    int64_t idx[14];
    EXPECT_OK(crl_replay_extend(rb, b, idx, &e), e);
    crl_td_unref(b);
    for (int k = 0; k < 14; k++)
        ck_assert_int_eq(idx[k], (k + 1) % 10);
    ck_assert_uint_eq(crl_replay_len(rb), 10);
    for (int64_t s = 0; s < 10; s++) {
        got = crl_replay_get(rb, s, &e);
        ck_assert_int_eq(t_at(got, 0), s < 5 ? s + 10 : s);
        crl_td_unref(got);
    }
    ck_assert_ptr_null(crl_replay_get(rb, 10, &e));
    ck_assert_int_eq(e.code, CRL_E_RANGE);
    /* more than capacity at once: the last 10 stay, cursor after 25 + 1 writes */
    b = make_batch(100, 25, NULL, NULL);
    int64_t idx2[25];
    EXPECT_OK(crl_replay_extend(rb, b, idx2, &e), e);
    crl_td_unref(b);
    ck_assert_int_eq(idx2[0], 5);
    ck_assert_int_eq(idx2[24], (15 + 24) % 10);
    got = crl_replay_get(rb, idx2[24], &e);
    ck_assert_int_eq(t_at(got, 0), 124);
    crl_td_unref(got);
    /* batch shape [] is not a batch */
    it = make_item(0, 0, false, &e);
    ck_assert_int_eq(crl_replay_extend(rb, it, NULL, &e), CRL_E_SHAPE);
    crl_td_unref(it);
    EXPECT_OK(crl_replay_empty(rb, &e), e);
    ck_assert_uint_eq(crl_replay_len(rb), 0);
    ck_assert_ptr_null(crl_replay_sample(rb, 1, &e));
    fill(rb, 0, 1);
    got = crl_replay_get(rb, 0, &e);
    ck_assert_ptr_nonnull(got);
    crl_td_unref(got);
    ck_assert_uint_eq(crl_replay_len(rb), 1);
    crl_replay_free(rb);
}
END_TEST

START_TEST(test_partial_write_failure)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=10", "fail_at=5", NULL);
    crl_td *b = make_batch(0, 8, NULL, NULL);
    int64_t idx[8];
    ck_assert_int_eq(crl_replay_extend(rb, b, idx, &e), CRL_E_IO);
    ck_assert_msg(strstr(e.message, "5 of 8 items written") && strstr(e.message, "injected"), "%s", e.message);
    ck_assert_uint_eq(crl_replay_len(rb), 5);
    for (int k = 0; k < 5; k++)
        ck_assert_int_eq(idx[k], k);
    crl_td *s = crl_replay_sample(rb, 64, &e);
    int64_t n;
    const int64_t *ix = index_of(s, &n);
    for (int64_t k = 0; k < n; k++)
        ck_assert_int_lt(ix[k], 5);
    crl_td_unref(s);
    crl_td_unref(b);
    crl_replay_free(rb);
}
END_TEST

/* ---- statistics at buffer level ----------------------------------------------------- */

START_TEST(test_uniform_chi_square)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=100", "batch_size=500", "seed=3", NULL);
    fill(rb, 0, 100);
    double obs[100] = { 0 }, exp[100];
    for (int r = 0; r < 200; r++) {
        crl_td *s = crl_replay_sample(rb, 0, &e);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(crl_td_batch_shape(s)[0], 500);
        int64_t n;
        const int64_t *ix = index_of(s, &n);
        for (int64_t k = 0; k < n; k++) {
            obs[ix[k]]++;
            ck_assert_int_eq(t_at(s, k), ix[k]);   /* the gathered item is the one drawn */
        }
        crl_td_unref(s);
    }
    for (int i = 0; i < 100; i++)
        exp[i] = 1000.0;
    double x = chi_square(obs, exp, 100);
    ck_assert_msg(x < CHI2_999_DF99, "uniform chi-square %g", x);
    crl_replay_free(rb);
}
END_TEST

START_TEST(test_prioritized_probabilities_and_weights)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=5", "sampler=prioritized", "alpha=0.7", "beta=0.5", "eps=0",
                            "seed=11", NULL);
    fill(rb, 0, 5);
    int64_t idx[5] = { 0, 1, 2, 3, 4 };
    double p[5] = { 1, 2, 3, 4, 5 };
    EXPECT_OK(crl_replay_update_priority(rb, idx, p, 5, &e), e);
    double pa[5], tot = 0;
    for (int i = 0; i < 5; i++)
        tot += pa[i] = pow(p[i], 0.7);
    double obs[5] = { 0 }, exp[5];
    const int draws = 100000;
    for (int r = 0; r < draws / 1000; r++) {
        crl_td *s = crl_replay_sample(rb, 1000, &e);
        ck_assert_ptr_nonnull(s);
        int64_t n;
        const int64_t *ix = index_of(s, &n);
        crl_tensor *w = crl_td_get(s, "_weight");
        ck_assert_ptr_nonnull(w);
        ck_assert_int_eq(crl_tensor_dtype(w), CRL_F32);
        for (int64_t k = 0; k < n; k++) {
            obs[ix[k]]++;
            /* (N P(i))^-beta / max_j (N P(j))^-beta, the max at the smallest priority */
            double want = pow(5 * pa[ix[k]] / tot, -0.5) / pow(5 * pa[0] / tot, -0.5);
            ck_assert_msg(fabs(((float *)crl_tensor_data(w))[k] - want) < 1e-5, "weight %g vs %g",
                          ((float *)crl_tensor_data(w))[k], want);
        }
        crl_td_unref(s);
    }
    for (int i = 0; i < 5; i++)
        exp[i] = draws * pa[i] / tot;
    double x = chi_square(obs, exp, 5);
    ck_assert_msg(x < CHI2_999_DF4, "prioritized chi-square %g", x);
    /* errors change nothing */
    int64_t bad[2] = { 1, 7 };
    double bp[2] = { 100, 1 };
    ck_assert_int_eq(crl_replay_update_priority(rb, bad, bp, 2, &e), CRL_E_RANGE);
    ck_assert_msg(strstr(e.message, "index 7"), "%s", e.message);
    bad[1] = 2;
    bp[1] = NAN;
    ck_assert_int_eq(crl_replay_update_priority(rb, bad, bp, 2, &e), CRL_E_INVALID);
    crl_td *s = crl_replay_sample(rb, 2000, &e);
    int64_t n, c1 = 0;
    const int64_t *ix = index_of(s, &n);
    for (int64_t k = 0; k < n; k++)
        c1 += ix[k] == 1;
    ck_assert_msg(c1 < 600, "slot 1 drawn %" PRId64 " times: a failed update changed it", c1);
    crl_td_unref(s);
    crl_replay_free(rb);

    rb = rb_new("storage=fix", "capacity=5", NULL);
    fill(rb, 0, 2);
    ck_assert_int_eq(crl_replay_update_priority(rb, idx, p, 1, &e), CRL_E_UNSUPPORTED);
    ck_assert_int_eq(crl_replay_set_beta(rb, 0.3, &e), CRL_E_UNSUPPORTED);
    crl_replay_free(rb);
}
END_TEST

/* update_priority on a slot not written yet, as TorchRL's PrioritizedSampler: accepted, never drawn while
 * empty, its priority raises the max (the default of new items), and the item written there starts at
 * that default, not at the value given before. */
START_TEST(test_prioritized_unwritten_slot)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=4", "sampler=prioritized", "alpha=1", "beta=0.5", "eps=0",
                            "seed=12", NULL);
    fill(rb, 0, 2);
    int64_t idx[2] = { 3, 2 };
    double p[2] = { 0, 9 };
    EXPECT_OK(crl_replay_update_priority(rb, idx, p, 2, &e), e);
    crl_td *s = crl_replay_sample(rb, 2000, &e);
    int64_t n;
    const int64_t *ix = index_of(s, &n);
    for (int64_t k = 0; k < n; k++)
        ck_assert_int_lt(ix[k], 2);
    crl_td_unref(s);
    /* errors change nothing: out of range, or a bad priority for an empty slot */
    int64_t bad[2] = { 3, 4 };
    double bp[2] = { 100, 1 };
    ck_assert_int_eq(crl_replay_update_priority(rb, bad, bp, 2, &e), CRL_E_RANGE);
    ck_assert_msg(strstr(e.message, "index 4 at position 1 is out of range [0, 4)"), "%s", e.message);
    bad[1] = -1;
    ck_assert_int_eq(crl_replay_update_priority(rb, bad, bp, 2, &e), CRL_E_RANGE);
    bad[1] = 2;
    bp[0] = NAN;
    ck_assert_int_eq(crl_replay_update_priority(rb, bad, bp, 2, &e), CRL_E_INVALID);
    ck_assert_msg(strstr(e.message, "position 0 (index 3)"), "%s", e.message);
    /* slots 2 and 3 written now: each at the default 9 (the max), against 1 for slots 0 and 1 */
    fill(rb, 2, 2);
    int64_t count[4] = { 0 };
    s = crl_replay_sample(rb, 4000, &e);
    ix = index_of(s, &n);
    for (int64_t k = 0; k < n; k++)
        count[ix[k]]++;
    crl_td_unref(s);
    /* expected 200, 200, 1800, 1800; the bounds are many standard deviations (~31) away */
    ck_assert_msg(count[2] > 1500 && count[3] > 1500 && count[0] < 400 && count[1] < 400,
                  "draws %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, count[0], count[1], count[2], count[3]);
    crl_replay_free(rb);
}
END_TEST

START_TEST(test_update_td_priority)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=4", "sampler=prioritized", "alpha=1", "eps=1e-9", NULL);
    fill(rb, 0, 4);
    crl_td *s = crl_replay_sample(rb, 4, &e);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(crl_replay_update_td_priority(rb, s, &e), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "td_error"), "%s", e.message);
    /* index [0 1 2 3], td_error [B, 1] float64 with signs: absolute values used */
    int64_t *ix = crl_tensor_data(crl_td_get(s, "index"));
    for (int k = 0; k < 4; k++)
        ix[k] = k;
    int64_t shape[2] = { 4, 1 };
    crl_tensor *te = crl_tensor_new(CRL_F64, 2, shape, &e);
    double *tv = crl_tensor_data(te);
    tv[0] = 0;
    tv[1] = -0.0;
    tv[2] = 0;
    tv[3] = -1000;
    EXPECT_OK(crl_td_set(s, "td_error", te, &e), e);
    crl_tensor_unref(te);
    EXPECT_OK(crl_replay_update_td_priority(rb, s, &e), e);
    crl_td *s2 = crl_replay_sample(rb, 1000, &e);
    int64_t n;
    const int64_t *i2 = index_of(s2, &n);
    for (int64_t k = 0; k < n; k++)
        ck_assert_int_eq(i2[k], 3);
    crl_td_unref(s2);
    /* wrong dtype and shape */
    crl_tensor *bad = crl_tensor_new(CRL_I32, 1, shape, &e);
    EXPECT_OK(crl_td_set(s, "td_error", bad, &e), e);
    crl_tensor_unref(bad);
    ck_assert_int_eq(crl_replay_update_td_priority(rb, s, &e), CRL_E_DTYPE);
    int64_t shape2[2] = { 4, 2 };
    bad = crl_tensor_new(CRL_F32, 2, shape2, &e);
    EXPECT_OK(crl_td_set(s, "td_error", bad, &e), e);
    crl_tensor_unref(bad);
    ck_assert_int_eq(crl_replay_update_td_priority(rb, s, &e), CRL_E_SHAPE);
    crl_td_unref(s);
    crl_replay_free(rb);
}
END_TEST

START_TEST(test_beta_annealing)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=4", "sampler=prioritized", "alpha=1", "eps=0", "beta=0.4",
                            "beta_end=1.0", "beta_steps=10", NULL);
    fill(rb, 0, 4);
    int64_t idx[4] = { 0, 1, 2, 3 };
    double p[4] = { 1, 2, 4, 8 };
    EXPECT_OK(crl_replay_update_priority(rb, idx, p, 4, &e), e);
    ck_assert(fabs(crl_replay_beta(rb) - 0.4) < 1e-12);
    for (int i = 0; i < 5; i++)
        crl_td_unref(crl_replay_sample(rb, 8, &e));
    ck_assert(fabs(crl_replay_beta(rb) - 0.7) < 1e-12);
    for (int i = 0; i < 5; i++)
        crl_td_unref(crl_replay_sample(rb, 8, &e));
    ck_assert(fabs(crl_replay_beta(rb) - 1.0) < 1e-12);
    /* the sample now uses beta = 1: w_i = p_min / p_i */
    crl_td *s = crl_replay_sample(rb, 64, &e);
    int64_t n;
    const int64_t *ix = index_of(s, &n);
    const float *w = crl_tensor_data(crl_td_get(s, "_weight"));
    for (int64_t k = 0; k < n; k++)
        ck_assert_msg(fabs(w[k] - 1.0 / p[ix[k]]) < 1e-6, "weight %g for slot %" PRId64, w[k], ix[k]);
    crl_td_unref(s);
    for (int i = 0; i < 10; i++)
        crl_td_unref(crl_replay_sample(rb, 8, &e));
    ck_assert(fabs(crl_replay_beta(rb) - 1.0) < 1e-12);
    /* set_beta restarts the schedule from the new value */
    EXPECT_OK(crl_replay_set_beta(rb, 0.2, &e), e);
    ck_assert(fabs(crl_replay_beta(rb) - 0.2) < 1e-12);
    crl_td_unref(crl_replay_sample(rb, 8, &e));
    ck_assert(fabs(crl_replay_beta(rb) - 0.28) < 1e-12);
    ck_assert_int_eq(crl_replay_set_beta(rb, -1, &e), CRL_E_INVALID);
    crl_replay_free(rb);
}
END_TEST

START_TEST(test_without_replacement_epochs)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=50", "sampler=without_replacement", "batch_size=7", "seed=5", NULL);
    fill(rb, 0, 50);
    for (int epoch = 0; epoch < 3; epoch++) {
        int seen[50] = { 0 }, total = 0, batches = 0;
        crl_td *s;
        while ((s = crl_replay_next(rb, &e))) {
            int64_t n;
            const int64_t *ix = index_of(s, &n);
            for (int64_t k = 0; k < n; k++) {
                seen[ix[k]]++;
                ck_assert_int_eq(t_at(s, k), ix[k]);
            }
            total += (int)n;
            batches++;
            crl_td_unref(s);
        }
        ck_assert_int_eq(e.code, CRL_OK);
        ck_assert_int_eq(total, 50);
        ck_assert_int_eq(batches, 8);
        for (int i = 0; i < 50; i++)
            ck_assert_int_eq(seen[i], 1);
    }
    crl_replay_free(rb);

    rb = rb_new("storage=fix", "capacity=50", "sampler=without_replacement", "drop_last=true", "seed=5", NULL);
    fill(rb, 0, 50);
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[50] = { 0 };
        for (int b = 0; b < 7; b++) {
            crl_td *s = crl_replay_sample(rb, 7, &e);
            ck_assert_msg(s != NULL, "%s", e.message);
            int64_t n;
            const int64_t *ix = index_of(s, &n);
            ck_assert_int_eq(n, 7);
            for (int64_t k = 0; k < n; k++)
                ck_assert_int_eq(seen[ix[k]]++, 0);
            crl_td_unref(s);
        }
        ck_assert_ptr_null(crl_replay_sample(rb, 7, &e));
        ck_assert_int_eq(e.code, CRL_E_RANGE);
    }
    ck_assert_ptr_null(crl_replay_sample(rb, 51, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    crl_replay_free(rb);
}
END_TEST

/* ---- slices -------------------------------------------------------------------------- */

/* Write trajectories of random lengths (some longer than the buffer) in
 * random-size extends, wrapping the cursor many times, and check after every
 * extend that each slice is one trajectory and contiguous in time. */
static void slice_run(const char *mode_kv, bool strict, uint64_t seed)
{
    crl_error e;
    char seedkv[32];
    g_snprintf(seedkv, sizeof seedkv, "seed=%" PRIu64, seed);
    crl_replay *rb = rb_new("storage=fix", "capacity=97", "sampler=slice", "slice_len=4", "batch_size=32", mode_kv,
                            strict ? "strict_length=true" : "strict_length=false", seedkv, NULL);
    bool by_traj = strstr(mode_kv, "traj_key") != NULL;
    crl_rng r;
    crl_rng_init(&r, seed, 9);
    int64_t t = 0, episode = 0, left = 1 + (int64_t)crl_rng_below(&r, 12);
    int64_t *ep_of = g_new(int64_t, 4000);
    bool *end_of = g_new(bool, 4000);
    size_t samples = 0;
    while (t < 3000) {
        int64_t n = 1 + (int64_t)crl_rng_below(&r, 40);
        int64_t ep[64];
        bool done[64];
        for (int64_t k = 0; k < n; k++) {
            ep[k] = episode;
            done[k] = --left == 0;
            ep_of[t + k] = episode;
            end_of[t + k] = done[k];
            if (done[k]) {
                episode++;
                /* mostly short, sometimes longer than the whole buffer */
                left = crl_rng_below(&r, 10) == 0 ? 100 + (int64_t)crl_rng_below(&r, 100)
                                                  : 1 + (int64_t)crl_rng_below(&r, 12);
            }
        }
        crl_td *b = make_batch(t, n, ep, done);
        EXPECT_OK(crl_replay_extend(rb, b, NULL, &e), e);
        crl_td_unref(b);
        t += n;
        crl_td *s = crl_replay_sample(rb, 0, &e);
        if (!s) {
            ck_assert_msg(strict && e.code == CRL_E_INVALID && strstr(e.message, "longest"), "%s", e.message);
            continue;
        }
        samples++;
        int64_t m;
        const int64_t *ix = index_of(s, &m);
        const uint8_t *trunc = crl_tensor_data(crl_td_get(s, "next.truncated"));
        ck_assert(strict ? m == 32 : m <= 32);
        /* split into slices at the truncated / done markers */
        int64_t start = 0;
        for (int64_t k = 0; k < m; k++) {
            int64_t tk = t_at(s, k);
            ck_assert_int_eq(ix[k], tk % 97);
            ck_assert_msg(tk >= t - 97 && tk < t, "item %" PRId64 " is no longer stored", tk);
            if (k > start) {
                ck_assert_msg(tk == t_at(s, k - 1) + 1, "slice not contiguous: %" PRId64 " after %" PRId64, tk,
                              t_at(s, k - 1));
                ck_assert_int_eq(ep_of[tk], ep_of[t_at(s, k - 1)]);
            }
            bool last = k - start + 1 == 4 || (!strict && (end_of[tk] || trunc[k]));
            if (last) {
                /* truncated unless the slice ends where its trajectory ends; by
                 * trajectory id, the newest one is not known to have ended */
                bool open_end = by_traj && tk == t - 1;
                ck_assert_msg(trunc[k] == (!end_of[tk] || open_end), "item %" PRId64 " (newest %" PRId64 "): "
                              "truncated %d, trajectory end %d", tk, t - 1, trunc[k], end_of[tk]);
                start = k + 1;
            } else {
                ck_assert_int_eq(trunc[k], 0);
            }
        }
        ck_assert_int_eq(start, m);
        crl_td_unref(s);
    }
    ck_assert_uint_gt(samples, 50);
    g_free(ep_of);
    g_free(end_of);
    crl_replay_free(rb);
}

START_TEST(test_slice_never_crosses)
{
    slice_run("traj_key=episode", true, 1);
    slice_run("end_key=next.done", true, 2);
    slice_run("traj_key=episode", false, 3);
    slice_run("end_key=next.done", false, 4);
}
END_TEST

/* Recurrent replay: an LSTM module steps through episodes one step at a time (state carried, reset on
 * is_init) and every step is stored with the state it started from.  Slices drawn by the slice sampler,
 * reshaped to [num_slices, slice_len], run through the module in recurrent mode from their first step's
 * stored state give back the features computed while acting; without the stored states they do not. */
START_TEST(test_slice_recurrent_states)
{
    enum { F = 3, H = 4, STEPS = 80, SL = 5, NS = 6 };
    crl_error e;
    crl_rng rng;
    crl_rng_init(&rng, 5, 0);
    crl_rnn *net = crl_rnn_new("lstm", CRL_RNN_LSTM, F, H, &rng, &e);
    ck_assert_msg(net != NULL, "%s", e.message);
    crl_rnn_module *mod = crl_rnn_module_new(net, "observation", "embed", &e);
    ck_assert_ptr_nonnull(mod);
    char cap[32], bs[32];
    g_snprintf(cap, sizeof cap, "capacity=%d", STEPS);
    g_snprintf(bs, sizeof bs, "batch_size=%d", NS * SL);
    crl_replay *rb = rb_new("storage=fix", cap, "sampler=slice", "slice_len=5", bs, "traj_key=episode",
                            "strict_length=true", "seed=3", NULL);
    int64_t one = 1, episode = 0, left = 0;
    crl_td *step = crl_td_new(1, &one, &e);
    crl_tensor *h = crl_tensor_new(CRL_F32, 3, (const int64_t[]){ 1, 1, H }, &e);
    crl_tensor *c = crl_tensor_new(CRL_F32, 3, (const int64_t[]){ 1, 1, H }, &e);
    crl_tensor_fill(h, 0);
    crl_tensor_fill(c, 0);
    for (int64_t t = 0; t < STEPS; t++) {
        bool start = left == 0;
        if (start) {
            left = 6 + (int64_t)crl_rng_below(&rng, 10);
            episode += t > 0;
        }
        left--;
        crl_tensor *obs = crl_tensor_new(CRL_F32, 2, (const int64_t[]){ 1, F }, &e);
        crl_tensor *init = crl_tensor_new(CRL_BOOL, 2, (const int64_t[]){ 1, 1 }, &e);
        crl_tensor *ep = crl_tensor_new(CRL_I64, 1, &one, &e);
        for (int i = 0; i < F; i++)
            crl_tensor_flat_set(obs, i, crl_rng_range(&rng, -1, 1));
        crl_tensor_flat_set(init, 0, start);
        crl_tensor_flat_set(ep, 0, (double)episode);
        EXPECT_OK(crl_td_set(step, "observation", obs, &e), e);
        EXPECT_OK(crl_td_set(step, "is_init", init, &e), e);
        EXPECT_OK(crl_td_set(step, "episode", ep, &e), e);
        /* the state entering this step, stored with it (stale values where is_init: the module zeroes them) */
        crl_tensor *hc = crl_tensor_clone(h, &e), *cc = crl_tensor_clone(c, &e);
        EXPECT_OK(crl_td_set(step, "recurrent_state_h", hc, &e), e);
        EXPECT_OK(crl_td_set(step, "recurrent_state_c", cc, &e), e);
        crl_tensor_unref(obs);
        crl_tensor_unref(init);
        crl_tensor_unref(ep);
        crl_tensor_unref(hc);
        crl_tensor_unref(cc);
        EXPECT_OK(crl_rnn_module_infer(mod, step, &e), e);
        crl_td *item = crl_td_exclude(step, (const char *const[]){ "next", NULL }, &e);
        ck_assert_ptr_nonnull(item);
        EXPECT_OK(crl_replay_extend(rb, item, NULL, &e), e);
        crl_td_unref(item);
        EXPECT_OK(crl_tensor_copy(h, crl_td_get(step, "next.recurrent_state_h"), &e), e);
        EXPECT_OK(crl_tensor_copy(c, crl_td_get(step, "next.recurrent_state_c"), &e), e);
    }
    crl_rnn_module_set_recurrent_mode(mod, true);
    int differs = 0;
    for (int draw = 0; draw < 5; draw++) {
        crl_td *s = crl_replay_sample(rb, 0, &e);
        ck_assert_msg(s != NULL, "%s", e.message);
        crl_td *seq = crl_td_reshape(s, 2, (const int64_t[]){ NS, SL }, &e);
        ck_assert_msg(seq != NULL, "%s", e.message);
        crl_tensor *stored = crl_tensor_clone(crl_td_get(seq, "embed"), &e);
        EXPECT_OK(crl_rnn_module_forward(mod, seq, &e), e);
        const crl_tensor *again = crl_td_get(seq, "embed");
        ck_assert_int_eq(crl_tensor_ndim(again), 3);
        for (int64_t i = 0; i < NS * SL * H; i++)
            ck_assert_msg(fabs(crl_tensor_flat_get(again, i) - crl_tensor_flat_get(stored, i)) < 1e-5,
                          "draw %d element %" PRId64 ": %g from the stored state, %g while acting", draw, i,
                          crl_tensor_flat_get(again, i), crl_tensor_flat_get(stored, i));
        /* From zero states instead: slices that do not start an episode come out differently. */
        EXPECT_OK(crl_td_del(seq, "recurrent_state_h", &e), e);
        EXPECT_OK(crl_td_del(seq, "recurrent_state_c", &e), e);
        EXPECT_OK(crl_rnn_module_infer(mod, seq, &e), e);
        for (int64_t i = 0; i < NS * SL * H; i++)
            differs += fabs(crl_tensor_flat_get(crl_td_get(seq, "embed"), i) - crl_tensor_flat_get(stored, i)) > 1e-4;
        crl_tensor_unref(stored);
        crl_td_unref(seq);
        crl_td_unref(s);
    }
    ck_assert_int_gt(differs, 0);
    /* A batch that does not divide into the slices is refused by reshape. */
    crl_td *s = crl_replay_sample(rb, 0, &e);
    ck_assert_ptr_null(crl_td_reshape(s, 2, (const int64_t[]){ 7, SL }, &e));
    ck_assert_msg(e.code == CRL_E_SHAPE && strstr(e.message, "[30] cannot become [7, 5]"), "%s", e.message);
    crl_td_unref(s);
    crl_tensor_unref(h);
    crl_tensor_unref(c);
    crl_td_unref(step);
    crl_replay_free(rb);
    crl_rnn_module_free(mod);
    crl_rnn_unref(net);
}
END_TEST

START_TEST(test_slice_uniform_over_trajectories)
{
    /* 4 trajectories of length 10: slices start uniformly over 4 x 7 starts */
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=40", "sampler=slice", "num_slices=4", "batch_size=16",
                            "traj_key=episode", "seed=8", NULL);
    int64_t ep[40];
    for (int k = 0; k < 40; k++)
        ep[k] = k / 10;
    crl_td *b = make_batch(0, 40, ep, NULL);
    EXPECT_OK(crl_replay_extend(rb, b, NULL, &e), e);
    crl_td_unref(b);
    double obs[28] = { 0 }, exp[28];
    for (int r = 0; r < 2000; r++) {
        crl_td *s = crl_replay_sample(rb, 0, &e);
        ck_assert_ptr_nonnull(s);
        for (int j = 0; j < 4; j++) {
            int64_t first = t_at(s, 4 * j);
            obs[(first / 10) * 7 + first % 10]++;
        }
        crl_td_unref(s);
    }
    for (int i = 0; i < 28; i++)
        exp[i] = 8000.0 / 28;
    double x = chi_square(obs, exp, 28);
    ck_assert_msg(x < 55.48 /* chi2.ppf(0.999, 27) */, "slice starts chi-square %g", x);
    ck_assert_ptr_null(crl_replay_sample(rb, 10, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_msg(strstr(e.message, "multiple"), "%s", e.message);
    ck_assert_ptr_null(crl_replay_sample(rb, 44, &e));   /* slices of 11 > 10 */
    ck_assert_msg(strstr(e.message, "longest has 10"), "%s", e.message);
    crl_replay_free(rb);
}
END_TEST

/* ---- max value writer ------------------------------------------------------------------ */

START_TEST(test_max_value_top_k)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=5", "writer=max_value", "rank_key=next.reward", NULL);
    crl_rng r;
    crl_rng_init(&r, 4, 4);
    double all[60];
    int64_t nall = 0;
    for (int round = 0; round < 6; round++) {
        crl_td *b = make_batch(0, 10, NULL, NULL);
        float *rw = crl_tensor_data(crl_td_get(b, "next.reward"));
        for (int k = 0; k < 10; k++)
            all[nall++] = rw[k] = (float)(crl_rng_uniform(&r) * 100.0);
        int64_t idx[10];
        EXPECT_OK(crl_replay_extend(rb, b, idx, &e), e);
        for (int k = 0; k < 10; k++)
            ck_assert(idx[k] >= -1 && idx[k] < 5);
        crl_td_unref(b);
        /* the stored ranks are the top 5 seen so far */
        double sorted[60];
        memcpy(sorted, all, (size_t)nall * sizeof(double));
        for (int64_t i = 0; i < nall; i++)
            for (int64_t j = i + 1; j < nall; j++)
                if (sorted[j] > sorted[i]) {
                    double tmp = sorted[i];
                    sorted[i] = sorted[j];
                    sorted[j] = tmp;
                }
        double stored[5];
        for (int64_t s = 0; s < 5; s++) {
            crl_td *g = crl_replay_get(rb, s, &e);
            ck_assert_ptr_nonnull(g);
            stored[s] = *(float *)crl_tensor_data(crl_td_get(g, "next.reward"));
            crl_td_unref(g);
        }
        for (int i = 0; i < 5; i++) {
            bool found = false;
            for (int s = 0; s < 5; s++)
                found |= stored[s] == sorted[i];
            ck_assert_msg(found, "round %d: rank %g of the top 5 is not stored", round, sorted[i]);
        }
    }
    /* an item below the minimum of a full buffer is not written: index -1 */
    crl_td *low = make_batch(0, 1, NULL, NULL);
    *(float *)crl_tensor_data(crl_td_get(low, "next.reward")) = -1;
    int64_t slot = 0;
    EXPECT_OK(crl_replay_extend(rb, low, &slot, &e), e);
    ck_assert_int_eq(slot, -1);
    crl_td_unref(low);
    /* the rank key must be there and scalar; nothing is written otherwise */
    crl_td *bad = make_batch(0, 2, NULL, NULL);
    EXPECT_OK(crl_td_del(bad, "next.reward", &e), e);
    ck_assert_int_eq(crl_replay_extend(rb, bad, NULL, &e), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "next.reward"), "%s", e.message);
    crl_td_unref(bad);
    bad = make_batch(0, 2, NULL, NULL);
    int64_t sh[2] = { 2, 3 };
    crl_tensor *t3 = crl_tensor_new(CRL_F32, 2, sh, &e);
    EXPECT_OK(crl_td_set(bad, "next.reward", t3, &e), e);
    crl_tensor_unref(t3);
    ck_assert_int_eq(crl_replay_extend(rb, bad, NULL, &e), CRL_E_SHAPE);
    crl_td_unref(bad);
    crl_replay_free(rb);
}
END_TEST

/* ---- resume with holes (a durable storage after a crash) ------------------------------------ */

START_TEST(test_holes_are_skipped)
{
    crl_error e;
    const char *samplers[] = { "sampler=random", "sampler=without_replacement", "sampler=prioritized" };
    for (int s = 0; s < 3; s++) {
        crl_replay *rb = rb_new("storage=fixdur", "capacity=30", "preload=20", "holes=3,7,8", samplers[s],
                                "batch_size=6", NULL);
        ck_assert_uint_eq(crl_replay_len(rb), 17);
        int seen[30] = { 0 };
        for (int r = 0; r < 200; r++) {
            crl_td *b = crl_replay_sample(rb, 0, &e);
            ck_assert_msg(b != NULL, "%s", e.message);
            int64_t n;
            const int64_t *ix = index_of(b, &n);
            for (int64_t k = 0; k < n; k++) {
                ck_assert(ix[k] != 3 && ix[k] != 7 && ix[k] != 8 && ix[k] < 20);
                seen[ix[k]]++;
            }
            crl_td_unref(b);
        }
        for (int i = 0; i < 20; i++)
            ck_assert(seen[i] > 0 || i == 3 || i == 7 || i == 8);
        /* the writer resumes at write_count % capacity */
        int64_t slot;
        crl_td *it = make_item(99, 99, false, &e);
        EXPECT_OK(crl_replay_add(rb, it, &slot, &e), e);
        crl_td_unref(it);
        ck_assert_int_eq(slot, 20);
        crl_replay_free(rb);
    }
    crl_replay *rb = rb_new("storage=fixdur", "capacity=20", "preload=20", "holes=0", NULL);
    int64_t slot;
    crl_td *it = make_item(99, 99, false, &e);
    EXPECT_OK(crl_replay_add(rb, it, &slot, &e), e);
    ck_assert_int_eq(slot, 0);   /* fills the hole at 20 % 20 */
    ck_assert_uint_eq(crl_replay_len(rb), 20);
    crl_td_unref(it);
    crl_replay_free(rb);
    /* slices never cross a hole: preload episodes of 5 with a hole inside one */
    rb = rb_new("storage=fixdur", "capacity=30", "preload=20", "holes=7", "sampler=slice", "slice_len=3",
                "traj_key=episode", "batch_size=30", NULL);
    for (int r = 0; r < 50; r++) {
        crl_td *b = crl_replay_sample(rb, 0, &e);
        ck_assert_msg(b != NULL, "%s", e.message);
        for (int j = 0; j < 10; j++) {
            int64_t t0 = t_at(b, 3 * j);
            ck_assert(t_at(b, 3 * j + 2) == t0 + 2 && t0 / 5 == (t0 + 2) / 5);
            ck_assert(!(t0 <= 7 && t0 + 2 >= 7));
        }
        crl_td_unref(b);
    }
    crl_replay_free(rb);
}
END_TEST

/* ---- checkpoints ------------------------------------------------------------------------ */

static char *tmpdir_new(void)
{
    char *d = g_dir_make_tmp("crl-replay-XXXXXX", NULL);
    ck_assert_ptr_nonnull(d);
    return d;
}

static void rm_rf(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (d) {
        const char *n;
        while ((n = g_dir_read_name(d))) {
            char *p = g_build_filename(path, n, NULL);
            rm_rf(p);
            g_free(p);
        }
        g_dir_close(d);
        g_rmdir(path);
    } else {
        g_unlink(path);
    }
}

/* The next k batches of a and b are identical. */
static const char *same_what = "";

static void same_batches(crl_replay *a, crl_replay *b, int k, size_t bs)
{
    crl_error e;
    for (int i = 0; i < k; i++) {
        crl_td *x = crl_replay_sample(a, bs, &e);
        ck_assert_msg(x != NULL, "%s", e.message);
        crl_td *y = crl_replay_sample(b, bs, &e);
        ck_assert_msg(y != NULL, "%s", e.message);
        ck_assert_msg(crl_td_equal(x, y), "%s: batch %d differs after load", same_what, i);
        crl_td_unref(x);
        crl_td_unref(y);
    }
}

static void roundtrip(const char *sampler, const char *extra, const char *extra2)
{
    crl_error e;
    same_what = extra2;
    char *root = tmpdir_new();
    char *dir = g_build_filename(root, "ckpt", NULL);
    crl_replay *a = rb_new("storage=fix", "capacity=40", sampler, extra, extra2, "seed=7", NULL);
    fill(a, 0, 55);
    size_t bs = 8;
    for (int i = 0; i < 3; i++)
        crl_td_unref(crl_replay_sample(a, bs, &e));
    if (strstr(sampler, "prioritized")) {
        int64_t idx[3] = { 1, 5, 9 };
        double p[3] = { 3, 0.5, 7 };
        EXPECT_OK(crl_replay_update_priority(a, idx, p, 3, &e), e);
    }
    EXPECT_OK(crl_replay_dump(a, dir, &e), e);
    crl_replay *b = rb_new("storage=fix", "capacity=40", sampler, extra, extra2, "seed=999", NULL);
    fill(b, 1000, 3);
    EXPECT_OK(crl_replay_load(b, dir, &e), e);
    ck_assert_uint_eq(crl_replay_len(b), crl_replay_len(a));
    same_batches(a, b, 6, bs);
    /* writes continue at the same cursor */
    int64_t ia, ib;
    crl_td *it = make_item(77, 77, true, &e);
    EXPECT_OK(crl_replay_add(a, it, &ia, &e), e);
    EXPECT_OK(crl_replay_add(b, it, &ib, &e), e);
    crl_td_unref(it);
    ck_assert_int_eq(ia, ib);
    same_batches(a, b, 3, bs);
    /* a dump overwrites an older checkpoint in place */
    EXPECT_OK(crl_replay_dump(b, dir, &e), e);
    EXPECT_OK(crl_replay_load(a, dir, &e), e);
    same_batches(a, b, 3, bs);
    crl_replay_free(a);
    crl_replay_free(b);
    rm_rf(root);
    g_free(dir);
    g_free(root);
}

START_TEST(test_dump_load_roundtrip)
{
    roundtrip("sampler=random", "batch_size=8", "writer=round_robin");
    roundtrip("sampler=prioritized", "beta_steps=100", "beta_end=1");
    roundtrip("sampler=without_replacement", "shuffle=true", "drop_last=false");
    roundtrip("sampler=slice", "slice_len=4", "traj_key=episode");
    roundtrip("sampler=random", "writer=max_value", "rank_key=t");
}
END_TEST

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, off, off < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void truncate_file(const char *path, long keep)
{
    char *data;
    gsize len;
    ck_assert(g_file_get_contents(path, &data, &len, NULL));
    ck_assert(g_file_set_contents(path, data, keep < (long)len ? keep : (long)len, NULL));
    g_free(data);
}

static void copy_dir(const char *from, const char *to)
{
    g_mkdir(to, 0755);
    GDir *d = g_dir_open(from, 0, NULL);
    const char *n;
    while ((n = g_dir_read_name(d))) {
        char *a = g_build_filename(from, n, NULL), *b = g_build_filename(to, n, NULL);
        if (g_file_test(a, G_FILE_TEST_IS_DIR)) {
            copy_dir(a, b);
        } else {
            char *data;
            gsize len;
            ck_assert(g_file_get_contents(a, &data, &len, NULL));
            ck_assert(g_file_set_contents(b, data, (gssize)len, NULL));
            g_free(data);
        }
        g_free(a);
        g_free(b);
    }
    g_dir_close(d);
}

START_TEST(test_load_bad_checkpoint_leaves_buffer)
{
    crl_error e;
    char *root = tmpdir_new();
    char *good = g_build_filename(root, "good", NULL);
    char *bad = g_build_filename(root, "bad", NULL);
    char *mine = g_build_filename(root, "mine", NULL);
    crl_replay *src = rb_new("storage=fix", "capacity=20", "sampler=prioritized", "seed=1", NULL);
    fill(src, 0, 12);
    EXPECT_OK(crl_replay_dump(src, good, &e), e);
    /* the buffer under test, and its state saved to compare with afterwards */
    crl_replay *rb = rb_new("storage=fix", "capacity=20", "sampler=prioritized", "seed=2", NULL);
    fill(rb, 100, 7);
    int64_t idx[2] = { 2, 4 };
    double p[2] = { 9, 0.1 };
    EXPECT_OK(crl_replay_update_priority(rb, idx, p, 2, &e), e);
    EXPECT_OK(crl_replay_dump(rb, mine, &e), e);
    crl_replay *twin = rb_new("storage=fix", "capacity=20", "sampler=prioritized", "seed=3", NULL);
    char *manifest = g_build_filename(bad, "replay.ckpt", NULL);
    char *sfile = g_build_filename(bad, "storage", "fix.ckpt", NULL);
    struct {
        const char *what;
        int code;
        const char *needle;
    } cases[] = {
        { "flip manifest", CRL_E_CORRUPT, "replay.ckpt" },
        { "flip manifest header", CRL_E_CORRUPT, "replay.ckpt" },
        { "truncate manifest", CRL_E_CORRUPT, "replay.ckpt" },
        { "missing manifest", CRL_E_IO, "replay.ckpt" },
        { "flip storage", CRL_E_CORRUPT, "fix.ckpt" },
        { "missing storage", CRL_E_IO, "fix.ckpt" },
        { "capacity differs", CRL_E_CONFIG, "capacity" },
        { "sampler differs", CRL_E_CONFIG, "sampler" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rm_rf(bad);
        crl_replay *other = NULL;
        if (c == 6)
            other = rb_new("storage=fix", "capacity=21", "sampler=prioritized", NULL);
        else if (c == 7)
            other = rb_new("storage=fix", "capacity=20", NULL);
        if (other) {
            fill(other, 0, 3);
            EXPECT_OK(crl_replay_dump(other, bad, &e), e);
            crl_replay_free(other);
        } else {
            copy_dir(good, bad);
        }
        switch (c) {
        case 0: flip_byte(manifest, -3); break;
        case 1: flip_byte(manifest, 2); break;
        case 2: truncate_file(manifest, 40); break;
        case 3: g_unlink(manifest); break;
        case 4: flip_byte(sfile, -2); break;
        case 5: g_unlink(sfile); break;
        default: break;
        }
        crl_error_clear(&e);
        int rc = crl_replay_load(rb, bad, &e);
        ck_assert_msg(rc == cases[c].code, "%s: got %s: %s", cases[c].what, crl_status_name(rc), e.message);
        ck_assert_msg(strstr(e.message, cases[c].needle), "%s: %s", cases[c].what, e.message);
        ck_assert_uint_eq(crl_replay_len(rb), 7);
    }
    /* unchanged: it samples exactly as a twin loaded from its own dump */
    EXPECT_OK(crl_replay_load(twin, mine, &e), e);
    same_batches(rb, twin, 5, 16);
    crl_replay_free(src);
    crl_replay_free(rb);
    crl_replay_free(twin);
    rm_rf(root);
    g_free(root);
    g_free(good);
    g_free(bad);
    g_free(mine);
    g_free(manifest);
    g_free(sfile);
}
END_TEST

/* ---- tensor-only buffers ----------------------------------------------------------------------- */

/* TorchRL's demo: rb.add(1); rb.sample(1); rb.extend([2, 3]); rb.sample(3); and PrioritizedReplayBuffer's
 * rb.add(1); rb.sample(1); rb.update_priority(1, 0.5) (slot 1 not written yet). */
START_TEST(test_tensor_buffer)
{
    crl_error e;
    crl_replay *rb = rb_new("storage=fix", "capacity=10", "seed=1", NULL);
    crl_tensor *one = crl_tensor_new(CRL_I64, 0, NULL, &e);
    *(int64_t *)crl_tensor_data(one) = 1;
    int64_t slot = -1, slots[2];
    EXPECT_OK(crl_replay_add_tensor(rb, one, &slot, &e), e);
    ck_assert_int_eq(slot, 0);
    crl_tensor *s = crl_replay_sample_tensor(rb, 1, NULL, &e);
    ck_assert_msg(s != NULL, "%s", e.message);
    ck_assert(crl_tensor_ndim(s) == 1 && crl_tensor_shape(s)[0] == 1 && crl_tensor_dtype(s) == CRL_I64);
    ck_assert_int_eq((int64_t)crl_tensor_flat_get(s, 0), 1);
    crl_tensor_unref(s);
    int64_t two = 2;
    crl_tensor *pair = crl_tensor_new(CRL_I64, 1, &two, &e);
    ((int64_t *)crl_tensor_data(pair))[0] = 2;
    ((int64_t *)crl_tensor_data(pair))[1] = 3;
    EXPECT_OK(crl_replay_extend_tensor(rb, pair, slots, &e), e);
    ck_assert(slots[0] == 1 && slots[1] == 2 && crl_replay_len(rb) == 3);
    crl_td *info = NULL;
    s = crl_replay_sample_tensor(rb, 3, &info, &e);
    ck_assert_msg(s != NULL && info != NULL, "%s", e.message);
    ck_assert(crl_tensor_ndim(s) == 1 && crl_tensor_shape(s)[0] == 3);
    int64_t n;
    const int64_t *ix = index_of(info, &n);
    ck_assert_int_eq(n, 3);
    ck_assert(!crl_td_has(info, CRL_REPLAY_TENSOR_KEY));
    for (int64_t k = 0; k < 3; k++)
        ck_assert_int_eq((int64_t)crl_tensor_flat_get(s, k), ix[k] + 1);
    crl_tensor_unref(s);
    crl_td_unref(info);
    crl_tensor *got = crl_replay_get_tensor(rb, 2, &e);
    ck_assert(got && crl_tensor_ndim(got) == 0 && (int64_t)crl_tensor_flat_get(got, 0) == 3);
    crl_tensor_unref(got);
    /* the TensorDict view of the same buffer */
    crl_td *td = crl_replay_sample(rb, 2, &e);
    ck_assert(td && crl_td_get(td, CRL_REPLAY_TENSOR_KEY) && crl_td_get(td, "index"));
    crl_td_unref(td);
    /* failures: a 0-dim extend, NULL arguments, a slot out of range */
    ck_assert_int_eq(crl_replay_extend_tensor(rb, one, NULL, &e), CRL_E_SHAPE);
    ck_assert_msg(strstr(e.message, "a 0-dim tensor holds one item"), "%s", e.message);
    ck_assert_int_eq(crl_replay_add_tensor(rb, NULL, NULL, &e), CRL_E_INVALID);
    ck_assert_int_eq(crl_replay_add_tensor(NULL, one, NULL, &e), CRL_E_INVALID);
    ck_assert_ptr_null(crl_replay_sample_tensor(NULL, 1, &info, &e));
    ck_assert_ptr_null(info);
    ck_assert_ptr_null(crl_replay_get_tensor(rb, 11, &e));
    crl_replay_free(rb);
    /* an empty buffer, and a buffer of TensorDicts */
    rb = rb_new("storage=fix", "capacity=10", NULL);
    info = (crl_td *)rb;
    ck_assert_ptr_null(crl_replay_sample_tensor(rb, 1, &info, &e));
    ck_assert_ptr_null(info);
    fill(rb, 0, 3);
    ck_assert_ptr_null(crl_replay_sample_tensor(rb, 1, &info, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_msg(strstr(e.message, "this buffer holds TensorDicts (keys") && strstr(e.message, "'obs'"), "%s",
                  e.message);
    ck_assert_ptr_null(crl_replay_get_tensor(rb, 0, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    crl_replay_free(rb);
    /* prioritized: the info has _weight; update_priority on slot 1 before it is written, as the demo does */
    rb = rb_new("storage=fix", "capacity=10", "sampler=prioritized", "alpha=0.7", "beta=1.1", NULL);
    EXPECT_OK(crl_replay_add_tensor(rb, one, NULL, &e), e);
    s = crl_replay_sample_tensor(rb, 1, &info, &e);
    ck_assert(s && info && crl_td_get(info, "_weight"));
    crl_tensor_unref(s);
    crl_td_unref(info);
    int64_t i1 = 1;
    double half = 0.5;
    EXPECT_OK(crl_replay_update_priority(rb, &i1, &half, 1, &e), e);
    crl_replay_free(rb);
    crl_tensor_unref(one);
    crl_tensor_unref(pair);
}
END_TEST

/* The plugin storages (ListStorage, LazyTensorStorage) of plain float tensors [3]. */
START_TEST(test_tensor_buffer_plugin_storages)
{
    crl_error e;
    if (crl_host_load_name(host, "replay", &e) != CRL_OK) {
        fprintf(stderr, "test_tensor_buffer_plugin_storages: replay.so not found (%s); skipped\n", e.message);
        return;
    }
    const char *names[] = { "storage=list", "storage=tensor" };
    for (int st = 0; st < 2; st++) {
        if (!crl_host_find(host, CRL_KIND_STORAGE, names[st] + 8))
            continue;
        crl_replay *rb = rb_new(names[st], "capacity=8", "seed=3", NULL);
        crl_tensor *x = crl_tensor_new(CRL_F32, 2, (const int64_t[]){ 5, 3 }, &e);
        for (int i = 0; i < 15; i++)
            ((float *)crl_tensor_data(x))[i] = (float)i;
        EXPECT_OK(crl_replay_extend_tensor(rb, x, NULL, &e), e);
        EXPECT_OK(crl_replay_extend_tensor(rb, x, NULL, &e), e);   /* wraps: slots 5..7, 0, 1 */
        ck_assert_uint_eq(crl_replay_len(rb), 8);
        crl_td *info;
        crl_tensor *s = crl_replay_sample_tensor(rb, 4, &info, &e);
        ck_assert_msg(s != NULL, "%s: %s", names[st], e.message);
        ck_assert(crl_tensor_ndim(s) == 2 && crl_tensor_shape(s)[0] == 4 && crl_tensor_shape(s)[1] == 3);
        int64_t n;
        const int64_t *ix = index_of(info, &n);
        for (int64_t k = 0; k < 4; k++) {
            /* slot i holds row (i < 2 ? i + 3 : i < 5 ? i : i - 5) of x */
            int64_t row = ix[k] < 2 ? ix[k] + 3 : ix[k] < 5 ? ix[k] : ix[k] - 5;
            for (int j = 0; j < 3; j++)
                ck_assert(crl_tensor_flat_get(s, k * 3 + j) == (double)(row * 3 + j));
        }
        crl_tensor_unref(s);
        crl_td_unref(info);
        crl_tensor_unref(x);
        /* LazyTensorStorage: the first write fixed [3] float32 items */
        if (st == 1) {
            crl_tensor *y = crl_tensor_new(CRL_F32, 2, (const int64_t[]){ 2, 4 }, &e);
            ck_assert_int_ne(crl_replay_extend_tensor(rb, y, NULL, &e), CRL_OK);
            ck_assert_msg(strstr(e.message, CRL_REPLAY_TENSOR_KEY), "%s", e.message);
            crl_tensor_unref(y);
        }
        crl_replay_free(rb);
    }
}
END_TEST

/* ---- the plugin storages, when plugins/replay is built ------------------------------------- */

START_TEST(test_plugin_storages)
{
    crl_error e;
    if (crl_host_load_name(host, "replay", &e) != CRL_OK) {
        fprintf(stderr, "test_plugin_storages: replay.so not found (%s); skipped\n", e.message);
        return;
    }
    const char *names[] = { "storage=list", "storage=tensor" };
    for (int s = 0; s < 2; s++) {
        if (!crl_host_find(host, CRL_KIND_STORAGE, names[s] + 8))
            continue;
        char *root = tmpdir_new();
        char *dir = g_build_filename(root, "ck", NULL);
        crl_replay *a = rb_new(names[s], "capacity=64", "sampler=prioritized", "seed=4", NULL);
        fill(a, 0, 100);
        crl_td *x = crl_replay_sample(a, 32, &e);
        ck_assert_msg(x != NULL, "%s: %s", names[s], e.message);
        int64_t n;
        const int64_t *ix = index_of(x, &n);
        for (int64_t k = 0; k < n; k++)
            ck_assert_int_eq(t_at(x, k) % 64, ix[k]);
        crl_td_unref(x);
        EXPECT_OK(crl_replay_dump(a, dir, &e), e);
        crl_replay *b = rb_new(names[s], "capacity=64", "sampler=prioritized", NULL);
        EXPECT_OK(crl_replay_load(b, dir, &e), e);
        same_batches(a, b, 4, 16);
        crl_replay_free(a);
        crl_replay_free(b);
        rm_rf(root);
        g_free(dir);
        g_free(root);
    }
}
END_TEST

static Suite *replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("buffer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ini_errors);
    tcase_add_test(tc, test_add_extend_round_robin);
    tcase_add_test(tc, test_partial_write_failure);
    tcase_add_test(tc, test_uniform_chi_square);
    tcase_add_test(tc, test_prioritized_probabilities_and_weights);
    tcase_add_test(tc, test_prioritized_unwritten_slot);
    tcase_add_test(tc, test_tensor_buffer);
    tcase_add_test(tc, test_tensor_buffer_plugin_storages);
    tcase_add_test(tc, test_update_td_priority);
    tcase_add_test(tc, test_beta_annealing);
    tcase_add_test(tc, test_without_replacement_epochs);
    tcase_add_test(tc, test_slice_never_crosses);
    tcase_add_test(tc, test_slice_uniform_over_trajectories);
    tcase_add_test(tc, test_max_value_top_k);
    tcase_add_test(tc, test_slice_recurrent_states);
    tcase_add_test(tc, test_holes_are_skipped);
    tcase_add_test(tc, test_dump_load_roundtrip);
    tcase_add_test(tc, test_load_bad_checkpoint_leaves_buffer);
    tcase_add_test(tc, test_plugin_storages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(replay_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
