/* crl bench's bare backend loop (bench_backend.c): a backend's env ops driven directly, on buffers the bench
 * binds itself, with no host env in between: what the host's env API is measured against. */
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <glib.h>
#include <string.h>

/* Pre-drawn actions: `k` steps of `num` envs, drawn from the backend's
 * action leaf so the rng is not timed. */
void crl__bench_bank_free(crl__bench_bank *b)
{
    g_free(b->data);
    memset(b, 0, sizeof *b);
}

/* leaf: the [num, ...] action spec of the backend. */
int crl__bench_bank_fill(crl__bench_bank *b, const crl_spec *leaf, int64_t k, uint64_t seed, crl_error *err)
{
    memset(b, 0, sizeof *b);
    crl_dtype dt = crl_spec_dtype(leaf);
    int ndim = crl_spec_ndim(leaf);
    const int64_t *shape = crl_spec_shape(leaf);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    b->step_bytes = (size_t)numel * crl_dtype_size(dt);
    b->k = k;
    b->data = g_malloc((gsize)k * b->step_bytes);
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    for (int64_t i = 0; i < k; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *t = crl_tensor_wrap(b->data + (size_t)i * b->step_bytes, dt, ndim, shape, NULL, NULL, NULL, &e);
        int rc = t ? crl_spec_rand_into(leaf, &rng, t, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(t);
        if (rc) {
            crl__bench_bank_free(b);
            return rc;
        }
    }
    return CRL_OK;
}

/* ---- the bare backend ---------------------------------------------------- */

/* Every leaf of comp as a zeroed tensor in buffers, under its dotted key. */
static int alloc_leaves(crl_td *buffers, const crl_spec *comp, const char *prefix, crl_error *err)
{
    for (size_t i = 0; comp && i < crl_spec_composite_len(comp); i++) {
        const crl_spec *c = crl_spec_composite_at(comp, i);
        char *key = *prefix ? g_strconcat(prefix, ".", crl_spec_composite_key_at(comp, i), NULL)
                            : g_strdup(crl_spec_composite_key_at(comp, i));
        int rc = CRL_OK;
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE) {
            rc = alloc_leaves(buffers, c, key, err);
        } else {
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *t = crl_spec_zero(c, &e);
            rc = t ? crl_td_set(buffers, key, t, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(t);
        }
        g_free(key);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

void crl__bench_backend_close(crl__bench_backend *b, crl_env_specs *specs)
{
    if (b->ops && b->env && b->ops->struct_size >= offsetof(crl_env_ops, close) + sizeof b->ops->close &&
        b->ops->close)
        b->ops->close(b->env);
    b->env = NULL;
    crl_td_unref(b->buffers);
    b->buffers = NULL;
    g_free(b->mask);
    g_free(b->elapsed);
    b->mask = NULL;
    b->elapsed = NULL;
    if (specs) {
        crl_spec_unref(specs->observation);
        crl_spec_unref(specs->action);
        crl_spec_unref(specs->reward);
        crl_spec_unref(specs->done);
        crl_spec_unref(specs->state);
        crl_spec_unref(specs->info);
        memset(specs, 0, sizeof *specs);
    }
}

/* Make num envs of id with the backend's defaults, bind our buffers, reset
 * with the seed chain from `seed` (as crl_env_set_seed hands it out). */
int crl__bench_backend_open(crl__bench_backend *b, const crl_host *host, const crl_config *cfg, const char *backend,
                            const char *id, int64_t num,
                     uint64_t seed, crl_env_specs *specs, crl_error *err)
{
    memset(b, 0, sizeof *b);
    memset(specs, 0, sizeof *specs);
    specs->struct_size = sizeof *specs;
    crl_error e;
    crl_error_clear(&e);
    const crl_component *c = crl_host_lookup(host, CRL_KIND_ENV, backend, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    if (!(b->ops = crl__cli_env_ops(c)))
        return crl_error_set(err, CRL_E_ABI, "env/%s is not a usable env backend (its ops are too small)", backend);
    b->num = num;
    const crl_option *tables[1] = { c->options };
    crl_opts *opts = crl_config_opts(cfg, "bench-bare-backend", tables, 1, &e);
    if (!opts)
        return crl_error_pass(err, &e, CRL_E_CONFIG);
    int rc = b->ops->make(id, num, opts, specs, &b->env, err);
    crl_opts_free(opts);
    if (rc)
        goto fail;
    b->max_steps = specs->max_episode_steps;
    if (!(b->buffers = crl_td_new(1, &num, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto fail;
    }
    const crl_spec *parts[] = { specs->observation, specs->action, specs->reward, specs->done, specs->state,
                                specs->info };
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++)
        if ((rc = alloc_leaves(b->buffers, parts[i], "", err)))
            goto fail;
    if ((rc = b->ops->bind(b->env, b->buffers, err)))
        goto fail;
    crl_tensor *act = crl_td_get(b->buffers, "action"), *obs = crl_td_get(b->buffers, "observation");
    crl_tensor *term = crl_td_get(b->buffers, "terminated"), *trunc = crl_td_get(b->buffers, "truncated");
    if (!act || !term || !trunc) {
        rc = crl_error_set(err, CRL_E_INVALID, "%s/%s declares no action, terminated or truncated", backend, id);
        goto fail;
    }
    b->action = crl_tensor_data(act);
    b->obs = obs ? crl_tensor_data(obs) : NULL;
    b->obs_bytes = obs ? crl_tensor_nbytes(obs) : 0;
    b->terminated = crl_tensor_data(term);
    b->truncated = crl_tensor_data(trunc);
    b->mask = g_new0(bool, (gsize)num);
    b->elapsed = g_new0(int64_t, (gsize)num);
    uint64_t *seeds = g_new(uint64_t, (gsize)num);
    for (int64_t i = 0; i < num; i++) {
        seeds[i] = seed;
        seed = crl_seed_next(seed);
    }
    rc = b->ops->reset(b->env, NULL, seeds, false, err);
    g_free(seeds);
    if (rc)
        goto fail;
    return CRL_OK;
fail:
    crl__bench_backend_close(b, specs);
    return rc;
}

/* One step with the bank's next actions; ended envs (terminated, or at the
 * time limit the host would apply) are reset with a mask. */
int crl__bench_backend_step(crl__bench_backend *b, crl_error *err)
{
    const crl__bench_bank *bank = b->bank;
    memcpy(b->action, bank->data + (size_t)(b->next % bank->k) * bank->step_bytes, bank->step_bytes);
    b->next++;
    int rc = b->ops->step(b->env, err);
    if (rc)
        return rc;
    bool any = false;
    for (int64_t i = 0; i < b->num; i++) {
        bool ended = b->terminated[i] || b->truncated[i] || (b->max_steps > 0 && ++b->elapsed[i] >= b->max_steps);
        b->mask[i] = ended;
        any |= ended;
    }
    if (!any)
        return CRL_OK;
    for (int64_t i = 0; i < b->num; i++)
        if (b->mask[i])
            b->elapsed[i] = 0;
    return b->ops->reset(b->env, b->mask, NULL, false, err);
}

void crl__bench_backend_run(void *p, uint64_t n)
{
    crl__bench_backend *b = p;
    for (uint64_t i = 0; i < n && !b->failed; i++)
        if (crl__bench_backend_step(b, &b->err))
            b->failed = true;
}

