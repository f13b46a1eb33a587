/* A mass-spring-damper: m x'' = -k x - c x' + u, semi-implicit Euler. */
#include "springmass.h"

#include <math.h>
#include <stdlib.h>

struct sm_sim {
    double x, v, m;
    uint64_t rng;
};

static double uniform(sm_sim *s)
{
    /* splitmix64: the simulator's own stream. */
    uint64_t z = (s->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

void *sm_make_mass(double m)
{
    sm_sim *s = calloc(1, sizeof(sm_sim));
    if (s)
        s->m = m;
    return s;
}

void *sm_make(void)
{
    return sm_make_mass(1.0);
}

void sm_seed(void *sim, uint64_t seed)
{
    ((sm_sim *)sim)->rng = seed;
}

void sm_reset(void *sim, double *obs)
{
    sm_sim *s = sim;
    s->x = uniform(s);
    s->v = uniform(s);
    obs[0] = s->x;
    obs[1] = s->v;
}

int32_t sm_step(void *sim, const double *u, double *obs, double *reward, uint8_t *terminated)
{
    sm_sim *s = sim;
    const double k = 1.0, c = 0.1, m = s->m, dt = 0.05;
    if (!isfinite(u[0]) || m < 0.0)
        return -1;
    double f = u[0] < -1.0 ? -1.0 : u[0] > 1.0 ? 1.0 : u[0];
    double a = (-k * s->x - c * s->v + f) / m;
    s->v += dt * a;
    s->x += dt * s->v;
    obs[0] = s->x;
    obs[1] = s->v;
    *reward = -(s->x * s->x + 0.1 * s->v * s->v + 0.001 * f * f);
    *terminated = fabs(s->x) > 4.0;
    return 0;
}

int32_t sm_step_discrete(void *sim, const int64_t *action, double *obs, double *reward, uint8_t *terminated)
{
    if (action[0] < 0 || action[0] > 2)
        return -1;
    double u = (double)(action[0] - 1);
    return sm_step(sim, &u, obs, reward, terminated);
}

int32_t sm_step_plant(void *sim, const double *u, double *obs, double *reward)
{
    uint8_t ignored;
    return sm_step(sim, u, obs, reward, &ignored);
}

void sm_free(void *sim)
{
    free(sim);
}

int32_t sm_render(const void *sim, uint8_t *rgb, int32_t h, int32_t w)
{
    const sm_sim *s = sim;
    if (h <= 0 || w <= 0)
        return -1;
    double c = (double)w / 2.0 + s->x * ((double)w / 8.0);
    int64_t col = !(c >= 0.0) ? 0 : c > (double)w ? w : (int64_t)c; /* NaN: the left edge */
    int64_t mid = w / 2;
    int64_t lo = col < mid ? col : mid, hi = col < mid ? mid : col;
    for (int64_t r = 0; r < h; r++)
        for (int64_t k = 0; k < w; k++) {
            uint8_t *px = rgb + 3 * (r * w + k);
            int bar = k >= lo && k <= hi;
            px[0] = bar ? 20 : 255;
            px[1] = bar ? 40 : 255;
            px[2] = bar ? 160 : 255;
        }
    return 0;
}

/* The batch interface: one call for n simulators, arrays of n. */
typedef struct sm_batch {
    int64_t n;
    sm_sim sims[];
} sm_batch;

void *sm_batch_make(int64_t n)
{
    sm_batch *b = calloc(1, sizeof(sm_batch) + (size_t)n * sizeof(sm_sim));
    if (!b)
        return NULL;
    b->n = n;
    for (int64_t i = 0; i < n; i++)
        b->sims[i].m = 1.0;
    return b;
}

void sm_batch_seed(void *batch, const uint64_t *seeds, const uint8_t *mask, int64_t n)
{
    sm_batch *b = batch;
    for (int64_t i = 0; i < n && i < b->n; i++)
        if (mask[i])
            sm_seed(&b->sims[i], seeds[i]);
}

void sm_batch_reset(void *batch, const uint8_t *mask, double *obs, int64_t n)
{
    sm_batch *b = batch;
    for (int64_t i = 0; i < n && i < b->n; i++)
        if (mask[i])
            sm_reset(&b->sims[i], obs + 2 * i);
}

int32_t sm_batch_step(void *batch, const double *u, double *obs, double *reward, uint8_t *terminated, int64_t n)
{
    sm_batch *b = batch;
    if (n != b->n)
        return -2;
    for (int64_t i = 0; i < n; i++)
        if (sm_step(&b->sims[i], u + i, obs + 2 * i, reward + i, terminated + i))
            return -1;
    return 0;
}

void sm_batch_free(void *batch)
{
    free(batch);
}
