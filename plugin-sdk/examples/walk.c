/* walk: an env backend.  Walk-v0 is a corridor of `size` cells; the walker starts on a random inner cell
 * and steps left (action 0) or right (action 1).  Reaching the right end pays 1 and ends the episode
 * (terminated); the left end ends it with 0.  The host truncates an episode at `max_steps`.
 *
 * What it shows: a batch-native make (all `num` envs at once) declaring Composite specs with batch [num],
 * buffers fetched once in bind and used without allocating in reset and step, one random stream per env
 * restarted from the host's seeds, terminated vs truncated, and render. */
#include "example.h"

#include <crl/env_backend.h>

#include <stdlib.h>
#include <string.h>

#define CELL 16 /* pixels per cell in render */

static const char *const walk_ids[] = { "Walk-v0", NULL };

typedef struct walk {
    int64_t num, size;
    crl_rng *rng;      /* env i's stream */
    int64_t *pos;      /* env i's cell */
    /* the host's buffers (bind) */
    float *obs;
    const int64_t *action;
    float *reward;
    bool *terminated, *truncated;
} walk;

static const char *const *walk_list(void)
{
    return walk_ids;
}

static void walk_close(void *env)
{
    walk *w = env;
    if (!w)
        return;
    free(w->rng);
    free(w->pos);
    free(w);
}

static int walk_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                     crl_error *err)
{
    if (strcmp(id, "Walk-v0") != 0) {
        const char *hint = crl_did_you_mean(id, walk_ids);
        return crl_error_set(err, CRL_E_NOT_FOUND, "walk: no env '%s'%s%s%s (walk has Walk-v0)", id,
                             hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
    }
    int64_t size, max_steps;
    int rc;
    if ((rc = crl_opts_int(opts, "size", &size, err)) || (rc = crl_opts_int(opts, "max_steps", &max_steps, err)))
        return rc;
    int64_t col[2] = { num, 1 };
    /* Each constructor consumes the reference it is given, so the calls nest; the host owns (and unrefs)
     * whatever is stored in specs, also when make fails. */
    specs->observation = crl_spec_composite_of(num, "observation", crl_spec_bounded(CRL_F32, 2, col, 0.0, 1.0, err),
                                               err);
    specs->action = crl_spec_composite_of(num, "action", crl_spec_categorical(2, CRL_I64, 1, &num, err), err);
    specs->reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, err), err);
    specs->done = crl_env_backend_done_spec(num, err);
    if (!specs->observation || !specs->action || !specs->reward || !specs->done)
        return CRL_E_INVALID; /* err says which, as the failing constructor set it */
    specs->max_episode_steps = max_steps;
    specs->render_height = CELL;
    specs->render_width = (int32_t)(size * CELL);

    walk *w = calloc(1, sizeof *w);
    if (w) {
        w->rng = calloc((size_t)num, sizeof *w->rng);
        w->pos = calloc((size_t)num, sizeof *w->pos);
    }
    if (!w || !w->rng || !w->pos) {
        walk_close(w);
        return crl_error_set(err, CRL_E_NOMEM, "walk: out of memory for %lld envs", (long long)num);
    }
    w->num = num;
    w->size = size;
    for (int64_t i = 0; i < num; i++)
        crl_rng_init(&w->rng[i], 0, (uint64_t)i);
    *env = w;
    return CRL_OK;
}

static int walk_bind(void *env, crl_td *buffers, crl_error *err)
{
    walk *w = env;
    int rc = CRL_OK;
    /* Each call checks key, dtype and shape; after a failure the rest return NULL at once. */
    w->obs = crl_env_backend_buffer(buffers, "walk: Walk-v0", "observation", CRL_F32, w->num, 1, &rc, err);
    w->action = crl_env_backend_buffer(buffers, "walk: Walk-v0", "action", CRL_I64, w->num, 0, &rc, err);
    w->reward = crl_env_backend_buffer(buffers, "walk: Walk-v0", "reward", CRL_F32, w->num, 1, &rc, err);
    w->terminated = crl_env_backend_buffer(buffers, "walk: Walk-v0", "terminated", CRL_BOOL, w->num, 1, &rc, err);
    w->truncated = crl_env_backend_buffer(buffers, "walk: Walk-v0", "truncated", CRL_BOOL, w->num, 1, &rc, err);
    return rc;
}

static void observe(walk *w, int64_t i)
{
    w->obs[i] = (float)w->pos[i] / (float)(w->size - 1);
}

static int walk_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    walk *w = env;
    if (from_state) /* no state spec: the host never asks, but say so if it did */
        return crl_error_set(err, CRL_E_UNSUPPORTED, "walk: Walk-v0 declares no state to start from");
    for (int64_t i = 0; i < w->num; i++) {
        if (mask && !mask[i])
            continue;
        if (seeds)
            crl_rng_init(&w->rng[i], seeds[i], 0);
        w->pos[i] = 1 + (int64_t)crl_rng_below(&w->rng[i], (uint64_t)(w->size - 2));
        observe(w, i);
        w->terminated[i] = false;
        w->truncated[i] = false;
    }
    return CRL_OK;
}

static int walk_step(void *env, crl_error *err)
{
    walk *w = env;
    for (int64_t i = 0; i < w->num; i++) {
        int64_t a = w->action[i];
        if (a != 0 && a != 1)
            return crl_error_set(err, CRL_E_RANGE, "walk: env %lld got action %lld (Walk-v0 takes 0 or 1)",
                                 (long long)i, (long long)a);
        /* Stepping an env whose episode has ended must be harmless: stay in the corridor. */
        int64_t p = w->pos[i] + (a ? 1 : -1);
        w->pos[i] = p < 0 ? 0 : p >= w->size ? w->size - 1 : p;
        w->reward[i] = w->pos[i] == w->size - 1 ? 1.0f : 0.0f;
        w->terminated[i] = w->pos[i] == 0 || w->pos[i] == w->size - 1;
        w->truncated[i] = false; /* the host sets it at max_episode_steps */
        observe(w, i);
    }
    return CRL_OK;
}

static int walk_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    walk *w = env;
    if (i < 0 || i >= w->num)
        return crl_error_set(err, CRL_E_RANGE, "walk: render of env %lld of %lld", (long long)i, (long long)w->num);
    int64_t width = w->size * CELL;
    for (int64_t y = 0; y < CELL; y++) {
        for (int64_t x = 0; x < width; x++) {
            int64_t cell = x / CELL;
            bool edge = x % CELL == 0 || y == 0 || y == CELL - 1;
            uint8_t r = 200, g = 200, b = 200;                  /* floor */
            if (cell == w->size - 1)
                r = 80, g = 200, b = 80;                        /* goal */
            else if (cell == 0)
                r = 120, g = 120, b = 120;                      /* dead end */
            if (cell == w->pos[i] && !edge)
                r = 220, g = 40, b = 40;                        /* walker */
            if (edge)
                r = g = b = 60;
            uint8_t *p = rgb + 3 * (y * width + x);
            p[0] = r, p[1] = g, p[2] = b;
        }
    }
    return CRL_OK;
}

static const crl_env_ops walk_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = walk_list,
    .make = walk_make,
    .bind = walk_bind,
    .reset = walk_reset,
    .step = walk_step,
    .render = walk_render,
    .close = walk_close,
};

/* Validated by the host in the [env] section when backend = walk (FILE:LINE errors never reach make). */
static const crl_option walk_options[] = {
    { "size", CRL_OPT_INT, CRL_OPT_RANGE, "7", 3, 64, NULL, "cells of the corridor, both ends included" },
    { "max_steps", CRL_OPT_INT, CRL_OPT_RANGE, "50", 1, 100000, NULL,
      "steps after which the host truncates an episode" },
    CRL_OPTIONS_END
};

const crl_component example_walk_component = {
    sizeof(crl_component), CRL_KIND_ENV, "walk", "Walk-v0: a corridor walk, the SDK's example env backend",
    walk_options, &walk_ops
};
