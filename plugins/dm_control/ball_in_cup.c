/* The suite's ball_in_cup domain: catch. */
#include "dmc.h"

#include <math.h>

/* A planar cup of five capsules on x/z slides (damping 3, stiffness 20,
 * motors of gear 5) and a 2.5 cm ball tied to it by a 0.3 m string (a
 * limited spatial tendon); MuJoCo's default 2 ms Euler step, driven every
 * 20 ms.  The target is the box inside the cup. */
static const char ball_in_cup_xml[] =
    "<mujoco model='ball in cup'>"
    "<default>"
    "<motor ctrllimited='true' ctrlrange='-1 1' gear='5'/>"
    "<default class='cup'>"
    "<joint type='slide' damping='3' stiffness='20'/>"
    "<geom type='capsule' size='.008' material='self'/>"
    "</default>"
    "</default>"
    "<worldbody>"
    "<light name='light' directional='true' diffuse='.6 .6 .6' pos='0 0 2' specular='.3 .3 .3'/>"
    "<geom name='ground' type='plane' pos='0 0 0' size='.6 .2 10' material='grid'/>"
    "<camera name='cam0' pos='0 -1 .8' xyaxes='1 0 0 0 1 2'/>"
    "<camera name='cam1' pos='0 -1 .4' xyaxes='1 0 0 0 0 1'/>"
    "<body name='cup' pos='0 0 .6' childclass='cup'>"
    "<joint name='cup_x' axis='1 0 0'/>"
    "<joint name='cup_z' axis='0 0 1'/>"
    "<geom name='cup_part_0' fromto='-.05 0 0 -.05 0 -.075'/>"
    "<geom name='cup_part_1' fromto='-.05 0 -.075 -.025 0 -.1'/>"
    "<geom name='cup_part_2' fromto='-.025 0 -.1 .025 0 -.1'/>"
    "<geom name='cup_part_3' fromto='.025 0 -.1 .05 0 -.075'/>"
    "<geom name='cup_part_4' fromto='.05 0 -.075 .05 0 0'/>"
    "<site name='cup' pos='0 0 -.108' size='.005'/>"
    "<site name='target' type='box' pos='0 0 -.05' size='.05 .006 .05' group='4'/>"
    "</body>"
    "<body name='ball' pos='0 0 .2'>"
    "<joint name='ball_x' type='slide' axis='1 0 0'/>"
    "<joint name='ball_z' type='slide' axis='0 0 1'/>"
    "<geom name='ball' type='sphere' size='.025' material='effector'/>"
    "<site name='ball' size='.005'/>"
    "</body>"
    "</worldbody>"
    "<actuator>"
    "<motor name='x' joint='cup_x'/>"
    "<motor name='z' joint='cup_z'/>"
    "</actuator>"
    "<tendon>"
    "<spatial name='string' limited='true' range='0 0.3' width='0.003'>"
    "<site site='ball'/>"
    "<site site='cup'/>"
    "</spatial>"
    "</tendon>"
    "</mujoco>";

enum { BALL_X, BALL_Z, BALL, TARGET, BALL_GEOM };

static int ball_in_cup_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_joint(dm, "ball_x", BALL_X, err);
    if (rc == CRL_OK)
        rc = dmc_joint(dm, "ball_z", BALL_Z, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "ball", BALL, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "target", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "ball", BALL_GEOM, err);
    return rc;
}

/* The ball somewhere below the cup, drawn again while it penetrates
 * anything (the suite draws until it does not; we stop at 1000). */
static void ball_in_cup_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    for (int attempt = 0; attempt < 1000; attempt++) {
        d->qpos[dm->adr[BALL_X]] = crl_rng_range(rng, -0.2, 0.2);
        d->qpos[dm->adr[BALL_Z]] = crl_rng_range(rng, 0.2, 0.5);
        mj_forward(dm->m, d);
        if (d->ncon == 0)
            break;
    }
}

static void ball_in_cup_observe(const dmc_model *dm, const mjData *d, const double *extra,
                                double *const *out)
{
    (void)extra;
    for (int k = 0; k < dm->m->nq; k++)
        out[0][k] = d->qpos[k];
    for (int k = 0; k < dm->m->nv; k++)
        out[1][k] = d->qvel[k];
}

/* 1 when the ball's centre is inside the target box shrunk by its radius. */
static double ball_in_cup_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const mjModel *m = dm->m;
    const double *target = d->site_xpos + 3 * dm->id[TARGET];
    const double *ball = d->xpos + 3 * dm->id[BALL];
    const double *size = m->site_size + 3 * dm->id[TARGET];
    double r = m->geom_size[3 * dm->id[BALL_GEOM]];
    bool in_x = fabs(target[0] - ball[0]) < size[0] - r;
    bool in_z = fabs(target[2] - ball[2]) < size[2] - r;
    return in_x && in_z ? 1.0 : 0.0;
}

const dmc_task dmc_ball_in_cup_catch = {
    .domain = "ball_in_cup", .name = "catch", .id = "ball_in_cup/catch", .xml = ball_in_cup_xml,
    .time_limit = 20.0, .control_timestep = 0.02, .n_obs = 2,
    .obs = {{"position", 4}, {"velocity", 4}}, .setup = ball_in_cup_setup,
    .init = ball_in_cup_init, .observe = ball_in_cup_observe, .reward = ball_in_cup_reward,
};
