/* The loop env benchmarks time: an env made from INI text, stepped forever between two reused TensorDicts with
 * pre-drawn actions (crl bench batched, crl bench python). */
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <glib.h>
#include <string.h>

void crl__bench_stepper_close(crl__bench_stepper *b)
{
    crl_td_unref(b->td[0]);
    crl_td_unref(b->td[1]);
    for (int i = 0; i < CRL__BENCH_BANK; i++)
        crl_tensor_unref(b->bank[i]);
    crl_td_key_free(b->action_key);
    crl_env_free(b->env);
    crl_config_free(b->cfg);
    memset(b, 0, sizeof *b);
}

int crl__bench_stepper_open(crl__bench_stepper *b, crl_host *host, const char *who, const char *ini,
                            double *startup_s, crl_error *err)
{
    memset(b, 0, sizeof *b);
    crl_error e;
    crl_error_clear(&e);
    gint64 t0 = g_get_monotonic_time();
    int rc = CRL_OK;
    if (!(b->cfg = crl_config_new(&e)) || crl_config_load_buffer(b->cfg, who, ini, strlen(ini), CRL_LAYER_FILE, &e) ||
        !(b->env = crl_env_from_config(host, b->cfg, "env", &e)) || !(b->action_key = crl_td_key_new("action", &e)))
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
    if (!rc && !(b->td[0] = crl_env_reset(b->env, NULL, &e)))
        rc = crl_error_pass(err, &e, CRL_E_RUNTIME);
    if (!rc && !(b->td[1] = crl_td_new(crl_env_batch_ndim(b->env), crl_env_batch_shape(b->env), &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    if (startup_s)
        *startup_s = (double)(g_get_monotonic_time() - t0) * 1e-6;
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    const crl_spec *leaf = rc ? NULL : crl_spec_composite_get(crl_env_full_action_spec(b->env), "action");
    for (int i = 0; !rc && i < CRL__BENCH_BANK; i++)
        if (!(b->bank[i] = crl_spec_rand(leaf, &rng, &e)))
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    if (rc)
        crl__bench_stepper_close(b);
    return rc;
}

void crl__bench_stepper_run(void *p, uint64_t n)
{
    crl__bench_stepper *b = p;
    for (uint64_t i = 0; i < n && !b->failed; i++) {
        crl_td *td = b->td[b->cur], *next = b->td[b->cur ^ 1];
        if (crl_td_set_k(td, b->action_key, b->bank[b->next++ % CRL__BENCH_BANK], &b->err) ||
            crl_env_step(b->env, td, &b->err) || crl_env_step_mdp_into(b->env, td, next, &b->err)) {
            b->failed = true;
            return;
        }
        b->cur ^= 1;
    }
}
