/* Writes the seed corpus of the registry cache fuzz target (tests/fuzz/corpus/registry_cache): small valid
 * caches plus a few broken ones.
 *
 * Regenerate after a format change, from a build dir (make check builds it):
 *   tests/fuzz/make-registry-corpus $SRC/tests/fuzz/corpus/registry_cache */
#include "registry-cache-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *outdir;

static void write_file(const char *name, const void *data, size_t len)
{
    char *path = g_build_filename(outdir, name, NULL);
    GError *gerr = NULL;
    if (!g_file_set_contents(path, data, (gssize)len, &gerr)) {
        fprintf(stderr, "make-registry-corpus: %s\n", gerr->message);
        exit(1);
    }
    g_free(path);
}

/* The cache's bytes, written as `name`; returned for mutating (g_bytes_unref). */
static GBytes *write_cache(const char *name, crl__registry_cache *c)
{
    GBytes *b = crl__registry_cache_to_bytes(c);
    write_file(name, g_bytes_get_data(b, NULL), g_bytes_get_size(b));
    return b;
}

/* A copy of `b` with a change: flip byte at `flip` (when >= 0), keep `keep` bytes (when >= 0). */
static void mutate(GBytes *b, const char *name, long flip, long keep)
{
    gsize n = 0;
    const uint8_t *d = g_bytes_get_data(b, &n);
    uint8_t *m = g_memdup2(d, n);
    if (flip >= 0 && (size_t)flip < n)
        m[flip] ^= 0x5a;
    if (keep >= 0 && (size_t)keep < n)
        n = (size_t)keep;
    write_file(name, m, n);
    g_free(m);
}

static void set_opt(crl_option *o, const char *name, int32_t type, uint32_t flags, const char *def, double min,
                    double max, const char *choices, const char *doc)
{
    *o = (crl_option){ g_strdup(name), type, flags, g_strdup(def), min, max, g_strdup(choices), g_strdup(doc) };
}

static void add_component(crl__scan_result *r, int32_t kind, const char *name, const char *desc, crl_option *opts)
{
    r->components = g_renew(crl__scan_component, r->components, r->n_components + 1);
    r->components[r->n_components++] =
        (crl__scan_component){ kind, g_strdup(name), g_strdup(desc), opts ? opts : crl__options_dup(NULL) };
}

static crl__scan_result *good_result(const char *path, uint64_t ino)
{
    crl__scan_result *r = crl__scan_result_new(path);
    r->id = (crl__file_id){ 2049, ino, 16384, 1700000000123456789, 1700000000123456789 };
    r->name = g_strdup("classic");
    r->version = g_strdup("0.3.0");
    r->license = g_strdup("Apache-2.0");
    r->description = g_strdup("classic control envs");
    r->abi_major = CRL_ABI_MAJOR;
    r->abi_minor = CRL_ABI_MINOR;
    crl__options_free(r->plugin_options);
    r->plugin_options = g_new0(crl_option, 2);
    set_opt(&r->plugin_options[0], "threads", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 64, NULL, "threads");
    crl_option *o = g_new0(crl_option, 9);
    set_opt(&o[0], "render", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, NULL);
    set_opt(&o[1], "max_steps", CRL_OPT_INT, CRL_OPT_RANGE, "500", 1, 1e9, NULL, "episode cap");
    set_opt(&o[2], "gravity", CRL_OPT_DOUBLE, 0, "9.8", 0, 0, NULL, NULL);
    set_opt(&o[3], "name", CRL_OPT_STRING, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, NULL);
    set_opt(&o[4], "keys", CRL_OPT_LIST, 0, "obs", 0, 0, NULL, NULL);
    set_opt(&o[5], "mode", CRL_OPT_ENUM, 0, "a", 0, 0, "a|b", NULL);
    set_opt(&o[6], "buffer", CRL_OPT_SIZE, 0, "64K", 0, 0, NULL, NULL);
    set_opt(&o[7], "kwargs.", CRL_OPT_DOUBLES, CRL_OPT_PREFIX, NULL, 0, 0, NULL, NULL);
    add_component(r, CRL_KIND_ENV, "CartPole-v1", "cart and pole", o);
    add_component(r, CRL_KIND_TRANSFORM, "StepCounter", NULL, NULL);
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make-registry-corpus DIR\n");
        return 2;
    }
    outdir = argv[1];

    crl__registry_cache *c = crl__registry_cache_load(NULL, NULL);
    g_bytes_unref(write_cache("empty.bin", c));

    crl__registry_cache_put(c, good_result("/usr/lib/crl/plugins/classic.so", 77));
    GBytes *one = write_cache("one.bin", c);

    crl__scan_result *broken = crl__scan_result_new("/home/u/.local/share/crl/plugins/bad.so");
    broken->id = (crl__file_id){ 2050, 12, 999, -1, 0 };
    broken->status = CRL_E_CRASH;
    broken->reason = g_strdup("plugin 'bad' crashed with SIGSEGV during init");
    crl__registry_cache_put(c, broken);
    crl__scan_result *abi = crl__scan_result_new("/opt/p/new.so");
    abi->status = CRL_E_ABI;
    abi->reason = g_strdup("plugin 'new' needs ABI 2.0");
    abi->name = g_strdup("new");
    abi->abi_major = 2;
    crl__registry_cache_put(c, abi);
    GBytes *three = write_cache("three.bin", c);

    /* Checksummed but invalid: a record no loader may accept. */
    crl__scan_result *bad = good_result("/p/badkind.so", 5);
    bad->components[0].kind = CRL_KIND_COUNT;
    crl__registry_cache_clear(c);
    crl__registry_cache_put(c, bad);
    g_bytes_unref(write_cache("bad-kind.bin", c));
    crl__registry_cache_free(c);

    mutate(one, "one-flip-payload.bin", 100, -1);
    mutate(one, "one-flip-magic.bin", 2, -1);
    mutate(three, "three-cut.bin", -1, 200);
    mutate(three, "three-header-only.bin", -1, CRL__REGCACHE_HEADER);
    g_bytes_unref(one);
    g_bytes_unref(three);
    return 0;
}
