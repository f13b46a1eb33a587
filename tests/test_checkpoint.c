/* Check suite for checkpoint files and directories (crl/checkpoint.h): round trips, every corruption class, ENOSPC, dir commit. */
#include <check.h>
#include <crl/checkpoint.h>
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------- */

#include "scratch-dir.h"
#include "ckpt-edit.h"

static void setup(void)
{
    scratch_open("crl-ckpt-test-XXXXXX");
}

static void teardown(void)
{
    scratch_close();
}

static uint8_t *slurp(const char *path, size_t *len)
{
    gchar *buf;
    gsize n;
    ck_assert_msg(g_file_get_contents(path, &buf, &n, NULL), "cannot read %s", path);
    *len = n;
    return (uint8_t *)buf;
}

static void spit(const char *path, const void *buf, size_t len)
{
    ck_assert(g_file_set_contents(path, buf, (gssize)len, NULL));
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the table and header CRCs after patching a file, so the
 * validation past the checksums is what a test exercises. */
static void refix(uint8_t *b, size_t len)
{
    uint64_t toff = rd64(b + 24), tsize = rd64(b + 32);
    if (toff <= len && tsize <= len - toff)
        wr32(b + 40, crl_crc32(0, b + toff, (size_t)tsize));
    uint32_t klen = rd32(b + 20);
    size_t hend = (48 + klen + 7) & ~(size_t)7;
    if (klen <= 255 && hend <= len)
        wr32(b + 44, crl_crc32(crl_crc32(0, b, 44), b + 48, hend - 48));
}

/* File offset of table entry i. */
static size_t entry_at(const uint8_t *b, unsigned i)
{
    size_t p = (size_t)rd64(b + 24);
    for (unsigned k = 0; k < i; k++)
        p += 24 + (b[p + 20] | b[p + 21] << 8);
    return p;
}

static crl_td *make_td(void)
{
    crl_error err;
    int64_t bs[1] = {2};
    crl_td *td = crl_td_new(1, bs, &err);
    int64_t s23[2] = {2, 3}, s21[2] = {2, 1};
    crl_tensor *obs = crl_tensor_new(CRL_F32, 2, s23, &err);
    for (int i = 0; i < 6; i++)
        crl_tensor_flat_set(obs, i, i * 0.5);
    crl_tensor *rew = crl_tensor_new(CRL_F32, 2, s21, &err);
    crl_tensor_flat_set(rew, 1, -1.25);
    crl_tensor *done = crl_tensor_new(CRL_BOOL, 1, bs, &err);
    crl_tensor_flat_set(done, 1, 1);
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.reward", rew, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "done", done, &err), CRL_OK);
    crl_tensor_unref(obs);
    crl_tensor_unref(rew);
    crl_tensor_unref(done);
    return td;
}

/* A small checkpoint: three plain sections and a TensorDict under "data". */
static void write_sample(const char *path)
{
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 3, &err);
    ck_assert_msg(w != NULL, "%s", err.message);
    ck_assert_int_eq(crl_ckpt_write(w, "alpha", "hello", 5, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_write(w, "empty", NULL, 0, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_write(w, "beta", "thirteen byte", 13, &err), CRL_OK);
    crl_td *td = make_td();
    ck_assert_int_eq(crl_ckpt_write_td(w, "data", td, &err), CRL_OK);
    crl_td_unref(td);
    ck_assert_msg(crl_ckpt_writer_close(w, &err) == CRL_OK, "%s", err.message);
}

/* Open a buffer that must be refused as corrupt; the message must start
 * with "NAME: offset " and contain `want` (when given). */
static void expect_corrupt_buf(const uint8_t *b, size_t len, const char *want)
{
    crl_error err;
    crl_ckpt_reader *r = crl_ckpt_reader_open_buffer("buf.ckpt", b, len, "crl.test", 3, &err);
    ck_assert_msg(r == NULL, "accepted a corrupt file (want '%s')", want ? want : "");
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(g_str_has_prefix(err.message, "buf.ckpt: offset "), "message: %s", err.message);
    if (want)
        ck_assert_msg(strstr(err.message, want), "message '%s' lacks '%s'", err.message, want);
}

/* ---- CRC and plain sections --------------------------------------------------- */

START_TEST(test_crc32)
{
    ck_assert_uint_eq(crl_crc32(0, "123456789", 9), 0xCBF43926u);
    uint32_t c = crl_crc32(0, "1234", 4);
    ck_assert_uint_eq(crl_crc32(c, "56789", 5), 0xCBF43926u);
    ck_assert_uint_eq(crl_crc32(0, NULL, 0), 0);
    ck_assert_uint_eq(crl_crc32(7, "", 0), 7);
}
END_TEST

START_TEST(test_sections_round_trip)
{
    char *path = tpath("s.ckpt");
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 2, &err);
    ck_assert_ptr_nonnull(w);
    size_t big_len = 300000;
    uint8_t *big = g_malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (uint8_t)(i * 2654435761u >> 13);
    ck_assert_int_eq(crl_ckpt_write(w, "z-first", "abc", 3, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_write(w, "empty", NULL, 0, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_write(w, "big", big, big_len, &err), CRL_OK);
    char name255[256];
    memset(name255, 'n', 255);
    name255[255] = '\0';
    ck_assert_int_eq(crl_ckpt_write(w, name255, "x", 1, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);

    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 2, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_uint_eq(crl_ckpt_kind_version(r), 2);
    ck_assert_str_eq(crl_ckpt_path(r), path);
    ck_assert_uint_eq(crl_ckpt_section_count(r), 4);
    ck_assert_str_eq(crl_ckpt_section_name(r, 0), "z-first");
    ck_assert_str_eq(crl_ckpt_section_name(r, 1), "empty");
    ck_assert_str_eq(crl_ckpt_section_name(r, 2), "big");
    ck_assert_str_eq(crl_ckpt_section_name(r, 3), name255);
    ck_assert_ptr_null(crl_ckpt_section_name(r, 4));
    ck_assert(crl_ckpt_has(r, "big"));
    ck_assert(!crl_ckpt_has(r, "bigger"));
    size_t len = 99;
    const void *p = crl_ckpt_section(r, "big", &len, &err);
    ck_assert_uint_eq(len, big_len);
    ck_assert(memcmp(p, big, big_len) == 0);
    p = crl_ckpt_section(r, "empty", &len, &err);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(len, 0);
    char abc[3];
    ck_assert_int_eq(crl_ckpt_read(r, "z-first", abc, 3, &err), CRL_OK);
    ck_assert(memcmp(abc, "abc", 3) == 0);
    /* Wrong size and missing sections name the file, the section and both sizes. */
    ck_assert_int_eq(crl_ckpt_read(r, "z-first", abc, 2, &err), CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "'z-first' holds 3 bytes; expected 2"), "%s",
                  err.message);
    ck_assert_ptr_null(crl_ckpt_section(r, "missing", &len, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "no section 'missing'") &&
                      strstr(err.message, "'big'"),
                  "%s", err.message);
    crl_ckpt_reader_free(r);
    crl_ckpt_reader_free(NULL);

    /* An older reader refuses the newer kind version. */
    r = crl_ckpt_reader_open(path, "crl.test", 1, &err);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, "offset 12") && strstr(err.message, "version 2 is newer") &&
                      strstr(err.message, "upgrade crl"),
                  "%s", err.message);
    /* Another kind is refused with both names. */
    r = crl_ckpt_reader_open(path, "crl.other", 9, &err);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, "'crl.test'") && strstr(err.message, "'crl.other'"), "%s", err.message);
    g_free(big);
    g_free(path);
}
END_TEST

START_TEST(test_empty_checkpoint)
{
    char *path = tpath("e.ckpt");
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "k", 0, &err);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "k", 0, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_uint_eq(crl_ckpt_section_count(r), 0);
    ck_assert_ptr_null(crl_ckpt_section(r, "x", NULL, &err));
    ck_assert_msg(strstr(err.message, "sections: none"), "%s", err.message);
    crl_ckpt_reader_free(r);
    g_free(path);
}
END_TEST

START_TEST(test_writer_errors)
{
    char *path = tpath("w.ckpt");
    crl_error err;
    ck_assert_ptr_null(crl_ckpt_writer_new(path, "", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_ckpt_writer_new(NULL, "k", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    char *nodir = tpath("no/such/dir/w.ckpt");
    ck_assert_ptr_null(crl_ckpt_writer_new(nodir, "k", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(strstr(err.message, nodir), "%s", err.message);

    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "k", 1, &err);
    ck_assert_int_eq(crl_ckpt_write(w, "a", "1", 1, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_write(w, "a", "2", 1, &err), CRL_E_EXISTS);
    ck_assert_msg(strstr(err.message, "'a'") && strstr(err.message, path), "%s", err.message);
    ck_assert_int_eq(crl_ckpt_write(w, "", "2", 1, &err), CRL_E_INVALID);
    char name256[257];
    memset(name256, 'n', 256);
    name256[256] = '\0';
    ck_assert_int_eq(crl_ckpt_write(w, name256, "2", 1, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_ckpt_write(w, "b", NULL, 4, &err), CRL_E_INVALID);
    crl_td *td = make_td();
    ck_assert_int_eq(crl_ckpt_write_td(w, "", td, &err), CRL_E_INVALID);
    char longp[250];
    memset(longp, 'p', 249);
    longp[249] = '\0';
    ck_assert_int_eq(crl_ckpt_write_td(w, longp, td, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_ckpt_write_td(w, "t", td, &err), CRL_OK);
    /* The same prefix twice collides on section names. */
    ck_assert_int_eq(crl_ckpt_write_td(w, "t", td, &err), CRL_E_EXISTS);
    crl_td_unref(td);
    /* The file still closes fine after refused calls. */
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "k", 1, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_uint_eq(crl_ckpt_section_count(r), 5);
    crl_ckpt_reader_free(r);

    /* Abort removes the file. */
    w = crl_ckpt_writer_new(path, "k", 1, &err);
    ck_assert_int_eq(crl_ckpt_write(w, "a", "1", 1, &err), CRL_OK);
    crl_ckpt_writer_abort(w);
    ck_assert(!g_file_test(path, G_FILE_TEST_EXISTS));
    crl_ckpt_writer_abort(NULL);
    ck_assert_int_eq(crl_ckpt_writer_close(NULL, &err), CRL_E_INVALID);
    g_free(nodir);
    g_free(path);
}
END_TEST

/* ---- TensorDicts -------------------------------------------------------------- */

static crl_td *round_trip_td(const crl_td *td, const char *prefix)
{
    char *path = tpath("td.ckpt");
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    ck_assert_int_eq(crl_ckpt_write(w, "before", "x", 1, &err), CRL_OK);
    ck_assert_msg(crl_ckpt_write_td(w, prefix, td, &err) == CRL_OK, "%s", err.message);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    crl_td *back = crl_ckpt_read_td(r, prefix, &err);
    ck_assert_msg(back != NULL, "%s", err.message);
    crl_ckpt_reader_free(r);
    g_free(path);
    return back;
}

START_TEST(test_td_all_dtypes_nested)
{
    crl_error err;
    int64_t bs[2] = {3, 2};
    crl_td *td = crl_td_new(2, bs, &err);
    for (int dt = 0; dt < CRL_DTYPE_COUNT; dt++) {
        int64_t shape[3] = {3, 2, dt + 1};
        crl_tensor *t = crl_tensor_new((crl_dtype)dt, 3, shape, &err);
        for (int64_t i = 0; i < crl_tensor_numel(t); i++)
            crl_tensor_flat_set(t, i, dt == CRL_BOOL ? (double)(i % 2) : (double)(i * 3 % 17) - 5 * (dt >= CRL_I8));
        char *key = g_strdup_printf("leaf_%s", crl_dtype_name((crl_dtype)dt));
        ck_assert_int_eq(crl_td_set(td, key, t, &err), CRL_OK);
        char *nkey = g_strdup_printf("deep.er.%s", key);
        ck_assert_int_eq(crl_td_set(td, nkey, t, &err), CRL_OK);
        g_free(key);
        g_free(nkey);
        crl_tensor_unref(t);
    }
    /* A nested TensorDict with a longer batch shape, an empty one, an empty tensor. */
    int64_t bs3[3] = {3, 2, 4};
    crl_td *sub = crl_td_new(3, bs3, &err);
    int64_t s4[4] = {3, 2, 4, 5};
    crl_tensor *t4 = crl_tensor_new(CRL_F64, 4, s4, &err);
    crl_tensor_fill(t4, 2.5);
    ck_assert_int_eq(crl_td_set(sub, "pixels", t4, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set_td(td, "agents", sub, &err), CRL_OK);
    crl_td *empty = crl_td_new(2, bs, &err);
    ck_assert_int_eq(crl_td_set_td(td, "nothing", empty, &err), CRL_OK);
    int64_t s0[4] = {3, 2, 4, 0};
    crl_tensor *t0 = crl_tensor_new(CRL_I64, 4, s0, &err);
    ck_assert_int_eq(crl_td_set(td, "agents.zero", t0, &err), CRL_OK);
    crl_tensor_unref(t4);
    crl_tensor_unref(t0);
    crl_td_unref(sub);
    crl_td_unref(empty);

    crl_td *back = round_trip_td(td, "replay/data");
    ck_assert(crl_td_equal(td, back));
    ck_assert_int_eq(crl_td_batch_ndim(crl_td_get_td(back, "agents")), 3);
    ck_assert_ptr_nonnull(crl_td_get_td(back, "nothing"));
    ck_assert_uint_eq(crl_td_len(crl_td_get_td(back, "nothing")), 0);
    ck_assert(crl_tensor_is_contiguous(crl_td_get(back, "agents.pixels")));
    crl_td_unref(back);
    crl_td_unref(td);
}
END_TEST

START_TEST(test_td_noncontiguous_and_scalar_batch)
{
    crl_error err;
    /* A permuted and a strided view are written contiguously. */
    int64_t s[2] = {4, 6};
    crl_tensor *base = crl_tensor_new(CRL_I32, 2, s, &err);
    for (int i = 0; i < 24; i++)
        crl_tensor_flat_set(base, i, i);
    int perm[2] = {1, 0};
    crl_tensor *pt = crl_tensor_permute(base, perm, &err);
    ck_assert(!crl_tensor_is_contiguous(pt));
    crl_tensor *sl = crl_tensor_slice(base, 1, 0, 6, 2, &err);
    crl_td *td = crl_td_new(0, NULL, &err);
    ck_assert_int_eq(crl_td_set(td, "t", pt, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "s", sl, &err), CRL_OK);
    crl_tensor *scalar = crl_tensor_new(CRL_F16, 0, NULL, &err);
    crl_tensor_fill(scalar, 1.5);
    ck_assert_int_eq(crl_td_set(td, "a.b.c.scalar", scalar, &err), CRL_OK);
    crl_td *back = round_trip_td(td, "x");
    ck_assert(crl_td_equal(td, back));
    int64_t idx[2] = {5, 3};
    ck_assert_double_eq(crl_tensor_get_f64(crl_td_get(back, "t"), idx), 3 * 6 + 5);
    crl_td_unref(back);
    crl_td_unref(td);

    /* An empty TensorDict with batch [0]. */
    int64_t z[1] = {0};
    td = crl_td_new(1, z, &err);
    back = round_trip_td(td, "e");
    ck_assert(crl_td_equal(td, back));
    ck_assert_int_eq(crl_td_batch_shape(back)[0], 0);
    crl_td_unref(back);
    crl_td_unref(td);
    crl_tensor_unref(base);
    crl_tensor_unref(pt);
    crl_tensor_unref(sl);
    crl_tensor_unref(scalar);
}
END_TEST

START_TEST(test_two_tds_one_file)
{
    char *path = tpath("two.ckpt");
    crl_error err;
    crl_td *a = make_td();
    crl_td *b = crl_td_clone(a, &err);
    crl_tensor_flat_set(crl_td_get(b, "observation"), 0, 42);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    ck_assert_int_eq(crl_ckpt_write_td(w, "a", a, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_write_td(w, "b", b, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, &err);
    crl_td *ra = crl_ckpt_read_td(r, "a", &err), *rb = crl_ckpt_read_td(r, "b", &err);
    ck_assert(crl_td_equal(a, ra) && crl_td_equal(b, rb) && !crl_td_equal(ra, rb));
    ck_assert_ptr_null(crl_ckpt_read_td(r, "c", &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, "no section 'c/td'"), "%s", err.message);
    crl_td_unref(ra);
    crl_td_unref(rb);
    crl_td_unref(a);
    crl_td_unref(b);
    crl_ckpt_reader_free(r);
    g_free(path);
}
END_TEST

/* ---- corruption: every byte, every length ---------------------------------------- */

START_TEST(test_every_flipped_byte_detected)
{
    char *path = tpath("f.ckpt");
    write_sample(path);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    ck_assert_uint_lt(len, 4096);
    crl_error err;
    crl_ckpt_reader *ok = crl_ckpt_reader_open_buffer("buf.ckpt", orig, len, "crl.test", 3, &err);
    ck_assert_msg(ok != NULL, "%s", err.message);
    crl_ckpt_reader_free(ok);
    uint8_t *b = g_malloc(len);
    static const uint8_t flips[] = {0x01, 0x80, 0xff};
    for (size_t off = 0; off < len; off++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(b, orig, len);
            b[off] ^= flips[f];
            crl_ckpt_reader *r = crl_ckpt_reader_open_buffer("buf.ckpt", b, len, "crl.test", 3, &err);
            ck_assert_msg(r == NULL, "flip 0x%02x at offset %zu of %zu went undetected", flips[f], off, len);
            ck_assert_int_eq(err.code, CRL_E_CORRUPT);
            ck_assert_msg(g_str_has_prefix(err.message, "buf.ckpt: offset "), "%s", err.message);
        }
    }
    /* Through the file path too: the message names the file. */
    memcpy(b, orig, len);
    b[len / 2] ^= 0x10;
    spit(path, b, len);
    ck_assert_ptr_null(crl_ckpt_reader_open(path, "crl.test", 3, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(g_str_has_prefix(err.message, path) && strstr(err.message, ": offset "), "%s", err.message);
    g_free(b);
    g_free(orig);
    g_free(path);
}
END_TEST

START_TEST(test_every_truncation_detected)
{
    char *path = tpath("t.ckpt");
    write_sample(path);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    crl_error err;
    for (size_t n = 0; n < len; n++) {
        crl_ckpt_reader *r = crl_ckpt_reader_open_buffer("buf.ckpt", orig, n, "crl.test", 3, &err);
        ck_assert_msg(r == NULL, "truncation to %zu of %zu bytes went undetected", n, len);
        ck_assert_int_eq(err.code, CRL_E_CORRUPT);
        ck_assert_msg(g_str_has_prefix(err.message, "buf.ckpt: offset "), "%s", err.message);
    }
    expect_corrupt_buf(orig, 10, "shorter than the 48-byte");
    expect_corrupt_buf(orig, len - 1, "truncated");
    /* A byte appended is caught as well. */
    uint8_t *longer = g_malloc(len + 1);
    memcpy(longer, orig, len);
    longer[len] = 0;
    expect_corrupt_buf(longer, len + 1, "1 unexpected bytes after the section table");
    /* A file truncated on disk. */
    ck_assert_int_eq(truncate(path, (off_t)(len - 8)), 0);
    ck_assert_ptr_null(crl_ckpt_reader_open(path, "crl.test", 3, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(strstr(err.message, path), "%s", err.message);
    g_free(longer);
    g_free(orig);
    g_free(path);
}
END_TEST

/* ---- corruption: crafted headers and tables (checksums fixed up) ------------------ */

START_TEST(test_crafted_headers)
{
    char *path = tpath("h.ckpt");
    write_sample(path);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    uint8_t *b = g_malloc(len);
#define PATCHED(stmt, want) \
    do { \
        memcpy(b, orig, len); \
        stmt; \
        refix(b, len); \
        expect_corrupt_buf(b, len, want); \
    } while (0)
    PATCHED(memcpy(b, "NOTCKPT!", 8), "bad magic");
    PATCHED(wr32(b + 8, 2), "format version 2 is newer");
    PATCHED(wr32(b + 8, 0), "format version 0 is invalid");
    PATCHED(wr32(b + 12, 4), "version 4 is newer than this crl reads (up to 3)");
    PATCHED(wr32(b + 16, 70000), "section count 70000 exceeds the limit 65536");
    PATCHED(wr32(b + 16, 0xffffffffu), "exceeds the limit");
    PATCHED(wr32(b + 16, rd32(orig + 16) + 1), "section table ends inside entry 7");
    PATCHED(wr32(b + 16, rd32(orig + 16) + 2), "does not fit");
    PATCHED(wr32(b + 20, 0), "kind length 0");
    PATCHED(wr32(b + 20, 4000), "kind length 4000");
    PATCHED(wr64(b + 24, UINT64_MAX - 3), "overflows");
    PATCHED(wr64(b + 32, UINT64_MAX), "overflows");
    PATCHED(wr64(b + 24, 8), "inside the header");
    PATCHED(wr64(b + 24, rd64(orig + 24) + 8); wr64(b + 32, rd64(orig + 32) - 8), NULL);
    PATCHED(b[48] = 'X', "holds a 'Xrl.test' checkpoint, expected 'crl.test'");
    /* An unfinished write leaves a zero header (no CRC fix-up here). */
    memcpy(b, orig, len);
    memset(b, 0, 56);
    expect_corrupt_buf(b, len, "the writer never finished");
    /* Header CRC itself. */
    memcpy(b, orig, len);
    b[44] ^= 1;
    expect_corrupt_buf(b, len, "header CRC-32 mismatch");
    /* A file that is not a checkpoint at all. */
    memset(b, 'A', len);
    expect_corrupt_buf(b, len, "bad magic");
#undef PATCHED
    g_free(b);
    g_free(orig);
    g_free(path);
}
END_TEST

START_TEST(test_crafted_tables)
{
    char *path = tpath("tab.ckpt");
    write_sample(path);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    uint8_t *b = g_malloc(len);
    /* Sample sections: 0 alpha (5), 1 empty (0), 2 beta (13), then data/... */
#define PATCHED(stmt, want) \
    do { \
        memcpy(b, orig, len); \
        stmt; \
        refix(b, len); \
        expect_corrupt_buf(b, len, want); \
    } while (0)
    size_t e0 = entry_at(orig, 0), e2 = entry_at(orig, 2);
    uint64_t off0 = rd64(orig + e0), off2 = rd64(orig + e2);
    /* Section 2 moved onto section 0: overlap. */
    PATCHED(wr64(b + e2, off0), "overlaps section 'empty'");
    PATCHED(wr64(b + e0, 8), "overlaps the header");
    /* offset + size wraps around. */
    PATCHED(wr64(b + e2 + 8, UINT64_MAX - off2 + 1), "overflows");
    PATCHED(wr64(b + e2 + 8, (uint64_t)1 << 40), "runs past the section area");
    PATCHED(wr64(b + e2, off2 + 8), "expected");
    PATCHED(b[e2 + 20] = 0; b[e2 + 21] = 0, "name length 0");
    PATCHED(b[e2 + 20] = 0x2c; b[e2 + 21] = 0x01, "name length 300");
    PATCHED(b[e2 + 22] = 1, "reserved bytes");
    PATCHED(b[e2 + 24] = 0, "holds a NUL byte");
    PATCHED(wr32(b + e2 + 16, rd32(orig + e2 + 16) ^ 1), "section 'beta' (13 bytes) fails its CRC-32 check");
    /* Padding between sections must be zero (alpha is 5 bytes: 3 bytes pad). */
    PATCHED(b[off0 + 5] = 7, "padding before section 'empty' is not zero");
#undef PATCHED
    /* Duplicate names: two sections of the same name built by hand. */
    {
        char *dpath = tpath("dup.ckpt");
        crl_error err;
        crl_ckpt_writer *w = crl_ckpt_writer_new(dpath, "crl.test", 3, &err);
        ck_assert_int_eq(crl_ckpt_write(w, "aa", "1234", 4, &err), CRL_OK);
        ck_assert_int_eq(crl_ckpt_write(w, "ab", "1234", 4, &err), CRL_OK);
        ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
        size_t dl;
        uint8_t *d = slurp(dpath, &dl);
        d[entry_at(d, 1) + 25] = 'a';
        refix(d, dl);
        expect_corrupt_buf(d, dl, "duplicate section name 'aa'");
        g_free(d);
        g_free(dpath);
    }
    g_free(b);
    g_free(orig);
    g_free(path);
}
END_TEST

START_TEST(test_missing_and_unreadable)
{
    crl_error err;
    char *path = tpath("nope.ckpt");
    ck_assert_ptr_null(crl_ckpt_reader_open(path, "crl.test", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "No such file"), "%s", err.message);
    ck_assert_ptr_null(crl_ckpt_reader_open(tmp_root, "crl.test", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(strstr(err.message, "directory"), "%s", err.message);
    ck_assert_ptr_null(crl_ckpt_reader_open(NULL, "crl.test", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    /* An empty file is corrupt, not missing. */
    spit(path, "", 0);
    ck_assert_ptr_null(crl_ckpt_reader_open(path, "crl.test", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_ptr_null(crl_ckpt_reader_open_buffer("b", NULL, 0, "crl.test", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    g_free(path);
}
END_TEST

/* ---- hostile files: never blocks, sizes from the header before any allocation --------------- */

/* A FIFO, a device, a socket-free stand-in for each: refused at once, naming the path and what it is. */
START_TEST(test_not_regular_files)
{
    crl_error err;
    char *fifo = tpath("fifo.ckpt");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(20); /* a blocking open ends the test loudly even with CK_FORK=no */
    ck_assert_ptr_null(crl_ckpt_reader_open(fifo, "crl.test", 1, &err));
    alarm(0);
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(g_str_has_prefix(err.message, fifo) && strstr(err.message, "it is a FIFO, not a regular file"),
                  "%s", err.message);
    ck_assert_ptr_null(crl_ckpt_reader_open("/dev/zero", "crl.test", 1, &err));
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(strstr(err.message, "/dev/zero: cannot open checkpoint: it is a character device"), "%s",
                  err.message);
    g_free(fifo);
}
END_TEST

/* A good checkpoint followed by a terabyte of zeros (a hole: the test costs nothing) is refused from its
 * header, which says where the file ends, before anything past the header is read or allocated. */
START_TEST(test_padded_file_refused_before_reading)
{
    char *path = tpath("padded.ckpt");
    write_sample(path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    uint64_t len = (uint64_t)st.st_size;
    if (truncate(path, (off_t)(len + (UINT64_C(1) << 40))) != 0) {
        fprintf(stderr, "test_padded_file_refused_before_reading: no 1 TiB sparse file here (%s); 1 GiB\n",
                g_strerror(errno));
        ck_assert_int_eq(truncate(path, (off_t)(len + (UINT64_C(1) << 30))), 0);
    }
    ck_assert_int_eq(stat(path, &st), 0);
    crl_error err;
    ck_assert_ptr_null(crl_ckpt_reader_open(path, "crl.test", 3, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    char *want = g_strdup_printf("%s: offset %" PRIu64 ": %" PRIu64 " unexpected bytes after the section table", path,
                                 len, (uint64_t)st.st_size - len);
    ck_assert_msg(g_str_has_prefix(err.message, want), "%s", err.message);
    ck_assert_msg(strstr(err.message, "cut the file back to"), "%s", err.message);
    g_free(want);
    g_free(path);
}
END_TEST

/* The file reader and the buffer reader agree on every single flipped byte: the file is read section by
 * section, the buffer checked whole, and both name the same offset and fault. */
START_TEST(test_file_and_buffer_agree)
{
    char *path = tpath("agree.ckpt");
    write_sample(path);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    uint8_t *b = g_malloc(len);
    for (size_t off = 0; off < len; off++) {
        memcpy(b, orig, len);
        b[off] ^= 0x01;
        spit(path, b, len);
        crl_error fe, be;
        ck_assert_ptr_null(crl_ckpt_reader_open(path, "crl.test", 3, &fe));
        ck_assert_ptr_null(crl_ckpt_reader_open_buffer(path, b, len, "crl.test", 3, &be));
        ck_assert_int_eq(fe.code, CRL_E_CORRUPT);
        ck_assert_msg(!strcmp(fe.message, be.message), "offset %zu: file '%s', buffer '%s'", off, fe.message,
                      be.message);
    }
    g_free(b);
    g_free(orig);
    g_free(path);
}
END_TEST

/* A file whose header and table agree on a terabyte of sections is what it says: the reader asks for that
 * much memory (and says so when it cannot have it), having read nothing but the header and the table. */
START_TEST(test_consistent_huge_file)
{
    /* RLIMIT_AS below takes the address space valgrind and the sanitizers reserve for themselves. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return;
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return;
#endif
#endif
    const char *vg = getenv("CRL_TEST_VALGRIND");
    if (vg && *vg == '1')
        return;
    char *path = tpath("huge.ckpt");
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(crl_ckpt_write(w, "big", "12345678", 8, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    size_t len;
    uint8_t *b = slurp(path, &len);
    /* Layout: header (48 + "crl.test" = 56 bytes), "big" at 56, the table at 64 (one entry of 24 + 3). */
    uint64_t hend = 56, toff = rd64(b + 24), tsize = rd64(b + 32);
    ck_assert_uint_eq(toff, 64);
    uint64_t big = UINT64_C(1) << 40;
    uint8_t tab[64];
    memcpy(tab, b + toff, (size_t)tsize);
    for (int i = 0; i < 8; i++)
        tab[8 + i] = (uint8_t)(big >> (8 * i));          /* the entry's size */
    uint64_t ntoff = hend + big;
    for (int i = 0; i < 8; i++)
        b[24 + i] = (uint8_t)(ntoff >> (8 * i));         /* the header's table offset */
    wr32(b + 40, crl_crc32(0, tab, (size_t)tsize));
    wr32(b + 44, crl_crc32(crl_crc32(0, b, 44), b + 48, (size_t)(hend - 48)));
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, (size_t)hend, f), hend);
    if (fseeko(f, (off_t)ntoff, SEEK_SET) != 0 || fwrite(tab, 1, (size_t)tsize, f) != tsize) {
        fprintf(stderr, "test_consistent_huge_file: no 1 TiB sparse file here; skipped\n");
        fclose(f);
        g_free(b);
        g_free(path);
        return;
    }
    ck_assert_int_eq(fclose(f), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Whatever the overcommit policy, a terabyte is out of reach. */
        struct rlimit rl = { (rlim_t)16 << 30, (rlim_t)16 << 30 };
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(3);
        crl_error e;
        crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, &e);
        char *want = g_strdup_printf("%s: cannot allocate %" PRIu64 " bytes to read the checkpoint (its section "
                                     "table says it holds that much)", path, ntoff + tsize);
        if (r == NULL && e.code == CRL_E_NOMEM && !strcmp(e.message, want))
            _exit(0);
        fprintf(stderr, "got %s: %s\nwant %s\n", crl_status_name(e.code), e.message, want);
        _exit(1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    g_free(b);
    g_free(path);
}
END_TEST

/* ---- little-endian fields ------------------------------------------------------------ */

/* The SDK's field helpers write and read little-endian whatever the host. */
START_TEST(test_le_field_helpers)
{
    uint8_t b[8];
    crl_ckpt_put_u32(b, 0x01020304u);
    ck_assert(b[0] == 4 && b[1] == 3 && b[2] == 2 && b[3] == 1);
    ck_assert_uint_eq(crl_ckpt_get_u32(b), 0x01020304u);
    crl_ckpt_put_u64(b, 0x0102030405060708ull);
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(b[i], 8 - i);
    ck_assert_uint_eq(crl_ckpt_get_u64(b), 0x0102030405060708ull);
    /* 1.5 is 0x3FF8000000000000; -0.0 keeps its sign; NaN stays NaN. */
    crl_ckpt_put_f64(b, 1.5);
    static const uint8_t one_half[8] = { 0, 0, 0, 0, 0, 0, 0xF8, 0x3F };
    ck_assert(memcmp(b, one_half, 8) == 0);
    ck_assert(crl_ckpt_get_f64(b) == 1.5);
    crl_ckpt_put_f64(b, -0.0);
    ck_assert(b[7] == 0x80 && signbit(crl_ckpt_get_f64(b)));
    crl_ckpt_put_f64(b, NAN);
    ck_assert(isnan(crl_ckpt_get_f64(b)));

    /* Elements of 2, 4 and 8 bytes: swapped bytes, and a copy equal to the field encoding. */
    const uint16_t h[2] = { 0x0102, 0xA0B0 };
    const uint32_t w[2] = { 0x01020304u, 0xDEADBEEFu };
    const uint64_t q[1] = { 0x0102030405060708ull };
    uint8_t out[16], want[16];
    crl_ckpt_byteswap_copy(out, h, 2, 2);
    uint16_t hs[2];
    memcpy(hs, out, 4);
    ck_assert(hs[0] == 0x0201 && hs[1] == 0xB0A0);
    crl_ckpt_byteswap_copy(out, w, 4, 2);
    uint32_t ws[2];
    memcpy(ws, out, 8);
    ck_assert(ws[0] == 0x04030201u && ws[1] == 0xEFBEADDEu);
    crl_ckpt_byteswap_copy(out, q, 8, 1);
    uint64_t qs;
    memcpy(&qs, out, 8);
    ck_assert(qs == 0x0807060504030201ull);
    crl_ckpt_le_copy(out, w, 4, 2);
    ckpt_le_u32(want, w[0]);
    ckpt_le_u32(want + 4, w[1]);
    ck_assert(memcmp(out, want, 8) == 0);
    crl_ckpt_le_copy(out, q, 8, 1);
    ckpt_le_u64(want, q[0]);
    ck_assert(memcmp(out, want, 8) == 0);
    /* Back from the file's order gives the host's values. */
    uint32_t back[2];
    ckpt_le_u32(want, w[0]);
    ckpt_le_u32(want + 4, w[1]);
    crl_ckpt_le_copy(back, want, 4, 2);
    ck_assert(back[0] == w[0] && back[1] == w[1]);
    crl_ckpt_le_copy(out, "abc", 1, 3);
    ck_assert(memcmp(out, "abc", 3) == 0);
}
END_TEST

/* A random stream as 12 little-endian words, and the states no stream can be in refused. */
START_TEST(test_le_rng)
{
    crl_rng a, b, keep;
    crl_rng_init(&a, 12345, 7);
    crl_rng_u32(&a); /* idx 1 of a drawn block */
    uint8_t buf[CRL_CKPT_RNG_BYTES];
    crl_ckpt_put_rng(buf, &a);
    ck_assert_uint_eq(crl_ckpt_get_u32(buf), a.key[0]);
    ck_assert_uint_eq(crl_ckpt_get_u32(buf + 40), a.idx);
    uint8_t want[4];
    ckpt_le_u32(want, a.ctr[2]);
    ck_assert(memcmp(buf + 16, want, 4) == 0);
    ck_assert(crl_ckpt_get_rng(buf, &b));
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    ck_assert_uint_eq(crl_rng_u64(&a), crl_rng_u64(&b));
    keep = b;
    crl_ckpt_put_u32(buf + 40, 5);
    ck_assert(!crl_ckpt_get_rng(buf, &b));
    ck_assert(memcmp(&keep, &b, sizeof b) == 0);
    crl_ckpt_put_u32(buf + 40, 4);
    crl_ckpt_put_u32(buf + 44, 1);
    ck_assert(!crl_ckpt_get_rng(buf, &b));
    crl_ckpt_put_u32(buf + 44, 0);
    ck_assert(crl_ckpt_get_rng(buf, &b));
    ck_assert_uint_eq(b.idx, 4);
}
END_TEST

/* A leaf's section holds its elements little-endian, whatever the host; a bool is a byte 0 or 1. */
START_TEST(test_td_leaves_little_endian)
{
    crl_error err;
    char *path = tpath("le.ckpt");
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    const crl_dtype dts[5] = { CRL_I16, CRL_I32, CRL_I64, CRL_F32, CRL_F64 };
    const double vals[3] = { -2, 258, 1.5 };
    for (int k = 0; k < 5; k++) {
        int64_t n = 3;
        crl_td *td = crl_td_new(0, NULL, &err);
        crl_tensor *t = crl_tensor_new(dts[k], 1, &n, &err);
        for (int i = 0; i < 3; i++)
            crl_tensor_flat_set(t, i, dts[k] >= CRL_F32 || i < 2 ? vals[i] : 7);
        ck_assert_int_eq(crl_td_set(td, "x", t, &err), CRL_OK);
        char prefix[8];
        snprintf(prefix, sizeof prefix, "p%d", k);
        ck_assert_int_eq(crl_ckpt_write_td(w, prefix, td, &err), CRL_OK);
        crl_tensor_unref(t);
        crl_td_unref(td);
    }
    ck_assert_msg(crl_ckpt_writer_close(w, &err) == CRL_OK, "%s", err.message);
    for (int k = 0; k < 5; k++) {
        char sec[8];
        snprintf(sec, sizeof sec, "p%d/0", k);
        size_t len, es = crl_dtype_size(dts[k]);
        uint8_t *got = ckpt_edit_section(path, "crl.test", sec, &len), want[24];
        ck_assert_uint_eq(len, 3 * es);
        for (int i = 0; i < 3; i++) {
            double v = dts[k] >= CRL_F32 || i < 2 ? vals[i] : 7;
            uint8_t *p = want + es * (size_t)i;
            if (dts[k] == CRL_I16)
                p[0] = (uint8_t)(int16_t)v, p[1] = (uint8_t)((uint16_t)(int16_t)v >> 8);
            else if (dts[k] == CRL_I32)
                ckpt_le_u32(p, (uint32_t)(int32_t)v);
            else if (dts[k] == CRL_I64)
                ckpt_le_u64(p, (uint64_t)(int64_t)v);
            else if (dts[k] == CRL_F32)
                ckpt_le_f32(p, (float)v);
            else
                ckpt_le_f64(p, v);
        }
        ck_assert_msg(memcmp(got, want, len) == 0, "section %s is not little-endian", sec);
        g_free(got);
    }

    /* A bool leaf holding 2 is refused, naming the file, the offset and the element. */
    int64_t n = 2;
    crl_td *td = crl_td_new(0, NULL, &err);
    crl_tensor *t = crl_tensor_new(CRL_BOOL, 1, &n, &err);
    ck_assert_int_eq(crl_td_set(td, "done", t, &err), CRL_OK);
    w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    ck_assert_int_eq(crl_ckpt_write_td(w, "b", td, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    char *bad = tpath("bad.ckpt");
    ckpt_edit_replace(path, bad, "crl.test", "b/0", "\001\002", 2);
    crl_ckpt_reader *r = crl_ckpt_reader_open(bad, "crl.test", 1, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_ptr_null(crl_ckpt_read_td(r, "b", &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(g_str_has_prefix(err.message, bad) && strstr(err.message, ": offset ") &&
                      strstr(err.message, "bool leaf 'done'): element 1 is 2, not 0 or 1"),
                  "%s", err.message);
    crl_ckpt_reader_free(r);
    crl_tensor_unref(t);
    crl_td_unref(td);
    g_free(bad);
    g_free(path);
}
END_TEST

/* ---- corruption inside a TensorDict index ------------------------------------------ */

static void b32(GByteArray *b, uint32_t v)
{
    uint8_t x[4];
    wr32(x, v);
    g_byte_array_append(b, x, 4);
}

static void b64(GByteArray *b, uint64_t v)
{
    uint8_t x[8];
    wr64(x, v);
    g_byte_array_append(b, x, 8);
}

static void bkey(GByteArray *b, const char *k, size_t n)
{
    b32(b, (uint32_t)n);
    g_byte_array_append(b, (const guint8 *)k, (guint)n);
}

/* Index header plus a root of batch [2]. */
static GByteArray *index_start(uint32_t nnodes, uint32_t nleaves)
{
    GByteArray *b = g_byte_array_new();
    b32(b, 1);
    b32(b, nnodes);
    b32(b, nleaves);
    b32(b, 0);
    b32(b, 0);
    b32(b, 1);
    b64(b, 2);
    return b;
}

/* A leaf record: key, dtype, dims, byte count. */
static void leaf(GByteArray *b, const char *key, uint32_t dt, int nd, const int64_t *dims, uint64_t nbytes)
{
    bkey(b, key, strlen(key));
    b32(b, dt);
    b32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++)
        b64(b, (uint64_t)dims[i]);
    b64(b, nbytes);
}

/* Write index (and leaf sections of the given sizes), read it back: must be
 * CRL_E_CORRUPT mentioning want. */
static void expect_bad_index(GByteArray *idx, const size_t *leaf_sizes, int nleaf_sections, const char *want)
{
    char *path = tpath("idx.ckpt");
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    static uint8_t zeros[256];
    for (int i = 0; i < nleaf_sections; i++) {
        char name[32];
        snprintf(name, sizeof name, "x/%d", i);
        ck_assert_int_eq(crl_ckpt_write(w, name, zeros, leaf_sizes[i], &err), CRL_OK);
    }
    ck_assert_int_eq(crl_ckpt_write(w, "x/td", idx->data, idx->len, &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    crl_td *td = crl_ckpt_read_td(r, "x", &err);
    ck_assert_msg(td == NULL, "accepted a bad index (want '%s')", want);
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    ck_assert_msg(g_str_has_prefix(err.message, path) && strstr(err.message, want), "message '%s' lacks '%s'",
                  err.message, want);
    crl_ckpt_reader_free(r);
    g_byte_array_free(idx, TRUE);
    g_free(path);
}

START_TEST(test_td_index_validation)
{
    int64_t d2[1] = {2}, d23[2] = {2, 3}, d3[1] = {3};
    size_t s8[1] = {8}, s24[1] = {24};
    GByteArray *b;

    /* The valid baseline reads back. */
    {
        b = index_start(1, 1);
        leaf(b, "obs", CRL_F32, 2, d23, 24);
        char *path = tpath("idx.ckpt");
        crl_error err;
        crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
        static const uint8_t z[24];
        crl_ckpt_write(w, "x/0", z, 24, &err);
        crl_ckpt_write(w, "x/td", b->data, b->len, &err);
        ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
        crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, &err);
        crl_td *td = crl_ckpt_read_td(r, "x", &err);
        ck_assert_msg(td != NULL, "%s", err.message);
        ck_assert_int_eq(crl_tensor_numel(crl_td_get(td, "obs")), 6);
        crl_td_unref(td);
        crl_ckpt_reader_free(r);
        g_byte_array_free(b, TRUE);
        g_free(path);
    }
    b = index_start(1, 1);
    leaf(b, "obs", 9, 2, d23, 24);
    expect_bad_index(b, s24, 1, "unknown dtype 9");

    b = index_start(1, 1);
    int64_t d9[9] = {2, 1, 1, 1, 1, 1, 1, 1, 1};
    leaf(b, "obs", CRL_U8, 9, d9, 2);
    expect_bad_index(b, s8, 1, "has 9 dims (max 8)");

    b = index_start(1, 1);
    int64_t huge[4] = {2, (int64_t)1 << 40, (int64_t)1 << 40, 0};
    leaf(b, "obs", CRL_U8, 4, huge, 0);
    expect_bad_index(b, s8, 1, "shape is too large");

    b = index_start(1, 1);
    int64_t neg[2] = {2, -3};
    leaf(b, "obs", CRL_U8, 2, neg, 0);
    expect_bad_index(b, s8, 1, "dim 1 is negative");

    b = index_start(1, 1);
    leaf(b, "obs", CRL_F32, 2, d23, 8);
    expect_bad_index(b, s8, 1, "claims 8 bytes; its dtype and shape need 24");

    b = index_start(1, 1);
    leaf(b, "obs", CRL_F32, 2, d23, 24);
    expect_bad_index(b, s8, 1, "section 'x/0' (leaf 'obs') holds 8 bytes");

    b = index_start(1, 1);
    leaf(b, "obs", CRL_F32, 2, d23, 24);
    expect_bad_index(b, s8, 0, "no section 'x/0'");

    b = index_start(1, 1);
    leaf(b, "obs", CRL_I64, 1, d3, 24);
    expect_bad_index(b, s24, 1, "does not start with its TensorDict's batch shape");

    const char *bad_keys[] = {"a..b", ".a", "a.", "."};
    for (size_t i = 0; i < G_N_ELEMENTS(bad_keys); i++) {
        b = index_start(1, 1);
        leaf(b, bad_keys[i], CRL_I32, 1, d2, 8);
        expect_bad_index(b, s8, 1, "empty component");
    }
    b = index_start(1, 1);
    bkey(b, "a\0b", 3);
    b32(b, CRL_I32);
    b32(b, 1);
    b64(b, 2);
    b64(b, 8);
    expect_bad_index(b, s8, 1, "NUL");

    b = index_start(1, 1);
    bkey(b, "", 0);
    expect_bad_index(b, s8, 1, "key length 0");

    b = index_start(1, 1);
    b32(b, 100000);
    expect_bad_index(b, s8, 1, "key length 100000");

    /* Nesting deeper than a TensorDict allows. */
    GString *deep = g_string_new("k");
    for (int i = 0; i < 70; i++)
        g_string_append(deep, ".k");
    b = index_start(1, 1);
    leaf(b, deep->str, CRL_I32, 1, d2, 8);
    expect_bad_index(b, s8, 1, "nests 71 levels");
    g_string_free(deep, TRUE);

    b = index_start(1, 2);
    leaf(b, "obs", CRL_I32, 1, d2, 8);
    leaf(b, "obs", CRL_I32, 1, d2, 8);
    size_t s88[2] = {8, 8};
    expect_bad_index(b, s88, 2, "duplicate key 'obs'");

    /* A leaf under a parent that is not a listed node. */
    b = index_start(1, 1);
    leaf(b, "next.reward", CRL_I32, 1, d2, 8);
    expect_bad_index(b, s8, 1, "listed before its parent 'next'");

    /* A leaf below a leaf. */
    b = index_start(1, 2);
    leaf(b, "obs", CRL_I32, 1, d2, 8);
    leaf(b, "obs.x", CRL_I32, 1, d2, 8);
    expect_bad_index(b, s88, 2, "not a TensorDict");

    /* Nested node whose batch shape does not extend the root's. */
    b = index_start(2, 0);
    bkey(b, "sub", 3);
    b32(b, 1);
    b64(b, 5);
    expect_bad_index(b, NULL, 0, "batch shape does not start with its parent's");

    b = index_start(2, 0);
    bkey(b, "sub", 3);
    b32(b, 0);
    expect_bad_index(b, NULL, 0, "batch shape does not start with its parent's");

    /* Counts, format, trailing bytes, truncation. */
    b = index_start(1, 0);
    b->data[0] = 2;
    expect_bad_index(b, NULL, 0, "format 2 is not supported");
    b = index_start(1, 0);
    wr32(b->data + 4, 0);
    expect_bad_index(b, NULL, 0, "node count 0");
    b = index_start(1, 0);
    wr32(b->data + 8, 0x7fffffff);
    expect_bad_index(b, NULL, 0, "leaf count 2147483647");
    b = index_start(1, 0);
    wr32(b->data + 8, 1000);
    expect_bad_index(b, NULL, 0, "ends inside a key length");
    b = index_start(1, 0);
    wr32(b->data + 12, 1);
    expect_bad_index(b, NULL, 0, "reserved field is not zero");
    b = index_start(1, 0);
    b32(b, 0);
    expect_bad_index(b, NULL, 0, "4 unexpected bytes after the last entry");
    b = index_start(1, 0);
    g_byte_array_set_size(b, b->len - 3);
    expect_bad_index(b, NULL, 0, "ends inside a shape");
    b = g_byte_array_new();
    b32(b, 1);
    b32(b, 1);
    b32(b, 0);
    b32(b, 0);
    b32(b, 3);
    expect_bad_index(b, NULL, 0, "the root entry has a key");
}
END_TEST

/* ---- write failures ----------------------------------------------------------------- */

START_TEST(test_enospc_dev_full)
{
    if (access("/dev/full", W_OK) != 0)
        return; /* not on Linux, or a sandbox without /dev/full: nothing to test */
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new("/dev/full", "crl.test", 1, &err);
    ck_assert_ptr_null(w);
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(strstr(err.message, "/dev/full") && strstr(err.message, "No space left on device"), "%s",
                  err.message);
    /* A device is never unlinked on failure. */
    ck_assert_int_eq(access("/dev/full", F_OK), 0);
}
END_TEST

/* A write failing mid-stream (a file-size limit, like a disk filling up):
 * the failing call and every later one report CRL_E_IO naming the file, and
 * close removes the partial file.  In a child, as the limit is per process. */
START_TEST(test_write_failure_midstream)
{
    char *path = tpath("fsize.ckpt");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        int code = 0;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(10);
        crl_error err;
        crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
        if (!w)
            _exit(11);
        static uint8_t block[1000];
        int rc = CRL_OK, i;
        for (i = 0; i < 10 && rc == CRL_OK; i++) {
            char name[16];
            snprintf(name, sizeof name, "s%d", i);
            rc = crl_ckpt_write(w, name, block, sizeof block, &err);
        }
        if (rc != CRL_E_IO || i != 5 || !strstr(err.message, path) || !strstr(err.message, "File too large"))
            code = 12;
        if (crl_ckpt_write(w, "later", block, 1, &err) != CRL_E_IO || !strstr(err.message, "an earlier write"))
            code = 13;
        if (crl_ckpt_writer_close(w, &err) != CRL_E_IO || !strstr(err.message, path))
            code = 14;
        if (access(path, F_OK) == 0)
            code = 15;
        _exit(code);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed with status %d",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    g_free(path);
}
END_TEST

/* ---- checkpoint directories -------------------------------------------------------- */

static int count_entries(const char *dir, const char *containing)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    const char *name;
    while ((name = g_dir_read_name(d)))
        n += strstr(name, containing) != NULL;
    g_dir_close(d);
    return n;
}

static void put_file(const char *dir, const char *name, const char *text)
{
    char *p = g_build_filename(dir, name, NULL);
    spit(p, text, strlen(text));
    g_free(p);
}

static char *get_text(const char *dir, const char *name)
{
    char *p = g_build_filename(dir, name, NULL);
    gchar *t = NULL;
    if (!g_file_get_contents(p, &t, NULL, NULL))
        t = NULL;
    g_free(p);
    return t;
}

START_TEST(test_dir_commit_replaces)
{
    crl_error err;
    char *dir = tpath("ckpt");
    char *tmp = crl_ckpt_dir_begin(dir, &err);
    ck_assert_msg(tmp != NULL, "%s", err.message);
    char *prefix = g_strdup_printf("%s.tmp-", dir);
    ck_assert(g_str_has_prefix(tmp, prefix));
    ck_assert(g_file_test(tmp, G_FILE_TEST_IS_DIR));
    put_file(tmp, "a", "first");
    put_file(tmp, "only-old", "x");
    char *sub = g_build_filename(tmp, "nested", NULL);
    ck_assert_int_eq(g_mkdir(sub, 0755), 0);
    put_file(sub, "deep", "deep1");
    g_free(sub);
    ck_assert_msg(crl_ckpt_dir_commit(tmp, dir, &err) == CRL_OK, "%s", err.message);
    ck_assert(!g_file_test(tmp, G_FILE_TEST_EXISTS));
    char *t = get_text(dir, "a");
    ck_assert_str_eq(t, "first");
    g_free(t);
    crl_free(tmp);

    /* Second commit (trailing slash in the name): the old dir is replaced whole. */
    char *dir_slash = g_strdup_printf("%s//", dir);
    tmp = crl_ckpt_dir_begin(dir_slash, &err);
    ck_assert(g_str_has_prefix(tmp, prefix));
    put_file(tmp, "a", "second");
    ck_assert_int_eq(crl_ckpt_dir_commit(tmp, dir_slash, &err), CRL_OK);
    crl_free(tmp);
    t = get_text(dir, "a");
    ck_assert_str_eq(t, "second");
    g_free(t);
    ck_assert_ptr_null(get_text(dir, "only-old"));
    char *deep = g_build_filename(dir, "nested", NULL);
    ck_assert(!g_file_test(deep, G_FILE_TEST_EXISTS));
    g_free(deep);
    /* Nothing left next to it: no tmp, no old. */
    ck_assert_int_eq(count_entries(tmp_root, ".tmp-"), 0);
    ck_assert_int_eq(count_entries(tmp_root, ".old-"), 0);
    ck_assert_int_eq(count_entries(tmp_root, "ckpt"), 1);
    g_free(dir_slash);
    g_free(prefix);
    g_free(dir);
}
END_TEST

START_TEST(test_dir_abort_and_errors)
{
    crl_error err;
    char *dir = tpath("ab");
    char *tmp = crl_ckpt_dir_begin(dir, &err);
    put_file(tmp, "x", "y");
    char *sub = g_build_filename(tmp, "s", NULL);
    g_mkdir(sub, 0755);
    put_file(sub, "z", "w");
    /* A symlink inside is removed, its target is not. */
    char *target = tpath("target");
    spit(target, "keep", 4);
    char *link = g_build_filename(tmp, "link", NULL);
    ck_assert_int_eq(symlink(target, link), 0);
    crl_ckpt_dir_abort(tmp);
    ck_assert(!g_file_test(tmp, G_FILE_TEST_EXISTS));
    ck_assert(g_file_test(target, G_FILE_TEST_IS_REGULAR));
    ck_assert(!g_file_test(dir, G_FILE_TEST_EXISTS));
    crl_free(tmp);
    crl_ckpt_dir_abort(NULL);
    /* abort refuses names begin did not make. */
    crl_ckpt_dir_abort(target);
    ck_assert(g_file_test(target, G_FILE_TEST_IS_REGULAR));
    ck_assert_int_eq(crl_ckpt_dir_commit(target, dir, &err), CRL_E_INVALID);

    /* DIR is a regular file: refused, the tmp dir stays for abort. */
    spit(dir, "file", 4);
    tmp = crl_ckpt_dir_begin(dir, &err);
    ck_assert_int_eq(crl_ckpt_dir_commit(tmp, dir, &err), CRL_E_EXISTS);
    ck_assert_msg(strstr(err.message, dir), "%s", err.message);
    ck_assert(g_file_test(tmp, G_FILE_TEST_IS_DIR));
    crl_ckpt_dir_abort(tmp);
    ck_assert(!g_file_test(tmp, G_FILE_TEST_EXISTS));
    crl_free(tmp);

    char *nowhere = tpath("no/such/parent/ckpt");
    ck_assert_ptr_null(crl_ckpt_dir_begin(nowhere, &err));
    ck_assert_int_eq(err.code, CRL_E_IO);
    ck_assert_msg(strstr(err.message, nowhere), "%s", err.message);
    ck_assert_ptr_null(crl_ckpt_dir_begin("", &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    g_free(nowhere);
    g_free(sub);
    g_free(link);
    g_free(target);
    g_free(dir);
}
END_TEST

/* A checkpoint file written inside a committed directory reads back. */
START_TEST(test_dir_with_checkpoint)
{
    crl_error err;
    char *dir = tpath("full");
    char *tmp = crl_ckpt_dir_begin(dir, &err);
    char *f = g_build_filename(tmp, "buffer.ckpt", NULL);
    write_sample(f);
    ck_assert_int_eq(crl_ckpt_dir_commit(tmp, dir, &err), CRL_OK);
    char *g = g_build_filename(dir, "buffer.ckpt", NULL);
    crl_ckpt_reader *r = crl_ckpt_reader_open(g, "crl.test", 3, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    crl_td *td = crl_ckpt_read_td(r, "data", &err);
    crl_td *want = make_td();
    ck_assert(crl_td_equal(td, want));
    crl_td_unref(td);
    crl_td_unref(want);
    crl_ckpt_reader_free(r);
    crl_free(tmp);
    g_free(f);
    g_free(g);
    g_free(dir);
}
END_TEST

/* Leftovers of interrupted writes (begin without commit or abort, an old DIR moved aside) go; whatever
 * else carries a similar name, and whatever a link inside a leftover points at, stays. */
START_TEST(test_dir_clean_leftovers)
{
    crl_error err;
    char *dir = tpath("run/checkpoint");
    char *run = tpath("run");
    ck_assert_int_eq(g_mkdir(run, 0755), 0);
    size_t n = 99;
    ck_assert_int_eq(crl_ckpt_dir_clean(dir, &n, &err), CRL_OK);
    ck_assert_uint_eq(n, 0);
    /* Two writers killed mid-way, one with a nested replay dir and a link out. */
    char *t1 = crl_ckpt_dir_begin(dir, &err), *t2 = crl_ckpt_dir_begin(dir, &err);
    ck_assert_ptr_nonnull(t1);
    ck_assert_ptr_nonnull(t2);
    put_file(t1, "trainer.ckpt", "half");
    char *nested = g_build_filename(t1, "replay.tmp-ABC123", NULL);
    ck_assert_int_eq(g_mkdir(nested, 0755), 0);
    put_file(nested, "data", "x");
    char *outside = tpath("outside"), *keep = tpath("outside/keep");
    ck_assert_int_eq(g_mkdir(outside, 0755), 0);
    spit(keep, "keep", 4);
    char *in_link = g_build_filename(t1, "link", NULL);
    ck_assert_int_eq(symlink(outside, in_link), 0);
    char *old = g_strdup_printf("%s.old-Zz9Aa0", dir);
    ck_assert_int_eq(g_mkdir(old, 0700), 0);
    put_file(old, "trainer.ckpt", "older");
    /* Not leftovers: the checkpoint itself, other lengths and names, a symlink and a file of the name. */
    ck_assert_int_eq(g_mkdir(dir, 0755), 0);
    put_file(dir, "trainer.ckpt", "good");
    char *short_name = g_strdup_printf("%s.tmp-ABC12", dir), *long_name = g_strdup_printf("%s.tmp-ABC1234", dir);
    char *other = tpath("run/replay.tmp-ABC123"), *odd = g_strdup_printf("%s.tmp-AB_123", dir);
    char *link = g_strdup_printf("%s.tmp-LINK00", dir), *file = g_strdup_printf("%s.tmp-FILE00", dir);
    ck_assert_int_eq(g_mkdir(short_name, 0755), 0);
    ck_assert_int_eq(g_mkdir(long_name, 0755), 0);
    ck_assert_int_eq(g_mkdir(other, 0755), 0);
    ck_assert_int_eq(g_mkdir(odd, 0755), 0);
    ck_assert_int_eq(symlink(outside, link), 0);
    spit(file, "f", 1);

    ck_assert_msg(crl_ckpt_dir_clean(dir, &n, &err) == CRL_OK, "%s", err.message);
    ck_assert_uint_eq(n, 3);
    ck_assert(!g_file_test(t1, G_FILE_TEST_EXISTS));
    ck_assert(!g_file_test(t2, G_FILE_TEST_EXISTS));
    ck_assert(!g_file_test(old, G_FILE_TEST_EXISTS));
    char *t = get_text(dir, "trainer.ckpt");
    ck_assert_str_eq(t, "good");
    g_free(t);
    t = get_text(outside, "keep");
    ck_assert_str_eq(t, "keep");
    g_free(t);
    ck_assert(g_file_test(short_name, G_FILE_TEST_IS_DIR));
    ck_assert(g_file_test(long_name, G_FILE_TEST_IS_DIR));
    ck_assert(g_file_test(other, G_FILE_TEST_IS_DIR));
    ck_assert(g_file_test(odd, G_FILE_TEST_IS_DIR));
    ck_assert(g_file_test(link, G_FILE_TEST_IS_SYMLINK));
    ck_assert(g_file_test(file, G_FILE_TEST_IS_REGULAR));
    /* Again: nothing left to remove; a trailing slash names the same dir; removed may be NULL. */
    char *slash = g_strdup_printf("%s/", dir);
    ck_assert_int_eq(crl_ckpt_dir_clean(slash, &n, &err), CRL_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(crl_ckpt_dir_clean(dir, NULL, &err), CRL_OK);
    /* Errors name the problem. */
    ck_assert_int_eq(crl_ckpt_dir_clean("", &n, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_ckpt_dir_clean(NULL, &n, &err), CRL_E_INVALID);
    char *nowhere = tpath("no/such/dir/checkpoint");
    ck_assert_int_eq(crl_ckpt_dir_clean(nowhere, &n, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, "no/such/dir"), "%s", err.message);
    g_free(nowhere);
    g_free(slash);
    g_free(link);
    g_free(file);
    g_free(odd);
    g_free(other);
    g_free(short_name);
    g_free(long_name);
    g_free(old);
    g_free(in_link);
    g_free(keep);
    g_free(outside);
    g_free(nested);
    crl_free(t1);
    crl_free(t2);
    g_free(run);
    g_free(dir);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_crc32);
    tcase_add_test(tc, test_sections_round_trip);
    tcase_add_test(tc, test_empty_checkpoint);
    tcase_add_test(tc, test_writer_errors);
    tcase_add_test(tc, test_td_all_dtypes_nested);
    tcase_add_test(tc, test_td_noncontiguous_and_scalar_batch);
    tcase_add_test(tc, test_two_tds_one_file);
    tcase_add_test(tc, test_every_flipped_byte_detected);
    tcase_add_test(tc, test_every_truncation_detected);
    tcase_add_test(tc, test_crafted_headers);
    tcase_add_test(tc, test_crafted_tables);
    tcase_add_test(tc, test_missing_and_unreadable);
    tcase_add_test(tc, test_not_regular_files);
    tcase_add_test(tc, test_padded_file_refused_before_reading);
    tcase_add_test(tc, test_file_and_buffer_agree);
    tcase_add_test(tc, test_consistent_huge_file);
    tcase_add_test(tc, test_td_index_validation);
    tcase_add_test(tc, test_le_field_helpers);
    tcase_add_test(tc, test_le_rng);
    tcase_add_test(tc, test_td_leaves_little_endian);
    tcase_add_test(tc, test_enospc_dev_full);
    tcase_add_test(tc, test_write_failure_midstream);
    tcase_add_test(tc, test_dir_commit_replaces);
    tcase_add_test(tc, test_dir_abort_and_errors);
    tcase_add_test(tc, test_dir_with_checkpoint);
    tcase_add_test(tc, test_dir_clean_leftovers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(checkpoint_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
