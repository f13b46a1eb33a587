/* Check suite for plugin scan records and the registry cache (core/scan_record.c, core/registry_cache.c):
 * record round trips and validation, cache save/load/lookup, every truncation and corruption, hostile file
 * types at the cache path, save failures. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry-cache-private.h"

/* ---- helpers -------------------------------------------------------------------------------------------- */

#include "scratch-dir.h"

static void setup(void)
{
    scratch_open("crl-regcache-test-XXXXXX");
}

static void teardown(void)
{
    scratch_close();
}

/* Plain write, mode 0600 (g_file_set_contents fsyncs, slow in the loops below). */
static void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, g_strerror(errno));
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0600), 0);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    gchar *buf;
    gsize n;
    ck_assert_msg(g_file_get_contents(path, &buf, &n, NULL), "cannot read %s", path);
    *len = n;
    return (uint8_t *)buf;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void reseal(uint8_t *buf, size_t len)
{
    GChecksum *cs = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(cs, buf + CRL__REGCACHE_HEADER, (gssize)(len - CRL__REGCACHE_HEADER));
    gsize n = 32;
    g_checksum_get_digest(cs, buf + 32, &n);
    g_checksum_free(cs);
}

/* A well-formed cache file around any payload bytes (correct length and checksum). */
static uint8_t *wrap_payload(const void *payload, size_t plen, size_t *len)
{
    *len = CRL__REGCACHE_HEADER + plen;
    uint8_t *buf = g_malloc0(*len);
    memcpy(buf, CRL__REGCACHE_MAGIC, 8);
    put32(buf + 8, CRL__REGCACHE_VERSION);
    put32(buf + 12, CRL_ABI_MAJOR);
    put32(buf + 16, CRL_ABI_MINOR);
    put64(buf + 24, plen);
    if (plen)
        memcpy(buf + CRL__REGCACHE_HEADER, payload, plen);
    reseal(buf, *len);
    return buf;
}

/* Assert that `text` exists and contains every one of the NULL-terminated substrings. */
static void assert_has(const char *text, ...)
{
    ck_assert_msg(text != NULL, "expected a message, got none");
    va_list ap;
    va_start(ap, text);
    const char *want;
    while ((want = va_arg(ap, const char *)))
        ck_assert_msg(strstr(text, want), "message '%s' lacks '%s'", text, want);
    va_end(ap);
}

/* Load `file` and expect an empty cache and a warning naming the file, "rebuilt" and each substring. */
#define expect_refused(file, ...) expect_refused_(file, __VA_ARGS__, (const char *)NULL)
static void expect_refused_(const char *file, ...)
{
    char *warning = NULL;
    crl__registry_cache *c = crl__registry_cache_load(file, &warning);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);
    ck_assert_msg(warning != NULL, "loading %s gave no warning", file);
    assert_has(warning, file, "rebuilt", (const char *)NULL);
    va_list ap;
    va_start(ap, file);
    const char *want;
    while ((want = va_arg(ap, const char *)))
        ck_assert_msg(strstr(warning, want), "warning '%s' lacks '%s'", warning, want);
    va_end(ap);
    g_free(warning);
    crl__registry_cache_free(c);
}

static void set_opt(crl_option *o, const char *name, int32_t type, uint32_t flags, const char *def, double min,
                    double max, const char *choices, const char *doc)
{
    o->name = g_strdup(name);
    o->type = type;
    o->flags = flags;
    o->default_value = g_strdup(def);
    o->min = min;
    o->max = max;
    o->choices = g_strdup(choices);
    o->doc = g_strdup(doc);
}

/* A table of n zeroed entries plus END, to fill with set_opt. */
static crl_option *opt_table(size_t n)
{
    return g_new0(crl_option, n + 1);
}

static void add_component(crl__scan_result *r, int32_t kind, const char *name, const char *desc, crl_option *opts)
{
    r->components = g_renew(crl__scan_component, r->components, r->n_components + 1);
    crl__scan_component *c = &r->components[r->n_components++];
    c->kind = kind;
    c->name = g_strdup(name);
    c->description = g_strdup(desc);
    c->options = opts ? opts : crl__options_dup(NULL);
}

/* A good result with a bit of everything. */
static crl__scan_result *rich_result(const char *path)
{
    crl__scan_result *r = crl__scan_result_new(path);
    r->id = (crl__file_id){ 0xfd01, 0x123456789abcdefull, 40960, -5, INT64_MAX };
    r->name = g_strdup("rich");
    r->version = g_strdup("1.2.3");
    r->license = g_strdup("MIT");
    r->description = NULL;
    r->abi_major = CRL_ABI_MAJOR;
    r->abi_minor = CRL_ABI_MINOR;
    crl__options_free(r->plugin_options);
    r->plugin_options = opt_table(2);
    set_opt(&r->plugin_options[0], "threads", CRL_OPT_INT, CRL_OPT_RANGE, "4", 1, 64, NULL, "worker threads");
    set_opt(&r->plugin_options[1], "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL, NULL);

    crl_option *all = opt_table(8);
    set_opt(&all[0], "flag", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "a switch");
    set_opt(&all[1], "count", CRL_OPT_INT, CRL_OPT_RANGE | CRL_OPT_REQUIRED, NULL, -3, 1e18, NULL, NULL);
    set_opt(&all[2], "lr", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.001", -INFINITY, INFINITY, NULL, "learning rate");
    set_opt(&all[3], "label", CRL_OPT_STRING, 0, "", 0, 0, NULL, "empty default, not NULL");
    set_opt(&all[4], "keys", CRL_OPT_LIST, 0, "a, b", 0, 0, NULL, NULL);
    set_opt(&all[5], "mode", CRL_OPT_ENUM, 0, "fast", 0, 0, "fast|slow|\xc3\xa9t\xc3\xa9", "mode \xff (latin-1)");
    set_opt(&all[6], "buf", CRL_OPT_SIZE, CRL_OPT_RANGE, "64K", 0, 1099511627776.0, NULL, NULL);
    set_opt(&all[7], "weights", CRL_OPT_DOUBLES, 0, NULL, 0, 0, NULL, "per-env weights");
    add_component(r, CRL_KIND_ENV, "Rich-Env_v1.0", "every option type", all);
    add_component(r, CRL_KIND_TRANSFORM, "norm", NULL, NULL);
    crl_option *one = opt_table(1);
    set_opt(&one[0], "alpha", CRL_OPT_DOUBLE, 0, "0.6", 0, 0, NULL, NULL);
    add_component(r, CRL_KIND_SAMPLER, "prioritized", "", one);
    add_component(r, CRL_KIND_LOSS, "norm", "same name, other kind", NULL);
    return r;
}

static void assert_str_same(const char *a, const char *b, const char *what)
{
    ck_assert_msg((a == NULL) == (b == NULL), "%s: one is NULL ('%s' vs '%s')", what, a ? a : "(null)",
                  b ? b : "(null)");
    if (a)
        ck_assert_msg(strcmp(a, b) == 0, "%s: '%s' != '%s'", what, a, b);
}

static void assert_options_same(const crl_option *a, const crl_option *b)
{
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    size_t i = 0;
    for (; a[i].type != CRL_OPT_END; i++) {
        ck_assert_int_eq(a[i].type, b[i].type);
        assert_str_same(a[i].name, b[i].name, "option name");
        ck_assert_uint_eq(a[i].flags, b[i].flags);
        assert_str_same(a[i].default_value, b[i].default_value, "default");
        ck_assert(a[i].min == b[i].min || (isnan(a[i].min) && isnan(b[i].min)));
        ck_assert(a[i].max == b[i].max || (isnan(a[i].max) && isnan(b[i].max)));
        assert_str_same(a[i].choices, b[i].choices, "choices");
        assert_str_same(a[i].doc, b[i].doc, "doc");
    }
    ck_assert_int_eq(b[i].type, CRL_OPT_END);
    ck_assert_ptr_null(b[i].name);
}

static void assert_results_same(const crl__scan_result *a, const crl__scan_result *b)
{
    assert_str_same(a->path, b->path, "path");
    ck_assert(crl__file_id_equal(&a->id, &b->id));
    ck_assert_int_eq(a->status, b->status);
    assert_str_same(a->reason, b->reason, "reason");
    assert_str_same(a->name, b->name, "name");
    assert_str_same(a->version, b->version, "version");
    assert_str_same(a->license, b->license, "license");
    assert_str_same(a->description, b->description, "description");
    ck_assert_uint_eq(a->abi_major, b->abi_major);
    ck_assert_uint_eq(a->abi_minor, b->abi_minor);
    assert_options_same(a->plugin_options, b->plugin_options);
    ck_assert_uint_eq(a->n_components, b->n_components);
    for (size_t i = 0; i < a->n_components; i++) {
        ck_assert_int_eq(a->components[i].kind, b->components[i].kind);
        assert_str_same(a->components[i].name, b->components[i].name, "component name");
        assert_str_same(a->components[i].description, b->components[i].description, "component description");
        assert_options_same(a->components[i].options, b->components[i].options);
    }
}

/* Through bytes, as the scanner's report and the cache carry it: serialized, then read back untrusted. */
static crl__scan_result *through_bytes(const crl__scan_result *r, crl_error *err)
{
    GVariant *v = g_variant_ref_sink(crl__scan_result_to_variant(r));
    GBytes *b = g_variant_get_data_as_bytes(v);
    g_variant_unref(v);
    GVariant *u = g_variant_ref_sink(g_variant_new_from_bytes(G_VARIANT_TYPE(CRL__SCAN_RECORD_TYPE), b, FALSE));
    g_bytes_unref(b);
    crl__scan_result *back = crl__scan_result_from_variant(u, err);
    g_variant_unref(u);
    return back;
}

/* A real file at tmp/name with `content`, and its identity. */
static char *make_plugin_file(const char *name, const char *content, crl__file_id *id)
{
    char *p = tpath(name);
    spit(p, content, strlen(content));
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    crl__file_id_from_stat(&st, id);
    return p;
}

/* ---- records -------------------------------------------------------------------------------------------- */

START_TEST(test_file_id)
{
    char *p = tpath("f");
    spit(p, "abc", 3);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    crl__file_id id, same;
    crl__file_id_from_stat(&st, &id);
    crl__file_id_from_stat(&st, &same);
    ck_assert_uint_eq(id.size, 3);
    ck_assert_uint_eq(id.ino, (uint64_t)st.st_ino);
    ck_assert_uint_eq(id.dev, (uint64_t)st.st_dev);
    ck_assert_int_eq(id.mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    ck_assert_int_eq(id.ctime_ns, (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);
    ck_assert(crl__file_id_equal(&id, &same));
    uint64_t *u[] = { &same.dev, &same.ino, &same.size };
    for (size_t i = 0; i < G_N_ELEMENTS(u); i++) {
        (*u[i])++;
        ck_assert(!crl__file_id_equal(&id, &same));
        (*u[i])--;
    }
    int64_t *s[] = { &same.mtime_ns, &same.ctime_ns };
    for (size_t i = 0; i < G_N_ELEMENTS(s); i++) {
        (*s[i])++;
        ck_assert(!crl__file_id_equal(&id, &same));
        (*s[i])--;
    }
    ck_assert(crl__file_id_equal(&id, &same));
    g_free(p);
}
END_TEST

START_TEST(test_options_dup)
{
    crl_option *empty = crl__options_dup(NULL);
    ck_assert_int_eq(empty[0].type, CRL_OPT_END);
    crl__options_free(empty);
    crl__options_free(NULL);
    static const crl_option table[] = {
        { "a", CRL_OPT_ENUM, 0, "x", 0, 0, "x|y", "doc" },
        { "b", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 2, NULL, NULL },
        CRL_OPTIONS_END,
    };
    crl_option *d = crl__options_dup(table);
    assert_options_same(table, d);
    ck_assert_ptr_ne(d[0].name, table[0].name);
    ck_assert_ptr_ne(d[0].choices, table[0].choices);
    crl__options_free(d);
}
END_TEST

START_TEST(test_record_round_trip)
{
    crl__scan_result *r = rich_result("/opt/crl/plug\xc3\xa9-\xff.so");
    crl_error err = { 0 };
    /* Straight from the tree form, and through untrusted bytes. */
    GVariant *v = g_variant_ref_sink(crl__scan_result_to_variant(r));
    crl__scan_result *a = crl__scan_result_from_variant(v, &err);
    ck_assert_msg(a != NULL, "%s", err.message);
    g_variant_unref(v);
    assert_results_same(r, a);
    crl__scan_result *b = through_bytes(r, &err);
    ck_assert_msg(b != NULL, "%s", err.message);
    assert_results_same(r, b);
    crl__scan_result_free(a);
    crl__scan_result_free(b);

    /* Broken, with its reason, no descriptor and no components. */
    crl__scan_result *broken = crl__scan_result_new("/x/crash.so");
    broken->status = CRL_E_CRASH;
    broken->reason = g_strdup("plugin 'crash' (/x/crash.so) crashed with SIGSEGV during init");
    crl__scan_result *c = through_bytes(broken, &err);
    ck_assert_msg(c != NULL, "%s", err.message);
    assert_results_same(broken, c);
    ck_assert_ptr_null(c->name);
    ck_assert_ptr_nonnull(c->plugin_options);
    ck_assert_int_eq(c->plugin_options[0].type, CRL_OPT_END);
    ck_assert_uint_eq(c->n_components, 0);
    crl__scan_result_free(c);
    crl__scan_result_free(broken);

    /* Broken after the descriptor was read: status and components both kept. */
    r->status = CRL_E_ABI;
    r->reason = g_strdup("plugin 'rich' was built for ABI 2.0");
    c = through_bytes(r, &err);
    ck_assert_msg(c != NULL, "%s", err.message);
    assert_results_same(r, c);
    crl__scan_result_free(c);
    crl__scan_result_free(r);
    crl__scan_result_free(NULL);
}
END_TEST

/* from_variant(to_variant(r)) must fail with CRL_E_CORRUPT, a message naming the path and each substring. */
#define expect_rejected(r, ...) expect_rejected_(r, __VA_ARGS__, (const char *)NULL)
static void expect_rejected_(crl__scan_result *r, ...)
{
    crl_error err = { 0 };
    crl__scan_result *back = through_bytes(r, &err);
    ck_assert_msg(back == NULL, "a bad record for %s was accepted", r->path);
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    if (r->path && *r->path)
        assert_has(err.message, r->path, (const char *)NULL);
    va_list ap;
    va_start(ap, r);
    const char *want;
    while ((want = va_arg(ap, const char *)))
        ck_assert_msg(strstr(err.message, want), "error '%s' lacks '%s'", err.message, want);
    va_end(ap);
    /* err may be NULL. */
    back = through_bytes(r, NULL);
    ck_assert_ptr_null(back);
    crl__scan_result_free(r);
}

START_TEST(test_record_rejects)
{
    crl__scan_result *r;

    r = rich_result("/p/kind0.so");
    r->components[1].kind = 0;
    expect_rejected(r, "component 1", "'norm'", "unknown kind 0");
    r = rich_result("/p/kindmax.so");
    r->components[0].kind = CRL_KIND_COUNT;
    expect_rejected(r, "component 0", "unknown kind 7");
    r = rich_result("/p/kindneg.so");
    r->components[2].kind = -1;
    expect_rejected(r, "unknown kind -1");

    r = rich_result("/p/type9.so");
    r->components[0].options[3].type = CRL_OPT_DOUBLES + 1;
    expect_rejected(r, "env/Rich-Env_v1.0", "option 'label'", "unknown type 9");
    r = rich_result("/p/typeneg.so");
    r->plugin_options[1].type = -2;
    expect_rejected(r, "plugin options", "option 'kwargs.'", "unknown type -2");

    r = rich_result("/p/emptyopt.so");
    g_free((char *)r->components[0].options[5].name);
    r->components[0].options[5].name = g_strdup("");
    expect_rejected(r, "env/Rich-Env_v1.0", "option 5 has an empty name");
    r = rich_result("/p/nullopt.so");
    g_free((char *)r->plugin_options[0].name);
    r->plugin_options[0].name = NULL;
    expect_rejected(r, "plugin options", "option 0 has an empty name");

    r = rich_result("/p/emptycomp.so");
    g_free(r->components[3].name);
    r->components[3].name = g_strdup("");
    expect_rejected(r, "component 3", "bad loss name ''");
    r = rich_result("/p/slashcomp.so");
    g_free(r->components[0].name);
    r->components[0].name = g_strdup("a/b\x1b[31m");
    expect_rejected(r, "bad env name 'a/b?[31m'");
    r = rich_result("/p/dup.so");
    g_free(r->components[3].name);
    r->components[3].name = g_strdup("prioritized");
    r->components[3].kind = CRL_KIND_SAMPLER;
    expect_rejected(r, "component 3", "sampler/prioritized appears twice");

    r = rich_result("/p/enum.so");
    g_free((char *)r->components[0].options[5].choices);
    r->components[0].options[5].choices = NULL;
    expect_rejected(r, "enum option 'mode' has no choices");
    r = rich_result("/p/range.so");
    r->plugin_options[0].min = 100;
    expect_rejected(r, "option 'threads' has min 100 > max 64");
    r = rich_result("/p/nanrange.so");
    r->plugin_options[0].max = NAN;
    expect_rejected(r, "option 'threads' has min");
    r = rich_result("/p/prefix.so");
    g_free((char *)r->plugin_options[1].name);
    r->plugin_options[1].name = g_strdup("kwargs");
    expect_rejected(r, "prefix option 'kwargs' does not end with '.'");

    r = rich_result("/p/noreason.so");
    r->status = CRL_E_CRASH;
    expect_rejected(r, "CRL_E_CRASH", "no reason");
    r = rich_result("/p/emptyreason.so");
    r->status = CRL_E_PLUGIN;
    r->reason = g_strdup("");
    expect_rejected(r, "CRL_E_PLUGIN", "no reason");
    r = rich_result("/p/negstatus.so");
    r->status = -1;
    r->reason = g_strdup("x");
    expect_rejected(r, "status -1 is negative");
    r = rich_result("/p/noname.so");
    g_free(r->name);
    r->name = NULL;
    expect_rejected(r, "status CRL_OK but no plugin name");
    r = rich_result("");
    expect_rejected(r, "the path is empty");

    /* Sizes. */
    r = rich_result("/p/long.so");
    r->description = g_malloc(CRL__SCAN_TEXT_MAX + 2);
    memset(r->description, 'x', CRL__SCAN_TEXT_MAX + 1);
    r->description[CRL__SCAN_TEXT_MAX + 1] = '\0';
    expect_rejected(r, "plugin description is longer than 65536 bytes");
    r = rich_result("/p/justfits.so");
    r->description = g_malloc(CRL__SCAN_TEXT_MAX + 1);
    memset(r->description, 'x', CRL__SCAN_TEXT_MAX);
    r->description[CRL__SCAN_TEXT_MAX] = '\0';
    crl_error err = { 0 };
    crl__scan_result *ok = through_bytes(r, &err);
    ck_assert_msg(ok != NULL, "%s", err.message);
    crl__scan_result_free(ok);
    crl__scan_result_free(r);

    r = rich_result("/p/manycomp.so");
    for (int i = 0; i < CRL__SCAN_COMPONENTS_MAX; i++) {
        char name[32];
        g_snprintf(name, sizeof name, "c%d", i);
        add_component(r, CRL_KIND_WRITER, name, NULL, NULL);
    }
    expect_rejected(r, "4100 components, more than 4096");
    r = rich_result("/p/manyopts.so");
    crl__options_free(r->components[1].options);
    r->components[1].options = opt_table(CRL__SCAN_OPTIONS_MAX + 1);
    for (int i = 0; i <= CRL__SCAN_OPTIONS_MAX; i++) {
        char name[32];
        g_snprintf(name, sizeof name, "o%d", i);
        set_opt(&r->components[1].options[i], name, CRL_OPT_BOOL, 0, NULL, 0, 0, NULL, NULL);
    }
    expect_rejected(r, "transform/norm", "1025 options, more than 1024");
}
END_TEST

/* Records no to_variant would make: wrong types, bad bytestrings, malformed serialized data. */
START_TEST(test_record_rejects_raw)
{
    crl_error err = { 0 };
    GVariant *s = g_variant_ref_sink(g_variant_new_string("not a record"));
    ck_assert_ptr_null(crl__scan_result_from_variant(s, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    assert_has(err.message, "has type 's', expected '(ay(tttxx)", (const char *)NULL);
    ck_assert_ptr_null(crl__scan_result_from_variant(s, NULL));
    g_variant_unref(s);
    ck_assert_ptr_null(crl__scan_result_from_variant(NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);

    /* The record format spelled out, with raw bytestrings in the path and reason. */
    static const struct {
        const char *path;
        size_t plen;
        const char *reason;
        size_t rlen;
        const char *want;
    } cases[] = {
        { "/no/nul.so", 10, "r", 2, "scan record: path is not NUL-terminated" },
        { "", 0, "r", 2, "scan record: path is not NUL-terminated" },
        { "/nul\0in.so", 11, "r", 2, "scan record: path holds a NUL byte" },
        { "/r.so", 6, "no nul", 6, "scan record for /r.so: reason is not NUL-terminated" },
        { "/r.so", 6, "a\0b", 4, "scan record for /r.so: reason holds a NUL byte" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        GVariant *path = g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, cases[i].path, cases[i].plen, 1);
        GVariant *reason = g_variant_new_maybe(
            NULL, g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, cases[i].reason, cases[i].rlen, 1));
        GVariant *none = g_variant_new_maybe(G_VARIANT_TYPE_BYTESTRING, NULL);
        GVariant *v = g_variant_ref_sink(g_variant_new(
            "(@ay(tttxx)i@may@may@may@may@may(uu)@a" CRL__SCAN_OPTION_TYPE "@a" CRL__SCAN_COMPONENT_TYPE ")", path,
            (guint64)1, (guint64)2, (guint64)3, (gint64)4, (gint64)5, CRL_E_PLUGIN, reason, none, none, none, none,
            1u, 0u, g_variant_new_array(G_VARIANT_TYPE(CRL__SCAN_OPTION_TYPE), NULL, 0),
            g_variant_new_array(G_VARIANT_TYPE(CRL__SCAN_COMPONENT_TYPE), NULL, 0)));
        crl_error e = { 0 };
        ck_assert_ptr_null(crl__scan_result_from_variant(v, &e));
        ck_assert_int_eq(e.code, CRL_E_CORRUPT);
        assert_has(e.message, cases[i].want, (const char *)NULL);
        g_variant_unref(v);
    }

    /* Serialized bytes cut short or with their framing damaged are not in normal form. */
    crl__scan_result *r = rich_result("/p/frame.so");
    GVariant *v = g_variant_ref_sink(crl__scan_result_to_variant(r));
    size_t n = g_variant_get_size(v);
    uint8_t *data = g_malloc(n);
    g_variant_store(v, data);
    g_variant_unref(v);
    size_t refused = 0;
    for (size_t cut = 0; cut < n; cut++) {
        GVariant *u = g_variant_ref_sink(
            g_variant_new_from_data(G_VARIANT_TYPE(CRL__SCAN_RECORD_TYPE), data, cut, FALSE, NULL, NULL));
        crl_error e = { 0 };
        crl__scan_result *back = crl__scan_result_from_variant(u, &e);
        g_variant_unref(u);
        ck_assert_msg(back == NULL, "a record cut to %zu of %zu bytes was accepted", cut, n);
        ck_assert_int_eq(e.code, CRL_E_CORRUPT);
        refused += strstr(e.message, "not in GVariant normal form") != NULL;
    }
    ck_assert_uint_gt(refused, 0);
    /* The last byte is a framing offset: pointing it elsewhere is malformed. */
    data[n - 1] ^= 0x01;
    GVariant *u = g_variant_ref_sink(
        g_variant_new_from_data(G_VARIANT_TYPE(CRL__SCAN_RECORD_TYPE), data, n, FALSE, NULL, NULL));
    ck_assert_ptr_null(crl__scan_result_from_variant(u, &err));
    ck_assert_int_eq(err.code, CRL_E_CORRUPT);
    g_variant_unref(u);
    g_free(data);
    crl__scan_result_free(r);
}
END_TEST

/* ---- the cache ------------------------------------------------------------------------------------------ */

START_TEST(test_cache_file_name)
{
    char *f = crl__registry_cache_file();
    char *want = g_strdup_printf("%s/crl/registry-%d.%d.bin", g_get_user_cache_dir(), CRL_ABI_MAJOR, CRL_ABI_MINOR);
    ck_assert_str_eq(f, want);
    g_free(want);
    g_free(f);
}
END_TEST

START_TEST(test_cache_round_trip)
{
    crl__file_id ida, idb;
    char *pa = make_plugin_file("a.so", "plugin a", &ida);
    char *pb = make_plugin_file("b.so", "plugin b, longer", &idb);
    char *file = tpath("cache/deep/crl/registry.bin");

    /* A missing file is an empty cache without a warning. */
    char *warning = (char *)"unset";
    crl__registry_cache *c = crl__registry_cache_load(file, &warning);
    ck_assert_ptr_null(warning);
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);
    ck_assert_ptr_null(crl__registry_cache_lookup(c, pa, &ida));

    crl__scan_result *ra = rich_result(pa);
    ra->id = ida;
    crl__scan_result *rb = crl__scan_result_new(pb);
    rb->id = idb;
    rb->status = CRL_E_ABI;
    rb->reason = g_strdup("built for ABI 9.0");
    crl__scan_result *keep_a = through_bytes(ra, NULL), *keep_b = through_bytes(rb, NULL);
    crl__registry_cache_put(c, ra);
    crl__registry_cache_put(c, rb);
    ck_assert_ptr_eq(crl__registry_cache_lookup(c, pa, &ida), ra);
    crl_error err = { 0 };
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    crl__registry_cache_free(c);

    /* The directory is private, the file 0600. */
    struct stat st;
    char *dir = tpath("cache/deep/crl");
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0700);
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    g_free(dir);

    c = crl__registry_cache_load(file, &warning);
    ck_assert_msg(warning == NULL, "%s", warning);
    ck_assert_uint_eq(crl__registry_cache_size(c), 2);
    const crl__scan_result *ga = crl__registry_cache_lookup(c, pa, &ida);
    const crl__scan_result *gb = crl__registry_cache_lookup(c, pb, &idb);
    ck_assert_ptr_nonnull(ga);
    ck_assert_ptr_nonnull(gb);
    assert_results_same(keep_a, ga);
    assert_results_same(keep_b, gb);
    ck_assert_ptr_null(crl__registry_cache_lookup(c, "/nowhere.so", &ida));
    ck_assert_ptr_null(crl__registry_cache_lookup(c, pb, &ida));
    ck_assert_ptr_null(crl__registry_cache_lookup(c, NULL, &ida));
    ck_assert_ptr_null(crl__registry_cache_lookup(NULL, pa, &ida));

    /* Unchanged: save writes nothing (the file, removed, stays removed). */
    size_t len1;
    uint8_t *bytes1 = slurp(file, &len1);
    ck_assert_int_eq(g_unlink(file), 0);
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    ck_assert(!g_file_test(file, G_FILE_TEST_EXISTS));

    /* The same entries give the same bytes. */
    crl__registry_cache_put(c, through_bytes(keep_b, NULL));
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    size_t len2;
    uint8_t *bytes2 = slurp(file, &len2);
    ck_assert_uint_eq(len1, len2);
    ck_assert(memcmp(bytes1, bytes2, len1) == 0);
    GBytes *mem = crl__registry_cache_to_bytes(c);
    ck_assert_uint_eq(g_bytes_get_size(mem), len1);
    ck_assert(memcmp(g_bytes_get_data(mem, NULL), bytes1, len1) == 0);
    g_bytes_unref(mem);

    /* Replacing an entry: one per path, the newest wins. */
    crl__scan_result *again = crl__scan_result_new(pa);
    again->id = ida;
    again->name = g_strdup("a2");
    crl__registry_cache_put(c, again);
    ck_assert_uint_eq(crl__registry_cache_size(c), 2);
    ck_assert_str_eq(crl__registry_cache_lookup(c, pa, &ida)->name, "a2");
    /* Clear empties it, and a save writes the empty cache. */
    crl__registry_cache_clear(c);
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    crl__registry_cache_free(c);
    c = crl__registry_cache_load(file, &warning);
    ck_assert_msg(warning == NULL, "%s", warning);
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);

    /* NULLs are harmless; put frees what it cannot keep. */
    crl__registry_cache_put(c, NULL);
    crl__registry_cache_put(NULL, crl__scan_result_new("/x.so"));
    crl__registry_cache_put(c, crl__scan_result_new(NULL));
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);
    crl__registry_cache_clear(NULL);
    crl__registry_cache_free(NULL);
    ck_assert_int_eq(crl__registry_cache_save(NULL, file, NULL), CRL_E_INVALID);
    ck_assert_int_eq(crl__registry_cache_save(c, NULL, &err), CRL_E_INVALID);
    crl__registry_cache_free(c);
    c = crl__registry_cache_load(file, NULL);
    crl__registry_cache_free(c);

    g_free(bytes1);
    g_free(bytes2);
    crl__scan_result_free(keep_a);
    crl__scan_result_free(keep_b);
    g_free(pa);
    g_free(pb);
    g_free(file);
}
END_TEST

START_TEST(test_lookup_miss_on_change)
{
    crl__file_id id;
    char *p = make_plugin_file("p.so", "version one", &id);
    crl__registry_cache *c = crl__registry_cache_load(NULL, NULL);
    crl__scan_result *r = rich_result(p);
    r->id = id;
    crl__registry_cache_put(c, r);
    ck_assert_ptr_nonnull(crl__registry_cache_lookup(c, p, &id));
    crl__file_id other;
    other = id, other.size++;
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));
    other = id, other.mtime_ns++;
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));
    other = id, other.ctime_ns--;
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));
    other = id, other.ino++;
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));
    other = id, other.dev++;
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));

    /* The file rewritten in place (same size, new mtime), and replaced by another inode. */
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    struct timespec later[2] = { st.st_atim, st.st_mtim };
    later[1].tv_sec += 10;
    ck_assert_int_eq(utimensat(AT_FDCWD, p, later, 0), 0);
    ck_assert_int_eq(stat(p, &st), 0);
    crl__file_id_from_stat(&st, &other);
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));
    char *q = tpath("p.so.new");
    spit(q, "version one", 11);
    ck_assert_int_eq(rename(q, p), 0);
    ck_assert_int_eq(stat(p, &st), 0);
    crl__file_id_from_stat(&st, &other);
    ck_assert_ptr_null(crl__registry_cache_lookup(c, p, &other));
    crl__registry_cache_free(c);
    g_free(q);
    g_free(p);
}
END_TEST

/* A real cache file with two entries, written to tmp/good.bin; returns its bytes. */
static uint8_t *good_cache(char **file, size_t *len)
{
    crl__file_id ida, idb;
    char *pa = make_plugin_file("good-a.so", "a", &ida);
    char *pb = make_plugin_file("good-b.so", "bb", &idb);
    crl__registry_cache *c = crl__registry_cache_load(NULL, NULL);
    crl__scan_result *ra = rich_result(pa), *rb = crl__scan_result_new(pb);
    ra->id = ida;
    rb->id = idb;
    rb->status = CRL_E_TIMEOUT;
    rb->reason = g_strdup("hung");
    crl__registry_cache_put(c, ra);
    crl__registry_cache_put(c, rb);
    *file = tpath("good.bin");
    crl_error err = { 0 };
    ck_assert_msg(crl__registry_cache_save(c, *file, &err) == CRL_OK, "%s", err.message);
    crl__registry_cache_free(c);
    g_free(pa);
    g_free(pb);
    return slurp(*file, len);
}

START_TEST(test_every_truncation)
{
    char *good;
    size_t n;
    uint8_t *bytes = good_cache(&good, &n);
    char *file = tpath("cut.bin");
    for (size_t len = 0; len < n; len++) {
        spit(file, bytes, len);
        if (len == 0)
            expect_refused(file, "the file is empty");
        else if (len < CRL__REGCACHE_HEADER)
            expect_refused(file, "truncated", "shorter than the 64-byte header");
        else
            expect_refused(file, "header claims a payload of", "(truncated)");
    }
    /* One byte too many. */
    uint8_t *more = g_malloc(n + 1);
    memcpy(more, bytes, n);
    more[n] = 0;
    spit(file, more, n + 1);
    expect_refused(file, "(trailing bytes)");
    g_free(more);
    g_free(bytes);
    g_free(file);
    g_free(good);
}
END_TEST

START_TEST(test_corrupt_headers_and_payload)
{
    char *good;
    size_t n;
    uint8_t *bytes = good_cache(&good, &n);
    uint8_t *b = g_malloc(n);
    char *file = tpath("bad.bin");

    /* Every flipped payload byte. */
    for (size_t i = CRL__REGCACHE_HEADER; i < n; i++) {
        memcpy(b, bytes, n);
        b[i] ^= 0x20;
        spit(file, b, n);
        expect_refused(file, "checksum mismatch (SHA-256)");
    }
    /* A flipped checksum byte. */
    memcpy(b, bytes, n);
    b[40] ^= 1;
    spit(file, b, n);
    expect_refused(file, "checksum mismatch");

    memcpy(b, bytes, n);
    b[3] = 'X';
    spit(file, b, n);
    expect_refused(file, "not a crl plugin registry cache (bad magic)");

    memcpy(b, bytes, n);
    put32(b + 8, CRL__REGCACHE_VERSION + 1);
    spit(file, b, n);
    expect_refused(file, "format version 2, but this crl reads version 1");

    char want[128];
    memcpy(b, bytes, n);
    put32(b + 12, CRL_ABI_MAJOR + 1);
    spit(file, b, n);
    g_snprintf(want, sizeof want, "written for plugin ABI %d.%d, but this crl has ABI %d.%d", CRL_ABI_MAJOR + 1,
               CRL_ABI_MINOR, CRL_ABI_MAJOR, CRL_ABI_MINOR);
    expect_refused(file, want);
    memcpy(b, bytes, n);
    put32(b + 16, CRL_ABI_MINOR + 1);
    spit(file, b, n);
    g_snprintf(want, sizeof want, "written for plugin ABI %d.%d,", CRL_ABI_MAJOR, CRL_ABI_MINOR + 1);
    expect_refused(file, want);

    memcpy(b, bytes, n);
    b[21] = 1;
    spit(file, b, n);
    expect_refused(file, "header field at offset 20 is 256, not 0");

    memcpy(b, bytes, n);
    put64(b + 24, UINT64_C(1) << 40);
    spit(file, b, n);
    expect_refused(file, "header claims a payload of 1099511627776 bytes, more than the 64 MiB limit");
    memcpy(b, bytes, n);
    put64(b + 24, UINT64_MAX);
    spit(file, b, n);
    expect_refused(file, "more than the 64 MiB limit");

    /* Checksummed but malformed: garbage, and a serialized record where an array of them belongs. */
    size_t len;
    uint8_t *w = wrap_payload("\xff\xff\xff\xff\xff\x01\x02\x03", 8, &len);
    spit(file, w, len);
    expect_refused(file, "the payload is malformed (not a GVariant a(ay(tttxx)");
    g_free(w);

    /* Checksummed, well-formed, but an entry fails validation. */
    crl__registry_cache *c = crl__registry_cache_load(NULL, NULL);
    crl__scan_result *r = rich_result("/p/bad-kind.so");
    r->components[2].kind = 42;
    crl__registry_cache_put(c, r);
    GBytes *gb = crl__registry_cache_to_bytes(c);
    spit(file, g_bytes_get_data(gb, NULL), g_bytes_get_size(gb));
    expect_refused(file, "entry 0: scan record for /p/bad-kind.so: component 2 ('prioritized') has unknown kind 42");
    g_bytes_unref(gb);
    crl__registry_cache_free(c);

    /* Two entries for one path. */
    r = rich_result("/p/twice.so");
    GVariant *rec = g_variant_ref_sink(crl__scan_result_to_variant(r));
    GVariant *pair[2] = { rec, rec };
    GVariant *arr = g_variant_ref_sink(g_variant_new_array(NULL, pair, 2));
    GVariant *norm = g_variant_get_normal_form(arr);
    w = wrap_payload(g_variant_get_data(norm), g_variant_get_size(norm), &len);
    spit(file, w, len);
    expect_refused(file, "entry 1: a second entry for the same path");
    g_free(w);
    g_variant_unref(norm);
    g_variant_unref(arr);
    g_variant_unref(rec);
    crl__scan_result_free(r);

    /* A valid empty cache is 64 bytes, no payload. */
    w = wrap_payload(NULL, 0, &len);
    spit(file, w, len);
    char *warning = NULL;
    c = crl__registry_cache_load(file, &warning);
    ck_assert_msg(warning == NULL, "%s", warning);
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);
    crl__registry_cache_free(c);
    g_free(w);

    /* The good file itself still loads. */
    c = crl__registry_cache_load(good, &warning);
    ck_assert_msg(warning == NULL, "%s", warning);
    ck_assert_uint_eq(crl__registry_cache_size(c), 2);
    crl__registry_cache_free(c);

    g_free(b);
    g_free(bytes);
    g_free(file);
    g_free(good);
}
END_TEST

START_TEST(test_hostile_file_types)
{
    char *good;
    size_t n;
    uint8_t *bytes = good_cache(&good, &n);

    /* A FIFO must not block the open (nobody writes to it). */
    char *fifo = tpath("fifo.bin");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(20); /* a hang ends the test loudly even with CK_FORK=no */
    expect_refused(fifo, "it is a FIFO, not a regular file");
    alarm(0);

    char *link = tpath("link.bin");
    ck_assert_int_eq(symlink(good, link), 0);
    expect_refused(link, "symbolic link");
    char *dangling = tpath("dangling.bin");
    ck_assert_int_eq(symlink("/nonexistent/crl-regcache", dangling), 0);
    expect_refused(dangling, "symbolic link");

    char *empty = tpath("empty.bin");
    spit(empty, "", 0);
    expect_refused(empty, "the file is empty");

    char *dir = tpath("dir.bin");
    ck_assert_int_eq(g_mkdir(dir, 0700), 0);
    expect_refused(dir, "it is a directory, not a regular file");

    expect_refused("/dev/null", "it is a character device, not a regular file");

    char *gw = tpath("gw.bin");
    spit(gw, bytes, n);
    ck_assert_int_eq(chmod(gw, 0620), 0);
    expect_refused(gw, "writable by group or others (mode 0620)");
    ck_assert_int_eq(chmod(gw, 0606), 0);
    expect_refused(gw, "(mode 0606)");

    /* A path through a regular file: not ENOENT, so worth a warning. */
    char *through = g_build_filename(good, "x.bin", NULL);
    expect_refused(through, "cannot open", g_strerror(ENOTDIR));

    char *foreign = tpath("foreign.bin");
    spit(foreign, bytes, n);
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(foreign, 65534, 65534), 0);
        expect_refused(foreign, "owned by uid 65534, not by the effective user (uid 0)");
        /* Unreadable is no obstacle to root: the owner check stands alone. */
    } else {
        printf("test_hostile_file_types: not root, skipping the other-owner case (needs chown to uid 65534)\n");
        ck_assert_int_eq(chmod(foreign, 0), 0);
        expect_refused(foreign, "cannot open", g_strerror(EACCES));
    }

    g_free(foreign);
    g_free(through);
    g_free(gw);
    g_free(dir);
    g_free(empty);
    g_free(dangling);
    g_free(link);
    g_free(fifo);
    g_free(bytes);
    g_free(good);
}
END_TEST

START_TEST(test_save_errors)
{
    crl__file_id id;
    char *p = make_plugin_file("p.so", "x", &id);
    crl__registry_cache *c = crl__registry_cache_load(NULL, NULL);
    crl__scan_result *r = rich_result(p);
    r->id = id;
    crl__registry_cache_put(c, r);
    crl_error err = { 0 };

    /* The directory cannot be made: a regular file stands in its place. */
    char *blocker = tpath("blocker");
    spit(blocker, "x", 1);
    char *file = g_build_filename(blocker, "crl", "registry.bin", NULL);
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_E_IO);
    assert_has(err.message, file, "cannot create the directory", blocker, (const char *)NULL);
    ck_assert_int_eq(crl__registry_cache_save(c, file, NULL), CRL_E_IO);
    g_free(file);

    /* The file cannot be replaced: a directory stands at its path. */
    file = tpath("isdir.bin");
    ck_assert_int_eq(g_mkdir(file, 0700), 0);
    char *inside = g_build_filename(file, "keep", NULL);
    spit(inside, "x", 1);
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_E_IO);
    assert_has(err.message, file, "cannot write it", (const char *)NULL);
    g_free(inside);
    g_free(file);

    /* An unwritable directory (root writes anyway, so only for other users). */
    char *ro = tpath("ro");
    ck_assert_int_eq(g_mkdir(ro, 0500), 0);
    file = g_build_filename(ro, "registry.bin", NULL);
    if (geteuid() != 0) {
        ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_E_IO);
        assert_has(err.message, file, "cannot write it", (const char *)NULL);
    } else {
        printf("test_save_errors: running as root, skipping the read-only directory case\n");
    }
    g_free(file);
    g_free(ro);

    /* Still dirty after a failure: a later save to a good place writes. */
    file = tpath("ok/registry.bin");
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    ck_assert(g_file_test(file, G_FILE_TEST_IS_REGULAR));
    crl__registry_cache_free(c);
    g_free(file);
    g_free(blocker);
    g_free(p);
}
END_TEST

START_TEST(test_save_drops_vanished_and_invalid)
{
    crl__file_id ida, idb, idc;
    char *pa = make_plugin_file("a.so", "a", &ida);
    char *pb = make_plugin_file("b.so", "b", &idb);
    char *pc = make_plugin_file("c.so", "c", &idc);
    char *file = tpath("registry.bin");
    crl__registry_cache *c = crl__registry_cache_load(file, NULL);
    crl__scan_result *r;
    r = rich_result(pa), r->id = ida, crl__registry_cache_put(c, r);
    r = rich_result(pb), r->id = idb, crl__registry_cache_put(c, r);
    /* Nothing validated this one: kept in memory, it must not cost the others on the next load. */
    r = rich_result(pc), r->id = idc, r->components[0].kind = 99, crl__registry_cache_put(c, r);
    ck_assert_int_eq(g_unlink(pb), 0);
    crl_error err = { 0 };
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    ck_assert_uint_eq(crl__registry_cache_size(c), 1);
    crl__registry_cache_free(c);

    char *warning = NULL;
    c = crl__registry_cache_load(file, &warning);
    ck_assert_msg(warning == NULL, "%s", warning);
    ck_assert_uint_eq(crl__registry_cache_size(c), 1);
    ck_assert_ptr_nonnull(crl__registry_cache_lookup(c, pa, &ida));
    ck_assert_ptr_null(crl__registry_cache_lookup(c, pb, &idb));
    ck_assert_ptr_null(crl__registry_cache_lookup(c, pc, &idc));

    /* Vanished files are dropped only by a save that writes. */
    ck_assert_int_eq(g_unlink(pa), 0);
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    crl__registry_cache_free(c);
    c = crl__registry_cache_load(file, NULL);
    ck_assert_uint_eq(crl__registry_cache_size(c), 1);
    crl__registry_cache_clear(c);
    ck_assert_int_eq(crl__registry_cache_save(c, file, &err), CRL_OK);
    crl__registry_cache_free(c);
    c = crl__registry_cache_load(file, NULL);
    ck_assert_uint_eq(crl__registry_cache_size(c), 0);
    crl__registry_cache_free(c);

    g_free(file);
    g_free(pa);
    g_free(pb);
    g_free(pc);
}
END_TEST

static Suite *registry_cache_suite(void)
{
    Suite *s = suite_create("registry_cache");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_file_id);
    tcase_add_test(tc, test_options_dup);
    tcase_add_test(tc, test_record_round_trip);
    tcase_add_test(tc, test_record_rejects);
    tcase_add_test(tc, test_record_rejects_raw);
    tcase_add_test(tc, test_cache_file_name);
    tcase_add_test(tc, test_cache_round_trip);
    tcase_add_test(tc, test_lookup_miss_on_change);
    tcase_add_test(tc, test_every_truncation);
    tcase_add_test(tc, test_corrupt_headers_and_payload);
    tcase_add_test(tc, test_hostile_file_types);
    tcase_add_test(tc, test_save_errors);
    tcase_add_test(tc, test_save_drops_vanished_and_invalid);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(registry_cache_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
