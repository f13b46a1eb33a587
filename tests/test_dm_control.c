/* Check suite for the dm_control plugin: the suite's reward shaping, each task's reward and
 * observations at hand-set states, and the env backend contract through the host. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/env_backend.h>
#include <crl/host.h>

#include "dmc-sim.h"


#define EXPECT_MSG(e, want, needle)                                                            \
    do {                                                                                       \
        ck_assert_msg((e).code == (want), "got %s, expected %s (%s)", crl_status_name((e).code), \
                      crl_status_name(want), (e).message);                                     \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'",       \
                      (e).message, (needle));                                                  \
    } while (0)

#define NEAR(a, b, tol) ck_assert_msg(fabs((a) - (b)) <= (tol), "%s = %.17g, expected %.17g", #a, \
                                      (double)(a), (double)(b))

/* ---- rewards.c ---------------------------------------------------------- */

/* Every sigmoid is 1 at 0 and value_at_1 at +-1, and falls monotonically. */
START_TEST(test_sigmoids)
{
    const dmc_sigmoid kinds[] = {DMC_GAUSSIAN, DMC_HYPERBOLIC, DMC_LONG_TAIL, DMC_RECIPROCAL,
                                 DMC_COSINE,   DMC_LINEAR,     DMC_QUADRATIC, DMC_TANH_SQUARED};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (double v = 0.1; v < 0.95; v += 0.4) {
            NEAR(dmc_sigmoid_eval(0.0, v, kinds[k]), 1.0, 1e-12);
            NEAR(dmc_sigmoid_eval(1.0, v, kinds[k]), v, 1e-12);
            if (kinds[k] != DMC_LINEAR) /* linear is the suite's 1 - x: tolerance feeds it x >= 0 */
                NEAR(dmc_sigmoid_eval(-1.0, v, kinds[k]), v, 1e-12);
            double prev = 1.0;
            for (double x = 0.1; x < 3.0; x += 0.1) {
                double y = dmc_sigmoid_eval(x, v, kinds[k]);
                ck_assert_msg(y <= prev && y >= 0.0, "sigmoid %zu not falling at %g", k, x);
                prev = y;
            }
        }
    }
    /* The bounded ones reach 0 and stay there; the others only approach it. */
    ck_assert(dmc_sigmoid_eval(1.0 / 0.9 + 1e-9, 0.1, DMC_LINEAR) == 0.0);
    ck_assert(dmc_sigmoid_eval(1.0, 0.0, DMC_LINEAR) == 0.0);
    ck_assert(dmc_sigmoid_eval(1.0, 0.0, DMC_QUADRATIC) == 0.0);
    ck_assert(dmc_sigmoid_eval(0.5, 0.0, DMC_QUADRATIC) == 0.75);
    ck_assert(dmc_sigmoid_eval(2.0, 0.5, DMC_COSINE) == 0.0);
    ck_assert(dmc_sigmoid_eval(10.0, 0.1, DMC_GAUSSIAN) > 0.0);
    ck_assert(dmc_sigmoid_eval(10.0, 0.1, DMC_LONG_TAIL) > 0.0);
    /* Known values: gaussian at 2 with 0.1 at 1 is 0.1^4; reciprocal 1/(9|x|+1). */
    NEAR(dmc_sigmoid_eval(2.0, 0.1, DMC_GAUSSIAN), 1e-4, 1e-15);
    NEAR(dmc_sigmoid_eval(3.0, 0.1, DMC_RECIPROCAL), 1.0 / 28.0, 1e-15);
    NEAR(dmc_sigmoid_eval(0.5, 0.1, DMC_HYPERBOLIC), 1.0 / cosh(0.5 * acosh(10.0)), 1e-15);
}
END_TEST

START_TEST(test_tolerance)
{
    /* Inside (bounds inclusive), at the margin, far away. */
    ck_assert(dmc_tol(0.3, 0.0, 0.5, 1.0) == 1.0);
    ck_assert(dmc_tol(0.0, 0.0, 0.5, 1.0) == 1.0);
    ck_assert(dmc_tol(0.5, 0.0, 0.5, 1.0) == 1.0);
    NEAR(dmc_tol(1.5, 0.0, 0.5, 1.0), 0.1, 1e-12);
    NEAR(dmc_tol(-1.0, 0.0, 0.5, 1.0), 0.1, 1e-12);
    NEAR(dmc_tol(-2.0, 0.0, 0.5, 2.0), 0.1, 1e-12);
    ck_assert(dmc_tol(50.0, 0.0, 0.5, 1.0) < 1e-100);
    NEAR(dmc_tolerance(1.5, 0.0, 0.5, 1.0, DMC_LINEAR, 0.3), 0.3, 1e-12);
    ck_assert(dmc_tolerance(5.0, 0.0, 0.5, 1.0, DMC_LINEAR, 0.3) == 0.0);
    /* margin 0: an indicator. */
    ck_assert(dmc_tol(0.5000001, 0.0, 0.5, 0.0) == 0.0);
    ck_assert(dmc_tol(0.25, 0.0, 0.5, 0.0) == 1.0);
    ck_assert(dmc_tol(0.0, 0.0, 0.0, 0.0) == 1.0);
    /* NaN is never inside. */
    ck_assert(dmc_tol(NAN, 0.0, 1.0, 0.0) == 0.0);
}
END_TEST

/* dmc_small_control spells tolerance(u, (0, 0), margin 1, quadratic, 0) out, and the gaussian's default scale is
 * cached: both must give tolerance()'s bits for every control, edge values included. */
START_TEST(test_small_control_and_cached_scale)
{
    static const double us[] = { 0.0, -0.0, 0.5, -0.5, 1e-300, -1e-300, 0.999999999, -0.999999999, 1.0, -1.0,
                                 1.0000001, 2.0, -7.5, 0.1, 0.3333333333333333, INFINITY, -INFINITY, NAN };
    const int n = (int)(sizeof us / sizeof us[0]);
    mjModel *m = calloc(1, sizeof *m);
    mjData *d = calloc(1, sizeof *d);
    double ctrl[1];
    m->nu = 1;
    d->ctrl = ctrl;
    for (int i = 0; i < n; i++) {
        ctrl[0] = us[i];
        double want = dmc_tolerance(us[i], 0, 0, 1.0, DMC_QUADRATIC, 0.0), got = dmc_small_control(m, d);
        ck_assert_msg(memcmp(&want, &got, sizeof want) == 0, "u = %.17g: small_control %.17g, tolerance %.17g",
                      us[i], got, want);
        /* The gaussian at 0.1 (the cached scale) against the scale computed afresh, as the suite does. */
        double x = us[i] * 0.75;
        double cached = dmc_sigmoid_eval(x, 0.1, DMC_GAUSSIAN), s = x * sqrt(-2.0 * log(0.1));
        double fresh = exp(-0.5 * s * s);
        ck_assert_msg(memcmp(&cached, &fresh, sizeof fresh) == 0 || (isnan(cached) && isnan(fresh)),
                      "x = %.17g: %.17g vs %.17g", x, cached, fresh);
    }
    /* Two controls: the mean. */
    double two[2] = { 0.5, -2.0 };
    m->nu = 2;
    d->ctrl = two;
    ck_assert(dmc_small_control(m, d) == 0.375);
    m->nu = 0;
    ck_assert(dmc_small_control(m, d) == 1.0);
    free(m);
    free(d);
}
END_TEST

/* ---- tasks at hand-set states --------------------------------------------- */

/* Positions and velocities set by hand (NULL: zeros), forward, then the
 * task's reward. */
static double sim_reward_v(sim *s, const double *qpos, const double *qvel, const double *ctrl)
{
    mj_resetData(s->dm.m, s->d);
    for (int k = 0; qpos && k < s->dm.m->nq; k++)
        s->d->qpos[k] = qpos[k];
    for (int k = 0; qvel && k < s->dm.m->nv; k++)
        s->d->qvel[k] = qvel[k];
    for (int k = 0; ctrl && k < s->dm.m->nu; k++)
        s->d->ctrl[k] = ctrl[k];
    mj_forward(s->dm.m, s->d);
    s->dm.task->observe(&s->dm, s->d, s->extra, s->out);
    return s->dm.task->reward(&s->dm, s->d, s->extra);
}

static double sim_reward(sim *s, const double *qpos, const double *ctrl)
{
    return sim_reward_v(s, qpos, NULL, ctrl);
}

START_TEST(test_cartpole_rewards)
{
    sim s;
    sim_open(&s, &dmc_cartpole_balance);
    double up[2] = {0, 0}, down[2] = {0, M_PI}, edge[2] = {2.0, 0}, tilted[2] = {0, M_PI / 2};
    NEAR(sim_reward(&s, up, NULL), 1.0, 1e-12);
    /* observation: cart x, cos, sin of the pole; velocity [2] */
    NEAR(s.obs[0][0], 0.0, 0);
    NEAR(s.obs[0][1], 1.0, 1e-12);
    NEAR(s.obs[0][2], 0.0, 1e-12);
    NEAR(sim_reward(&s, down, NULL), 0.0, 1e-12);
    NEAR(sim_reward(&s, tilted, NULL), 0.5, 1e-12);
    NEAR(s.obs[0][2], 1.0, 1e-12); /* sin of +90 degrees about y: pole leans to +x */
    /* 2 m off centre is the margin: centered = (1 + 0.1) / 2. */
    NEAR(sim_reward(&s, edge, NULL), 0.55, 1e-12);
    NEAR(s.obs[0][0], 2.0, 0);
    /* Full control costs a fifth: (4 + 0) / 5. */
    double full[1] = {1.0};
    NEAR(sim_reward(&s, up, full), 0.8, 1e-12);
    sim_close(&s);

    sim_open(&s, &dmc_cartpole_balance_sparse);
    double in[2] = {0.25, 0.09}, out_cart[2] = {0.26, 0}, out_angle[2] = {0, 0.11};
    NEAR(sim_reward(&s, in, NULL), 1.0, 0);
    NEAR(sim_reward(&s, out_cart, NULL), 0.0, 0);
    NEAR(sim_reward(&s, out_angle, NULL), 0.0, 0);
    NEAR(sim_reward(&s, edge, full), 0.0, 0);
    sim_close(&s);
}
END_TEST

START_TEST(test_pendulum_rewards)
{
    sim s;
    sim_open(&s, &dmc_pendulum_swingup);
    double deg = M_PI / 180;
    double up[1] = {0}, in[1] = {7.9 * deg}, out[1] = {8.1 * deg}, down[1] = {M_PI};
    NEAR(sim_reward(&s, up, NULL), 1.0, 0);
    NEAR(s.obs[0][0], 1.0, 1e-12);
    NEAR(sim_reward(&s, in, NULL), 1.0, 0);
    NEAR(s.obs[0][1], sin(7.9 * deg), 1e-12);
    NEAR(sim_reward(&s, out, NULL), 0.0, 0);
    NEAR(sim_reward(&s, down, NULL), 0.0, 0);
    NEAR(s.obs[0][0], -1.0, 1e-12);
    sim_close(&s);
}
END_TEST

START_TEST(test_acrobot_rewards)
{
    sim s;
    sim_open(&s, &dmc_acrobot_swingup);
    /* Straight up with the elbow straight: the tip sits on the target. */
    double up[2] = {0, 0};
    NEAR(sim_reward(&s, up, NULL), 1.0, 0);
    NEAR(s.obs[0][0], 0.0, 1e-12);
    NEAR(s.obs[0][1], 0.0, 1e-12);
    NEAR(s.obs[0][2], 1.0, 1e-12);
    NEAR(s.obs[0][3], 1.0, 1e-12);
    /* Rotating the straight arm by a moves the tip 4 sin(a/2) from the target. */
    double inside[2] = {2 * asin(0.19 / 4), 0};
    double margin[2] = {2 * asin(1.2 / 4), 0};
    double far[2] = {M_PI, 0};
    NEAR(sim_reward(&s, inside, NULL), 1.0, 0);
    NEAR(sim_reward(&s, margin, NULL), 0.1, 1e-9);
    ck_assert(sim_reward(&s, far, NULL) < 1e-9);
    /* Bent elbow: the lower link's orientation is the sum of both angles. */
    double bent[2] = {0.3, 0.4};
    sim_reward(&s, bent, NULL);
    NEAR(s.obs[0][0], sin(0.3), 1e-12);
    NEAR(s.obs[0][1], sin(0.7), 1e-12);
    NEAR(s.obs[0][2], cos(0.3), 1e-12);
    NEAR(s.obs[0][3], cos(0.7), 1e-12);
    sim_close(&s);

    sim_open(&s, &dmc_acrobot_swingup_sparse);
    NEAR(sim_reward(&s, inside, NULL), 1.0, 0);
    NEAR(sim_reward(&s, margin, NULL), 0.0, 0);
    sim_close(&s);
}
END_TEST

START_TEST(test_point_mass_rewards)
{
    sim s;
    sim_open(&s, &dmc_point_mass_easy);
    double centre[2] = {0, 0}, inside[2] = {0.01, 0.0}, margin[2] = {0.018, 0.024};
    double far[2] = {0.29, 0.29};
    NEAR(sim_reward(&s, centre, NULL), 1.0, 0);
    NEAR(sim_reward(&s, inside, NULL), 1.0, 0);
    NEAR(s.obs[0][0], 0.01, 0);
    /* 0.03 away is the 0.015 target's edge plus a margin of 0.015. */
    NEAR(sim_reward(&s, margin, NULL), 0.1, 1e-9);
    ck_assert(sim_reward(&s, far, NULL) < 1e-12);
    double half[2] = {1.0, 0.0};
    NEAR(sim_reward(&s, centre, half), (0.5 + 4) / 5, 1e-12);
    sim_close(&s);
}
END_TEST

START_TEST(test_reacher_rewards)
{
    sim s;
    sim_open(&s, &dmc_reacher_easy);
    /* Arm straight along x: the finger is at (0.24, 0). */
    double straight[2] = {0, 0};
    s.extra[0] = 0.24;
    s.extra[1] = 0.059;
    NEAR(sim_reward(&s, straight, NULL), 1.0, 0);
    NEAR(s.obs[1][0], 0.0, 1e-12);
    NEAR(s.obs[1][1], 0.059, 1e-12);
    s.extra[1] = 0.061;
    NEAR(sim_reward(&s, straight, NULL), 0.0, 0);
    NEAR(s.dm.m->geom_size[3 * s.dm.id[0]], 0.05, 0);
    sim_close(&s);

    sim_open(&s, &dmc_reacher_hard);
    s.extra[0] = 0.24;
    s.extra[1] = 0.024;
    NEAR(sim_reward(&s, straight, NULL), 1.0, 0);
    s.extra[1] = 0.026;
    NEAR(sim_reward(&s, straight, NULL), 0.0, 0);
    /* Folded arm: shoulder 90 degrees puts the finger at (0, 0.24). */
    double folded[2] = {M_PI / 2, 0};
    s.extra[0] = 0.0;
    s.extra[1] = 0.0;
    sim_reward(&s, folded, NULL);
    NEAR(s.obs[1][0], 0.0, 1e-12);
    NEAR(s.obs[1][1], -0.24, 1e-12);
    sim_close(&s);
}
END_TEST

START_TEST(test_cheetah_rewards)
{
    sim s;
    sim_open(&s, &dmc_cheetah_run);
    double v[9] = {0};
    v[0] = 10.0; /* the whole body moving at 10 m/s along x */
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 1e-9);
    v[0] = 12.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 0);
    v[0] = 5.0; /* halfway through the linear margin of 10 */
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.5, 1e-9);
    NEAR(s.obs[1][0], 5.0, 0);
    v[0] = 0.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.0, 0);
    v[0] = -3.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.0, 0);
    /* position drops the horizontal root: 8 entries from rootz on. */
    double q[9] = {7.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
    sim_reward(&s, q, NULL);
    for (int k = 0; k < 8; k++)
        NEAR(s.obs[0][k], q[k + 1], 0);
    sim_close(&s);
}
END_TEST

START_TEST(test_walker_rewards)
{
    sim s;
    sim_open(&s, &dmc_walker_stand);
    /* Upright at the model's pose: the torso is 1.3 m up. */
    NEAR(sim_reward(&s, NULL, NULL), 1.0, 0);
    NEAR(s.obs[1][0], 1.3, 1e-12);
    for (int b = 0; b < 7; b++) {
        NEAR(s.obs[0][2 * b], 1.0, 1e-12);
        NEAR(s.obs[0][2 * b + 1], 0.0, 1e-12);
    }
    /* 0.7 m lower is the margin (1.2 / 2) below the stand height. */
    double low[9] = {-0.7};
    NEAR(sim_reward(&s, low, NULL), (3 * 0.1 + 1.0) / 4, 1e-9);
    /* Lying flat: upright is 1/2. */
    double flat[9] = {0, 0, M_PI / 2};
    sim_reward(&s, flat, NULL);
    NEAR(s.obs[0][1], 1.0, 1e-12); /* xz of the torso: its z axis now along +x */
    sim_close(&s);

    sim_open(&s, &dmc_walker_walk);
    double v[9] = {0, 1.0};
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 1e-9);
    v[1] = 0.5; /* the margin: move reward 0.5 */
    NEAR(sim_reward_v(&s, NULL, v, NULL), (5 * 0.5 + 1) / 6, 1e-9);
    v[1] = -2.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0 / 6, 1e-9);
    sim_close(&s);

    sim_open(&s, &dmc_walker_run);
    v[1] = 8.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 1e-9);
    v[1] = 4.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), (5 * 0.5 + 1) / 6, 1e-9);
    sim_close(&s);
}
END_TEST

START_TEST(test_hopper_rewards)
{
    sim s;
    sim_open(&s, &dmc_hopper_stand);
    /* Straight up: torso well above the foot, no touch in the air. */
    NEAR(sim_reward(&s, NULL, NULL), 1.0, 0);
    NEAR(s.obs[2][0], 0.0, 0);
    NEAR(s.obs[2][1], 0.0, 0);
    double full[4] = {1, 1, 1, 1}, half[4] = {1, 1, 0, 0};
    NEAR(sim_reward(&s, NULL, full), 0.8, 1e-12);
    NEAR(sim_reward(&s, NULL, half), 0.9, 1e-12);
    /* Upside down (pitch pi): the torso is below the foot. */
    double flipped[7] = {0, 0, M_PI};
    NEAR(sim_reward(&s, flipped, NULL), 0.0, 0);
    sim_close(&s);

    sim_open(&s, &dmc_hopper_hop);
    double v[7] = {2.0};
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 1e-9);
    v[0] = 1.5;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.75, 1e-9);
    v[0] = 1.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.5, 1e-9);
    v[0] = 0.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.0, 0);
    sim_close(&s);
}
END_TEST

START_TEST(test_finger_rewards)
{
    sim s;
    sim_open(&s, &dmc_finger_spin);
    double v[3] = {0, 0, -20.0}; /* proximal, distal, hinge */
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 0);
    NEAR(s.obs[1][2], -20.0, 0);
    v[2] = -15.0;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 1.0, 0);
    v[2] = -14.9;
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.0, 0);
    v[2] = 20.0; /* the wrong way round */
    NEAR(sim_reward_v(&s, NULL, v, NULL), 0.0, 0);
    /* The tip sits 0.13 above the spinner's axis at the model's pose; nothing touches. */
    NEAR(s.obs[0][2], 0.0, 1e-12);
    NEAR(s.obs[0][3], 0.13, 1e-12);
    NEAR(s.obs[0][0], -M_PI / 2, 1e-12); /* the proximal joint's reference angle */
    NEAR(s.obs[2][0], 0.0, 0);
    NEAR(s.dm.m->dof_damping[2], 0.03, 0);
    sim_close(&s);

    sim_open(&s, &dmc_finger_turn_easy);
    s.extra[0] = 0.2 + 0.069; /* the tip is at (0.2, 0.53) */
    s.extra[1] = 0.53;
    NEAR(sim_reward(&s, NULL, NULL), 1.0, 0);
    NEAR(s.obs[4][0], 0.069 - 0.07, 1e-12);
    NEAR(s.obs[3][0], 0.069, 1e-12);
    NEAR(s.obs[3][1], 0.13, 1e-12);
    s.extra[0] = 0.2 + 0.071;
    NEAR(sim_reward(&s, NULL, NULL), 0.0, 0);
    sim_close(&s);

    sim_open(&s, &dmc_finger_turn_hard);
    s.extra[0] = 0.2;
    s.extra[1] = 0.53 + 0.029;
    NEAR(sim_reward(&s, NULL, NULL), 1.0, 0);
    s.extra[1] = 0.53 + 0.031;
    NEAR(sim_reward(&s, NULL, NULL), 0.0, 0);
    NEAR(s.obs[4][0], 0.001, 1e-12);
    sim_close(&s);
}
END_TEST

START_TEST(test_ball_in_cup_rewards)
{
    sim s;
    sim_open(&s, &dmc_ball_in_cup_catch);
    /* qpos: cup_x, cup_z, ball_x, ball_z; the target's centre is at
     * (0, 0.55), the ball's rest position (0, 0.2). */
    double in[4] = {0, 0, 0, 0.35}, edge_in[4] = {0, 0, 0.024, 0.35};
    double edge_out[4] = {0, 0, 0.026, 0.35}, below[4] = {0, 0, 0, 0};
    double moved[4] = {0.1, -0.1, 0.1, 0.25};
    NEAR(sim_reward(&s, in, NULL), 1.0, 0);
    NEAR(sim_reward(&s, edge_in, NULL), 1.0, 0);
    NEAR(sim_reward(&s, edge_out, NULL), 0.0, 0);
    NEAR(sim_reward(&s, below, NULL), 0.0, 0);
    NEAR(sim_reward(&s, moved, NULL), 1.0, 0); /* the cup carries its target along */
    for (int k = 0; k < 4; k++)
        NEAR(s.obs[0][k], moved[k], 0);
    sim_close(&s);
}
END_TEST

/* The suite's physics facts survive in the bundled models. */
START_TEST(test_model_facts)
{
    sim s;
    sim_open(&s, &dmc_cartpole_swingup);
    const mjModel *m = s.dm.m;
    NEAR(m->opt.timestep, 0.01, 0);
    ck_assert_int_eq(m->opt.integrator, mjINT_RK4);
    ck_assert_int_eq(m->nu, 1);
    NEAR(m->actuator_gear[0], 10.0, 0);
    NEAR(m->body_mass[mj_name2id(m, mjOBJ_BODY, "cart")], 1.0, 1e-12);
    NEAR(m->body_mass[mj_name2id(m, mjOBJ_BODY, "pole_1")], 0.1, 1e-12);
    NEAR(m->jnt_range[1], 1.8, 0);
    ck_assert_int_eq(m->ncam, 2);
    sim_close(&s);

    sim_open(&s, &dmc_acrobot_swingup);
    m = s.dm.m;
    NEAR(m->actuator_gear[0], 2.0, 0);
    NEAR(m->dof_damping[0], 0.05, 0);
    ck_assert(m->opt.disableflags & mjDSBL_CONSTRAINT);
    NEAR(s.dm.param[0], 0.2, 0);
    sim_close(&s);

    sim_open(&s, &dmc_reacher_easy);
    m = s.dm.m;
    NEAR(m->jnt_range[3], 160 * M_PI / 180, 1e-9);
    ck_assert(!m->jnt_limited[0]);
    NEAR(m->actuator_gear[0], 0.05, 0);
    sim_close(&s);
}
END_TEST

/* suite_dir: a dm_control-layout folder loads; a missing one is named. */
START_TEST(test_suite_dir)
{
    char dir[] = "/tmp/crl-dmc-suite.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], common[256];
    snprintf(common, sizeof common, "%s/common", dir);
    ck_assert_int_eq(mkdir(common, 0700), 0);
    snprintf(path, sizeof path, "%s/common/materials.xml", dir);
    FILE *f = fopen(path, "w");
    fputs("<mujoco><asset><material name='self' rgba='1 0 0 1'/></asset></mujoco>", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/pendulum.xml", dir);
    f = fopen(path, "w");
    fputs("<mujoco model='pendulum'><include file='./common/materials.xml'/>"
          "<option timestep='0.01'/><worldbody><body name='pole' pos='0 0 .6'>"
          "<joint name='hinge' type='hinge' axis='0 1 0'/>"
          "<geom type='sphere' pos='0 0 .5' size='.05' mass='2' material='self'/></body></worldbody>"
          "<actuator><motor joint='hinge' ctrlrange='-1 1' ctrllimited='true'/></actuator></mujoco>",
          f);
    fclose(f);
    dmc_model dm;
    crl_error e = {0};
    EXPECT_OK(dmc_model_load(&dm, &dmc_pendulum_swingup, dir, &e), e);
    NEAR(dm.m->opt.timestep, 0.01, 0); /* the file's, not the bundled 0.02 */
    NEAR(dm.m->body_mass[dm.id[1]], 2.0, 1e-12);
    dmc_model_free(&dm);

    /* A file without the names the task needs. */
    e = (crl_error){0};
    ck_assert_int_eq(dmc_model_load(&dm, &dmc_cartpole_balance, dir, &e), CRL_E_CONFIG);
    EXPECT_MSG(e, CRL_E_CONFIG, "cartpole.xml");
    EXPECT_MSG(e, CRL_E_CONFIG, "suite_dir");
    ck_assert_ptr_null(dm.m);
    snprintf(path, sizeof path, "%s/cartpole.xml", dir);
    f = fopen(path, "w");
    fputs("<mujoco><worldbody><body name='cart'><joint name='slider' type='slide'/>"
          "<geom size='.1'/></body></worldbody></mujoco>",
          f);
    fclose(f);
    e = (crl_error){0};
    ck_assert_int_eq(dmc_model_load(&dm, &dmc_cartpole_balance, dir, &e), CRL_E_NOT_FOUND);
    EXPECT_MSG(e, CRL_E_NOT_FOUND, "hinge_1");
    ck_assert_ptr_null(dm.m);
    /* XML that does not compile. */
    f = fopen(path, "w");
    fputs("<mujoco><worldbody><body><geom type='nonsense'/></body></worldbody></mujoco>", f);
    fclose(f);
    e = (crl_error){0};
    ck_assert_int_eq(dmc_model_load(&dm, &dmc_cartpole_balance, dir, &e), CRL_E_CONFIG);
    EXPECT_MSG(e, CRL_E_CONFIG, "does not load");
    unlink(path);
    snprintf(path, sizeof path, "%s/pendulum.xml", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/common/materials.xml", dir);
    unlink(path);
    rmdir(common);
    rmdir(dir);
}
END_TEST

START_TEST(test_lookup)
{
    crl_error e = {0};
    ck_assert_ptr_eq(dmc_task_lookup("acrobot/swingup", &e), &dmc_acrobot_swingup);
    ck_assert_ptr_null(dmc_task_lookup("acrobot/swingupp", &e));
    EXPECT_MSG(e, CRL_E_NOT_FOUND, "did you mean 'acrobot/swingup'");
    e = (crl_error){0};
    ck_assert_ptr_null(dmc_task_lookup("cartpole", &e));
    EXPECT_MSG(e, CRL_E_NOT_FOUND, "'cartpole/swingup_sparse'");
    e = (crl_error){0};
    ck_assert_ptr_null(dmc_task_lookup("dog/run", &e));
    EXPECT_MSG(e, CRL_E_NOT_FOUND, "DOMAIN/TASK");
    ck_assert_ptr_null(strstr(e.message, "did you mean"));
    ck_assert_ptr_null(dmc_task_lookup(NULL, &e));
    for (size_t i = 0; i < dmc_task_count(); i++) {
        const dmc_task *t = dmc_task_at(i);
        char id[128];
        snprintf(id, sizeof id, "%s/%s", t->domain, t->name);
        ck_assert_str_eq(id, t->id);
    }
    ck_assert_ptr_null(dmc_task_at(dmc_task_count()));
}
END_TEST

/* ---- through the host --------------------------------------------------- */

static const char *const task_ids[] = {
    "cartpole/balance", "cartpole/balance_sparse", "cartpole/swingup", "cartpole/swingup_sparse",
    "pendulum/swingup", "acrobot/swingup",         "acrobot/swingup_sparse", "point_mass/easy",
    "reacher/easy",     "reacher/hard",            "cheetah/run",       "walker/stand",
    "walker/walk",      "walker/run",              "hopper/stand",      "hopper/hop",
    "finger/spin",      "finger/turn_easy",        "finger/turn_hard",  "ball_in_cup/catch"};
#define N_TASKS (sizeof task_ids / sizeof task_ids[0])

/* check_env_specs, batched and single; the layout is the suite's. */
START_TEST(test_check_specs)
{
    const char *id = task_ids[_i];
    const dmc_task *t = dmc_task_lookup(id, NULL);
    ck_assert_ptr_nonnull(t);
    crl_error e = {0};
    for (int batched = 0; batched < 2; batched++) {
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nnum_envs = %d\nseed = 3\n",
                 id, batched ? 3 : 0);
        henv h;
        EXPECT_OK(henv_open(&h, ini, &e), e);
        ck_assert_int_eq(crl_env_num(h.env), batched ? 3 : 1);
        /* Every suite task here runs 1000 control steps. */
        ck_assert_int_eq(crl_env_max_episode_steps(h.env), 1000);
        ck_assert_int_eq(crl_env_render_height(h.env), 240);
        ck_assert_int_eq(crl_env_render_width(h.env), 320);
        const crl_spec *obs = crl_env_observation_spec(h.env);
        for (int k = 0; k < t->n_obs; k++) {
            const crl_spec *leaf = crl_spec_composite_get(obs, t->obs[k].name);
            ck_assert_msg(leaf != NULL, "%s: no observation '%s'", id, t->obs[k].name);
            ck_assert_int_eq(crl_spec_dtype(leaf), CRL_F64);
            ck_assert_int_eq(crl_spec_shape(leaf)[crl_spec_ndim(leaf) - 1], t->obs[k].dim);
        }
        const crl_spec *act = crl_env_action_spec(h.env);
        ck_assert_ptr_nonnull(act);
        ck_assert_int_eq(crl_spec_dtype(act), CRL_F64);
        EXPECT_OK(crl_env_check_specs(h.env, 20, &e), e);
        henv_close(&h);
    }
}
END_TEST

/* The suite's control timestep per domain: one step advances MuJoCo's clock by it. */
START_TEST(test_control_timestep)
{
    static const struct {
        const char *domain;
        double dt;
    } facts[] = {{"cartpole", 0.01}, {"pendulum", 0.02}, {"acrobot", 0.01}, {"point_mass", 0.02},
                 {"reacher", 0.02},  {"cheetah", 0.01},  {"walker", 0.025}, {"hopper", 0.02},
                 {"finger", 0.02},   {"ball_in_cup", 0.02}};
    const char *id = task_ids[_i];
    double dt = 0;
    for (size_t k = 0; k < sizeof facts / sizeof facts[0]; k++)
        if (strncmp(id, facts[k].domain, strlen(facts[k].domain)) == 0 && id[strlen(facts[k].domain)] == '/')
            dt = facts[k].dt;
    ck_assert_msg(dt > 0, "no fact for %s", id);
    crl_error e = {0};
    char ini[256];
    snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nreturn_state = true\n", id);
    henv h;
    EXPECT_OK(henv_open(&h, ini, &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    NEAR(leaf_f64(td, "state")[0], 0.0, 0); /* cheetah's settling steps do not count */
    for (int k = 1; k <= 3; k++) {
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        NEAR(leaf_f64(crl_td_get_td(td, "next"), "state")[0], k * dt, 1e-9);
        crl_td *next = crl_env_step_mdp(h.env, td, &e);
        crl_td_unref(td);
        td = next;
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* The action entry of td (written by rand_action first, so it exists). */
static double *action_of(crl_env *env, crl_td *td)
{
    crl_error e = {0};
    EXPECT_OK(crl_env_rand_action(env, td, &e), e);
    return crl_tensor_data(crl_td_get(td, "action"));
}

static bool leaf_bool(crl_td *td, const char *key, int64_t i)
{
    crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no '%s'", key);
    return ((const uint8_t *)crl_tensor_data(t))[i] != 0;
}

/* Initial states follow the suite's distributions, per-env seeds decide them. */
START_TEST(test_initial_states)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = cartpole/balance\nnum_envs = 64\nseed = 1\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    const double *pos = leaf_f64(td, "position"), *vel = leaf_f64(td, "velocity");
    double spread = 0;
    for (int i = 0; i < 64; i++) {
        ck_assert(fabs(pos[3 * i]) <= 0.1);
        ck_assert(pos[3 * i + 1] >= cos(0.034) - 1e-12);
        ck_assert(fabs(vel[2 * i]) < 0.1);
        spread += fabs(pos[3 * i] - pos[0]);
    }
    ck_assert(spread > 0.1); /* envs draw from streams of their own */
    crl_td_unref(td);
    henv_close(&h);

    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = cartpole/swingup\nnum_envs = 16\n", &e), e);
    td = crl_env_reset(h.env, NULL, &e);
    pos = leaf_f64(td, "position");
    for (int i = 0; i < 16; i++) {
        ck_assert(fabs(pos[3 * i]) < 0.06);
        ck_assert(pos[3 * i + 1] < -0.99); /* hanging down */
    }
    crl_td_unref(td);
    henv_close(&h);

    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = reacher/easy\nnum_envs = 32\nreturn_state = true\n", &e), e);
    td = crl_env_reset(h.env, NULL, &e);
    const double *state = leaf_f64(td, "state");
    for (int i = 0; i < 32; i++) {
        const double *s = state + 7 * i + 1; /* time, qpos 2, qvel 2, target 2 */
        double r = hypot(s[4], s[5]);
        ck_assert(r >= 0.05 - 1e-12 && r <= 0.2 + 1e-12);
        ck_assert(fabs(s[1]) <= 160 * M_PI / 180);
    }
    crl_td_unref(td);
    henv_close(&h);

    /* finger/turn: the target lies on the spinner's circle (0.13 around (0.2, 0.4)). */
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = finger/turn_hard\nnum_envs = 16\nreturn_state = true\n", &e), e);
    td = crl_env_reset(h.env, NULL, &e);
    state = leaf_f64(td, "state");
    const double *tp = leaf_f64(td, "target_position");
    double angles = 0;
    for (int i = 0; i < 16; i++) {
        const double *s = state + 9 * i + 1; /* time, qpos 3, qvel 3, target 2 */
        NEAR(hypot(s[6] - 0.2, s[7] - 0.4), 0.13, 1e-12);
        NEAR(hypot(tp[2 * i], tp[2 * i + 1]), 0.13, 1e-12);
        angles += fabs(s[6] - state[7]);
    }
    ck_assert(angles > 0.1);
    crl_td_unref(td);
    henv_close(&h);

    /* ball_in_cup: the ball starts in its box below the cup. */
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = ball_in_cup/catch\nnum_envs = 16\n", &e), e);
    td = crl_env_reset(h.env, NULL, &e);
    pos = leaf_f64(td, "position");
    for (int i = 0; i < 16; i++) {
        ck_assert(pos[4 * i + 2] >= -0.2 && pos[4 * i + 2] <= 0.2);
        ck_assert(pos[4 * i + 3] >= 0.2 && pos[4 * i + 3] <= 0.5);
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* finger's observations against the physics state it comes from (time, qpos: proximal, distal, hinge,
 * qvel, extras): position[0:2] are the finger's joint angles and velocity the three joint velocities,
 * at every step, as the suite's get_observation reads them from its jointpos/jointvel sensors. */
START_TEST(test_finger_observations)
{
    static const char *const ids[] = { "finger/spin", "finger/turn_easy", "finger/turn_hard" };
    for (size_t k = 0; k < 3; k++) {
        henv h;
        crl_error e = {0};
        char ini[160];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nnum_envs = 3\nseed = 5\nreturn_state = true\n",
                 ids[k]);
        EXPECT_OK(henv_open(&h, ini, &e), e);
        crl_td *td = crl_env_reset(h.env, NULL, &e);
        ck_assert_ptr_nonnull(td);
        const int per = k == 0 ? 7 : 9; /* turn keeps the target's (x, z) after qvel */
        for (int t = 0; t < 30; t++) {
            ck_assert_int_eq(crl_env_rand_action(h.env, td, &e), CRL_OK);
            EXPECT_OK(crl_env_step(h.env, td, &e), e);
            const double *st = leaf_f64(td, "next.state");
            const double *pos = leaf_f64(td, "next.position"), *vel = leaf_f64(td, "next.velocity");
            for (int i = 0; i < 3; i++) {
                const double *q = st + per * i + 1, *qd = q + 3;
                ck_assert_msg(pos[4 * i] == q[0] && pos[4 * i + 1] == q[1], "%s step %d env %d: position %g %g, "
                              "joint angles %g %g", ids[k], t, i, pos[4 * i], pos[4 * i + 1], q[0], q[1]);
                for (int j = 0; j < 3; j++)
                    ck_assert_msg(vel[3 * i + j] == qd[j], "%s step %d env %d: velocity[%d] %g, qvel %g", ids[k], t,
                                  i, j, vel[3 * i + j], qd[j]);
            }
            crl_td *nx = crl_env_step_mdp(h.env, td, &e);
            ck_assert_ptr_nonnull(nx);
            crl_td_unref(td);
            td = nx;
        }
        crl_td_unref(td);
        henv_close(&h);
    }
}
END_TEST

/* The same seed replays the same episode; another seed does not. */
START_TEST(test_seeding)
{
    crl_error e = {0};
    double first[2][40];
    for (int run = 0; run < 3; run++) {
        char ini[200];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = acrobot/swingup\nseed = %d\n",
                 run == 2 ? 8 : 7);
        henv h;
        EXPECT_OK(henv_open(&h, ini, &e), e);
        crl_td *td = crl_env_reset(h.env, NULL, &e);
        double got[40];
        for (int k = 0; k < 10; k++) {
            action_of(h.env, td)[0] = 0.5;
            EXPECT_OK(crl_env_step(h.env, td, &e), e);
            crl_td *next = crl_td_get_td(td, "next");
            memcpy(got + 4 * k, leaf_f64(next, "orientations"), 4 * sizeof(double));
        }
        if (run < 2)
            memcpy(first[run], got, sizeof got);
        else
            ck_assert(memcmp(first[0], got, sizeof got) != 0);
        crl_td_unref(td);
        henv_close(&h);
    }
    ck_assert(memcmp(first[0], first[1], sizeof first[0]) == 0);
}
END_TEST

/* per_env.id mixes tasks of one domain (same specs) in a batch: env i is the single env of its task seeded
 * with element i of the seed chain, step for step. */
START_TEST(test_per_env_ids)
{
    static const char *const ids[2] = {"cartpole/balance", "cartpole/swingup"};
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nnum_envs = 2\nexecutor = serial\n"
                            "per_env.id = cartpole/balance, cartpole/swingup\n", &e), e);
    ck_assert_str_eq(crl_env_id(h.env), "cartpole/balance, cartpole/swingup");
    crl_env_set_seed(h.env, 5);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    double pos[6][2][3];
    for (int k = 0; k < 6; k++) {
        double *a = action_of(h.env, td);
        a[0] = 0.5;
        a[1] = -0.25;
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        memcpy(pos[k], leaf_f64(crl_td_get_td(td, "next"), "position"), sizeof pos[k]);
        crl_td *nx = crl_env_step_mdp(h.env, td, &e);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    henv_close(&h);
    /* balance starts near upright, swingup hanging down: the ids really differ */
    ck_assert(pos[0][0][1] > 0.9 && pos[0][1][1] < -0.9);
    uint64_t seed = 5;
    for (int i = 0; i < 2; i++, seed = crl_seed_next(seed)) {
        char ini[128];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\n", ids[i]);
        EXPECT_OK(henv_open(&h, ini, &e), e);
        crl_env_set_seed(h.env, seed);
        td = crl_env_reset(h.env, NULL, &e);
        for (int k = 0; k < 6; k++) {
            action_of(h.env, td)[0] = i ? -0.25 : 0.5;
            EXPECT_OK(crl_env_step(h.env, td, &e), e);
            ck_assert_msg(memcmp(leaf_f64(crl_td_get_td(td, "next"), "position"), pos[k][i], sizeof pos[k][i]) == 0,
                          "env %d (%s) differs from a single %s env at step %d", i, ids[i], ids[i], k);
            crl_td *nx = crl_env_step_mdp(h.env, td, &e);
            crl_td_unref(td);
            td = nx;
        }
        crl_td_unref(td);
        henv_close(&h);
    }
    /* Tasks of other domains have other specs: a config error naming both ids and the spec. */
    ck_assert_int_eq(henv_open(&h, "[env]\nbackend = dm_control\nnum_envs = 2\nexecutor = serial\n"
                                   "per_env.id = cartpole/balance, acrobot/swingup\n", &e),
                     CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "(id acrobot/swingup) differs from that of env 0 (id cartpole/balance)") &&
                      strstr(e.message, "per_env.id"),
                  "%s", e.message);
    henv_close(&h);
}
END_TEST

/* The time limit truncates at step 1000 exactly; nothing terminates. */
START_TEST(test_time_limit)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = cartpole/balance\nreturn_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    for (int k = 1; k <= 1000; k++) {
        action_of(h.env, td)[0] = 0.0;
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        crl_td *next = crl_td_get_td(td, "next");
        ck_assert(!leaf_bool(next, "terminated", 0));
        ck_assert_msg(leaf_bool(next, "truncated", 0) == (k == 1000), "step %d", k);
        double r = leaf_f64(next, "reward")[0];
        ck_assert(r >= 0.0 && r <= 1.0);
        NEAR(leaf_f64(next, "state")[0], k * 0.01, 1e-9); /* one 10 ms physics step per step */
        if (k < 1000) {
            crl_td *stepped = crl_env_step_mdp(h.env, td, &e);
            ck_assert_ptr_nonnull(stepped);
            crl_td_unref(td);
            td = stepped;
        }
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* A state written out replays the same trajectory from a reset. */
START_TEST(test_reset_from_state)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = reacher/hard\nnum_envs = 2\nseed = 4\nreturn_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    double *act = action_of(h.env, td);
    for (int k = 0; k < 4; k++)
        act[k] = 0.3 * (k + 1) - 0.5;
    EXPECT_OK(crl_env_step(h.env, td, &e), e);
    crl_td *next = crl_td_get_td(td, "next");
    double saved[14], after[4], again[4];
    memcpy(saved, leaf_f64(next, "state"), sizeof saved);
    crl_td *cur = crl_env_step_mdp(h.env, td, &e);
    memcpy(action_of(h.env, cur), act, 4 * sizeof(double));
    EXPECT_OK(crl_env_step(h.env, cur, &e), e);
    memcpy(after, leaf_f64(crl_td_get_td(cur, "next"), "to_target"), sizeof after);

    crl_td *st = crl_td_clone(td, &e);
    ck_assert_ptr_nonnull(st);
    memcpy(crl_tensor_data(crl_td_get(st, "state")), saved, sizeof saved);
    crl_td *back = crl_env_reset_from_state(h.env, st, &e);
    ck_assert_msg(back != NULL, "%s", e.message);
    memcpy(action_of(h.env, back), act, 4 * sizeof(double));
    EXPECT_OK(crl_env_step(h.env, back, &e), e);
    memcpy(again, leaf_f64(crl_td_get_td(back, "next"), "to_target"), sizeof again);
    for (int k = 0; k < 4; k++)
        NEAR(again[k], after[k], 0);

    /* A non-finite state changes nothing and names the entry. */
    double *bad = crl_tensor_data(crl_td_get(st, "state"));
    bad[8] = NAN;
    crl_td *none = crl_env_reset_from_state(h.env, st, &e);
    ck_assert_ptr_null(none);
    EXPECT_MSG(e, CRL_E_INVALID, "state[1]");
    crl_td_unref(back);
    crl_td_unref(st);
    crl_td_unref(cur);
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* Divergence is an error naming the env, or (configured) a terminated flag.
 * A velocity of 1e12 (finite, so a valid state) is past MuJoCo's bound. */
START_TEST(test_divergence)
{
    for (int mode = 0; mode < 2; mode++) {
        crl_error e = {0};
        char ini[256];
        snprintf(ini, sizeof ini,
                 "[env]\nbackend = dm_control\nid = pendulum/swingup\nnum_envs = 2\nreturn_state = true\n%s",
                 mode ? "on_divergence = terminate\n" : "");
        henv h;
        EXPECT_OK(henv_open(&h, ini, &e), e);
        crl_td *td = crl_env_reset(h.env, NULL, &e);
        ck_assert_ptr_nonnull(td);
        double *state = crl_tensor_data(crl_td_get(td, "state")); /* time, qpos, qvel per env */
        state[5] = 1e12;
        crl_td *back = crl_env_reset_from_state(h.env, td, &e);
        ck_assert_msg(back != NULL, "%s", e.message);
        action_of(h.env, back)[0] = 0.1;
        int rc = crl_env_step(h.env, back, &e);
        if (mode == 0) {
            ck_assert_int_eq(rc, CRL_E_RUNTIME);
            EXPECT_MSG(e, CRL_E_RUNTIME, "env 1 diverged");
            EXPECT_MSG(e, CRL_E_RUNTIME, "on_divergence = terminate");
        } else {
            EXPECT_OK(rc, e);
            crl_td *next = crl_td_get_td(back, "next");
            ck_assert(!leaf_bool(next, "terminated", 0));
            ck_assert(leaf_bool(next, "terminated", 1));
            ck_assert(leaf_bool(next, "done", 1));
            NEAR(leaf_f64(next, "reward")[1], 0.0, 0);
            const double *o = leaf_f64(next, "orientation");
            for (int k = 0; k < 4; k++)
                ck_assert(isfinite(o[k]));
            ck_assert(isfinite(leaf_f64(next, "velocity")[1]));
        }
        crl_td_unref(back);
        crl_td_unref(td);
        henv_close(&h);
    }
}
END_TEST

/* domain + task name the env; mistakes are config errors. */
START_TEST(test_config)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\ndomain = acrobot\ntask = swingup\n", &e), e);
    ck_assert_str_eq(crl_env_id(h.env), "acrobot/swingup");
    henv_close(&h);
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = acrobot/swingup\ndomain = acrobot\ntask = swingup\n", &e), e);
    henv_close(&h);

    struct {
        const char *ini;
        int code;
        const char *needle;
    } bad[] = {
        {"id = cartpole/balanse\n", CRL_E_NOT_FOUND, "did you mean 'cartpole/balance'"},
        {"domain = acrobot\n", CRL_E_CONFIG, "id is required"},
        {"id = acrobot/swingup\ndomain = acrobot\n", CRL_E_CONFIG, "without task"},
        {"id = acrobot/swingup\ndomain = cartpole\ntask = swingup\n", CRL_E_CONFIG, "drop one"},
        {"id = acrobot/swingup\ncamera_id = 2\n", CRL_E_CONFIG, "has 2 camera(s)"},
        {"id = acrobot/swingup\nheight = 0\n", CRL_E_CONFIG, "height"},
        {"id = acrobot/swingup\non_divergence = ignore\n", CRL_E_CONFIG, "on_divergence"},
        {"id = acrobot/swingup\nwidht = 10\n", CRL_E_CONFIG, "did you mean 'width'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\n%s", bad[k].ini);
        e = (crl_error){0};
        ck_assert_int_ne(henv_open(&h, ini, &e), CRL_OK);
        EXPECT_MSG(e, bad[k].code, bad[k].needle);
        henv_close(&h);
    }
    /* The plugin section's suite_dir, when it names nothing. */
    e = (crl_error){0};
    ck_assert_int_ne(henv_open(&h, "[plugin.dm_control]\nsuite_dir = /nonexistent/suite\n"
                                   "[env]\nbackend = dm_control\nid = pendulum/swingup\n", &e),
                     CRL_OK);
    EXPECT_MSG(e, CRL_E_CONFIG, "/nonexistent/suite/pendulum.xml");
    henv_close(&h);
}
END_TEST

/* The backend's own contract: bind and step refuse to run out of order. */
START_TEST(test_ops_order)
{
    crl_error e = {0};
    crl_host *host = crl_host_new(NULL, &e);
    EXPECT_OK(crl_host_load_name(host, "dm_control", &e), e);
    const crl_component *c = crl_host_find(host, CRL_KIND_ENV, "dm_control");
    ck_assert_ptr_nonnull(c);
    const crl_env_ops *ops = c->ops;
    const char *const *ids = ops->list();
    size_t n = 0;
    while (ids[n])
        n++;
    ck_assert_uint_eq(n, dmc_task_count());
    crl_env_specs sp = {.struct_size = sizeof sp};
    void *env = NULL;
    ck_assert_int_eq(ops->make("acrobot/nope", 1, NULL, &sp, &env, &e), CRL_E_NOT_FOUND);
    ck_assert_ptr_null(env);
    ck_assert_int_eq(ops->make("acrobot/swingup", 0, NULL, &sp, &env, &e), CRL_E_INVALID);
    EXPECT_OK(ops->make("acrobot/swingup", 2, NULL, &sp, &env, &e), e);
    ck_assert_int_eq(sp.max_episode_steps, 1000);
    ck_assert_int_eq(ops->step(env, &e), CRL_E_INVALID);
    EXPECT_MSG(e, CRL_E_INVALID, "before bind");
    ck_assert_int_eq(ops->reset(env, NULL, NULL, false, &e), CRL_E_INVALID);
    uint8_t frame[3];
    ck_assert_int_eq(ops->render(env, 0, frame, &e), CRL_E_INVALID);
    /* A buffer TensorDict missing a leaf. */
    int64_t batch[1] = {2};
    crl_td *bufs = crl_td_new(1, batch, &e);
    ck_assert_int_eq(ops->bind(env, bufs, &e), CRL_E_NOT_FOUND);
    EXPECT_MSG(e, CRL_E_NOT_FOUND, "orientations");
    crl_td_unref(bufs);
    ops->close(env);
    ops->close(NULL);
    crl_spec_unref(sp.observation);
    crl_spec_unref(sp.action);
    crl_spec_unref(sp.reward);
    crl_spec_unref(sp.done);
    crl_spec_unref(sp.state);
    crl_host_free(host);
}
END_TEST

static Suite *dm_control_suite(void)
{
    Suite *s = suite_create("dm_control");
    TCase *tc = tcase_create("rewards");
    tcase_add_test(tc, test_sigmoids);
    tcase_add_test(tc, test_tolerance);
    tcase_add_test(tc, test_small_control_and_cached_scale);
    suite_add_tcase(s, tc);
    tc = tcase_create("tasks");
    tcase_add_test(tc, test_cartpole_rewards);
    tcase_add_test(tc, test_pendulum_rewards);
    tcase_add_test(tc, test_acrobot_rewards);
    tcase_add_test(tc, test_point_mass_rewards);
    tcase_add_test(tc, test_reacher_rewards);
    tcase_add_test(tc, test_cheetah_rewards);
    tcase_add_test(tc, test_walker_rewards);
    tcase_add_test(tc, test_hopper_rewards);
    tcase_add_test(tc, test_finger_rewards);
    tcase_add_test(tc, test_finger_observations);
    tcase_add_test(tc, test_ball_in_cup_rewards);
    tcase_add_test(tc, test_model_facts);
    tcase_add_test(tc, test_suite_dir);
    tcase_add_test(tc, test_lookup);
    suite_add_tcase(s, tc);
    tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_check_specs, 0, N_TASKS);
    tcase_add_loop_test(tc, test_control_timestep, 0, N_TASKS);
    tcase_add_test(tc, test_initial_states);
    tcase_add_test(tc, test_seeding);
    tcase_add_test(tc, test_time_limit);
    tcase_add_test(tc, test_per_env_ids);
    tcase_add_test(tc, test_reset_from_state);
    tcase_add_test(tc, test_divergence);
    tcase_add_test(tc, test_config);
    tcase_add_test(tc, test_ops_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dm_control_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
