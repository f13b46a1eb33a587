/* benchplug: one plugin file that `crl bench plugins` copies under many names.  Its descriptor takes its
 * name from the file it was loaded from (dladdr), so every copy is a valid, distinct plugin; each registers
 * one transform named after itself (a command that lists envs never needs to load it). */
#define _GNU_SOURCE
#include <crl/crl.h>
#include <crl/transform_backend.h>
#include <dlfcn.h>
#include <string.h>

static char name[64];
static char comp_name[80];

static int tf_create(const crl_opts *opts, void **t, crl_error *err)
{
    (void)opts, (void)t;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: a benchmark plugin makes no transform", name);
}

static void tf_destroy(void *t)
{
    (void)t;
}

static const crl_transform_ops ops = { .struct_size = sizeof(crl_transform_ops), .create = tf_create,
                                       .destroy = tf_destroy };

static int bench_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    const crl_component c = { sizeof(crl_component), CRL_KIND_TRANSFORM, comp_name,
                              "a transform of a benchmark plugin", NULL, &ops };
    return crl_host_register(host, &c, err);
}

static crl_plugin_desc desc = { CRL_ABI_MAJOR, CRL_ABI_MINOR, name, "1.0.0", "MIT",
                                "crl bench plugins: start-up with many plugins", bench_init, NULL, NULL, { 0 } };

CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    Dl_info info;
    if (!name[0] && dladdr((void *)crl_plugin_v1, &info) && info.dli_fname) {
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        size_t n = strcspn(base, ".");
        if (n >= sizeof name)
            n = sizeof name - 1;
        memcpy(name, base, n);
        name[n] = '\0';
        strcpy(comp_name, "Bench_");
        strcat(comp_name, name);
    }
    return &desc;
}
