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

int32_t sm_step_plant(void *sim, const double *u, double *obs, double *reward)
{
    uint8_t ignored;
    return sm_step(sim, u, obs, reward, &ignored);
}

void sm_free(void *sim)
{
    free(sim);
}
