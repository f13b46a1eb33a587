/* Helpers the dm_control suites share: status checks and an env made from INI text through a host
 * that loads dm_control.so from CRL_PLUGIN_PATH. */
#ifndef CRL_DMC_TEST_H
#define CRL_DMC_TEST_H

#include <check.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#define EXPECT_OK(expr, e)                                                                     \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message,                 \
                      crl_status_name(rc_));                                                   \
    } while (0)

typedef struct henv {
    crl_host *host;
    crl_config *cfg;
    crl_env *env;
} henv;

/* The env of [env] in `ini`; CRL_OK, or the error of the first step that failed. */
static inline int henv_open(henv *h, const char *ini, crl_error *e)
{
    memset(h, 0, sizeof *h);
    h->cfg = crl_config_new(e);
    ck_assert_ptr_nonnull(h->cfg);
    EXPECT_OK(crl_config_load_buffer(h->cfg, "test.ini", ini, strlen(ini), CRL_LAYER_FILE, e), *e);
    h->host = crl_host_new(h->cfg, e);
    ck_assert_ptr_nonnull(h->host);
    int rc = crl_host_load_name(h->host, "dm_control", e);
    if (rc != CRL_OK)
        return rc;
    h->env = crl_env_from_config(h->host, h->cfg, "env", e);
    return h->env ? CRL_OK : e->code;
}

static inline void henv_close(henv *h)
{
    crl_env_free(h->env);
    crl_host_free(h->host);
    crl_config_free(h->cfg);
    memset(h, 0, sizeof *h);
}

#endif
