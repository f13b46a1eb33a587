/* Check suite: crl__elf_abi_check (core/elf_abi.c, compiled in: it is a hidden crl__ internal), the plugin ABI
 * read from a plugin file's ELF version needs.  The fixtures, and truncated and corrupted copies of them: the
 * check must answer CRL_OK or CRL_E_ABI for anything, never crash or read out of bounds (run it under
 * valgrind). */
#define _GNU_SOURCE /* memmem */
#include "config.h"

#include <check.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host-private.h"

#define ABI_STR_(x) #x
#define ABI_STR(x) ABI_STR_(x)
#define HOST_ABI ABI_STR(CRL_ABI_MAJOR) "." ABI_STR(CRL_ABI_MINOR)
#define NEXT_MINOR_ABI "1.3"
_Static_assert(CRL_ABI_MAJOR == 1 && CRL_ABI_MINOR + 1 == 3, "update NEXT_MINOR_ABI to the next minor ABI");

/* good.so links the real libcrl (needs CRL_1.2); abi_symbol_next.so a stand-in with CRL_1.3 (fixtures.am). */
#define GOOD_SO TEST_BUILDDIR "/plugins/.libs/good.so"
#define NEXT_SO TEST_BUILDDIR "/plugins/broken/.libs/abi_symbol_next.so"

static char *tmp;  /* per-test scratch dir */
static char *copy; /* tmp/copy.so: the file each case writes and checks */

static void setup(void)
{
    tmp = g_dir_make_tmp("crl-test-elf-abi-XXXXXX", NULL);
    ck_assert_ptr_nonnull(tmp);
    copy = g_build_filename(tmp, "copy.so", NULL);
}

static void teardown(void)
{
    g_unlink(copy);
    char *fifo = g_build_filename(tmp, "fifo.so", NULL);
    g_unlink(fifo);
    g_free(fifo);
    g_rmdir(tmp);
    g_free(copy);
    g_free(tmp);
}

static guint8 *slurp(const char *path, size_t *len)
{
    gchar *data = NULL;
    gsize n = 0;
    GError *ge = NULL;
    ck_assert_msg(g_file_get_contents(path, &data, &n, &ge), "%s", ge ? ge->message : path);
    *len = n;
    return (guint8 *)data;
}

static guint8 *dup_bytes(const guint8 *data, size_t len)
{
    guint8 *d = g_malloc(len ? len : 1);
    memcpy(d, data, len);
    return d;
}

static void write_copy(const guint8 *data, size_t len)
{
    int fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        ck_assert_int_gt(w, 0);
        done += (size_t)w;
    }
    ck_assert_int_eq(close(fd), 0);
}

/* Check `len` bytes of `data` as a file: rc, with the message in *e. */
static int check_bytes(const guint8 *data, size_t len, crl_error *e)
{
    write_copy(data, len);
    *e = (crl_error){ 0 };
    return crl__elf_abi_check(copy, "plugin 'copy' (copy.so)", e);
}

/* Whatever the bytes, CRL_OK or CRL_E_ABI with a message naming the plugin, the same without err. */
static int survive(const guint8 *data, size_t len, const char *label, size_t arg)
{
    crl_error e;
    int rc = check_bytes(data, len, &e);
    ck_assert_msg(rc == CRL_OK || rc == CRL_E_ABI, "%s %zu: rc %d (%s)", label, arg, rc, e.message);
    if (rc == CRL_E_ABI)
        ck_assert_msg(g_str_has_prefix(e.message, "plugin 'copy' (copy.so) "), "%s %zu: %s", label, arg, e.message);
    else
        ck_assert_int_eq(e.code, CRL_OK);
    ck_assert_int_eq(crl__elf_abi_check(copy, NULL, NULL), rc);
    return rc;
}

static void expect_msg(const crl_error *e, ...)
{
    va_list ap;
    va_start(ap, e);
    const char *s;
    while ((s = va_arg(ap, const char *)))
        ck_assert_msg(strstr(e->message, s) != NULL, "message '%s' lacks '%s'", e->message, s);
    va_end(ap);
}

/* Replace every "from\0" in data by "to\0" (same length); how many there were. */
static int patch_all(guint8 *data, size_t len, const char *from, const char *to)
{
    size_t n = strlen(from) + 1;
    ck_assert_uint_eq(strlen(to) + 1, n);
    int count = 0;
    for (guint8 *p = data; (p = memmem(p, len - (size_t)(p - data), from, n)); p += n, count++)
        memcpy(p, to, n);
    return count;
}

/* ---- where the interesting fields are in a (trusted) fixture ---------------- */

#define MAX_ENTRIES 16
typedef struct layout {
    size_t shoff, shentsize, shnum;
    size_t vn_shdr, str_shdr;    /* offsets of the two section headers */
    size_t vn_off, vn_size;      /* the SHT_GNU_verneed section */
    size_t str_off, str_size;    /* its string table */
    size_t need[MAX_ENTRIES];    /* file offsets of the ElfW(Verneed) entries */
    size_t aux[MAX_ENTRIES];     /* and of ElfW(Vernaux) entries */
    size_t nneed, naux;
} layout;

static layout find_layout(const guint8 *d, size_t len)
{
    layout l = { 0 };
    ElfW(Ehdr) eh;
    ck_assert_uint_ge(len, sizeof eh);
    memcpy(&eh, d, sizeof eh);
    l.shoff = eh.e_shoff;
    l.shentsize = eh.e_shentsize;
    l.shnum = eh.e_shnum;
    ck_assert_uint_le(l.shoff + l.shnum * l.shentsize, len);
    for (size_t i = 0; i < l.shnum; i++) {
        ElfW(Shdr) sh;
        memcpy(&sh, d + l.shoff + i * l.shentsize, sizeof sh);
        if (sh.sh_type != SHT_GNU_verneed)
            continue;
        l.vn_shdr = l.shoff + i * l.shentsize;
        l.vn_off = sh.sh_offset;
        l.vn_size = sh.sh_size;
        l.str_shdr = l.shoff + sh.sh_link * l.shentsize;
        ElfW(Shdr) st;
        memcpy(&st, d + l.str_shdr, sizeof st);
        l.str_off = st.sh_offset;
        l.str_size = st.sh_size;
    }
    ck_assert_msg(l.vn_shdr, "no .gnu.version_r in the fixture");
    for (size_t pos = l.vn_off; l.nneed < MAX_ENTRIES;) {
        ElfW(Verneed) vn;
        memcpy(&vn, d + pos, sizeof vn);
        l.need[l.nneed++] = pos;
        for (size_t apos = pos + vn.vn_aux; l.naux < MAX_ENTRIES;) {
            ElfW(Vernaux) vna;
            memcpy(&vna, d + apos, sizeof vna);
            l.aux[l.naux++] = apos;
            if (!vna.vna_next)
                break;
            apos += vna.vna_next;
        }
        if (!vn.vn_next)
            break;
        pos += vn.vn_next;
    }
    return l;
}

static void put(guint8 *d, size_t off, size_t width, uint64_t v)
{
    switch (width) {
    case 2: { uint16_t x = (uint16_t)v; memcpy(d + off, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(d + off, &x, 4); break; }
    case 8: { uint64_t x = v; memcpy(d + off, &x, 8); break; }
    default: ck_abort_msg("width %zu", width);
    }
}

/* ---- the fixtures as built ----------------------------------------------- */

START_TEST(newer_minor_refused)
{
    crl_error e = { 0 };
    const char *what = "plugin 'abi_symbol_next' (" NEXT_SO ")";
    ck_assert_int_eq(crl__elf_abi_check(NEXT_SO, what, &e), CRL_E_ABI);
    ck_assert_int_eq(e.code, CRL_E_ABI);
    ck_assert(g_str_has_prefix(e.message, what));
    char *version = g_strdup_printf("this libcrl %s:", crl_version());
    expect_msg(&e, "needs plugin ABI " NEXT_MINOR_ABI, "(it uses libcrl symbols of version CRL_" NEXT_MINOR_ABI ")",
               "newer than the " HOST_ABI " of", version, "upgrade crl or rebuild the plugin against this crl's SDK",
               NULL);
    g_free(version);
    /* err and what may be NULL. */
    ck_assert_int_eq(crl__elf_abi_check(NEXT_SO, "x", NULL), CRL_E_ABI);
    ck_assert_int_eq(crl__elf_abi_check(NEXT_SO, NULL, &e), CRL_E_ABI);
    ck_assert(g_str_has_prefix(e.message, NEXT_SO " needs plugin ABI"));
}
END_TEST

/* What the check replaces: the dynamic linker's own refusal of the same file. */
START_TEST(dlopen_alone_says_version_not_found)
{
    dlerror();
    void *h = dlopen(NEXT_SO, RTLD_NOW | RTLD_LOCAL);
    if (h)
        dlclose(h);
    ck_assert_msg(h == NULL, "dlopen of %s succeeded", NEXT_SO);
    const char *why = dlerror();
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, "version `CRL_" NEXT_MINOR_ABI "' not found") && strstr(why, "libcrl.so.0"), "%s",
                  why);
}
END_TEST

/* A plugin built against this SDK needs CRL_<this ABI> and passes; the same file made to need other versions
 * (its string table patched) shows which needs count. */
START_TEST(this_sdk_accepted)
{
    crl_error e = { 0 };
    ck_assert_int_eq(crl__elf_abi_check(GOOD_SO, "good", &e), CRL_OK);
    ck_assert_int_eq(e.code, CRL_OK);

    size_t len;
    guint8 *orig = slurp(GOOD_SO, &len);
    guint8 *d = dup_bytes(orig, len);
    ck_assert_int_ge(patch_all(d, len, "CRL_" HOST_ABI, "CRL_1.9"), 1);
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_E_ABI);
    expect_msg(&e, "needs plugin ABI 1.9", "CRL_1.9", NULL);

    memcpy(d, orig, len);
    patch_all(d, len, "CRL_" HOST_ABI, "CRL_1.0");
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_OK);

    memcpy(d, orig, len);
    patch_all(d, len, "CRL_" HOST_ABI, "CRL_2.2");
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_E_ABI);
    expect_msg(&e, "was built for plugin ABI 2.2", "CRL_2.2", "speaks ABI " HOST_ABI,
               "rebuild the plugin against this crl's SDK", NULL);

    memcpy(d, orig, len);
    patch_all(d, len, "CRL_" HOST_ABI, "CRL_0.2");
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_E_ABI);
    expect_msg(&e, "was built for plugin ABI 0.2", NULL);

    /* Not of the form CRL_<major>.<minor>: none of ours (same length as "CRL_1.2"). */
    static const char *const others[] = { "CRL_1.x", "CRL_x.9", "CRL_19.", "CRL_.19", "CRL1.9_", "CRX_1.9",
                                          "crl_1.9", "CRL_1-9", "CRL_+.9" };
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++) {
        memcpy(d, orig, len);
        patch_all(d, len, "CRL_" HOST_ABI, others[i]);
        ck_assert_msg(check_bytes(d, len, &e) == CRL_OK, "%s: %s", others[i], e.message);
    }

    /* A need of libcrl versions of another library is not libcrl's. */
    memcpy(d, orig, len);
    ck_assert_int_ge(patch_all(d, len, "libcrl.so.0", "libcrx.so.0"), 1);
    patch_all(d, len, "CRL_" HOST_ABI, "CRL_1.9");
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_OK);
    g_free(d);
    g_free(orig);

    /* And the newer fixture without its CRL_1.3 need passes. */
    orig = slurp(NEXT_SO, &len);
    ck_assert_int_ge(patch_all(orig, len, "CRL_" NEXT_MINOR_ABI, "CRL_" HOST_ABI), 1);
    ck_assert_int_eq(check_bytes(orig, len, &e), CRL_OK);
    g_free(orig);
}
END_TEST

START_TEST(not_elf_is_left_to_dlopen)
{
    crl_error e = { 0 };
    ck_assert_int_eq(crl__elf_abi_check(NULL, "x", &e), CRL_OK);
    char *missing = g_build_filename(tmp, "missing.so", NULL);
    ck_assert_int_eq(crl__elf_abi_check(missing, "x", &e), CRL_OK);
    g_free(missing);
    ck_assert_int_eq(crl__elf_abi_check(tmp, "x", &e), CRL_OK); /* a directory */
    char *fifo = g_build_filename(tmp, "fifo.so", NULL);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(crl__elf_abi_check(fifo, "x", &e), CRL_OK); /* does not block */
    g_free(fifo);
    const char text[] = "#!/bin/sh\necho not a plugin\n";
    ck_assert_int_eq(check_bytes((const guint8 *)text, sizeof text - 1, &e), CRL_OK);
    ck_assert_int_eq(check_bytes((const guint8 *)"", 0, &e), CRL_OK);
    ck_assert_int_eq(e.code, CRL_OK);

    /* Another class or byte order is not for this machine: dlopen says so. */
    size_t len;
    guint8 *d = slurp(NEXT_SO, &len);
    d[EI_CLASS] = d[EI_CLASS] == ELFCLASS64 ? ELFCLASS32 : ELFCLASS64;
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_OK);
    d[EI_CLASS] ^= ELFCLASS32 ^ ELFCLASS64;
    d[EI_DATA] = d[EI_DATA] == ELFDATA2LSB ? ELFDATA2MSB : ELFDATA2LSB;
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_OK);
    d[EI_DATA] ^= ELFDATA2LSB ^ ELFDATA2MSB;
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_E_ABI);
    d[0] = 0x7e;
    ck_assert_int_eq(check_bytes(d, len, &e), CRL_OK);
    g_free(d);
}
END_TEST

/* ---- hostile files ---------------------------------------------------------- */

START_TEST(truncated_copies)
{
    size_t len;
    guint8 *d = slurp(NEXT_SO, &len);
    /* Every prefix of the first 4 KiB (headers, version needs, string table) and of the last 4 KiB (the
     * section headers), and a few in between. */
    size_t head = len < 4096 ? len : 4096;
    for (size_t n = 0; n <= head; n++)
        survive(d, n, "prefix", n);
    for (size_t n = len > 4096 ? len - 4096 : 0; n <= len; n++)
        survive(d, n, "prefix", n);
    for (size_t n = head; n < len; n += 97)
        survive(d, n, "prefix", n);
    ck_assert_int_eq(survive(d, len, "whole", len), CRL_E_ABI);
    g_free(d);
}
END_TEST

START_TEST(corrupted_copies)
{
    size_t len;
    guint8 *orig = slurp(NEXT_SO, &len);
    guint8 *d = dup_bytes(orig, len);
    layout l = find_layout(orig, len);
    ck_assert_uint_ge(l.nneed, 1);
    ck_assert_uint_ge(l.naux, 2);

    const uint64_t v64[] = { 0, 1, 7, 8, 15, 16, 63, 64, len / 2, len - 64, len - 16, len - 1, len, len + 1,
                             0x7fffffff, 0xffffffff, 0x100000000, INT64_MAX, UINT64_MAX - 63, UINT64_MAX - 7,
                             UINT64_MAX };
    struct field {
        const char *name;
        size_t off, width;
    } fields[64];
    size_t nf = 0;
#define FIELD(label, base, type, member)                                                            \
    fields[nf++] = (struct field){ label, (base) + offsetof(type, member), sizeof(((type *)0)->member) }
    FIELD("e_shoff", 0, ElfW(Ehdr), e_shoff);
    FIELD("e_shnum", 0, ElfW(Ehdr), e_shnum);
    FIELD("e_shentsize", 0, ElfW(Ehdr), e_shentsize);
    FIELD("section 0 sh_size", l.shoff, ElfW(Shdr), sh_size);
    FIELD("verneed sh_offset", l.vn_shdr, ElfW(Shdr), sh_offset);
    FIELD("verneed sh_size", l.vn_shdr, ElfW(Shdr), sh_size);
    FIELD("verneed sh_link", l.vn_shdr, ElfW(Shdr), sh_link);
    FIELD("verneed sh_info", l.vn_shdr, ElfW(Shdr), sh_info);
    FIELD("verneed sh_type", l.vn_shdr, ElfW(Shdr), sh_type);
    FIELD("strtab sh_offset", l.str_shdr, ElfW(Shdr), sh_offset);
    FIELD("strtab sh_size", l.str_shdr, ElfW(Shdr), sh_size);
    FIELD("strtab sh_type", l.str_shdr, ElfW(Shdr), sh_type);
    for (size_t i = 0; i < l.nneed; i++) {
        FIELD("vn_version", l.need[i], ElfW(Verneed), vn_version);
        FIELD("vn_cnt", l.need[i], ElfW(Verneed), vn_cnt);
        FIELD("vn_file", l.need[i], ElfW(Verneed), vn_file);
        FIELD("vn_aux", l.need[i], ElfW(Verneed), vn_aux);
        FIELD("vn_next", l.need[i], ElfW(Verneed), vn_next);
    }
    for (size_t i = 0; i < l.naux && nf + 2 <= G_N_ELEMENTS(fields); i++) {
        FIELD("vna_name", l.aux[i], ElfW(Vernaux), vna_name);
        FIELD("vna_next", l.aux[i], ElfW(Vernaux), vna_next);
    }
#undef FIELD
    for (size_t f = 0; f < nf; f++) {
        for (size_t v = 0; v < G_N_ELEMENTS(v64); v++) {
            memcpy(d, orig, len);
            put(d, fields[f].off, fields[f].width, v64[v]);
            char label[64];
            g_snprintf(label, sizeof label, "%s =", fields[f].name);
            survive(d, len, label, (size_t)v64[v]);
        }
        /* Small offsets around the true value (pointing into the middle of entries and names). */
        for (int delta = -20; delta <= 20; delta++) {
            memcpy(d, orig, len);
            uint64_t cur = 0;
            memcpy(&cur, orig + fields[f].off, fields[f].width);
            put(d, fields[f].off, fields[f].width, cur + (uint64_t)(int64_t)delta);
            char label[64];
            g_snprintf(label, sizeof label, "%s %+d, =", fields[f].name, delta);
            survive(d, len, label, (size_t)(cur + (uint64_t)(int64_t)delta));
        }
    }

    /* Names cut by the end of their string table or of the file. */
    for (size_t cut = 0; cut < 16 && cut <= l.str_size; cut++) {
        memcpy(d, orig, len);
        put(d, l.str_shdr + offsetof(ElfW(Shdr), sh_size), sizeof(((ElfW(Shdr) *)0)->sh_size), l.str_size - cut);
        survive(d, len, "strtab shortened by", cut);
        memcpy(d, orig, len);
        put(d, l.str_shdr + offsetof(ElfW(Shdr), sh_offset), sizeof(((ElfW(Shdr) *)0)->sh_offset),
            len - l.str_size + cut);
        survive(d, len, "strtab moved to the end +", cut);
    }
    /* The string table is all of the file, and a version need section that is the whole file. */
    memcpy(d, orig, len);
    put(d, l.str_shdr + offsetof(ElfW(Shdr), sh_offset), sizeof(((ElfW(Shdr) *)0)->sh_offset), 0);
    put(d, l.str_shdr + offsetof(ElfW(Shdr), sh_size), sizeof(((ElfW(Shdr) *)0)->sh_size), len);
    survive(d, len, "strtab = file", len);
    memcpy(d, orig, len);
    put(d, l.vn_shdr + offsetof(ElfW(Shdr), sh_offset), sizeof(((ElfW(Shdr) *)0)->sh_offset), 0);
    put(d, l.vn_shdr + offsetof(ElfW(Shdr), sh_size), sizeof(((ElfW(Shdr) *)0)->sh_size), len);
    survive(d, len, "verneed = file", len);

    /* Random byte damage to the ELF header, the version needs and the section headers. */
    GRand *r = g_rand_new_with_seed(1303);
    const size_t regions[][2] = { { 0, sizeof(ElfW(Ehdr)) }, { l.vn_off, l.vn_size }, { l.str_off, l.str_size },
                                  { l.shoff, l.shnum * l.shentsize } };
    int refused = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(d, orig, len);
        int flips = g_rand_int_range(r, 1, 6);
        for (int k = 0; k < flips; k++) {
            const size_t *reg = regions[g_rand_int_range(r, 0, G_N_ELEMENTS(regions))];
            size_t at = reg[0] + (size_t)g_rand_int_range(r, 0, (gint32)reg[1]);
            d[at] = (guint8)g_rand_int_range(r, 0, 256);
        }
        refused += survive(d, len, "random damage", (size_t)it) == CRL_E_ABI;
    }
    g_rand_free(r);
    ck_assert_int_gt(refused, 0); /* many copies keep their CRL_1.3 need intact */
    g_free(d);
    g_free(orig);
}
END_TEST

static Suite *elf_abi_suite(void)
{
    Suite *s = suite_create("elf_abi");
    TCase *tc = tcase_create("fixtures");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, newer_minor_refused);
    tcase_add_test(tc, dlopen_alone_says_version_not_found);
    tcase_add_test(tc, this_sdk_accepted);
    tcase_add_test(tc, not_elf_is_left_to_dlopen);
    suite_add_tcase(s, tc);

    tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600); /* under valgrind */
    tcase_add_test(tc, truncated_copies);
    tcase_add_test(tc, corrupted_copies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(elf_abi_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
