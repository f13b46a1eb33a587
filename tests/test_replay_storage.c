/* Check suite for plugins/replay: list, tensor and memmap storages, layouts, resume, damage and check/repair, kill -9 durability, ENOSPC, dump/load. */
#define _GNU_SOURCE /* nftw, RTLD_DEFAULT */
#include "config.h"

#include <check.h>
#include <crl/checkpoint.h>
#include <crl/crl.h>
#include <crl/host.h>
#include <crl/storage_backend.h>
#include "ckpt-edit.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- fixtures --------------------------------------------------------------- */

/* True in the re-executed ENOSPC scenario, which runs outside Check (where
 * even a passing ck_assert aborts): helpers it shares use REQ. */
static bool g_scenario;
#define REQ(cond, ...)                                                                                      \
    do {                                                                                                    \
        if (g_scenario) {                                                                                   \
            if (!(cond)) {                                                                                  \
                fprintf(stderr, "enospc scenario: line %d: ", __LINE__);                                    \
                fprintf(stderr, __VA_ARGS__);                                                               \
                fprintf(stderr, "\n");                                                                      \
                exit(1);                                                                                    \
            }                                                                                               \
        } else {                                                                                            \
            ck_assert_msg(cond, __VA_ARGS__);                                                               \
        }                                                                                                   \
    } while (0)

static crl_config *g_cfg;
static crl_host *g_host;
static char g_tmp[256];

/* The host with replay.so loaded and a fresh temporary dir; false and a
 * message in err on failure. */
static bool host_setup(crl_error *err)
{
    g_cfg = crl_config_new(err);
    g_host = g_cfg ? crl_host_new(g_cfg, err) : NULL;
    if (!g_host || crl_host_load_name(g_host, "replay", err) != CRL_OK)
        return false;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/crl-replay-test-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        crl_error_set(err, CRL_E_IO, "mkdtemp: %s", strerror(errno));
        return false;
    }
    return true;
}

static void setup(void)
{
    crl_error err;
    ck_assert_msg(host_setup(&err), "%s", err.message);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    crl_host_free(g_host);
    crl_config_free(g_cfg);
    g_host = NULL;
    g_cfg = NULL;
}

static const crl_storage_ops *ops_of(const char *name)
{
    const crl_component *c = crl_host_find(g_host, CRL_KIND_STORAGE, name);
    REQ(c != NULL, "storage/%s not registered", name);
    return c->ops;
}

/* Open storage `name` with INI lines `ini` for its [storage] section. */
static int open_storage(const char *name, const char *ini, int64_t capacity, void **st, crl_error *err)
{
    const crl_component *c = crl_host_find(g_host, CRL_KIND_STORAGE, name);
    REQ(c != NULL, "storage/%s not registered", name);
    crl_config *cfg = crl_config_new(err);
    char text[2048];
    snprintf(text, sizeof text, "[storage]\n%s\n", ini ? ini : "");
    REQ(crl_config_load_buffer(cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, err) == CRL_OK, "%s",
        err->message);
    const crl_option *tables[1] = { c->options };
    crl_opts *o = crl_config_opts(cfg, "storage", tables, c->options ? 1 : 0, err);
    int rc = o ? ((const crl_storage_ops *)c->ops)->open(o, capacity, st, err) : err->code;
    crl_opts_free(o);
    crl_config_free(cfg);
    return rc;
}

static char *subdir(const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 512, "%s/%s", g_tmp, name);
    return b;
}

static int open_memmap(const char *dir, const char *extra, int64_t capacity, void **st, crl_error *err)
{
    char ini[1024];
    snprintf(ini, sizeof ini, "dir = %s\n%s", dir, extra ? extra : "");
    return open_storage("memmap", ini, capacity, st, err);
}

/* ---- items: every leaf is a function of the item's sequence number ------------ */

#define PIX 64

static crl_tensor *leaf(crl_td *td, const char *key, crl_dtype dt, int ndim, const int64_t *shape)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &err);
    REQ(t != NULL, "%s", err.message);
    REQ(crl_td_set(td, key, t, &err) == CRL_OK, "%s", err.message);
    crl_tensor_unref(t);
    return crl_td_get(td, key);
}

/* A batch of n items, item k with sequence number seq[k]; pix bytes per
 * item in "pix". */
static crl_td *make_batch_pix(const uint64_t *seq, size_t n, int64_t pix)
{
    crl_error err;
    int64_t b = (int64_t)n;
    crl_td *td = crl_td_new(1, &b, &err);
    REQ(td != NULL, "%s", err.message);
    int64_t s1[] = { b }, s2[] = { b, 2 }, s3[] = { b, 3 }, sp[] = { b, pix };
    crl_tensor *tseq = leaf(td, "seq", CRL_I64, 1, s1);
    crl_tensor *obs = leaf(td, "obs", CRL_F32, 2, s3);
    crl_tensor *act = leaf(td, "action", CRL_I64, 2, s2);
    crl_tensor *rew = leaf(td, "next.reward", CRL_F64, 1, s1);
    crl_tensor *done = leaf(td, "next.done", CRL_BOOL, 1, s1);
    crl_tensor *h = leaf(td, "next.deep.half", CRL_F16, 2, s2);
    crl_tensor *i16 = leaf(td, "i16", CRL_I16, 1, s1);
    crl_tensor *px = leaf(td, "pix", CRL_U8, 2, sp);
    for (size_t k = 0; k < n; k++) {
        uint64_t s = seq[k];
        ((int64_t *)crl_tensor_data(tseq))[k] = (int64_t)s;
        for (int j = 0; j < 3; j++)
            ((float *)crl_tensor_data(obs))[k * 3 + j] = (float)(s % 100000) * 0.5f + (float)j;
        ((int64_t *)crl_tensor_data(act))[k * 2] = -(int64_t)s;
        ((int64_t *)crl_tensor_data(act))[k * 2 + 1] = (int64_t)(s * 3);
        ((double *)crl_tensor_data(rew))[k] = (double)s / 7.0;
        ((uint8_t *)crl_tensor_data(done))[k] = (uint8_t)(s % 2);
        ((uint16_t *)crl_tensor_data(h))[k * 2] = crl_float_to_half((float)(s % 1000));
        ((uint16_t *)crl_tensor_data(h))[k * 2 + 1] = crl_float_to_half(-1.5f);
        ((int16_t *)crl_tensor_data(i16))[k] = (int16_t)(s * 13);
        uint8_t *p = (uint8_t *)crl_tensor_data(px) + k * (size_t)pix;
        for (int64_t j = 0; j < pix; j++)
            p[j] = (uint8_t)(s * 131u + (uint64_t)j * 7u);
    }
    return td;
}

static crl_td *make_batch(const uint64_t *seq, size_t n)
{
    return make_batch_pix(seq, n, PIX);
}

static crl_td *make_one(uint64_t seq)
{
    return make_batch(&seq, 1);
}

/* get(slot) must equal the item of sequence number seq. */
static void assert_slot(const crl_storage_ops *ops, void *st, int64_t slot, uint64_t seq)
{
    crl_error err;
    crl_td *got = ops->get(st, &slot, 1, &err);
    ck_assert_msg(got != NULL, "get slot %" PRId64 ": %s", slot, err.message);
    crl_td *want = make_one(seq);
    ck_assert_msg(crl_td_equal(got, want), "slot %" PRId64 " does not hold item %" PRIu64, slot, seq);
    crl_td_unref(got);
    crl_td_unref(want);
}

static int set_seqs(const crl_storage_ops *ops, void *st, const int64_t *idx, const uint64_t *seq, size_t n,
                    crl_error *err)
{
    crl_td *b = make_batch(seq, n);
    int rc = ops->set(st, idx, n, b, err);
    crl_td_unref(b);
    return rc;
}

/* ---- round trips -------------------------------------------------------------- */

static void roundtrip(const char *name, void *st)
{
    const crl_storage_ops *ops = ops_of(name);
    crl_error err;
    ck_assert_int_eq(ops->len(st), 0);
    ck_assert_uint_eq(ops->write_count(st), 0);
    /* A run of consecutive slots (fast path) and scattered ones. */
    int64_t run[] = { 0, 1, 2, 3, 4 };
    uint64_t s1[] = { 10, 11, 12, 13, 14 };
    ck_assert_msg(set_seqs(ops, st, run, s1, 5, &err) == CRL_OK, "%s", err.message);
    int64_t scat[] = { 7, 5 };
    uint64_t s2[] = { 17, 15 };
    ck_assert_msg(set_seqs(ops, st, scat, s2, 2, &err) == CRL_OK, "%s", err.message);
    ck_assert_int_eq(ops->len(st), 8);
    ck_assert_uint_eq(ops->write_count(st), 7);
    for (int64_t i = 0; i < 8; i++)
        ck_assert_int_eq(ops->has ? ops->has(st, i) : true, i != 6);
    ck_assert(!ops->has(st, 8));
    ck_assert(!ops->has(st, -1));
    /* Stacked get in any order, with repeats. */
    int64_t q[] = { 4, 0, 7, 0, 5 };
    crl_td *got = ops->get(st, q, 5, &err);
    ck_assert_msg(got != NULL, "%s", err.message);
    uint64_t ws[] = { 14, 10, 17, 10, 15 };
    crl_td *want = make_batch(ws, 5);
    ck_assert(crl_td_equal(got, want));
    ck_assert_ptr_nonnull(crl_td_get(got, "next.deep.half"));
    crl_td_unref(got);
    crl_td_unref(want);
    /* Overwrite one slot. */
    int64_t one = 2;
    uint64_t s3 = 99;
    ck_assert_int_eq(set_seqs(ops, st, &one, &s3, 1, &err), CRL_OK);
    assert_slot(ops, st, 2, 99);
    assert_slot(ops, st, 3, 13);
    /* Empty and out-of-range slots. */
    int64_t empty = 6, far = 20, neg = -1;
    ck_assert_ptr_null(ops->get(st, &empty, 1, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    ck_assert_msg(strstr(err.message, "slot 6") != NULL, "%s", err.message);
    ck_assert_ptr_null(ops->get(st, &far, 1, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    ck_assert_int_eq(set_seqs(ops, st, &neg, &s3, 1, &err), CRL_E_RANGE);
    ck_assert_int_eq(set_seqs(ops, st, &far, &s3, 1, &err), CRL_E_RANGE);
    ck_assert_uint_eq(ops->write_count(st), 8);
    /* A batch whose first dim does not match n. */
    crl_td *b = make_one(5);
    int64_t two[] = { 0, 1 };
    ck_assert_int_eq(ops->set(st, two, 2, b, &err), CRL_E_SHAPE);
    crl_td_unref(b);
    /* clear empties everything. */
    ck_assert_int_eq(ops->clear(st, &err), CRL_OK);
    ck_assert_int_eq(ops->len(st), 0);
    ck_assert_uint_eq(ops->write_count(st), 0);
    ck_assert(!ops->has(st, 0));
    ck_assert_int_eq(set_seqs(ops, st, &one, &s3, 1, &err), CRL_OK);
    assert_slot(ops, st, 2, 99);
    ck_assert_int_eq(ops->len(st), 3);
}

START_TEST(test_registered)
{
    ck_assert_ptr_nonnull(crl_host_find(g_host, CRL_KIND_STORAGE, "list"));
    ck_assert_ptr_nonnull(crl_host_find(g_host, CRL_KIND_STORAGE, "tensor"));
    const crl_component *m = crl_host_find(g_host, CRL_KIND_STORAGE, "memmap");
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(ops_of("memmap")->sync);
    ck_assert_ptr_null(ops_of("tensor")->sync);
    /* dir is required. */
    crl_error err;
    void *st = NULL;
    ck_assert_int_ne(open_storage("memmap", "", 4, &st, &err), CRL_OK);
    ck_assert_msg(strstr(err.message, "dir") != NULL, "%s", err.message);
    ck_assert_int_eq(open_storage("tensor", "", 0, &st, &err), CRL_E_INVALID);
    ck_assert_int_eq(open_storage("list", "", -3, &st, &err), CRL_E_INVALID);
}
END_TEST

START_TEST(test_roundtrip_list)
{
    void *st;
    crl_error err;
    ck_assert_int_eq(open_storage("list", NULL, 16, &st, &err), CRL_OK);
    roundtrip("list", st);
    ops_of("list")->close(st);
}
END_TEST

START_TEST(test_roundtrip_tensor)
{
    void *st;
    crl_error err;
    ck_assert_int_eq(open_storage("tensor", NULL, 16, &st, &err), CRL_OK);
    roundtrip("tensor", st);
    ops_of("tensor")->close(st);
}
END_TEST

START_TEST(test_roundtrip_memmap)
{
    void *st;
    crl_error err;
    ck_assert_msg(open_memmap(subdir("m"), NULL, 16, &st, &err) == CRL_OK, "%s", err.message);
    roundtrip("memmap", st);
    ops_of("memmap")->close(st);
    ck_assert_msg(open_memmap(subdir("c"), "sync = commit", 16, &st, &err) == CRL_OK, "%s", err.message);
    roundtrip("memmap", st);
    ck_assert_int_eq(ops_of("memmap")->sync(st, &err), CRL_OK);
    ops_of("memmap")->close(st);
}
END_TEST

/* A non-contiguous item batch (a strided view) is stored by value. */
START_TEST(test_strided_items)
{
    const char *names[] = { "list", "tensor", "memmap" };
    for (int s = 0; s < 3; s++) {
        void *st;
        crl_error err;
        int rc = s == 2 ? open_memmap(subdir("strided"), NULL, 8, &st, &err) : open_storage(names[s], NULL, 8, &st, &err);
        ck_assert_int_eq(rc, CRL_OK);
        const crl_storage_ops *ops = ops_of(names[s]);
        uint64_t seq[] = { 1, 2, 3, 4, 5, 6 };
        crl_td *b = make_batch(seq, 6);
        crl_td *every2 = crl_td_slice(b, 0, 0, 6, 2, &err); /* items 1, 3, 5 */
        ck_assert_ptr_nonnull(every2);
        int64_t idx[] = { 3, 4, 5 };
        ck_assert_msg(ops->set(st, idx, 3, every2, &err) == CRL_OK, "%s: %s", names[s], err.message);
        assert_slot(ops, st, 3, 1);
        assert_slot(ops, st, 4, 3);
        assert_slot(ops, st, 5, 5);
        /* A slot given twice in one set keeps the last item. */
        int64_t twice[] = { 6, 7, 6 };
        uint64_t tseq[] = { 40, 41, 42 };
        ck_assert_int_eq(set_seqs(ops, st, twice, tseq, 3, &err), CRL_OK);
        assert_slot(ops, st, 6, 42);
        assert_slot(ops, st, 7, 41);
        if (s == 2) {
            ops->close(st);
            ck_assert_int_eq(open_memmap(subdir("strided"), NULL, 8, &st, &err), CRL_OK);
            assert_slot(ops, st, 6, 42);
            assert_slot(ops, st, 4, 3);
        }
        crl_td_unref(every2);
        crl_td_unref(b);
        ops->close(st);
    }
}
END_TEST

/* ---- layouts ------------------------------------------------------------------ */

/* Replace key `key` of a one-item batch by a tensor of dtype dt, shape [1, d]. */
static crl_td *variant(uint64_t seq, const char *key, crl_dtype dt, int64_t d)
{
    crl_error err;
    crl_td *b = make_one(seq);
    int64_t shape[] = { 1, d };
    crl_tensor *t = crl_tensor_new(dt, d ? 2 : 1, shape, &err);
    ck_assert_int_eq(crl_td_set(b, key, t, &err), CRL_OK);
    crl_tensor_unref(t);
    return b;
}

static void layout_mismatches(const char *name, void *st)
{
    const crl_storage_ops *ops = ops_of(name);
    crl_error err;
    int64_t slot = 0, other = 1;
    uint64_t s = 5;
    ck_assert_int_eq(set_seqs(ops, st, &slot, &s, 1, &err), CRL_OK);

    crl_td *b = variant(6, "obs", CRL_F32, 4);
    ck_assert_int_eq(ops->set(st, &other, 1, b, &err), CRL_E_SHAPE);
    ck_assert_msg(strstr(err.message, "'obs'") && strstr(err.message, "float32[4]") && strstr(err.message, "float32[3]"),
                  "%s", err.message);
    crl_td_unref(b);

    b = variant(6, "action", CRL_I32, 2);
    ck_assert_int_eq(ops->set(st, &other, 1, b, &err), CRL_E_DTYPE);
    ck_assert_msg(strstr(err.message, "'action'") && strstr(err.message, "int32[2]"), "%s", err.message);
    crl_td_unref(b);

    b = make_one(6);
    ck_assert_int_eq(crl_td_del(b, "next.reward", &err), CRL_OK);
    ck_assert_int_eq(ops->set(st, &other, 1, b, &err), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(err.message, "'next.reward'") && strstr(err.message, "missing"), "%s", err.message);
    crl_td_unref(b);

    b = variant(6, "next.extra", CRL_F32, 0);
    ck_assert_int_eq(ops->set(st, &other, 1, b, &err), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(err.message, "'next.extra'"), "%s", err.message);
    crl_td_unref(b);

    /* Nothing was written by the refused sets. */
    ck_assert(!ops->has(st, 1));
    ck_assert_uint_eq(ops->write_count(st), 1);
    ck_assert_int_eq(ops->len(st), 1);
    assert_slot(ops, st, 0, 5);
}

START_TEST(test_layout_tensor)
{
    void *st;
    crl_error err;
    ck_assert_int_eq(open_storage("tensor", NULL, 4, &st, &err), CRL_OK);
    layout_mismatches("tensor", st);
    ops_of("tensor")->close(st);
}
END_TEST

START_TEST(test_layout_memmap)
{
    void *st;
    crl_error err;
    ck_assert_int_eq(open_memmap(subdir("lay"), NULL, 4, &st, &err), CRL_OK);
    layout_mismatches("memmap", st);
    ops_of("memmap")->close(st);
}
END_TEST

START_TEST(test_empty_item_refused)
{
    void *st;
    crl_error err;
    ck_assert_int_eq(open_storage("tensor", NULL, 4, &st, &err), CRL_OK);
    int64_t one = 1, slot = 0;
    crl_td *b = crl_td_new(1, &one, &err);
    ck_assert_int_eq(ops_of("tensor")->set(st, &slot, 1, b, &err), CRL_E_INVALID);
    ck_assert(!ops_of("tensor")->has(st, 0));
    crl_td_unref(b);
    ops_of("tensor")->close(st);
}
END_TEST

START_TEST(test_list_varying_shapes)
{
    void *st;
    crl_error err;
    const crl_storage_ops *ops = ops_of("list");
    ck_assert_int_eq(open_storage("list", NULL, 4, &st, &err), CRL_OK);
    int64_t s0 = 0, s1 = 1, s2 = 2;
    uint64_t q = 3;
    crl_td *a = make_one(1);
    crl_td *b = variant(2, "obs", CRL_F32, 5);
    crl_td *c = make_batch_pix(&q, 1, 7);
    ck_assert_int_eq(ops->set(st, &s0, 1, a, &err), CRL_OK);
    ck_assert_int_eq(ops->set(st, &s1, 1, b, &err), CRL_OK);
    ck_assert_int_eq(ops->set(st, &s2, 1, c, &err), CRL_OK);
    crl_td *g = ops->get(st, &s1, 1, &err);
    ck_assert_ptr_nonnull(g);
    ck_assert(crl_td_equal(g, b));
    crl_td_unref(g);
    g = ops->get(st, &s2, 1, &err);
    ck_assert(crl_td_equal(g, c));
    crl_td_unref(g);
    int64_t both[] = { 0, 1 };
    ck_assert_ptr_null(ops->get(st, both, 2, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    ck_assert_msg(strstr(err.message, "one at a time") && strstr(err.message, "obs"), "%s", err.message);
    /* The stored items are clones: changing the caller's batch changes nothing. */
    ((float *)crl_tensor_data(crl_td_get(a, "obs")))[0] = 1234.0f;
    g = ops->get(st, &s0, 1, &err);
    ck_assert(((float *)crl_tensor_data(crl_td_get(g, "obs")))[0] != 1234.0f);
    crl_td_unref(g);
    crl_td_unref(a);
    crl_td_unref(b);
    crl_td_unref(c);
    ops->close(st);
}
END_TEST

/* ---- memmap: resume, refusal, damage ------------------------------------------ */

START_TEST(test_memmap_resume)
{
    const crl_storage_ops *ops = ops_of("memmap");
    const char *dir = subdir("resume/nested");
    void *st;
    crl_error err;
    ck_assert_msg(open_memmap(dir, NULL, 8, &st, &err) == CRL_OK, "%s", err.message);
    /* 10 items round-robin into 8 slots: slots 0, 1 hold items 9, 10. */
    for (uint64_t s = 1; s <= 10; s++) {
        int64_t slot = (int64_t)((s - 1) % 8);
        ck_assert_int_eq(set_seqs(ops, st, &slot, &s, 1, &err), CRL_OK);
    }
    ops->close(st);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    ck_assert_uint_eq(ops->write_count(st), 10);
    ck_assert_int_eq(ops->len(st), 8);
    for (int64_t j = 0; j < 8; j++) {
        ck_assert(ops->has(st, j));
        assert_slot(ops, st, j, j < 2 ? (uint64_t)j + 9 : (uint64_t)j + 1);
    }
    /* The writer resumes at write_count % capacity. */
    uint64_t s = 11;
    int64_t slot = (int64_t)(ops->write_count(st) % 8);
    ck_assert_int_eq(slot, 2);
    ck_assert_int_eq(set_seqs(ops, st, &slot, &s, 1, &err), CRL_OK);
    ops->close(st);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    ck_assert_uint_eq(ops->write_count(st), 11);
    assert_slot(ops, st, 2, 11);
    /* A second open of the same dir is refused while this one is open. */
    void *st2 = NULL;
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st2, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, "in use") && strstr(err.message, dir), "%s", err.message);
    ops->close(st);
}
END_TEST

START_TEST(test_memmap_refuse_other_capacity_or_layout)
{
    const crl_storage_ops *ops = ops_of("memmap");
    const char *dir = subdir("refuse");
    void *st;
    crl_error err;
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    int64_t slot = 0;
    uint64_t s = 1;
    ck_assert_int_eq(set_seqs(ops, st, &slot, &s, 1, &err), CRL_OK);
    ops->close(st);

    ck_assert_int_eq(open_memmap(dir, NULL, 16, &st, &err), CRL_E_CONFIG);
    ck_assert_msg(strstr(err.message, dir) && strstr(err.message, "capacity 8") && strstr(err.message, "16") &&
                      strstr(err.message, "delete"),
                  "%s", err.message);

    /* Same capacity, another layout: the first set says what differs. */
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    crl_td *b = variant(2, "obs", CRL_F32, 6);
    int64_t one = 1;
    ck_assert_int_eq(ops->set(st, &one, 1, b, &err), CRL_E_CONFIG);
    ck_assert_msg(strstr(err.message, dir) && strstr(err.message, "'obs'") && strstr(err.message, "float32[6]") &&
                      strstr(err.message, "new dir") && strstr(err.message, "delete"),
                  "%s", err.message);
    crl_td_unref(b);
    ck_assert(!ops->has(st, 1));
    assert_slot(ops, st, 0, 1); /* never stale data nor a mix */
    /* The stored layout still works. */
    s = 2;
    ck_assert_int_eq(set_seqs(ops, st, &one, &s, 1, &err), CRL_OK);
    ops->close(st);
}
END_TEST

static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    uint8_t c;
    ck_assert_int_eq(pread(fd, &c, 1, at), 1);
    c ^= 0x5a;
    ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

/* Bytes per slot of DIR/leaf-NNN.bin in a storage of `cap` slots. */
static off_t leaf_row(const char *dir, int leaf, int64_t cap)
{
    char path[600];
    struct stat sb;
    snprintf(path, sizeof path, "%s/leaf-%03d.bin", dir, leaf);
    ck_assert_msg(stat(path, &sb) == 0, "%s: %s", path, strerror(errno));
    return sb.st_size / cap;
}

/* A whole file, to show that something left it alone (free it). */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    struct stat sb;
    ck_assert_int_eq(fstat(fileno(f), &sb), 0);
    uint8_t *b = malloc((size_t)sb.st_size + 1);
    ck_assert_ptr_nonnull(b);
    *n = fread(b, 1, (size_t)sb.st_size, f);
    ck_assert_uint_eq(*n, (size_t)sb.st_size);
    fclose(f);
    return b;
}

static void assert_same_file(const char *path, const uint8_t *before, size_t n)
{
    size_t m;
    uint8_t *now = slurp(path, &m);
    ck_assert_msg(m == n && memcmp(now, before, n) == 0, "%s changed", path);
    free(now);
}

/* What a check reported through its callback. */
#define MAX_FOUND 16
static struct {
    int n;
    char file[MAX_FOUND][700];
    int64_t slot[MAX_FOUND], offset[MAX_FOUND];
    char reason[MAX_FOUND][1600];
} g_found;

static void on_finding(void *user, const crl_storage_finding *f)
{
    ck_assert_ptr_eq(user, &g_found);
    if (g_found.n < MAX_FOUND) {
        snprintf(g_found.file[g_found.n], sizeof g_found.file[0], "%s", f->file);
        snprintf(g_found.reason[g_found.n], sizeof g_found.reason[0], "%s", f->reason);
        g_found.slot[g_found.n] = f->slot;
        g_found.offset[g_found.n] = f->offset;
    }
    g_found.n++;
}

static int run_check(const char *dir, unsigned flags, crl_storage_report *r, crl_error *err)
{
    memset(&g_found, 0, sizeof g_found);
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
    r->finding = on_finding;
    r->user = &g_found;
    const crl_storage_ops *ops = ops_of("memmap");
    ck_assert_uint_ge(ops->struct_size, offsetof(crl_storage_ops, check) + sizeof ops->check);
    return ops->check(dir, flags, r, err);
}

/* verify = full: a flipped byte is an error naming the dir, slot, file and
 * byte, never a slot dropped in silence; check lists, repair drops. */
START_TEST(test_memmap_damage)
{
    const crl_storage_ops *ops = ops_of("memmap");
    const char *dir = subdir("damage");
    char path[600], want[900];
    void *st;
    crl_error err;
    crl_storage_report r;
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    int64_t idx[] = { 0, 1, 2, 3, 4, 5 };
    uint64_t seq[] = { 1, 2, 3, 4, 5, 6 };
    ck_assert_int_eq(set_seqs(ops, st, idx, seq, 6, &err), CRL_OK);
    ops->close(st);
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.capacity == 8 && r.items == 6 && r.bad_slots == 0 && r.bad_files == 0 && g_found.n == 0);

    /* One byte of slot 3's row in leaf-001.bin (its last). */
    off_t row1 = leaf_row(dir, 1, 8), at = 3 * row1 + row1 - 1;
    snprintf(path, sizeof path, "%s/leaf-001.bin", dir);
    flip_byte(path, at);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(open_memmap(dir, v ? "verify = full" : NULL, 8, &st, &err), CRL_E_CORRUPT);
        snprintf(want, sizeof want, "%s: slot 3 is damaged: %s: byte %lld (key '", dir, path, (long long)at);
        ck_assert_msg(strstr(err.message, want) && strstr(err.message, "1 damaged slot in all") &&
                          strstr(err.message, "nothing was dropped") && strstr(err.message, "crl replay check") &&
                          strstr(err.message, "crl replay repair"),
                      "%s", err.message);
    }
    /* verify = records trusts the records (a fast open, as documented). */
    ck_assert_int_eq(open_memmap(dir, "verify = records", 8, &st, &err), CRL_OK);
    ck_assert(ops->has(st, 3));
    ops->close(st);

    /* A damaged commit record (slot 5), and slot 1 with a byte changed in
     * each of two files (one byte cannot explain it). */
    snprintf(path, sizeof path, "%s/slots.bin", dir);
    flip_byte(path, 5 * 16 + 13);
    snprintf(path, sizeof path, "%s/leaf-000.bin", dir);
    flip_byte(path, leaf_row(dir, 0, 8));
    snprintf(path, sizeof path, "%s/leaf-002.bin", dir);
    flip_byte(path, leaf_row(dir, 2, 8));
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_E_CORRUPT);
    snprintf(want, sizeof want, "%s: slot 1 is damaged: %s: its rows in leaf-000.bin..leaf-007.bin", dir, dir);
    ck_assert_msg(strstr(err.message, want) && strstr(err.message, "more than one byte") &&
                      strstr(err.message, "3 damaged slots in all"),
                  "%s", err.message);
    /* verify = records finds the damaged record too. */
    ck_assert_int_eq(open_memmap(dir, "verify = records", 8, &st, &err), CRL_E_CORRUPT);
    snprintf(want, sizeof want, "slot 5 is damaged: %s/slots.bin: its commit record (16 bytes at offset 80)", dir);
    ck_assert_msg(strstr(err.message, want), "%s", err.message);

    /* check: each slot, in slot order, with its file, offset and reason. */
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert_int_eq(r.capacity, 8);
    ck_assert_int_eq(r.items, 3);
    ck_assert_int_eq(r.bad_slots, 3);
    ck_assert_int_eq(r.bad_files, 0);
    ck_assert_int_eq(r.dropped, 0);
    ck_assert_int_eq(g_found.n, 3);
    ck_assert_int_eq(g_found.slot[0], 1);
    ck_assert_str_eq(g_found.file[0], dir);
    ck_assert_int_eq(g_found.offset[0], -1);
    ck_assert_msg(strstr(g_found.reason[0], "more than one byte"), "%s", g_found.reason[0]);
    snprintf(path, sizeof path, "%s/leaf-001.bin", dir);
    ck_assert_int_eq(g_found.slot[1], 3);
    ck_assert_str_eq(g_found.file[1], path);
    ck_assert_int_eq(g_found.offset[1], (int64_t)at);
    ck_assert_msg(strstr(g_found.reason[1], "differs from what was committed"), "%s", g_found.reason[1]);
    snprintf(path, sizeof path, "%s/slots.bin", dir);
    ck_assert_int_eq(g_found.slot[2], 5);
    ck_assert_str_eq(g_found.file[2], path);
    ck_assert_int_eq(g_found.offset[2], 80);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_E_CORRUPT); /* a check changes nothing */

    /* repair: the three slots are emptied, no data file changes. */
    size_t n1;
    snprintf(path, sizeof path, "%s/leaf-001.bin", dir);
    uint8_t *leaf1 = slurp(path, &n1);
    ck_assert_int_eq(run_check(dir, CRL_STORAGE_REPAIR, &r, &err), CRL_OK);
    ck_assert(r.bad_slots == 3 && r.dropped == 3 && r.items == 3 && g_found.n == 3);
    assert_same_file(path, leaf1, n1);
    free(leaf1);
    ck_assert_msg(open_memmap(dir, NULL, 8, &st, &err) == CRL_OK, "%s", err.message);
    for (int64_t j = 0; j < 8; j++)
        ck_assert_int_eq(ops->has(st, j), j == 0 || j == 2 || j == 4);
    assert_slot(ops, st, 0, 1);
    assert_slot(ops, st, 2, 3);
    assert_slot(ops, st, 4, 5);
    ck_assert_int_eq(ops->len(st), 5);
    ck_assert_uint_eq(ops->write_count(st), 5);
    ops->close(st);
    ck_assert_int_eq(run_check(dir, CRL_STORAGE_REPAIR, &r, &err), CRL_OK);
    ck_assert(r.items == 3 && r.bad_slots == 0 && r.dropped == 0 && g_found.n == 0);
}
END_TEST

/* A missing header over committed items: refused on open, reported by
 * check, never guessed by repair; with the header back everything is there. */
START_TEST(test_memmap_missing_header)
{
    const crl_storage_ops *ops = ops_of("memmap");
    const char *dir = subdir("headless");
    char path[600], hdr[600], bak[600], want[900];
    void *st;
    crl_error err;
    crl_storage_report r;
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    int64_t idx[] = { 2, 3, 4, 5, 6, 7 };
    uint64_t seq[] = { 3, 4, 5, 6, 7, 8 };
    ck_assert_int_eq(set_seqs(ops, st, idx, seq, 6, &err), CRL_OK);
    ops->close(st);
    snprintf(hdr, sizeof hdr, "%s/header", dir);
    snprintf(bak, sizeof bak, "%s/header.bak", dir);
    ck_assert_int_eq(rename(hdr, bak), 0);
    size_t ns, nl;
    snprintf(path, sizeof path, "%s/slots.bin", dir);
    uint8_t *slots = slurp(path, &ns);
    char lpath[600];
    snprintf(lpath, sizeof lpath, "%s/leaf-007.bin", dir);
    uint8_t *leaf = slurp(lpath, &nl);

    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_E_CORRUPT);
    snprintf(want, sizeof want, "%s/header is missing but %s/slots.bin holds 6 committed items (the first in slot 2)",
             dir, dir);
    ck_assert_msg(strstr(err.message, want) && strstr(err.message, "nothing was opened") &&
                      strstr(err.message, "copy it"),
                  "%s", err.message);
    ck_assert_int_eq(open_memmap(dir, "verify = records", 8, &st, &err), CRL_E_CORRUPT);
    assert_same_file(path, slots, ns);
    assert_same_file(lpath, leaf, nl);

    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.capacity == -1 && r.items == 0 && r.bad_files == 1 && r.bad_slots == 0);
    ck_assert_int_eq(g_found.n, 1);
    ck_assert_str_eq(g_found.file[0], hdr);
    ck_assert_int_eq(g_found.slot[0], -1);
    ck_assert_msg(strstr(g_found.reason[0], "missing, and slots.bin holds 6 committed items (the first in slot 2)"),
                  "%s", g_found.reason[0]);
    ck_assert_int_eq(run_check(dir, CRL_STORAGE_REPAIR, &r, &err), CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, "refusing to repair") && strstr(err.message, dir) &&
                      strstr(err.message, "cannot be rebuilt") && strstr(err.message, "nothing was changed"),
                  "%s", err.message);
    ck_assert_int_eq(r.dropped, 0);
    ck_assert_int_ne(access(hdr, F_OK), 0);
    assert_same_file(path, slots, ns);
    assert_same_file(lpath, leaf, nl);
    free(slots);
    free(leaf);

    /* The header back (a copy from a storage of the same settings would do): all there. */
    ck_assert_int_eq(rename(bak, hdr), 0);
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.capacity == 8 && r.items == 6 && r.bad_files == 0 && r.bad_slots == 0);
    ck_assert_msg(open_memmap(dir, NULL, 8, &st, &err) == CRL_OK, "%s", err.message);
    for (int64_t j = 2; j < 8; j++)
        assert_slot(ops, st, j, (uint64_t)j + 1);
    ck_assert_uint_eq(ops->write_count(st), 6);
    /* No committed record and no header (as a first set cut short before
     * its header leaves it): an empty storage, no error. */
    ck_assert_int_eq(ops->clear(st, &err), CRL_OK);
    ops->close(st);
    ck_assert_int_eq(unlink(hdr), 0);
    ck_assert_int_eq(run_check(dir, CRL_STORAGE_REPAIR, &r, &err), CRL_OK);
    ck_assert(r.capacity == -1 && r.items == 0 && r.bad_files == 0 && r.dropped == 0 && g_found.n == 0);
    ck_assert_msg(open_memmap(dir, NULL, 8, &st, &err) == CRL_OK, "%s", err.message);
    ck_assert_int_eq(ops->len(st), 0);
    int64_t one = 1;
    uint64_t s1 = 42;
    ck_assert_int_eq(set_seqs(ops, st, &one, &s1, 1, &err), CRL_OK);
    ops->close(st);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    assert_slot(ops, st, 1, 42);
    ops->close(st);
}
END_TEST

/* What open and check refuse, and what they do not call damage. */
START_TEST(test_memmap_check_refusals)
{
    const crl_storage_ops *ops = ops_of("memmap");
    const char *dir = subdir("refusals");
    char path[600];
    void *st;
    crl_error err;
    crl_storage_report r;
    /* No storage there: nothing is touched, not even a lock file. */
    ck_assert_int_eq(run_check(subdir("nowhere"), 0, &r, &err), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(err.message, "does not exist"), "%s", err.message);
    ck_assert_int_eq(mkdir(subdir("empty"), 0755), 0);
    ck_assert_int_eq(run_check(subdir("empty"), CRL_STORAGE_REPAIR, &r, &err), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(err.message, "holds no memmap storage"), "%s", err.message);
    snprintf(path, sizeof path, "%s/lock", subdir("empty"));
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(ops->check(NULL, 0, &r, &err), CRL_E_INVALID);
    ck_assert_int_eq(ops->check(dir, 0, NULL, &err), CRL_E_INVALID);

    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    int64_t idx[] = { 0, 1, 2 };
    uint64_t seq[] = { 1, 2, 3 };
    ck_assert_int_eq(set_seqs(ops, st, idx, seq, 3, &err), CRL_OK);
    /* Never under a writer. */
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, "open in another process") && strstr(err.message, dir), "%s", err.message);
    ops->close(st);

    /* A record whose sequence number is 0 is empty whatever else it holds
     * (a kill between writing its checksums and its sequence number). */
    snprintf(path, sizeof path, "%s/slots.bin", dir);
    flip_byte(path, 6 * 16 + 9);
    flip_byte(path, 6 * 16 + 14);
    ck_assert_msg(open_memmap(dir, NULL, 8, &st, &err) == CRL_OK, "%s", err.message);
    ck_assert(!ops->has(st, 6));
    ops->close(st);
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.items == 3 && r.bad_slots == 0 && g_found.n == 0);

    /* A caller that knows a shorter report gets only that much written. */
    memset(&r, 0x77, sizeof r);
    r.struct_size = (uint32_t)offsetof(crl_storage_report, bad_slots);
    r.finding = NULL;
    ck_assert_int_eq(ops->check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.capacity == 8 && r.items == 3);
    int64_t poison;
    memset(&poison, 0x77, sizeof poison);
    ck_assert(r.bad_slots == poison && r.bad_files == poison && r.dropped == poison);

    /* A damaged header. */
    snprintf(path, sizeof path, "%s/header", dir);
    flip_byte(path, 20);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "offset"), "%s", err.message);
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.bad_files == 1 && g_found.n == 1 && r.capacity == -1);
    ck_assert_str_eq(g_found.file[0], path);
    ck_assert_msg(!strncmp(g_found.reason[0], "offset ", 7) && strstr(g_found.reason[0], "3 committed items"), "%s",
                  g_found.reason[0]);
    ck_assert_int_eq(run_check(dir, CRL_STORAGE_REPAIR, &r, &err), CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, "header is damaged") && strstr(err.message, "nothing was changed"), "%s",
                  err.message);
    flip_byte(path, 20);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_OK);
    ops->close(st);

    /* A truncated leaf file and a missing one. */
    snprintf(path, sizeof path, "%s/leaf-001.bin", dir);
    ck_assert_int_eq(truncate(path, 10), 0);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, path), "%s", err.message);
    ck_assert_int_eq(run_check(dir, 0, &r, &err), CRL_OK);
    ck_assert(r.bad_files == 1 && r.bad_slots == 0 && r.items == 0 && g_found.n == 1);
    ck_assert_str_eq(g_found.file[0], path);
    ck_assert_msg(strstr(g_found.reason[0], "holds 10 bytes, but the header says"), "%s", g_found.reason[0]);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(open_memmap(dir, NULL, 8, &st, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, path), "%s", err.message);
    ck_assert_int_eq(run_check(dir, CRL_STORAGE_REPAIR, &r, &err), CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, "refusing to repair") && strstr(err.message, "1 of its files is missing"), "%s",
                  err.message);
    ck_assert(g_found.n == 1 && strstr(g_found.reason[0], "missing"));
    ck_assert_str_eq(g_found.file[0], path);
}
END_TEST

/* ---- durability: kill -9 a writer at random moments --------------------------- */

#define DUR_CAP 48
#define DUR_MAXB 6
#define DUR_PIX 16384

static crl_td *dur_batch(uint64_t first, size_t n)
{
    uint64_t seq[DUR_MAXB];
    for (size_t k = 0; k < n; k++)
        seq[k] = first + k;
    return make_batch_pix(seq, n, DUR_PIX);
}

/* The child: resume the storage and write forever, reporting each
 * acknowledged write count through the pipe after set returns. */
static void dur_child(const char *dir, const char *ini, unsigned seed, int fd)
{
    const crl_storage_ops *ops = ops_of("memmap");
    void *st;
    crl_error err;
    if (open_memmap(dir, ini, DUR_CAP, &st, &err) != CRL_OK) {
        fprintf(stderr, "child open: %s\n", err.message);
        _exit(2);
    }
    time_t start = time(NULL);
    while (time(NULL) - start < 20) {
        uint64_t wc = ops->write_count(st);
        size_t b = 1 + (size_t)(rand_r(&seed) % DUR_MAXB);
        int64_t idx[DUR_MAXB];
        for (size_t k = 0; k < b; k++)
            idx[k] = (int64_t)((wc + k) % DUR_CAP);
        crl_td *items = dur_batch(wc + 1, b);
        uint64_t intent = (wc + b) | ((uint64_t)1 << 63);
        if (write(fd, &intent, sizeof intent) != (ssize_t)sizeof intent)
            _exit(4);
        if (ops->set(st, idx, b, items, &err) != CRL_OK) {
            fprintf(stderr, "child set: %s\n", err.message);
            _exit(3);
        }
        crl_td_unref(items);
        uint64_t acked = wc + b;
        if (write(fd, &acked, sizeof acked) != (ssize_t)sizeof acked)
            _exit(4);
    }
    _exit(5);
}

/* Sequence number stored in slot j, after checking the whole item. */
static uint64_t dur_check_slot(const crl_storage_ops *ops, void *st, int64_t j)
{
    crl_error err;
    crl_td *got = ops->get(st, &j, 1, &err);
    ck_assert_msg(got != NULL, "slot %" PRId64 ": %s", j, err.message);
    uint64_t seq = (uint64_t)((int64_t *)crl_tensor_data(crl_td_get(got, "seq")))[0];
    ck_assert_msg(seq >= 1 && (seq - 1) % DUR_CAP == (uint64_t)j, "slot %" PRId64 " holds seq %" PRIu64, j, seq);
    crl_td *want = dur_batch(seq, 1);
    ck_assert_msg(crl_td_equal(got, want), "slot %" PRId64 " holds a half-written item (seq %" PRIu64 ")", j, seq);
    crl_td_unref(want);
    crl_td_unref(got);
    return seq;
}

START_TEST(test_memmap_kill9)
{
    const crl_storage_ops *ops = ops_of("memmap");
    const char *dir = subdir("kill9");
    bool valgrind = getenv("CRL_TEST_VALGRIND") != NULL;
    const char *env_cycles = getenv("CRL_REPLAY_KILL_CYCLES");
    int cycles = env_cycles ? atoi(env_cycles) : valgrind ? 8 : 60;
    unsigned seed = (unsigned)time(NULL);
    const char *env_seed = getenv("CRL_REPLAY_KILL_SEED");
    if (env_seed)
        seed = (unsigned)strtoul(env_seed, NULL, 10);
    const unsigned seed0 = seed;
    uint64_t prev_acked = 0;
    int mid_write = 0;
    for (int c = 0; c < cycles; c++) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        /* Every combination of sync and verify, in the child and on reopen. */
        const char *child_ini[] = { "", "sync = commit", "verify = records", "sync = commit\nverify = records", "" };
        unsigned child_seed = seed * 7919u + (unsigned)c;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            g_scenario = true; /* no Check calls in the child */
            dur_child(dir, child_ini[c % 5], child_seed, fds[1]);
        }
        close(fds[1]);
        /* Let it write for 1..25 ms (longer under valgrind), then kill -9. */
        unsigned delay = 1000 + (unsigned)(rand_r(&seed) % 24000);
        usleep(valgrind ? delay * 20 : delay);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                      "cycle %d: the writer died on its own (status 0x%x; seed %u)", c, status, seed0);
        uint64_t acked = prev_acked, v, intent = 0;
        ssize_t r;
        while ((r = read(fds[0], &v, sizeof v)) == (ssize_t)sizeof v) {
            if (v >> 63)
                intent = v & ~((uint64_t)1 << 63);
            else
                acked = v;
        }
        close(fds[0]);

        void *st;
        crl_error err;
        ck_assert_msg(open_memmap(dir, c % 2 ? "verify = records" : NULL, DUR_CAP, &st, &err) == CRL_OK,
                      "cycle %d: %s", c, err.message);
        uint64_t wc = ops->write_count(st);
        /* Everything acknowledged is there; at most one unacknowledged set more. */
        ck_assert_msg(wc >= acked && wc <= acked + DUR_MAXB, "cycle %d: write_count %" PRIu64 ", acked %" PRIu64
                      " (seed %u)", c, wc, acked, seed0);
        for (int64_t j = 0; j < DUR_CAP; j++) {
            /* The newest acknowledged sequence number for slot j. */
            uint64_t s_j = 0;
            if (acked >= (uint64_t)j + 1)
                s_j = acked - ((acked - 1 - (uint64_t)j) % DUR_CAP);
            bool in_flight = s_j ? s_j + DUR_CAP <= acked + DUR_MAXB : (uint64_t)j + 1 <= acked + DUR_MAXB;
            if (!ops->has(st, j)) {
                if (!(s_j == 0 || in_flight)) {
                    char sp[700];
                    snprintf(sp, sizeof sp, "%s/slots.bin", dir);
                    FILE *f = fopen(sp, "rb");
                    uint8_t rec[16] = { 0 };
                    if (f) {
                        fseek(f, (long)j * 16, SEEK_SET);
                        if (fread(rec, 1, 16, f) != 16)
                            memset(rec, 0xee, 16);
                        fclose(f);
                    }
                    int nfilled = 0;
                    for (int64_t q = 0; q < DUR_CAP; q++)
                        nfilled += ops->has(st, q);
                    uint64_t rseq;
                    memcpy(&rseq, rec, 8);
                    ck_abort_msg("cycle %d: slot %" PRId64 " lost acknowledged item %" PRIu64 " (acked %" PRIu64
                                 ", write_count %" PRIu64 ", %d slots filled, record seq %" PRIu64 ", intent %" PRIu64 "; seed %u)",
                                 c, j, s_j, acked, wc, nfilled, rseq, intent, seed0);
                }
                if (s_j)
                    mid_write++;
                continue;
            }
            uint64_t got = dur_check_slot(ops, st, j);
            if (!in_flight)
                ck_assert_msg(got == s_j, "cycle %d: slot %" PRId64 " holds %" PRIu64 ", expected %" PRIu64, c, j, got,
                              s_j);
            else
                ck_assert_msg(got == s_j || got == s_j + DUR_CAP || (s_j == 0 && got == (uint64_t)j + 1),
                              "cycle %d: slot %" PRId64 " holds %" PRIu64 " (acked %" PRIu64 ")", c, j, got, acked);
        }
        ops->close(st);
        /* The next child resumes at the reopened write count, which may
         * include a set that finished but was not reported. */
        prev_acked = wc;
    }
    /* How often a kill landed mid-write (empty slots); informative only. */
    fprintf(stderr, "kill9: %d cycles, %d slots torn by a kill (seed %u)\n", cycles, mid_write, seed0);
}
END_TEST

/* ---- ENOSPC through the LD_PRELOAD shim ----------------------------------------- */

#define E_CHECK(cond, ...)                                                                                   \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "enospc: line %d: ", __LINE__);                                                  \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fprintf(stderr, "\n");                                                                           \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

static crl_td *small_item(uint64_t seq)
{
    crl_error err;
    int64_t shape[] = { 1, 10 };
    crl_td *td = crl_td_new(1, shape, &err);
    crl_tensor *t = crl_tensor_new(CRL_F32, 2, shape, &err);
    for (int i = 0; i < 10; i++)
        ((float *)crl_tensor_data(t))[i] = (float)(seq * 10 + (uint64_t)i);
    crl_td_set(td, "x", t, &err);
    crl_tensor_unref(t);
    return td;
}

static int small_set(const crl_storage_ops *ops, void *st, int64_t slot, uint64_t seq, crl_error *err)
{
    crl_td *b = small_item(seq);
    int rc = ops->set(st, &slot, 1, b, err);
    crl_td_unref(b);
    return rc;
}

static bool small_is(const crl_storage_ops *ops, void *st, int64_t slot, uint64_t seq)
{
    crl_error err;
    crl_td *g = ops->get(st, &slot, 1, &err);
    crl_td *w = small_item(seq);
    bool ok = g && crl_td_equal(g, w);
    crl_td_unref(g);
    crl_td_unref(w);
    return ok;
}

/* Runs in a process with the shim preloaded; 0 when every check passed. */
static int enospc_scenario(void)
{
    E_CHECK(dlsym(RTLD_DEFAULT, "crl_enospc_shim_active") != NULL, "the shim is not preloaded");
    const crl_storage_ops *ops = ops_of("memmap");
    crl_error err;
    void *st;
    const char *dir = subdir("full");
    /* Leaf files may hold 30 rows of 40 bytes. */
    setenv("CRL_ENOSPC_MATCH", "leaf-", 1);
    setenv("CRL_ENOSPC_LIMIT", "1200", 1);
    E_CHECK(open_memmap(dir, NULL, 100, &st, &err) == CRL_OK, "%s", err.message);
    for (int64_t j = 0; j < 30; j++)
        E_CHECK(small_set(ops, st, j, (uint64_t)j + 1, &err) == CRL_OK, "slot %" PRId64 ": %s", j, err.message);
    int rc = small_set(ops, st, 30, 31, &err);
    E_CHECK(rc == CRL_E_IO, "slot 30: code %d", rc);
    E_CHECK(strstr(err.message, "no space left") && strstr(err.message, "leaf-000.bin") && strstr(err.message, dir),
            "message: %s", err.message);
    E_CHECK(!ops->has(st, 30), "slot 30 filled");
    /* A batch running off the end: the slots that fit are written. */
    int64_t idx[] = { 27, 28, 29, 30, 31 };
    uint64_t seq[] = { 101, 102, 103, 104, 105 };
    crl_td *b = crl_td_new(1, (int64_t[]){ 5 }, &err);
    crl_tensor *x = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 5, 10 }, &err);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 10; i++)
            ((float *)crl_tensor_data(x))[k * 10 + i] = (float)(seq[k] * 10 + (uint64_t)i);
    crl_td_set(b, "x", x, &err);
    crl_tensor_unref(x);
    rc = ops->set(st, idx, 5, b, &err);
    crl_td_unref(b);
    E_CHECK(rc == CRL_E_IO && strstr(err.message, "3 of 5 items written"), "batch: %d %s", rc, err.message);
    E_CHECK(small_is(ops, st, 29, 103) && small_is(ops, st, 27, 101), "the slots that fit were not written");
    E_CHECK(!ops->has(st, 30) && !ops->has(st, 31), "slots past the limit filled");
    E_CHECK(ops->write_count(st) == 33, "write_count %" PRIu64, ops->write_count(st));
    E_CHECK(small_set(ops, st, 5, 500, &err) == CRL_OK && small_is(ops, st, 5, 500), "rewrite of slot 5");
    ops->close(st);
    /* Reopen while the disk is still full: what fits stays usable. */
    E_CHECK(open_memmap(dir, NULL, 100, &st, &err) == CRL_OK, "reopen: %s", err.message);
    E_CHECK(ops->write_count(st) == 34 && ops->len(st) == 30, "reopen: wc %" PRIu64 " len %" PRId64,
            ops->write_count(st), ops->len(st));
    E_CHECK(small_is(ops, st, 5, 500) && small_is(ops, st, 28, 102), "reopen contents");
    E_CHECK(small_set(ops, st, 12, 600, &err) == CRL_OK, "reopen set: %s", err.message);
    E_CHECK(small_set(ops, st, 40, 601, &err) == CRL_E_IO, "reopen set past the limit");
    /* Space freed: the storage carries on. */
    unsetenv("CRL_ENOSPC_LIMIT");
    E_CHECK(small_set(ops, st, 40, 601, &err) == CRL_OK && small_is(ops, st, 40, 601), "after freeing: %s",
            err.message);
    E_CHECK(small_set(ops, st, 99, 602, &err) == CRL_OK, "after freeing, last slot: %s", err.message);
    ops->close(st);

    /* A disk with no room at all: the first set fails cleanly, nothing is
     * left half-made, and the storage works once there is room. */
    const char *dir2 = subdir("full0");
    setenv("CRL_ENOSPC_MATCH", "", 1);
    setenv("CRL_ENOSPC_LIMIT", "0", 1);
    E_CHECK(open_memmap(dir2, NULL, 10, &st, &err) == CRL_OK, "%s", err.message);
    rc = small_set(ops, st, 0, 1, &err);
    E_CHECK(rc == CRL_E_IO && strstr(err.message, "no space left") && strstr(err.message, "slots.bin"), "%d %s", rc,
            err.message);
    E_CHECK(!ops->has(st, 0) && ops->len(st) == 0, "filled after ENOSPC");
    unsetenv("CRL_ENOSPC_LIMIT");
    E_CHECK(small_set(ops, st, 0, 1, &err) == CRL_OK && small_is(ops, st, 0, 1), "after room: %s", err.message);
    ops->close(st);
    return 0;
}

START_TEST(test_memmap_enospc)
{
    if (dlsym(RTLD_DEFAULT, "crl_enospc_shim_active")) {
        ck_assert_int_eq(enospc_scenario(), 0);
        return;
    }
    /* Re-run this binary with the shim preloaded, in the scenario-only
     * mode; a SIGBUS would show as a signal here. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    ck_assert_msg(access(ENOSPC_SHIM, R_OK) == 0, "%s is missing: make check builds it", ENOSPC_SHIM);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *pre = getenv("LD_PRELOAD");
        char preload[8192];
        snprintf(preload, sizeof preload, "%s%s%s", pre && *pre ? pre : "", pre && *pre ? ":" : "", ENOSPC_SHIM);
        setenv("LD_PRELOAD", preload, 1);
        /* Under ASan the runtime must come first in the library list; the
         * shim only wraps the fallocate calls, so the order does not
         * matter to it. */
        const char *asan = getenv("ASAN_OPTIONS");
        char asan_opts[1024];
        snprintf(asan_opts, sizeof asan_opts, "%s%sverify_asan_link_order=0", asan && *asan ? asan : "",
                 asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", asan_opts, 1);
        setenv("CRL_TEST_ENOSPC_SCENARIO", "1", 1);
        execl(self, self, (char *)NULL);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(!WIFSIGNALED(status), "the ENOSPC scenario died of signal %d", WTERMSIG(status));
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the ENOSPC scenario failed (exit %d)",
                  WEXITSTATUS(status));
}
END_TEST

/* ---- dump / load --------------------------------------------------------------- */

static void fill_some(const crl_storage_ops *ops, void *st)
{
    crl_error err;
    int64_t idx[] = { 0, 1, 2, 5, 6 };
    uint64_t seq[] = { 1, 2, 3, 6, 7 };
    ck_assert_msg(set_seqs(ops, st, idx, seq, 5, &err) == CRL_OK, "%s", err.message);
}

static void same_contents(const crl_storage_ops *a, void *sa, const crl_storage_ops *b, void *sb)
{
    crl_error err;
    ck_assert_int_eq(a->len(sa), b->len(sb));
    ck_assert_uint_eq(a->write_count(sa), b->write_count(sb));
    for (int64_t j = 0; j < 8; j++) {
        ck_assert_int_eq(a->has(sa, j), b->has(sb, j));
        if (!a->has(sa, j))
            continue;
        crl_td *x = a->get(sa, &j, 1, &err), *y = b->get(sb, &j, 1, &err);
        ck_assert(x && y && crl_td_equal(x, y));
        crl_td_unref(x);
        crl_td_unref(y);
    }
}

static int open_named(const char *name, const char *dirname, void **st, crl_error *err)
{
    if (strcmp(name, "memmap") == 0)
        return open_memmap(subdir(dirname), NULL, 8, st, err);
    return open_storage(name, NULL, 8, st, err);
}

static void dump_load(const char *from, const char *to)
{
    const crl_storage_ops *fo = ops_of(from), *to_ops = ops_of(to);
    crl_error err;
    void *a, *b;
    char dname[64], ckdir[600], src[64], dst[64];
    snprintf(src, sizeof src, "src-%s-%s", from, to);
    snprintf(dst, sizeof dst, "dst-%s-%s", from, to);
    ck_assert_int_eq(open_named(from, src, &a, &err), CRL_OK);
    fill_some(fo, a);
    snprintf(dname, sizeof dname, "ck-%s-%s", from, to);
    snprintf(ckdir, sizeof ckdir, "%s", subdir(dname));
    ck_assert_int_eq(mkdir(ckdir, 0755), 0);
    ck_assert_msg(fo->dump(a, ckdir, &err) == CRL_OK, "%s", err.message);
    ck_assert_msg(open_named(to, dst, &b, &err) == CRL_OK, "%s", err.message);
    ck_assert_msg(to_ops->load(b, ckdir, &err) == CRL_OK, "%s -> %s: %s", from, to, err.message);
    same_contents(fo, a, to_ops, b);
    fo->close(a);
    to_ops->close(b);
    if (strcmp(to, "memmap") == 0) {
        /* What load wrote is durable: a reopen finds it. */
        ck_assert_int_eq(open_named(to, dst, &b, &err), CRL_OK);
        ck_assert_int_eq(to_ops->len(b), 7);
        ck_assert_uint_eq(to_ops->write_count(b), 5);
        assert_slot(to_ops, b, 6, 7);
        ck_assert(!to_ops->has(b, 4));
        to_ops->close(b);
    }
}

START_TEST(test_dump_load_roundtrip)
{
    const char *names[] = { "list", "tensor", "memmap" };
    for (int i = 0; i < 3; i++)
        dump_load(names[i], names[i]);
    dump_load("tensor", "memmap");
    dump_load("memmap", "tensor");
}
END_TEST

START_TEST(test_dump_load_empty)
{
    const char *names[] = { "list", "tensor", "memmap" };
    for (int i = 0; i < 3; i++) {
        const crl_storage_ops *ops = ops_of(names[i]);
        crl_error err;
        void *a, *b;
        char n1[32], n2[32], ck[32];
        snprintf(n1, sizeof n1, "e1-%s", names[i]);
        snprintf(n2, sizeof n2, "e2-%s", names[i]);
        snprintf(ck, sizeof ck, "eck-%s", names[i]);
        ck_assert_int_eq(open_named(names[i], n1, &a, &err), CRL_OK);
        ck_assert_int_eq(mkdir(subdir(ck), 0755), 0);
        ck_assert_msg(ops->dump(a, subdir(ck), &err) == CRL_OK, "%s", err.message);
        ck_assert_int_eq(open_named(names[i], n2, &b, &err), CRL_OK);
        fill_some(ops, b);
        ck_assert_msg(ops->load(b, subdir(ck), &err) == CRL_OK, "%s", err.message);
        ck_assert_int_eq(ops->len(b), 0);
        ck_assert(!ops->has(b, 0));
        ops->close(a);
        ops->close(b);
    }
}
END_TEST

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    ck_assert(a && b);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, b), n);
    fclose(a);
    fclose(b);
}

/* Damage the dump in every way we can think of: each load fails naming the
 * file, and the storage keeps what it held. */
static void damaged_loads(const char *name)
{
    const crl_storage_ops *ops = ops_of(name);
    crl_error err;
    void *a, *b;
    char n1[32], n2[32], ck[32], good[600], file[700], saved[700];
    snprintf(n1, sizeof n1, "d1-%s", name);
    snprintf(n2, sizeof n2, "d2-%s", name);
    snprintf(ck, sizeof ck, "dck-%s", name);
    ck_assert_int_eq(open_named(name, n1, &a, &err), CRL_OK);
    fill_some(ops, a);
    snprintf(good, sizeof good, "%s", subdir(ck));
    ck_assert_int_eq(mkdir(good, 0755), 0);
    ck_assert_int_eq(ops->dump(a, good, &err), CRL_OK);
    snprintf(file, sizeof file, "%s/storage.ckpt", good);
    snprintf(saved, sizeof saved, "%s/saved", g_tmp);
    copy_file(file, saved);
    struct stat sb;
    ck_assert_int_eq(stat(file, &sb), 0);

    ck_assert_int_eq(open_named(name, n2, &b, &err), CRL_OK);
    int64_t slot = 3;
    uint64_t seq = 77;
    ck_assert_int_eq(set_seqs(ops, b, &slot, &seq, 1, &err), CRL_OK);

    /* Flipped bytes at many offsets (header, table, sections, payload). */
    int flips = 0;
    for (off_t at = 0; at < sb.st_size; at += sb.st_size / 37 + 1) {
        copy_file(saved, file);
        flip_byte(file, at);
        int rc = ops->load(b, good, &err);
        ck_assert_msg(rc == CRL_E_CORRUPT, "%s: flip at %lld loaded (%d: %s)", name, (long long)at, rc, err.message);
        ck_assert_msg(strstr(err.message, file) != NULL, "%s", err.message);
        flips++;
    }
    ck_assert_int_gt(flips, 30);
    /* Truncated at several lengths. */
    off_t cuts[] = { 0, 7, sb.st_size / 3, sb.st_size - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        copy_file(saved, file);
        ck_assert_int_eq(truncate(file, cuts[i]), 0);
        int rc = ops->load(b, good, &err);
        ck_assert_msg(rc == CRL_E_CORRUPT || rc == CRL_E_IO, "%s: truncated to %lld loaded", name, (long long)cuts[i]);
        ck_assert_msg(strstr(err.message, file) != NULL, "%s", err.message);
    }
    /* Missing. */
    ck_assert_int_eq(unlink(file), 0);
    ck_assert_int_eq(ops->load(b, good, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, file) != NULL, "%s", err.message);
    /* The storage kept its contents through every failure. */
    ck_assert_int_eq(ops->len(b), 4);
    ck_assert_uint_eq(ops->write_count(b), 1);
    assert_slot(ops, b, 3, 77);
    ck_assert(!ops->has(b, 0));
    /* And the intact file still loads. */
    copy_file(saved, file);
    ck_assert_msg(ops->load(b, good, &err) == CRL_OK, "%s", err.message);
    same_contents(ops, a, ops, b);
    ops->close(a);
    ops->close(b);
}

START_TEST(test_load_damaged_list)
{
    damaged_loads("list");
}
END_TEST

START_TEST(test_load_damaged_tensor)
{
    damaged_loads("tensor");
}
END_TEST

START_TEST(test_load_damaged_memmap)
{
    damaged_loads("memmap");
}
END_TEST

/* The list storage's dump holds each leaf's elements little-endian, and refuses a bool that is not 0 or 1. */
START_TEST(test_list_dump_little_endian)
{
    const crl_storage_ops *ops = ops_of("list");
    crl_error err;
    void *st;
    ck_assert_int_eq(open_storage("list", NULL, 4, &st, &err), CRL_OK);
    int64_t one = 1, two[2] = { 1, 2 };
    crl_td *b = crl_td_new(1, &one, &err);
    crl_tensor *x = leaf(b, "x", CRL_I32, 2, two);
    crl_tensor_flat_set(x, 0, (double)0x01020304);
    crl_tensor_flat_set(x, 1, -2);
    crl_tensor *d = leaf(b, "done", CRL_BOOL, 2, (int64_t[]){ 1, 1 });
    crl_tensor_flat_set(d, 0, 1);
    int64_t slot = 0;
    ck_assert_msg(ops->set(st, &slot, 1, b, &err) == CRL_OK, "%s", err.message);
    char *dir = subdir("le-list"), file[700], bad[700];
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_msg(ops->dump(st, dir, &err) == CRL_OK, "%s", err.message);
    snprintf(file, sizeof file, "%s/storage.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/saved", g_tmp);
    size_t len;
    uint8_t *items = ckpt_edit_section(file, "crl.storage.list", "items", &len), want[8];
    ckpt_le_u32(want, 0x01020304u);
    ckpt_le_u32(want + 4, (uint32_t)-2);
    ck_assert_msg(memmem(items, len, want, 8) != NULL, "the int32 leaf is not little-endian in 'items'");
    /* The bool is a byte 1; a 2 in its place is refused, naming the file. */
    void *st2;
    ck_assert_int_eq(open_storage("list", NULL, 4, &st2, &err), CRL_OK);
    ck_assert_msg(ops->load(st2, dir, &err) == CRL_OK, "%s", err.message);
    ck_assert_int_eq(ops->len(st2), 1);
    int found = 0;
    for (size_t i = 0; i < len; i++) {
        if (items[i] != 1)
            continue;
        /* Whichever byte 1 is the bool, 2 there makes a file no load accepts silently. */
        items[i] = 2;
        ckpt_edit_replace(file, bad, "crl.storage.list", "items", items, len);
        items[i] = 1;
        copy_file(bad, file);
        int rc = ops->load(st2, dir, &err);
        if (rc == CRL_E_CORRUPT && strstr(err.message, "bool leaf 'done': byte 2, not 0 or 1")) {
            ck_assert_msg(strstr(err.message, file) != NULL, "%s", err.message);
            found++;
        }
        ckpt_edit_replace(bad, file, "crl.storage.list", "items", items, len);
    }
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(ops->len(st2), 1);
    g_free(items);
    crl_td_unref(b);
    ops->close(st);
    ops->close(st2);
}
END_TEST

START_TEST(test_load_other_capacity)
{
    const char *names[] = { "list", "tensor", "memmap" };
    for (int i = 0; i < 3; i++) {
        const crl_storage_ops *ops = ops_of(names[i]);
        crl_error err;
        void *a, *b;
        char n1[32], n2[32], ck[32];
        snprintf(n1, sizeof n1, "c1-%s", names[i]);
        snprintf(n2, sizeof n2, "c2-%s", names[i]);
        snprintf(ck, sizeof ck, "cck-%s", names[i]);
        ck_assert_int_eq(open_named(names[i], n1, &a, &err), CRL_OK);
        fill_some(ops, a);
        ck_assert_int_eq(mkdir(subdir(ck), 0755), 0);
        ck_assert_int_eq(ops->dump(a, subdir(ck), &err), CRL_OK);
        int rc = strcmp(names[i], "memmap") == 0 ? open_memmap(subdir(n2), NULL, 9, &b, &err)
                                                 : open_storage(names[i], NULL, 9, &b, &err);
        ck_assert_int_eq(rc, CRL_OK);
        ck_assert_int_eq(ops->load(b, subdir(ck), &err), CRL_E_CONFIG);
        ck_assert_msg(strstr(err.message, "capacity 8") && strstr(err.message, "storage.ckpt"), "%s", err.message);
        ck_assert_int_eq(ops->len(b), 0);
        ops->close(a);
        ops->close(b);
    }
}
END_TEST

START_TEST(test_memmap_load_other_layout)
{
    const crl_storage_ops *ops = ops_of("memmap");
    crl_error err;
    void *a, *b;
    ck_assert_int_eq(open_storage("tensor", NULL, 8, &a, &err), CRL_OK);
    crl_td *v = variant(1, "obs", CRL_F32, 9);
    int64_t slot = 0;
    ck_assert_int_eq(ops_of("tensor")->set(a, &slot, 1, v, &err), CRL_OK);
    crl_td_unref(v);
    ck_assert_int_eq(mkdir(subdir("olck"), 0755), 0);
    ck_assert_int_eq(ops_of("tensor")->dump(a, subdir("olck"), &err), CRL_OK);
    ck_assert_int_eq(open_memmap(subdir("ol"), NULL, 8, &b, &err), CRL_OK);
    fill_some(ops, b);
    ck_assert_int_eq(ops->load(b, subdir("olck"), &err), CRL_E_CONFIG);
    ck_assert_msg(strstr(err.message, "'obs'") && strstr(err.message, subdir("ol")), "%s", err.message);
    assert_slot(ops, b, 6, 7);
    ops_of("tensor")->close(a);
    ops->close(b);
}
END_TEST

static Suite *replay_storage_suite(void)
{
    Suite *s = suite_create("replay_storage");
    TCase *tc = tcase_create("storages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    if (getenv("CRL_REPLAY_ONLY_KILL")) { /* tests/replay-soak.sh */
        tcase_add_test(tc, test_memmap_kill9);
        suite_add_tcase(s, tc);
        return s;
    }
    tcase_add_test(tc, test_registered);
    tcase_add_test(tc, test_roundtrip_list);
    tcase_add_test(tc, test_roundtrip_tensor);
    tcase_add_test(tc, test_roundtrip_memmap);
    tcase_add_test(tc, test_strided_items);
    tcase_add_test(tc, test_layout_tensor);
    tcase_add_test(tc, test_layout_memmap);
    tcase_add_test(tc, test_empty_item_refused);
    tcase_add_test(tc, test_list_varying_shapes);
    tcase_add_test(tc, test_memmap_resume);
    tcase_add_test(tc, test_memmap_refuse_other_capacity_or_layout);
    tcase_add_test(tc, test_memmap_damage);
    tcase_add_test(tc, test_memmap_missing_header);
    tcase_add_test(tc, test_memmap_check_refusals);
    tcase_add_test(tc, test_memmap_kill9);
    tcase_add_test(tc, test_memmap_enospc);
    tcase_add_test(tc, test_dump_load_roundtrip);
    tcase_add_test(tc, test_dump_load_empty);
    tcase_add_test(tc, test_load_damaged_list);
    tcase_add_test(tc, test_load_damaged_tensor);
    tcase_add_test(tc, test_load_damaged_memmap);
    tcase_add_test(tc, test_load_other_capacity);
    tcase_add_test(tc, test_list_dump_little_endian);
    tcase_add_test(tc, test_memmap_load_other_layout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (getenv("CRL_TEST_ENOSPC_SCENARIO")) {
        crl_error err;
        g_scenario = true;
        if (!host_setup(&err)) {
            fprintf(stderr, "enospc scenario: %s\n", err.message);
            return 1;
        }
        int rc = enospc_scenario();
        teardown();
        return rc;
    }
    SRunner *sr = srunner_create(replay_storage_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
