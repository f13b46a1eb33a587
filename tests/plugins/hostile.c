/* hostile: test plugins that misbehave, one way each, built from this file under many names
 * (tests/plugins/hostile.am).
 *
 * HOSTILE_WHERE is where the plugin's code misbehaves: 1 an ELF constructor (runs inside dlopen), 2 its entry
 * point crl_plugin_v1, 3 init, 4 fini; HOSTILE_WHAT how: 1 SIGSEGV, 2 exit(0), 3 abort(), 4 loops forever.
 * With HOSTILE_WHERE 0 the code behaves and the plugin registers an env backend the scanner must refuse:
 * HOSTILE_COMPONENT 1 without a step op, 2 with an int option whose default is "big", 3 with an option named
 * `seed` (the host's own [env] key).
 *
 * Whenever its code runs it appends "PID WHERE" to $CRL_TEST_MARKER_DIR/NAME.pids, so a test can check that
 * it ran only in scanner processes, never in the command's. */
#include <crl/crl.h>
#include <crl/env_backend.h>
#include <signal.h>
#include <unistd.h>
#include "fixture.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define NAME STR(HOSTILE_NAME)

#ifndef HOSTILE_COMPONENT
#define HOSTILE_COMPONENT 0
#endif

static void ran(const char *where)
{
    fixture_mark(NAME ".pids", "%ld %s\n", (long)getpid(), where);
}

static void misbehave(int where, const char *at)
{
    ran(at);
    if (where != HOSTILE_WHERE)
        return;
    switch (HOSTILE_WHAT) {
    case 1:
        raise(SIGSEGV);
        break;
    case 2:
        exit(0);
    case 3:
        abort();
    default:
        for (;;)
            pause();
    }
}

#if HOSTILE_WHERE == 1
__attribute__((constructor)) static void hostile_ctor(void)
{
    misbehave(1, "ctor");
}
#endif

static const char *const ids[] = { "Hostile-v0", NULL };

static const char *const *env_list(void)
{
    return ids;
}

static int env_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                    crl_error *err)
{
    (void)num, (void)opts, (void)specs, (void)env;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s makes no env '%s'", NAME, id);
}

static int env_bind(void *env, crl_td *buffers, crl_error *err)
{
    (void)env, (void)buffers;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s makes no envs", NAME);
}

static int env_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    (void)env, (void)mask, (void)seeds, (void)from_state;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s makes no envs", NAME);
}

static int env_step(void *env, crl_error *err)
{
    (void)env;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s makes no envs", NAME);
}

static void env_close(void *env)
{
    (void)env;
}

static const crl_env_ops env_ops = { .struct_size = sizeof(crl_env_ops), .list = env_list, .make = env_make,
                                     .bind = env_bind, .reset = env_reset,
                                     .step = HOSTILE_COMPONENT == 1 ? NULL : env_step, .close = env_close };

static const crl_option env_options[] = {
#if HOSTILE_COMPONENT == 2
    { "level", CRL_OPT_INT, 0, "big", 0, 0, NULL, "an int whose default is not one" },
#elif HOSTILE_COMPONENT == 3
    { "seed", CRL_OPT_INT, 0, "0", 0, 0, NULL, "shadows the host's [env] seed" },
#else
    { "level", CRL_OPT_INT, 0, "1", 0, 0, NULL, "how hostile" },
#endif
    CRL_OPTIONS_END
};

static const crl_component env_component = { sizeof(crl_component), CRL_KIND_ENV, NAME "_env",
                                             "an env backend of a hostile test plugin", env_options, &env_ops };

static int hostile_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    misbehave(3, "init");
    return crl_host_register(host, &env_component, err);
}

static void hostile_fini(void)
{
    misbehave(4, "fini");
}

static const crl_plugin_desc desc = { CRL_ABI_MAJOR, CRL_ABI_MINOR, NAME, "1.0.0", "MIT",
                                      "misbehaves on purpose (crl's tests)", hostile_init, hostile_fini, NULL,
                                      { 0 } };

CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    misbehave(2, "entry");
    return &desc;
}
