/* good: a well-behaved test plugin (options, two components of different kinds, init and fini).
 *
 * Built twice: as tests/plugins/.libs/good.so, and into test_loader with
 * -DCRL_PLUGIN_BUILTIN (entry crl_plugin_builtin_good), so the same contract
 * tests run against the dlopen'd and the built-in form. */
#include <crl/crl.h>
#include "fixture.h"

/* Stand-in ops: the host only needs the leading struct_size. */
typedef struct good_ops {
    uint32_t struct_size;
    int (*answer)(void);
} good_ops;

static int env_answer(void)
{
    return 42;
}

static int transform_answer(void)
{
    return 7;
}

static const good_ops env_ops = { sizeof(good_ops), env_answer };
static const good_ops transform_ops = { sizeof(good_ops), transform_answer };

static const crl_option plugin_options[] = {
    { "greeting", CRL_OPT_STRING, 0, "hello", 0, 0, NULL, "what init logs at info level" },
    { "count", CRL_OPT_INT, CRL_OPT_RANGE, "3", 1, 100, NULL, "how many greetings init logs" },
    { "buffer", CRL_OPT_SIZE, CRL_OPT_RANGE, "4K", 1, 1073741824.0, NULL, "scratch bytes (up to 1G)" },
    CRL_OPTIONS_END
};

static const crl_option env_options[] = {
    { "num_envs", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1024, NULL, "envs in the batch" },
    { "mode", CRL_OPT_ENUM, 0, "fast", 0, 0, "fast|slow", "how the env steps" },
    CRL_OPTIONS_END
};

static const crl_option transform_options[] = {
    { "scale", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1.0", 0, 10, NULL, "factor applied to each key" },
    { "keys", CRL_OPT_LIST, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "keys to scale" },
    CRL_OPTIONS_END
};

static const crl_component env_component = {
    sizeof(crl_component), CRL_KIND_ENV, "goodenv", "an env that answers 42", env_options, &env_ops
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
