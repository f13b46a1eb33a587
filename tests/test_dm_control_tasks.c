/* Check suite for the dm_control tasks beyond the first twenty (cartpole's two and three poles,
 * point_mass/hard, humanoid, swimmer, fish, quadruped (escape's terrain too), manipulator/bring_ball, stacker,
 * lqr): specs,
 * observations and rewards at hand-set states against values worked out from the model, initial states,
 * determinism per seed, and a rollout from the suite's own XML (tests/dm_control-suite) equal to one from
 * the bundled model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/env_backend.h>
#include <crl/host.h>

#include "dmc-sim.h"


#define SUITE_DIR TEST_SRCDIR "/dm_control-suite"

#define NEAR(a, b, tol) ck_assert_msg(fabs((a) - (b)) <= (tol), "%s = %.17g, expected %.17g", #a, \
                                      (double)(a), (double)(b))

#define EXPECT_MSG(e, want, needle)                                                              \
    do {                                                                                         \
        ck_assert_msg((e).code == (want), "got %s, expected %s (%s)", crl_status_name((e).code), \
                      crl_status_name(want), (e).message);                                       \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'",         \
                      (e).message, (needle));                                                    \
    } while (0)

/* The new tasks with the suite's control timestep and observation layout. */
static const struct {
    const char *id;
    double dt;
    int n_obs;
    const char *names[DMC_MAX_OBS];
    int dims[DMC_MAX_OBS];
} tasks[] = {
    {"cartpole/two_poles", 0.01, 2, {"position", "velocity"}, {5, 3}},
    {"cartpole/three_poles", 0.01, 2, {"position", "velocity"}, {7, 4}},
    {"point_mass/hard", 0.02, 2, {"position", "velocity"}, {2, 2}},
    {"humanoid/stand", 0.025, 6,
     {"joint_angles", "head_height", "extremities", "torso_vertical", "com_velocity", "velocity"},
     {21, 1, 12, 3, 3, 27}},
    {"humanoid/walk", 0.025, 6,
     {"joint_angles", "head_height", "extremities", "torso_vertical", "com_velocity", "velocity"},
     {21, 1, 12, 3, 3, 27}},
    {"humanoid/run", 0.025, 6,
     {"joint_angles", "head_height", "extremities", "torso_vertical", "com_velocity", "velocity"},
     {21, 1, 12, 3, 3, 27}},
    {"swimmer/swimmer6", 0.03, 3, {"joints", "to_target", "body_velocities"}, {5, 2, 18}},
    {"swimmer/swimmer15", 0.03, 3, {"joints", "to_target", "body_velocities"}, {14, 2, 45}},
    {"fish/upright", 0.04, 3, {"joint_angles", "upright", "velocity"}, {7, 1, 13}},
    {"fish/swim", 0.04, 4, {"joint_angles", "upright", "target", "velocity"}, {7, 1, 3, 13}},
    {"quadruped/walk", 0.02, 5, {"egocentric_state", "torso_velocity", "torso_upright", "imu", "force_torque"},
     {44, 3, 1, 6, 24}},
    {"quadruped/run", 0.02, 5, {"egocentric_state", "torso_velocity", "torso_upright", "imu", "force_torque"},
     {44, 3, 1, 6, 24}},
    {"quadruped/fetch", 0.02, 7,
     {"egocentric_state", "torso_velocity", "torso_upright", "imu", "force_torque", "ball_state",
      "target_position"},
     {44, 3, 1, 6, 24, 9, 3}},
    {"quadruped/escape", 0.02, 7,
     {"egocentric_state", "torso_velocity", "torso_upright", "imu", "force_torque", "origin", "rangefinder"},
     {44, 3, 1, 6, 24, 3, 20}},
    {"manipulator/bring_ball", 0.01, 7,
     {"arm_pos", "arm_vel", "touch", "hand_pos", "object_pos", "object_vel", "target_pos"},
     {16, 8, 5, 4, 4, 3, 4}},
    {"stacker/stack_2", 0.01, 7, {"arm_pos", "arm_vel", "touch", "hand_pos", "box_pos", "box_vel", "target_pos"},
     {16, 8, 5, 4, 8, 6, 2}},
    {"stacker/stack_4", 0.01, 7, {"arm_pos", "arm_vel", "touch", "hand_pos", "box_pos", "box_vel", "target_pos"},
     {16, 8, 5, 4, 16, 12, 2}},
    {"lqr/lqr_2_1", 0.03, 2, {"position", "velocity"}, {2, 2}},
    {"lqr/lqr_6_2", 0.03, 2, {"position", "velocity"}, {6, 6}},
};
#define N_NEW (sizeof tasks / sizeof tasks[0])

/* ---- a task's model and one mjData, without the host ---- */

/* qpos and qvel set by hand (NULL: the model's defaults, zero), forward, the task's observation; the
 * task's reward is returned. */
static double sim_at(sim *s, const double *qpos, const double *qvel, const double *ctrl)
{
    const mjModel *m = s->dm.m;
    mj_resetData(m, s->d);
    for (int k = 0; qpos && k < m->nq; k++)
        s->d->qpos[k] = qpos[k];
    for (int k = 0; qvel && k < m->nv; k++)
        s->d->qvel[k] = qvel[k];
    for (int k = 0; ctrl && k < m->nu; k++)
        s->d->ctrl[k] = ctrl[k];
    if (s->dm.task->apply)
        s->dm.task->apply(&s->dm, s->extra);
    mj_forward(m, s->d);
    s->dm.task->observe(&s->dm, s->d, s->extra, s->out);
    return s->dm.task->reward(&s->dm, s->d, s->extra);
}

/* ---- specs through the host ---- */

START_TEST(test_specs)
{
    const char *id = tasks[_i].id;
    crl_error e = {0};
    for (int batched = 0; batched < 2; batched++) {
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nnum_envs = %d\nseed = 3\n", id,
                 batched ? 3 : 0);
        henv h;
        EXPECT_OK(henv_open(&h, ini, &e), e);
        /* lqr's time limit is the suite's infinity: no step limit */
        ck_assert_int_eq(crl_env_max_episode_steps(h.env), strncmp(id, "lqr/", 4) == 0 ? 0 : 1000);
        const crl_spec *obs = crl_env_observation_spec(h.env);
        ck_assert_int_eq(crl_spec_composite_len(obs), tasks[_i].n_obs);
        for (int k = 0; k < tasks[_i].n_obs; k++) {
            const crl_spec *leaf = crl_spec_composite_get(obs, tasks[_i].names[k]);
            ck_assert_msg(leaf != NULL, "%s: no observation '%s'", id, tasks[_i].names[k]);
            ck_assert_int_eq(crl_spec_dtype(leaf), CRL_F64);
            /* arm_pos is the suite's [8, 2] matrix, box_pos [boxes, 4]; every other entry a vector */
            int cols = strcmp(tasks[_i].names[k], "arm_pos") == 0 ? 2
                       : strcmp(tasks[_i].names[k], "box_pos") == 0 ? 4 : 0;
            bool matrix = cols != 0;
            int64_t nd = crl_spec_ndim(leaf);
            const int64_t *sh = crl_spec_shape(leaf);
            if (matrix) {
                ck_assert_int_eq(sh[nd - 2], tasks[_i].dims[k] / cols);
                ck_assert_int_eq(sh[nd - 1], cols);
            } else {
                ck_assert_int_eq(sh[nd - 1], tasks[_i].dims[k]);
            }
            if (batched) {
                ck_assert_int_eq(nd, matrix ? 3 : 2);
                ck_assert_int_eq(sh[0], 3);
            }
        }
        EXPECT_OK(crl_env_check_specs(h.env, 10, &e), e);
        henv_close(&h);
    }
}
END_TEST

/* One step advances MuJoCo's clock by the suite's control timestep. */
START_TEST(test_control_timestep)
{
    crl_error e = {0};
    char ini[256];
    snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nreturn_state = true\n", tasks[_i].id);
    henv h;
    EXPECT_OK(henv_open(&h, ini, &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    NEAR(leaf_f64(td, "state")[0], 0.0, 0);
    for (int k = 1; k <= 3; k++) {
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        NEAR(leaf_f64(crl_td_get_td(td, "next"), "state")[0], k * tasks[_i].dt, 1e-9);
        crl_td *next = crl_env_step_mdp(h.env, td, &e);
        crl_td_unref(td);
        td = next;
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* Two envs seeded alike replay the same rollout under the same actions (all leaves, rewards, states);
 * another seed gives another one. */
START_TEST(test_deterministic)
{
    enum { STEPS = 20, MAXW = 128 };
    static double run[3][STEPS][MAXW];
    crl_error e = {0};
    int width = 0;
    for (int r = 0; r < 3; r++) {
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nseed = %d\nreturn_state = true\n",
                 tasks[_i].id, r == 2 ? 12 : 11);
        henv h;
        EXPECT_OK(henv_open(&h, ini, &e), e);
        crl_env_set_seed(h.env, r == 2 ? 12 : 11);
        crl_td *td = crl_env_reset(h.env, NULL, &e);
        ck_assert_ptr_nonnull(td);
        for (int k = 0; k < STEPS; k++) {
            EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
            double *a = crl_tensor_data(crl_td_get(td, "action"));
            int64_t nu = crl_tensor_numel(crl_td_get(td, "action"));
            for (int64_t j = 0; j < nu; j++)
                a[j] = 0.8 * sin(0.7 * k + j); /* the same actions in every run, inside every task's range */
            EXPECT_OK(crl_env_step(h.env, td, &e), e);
            crl_td *next = crl_td_get_td(td, "next");
            int w = 0;
            for (int o = 0; o < tasks[_i].n_obs; o++) {
                const double *v = leaf_f64(next, tasks[_i].names[o]);
                for (int j = 0; j < tasks[_i].dims[o]; j++)
                    run[r][k][w++] = v[j];
            }
            run[r][k][w++] = leaf_f64(next, "reward")[0];
            crl_tensor *st = crl_td_get(next, "state");
            const double *s = crl_tensor_data(st);
            for (int64_t j = 0; j < crl_tensor_numel(st) && w < MAXW; j++)
                run[r][k][w++] = s[j];
            width = w;
            crl_td *nx = crl_env_step_mdp(h.env, td, &e);
            crl_td_unref(td);
            td = nx;
        }
        crl_td_unref(td);
        henv_close(&h);
    }
    for (int k = 0; k < STEPS; k++)
        for (int j = 0; j < width; j++)
            ck_assert_msg(run[0][k][j] == run[1][k][j], "%s: step %d entry %d differs between equal seeds",
                          tasks[_i].id, k, j);
    ck_assert_msg(memcmp(run[0], run[2], sizeof run[0]) != 0, "%s: seeds 11 and 12 gave the same rollout",
                  tasks[_i].id);
}
END_TEST

/* ---- the suite's own XML ---- */

/* A rollout the way the backend runs one (reset, forward, init, forward, then control steps), without
 * the host: positions, velocities, observations and rewards of every step into trace. */
static int rollout(const dmc_task *t, const char *dir, int steps, double *trace, int cap)
{
    sim s;
    sim_open_dir(&s, t, dir);
    const mjModel *m = s.dm.m;
    mjData *d = s.d;
    crl_rng rng;
    crl_rng_init(&rng, 77, 0);
    if (t->seed)
        t->seed(&s.dm, s.extra, &rng);
    mj_resetData(m, d);
    mj_forward(m, d);
    t->init(&s.dm, d, s.extra, &rng);
    if (t->apply)
        t->apply(&s.dm, s.extra);
    mj_forward(m, d);
    double ctrl_dt = t->control_timestep > 0 ? t->control_timestep : m->opt.timestep;
    int n_sub = (int)lround(ctrl_dt / m->opt.timestep);
    int w = 0;
    for (int k = 0; k < steps; k++) {
        for (int j = 0; j < m->nu; j++)
            d->ctrl[j] = 0.8 * sin(0.3 * k + 1.7 * j);
        if (t->apply)
            t->apply(&s.dm, s.extra);
        dmc_physics_step(m, d, n_sub);
        t->observe(&s.dm, d, s.extra, s.out);
        for (int j = 0; j < m->nq && w < cap; j++)
            trace[w++] = d->qpos[j];
        for (int j = 0; j < m->nv && w < cap; j++)
            trace[w++] = d->qvel[j];
        for (int o = 0; o < t->n_obs; o++)
            for (int j = 0; j < t->obs[o].dim && w < cap; j++)
                trace[w++] = s.obs[o][j];
        if (w < cap)
            trace[w++] = t->reward(&s.dm, d, s.extra);
    }
    ck_assert_int_lt(w, cap);
    sim_close(&s);
    return w;
}

START_TEST(test_suite_xml_rollout)
{
    enum { STEPS = 60, CAP = STEPS * 160 };
    static double bundled[CAP], suite[CAP];
    const dmc_task *t = dmc_task_lookup(tasks[_i].id, NULL);
    ck_assert_ptr_nonnull(t);
    /* The models themselves agree in size and in what the physics reads. */
    sim a, b;
    sim_open(&a, t);
    sim_open_dir(&b, t, SUITE_DIR);
    ck_assert_int_eq(a.dm.m->nbody, b.dm.m->nbody);
    ck_assert_int_eq(a.dm.m->ngeom, b.dm.m->ngeom);
    ck_assert_int_eq(a.dm.m->nq, b.dm.m->nq);
    ck_assert_int_eq(a.dm.m->nsensordata, b.dm.m->nsensordata);
    ck_assert_int_eq(a.dm.m->ncam, b.dm.m->ncam);
    ck_assert(memcmp(a.dm.m->body_mass, b.dm.m->body_mass, sizeof(double) * (size_t)a.dm.m->nbody) == 0);
    ck_assert(memcmp(a.dm.m->geom_size, b.dm.m->geom_size, 3 * sizeof(double) * (size_t)a.dm.m->ngeom) == 0);
    ck_assert(memcmp(a.dm.m->cam_pos, b.dm.m->cam_pos, 3 * sizeof(double) * (size_t)a.dm.m->ncam) == 0);
    sim_close(&a);
    sim_close(&b);
    int n = rollout(t, NULL, STEPS, bundled, CAP);
    int n2 = rollout(t, SUITE_DIR, STEPS, suite, CAP);
    ck_assert_int_eq(n, n2);
    for (int k = 0; k < n; k++)
        ck_assert_msg(bundled[k] == suite[k], "%s: entry %d: bundled %.17g, suite XML %.17g", t->id, k,
                      bundled[k], suite[k]);
}
END_TEST

/* ---- cartpole with a chain of poles ---- */

START_TEST(test_cartpole_poles)
{
    for (int n = 2; n <= 3; n++) {
        sim s;
        sim_open(&s, n == 2 ? &dmc_cartpole_two_poles : &dmc_cartpole_three_poles);
        const mjModel *m = s.dm.m;
        /* The suite's generated model: the chain, the floor below it, the cameras backed away. */
        ck_assert_int_eq(m->nbody, 2 + n);
        ck_assert_int_eq(m->nv, 1 + n);
        char name[16];
        snprintf(name, sizeof name, "pole_%d", n);
        int last = mj_name2id(m, mjOBJ_BODY, name);
        ck_assert_int_eq(last, 1 + n);
        NEAR(m->body_pos[3 * last + 2], 1.0, 0);
        NEAR(m->body_mass[last], 0.1, 1e-12);
        snprintf(name, sizeof name, "hinge_%d", n);
        ck_assert_int_ge(mj_name2id(m, mjOBJ_JOINT, name), 0);
        NEAR(m->geom_pos[3 * mj_name2id(m, mjOBJ_GEOM, "floor") + 2], 1.0 - n - 0.05, 1e-12);
        NEAR(m->cam_pos[1], -1.0 - 2 * n, 0);
        NEAR(m->cam_pos[3 + 1], -2.0 * n, 0);

        /* Angles hand-set: pole k's absolute angle is the sum of the hinges up to it. */
        double q[4] = {0.3, 0.2, -0.5, 0.4}, v[4] = {0.1, 0.2, 0.3, 0.4};
        sim_at(&s, q, v, NULL);
        NEAR(s.obs[0][0], 0.3, 0);
        double angle = 0;
        for (int k = 0; k < n; k++) {
            angle += q[1 + k];
            NEAR(s.obs[0][1 + 2 * k], cos(angle), 1e-12);
            NEAR(s.obs[0][2 + 2 * k], sin(angle), 1e-12);
        }
        for (int k = 0; k <= n; k++)
            NEAR(s.obs[1][k], v[k], 0);

        /* Rewards: all upright and still at the centre; the first pole hanging (the chain with it);
         * the last pole bent flat (uprightness (1 + 1/2) / 2 with two poles, (1 + 1 + 1/2) / 3 with
         * three); a fast last hinge ((1 + 0.1) / 2). */
        double up[4] = {0}, down[4] = {0, M_PI}, bent[4] = {0}, still[4] = {0}, fast[4] = {0};
        NEAR(sim_at(&s, up, still, NULL), 1.0, 1e-12);
        NEAR(sim_at(&s, down, still, NULL), 0.0, 1e-12);
        bent[n] = M_PI / 2;
        NEAR(sim_at(&s, bent, still, NULL), (n - 1 + 0.5) / n, 1e-12);
        fast[n] = 5.0;
        NEAR(sim_at(&s, up, fast, NULL), 0.55, 1e-12);
        double full[1] = {1.0};
        NEAR(sim_at(&s, up, still, full), 0.8, 1e-12);
        /* 2 m off centre is the centring margin: (1 + 0.1) / 2. */
        double edge[4] = {2.0};
        NEAR(sim_at(&s, edge, still, NULL), 0.55, 1e-12);

        /* Initial states: the first pole hanging, the others nearly straight on it. */
        crl_rng rng;
        for (int seed = 0; seed < 20; seed++) {
            crl_rng_init(&rng, (uint64_t)seed, 0);
            mj_resetData(m, s.d);
            s.dm.task->init(&s.dm, s.d, s.extra, &rng);
            ck_assert(fabs(s.d->qpos[0]) < 0.06);
            ck_assert(fabs(s.d->qpos[1] - M_PI) < 0.06);
            for (int k = 2; k <= n; k++)
                ck_assert(fabs(s.d->qpos[k]) < 0.6);
        }
        sim_close(&s);
    }
}
END_TEST

/* A suite_dir cartpole.xml the generated model cannot be made from is a config error naming the
 * problem: not XML, no pole to grow the chain from, an include that is not there. */
START_TEST(test_generated_bad_suite)
{
    char dir[] = "/tmp/crl-dmc-gen.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/cartpole.xml", dir);
    static const struct {
        const char *xml;
        const char *needle;
    } bad[] = {
        {"<mujoco><worldbody><body name='cart'>", "not well-formed"},
        {"<mujoco><worldbody><body name='cart'><geom size='.1'/></body></worldbody></mujoco>", "first pole"},
        {"<mujoco><include file='./common/none.xml'/><worldbody/></mujoco>", "none.xml"},
        {"<robot/>", "<mujoco> root"},
        {"<mujoco><worldbody><camera name='c'/><body name='cart'><body name='pole_1'><geom size='.1'/>"
         "</body></body></worldbody></mujoco>",
         "floor"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(bad[k].xml, f);
        fclose(f);
        dmc_model dm;
        crl_error e = {0};
        ck_assert_int_eq(dmc_model_load(&dm, &dmc_cartpole_two_poles, dir, &e), CRL_E_CONFIG);
        EXPECT_MSG(e, CRL_E_CONFIG, bad[k].needle);
        ck_assert_ptr_null(dm.m);
    }
    /* A FIFO in place of the model is refused, not read. */
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    dmc_model dm;
    crl_error e = {0};
    ck_assert_int_eq(dmc_model_load(&dm, &dmc_cartpole_three_poles, dir, &e), CRL_E_CONFIG);
    EXPECT_MSG(e, CRL_E_CONFIG, "FIFO");
    unlink(path);
    /* No file at all. */
    e = (crl_error){0};
    ck_assert_int_eq(dmc_model_load(&dm, &dmc_cartpole_three_poles, dir, &e), CRL_E_CONFIG);
    EXPECT_MSG(e, CRL_E_CONFIG, "cartpole.xml");
    /* lqr's generated chain: no worldbody to grow it in, or a model already holding other joints. */
    snprintf(path, sizeof path, "%s/lqr.xml", dir);
    static const struct {
        const char *xml;
        const char *needle;
    } bad_lqr[] = {
        {"<mujoco><option timestep='.03'/></mujoco>", "worldbody"},
        {"<mujoco><default><geom type='sphere' size='.1'/></default><worldbody><body><joint type='hinge'/>"
         "<geom/></body></worldbody></mujoco>",
         "chain of 6 slide joints"},
        /* the chain's own joints made hinges by the model's defaults */
        {"<mujoco><default><joint type='hinge'/><geom type='sphere' size='.1'/></default><worldbody/></mujoco>",
         "not the slide joint 'joint_0'"},
    };
    for (size_t k = 0; k < sizeof bad_lqr / sizeof bad_lqr[0]; k++) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(bad_lqr[k].xml, f);
        fclose(f);
        e = (crl_error){0};
        ck_assert_int_eq(dmc_model_load(&dm, &dmc_lqr_lqr_6_2, dir, &e), CRL_E_CONFIG);
        EXPECT_MSG(e, CRL_E_CONFIG, bad_lqr[k].needle);
        ck_assert_ptr_null(dm.m);
    }
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- point_mass/hard ---- */

START_TEST(test_point_mass_hard)
{
    sim s;
    sim_open(&s, &dmc_point_mass_hard);
    const mjModel *m = s.dm.m;
    /* The actuation directions in extra drive the mass: control (1, 0) pushes along the first with
     * gear 0.1, control (0, 1) along the second, as MuJoCo's actuator forces show. */
    double c = cos(0.4), sn = sin(0.4);
    s.extra[0] = c;
    s.extra[1] = sn;
    s.extra[2] = -sn;
    s.extra[3] = c;
    double q[2] = {0.1, -0.05}, v[2] = {0.2, 0.3}, u1[2] = {1, 0}, u2[2] = {0, 1};
    sim_at(&s, q, v, u1);
    NEAR(s.d->qfrc_actuator[0], 0.1 * c, 1e-15);
    NEAR(s.d->qfrc_actuator[1], 0.1 * sn, 1e-15);
    NEAR(s.obs[0][0], 0.1, 0);
    NEAR(s.obs[0][1], -0.05, 0);
    NEAR(s.obs[1][0], 0.2, 0);
    NEAR(s.obs[1][1], 0.3, 0);
    sim_at(&s, q, v, u2);
    NEAR(s.d->qfrc_actuator[0], -0.1 * sn, 1e-15);
    NEAR(s.d->qfrc_actuator[1], 0.1 * c, 1e-15);
    /* The reward is easy's: on the target, half control costs a tenth. */
    double half[2] = {1.0, 0.0};
    NEAR(sim_at(&s, NULL, NULL, NULL), 1.0, 0);
    NEAR(sim_at(&s, NULL, NULL, half), (0.5 + 4) / 5, 1e-12);
    double margin[2] = {0.018, 0.024};
    NEAR(sim_at(&s, margin, NULL, NULL), 0.1, 1e-9);

    /* Initial directions: unit vectors, never within ~26 degrees of parallel; positions in range. */
    crl_rng rng;
    double spread = 0;
    for (int seed = 0; seed < 200; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        mj_resetData(m, s.d);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        NEAR(hypot(s.extra[0], s.extra[1]), 1.0, 1e-12);
        NEAR(hypot(s.extra[2], s.extra[3]), 1.0, 1e-12);
        ck_assert(fabs(s.extra[0] * s.extra[2] + s.extra[1] * s.extra[3]) <= 0.9);
        ck_assert(fabs(s.d->qpos[0]) <= 0.29 && fabs(s.d->qpos[1]) <= 0.29);
        spread += fabs(s.extra[0] - 1.0);
    }
    ck_assert(spread > 10);
    sim_close(&s);
}
END_TEST

/* Through the host, each env of a batch is driven along its own directions (kept in its state after
 * qpos and qvel): from rest, one step of control (1, 0) accelerates env i along its first direction. */
START_TEST(test_point_mass_hard_batch)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = point_mass/hard\nnum_envs = 4\nseed = 2\n"
                            "return_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    double *state = crl_tensor_data(crl_td_get(td, "state")); /* time, qpos 2, qvel 2, dirs 4 */
    double dirs[4][4];
    for (int i = 0; i < 4; i++) {
        memcpy(dirs[i], state + 9 * i + 5, sizeof dirs[i]);
        /* at rest near the centre, so no limit acts on the first step */
        state[9 * i + 1] = 0.0;
        state[9 * i + 2] = 0.0;
        state[9 * i + 3] = 0.0;
        state[9 * i + 4] = 0.0;
    }
    ck_assert(memcmp(dirs[0], dirs[1], sizeof dirs[0]) != 0);
    crl_td *back = crl_env_reset_from_state(h.env, td, &e);
    ck_assert_msg(back != NULL, "%s", e.message);
    EXPECT_OK(crl_env_rand_action(h.env, back, &e), e);
    double *a = crl_tensor_data(crl_td_get(back, "action"));
    for (int i = 0; i < 4; i++) {
        a[2 * i] = 1.0;
        a[2 * i + 1] = 0.0;
    }
    EXPECT_OK(crl_env_step(h.env, back, &e), e);
    const double *vel = leaf_f64(crl_td_get_td(back, "next"), "velocity");
    for (int i = 0; i < 4; i++) {
        double vx = vel[2 * i], vy = vel[2 * i + 1];
        double speed = hypot(vx, vy);
        ck_assert(speed > 0);
        NEAR(vx / speed, dirs[i][0], 1e-9);
        NEAR(vy / speed, dirs[i][1], 1e-9);
    }
    crl_td_unref(back);
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* ---- humanoid ---- */

/* The free joint's quaternion for a turn of `angle` about `axis`. */
static void set_quat(double *qpos, const double axis[3], double angle)
{
    qpos[3] = cos(angle / 2);
    for (int k = 0; k < 3; k++)
        qpos[4 + k] = sin(angle / 2) * axis[k];
}

START_TEST(test_humanoid_observations)
{
    sim s;
    sim_open(&s, &dmc_humanoid_walk);
    const mjModel *m = s.dm.m;
    ck_assert_int_eq(m->nq, 28);
    ck_assert_int_eq(m->nu, 21);
    NEAR(m->opt.timestep, 0.005, 0);
    double q[28] = {0};
    double v[27] = {0};
    /* At the model's pose the torso is 1.5 m up, unrotated; the head sits .19 above it. */
    q[2] = 1.5;
    q[3] = 1.0;
    for (int k = 7; k < 28; k++)
        q[k] = 0.01 * (k - 17);
    for (int k = 0; k < 27; k++)
        v[k] = 0.05 * (k % 5) - 0.1;
    sim_at(&s, q, v, NULL);
    for (int k = 0; k < 21; k++)
        NEAR(s.obs[0][k], q[7 + k], 0);
    NEAR(s.obs[1][0], s.d->xpos[3 * mj_name2id(m, mjOBJ_BODY, "head") + 2], 0);
    for (int k = 0; k < 27; k++)
        NEAR(s.obs[5][k], v[k], 0);
    /* Unrotated torso: extremities are plain offsets from the torso, torso_vertical is (0, 0, 1). */
    static const char *const limbs[] = {"left_hand", "left_foot", "right_hand", "right_foot"};
    int torso = mj_name2id(m, mjOBJ_BODY, "torso");
    double ego[12];
    for (int l = 0; l < 4; l++) {
        int b = mj_name2id(m, mjOBJ_BODY, limbs[l]);
        for (int j = 0; j < 3; j++) {
            ego[3 * l + j] = s.d->xpos[3 * b + j] - s.d->xpos[3 * torso + j];
            NEAR(s.obs[2][3 * l + j], ego[3 * l + j], 1e-12);
        }
    }
    ck_assert(s.obs[2][2] > -0.1 && s.obs[2][5] < -1.0); /* left hand near torso height, feet far below */
    ck_assert(s.obs[2][1] > 0 && s.obs[2][7] < 0);        /* left is +y, right is -y */
    NEAR(s.obs[3][0], 0.0, 1e-12);
    NEAR(s.obs[3][1], 0.0, 1e-12);
    NEAR(s.obs[3][2], 1.0, 1e-12);
    /* The centre of mass's velocity: the free joint's linear velocity when only it moves. */
    double vlin[27] = {0.3, -0.2, 0.1};
    sim_at(&s, q, vlin, NULL);
    NEAR(s.obs[4][0], 0.3, 1e-12);
    NEAR(s.obs[4][1], -0.2, 1e-12);
    NEAR(s.obs[4][2], 0.1, 1e-12);

    /* Moved and turned 90 degrees about x: extremities are egocentric, so unchanged; the torso's z
     * axis now points along -y, which the z-row of xmat (zx, zy, zz) reads as (0, 1, 0). */
    double axis[3] = {1, 0, 0};
    q[0] = 2.0;
    q[1] = -1.0;
    q[2] = 3.0;
    set_quat(q, axis, M_PI / 2);
    sim_at(&s, q, NULL, NULL);
    for (int k = 0; k < 12; k++)
        NEAR(s.obs[2][k], ego[k], 1e-12);
    NEAR(s.obs[3][0], 0.0, 1e-12);
    NEAR(s.obs[3][1], 1.0, 1e-12);
    NEAR(s.obs[3][2], 0.0, 1e-12);
    NEAR(s.obs[1][0], 3.0, 1e-12); /* the head .19 along the torso's z, now horizontal */
    sim_close(&s);
}
END_TEST

START_TEST(test_humanoid_rewards)
{
    sim s;
    sim_open(&s, &dmc_humanoid_stand);
    double q[28] = {0, 0, 1.5, 1.0}, still[27] = {0};
    /* Standing upright at the model's pose (head 1.69 m up), still, no control: 1. */
    NEAR(sim_at(&s, q, still, NULL), 1.0, 0);
    /* Sliding at 2 m/s along x is the stand task's margin: dont_move (0.1 + 1) / 2. */
    double slide[27] = {2.0};
    NEAR(sim_at(&s, q, slide, NULL), 0.55, 1e-12);
    double ctrl[21];
    for (int k = 0; k < 21; k++)
        ctrl[k] = k < 7 ? 1.0 : 0.0;
    NEAR(sim_at(&s, q, still, ctrl), (4.0 + 14.0 / 21.0) / 5.0, 1e-12);
    /* Head at 1.4 - 0.35 (the margin below the stand height): standing 0.1. */
    double low[28] = {0, 0, 1.05 - 0.19, 1.0};
    NEAR(sim_at(&s, low, still, NULL), 0.1, 1e-9);
    /* Lying on its back 0.2 m up: the head is low and the torso's zz is 0, so upright is linear
     * 1 - 0.9 / 1.9 and standing all but 0. */
    double axis[3] = {0, 1, 0};
    double lying[28] = {0, 0, 0.2};
    set_quat(lying, axis, -M_PI / 2);
    double r = sim_at(&s, lying, still, NULL);
    ck_assert(r < 1e-6 && r >= 0);
    /* Upside down: upright 1 - 1.9 / 1.9 = 0. */
    double flipped[28] = {0, 0, 1.5};
    set_quat(flipped, axis, M_PI);
    NEAR(sim_at(&s, flipped, still, NULL), 0.0, 0);
    /* Tilted with the torso's zz 0.9 - 0.95: upright halfway down the linear margin. */
    double tilted[28] = {0, 0, 3.0}; /* high enough that the head stays above 1.4 */
    set_quat(tilted, axis, acos(0.9 - 0.95));
    NEAR(sim_at(&s, tilted, still, NULL), 0.5, 1e-9);
    sim_close(&s);

    /* walk: 1 m/s or more horizontally; at rest the move term alone is 1/6. */
    sim_open(&s, &dmc_humanoid_walk);
    NEAR(sim_at(&s, q, still, NULL), 1.0 / 6.0, 1e-12);
    double walk[27] = {0.6, 0.8};
    NEAR(sim_at(&s, q, walk, NULL), 1.0, 1e-12);
    double half[27] = {0, -0.5};
    NEAR(sim_at(&s, q, half, NULL), (5 * 0.5 + 1) / 6.0, 1e-12);
    sim_close(&s);

    sim_open(&s, &dmc_humanoid_run);
    double run[27] = {10.0};
    NEAR(sim_at(&s, q, run, NULL), 1.0, 1e-12);
    double jog[27] = {0, 0, 0}; /* vertical speed does not count */
    jog[2] = 20.0;
    NEAR(sim_at(&s, q, jog, NULL), 1.0 / 6.0, 1e-12);
    double seven[27] = {7.0};
    NEAR(sim_at(&s, q, seven, NULL), (5 * 0.7 + 1) / 6.0, 1e-12);
    sim_close(&s);
}
END_TEST

/* Initial states: collision-free, the torso where the model puts it in a random orientation, every
 * hinge within its range. */
START_TEST(test_humanoid_init)
{
    sim s;
    sim_open(&s, &dmc_humanoid_run);
    const mjModel *m = s.dm.m;
    crl_rng rng;
    double qw = 0;
    for (int seed = 0; seed < 20; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        mj_resetData(m, s.d);
        mj_forward(m, s.d);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        mj_forward(m, s.d);
        ck_assert_int_eq(s.d->ncon, 0);
        NEAR(s.d->qpos[0], 0.0, 0);
        NEAR(s.d->qpos[1], 0.0, 0);
        NEAR(s.d->qpos[2], 1.5, 0);
        const double *quat = s.d->qpos + 3;
        NEAR(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3], 1.0, 1e-12);
        for (int k = 0; k < 4; k++)
            ck_assert(quat[k] >= 0); /* the suite's uniform [0, 1)^4, normalized */
        qw += quat[0];
        for (int j = 1; j < m->njnt; j++) {
            double x = s.d->qpos[m->jnt_qposadr[j]];
            ck_assert(x >= m->jnt_range[2 * j] && x <= m->jnt_range[2 * j + 1]);
        }
        for (int k = 0; k < m->nv; k++)
            NEAR(s.d->qvel[k], 0.0, 0);
    }
    ck_assert(qw < 19.0); /* not the identity every time */
    sim_close(&s);
}
END_TEST

/* ---- swimmer ---- */

/* The nose-to-target vector in the head's frame worked out from the root joints: the heading hinge
 * turns the head about (0, -.05) in its frame, the nose sits at (0, -.06), the head .05 up. */
static void swimmer_expected(const double *q, double tx, double ty, double out[2])
{
    double x = q[0], y = q[1], th = q[2];
    double nx = x + 0.01 * sin(th), ny = y - 0.05 - 0.01 * cos(th);
    double vx = tx - nx, vy = ty - ny;
    out[0] = vx * cos(th) + vy * sin(th);
    out[1] = -vx * sin(th) + vy * cos(th);
}

START_TEST(test_swimmer)
{
    for (int n = 6; n <= 15; n += 9) {
        sim s;
        sim_open(&s, n == 6 ? &dmc_swimmer_swimmer6 : &dmc_swimmer_swimmer15);
        const mjModel *m = s.dm.m;
        /* The generated chain: n bodies, n - 1 limited joints of +-360/n degrees, their motors and
         * sensors; the tracking cameras backed away by n / 6. */
        ck_assert_int_eq(m->nbody, 1 + n);
        ck_assert_int_eq(m->nu, n - 1);
        ck_assert_int_eq(m->nq, 2 + n);
        int j = mj_name2id(m, mjOBJ_JOINT, "joint_0");
        ck_assert_int_ge(j, 0);
        NEAR(m->jnt_range[2 * j + 1], 2 * M_PI / n, 1e-12);
        NEAR(m->actuator_gear[6 * (n - 2)], 5e-4, 0);
        int cam = mj_name2id(m, mjOBJ_CAMERA, "tracking1");
        NEAR(m->cam_pos[3 * cam + 1], -0.2 * n / 6.0, 1e-12);
        NEAR(m->cam_pos[3 * cam + 2], 0.5 * n / 6.0, 1e-12);
        cam = mj_name2id(m, mjOBJ_CAMERA, "eyes");
        NEAR(m->cam_pos[3 * cam + 1], -0.058, 1e-12); /* not a tracking camera: unchanged */

        double q[17] = {0}, v[17] = {0};
        /* Straight, heading 0, at the origin: the target's offset from the nose (0, -.06). */
        s.extra[0] = 0.5;
        s.extra[1] = -0.4;
        double r = sim_at(&s, q, v, NULL);
        NEAR(s.obs[1][0], 0.5, 1e-12);
        NEAR(s.obs[1][1], -0.4 + 0.06, 1e-12);
        /* long_tail with 0.1 at the margin of 5 target sizes past the target's edge (0.1) */
        double d = hypot(0.5, -0.34), x = (d - 0.1) / 0.5;
        NEAR(r, 1.0 / (x * x * 9.0 + 1.0), 1e-12);
        /* Turned and moved, joints bent: the vector in the head's frame. */
        q[0] = 0.3;
        q[1] = -0.2;
        q[2] = 2.0;
        for (int k = 3; k < 2 + n; k++)
            q[k] = 0.05 * (k - 5);
        s.extra[0] = -1.2;
        s.extra[1] = 0.7;
        sim_at(&s, q, v, NULL);
        double want[2];
        swimmer_expected(q, -1.2, 0.7, want);
        NEAR(s.obs[1][0], want[0], 1e-12);
        NEAR(s.obs[1][1], want[1], 1e-12);
        for (int k = 3; k < 2 + n; k++)
            NEAR(s.obs[0][k - 3], q[k], 0);
        /* On the target: reward 1. */
        q[0] = q[1] = q[2] = 0;
        s.extra[0] = 0.0;
        s.extra[1] = -0.06 - 0.09;
        NEAR(sim_at(&s, q, v, NULL), 1.0, 0);
        /* Body velocities: all of it sliding along x at 0.3 m/s reads (0.3, 0, 0) on every body;
         * turning at w about the heading hinge reads w on every gyro and (-.05 w, 0) at the head. */
        for (int k = 3; k < 2 + n; k++)
            q[k] = 0;
        v[0] = 0.3;
        sim_at(&s, q, v, NULL);
        for (int b = 0; b < n; b++) {
            NEAR(s.obs[2][3 * b], 0.3, 1e-12);
            NEAR(s.obs[2][3 * b + 1], 0.0, 1e-12);
            NEAR(s.obs[2][3 * b + 2], 0.0, 1e-12);
        }
        v[0] = 0;
        v[2] = 0.8;
        sim_at(&s, q, v, NULL);
        NEAR(s.obs[2][0], -0.05 * 0.8, 1e-12);
        NEAR(s.obs[2][1], 0.0, 1e-12);
        for (int b = 0; b < n; b++)
            NEAR(s.obs[2][3 * b + 2], 0.8, 1e-12);

        /* Initial states: heading anywhere, joints within range, target in the box (0.3 or 2). */
        crl_rng rng;
        int close = 0;
        for (int seed = 0; seed < 200; seed++) {
            crl_rng_init(&rng, (uint64_t)seed, 0);
            mj_resetData(m, s.d);
            s.dm.task->init(&s.dm, s.d, s.extra, &rng);
            ck_assert(fabs(s.d->qpos[2]) <= M_PI);
            ck_assert(s.d->qpos[0] == 0 && s.d->qpos[1] == 0);
            for (int k = 3; k < m->nq; k++)
                ck_assert(fabs(s.d->qpos[k]) <= 2 * M_PI / n + 1e-12);
            ck_assert(fabs(s.extra[0]) <= 2 && fabs(s.extra[1]) <= 2);
            close += fabs(s.extra[0]) <= 0.3 && fabs(s.extra[1]) <= 0.3;
        }
        ck_assert(close >= 20 && close <= 100); /* a fifth of the draws, plus the far box's own */
        sim_close(&s);
    }
}
END_TEST

/* Through the host each env of a batch sees its own target (kept in its state after qvel): to_target
 * is the vector worked out from that env's root joints at every step. */
START_TEST(test_swimmer_batch_targets)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = swimmer/swimmer6\nnum_envs = 3\nseed = 9\n"
                            "return_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    enum { W = 1 + 8 + 8 + 2 }; /* time, qpos, qvel, target */
    for (int t = 0; t < 10; t++) {
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        crl_td *next = crl_td_get_td(td, "next");
        const double *st = leaf_f64(next, "state"), *tt = leaf_f64(next, "to_target");
        for (int i = 0; i < 3; i++) {
            double want[2];
            swimmer_expected(st + W * i + 1, st[W * i + 17], st[W * i + 18], want);
            NEAR(tt[2 * i], want[0], 1e-9);
            NEAR(tt[2 * i + 1], want[1], 1e-9);
        }
        ck_assert(st[17] != st[W + 17]);
        crl_td *nx = crl_env_step_mdp(h.env, td, &e);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* ---- fish ---- */

START_TEST(test_fish)
{
    sim s;
    sim_open(&s, &dmc_fish_swim);
    const mjModel *m = s.dm.m;
    ck_assert_int_eq(m->nq, 14);
    ck_assert_int_eq(m->nu, 5);
    NEAR(m->opt.density, 5000, 0);
    double q[14] = {0, 0, 0.1, 1}, v[13];
    for (int k = 0; k < 7; k++)
        q[7 + k] = 0.02 * (k + 1) - 0.07;
    for (int k = 0; k < 13; k++)
        v[k] = 0.1 * k - 0.5;
    /* The target straight ahead of the mouth (a capsule from y .079 to .07 of the torso: MuJoCo turns
     * its z axis along from - to, +y): 0.1 further along +y is 0.1 along the mouth's z. */
    s.extra[0] = 0.0;
    s.extra[1] = 0.0745 + 0.1;
    s.extra[2] = 0.1;
    sim_at(&s, q, v, NULL);
    for (int k = 0; k < 7; k++)
        NEAR(s.obs[0][k], q[7 + k], 0);
    NEAR(s.obs[1][0], 1.0, 1e-12);
    NEAR(s.obs[2][0], 0.0, 1e-12);
    NEAR(s.obs[2][1], 0.0, 1e-12);
    NEAR(s.obs[2][2], 0.1, 1e-12);
    for (int k = 0; k < 13; k++)
        NEAR(s.obs[3][k], v[k], 0);
    /* Turned 90 degrees about x (nose up) and moved: upright reads cos 90 = 0; with the target carried
     * along (rotated into the new frame) to_target is unchanged. */
    double c = cos(M_PI / 4), sn = sin(M_PI / 4);
    double q2[14] = {0.2, -0.1, 0.3, c, sn, 0, 0};
    memcpy(q2 + 7, q + 7, 7 * sizeof(double));
    s.extra[0] = 0.2;
    s.extra[1] = -0.1;
    s.extra[2] = 0.3 + 0.1745;
    sim_at(&s, q2, NULL, NULL);
    NEAR(s.obs[1][0], 0.0, 1e-12);
    NEAR(s.obs[2][0], 0.0, 1e-12);
    NEAR(s.obs[2][1], 0.0, 1e-12);
    NEAR(s.obs[2][2], 0.1, 1e-12);
    /* swim: the target on the mouth and upright is 1; radii (.005 + .04) plus a margin of twice
     * that away: in_target 0.1. */
    s.extra[0] = 0.0;
    s.extra[1] = 0.0745;
    s.extra[2] = 0.1;
    NEAR(sim_at(&s, q, NULL, NULL), 1.0, 0);
    s.extra[1] = 0.0745 + 0.135;
    NEAR(sim_at(&s, q, NULL, NULL), (7 * 0.1 + 1) / 8, 1e-9);
    /* upside down (half turn about x), far away: (7 * ~0 + 0) / 8 */
    double flipped[14] = {0, 0, 0.1, 0, 1, 0, 0};
    s.extra[1] = 2.0;
    NEAR(sim_at(&s, flipped, NULL, NULL), 0.0, 1e-12);
    sim_close(&s);

    /* upright: a gaussian of the torso's zz about 1, 0.1 at 0 (lying on its side). */
    sim_open(&s, &dmc_fish_upright);
    NEAR(s.dm.m->geom_rgba[4 * mj_name2id(s.dm.m, mjOBJ_GEOM, "target") + 3], 0.0, 0);
    NEAR(sim_at(&s, q, NULL, NULL), 1.0, 0);
    NEAR(sim_at(&s, q2, NULL, NULL), 0.1, 1e-12);
    NEAR(sim_at(&s, flipped, NULL, NULL), 1e-4, 1e-15);
    /* Initial states: any orientation, fins and tail within 0.2, the fish where the model puts it. */
    crl_rng rng;
    double w = 0;
    for (int seed = 0; seed < 50; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        mj_resetData(s.dm.m, s.d);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        const double *qq = s.d->qpos;
        NEAR(qq[2], 0.1, 0);
        NEAR(qq[3] * qq[3] + qq[4] * qq[4] + qq[5] * qq[5] + qq[6] * qq[6], 1.0, 1e-12);
        w += qq[3] < 0; /* normal draws: either sign */
        for (int k = 7; k < 14; k++)
            ck_assert(fabs(qq[k]) <= 0.2);
    }
    ck_assert(w > 5 && w < 45);
    sim_close(&s);

    sim_open(&s, &dmc_fish_swim);
    for (int seed = 0; seed < 50; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        ck_assert(fabs(s.extra[0]) <= 0.4 && fabs(s.extra[1]) <= 0.4);
        ck_assert(s.extra[2] >= 0.1 && s.extra[2] <= 0.3);
    }
    sim_close(&s);
}
END_TEST

/* ---- quadruped ---- */

/* A yaw of a about z as the free joint's quaternion. */
static void yaw_quat(double *q, double a)
{
    q[3] = cos(a / 2);
    q[4] = 0;
    q[5] = 0;
    q[6] = sin(a / 2);
}

START_TEST(test_quadruped_models)
{
    sim s;
    /* make_model's edits: walk's floor 10 m, run's 100 m; neither has walls, ball, target, terrain or
     * rangefinders; fetch keeps the 15 m floor, the walls and the ball; escape has a 40 m floor, the
     * terrain and the 20 rangefinders, no walls or ball. */
    const dmc_task *ts[4] = {&dmc_quadruped_walk, &dmc_quadruped_run, &dmc_quadruped_fetch, &dmc_quadruped_escape};
    const double floor[4] = {10, 100, 15, 40};
    for (int k = 0; k < 4; k++) {
        sim_open(&s, ts[k]);
        const mjModel *m = s.dm.m;
        NEAR(m->geom_size[3 * mj_name2id(m, mjOBJ_GEOM, "floor")], floor[k], 0);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_GEOM, "terrain") >= 0, k == 3);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_SENSOR, "rf_00") >= 0, k == 3);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_SENSOR, "rf_34") >= 0, k == 3);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_GEOM, "wall_px") >= 0, k == 2);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "ball") >= 0, k == 2);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_SITE, "target") >= 0, k == 2);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_SITE, "rf_00") >= 0, 1); /* the sites stay, as in the suite */
        ck_assert_int_eq(m->na, 12);
        ck_assert_int_eq(m->nu, 12);
        ck_assert_int_eq(m->nq, k == 2 ? 30 : 23);
        sim_close(&s);
    }
}
END_TEST

START_TEST(test_quadruped_observations)
{
    sim s;
    sim_open(&s, &dmc_quadruped_fetch);
    const mjModel *m = s.dm.m;
    double q[30] = {0}, v[28] = {0};
    q[2] = 0.57;
    yaw_quat(q, 0);
    for (int k = 7; k < 23; k++)
        q[k] = 0.01 * (k - 14);
    for (int k = 6; k < 22; k++)
        v[k] = 0.02 * (k - 10);
    q[23] = 3.0; /* the ball */
    q[24] = 1.0;
    q[25] = 0.15;
    q[26] = 1.0;
    v[0] = 1.0; /* the torso sliding along x, spinning in its own frame */
    v[3] = 0.1;
    v[4] = 0.2;
    v[5] = 0.3;
    v[22] = -0.5; /* the ball's linear and angular velocity */
    v[23] = 0.25;
    v[26] = 0.7;
    mj_resetData(m, s.d);
    for (int k = 0; k < 30; k++)
        s.d->qpos[k] = q[k];
    for (int k = 0; k < 28; k++)
        s.d->qvel[k] = v[k];
    for (int k = 0; k < 12; k++)
        s.d->act[k] = 0.05 * k - 0.3;
    mj_forward(m, s.d);
    s.dm.task->observe(&s.dm, s.d, s.extra, s.out);
    /* egocentric_state: the 16 hinge angles, their velocities, the 12 actuator states. */
    for (int k = 0; k < 16; k++) {
        NEAR(s.obs[0][k], q[7 + k], 0);
        NEAR(s.obs[0][16 + k], v[6 + k], 0);
    }
    for (int k = 0; k < 12; k++)
        NEAR(s.obs[0][32 + k], 0.05 * k - 0.3, 0);
    /* torso_velocity in the torso's frame: x plus the spin's w x r at the torso site (its origin). */
    NEAR(s.obs[1][0], 1.0, 1e-12);
    NEAR(s.obs[1][1], 0.0, 1e-12);
    NEAR(s.obs[1][2], 0.0, 1e-12);
    NEAR(s.obs[2][0], 1.0, 1e-12);
    /* imu: the accelerometer (model order: first), then the gyro reading the local spin. */
    NEAR(s.obs[3][3], 0.1, 1e-12);
    NEAR(s.obs[3][4], 0.2, 1e-12);
    NEAR(s.obs[3][5], 0.3, 1e-12);
    int acc = m->sensor_adr[mj_name2id(m, mjOBJ_SENSOR, "imu_accel")];
    for (int j = 0; j < 3; j++)
        NEAR(s.obs[3][j], s.d->sensordata[acc + j], 0);
    /* force_torque: asinh of the toe sensors, forces (front left, front right, back right, back
     * left) then torques. */
    static const char *const ft[] = {"force_toe_front_left", "force_toe_front_right", "force_toe_back_right",
                                     "force_toe_back_left", "torque_toe_front_left", "torque_toe_front_right",
                                     "torque_toe_back_right", "torque_toe_back_left"};
    for (int k = 0; k < 8; k++) {
        int adr = m->sensor_adr[mj_name2id(m, mjOBJ_SENSOR, ft[k])];
        for (int j = 0; j < 3; j++)
            NEAR(s.obs[4][3 * k + j], asinh(s.d->sensordata[adr + j]), 0);
    }
    /* ball_state: position and velocity relative to the torso, and spin; target_position: the target
     * site (0, 0, .05) from the torso. */
    double want_ball[9] = {3.0, 1.0, 0.15 - 0.57, -1.5, 0.25, 0, 0, 0.7, 0};
    for (int k = 0; k < 9; k++)
        NEAR(s.obs[5][k], want_ball[k], 1e-12);
    NEAR(s.obs[6][0], 0.0, 1e-12);
    NEAR(s.obs[6][1], 0.0, 1e-12);
    NEAR(s.obs[6][2], 0.05 - 0.57, 1e-12);

    /* Turned 90 degrees left: world x is the torso's -y; the torso 2 m along x. */
    yaw_quat(q, M_PI / 2);
    q[0] = 2.0;
    double vx[28] = {1.0};
    sim_at(&s, q, vx, NULL);
    NEAR(s.obs[1][0], 0.0, 1e-12);
    NEAR(s.obs[1][1], -1.0, 1e-12);
    NEAR(s.obs[2][0], 1.0, 1e-12);
    NEAR(s.obs[5][0], 1.0 - 0.0, 1e-12);  /* ball (3, 1) from (2, 0): (1, 1) world, (1, -1) local */
    NEAR(s.obs[5][1], -1.0, 1e-12);
    NEAR(s.obs[6][0], 0.0, 1e-12);        /* target (0, 0) from (2, 0): (-2, 0) world, (0, 2) local */
    NEAR(s.obs[6][1], 2.0, 1e-12);
    sim_close(&s);
}
END_TEST

START_TEST(test_quadruped_rewards)
{
    sim s;
    sim_open(&s, &dmc_quadruped_walk);
    double q[23] = {0, 0, 0.57}, v[23] = {0};
    yaw_quat(q, 0);
    /* walk: forward at 0.5 m/s or more upright is 1; the linear margin of 0.5 reaches 0.5 at rest. */
    v[0] = 0.5;
    NEAR(sim_at(&s, q, v, NULL), 1.0, 1e-12);
    v[0] = 0.25;
    NEAR(sim_at(&s, q, v, NULL), 0.75, 1e-12);
    v[0] = 0.0;
    NEAR(sim_at(&s, q, v, NULL), 0.5, 1e-12);
    /* upright falls linearly to 0 upside down: on its side (zz 0) halves it. */
    double side[23] = {0, 0, 1.0, cos(M_PI / 4), sin(M_PI / 4), 0, 0};
    double up[23] = {0, 0, 1.0, 0, 1, 0, 0};
    v[0] = 0.0;
    NEAR(sim_at(&s, side, v, NULL), 0.25, 1e-12);
    NEAR(sim_at(&s, up, v, NULL), 0.0, 0);
    sim_close(&s);

    sim_open(&s, &dmc_quadruped_run);
    double vr[23] = {5.0};
    NEAR(sim_at(&s, q, vr, NULL), 1.0, 1e-12);
    vr[0] = 2.5;
    NEAR(sim_at(&s, q, vr, NULL), 0.75, 1e-12);
    sim_close(&s);

    /* fetch: the workspace (.8 ahead of the torso, .2 down) on the ball and the ball on the target
     * gives 1; far off, both linear terms over the arena's radius 15 sqrt 2. */
    sim_open(&s, &dmc_quadruped_fetch);
    double qf[30] = {-0.8, 0, 0.57};
    yaw_quat(qf, 0);
    qf[23] = 0;
    qf[24] = 0;
    qf[25] = 0.15;
    qf[26] = 1;
    NEAR(sim_at(&s, qf, NULL, NULL), 1.0, 1e-12);
    qf[23] = 10;
    qf[24] = 10;
    double arena = 15 * sqrt(2.0), far = hypot(10, 10);
    double reach = 1 - (far - 0.45) / arena, fetch = 1 - (far - 0.4) / arena;
    NEAR(sim_at(&s, qf, NULL, NULL), reach * (0.5 + 0.5 * fetch), 1e-12);
    sim_close(&s);
}
END_TEST

/* Initial states: the lowest clear height in 1 cm steps; fetch upright at a random heading and place,
 * the ball dropped from 2 m and thrown horizontally. */
START_TEST(test_quadruped_init)
{
    sim s;
    sim_open(&s, &dmc_quadruped_walk);
    const mjModel *m = s.dm.m;
    crl_rng rng;
    for (int seed = 0; seed < 5; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        mj_forward(m, s.d);
        ck_assert_int_eq(s.d->ncon, 0);
        double z = s.d->qpos[2];
        ck_assert(z > 0 && z < 2.0);
        NEAR(s.d->qpos[3] * s.d->qpos[3] + s.d->qpos[4] * s.d->qpos[4] + s.d->qpos[5] * s.d->qpos[5] +
                 s.d->qpos[6] * s.d->qpos[6], 1.0, 1e-12);
        s.d->qpos[2] = z - 0.01; /* a centimetre lower touches */
        mj_forward(m, s.d);
        ck_assert_int_gt(s.d->ncon, 0);
    }
    sim_close(&s);

    sim_open(&s, &dmc_quadruped_fetch);
    m = s.dm.m;
    for (int seed = 0; seed < 5; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        const double *qq = s.d->qpos;
        ck_assert(qq[4] == 0 && qq[5] == 0);
        ck_assert(fabs(qq[0]) <= 13.5 && fabs(qq[1]) <= 13.5);
        ck_assert(fabs(qq[23]) <= 13.5 && fabs(qq[24]) <= 13.5);
        NEAR(qq[25], 2.0, 0);
        ck_assert(s.d->qvel[24] == 0 && (s.d->qvel[22] != 0 || s.d->qvel[23] != 0));
    }
    sim_close(&s);
}
END_TEST

/* The first observation is the suite's: after reset, a forward with actuation off (its after_reset),
 * so acceleration-stage sensors see no actuator force yet. */
START_TEST(test_quadruped_reset_observation)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = quadruped/walk\nseed = 3\nreturn_state = true\n", &e),
              e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    const double *st = leaf_f64(td, "state"), *imu = leaf_f64(td, "imu"), *ft = leaf_f64(td, "force_torque");
    sim s;
    sim_open(&s, &dmc_quadruped_walk);
    const mjModel *m = s.dm.m;
    mj_resetData(m, s.d);
    memcpy(s.d->qpos, st + 1, sizeof(double) * (size_t)m->nq);
    memcpy(s.d->qvel, st + 1 + m->nq, sizeof(double) * (size_t)m->nv);
    memcpy(s.d->act, st + 1 + m->nq + m->nv, sizeof(double) * (size_t)m->na);
    s.dm.m->opt.disableflags |= mjDSBL_ACTUATION;
    mj_forward(m, s.d);
    int acc = m->sensor_adr[mj_name2id(m, mjOBJ_SENSOR, "imu_accel")];
    int force = m->sensor_adr[mj_name2id(m, mjOBJ_SENSOR, "force_toe_front_left")];
    for (int j = 0; j < 3; j++) {
        NEAR(imu[j], s.d->sensordata[acc + j], 1e-9);
        NEAR(ft[j], asinh(s.d->sensordata[force + j]), 1e-9);
    }
    sim_close(&s);
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* Escape at hand-set states on the flat (all-zero) terrain: origin is the world origin in the torso's
 * frame; the reward is upright (1 within 20 degrees, linear to 0 upside down over 1 + cos 20) times the
 * workspace's distance from the origin over the 30 m half-size of the terrain (1 from there on). */
START_TEST(test_quadruped_escape)
{
    sim s;
    sim_open(&s, &dmc_quadruped_escape);
    const mjModel *m = s.dm.m;
    /* sim's extras are zeros: bumps of 0, a flat terrain */
    double q[23] = {2.0, 1.0, 0.57};
    yaw_quat(q, M_PI / 2);
    double r = sim_at(&s, q, NULL, NULL);
    NEAR(s.obs[5][0], -1.0, 1e-12); /* torso x is world y: the origin 1 m behind, 2 m to the right */
    NEAR(s.obs[5][1], 2.0, 1e-12);
    NEAR(s.obs[5][2], -0.57, 1e-12);
    const double *ws = s.d->site_xpos + 3 * mj_name2id(m, mjOBJ_SITE, "workspace");
    NEAR(ws[0], 2.0, 1e-12); /* .8 ahead (world +y), .2 down */
    NEAR(ws[1], 1.8, 1e-12);
    NEAR(ws[2], 0.37, 1e-12);
    double dist = sqrt(4.0 + 1.8 * 1.8 + 0.37 * 0.37);
    NEAR(r, dist / 30, 1e-12);
    for (int k = 0; k < 20; k++)
        ck_assert(s.obs[6][k] > 0 && s.obs[6][k] <= 1);
    /* out of the bowl: 1, upright */
    q[0] = 40;
    NEAR(sim_at(&s, q, NULL, NULL), 1.0, 0);
    /* tilted 20 degrees about x: still 1; on its side (zz 0): 1 - cos 20 / (1 + cos 20) */
    double dev = cos(20 * M_PI / 180);
    double tilt[23] = {40, 0, 1.0, cos(M_PI / 18 - 1e-9), sin(M_PI / 18 - 1e-9), 0, 0};
    NEAR(sim_at(&s, tilt, NULL, NULL), 1.0, 0);
    double side[23] = {40, 0, 1.0, cos(M_PI / 4), sin(M_PI / 4), 0, 0};
    NEAR(sim_at(&s, side, NULL, NULL), 1 - dev / (1 + dev), 1e-12);
    /* the ray readings: tanh of the distance, 1 with nothing hit (a body beyond the 40 m floor, upside
     * down, sees only sky) */
    double away[23] = {200, 0, 5.0, 0, 1, 0, 0};
    sim_at(&s, away, NULL, NULL);
    for (int k = 0; k < 20; k++)
        NEAR(s.obs[6][k], 1.0, 0);

    /* init: 900 bumps in [0.15, 1), a terrain in the bowl's shape (0 at the centre's .04 m radius
     * times at most 5 m, 0 on the rim at radius 1, highest near radius .5), the body clear of it */
    crl_rng rng;
    crl_rng_init(&rng, 4, 0);
    s.dm.task->init(&s.dm, s.d, s.extra, &rng);
    double lo = 1, hi = 0;
    for (int k = 0; k < 900; k++) {
        lo = fmin(lo, s.extra[k]);
        hi = fmax(hi, s.extra[k]);
    }
    ck_assert(lo >= 0.15 && hi < 1 && hi - lo > 0.5);
    int res = m->hfield_nrow[0];
    const float *h = m->hfield_data + m->hfield_adr[0];
    ck_assert_int_eq(res, 201);
    ck_assert(h[100 * res + 100] > 0 && h[100 * res + 100] < 0.02f);
    ck_assert(h[0] == 0.0f || fabsf(h[0]) < 1e-6f);
    ck_assert(h[100 * res + 150] > h[100 * res + 100]);
    mj_forward(m, s.d);
    ck_assert_int_eq(s.d->ncon, 0);
    s.d->qpos[2] -= 0.01;
    mj_forward(m, s.d);
    ck_assert_int_gt(s.d->ncon, 0);
    sim_close(&s);
}
END_TEST

/* A suite_dir quadruped.xml whose terrain or rangefinders are not the suite's is a config error naming
 * what escape needs (its observation and state sizes are the suite's). */
START_TEST(test_quadruped_escape_bad_suite)
{
    char dir[] = "/tmp/crl-dmc-escape.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *common = g_build_filename(dir, "common", NULL), *path = g_build_filename(dir, "quadruped.xml", NULL);
    ck_assert_int_eq(symlink(SUITE_DIR "/common", common), 0);
    gchar *xml = NULL;
    ck_assert(g_file_get_contents(SUITE_DIR "/quadruped.xml", &xml, NULL, NULL));
    static const struct {
        const char *from, *to, *needle;
    } edits[] = {
        {"ncol=\"201\" nrow=\"201\"", "ncol=\"101\" nrow=\"201\"", "201 x 101 samples"},
        {"size=\"30 30 5 .1\"", "size=\"20 20 5 .1\"", "over 40 m"},
        {"<rangefinder name=\"rf_00\" site=\"rf_00\"/>", "", "has 19 rangefinders"},
        {"<hfield name=\"terrain\" ncol=\"201\" nrow=\"201\" size=\"30 30 5 .1\"/>", "", "geom 'terrain'"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char *at = strstr(xml, edits[k].from);
        ck_assert_ptr_nonnull(at);
        GString *bad = g_string_new_len(xml, at - xml);
        g_string_append(bad, edits[k].to);
        g_string_append(bad, at + strlen(edits[k].from));
        if (k == 3) { /* no heightfield at all: the geom using it goes too */
            char *g = strstr(bad->str, "<geom name=\"terrain\"");
            ck_assert_ptr_nonnull(g);
            g_string_erase(bad, g - bad->str, strchr(g, '>') + 1 - g);
        }
        ck_assert(g_file_set_contents(path, bad->str, (gssize)bad->len, NULL));
        g_string_free(bad, TRUE);
        dmc_model dm;
        crl_error e = {0};
        ck_assert_int_eq(dmc_model_load(&dm, &dmc_quadruped_escape, dir, &e), CRL_E_CONFIG);
        EXPECT_MSG(e, CRL_E_CONFIG, edits[k].needle);
        ck_assert_ptr_null(dm.m);
        ck_assert_ptr_null(dm.cache);
    }
    g_free(xml);
    unlink(path);
    unlink(common);
    rmdir(dir);
    g_free(path);
    g_free(common);
}
END_TEST

/* Envs of one batch each have their own terrain in the shared model: a reset from env 1's state
 * (its bumps included) puts env 1's terrain under env 0, whose observations (rangefinders included)
 * and steps are then env 1's; stepping them in turn keeps both. */
START_TEST(test_quadruped_escape_batch)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = quadruped/escape\nnum_envs = 2\nseed = 5\n"
                            "return_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    crl_tensor *st = crl_td_get(td, "state");
    int64_t w = crl_tensor_shape(st)[1];
    ck_assert_int_eq(w, 1 + 23 + 22 + 12 + 900);
    double *state = crl_tensor_data(st);
    ck_assert(memcmp(state + 58, state + w + 58, 900 * sizeof(double)) != 0);
    memcpy(state, state + w, sizeof(double) * (size_t)w);
    crl_td *back = crl_env_reset_from_state(h.env, td, &e);
    ck_assert_msg(back != NULL, "%s", e.message);
    static const char *const keys[] = {"egocentric_state", "origin", "rangefinder", "imu", "force_torque"};
    static const int dims[] = {44, 3, 20, 6, 24};
    for (int step = 0; step < 5; step++) {
        for (int k = 0; k < 5; k++) {
            const double *v = leaf_f64(back, keys[k]);
            for (int j = 0; j < dims[k]; j++)
                ck_assert_msg(v[j] == v[dims[k] + j], "step %d: %s[%d]: env 0 %.17g, env 1 %.17g", step, keys[k], j,
                              v[j], v[dims[k] + j]);
        }
        EXPECT_OK(crl_env_rand_action(h.env, back, &e), e);
        double *a = crl_tensor_data(crl_td_get(back, "action"));
        for (int j = 0; j < 12; j++)
            a[12 + j] = a[j];
        EXPECT_OK(crl_env_step(h.env, back, &e), e);
        crl_td *nx = crl_env_step_mdp(h.env, back, &e);
        ck_assert_msg(nx != NULL, "%s", e.message);
        crl_td_unref(back);
        back = nx;
    }
    crl_td_unref(back);
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* ---- manipulator ---- */

/* qpos/qvel address of a named joint: read from the model, not from the task. */
static int qadr(const mjModel *m, const char *joint)
{
    int j = mj_name2id(m, mjOBJ_JOINT, joint);
    ck_assert_int_ge(j, 0);
    return m->jnt_qposadr[j];
}

START_TEST(test_manipulator)
{
    sim s;
    sim_open(&s, &dmc_manipulator_bring_ball);
    const mjModel *m = s.dm.m;
    ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "peg"), -1);
    ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "cup"), -1);
    ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "slot"), -1);
    ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "target_peg"), -1);
    ck_assert_int_ge(mj_name2id(m, mjOBJ_BODY, "target_ball"), 0);
    ck_assert_int_eq(m->nu, 5);
    NEAR(m->opt.timestep, 0.001, 0);
    static const char *const arm[] = {"arm_root", "arm_shoulder", "arm_elbow", "arm_wrist",
                                      "finger",   "fingertip",    "thumb",     "thumbtip"};
    double q[11] = {0}, v[11] = {0};
    for (int k = 0; k < 8; k++) {
        q[qadr(m, arm[k])] = 0.1 * (k + 1) - 0.4;
        v[qadr(m, arm[k])] = 0.3 * k - 1.0;
    }
    q[qadr(m, "ball_x")] = 0.3;
    q[qadr(m, "ball_z")] = 0.05;
    q[qadr(m, "ball_y")] = 1.2;
    v[qadr(m, "ball_x")] = 0.5;
    v[qadr(m, "ball_z")] = -0.25;
    v[qadr(m, "ball_y")] = 2.0;
    s.extra[0] = -0.2;
    s.extra[1] = 0.3;
    s.extra[2] = 0.8;
    sim_at(&s, q, v, NULL);
    /* arm_pos: (sin, cos) per arm joint in the suite's order (finger before thumb, unlike the model). */
    for (int k = 0; k < 8; k++) {
        double a = 0.1 * (k + 1) - 0.4;
        NEAR(s.obs[0][2 * k], sin(a), 1e-15);
        NEAR(s.obs[0][2 * k + 1], cos(a), 1e-15);
        NEAR(s.obs[1][k], 0.3 * k - 1.0, 0);
    }
    /* object_pos: the ball's x, z and half-angle quaternion; object_vel: its joints'. */
    NEAR(s.obs[4][0], 0.3, 1e-12);
    NEAR(s.obs[4][1], 0.05, 1e-12);
    NEAR(s.obs[4][2], cos(0.6), 1e-12);
    NEAR(s.obs[4][3], sin(0.6), 1e-12);
    NEAR(s.obs[5][0], 0.5, 0);
    NEAR(s.obs[5][1], -0.25, 0);
    NEAR(s.obs[5][2], 2.0, 0);
    /* target_pos: the env's target as the model now places it. */
    NEAR(s.obs[6][0], -0.2, 1e-12);
    NEAR(s.obs[6][1], 0.3, 1e-12);
    NEAR(s.obs[6][2], cos(0.4), 1e-12);
    NEAR(s.obs[6][3], sin(0.4), 1e-12);
    /* hand_pos: with only the root turned by t about -y, the hand sits .45 along the turned arm. */
    double qr[11] = {0};
    qr[qadr(m, "arm_root")] = 0.7;
    qr[qadr(m, "ball_x")] = 0.4; /* clear of the arm */
    qr[qadr(m, "ball_z")] = 0.1;
    sim_at(&s, qr, NULL, NULL);
    NEAR(s.obs[3][0], -0.45 * sin(0.7), 1e-12);
    NEAR(s.obs[3][1], 0.4 + 0.45 * cos(0.7), 1e-12);
    NEAR(s.obs[3][2], cos(0.35), 1e-12);
    NEAR(s.obs[3][3], -sin(0.35), 1e-12);
    for (int k = 0; k < 5; k++)
        NEAR(s.obs[2][k], 0.0, 0); /* nothing touches */
    /* Reward: the ball on the target (which sits 1 mm behind it) is 1; 3 cm off, the gaussian with 0.1
     * at a 2 cm margin past 1 cm. */
    s.extra[0] = 0.4;
    s.extra[1] = 0.1;
    NEAR(sim_at(&s, qr, NULL, NULL), 1.0, 0);
    s.extra[0] = 0.43;
    double d = hypot(0.03, 0.001), x = (d - 0.01) / 0.02;
    NEAR(sim_at(&s, qr, NULL, NULL), pow(0.1, x * x), 1e-12);

    /* Initial states: nothing touches; the hand symmetric; the target in its box; the ball on the
     * target about one time in ten. */
    crl_rng rng;
    int on_target = 0;
    for (int seed = 0; seed < 100; seed++) {
        crl_rng_init(&rng, (uint64_t)seed, 0);
        mj_resetData(m, s.d);
        s.dm.task->init(&s.dm, s.d, s.extra, &rng);
        mj_forward(m, s.d);
        ck_assert_int_eq(s.d->ncon, 0);
        ck_assert(s.d->qpos[qadr(m, "finger")] == s.d->qpos[qadr(m, "thumb")]);
        ck_assert(fabs(s.extra[0]) <= 0.4 && s.extra[1] >= 0.1 && s.extra[1] <= 0.4);
        ck_assert(fabs(s.extra[2]) <= M_PI);
        on_target += s.d->qpos[qadr(m, "ball_x")] == s.extra[0] && s.d->qpos[qadr(m, "ball_z")] == s.extra[1];
    }
    ck_assert(on_target >= 2 && on_target <= 30);
    sim_close(&s);
}
END_TEST

/* Through the host each env's target_pos is its own target (kept in its state after qvel). */
START_TEST(test_manipulator_batch_targets)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = manipulator/bring_ball\nnum_envs = 3\nseed = 4\n"
                            "return_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    enum { W = 1 + 11 + 11 + 3 };
    for (int t = 0; t < 5; t++) {
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        crl_td *next = crl_td_get_td(td, "next");
        const double *st = leaf_f64(next, "state"), *tp = leaf_f64(next, "target_pos");
        ck_assert_int_eq(crl_tensor_ndim(crl_td_get(next, "arm_pos")), 3);
        for (int i = 0; i < 3; i++) {
            const double *ex = st + W * i + 23;
            NEAR(tp[4 * i], ex[0], 1e-12);
            NEAR(tp[4 * i + 1], ex[1], 1e-12);
            NEAR(tp[4 * i + 2], cos(ex[2] / 2), 1e-12);
            NEAR(tp[4 * i + 3], sin(ex[2] / 2), 1e-12);
        }
        crl_td *nx = crl_env_step_mdp(h.env, td, &e);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* ---- stacker ---- */

START_TEST(test_stacker)
{
    for (int n = 2; n <= 4; n += 2) {
        sim s;
        sim_open(&s, n == 2 ? &dmc_stacker_stack_2 : &dmc_stacker_stack_4);
        const mjModel *m = s.dm.m;
        ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "box1") >= 0, 1);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "box2") >= 0, n == 4);
        ck_assert_int_eq(mj_name2id(m, mjOBJ_BODY, "box3") >= 0, n == 4);
        ck_assert_int_eq(m->nq, 8 + 3 * n);
        double q[20] = {0}, v[20] = {0};
        for (int b = 0; b < n; b++) {
            char name[16];
            snprintf(name, sizeof name, "box%d_x", b);
            q[qadr(m, name)] = 0.1 + 0.1 * b;
            v[qadr(m, name)] = 0.5 + b;
            snprintf(name, sizeof name, "box%d_z", b);
            q[qadr(m, name)] = 0.3 + 0.1 * b;
            v[qadr(m, name)] = -0.5 - b;
            snprintf(name, sizeof name, "box%d_y", b);
            q[qadr(m, name)] = 0.4 * b;
            v[qadr(m, name)] = 2.0 + b;
        }
        s.extra[0] = 0.3;
        s.extra[1] = 0.022;
        sim_at(&s, q, v, NULL);
        /* box_pos [n, 4]: x, z and the half-angle quaternion; box_vel: x, y (the hinge), z per box. */
        for (int b = 0; b < n; b++) {
            NEAR(s.obs[4][4 * b], 0.1 + 0.1 * b, 1e-12);
            NEAR(s.obs[4][4 * b + 1], 0.3 + 0.1 * b, 1e-12);
            NEAR(s.obs[4][4 * b + 2], cos(0.2 * b), 1e-12);
            NEAR(s.obs[4][4 * b + 3], sin(0.2 * b), 1e-12);
            NEAR(s.obs[5][3 * b], 0.5 + b, 0);
            NEAR(s.obs[5][3 * b + 1], 2.0 + b, 0);
            NEAR(s.obs[5][3 * b + 2], -0.5 - b, 0);
        }
        NEAR(s.obs[6][0], 0.3, 1e-12);
        NEAR(s.obs[6][1], 0.022, 1e-12);
        NEAR(s.obs[3][1], 0.4 + 0.45, 1e-12); /* the hand straight up */
        /* Reward: box 0 on the target (1 mm in front of it), the hand far above: the gaussian of 1 mm
         * over a margin of 2 box sizes. */
        q[qadr(m, "box0_x")] = 0.3;
        q[qadr(m, "box0_z")] = 0.022;
        double x = 0.001 / 0.044;
        NEAR(sim_at(&s, q, NULL, NULL), pow(0.1, x * x), 1e-12);
        /* The target 5 cm below the grasp site: the hand is too close (gaussian at 5 margins). */
        s.extra[0] = 0.0;
        s.extra[1] = 0.915 - 0.05;
        q[qadr(m, "box0_x")] = 0.0;
        q[qadr(m, "box0_z")] = 0.865;
        ck_assert(sim_at(&s, q, NULL, NULL) < 1e-20);

        crl_rng rng;
        bool heights[4] = {false};
        for (int seed = 0; seed < 40; seed++) {
            crl_rng_init(&rng, (uint64_t)seed, 0);
            mj_resetData(m, s.d);
            s.dm.task->init(&s.dm, s.d, s.extra, &rng);
            mj_forward(m, s.d);
            ck_assert_int_eq(s.d->ncon, 0);
            ck_assert(fabs(s.extra[0]) <= 0.37);
            int level = (int)lround((s.extra[1] / 0.022 - 1) / 2);
            ck_assert(level >= 0 && level < n);
            NEAR(s.extra[1], 0.022 * (2 * level + 1), 1e-15);
            heights[level] = true;
            for (int b = 0; b < n; b++) {
                char name[16];
                snprintf(name, sizeof name, "box%d_x", b);
                ck_assert(s.d->qpos[qadr(m, name)] >= 0.1 && s.d->qpos[qadr(m, name)] <= 0.3);
            }
        }
        for (int k = 0; k < n; k++)
            ck_assert_msg(heights[k], "stack_%d: no target at level %d in 40 draws", n, k);
        sim_close(&s);
    }
}
END_TEST

/* Through the host each stacker env's target_pos is its own target (kept in its state after qvel). */
START_TEST(test_stacker_batch_targets)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = stacker/stack_2\nnum_envs = 3\nseed = 6\n"
                            "return_state = true\n", &e), e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    enum { W = 1 + 14 + 14 + 2 };
    for (int t = 0; t < 5; t++) {
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        crl_td *next = crl_td_get_td(td, "next");
        const double *st = leaf_f64(next, "state"), *tp = leaf_f64(next, "target_pos");
        for (int i = 0; i < 3; i++) {
            NEAR(tp[2 * i], st[W * i + 29], 1e-12);
            NEAR(tp[2 * i + 1], st[W * i + 30], 1e-12);
        }
        ck_assert(st[29] != st[W + 29] || st[W + 29] != st[2 * W + 29]);
        crl_td *nx = crl_env_step_mdp(h.env, td, &e);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* ---- lqr ---- */

/* A sphere of radius 0.1 at MuJoCo's default density 1000, worked out here rather than read back. */
#define LQR_MASS (4.0 / 3.0 * M_PI * 0.001 * 1000.0)

/* One semi-implicit Euler step (MuJoCo's, with no damping) of the suite's chain of n slide joints, each
 * body's joint sliding it along y relative to its parent: body j sits at sum_{i <= j} q_i, so the mass
 * matrix is M[i][k] = sum_{j >= max(i, k)} m_j; the forces are the springs -k_i q_i and, on the first
 * n_act joints, the motors' controls (gear 1).  Solved by Gaussian elimination. */
static void lqr_expected_step(int n, int n_act, const double *stiff, const double *u, double dt, double *q,
                              double *v)
{
    double a[6][7];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n; k++)
            a[i][k] = LQR_MASS * (n - (i > k ? i : k));
        a[i][n] = -stiff[i] * q[i] + (i < n_act ? u[i] : 0.0);
    }
    for (int c = 0; c < n; c++)
        for (int r = c + 1; r < n; r++) {
            double f = a[r][c] / a[c][c];
            for (int k = c; k <= n; k++)
                a[r][k] -= f * a[c][k];
        }
    double acc[6];
    for (int r = n - 1; r >= 0; r--) {
        double x = a[r][n];
        for (int k = r + 1; k < n; k++)
            x -= a[r][k] * acc[k];
        acc[r] = x / a[r][r];
    }
    for (int i = 0; i < n; i++) {
        v[i] += dt * acc[i];
        q[i] += dt * v[i];
    }
}

/* The generated chain, its per-env stiffness, observations, reward, initial states and model draws. */
START_TEST(test_lqr)
{
    static const struct {
        const dmc_task *t;
        int n, n_act;
    } chains[] = {{&dmc_lqr_lqr_2_1, 2, 1}, {&dmc_lqr_lqr_6_2, 6, 2}};
    for (size_t c = 0; c < 2; c++) {
        sim s;
        sim_open(&s, chains[c].t);
        const mjModel *m = s.dm.m;
        int n = chains[c].n;
        ck_assert_int_eq(m->nq, n);
        ck_assert_int_eq(m->nv, n);
        ck_assert_int_eq(m->nu, chains[c].n_act);
        ck_assert_int_eq(m->ntendon, n - 1);
        NEAR(m->opt.timestep, 0.03, 0);
        ck_assert(m->opt.disableflags & mjDSBL_CONSTRAINT);
        for (int i = 0; i < n; i++) {
            NEAR(m->body_mass[1 + i], LQR_MASS, 1e-12);
            NEAR(m->dof_damping[i], 0.0, 0);
        }
        for (int k = 0; k < m->nu; k++) {
            ck_assert(!m->actuator_ctrllimited[k]);
            ck_assert_int_eq(m->actuator_trnid[2 * k], k); /* motor_k drives joint_k */
            NEAR(m->actuator_gear[6 * k], 1.0, 0);
        }
        /* extra is the stiffness of each joint; the springs pull with -k_i q_i. */
        double q[6], v[6], u[2] = {0.7, -1.3};
        for (int i = 0; i < n; i++) {
            s.extra[i] = 15.5 + 1.5 * i;
            q[i] = 0.1 * (i + 1) * (i % 2 ? -1 : 1);
            v[i] = 0.05 * i - 0.1;
        }
        double r = sim_at(&s, q, v, u);
        double q2 = 0, u2 = 0;
        for (int i = 0; i < n; i++) {
            NEAR(s.d->qfrc_passive[i], -s.extra[i] * q[i], 1e-12);
            NEAR(s.obs[0][i], q[i], 0);
            NEAR(s.obs[1][i], v[i], 0);
            q2 += q[i] * q[i];
        }
        for (int k = 0; k < m->nu; k++)
            u2 += u[k] * u[k];
        NEAR(r, 1.0 - (0.5 * q2 + 0.1 * 0.5 * u2), 1e-15);
        ck_assert(!s.dm.task->terminate(&s.dm, s.d, s.extra));
        /* at the origin: the best reward, and the episode is over */
        NEAR(sim_at(&s, NULL, NULL, NULL), 1.0, 0);
        ck_assert(s.dm.task->terminate(&s.dm, s.d, s.extra));

        /* Initial positions uniform on the sphere of radius sqrt(2), at rest; stiffnesses in [15, 25]. */
        crl_rng rng;
        double mean[6] = {0}, lo = 100, hi = 0;
        enum { DRAWS = 400 };
        for (int seed = 0; seed < DRAWS; seed++) {
            crl_rng_init(&rng, (uint64_t)seed, 0);
            s.dm.task->seed(&s.dm, s.extra, &rng);
            for (int i = 0; i < n; i++) {
                ck_assert(s.extra[i] >= 15.0 && s.extra[i] <= 25.0);
                lo = fmin(lo, s.extra[i]);
                hi = fmax(hi, s.extra[i]);
            }
            mj_resetData(m, s.d);
            s.dm.task->init(&s.dm, s.d, s.extra, &rng);
            double norm = 0;
            for (int i = 0; i < n; i++) {
                norm += s.d->qpos[i] * s.d->qpos[i];
                NEAR(s.d->qvel[i], 0.0, 0);
                mean[i] += s.d->qpos[i] / DRAWS;
            }
            NEAR(sqrt(norm), sqrt(2.0), 1e-12);
        }
        /* spread over the range, centred on the origin (a coordinate's sd on the sphere is under 1) */
        ck_assert(lo < 16 && hi > 24);
        for (int i = 0; i < n; i++)
            ck_assert_msg(fabs(mean[i]) < 0.25, "%s: mean qpos[%d] = %g", chains[c].t->id, i, mean[i]);
        sim_close(&s);
    }
}
END_TEST

/* Through the host: the state is (time, qpos, qvel, stiffnesses); a step from a hand-set state follows
 * the chain's equations of motion worked out independently; the action is unbounded. */
START_TEST(test_lqr_dynamics)
{
    static const struct {
        const char *id;
        int n, n_act;
    } chains[] = {{"lqr/lqr_2_1", 2, 1}, {"lqr/lqr_6_2", 6, 2}};
    for (size_t c = 0; c < 2; c++) {
        crl_error e = {0};
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nnum_envs = 2\nseed = 9\nreturn_state = true\n",
                 chains[c].id);
        henv h;
        EXPECT_OK(henv_open(&h, ini, &e), e);
        int n = chains[c].n, na = chains[c].n_act, sd = 1 + 3 * n;
        const crl_spec *act = crl_env_action_spec(h.env);
        ck_assert_ptr_nonnull(act);
        crl_td *td = crl_env_reset(h.env, NULL, &e);
        ck_assert_ptr_nonnull(td);
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        /* the suite's motors have no ctrlrange: the action spec is (-inf, inf) */
        const crl_tensor *low = crl_spec_low(act), *high = crl_spec_high(act);
        ck_assert_ptr_nonnull(low);
        ck_assert_int_eq(crl_tensor_numel(low), 2 * chains[c].n_act);
        for (int64_t j = 0; j < crl_tensor_numel(low); j++) {
            ck_assert(isinf(((const double *)crl_tensor_data(low))[j]) &&
                      ((const double *)crl_tensor_data(low))[j] < 0);
            ck_assert(isinf(((const double *)crl_tensor_data(high))[j]) &&
                      ((const double *)crl_tensor_data(high))[j] > 0);
        }
        ck_assert(crl_spec_is_in(act, crl_td_get(td, "action")));
        double *state = crl_tensor_data(crl_td_get(td, "state"));
        double q[2][6], v[2][6], k[2][6], u[2][2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < n; j++) {
                q[i][j] = 0.2 * sin(1.0 + j + 3 * i);
                v[i][j] = 0.3 * cos(2.0 * j - i);
                k[i][j] = 16.0 + j + 2.5 * i;
                state[i * sd + 1 + j] = q[i][j];
                state[i * sd + 1 + n + j] = v[i][j];
                state[i * sd + 1 + 2 * n + j] = k[i][j];
            }
        crl_td *back = crl_env_reset_from_state(h.env, td, &e);
        ck_assert_msg(back != NULL, "%s", e.message);
        EXPECT_OK(crl_env_rand_action(h.env, back, &e), e);
        double *a = crl_tensor_data(crl_td_get(back, "action"));
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < na; j++)
                a[i * na + j] = u[i][j] = 3.0 * (j + 1) * (i ? -1 : 1); /* beyond [-1, 1]: no control limit */
        EXPECT_OK(crl_env_step(h.env, back, &e), e);
        crl_td *next = crl_td_get_td(back, "next");
        const double *pos = leaf_f64(next, "position"), *vel = leaf_f64(next, "velocity");
        const double *rew = leaf_f64(next, "reward");
        const double *st = leaf_f64(next, "state");
        for (int i = 0; i < 2; i++) {
            lqr_expected_step(n, na, k[i], u[i], 0.03, q[i], v[i]);
            double q2 = 0, u2 = 0;
            for (int j = 0; j < n; j++) {
                NEAR(pos[i * n + j], q[i][j], 1e-9);
                NEAR(vel[i * n + j], v[i][j], 1e-9);
                NEAR(st[i * sd + 1 + 2 * n + j], k[i][j], 0);
                q2 += q[i][j] * q[i][j];
            }
            for (int j = 0; j < na; j++)
                u2 += u[i][j] * u[i][j];
            NEAR(rew[i], 1.0 - (0.5 * q2 + 0.05 * u2), 1e-9);
            ck_assert(!((const bool *)crl_tensor_data(crl_td_get(next, "terminated")))[i]);
        }
        crl_td_unref(back);
        crl_td_unref(td);
        henv_close(&h);
    }
}
END_TEST

/* The episode is terminated (not truncated) once the norm of (qpos, qvel) falls below 1e-6, checked on
 * the state after the step; just above it runs on; no step limit ever truncates. */
START_TEST(test_lqr_terminate)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = lqr/lqr_2_1\nnum_envs = 2\nreturn_state = true\n",
                        &e), e);
    ck_assert_int_eq(crl_env_max_episode_steps(h.env), 0);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    double *state = crl_tensor_data(crl_td_get(td, "state")); /* time, qpos 2, qvel 2, stiffness 2 */
    /* env 0 well below the threshold, env 1 above it, at rest, both with stiffness 20 */
    double q0[2][2] = {{4e-7, -3e-7}, {2e-6, 1.5e-6}};
    double k[2] = {20, 20}, zero[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        state[7 * i + 1] = q0[i][0];
        state[7 * i + 2] = q0[i][1];
        state[7 * i + 3] = state[7 * i + 4] = 0.0;
        state[7 * i + 5] = state[7 * i + 6] = 20.0;
    }
    crl_td *back = crl_env_reset_from_state(h.env, td, &e);
    ck_assert_msg(back != NULL, "%s", e.message);
    EXPECT_OK(crl_env_rand_action(h.env, back, &e), e);
    double *a = crl_tensor_data(crl_td_get(back, "action"));
    a[0] = a[1] = 0.0;
    EXPECT_OK(crl_env_step(h.env, back, &e), e);
    crl_td *next = crl_td_get_td(back, "next");
    const bool *term = crl_tensor_data(crl_td_get(next, "terminated"));
    const bool *trunc = crl_tensor_data(crl_td_get(next, "truncated"));
    const bool *done = crl_tensor_data(crl_td_get(next, "done"));
    for (int i = 0; i < 2; i++) {
        double q[2] = {q0[i][0], q0[i][1]}, v[2] = {0, 0};
        lqr_expected_step(2, 1, k, zero, 0.03, q, v);
        double norm = sqrt(q[0] * q[0] + q[1] * q[1] + v[0] * v[0] + v[1] * v[1]);
        ck_assert(i == 0 ? norm < 0.9e-6 : norm > 1.1e-6); /* far from the threshold either way */
        ck_assert_msg(term[i] == (i == 0), "env %d: terminated %d at state norm %g", i, term[i], norm);
        ck_assert(!trunc[i]);
        ck_assert(done[i] == (i == 0));
    }
    /* The reward of the final step is still given. */
    NEAR(leaf_f64(next, "reward")[0], 1.0, 1e-12);
    crl_td_unref(back);
    crl_td_unref(td);

    /* 1500 steps (past any of the suite's usual limits) from a random start: neither flag is ever set. */
    td = crl_env_reset(h.env, NULL, &e);
    for (int s = 0; s < 1500; s++) {
        EXPECT_OK(crl_env_rand_action(h.env, td, &e), e);
        a = crl_tensor_data(crl_td_get(td, "action"));
        a[0] = 0.1 * sin(0.05 * s);
        a[1] = -a[0];
        EXPECT_OK(crl_env_step(h.env, td, &e), e);
        next = crl_td_get_td(td, "next");
        for (int i = 0; i < 2; i++) {
            ck_assert(!((const bool *)crl_tensor_data(crl_td_get(next, "terminated")))[i]);
            ck_assert_msg(!((const bool *)crl_tensor_data(crl_td_get(next, "truncated")))[i], "step %d", s);
        }
        crl_td *nx = crl_env_step_mdp(h.env, td, &e);
        ck_assert_ptr_nonnull(nx);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* Each env's stiffnesses are drawn when it is seeded and hold over later episodes, as the suite's model
 * built from the seed does; the same seed draws them again, another seed others. */
START_TEST(test_lqr_seed_draws)
{
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = lqr/lqr_6_2\nnum_envs = 3\nreturn_state = true\n",
                        &e), e);
    enum { SD = 19 };   /* time, qpos 6, qvel 6, stiffness 6 */
    double first[3][SD], later[3][SD], again[3][SD], other[3][SD];
    crl_env_set_seed(h.env, 31);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    memcpy(first, leaf_f64(td, "state"), sizeof first);
    crl_td_unref(td);
    td = crl_env_reset(h.env, NULL, &e); /* a new episode, no new seed */
    memcpy(later, leaf_f64(td, "state"), sizeof later);
    crl_td_unref(td);
    crl_env_set_seed(h.env, 31);
    td = crl_env_reset(h.env, NULL, &e);
    memcpy(again, leaf_f64(td, "state"), sizeof again);
    crl_td_unref(td);
    crl_env_set_seed(h.env, 32);
    td = crl_env_reset(h.env, NULL, &e);
    memcpy(other, leaf_f64(td, "state"), sizeof other);
    crl_td_unref(td);
    for (int i = 0; i < 3; i++) {
        for (int j = 13; j < SD; j++) {
            ck_assert(first[i][j] >= 15 && first[i][j] <= 25);
            NEAR(later[i][j], first[i][j], 0);
            NEAR(again[i][j], first[i][j], 0);
        }
        ck_assert(memcmp(first[i] + 1, later[i] + 1, 6 * sizeof(double)) != 0); /* new initial state */
        ck_assert(memcmp(first[i], again[i], sizeof first[i]) == 0);
        ck_assert(memcmp(first[i] + 13, other[i] + 13, 6 * sizeof(double)) != 0);
        if (i)
            ck_assert(memcmp(first[i] + 13, first[0] + 13, 6 * sizeof(double)) != 0); /* per env */
    }
    henv_close(&h);
}
END_TEST

/* bind refuses a matrix leaf's buffer that is missing, flat or of the wrong dtype, naming the shape. */
START_TEST(test_matrix_bind)
{
    crl_error e = {0};
    crl_host *host = crl_host_new(NULL, &e);
    EXPECT_OK(crl_host_load_name(host, "dm_control", &e), e);
    const crl_component *c = crl_host_find(host, CRL_KIND_ENV, "dm_control");
    ck_assert_ptr_nonnull(c);
    const crl_env_ops *ops = c->ops;
    crl_env_specs sp = {.struct_size = sizeof sp};
    void *env = NULL;
    EXPECT_OK(ops->make("manipulator/bring_ball", 2, NULL, &sp, &env, &e), e);
    const crl_spec *arm = crl_spec_composite_get(sp.observation, "arm_pos");
    ck_assert_int_eq(crl_spec_ndim(arm), 3);
    int64_t batch[1] = {2};
    static const struct {
        crl_dtype dt;
        int ndim;
        int64_t shape[3];
        int code;
    } bad[] = {
        {CRL_F64, 0, {0}, CRL_E_NOT_FOUND},
        {CRL_F64, 2, {2, 16}, CRL_E_SHAPE},
        {CRL_F64, 3, {2, 2, 8}, CRL_E_SHAPE},
        {CRL_F32, 3, {2, 8, 2}, CRL_E_SHAPE},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        crl_td *bufs = crl_td_new(1, batch, &e);
        ck_assert_ptr_nonnull(bufs);
        if (bad[k].ndim) {
            crl_tensor *t = crl_tensor_new(bad[k].dt, bad[k].ndim, bad[k].shape, &e);
            ck_assert_ptr_nonnull(t);
            EXPECT_OK(crl_td_set(bufs, "arm_pos", t, &e), e);
            crl_tensor_unref(t);
        }
        e = (crl_error){0};
        ck_assert_int_eq(ops->bind(env, bufs, &e), bad[k].code);
        EXPECT_MSG(e, bad[k].code, "arm_pos");
        EXPECT_MSG(e, bad[k].code, "[2, 8, 2]");
        crl_td_unref(bufs);
    }
    ops->close(env);
    crl_spec_unref(sp.observation);
    crl_spec_unref(sp.action);
    crl_spec_unref(sp.reward);
    crl_spec_unref(sp.done);
    crl_spec_unref(sp.state);
    crl_host_free(host);
}
END_TEST

static Suite *tasks_suite(void)
{
    Suite *s = suite_create("dm_control_tasks");
    TCase *tc = tcase_create("tasks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cartpole_poles);
    tcase_add_test(tc, test_generated_bad_suite);
    tcase_add_test(tc, test_point_mass_hard);
    tcase_add_test(tc, test_humanoid_observations);
    tcase_add_test(tc, test_humanoid_rewards);
    tcase_add_test(tc, test_humanoid_init);
    tcase_add_test(tc, test_swimmer);
    tcase_add_test(tc, test_fish);
    tcase_add_test(tc, test_quadruped_models);
    tcase_add_test(tc, test_quadruped_observations);
    tcase_add_test(tc, test_quadruped_rewards);
    tcase_add_test(tc, test_quadruped_init);
    tcase_add_test(tc, test_quadruped_escape);
    tcase_add_test(tc, test_quadruped_escape_bad_suite);
    tcase_add_test(tc, test_manipulator);
    tcase_add_test(tc, test_stacker);
    tcase_add_test(tc, test_lqr);
    tcase_add_loop_test(tc, test_suite_xml_rollout, 0, N_NEW);
    suite_add_tcase(s, tc);
    tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_specs, 0, N_NEW);
    tcase_add_loop_test(tc, test_control_timestep, 0, N_NEW);
    tcase_add_loop_test(tc, test_deterministic, 0, N_NEW);
    tcase_add_test(tc, test_point_mass_hard_batch);
    tcase_add_test(tc, test_swimmer_batch_targets);
    tcase_add_test(tc, test_quadruped_reset_observation);
    tcase_add_test(tc, test_quadruped_escape_batch);
    tcase_add_test(tc, test_manipulator_batch_targets);
    tcase_add_test(tc, test_stacker_batch_targets);
    tcase_add_test(tc, test_matrix_bind);
    tcase_add_test(tc, test_lqr_dynamics);
    tcase_add_test(tc, test_lqr_terminate);
    tcase_add_test(tc, test_lqr_seed_draws);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tasks_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
