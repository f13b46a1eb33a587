/* Transforms in the workers: [env] worker_transforms makes each executor instance an inner crl_env (the real
 * backend for that block's envs plus the chain), adapted to crl_env_ops so the executor steps it like any backend.
 *
 * TorchRL's ParallelEnv(lambda: TransformedEnv(base, t)) runs t inside every
 * worker; an outer [env] transforms chain still runs on the whole batch in
 * the parent, so a config can have either or both.  The outer env keeps its
 * bookkeeping (time limit, frame skip, auto-reset modes, done) on the
 * transformed outputs.  The inner env runs with auto_reset = next_step and
 * frame_skip = 1: the outer env steps an ended env once more before it
 * resets it (every backend allows that), which resets it inside, chain
 * included; the outer reset that follows then finds it fresh and only
 * copies its values, so each episode start runs the backend's reset and
 * the transforms' reset hooks once, as with the chain in the parent.
 * Costs one copy of each output row per step (the inner env owns its
 * buffers). */
#include "exec-private.h"
#include "env-private.h"

#include <string.h>

typedef struct wenv {
    crl_env *inner;          /* num = the instance's envs */
    crl_td *td;              /* the inner env's running TensorDict (root state, then next) */
    crl_td *view;            /* the outer buffers' rows (bind) */
    int64_t n;
    char **act_keys, **out_keys;   /* action leaves; observation, reward, done and state leaves */
    char **state_keys;
    crl_tensor *rmask;       /* bool [n, 1], "_reset" */
    bool *fresh;             /* [n]: reset inside the last step and not stepped since */
    bool *again;             /* [n] scratch: envs a reset must really reset */
} wenv;

static void keys_of(const crl_spec *comp, const char *prefix, GPtrArray *out)
{
    for (size_t i = 0; comp && i < crl_spec_composite_len(comp); i++) {
        const char *k = crl_spec_composite_key_at(comp, i);
        char *full = *prefix ? g_strconcat(prefix, ".", k, NULL) : g_strdup(k);
        const crl_spec *c = crl_spec_composite_at(comp, i);
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE) {
            keys_of(c, full, out);
            g_free(full);
        } else {
            g_ptr_array_add(out, full);
        }
    }
}

crl_env *crl__wenv_inner(void *benv)
{
    return benv ? ((wenv *)benv)->inner : NULL;
}

static void wenv_close(void *benv)
{
    wenv *w = benv;
    if (!w)
        return;
    crl_td_unref(w->td);
    crl_td_unref(w->view);
    crl_tensor_unref(w->rmask);
    g_free(w->fresh);
    g_free(w->again);
    g_strfreev(w->act_keys);
    g_strfreev(w->out_keys);
    g_strfreev(w->state_keys);
    crl_env_free(w->inner);
    g_free(w);
}

int crl__wenv_make(const crl_env_desc *d, crl__env_factory make_inner, crl_env_specs *specs, void **benv,
                   crl_error *err)
{
    wenv *w = g_new0(wenv, 1);
    *benv = NULL;
    crl_error e;
    crl_error_clear(&e);
    if (!(w->inner = make_inner(d, &e))) {
        wenv_close(w);
        return crl_error_pass(err, &e, CRL_E_CONFIG);
    }
    w->n = crl_env_num(w->inner);
    GPtrArray *ak = g_ptr_array_new(), *ok = g_ptr_array_new(), *sk = g_ptr_array_new();
    keys_of(crl_env_full_action_spec(w->inner), "", ak);
    keys_of(crl_env_full_observation_spec(w->inner), "", ok);
    keys_of(crl_env_full_reward_spec(w->inner), "", ok);
    keys_of(crl_env_full_done_spec(w->inner), "", ok);
    keys_of(crl_env_full_state_spec(w->inner), "", sk);
    for (guint i = 0; i < sk->len; i++)
        g_ptr_array_add(ok, g_strdup(g_ptr_array_index(sk, i)));
    g_ptr_array_add(ak, NULL);
    g_ptr_array_add(ok, NULL);
    g_ptr_array_add(sk, NULL);
    w->act_keys = (char **)g_ptr_array_free(ak, FALSE);
    w->out_keys = (char **)g_ptr_array_free(ok, FALSE);
    w->state_keys = (char **)g_ptr_array_free(sk, FALSE);
    w->fresh = g_new0(bool, (gsize)w->n);
    w->again = g_new0(bool, (gsize)w->n);
    int64_t ms[2] = { w->n, 1 };
    w->rmask = crl_tensor_new(CRL_BOOL, 2, ms, &e);
    if (!w->rmask) {
        wenv_close(w);
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    specs->observation = crl_spec_ref((crl_spec *)crl_env_full_observation_spec(w->inner));
    specs->action = crl_spec_ref((crl_spec *)crl_env_full_action_spec(w->inner));
    specs->reward = crl_spec_ref((crl_spec *)crl_env_full_reward_spec(w->inner));
    specs->done = crl_spec_ref((crl_spec *)crl_env_full_done_spec(w->inner));
    if (w->state_keys[0])
        specs->state = crl_spec_ref((crl_spec *)crl_env_full_state_spec(w->inner));
    specs->max_episode_steps = 0;  /* the outer env's own max_episode_steps applies */
    specs->render_height = crl_env_render_height(w->inner);
    specs->render_width = crl_env_render_width(w->inner);
    *benv = w;
    return CRL_OK;
}

static int wenv_bind(void *benv, crl_td *buffers, crl_error *err)
{
    wenv *w = benv;
    (void)err;
    crl_td_unref(w->view);
    w->view = crl_td_ref(buffers);
    return CRL_OK;
}

/* The inner td's values under prefix ("" or "next.") into the outer rows. */
static int put_rows(wenv *w, const char *prefix, bool outputs_only_obs, crl_error *err)
{
    for (size_t i = 0; w->out_keys[i]; i++) {
        char *k = g_strconcat(prefix, w->out_keys[i], NULL);
        crl_tensor *src = crl_td_get(w->td, k);
        crl_tensor *dst = crl_td_get(w->view, w->out_keys[i]);
        g_free(k);
        if (!src && outputs_only_obs)
            continue;  /* reset writes observations only */
        if (!src || !dst)
            return crl_error_set(err, CRL_E_PLUGIN, "worker_transforms: the inner env wrote no '%s%s'", prefix,
                                 w->out_keys[i]);
        int rc = crl_tensor_copy(dst, src, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int wenv_reset(void *benv, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    wenv *w = benv;
    crl_env *in = w->inner;
    crl_error e;
    crl_error_clear(&e);
    if (from_state && !w->td)
        w->td = crl_td_new(1, &w->n, &e);
    /* The start states the host put in the state rows. */
    for (size_t i = 0; from_state && w->state_keys[i]; i++) {
        int rc = w->td ? crl_td_set(w->td, w->state_keys[i], crl_td_get(w->view, w->state_keys[i]), err)
                       : crl_error_pass(err, &e, CRL_E_NOMEM);
        if (rc)
            return rc;
    }
    bool any = false;
    for (int64_t i = 0; i < w->n; i++) {
        bool want = !mask || mask[i];
        /* An env the inner env reset in the last step is already at its
         * episode start, unless a seed asks for a new one. */
        w->again[i] = want && (!w->td || !w->fresh[i] || seeds || from_state);
        any |= w->again[i];
        if (w->again[i] && seeds) {
            in->seed_pending[i] = true;
            in->seeds[i] = seeds[i];
        }
    }
    if (any) {
        if (w->td) {
            uint8_t *m = crl_tensor_data(w->rmask);
            for (int64_t i = 0; i < w->n; i++)
                m[i] = w->again[i];
            int rc = crl_td_set(w->td, "_reset", w->rmask, err);
            if (rc)
                return rc;
        }
        crl_error_clear(&e);
        crl_td *r = from_state ? crl_env_reset_from_state(in, w->td, &e) : crl_env_reset(in, w->td, &e);
        if (!r)
            return crl_error_pass(err, &e, CRL_E_RUNTIME);
        if (!w->td)
            w->td = r;
        else
            crl_td_unref(r);
    }
    for (int64_t i = 0; i < w->n; i++)
        if (!mask || mask[i])
            w->fresh[i] = false;
    return put_rows(w, "", true, err);
}

static int wenv_step(void *benv, crl_error *err)
{
    wenv *w = benv;
    if (!w->td)
        return crl_error_set(err, CRL_E_INVALID, "worker_transforms: step before the first reset");
    for (size_t i = 0; w->act_keys[i]; i++) {
        int rc = crl_td_set(w->td, w->act_keys[i], crl_td_get(w->view, w->act_keys[i]), err);
        if (rc)
            return rc;
    }
    /* The envs the inner env resets inside this step (next_step). */
    for (int64_t i = 0; i < w->n; i++)
        w->fresh[i] = w->inner->needs_reset[i];
    int rc = crl_env_step(w->inner, w->td, err);
    if (!rc)
        rc = put_rows(w, "next.", false, err);
    if (!rc)
        rc = crl_env_step_mdp_into(w->inner, w->td, w->td, err);
    return rc;
}

static int wenv_render(void *benv, int64_t i, uint8_t *rgb, crl_error *err)
{
    wenv *w = benv;
    int64_t shape[3] = { crl_env_render_height(w->inner), crl_env_render_width(w->inner), 3 };
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *frame = crl_tensor_wrap(rgb, CRL_U8, 3, shape, NULL, NULL, NULL, &e);
    int rc = frame ? crl_env_render(w->inner, i, frame, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(frame);
    return rc;
}

const crl_env_ops crl__wenv_ops = {
    .struct_size = sizeof(crl_env_ops),
    .bind = wenv_bind,
    .reset = wenv_reset,
    .step = wenv_step,
    .render = wenv_render,
    .close = wenv_close,
};
