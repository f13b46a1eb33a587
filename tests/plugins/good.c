/* good: a well-behaved test plugin (options, two components of different kinds, init and fini).
 *
 * Built twice: as tests/plugins/.libs/good.so, and into test_loader with
 * -DCRL_PLUGIN_BUILTIN (entry crl_plugin_builtin_good), so the same contract
 * tests run against the dlopen'd and the built-in form. */
#include <crl/crl.h>
#include <crl/env_backend.h>
#include <crl/transform_backend.h>
#include "fixture.h"

/* Whole ops tables (the scanner checks that each kind's required ops are there), whose calls say that this
 * fixture makes nothing: the tests only look the components up. */
static const char *const no_ids[] = { NULL };

static const char *const *env_list(void)
{
    return no_ids;
}

static int env_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                    crl_error *err)
{
    (void)num, (void)opts, (void)specs, (void)env;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "goodenv is a test fixture: it makes no env '%s'", id);
}

static int env_bind(void *env, crl_td *buffers, crl_error *err)
{
    (void)env, (void)buffers;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "goodenv makes no envs");
}

static int env_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    (void)env, (void)mask, (void)seeds, (void)from_state;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "goodenv makes no envs");
}

static int env_step(void *env, crl_error *err)
{
    (void)env;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "goodenv makes no envs");
}

static void env_close(void *env)
{
    (void)env;
}

static int transform_create(const crl_opts *opts, void **t, crl_error *err)
{
    (void)opts, (void)t;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "GoodScale is a test fixture: it makes no transform");
}

static void transform_destroy(void *t)
{
    (void)t;
}

static const crl_env_ops env_ops = { .struct_size = sizeof(crl_env_ops), .list = env_list, .make = env_make,
                                     .bind = env_bind, .reset = env_reset, .step = env_step,
                                     .close = env_close };
static const crl_transform_ops transform_ops = { .struct_size = sizeof(crl_transform_ops),
                                                 .create = transform_create, .destroy = transform_destroy };

static const crl_option plugin_options[] = {
    { "greeting", CRL_OPT_STRING, 0, "hello", 0, 0, NULL, "what init logs at info level" },
    { "count", CRL_OPT_INT, CRL_OPT_RANGE, "3", 1, 100, NULL, "how many greetings init logs" },
    { "buffer", CRL_OPT_SIZE, CRL_OPT_RANGE, "4K", 1, 1073741824.0, NULL, "scratch bytes (up to 1G)" },
    CRL_OPTIONS_END
};

static const crl_option env_options[] = {
    { "lanes", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1024, NULL, "lanes per env" },
    { "mode", CRL_OPT_ENUM, 0, "fast", 0, 0, "fast|slow", "how the env steps" },
    CRL_OPTIONS_END
};

static const crl_option transform_options[] = {
    { "scale", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1.0", 0, 10, NULL, "factor applied to each key" },
    { "keys", CRL_OPT_LIST, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "keys to scale" },
    CRL_OPTIONS_END
};

static const crl_component env_component = {
    sizeof(crl_component), CRL_KIND_ENV, "goodenv", "an env that makes nothing", env_options, &env_ops
};

static const crl_component transform_component = {
    sizeof(crl_component), CRL_KIND_TRANSFORM, "GoodScale", "scales keys by a factor", transform_options,
    &transform_ops
};

static int good_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    const char *greeting;
    int64_t count;
    if (crl_opts_string(section, "greeting", &greeting, err) || crl_opts_int(section, "count", &count, err))
        return err->code;
    if (crl_host_register(host, &env_component, err) || crl_host_register(host, &transform_component, err))
        return err->code;
    for (int64_t i = 0; i < count; i++)
        crl_host_log(host, CRL_LOG_INFO, "%s #%lld", greeting, (long long)i);
    fixture_mark("good.ran", "name=%s section=%s greeting=%s count=%lld\n", crl_host_plugin_name(host),
                 crl_opts_section(section), greeting, (long long)count);
    return CRL_OK;
}

static void good_fini(void)
{
    fixture_mark("good.fini", "fini\n");
    fixture_mark(FIXTURE_FINI_LOG, "good\n");
}

CRL_PLUGIN_DEFINE(good, "good", "1.2.3", "MIT", "well-behaved test plugin", plugin_options, good_init, good_fini)
