/* For the suites that check what a loader makes of a checkpoint whose checksums are right but whose values
 * are not: copy a checkpoint with one section's bytes replaced, and the little-endian encodings the files
 * must hold, written out independently of the SDK's helpers. */
#ifndef CRL_TEST_CKPT_EDIT_H
#define CRL_TEST_CKPT_EDIT_H

#include <check.h>
#include <crl/checkpoint.h>
#include <glib.h>
#include <string.h>

/* Copy checkpoint `src` (of kind `kind`) to `dst`, every section in order, with section `name` replaced by
 * len bytes (a new valid file: the writer computes the checksums). */
static inline void ckpt_edit_replace(const char *src, const char *dst, const char *kind, const char *name,
                                     const void *bytes, size_t len)
{
    crl_error e = { 0 };
    crl_ckpt_reader *r = crl_ckpt_reader_open(src, kind, UINT32_MAX, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    ck_assert_msg(crl_ckpt_has(r, name), "%s has no section '%s'", src, name);
    crl_ckpt_writer *w = crl_ckpt_writer_new(dst, kind, crl_ckpt_kind_version(r), &e);
    ck_assert_msg(w != NULL, "%s", e.message);
    for (size_t i = 0; i < crl_ckpt_section_count(r); i++) {
        const char *sec = crl_ckpt_section_name(r, i);
        size_t n;
        const void *p = crl_ckpt_section(r, sec, &n, &e);
        if (!strcmp(sec, name)) {
            p = bytes;
            n = len;
        }
        ck_assert_msg(crl_ckpt_write(w, sec, p, n, &e) == CRL_OK, "%s", e.message);
    }
    ck_assert_msg(crl_ckpt_writer_close(w, &e) == CRL_OK, "%s", e.message);
    crl_ckpt_reader_free(r);
}

/* Copy checkpoint `src` to `dst` without the sections of the TensorDict under `prefix` ("prefix/..."),
 * then, when td is not NULL, with td written there instead (crl_ckpt_write_td). */
static inline void ckpt_edit_swap_td(const char *src, const char *dst, const char *kind, const char *prefix,
                                     const crl_td *td)
{
    crl_error e = { 0 };
    crl_ckpt_reader *r = crl_ckpt_reader_open(src, kind, UINT32_MAX, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    crl_ckpt_writer *w = crl_ckpt_writer_new(dst, kind, crl_ckpt_kind_version(r), &e);
    ck_assert_msg(w != NULL, "%s", e.message);
    size_t plen = strlen(prefix), dropped = 0;
    for (size_t i = 0; i < crl_ckpt_section_count(r); i++) {
        const char *sec = crl_ckpt_section_name(r, i);
        if (!strncmp(sec, prefix, plen) && sec[plen] == '/') {
            dropped++;
            continue;
        }
        size_t n;
        const void *p = crl_ckpt_section(r, sec, &n, &e);
        ck_assert_msg(crl_ckpt_write(w, sec, p, n, &e) == CRL_OK, "%s", e.message);
    }
    ck_assert_msg(dropped > 0, "%s has no sections under '%s'", src, prefix);
    if (td)
        ck_assert_msg(crl_ckpt_write_td(w, prefix, td, &e) == CRL_OK, "%s", e.message);
    ck_assert_msg(crl_ckpt_writer_close(w, &e) == CRL_OK, "%s", e.message);
    crl_ckpt_reader_free(r);
}

/* A copy of section `name` of checkpoint `path` (free with g_free), its size in *len. */
static inline uint8_t *ckpt_edit_section(const char *path, const char *kind, const char *name, size_t *len)
{
    crl_error e = { 0 };
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, kind, UINT32_MAX, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    const void *p = crl_ckpt_section(r, name, len, &e);
    ck_assert_msg(p != NULL, "%s", e.message);
    uint8_t *copy = g_malloc(*len ? *len : 1);
    memcpy(copy, p, *len);
    crl_ckpt_reader_free(r);
    return copy;
}

/* Little-endian by shifts: what a field's bytes must be on every host. */
static inline void ckpt_le_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void ckpt_le_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void ckpt_le_f64(uint8_t *p, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    ckpt_le_u64(p, u);
}

static inline void ckpt_le_f32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    ckpt_le_u32(p, u);
}

#endif
