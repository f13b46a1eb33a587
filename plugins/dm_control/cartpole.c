/* The suite's cartpole domain: balance, balance_sparse, swingup, swingup_sparse. */
#include "dmc.h"

#include <math.h>

/* A cart on a 3.6 m rail (slider limit +-1.8), 1 kg, one 1 m capsule pole of
 * 0.1 kg on a hinge; RK4 at 10 ms, no contacts; a motor of gear 10 on the
 * slider with control in [-1, 1]. */
const char dmc_cartpole_xml[] =
    "<mujoco model='cart-pole'>"
    "<option timestep='0.01' integrator='RK4'>"
    "<flag contact='disable' energy='enable'/>"
    "</option>"
    "<default>"
    "<default class='pole'>"
    "<joint type='hinge' axis='0 1 0' damping='2e-6'/>"
    "<geom type='capsule' fromto='0 0 0 0 0 1' size='0.045' material='self' mass='.1'/>"
    "</default>"
    "</default>"
    "<worldbody>"
    "<light name='light' pos='0 0 6'/>"
    "<camera name='fixed' pos='0 -4 1' zaxis='0 -1 0'/>"
    "<camera name='lookatcart' mode='targetbody' target='cart' pos='0 -2 2'/>"
    "<geom name='floor' pos='0 0 -.05' size='4 4 .2' type='plane' material='grid'/>"
    "<geom name='rail1' type='capsule' pos='0 .07 1' zaxis='1 0 0' size='0.02 2' material='decoration'/>"
    "<geom name='rail2' type='capsule' pos='0 -.07 1' zaxis='1 0 0' size='0.02 2' material='decoration'/>"
    "<body name='cart' pos='0 0 1'>"
    "<joint name='slider' type='slide' limited='true' axis='1 0 0' range='-1.8 1.8'"
    " solreflimit='.08 1' damping='5e-4'/>"
    "<geom name='cart' type='box' size='0.2 0.15 0.1' material='self' mass='1'/>"
    "<body name='pole_1' childclass='pole'>"
    "<joint name='hinge_1'/>"
    "<geom name='pole_1'/>"
    "</body>"
    "</body>"
    "</worldbody>"
    "<actuator>"
    "<motor name='slide' joint='slider' gear='10' ctrllimited='true' ctrlrange='-1 1'/>"
    "</actuator>"
    "</mujoco>";

enum { SLIDER, HINGE, POLE };

static int cartpole_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_joint(dm, "slider", SLIDER, err);
    if (rc == CRL_OK)
        rc = dmc_joint(dm, "hinge_1", HINGE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "pole_1", POLE, err);
    return rc;
}

static void init_balance(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    d->qpos[dm->adr[SLIDER]] = crl_rng_range(rng, -0.1, 0.1);
    d->qpos[dm->adr[HINGE]] = crl_rng_range(rng, -0.034, 0.034);
    for (int k = 0; k < dm->m->nv; k++)
        d->qvel[k] = 0.01 * dmc_randn(rng);
}

static void init_swingup(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    d->qpos[dm->adr[SLIDER]] = 0.01 * dmc_randn(rng);
    d->qpos[dm->adr[HINGE]] = M_PI + 0.01 * dmc_randn(rng);
    for (int k = 0; k < dm->m->nv; k++)
        d->qvel[k] = 0.01 * dmc_randn(rng);
}

/* position: cart x, then the pole's cos and sin (xmat zz, xz); velocity: qvel. */
static void cartpole_observe(const dmc_model *dm, const mjData *d, const double *extra,
                             double *const *out)
{
    (void)extra;
    out[0][0] = d->qpos[dm->adr[SLIDER]];
    out[0][1] = dmc_xmat(d, dm->id[POLE], 2, 2);
    out[0][2] = dmc_xmat(d, dm->id[POLE], 0, 2);
    out[1][0] = d->qvel[0];
    out[1][1] = d->qvel[1];
}

static double reward_smooth(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    double cosine = dmc_xmat(d, dm->id[POLE], 2, 2);
    double upright = (cosine + 1.0) / 2.0;
    double centered = (1.0 + dmc_tol(d->qpos[dm->adr[SLIDER]], 0, 0, 2.0)) / 2.0;
    double small_control = (4.0 + dmc_small_control(dm->m, d)) / 5.0;
    double small_velocity = (1.0 + dmc_tol(d->qvel[1], 0, 0, 5.0)) / 2.0;
    return upright * small_control * small_velocity * centered;
}

static double reward_sparse(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    double cart_in_bounds = dmc_tol(d->qpos[dm->adr[SLIDER]], -0.25, 0.25, 0);
    double angle_in_bounds = dmc_tol(dmc_xmat(d, dm->id[POLE], 2, 2), 0.995, 1.0, 0);
    return cart_in_bounds * angle_in_bounds;
}

#define CARTPOLE_TASK(tname, init_fn, reward_fn)                                       \
    {                                                                                  \
        .domain = "cartpole", .name = #tname, .id = "cartpole/" #tname,                \
        .xml = dmc_cartpole_xml, .time_limit = 10.0, .control_timestep = 0.0, .n_obs = 2,  \
        .obs = {{"position", 3}, {"velocity", 2}}, .n_extra = 0, .setup = cartpole_setup, \
        .init = init_fn, .observe = cartpole_observe, .reward = reward_fn,             \
    }

const dmc_task dmc_cartpole_balance = CARTPOLE_TASK(balance, init_balance, reward_smooth);
const dmc_task dmc_cartpole_balance_sparse =
    CARTPOLE_TASK(balance_sparse, init_balance, reward_sparse);
const dmc_task dmc_cartpole_swingup = CARTPOLE_TASK(swingup, init_swingup, reward_smooth);
const dmc_task dmc_cartpole_swingup_sparse =
    CARTPOLE_TASK(swingup_sparse, init_swingup, reward_sparse);
