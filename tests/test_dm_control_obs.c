/* Check suite for the dm_control plugin's observations: every task's observation dict against the
 * suite's get_observation (names, shapes, dtypes, values) at reset and at every step, recomputed here
 * from a shadow MuJoCo simulation of each env.
 *
 * The shadow is independent of the plugin's task code: it starts from the state the env reports
 * (return_state: time, qpos, qvel, act, then the task's per-episode draws), applies the per-episode model
 * edits as the suite's initialize_episode does (reacher's, swimmer's, fish's, manipulator's and stacker's
 * targets, finger/turn's target site, point_mass/hard's actuation directions, quadruped/escape's terrain
 * rebuilt here from its bumps without the plugin's spline code, on a copy of the model per
 * env, where the plugin writes them into its shared model before each env's step), forwards as
 * Physics.after_reset does, steps with the same actions the way dm_control's Physics.step does
 * (mj_step2, mj_step .. , mj_step1; RK4 models mj_step throughout) and reads every observation from
 * mjData/mjModel fields by name as the suite's Python does.  Only the model itself comes from the plugin's
 * loader.  Copies of physics state must match bit for bit; the suite's norms may differ by rounding.
 * Tasks whose state does not carry all a step starts from are followed step by step from the env's
 * state instead (task_case.resync says which and why). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/rng.h>

#include "dmc-test.h"

#include "dmc.h"

#define MAX_LEAF 64
#define NUM 3
#define STEPS 60

typedef struct expected {
    int n;
    const char *name[DMC_MAX_OBS];
    int dim[DMC_MAX_OBS];
    int cols[DMC_MAX_OBS];    /* 0: a vector; else a [dim / cols, cols] matrix (manipulator's arm_pos) */
    bool scalar[DMC_MAX_OBS]; /* a numpy scalar in the suite: shape () there, [1] here */
    double v[DMC_MAX_OBS][MAX_LEAF];
    bool exact[DMC_MAX_OBS];  /* a copy of physics state (else computed: a norm) */
    /* the constraint solver's result in a task the shadow resyncs (touch, force/torque): the solve
     * starts from a warm start the state does not carry, so it agrees to the solver's tolerance */
    double solver_tol[DMC_MAX_OBS];
} expected;

static double *leaf(expected *x, const char *name, int dim, bool exact)
{
    ck_assert_int_lt(x->n, DMC_MAX_OBS);
    ck_assert_int_le(dim, MAX_LEAF);
    x->name[x->n] = name;
    x->dim[x->n] = dim;
    x->cols[x->n] = 0;
    x->scalar[x->n] = false;
    x->exact[x->n] = exact;
    x->solver_tol[x->n] = 0;
    return x->v[x->n++];
}

/* A rows x cols leaf, row-major as numpy's */
static double *matrix(expected *x, const char *name, int rows, int cols, bool exact)
{
    double *v = leaf(x, name, rows * cols, exact);
    x->cols[x->n - 1] = cols;
    return v;
}

/* The last leaf comes from the constraint solver (see expected.solver_tol): opt.tolerance, the
 * solver's own stopping criterion, relative. */
static void solved(expected *x, const mjModel *m)
{
    x->exact[x->n - 1] = false;
    x->solver_tol[x->n - 1] = m->opt.tolerance;
}

static void scalar(expected *x, const char *name, double v, bool exact)
{
    leaf(x, name, 1, exact)[0] = v;
    x->scalar[x->n - 1] = true;
}

static int id_of(const mjModel *m, int type, const char *name)
{
    int id = mj_name2id(m, type, name);
    ck_assert_msg(id >= 0, "the model has no object '%s' of type %d", name, type);
    return id;
}

/* named.data.sensordata['name'][k] */
static double sensor(const mjModel *m, const mjData *d, const char *name, int k)
{
    return d->sensordata[m->sensor_adr[id_of(m, mjOBJ_SENSOR, name)] + k];
}

/* named.data.xmat['body', 'ab'] with a, b in x, y, z */
static double xmat(const mjModel *m, const mjData *d, const char *body, const char *ab)
{
    int b = id_of(m, mjOBJ_BODY, body);
    return d->xmat[9 * b + 3 * (ab[0] - 'x') + (ab[1] - 'x')];
}

static void copy_into(double *dst, const double *src, int n)
{
    memcpy(dst, src, sizeof(double) * (size_t)n);
}

/* ---- the suite's get_observation, per domain (dm_control/suite/DOMAIN.py) ---- */

static void obs_cartpole(const mjModel *m, const mjData *d, expected *x)
{
    /* bounded_position: cart_position, then xmat[2:, ['zz', 'xz']].ravel() */
    double *p = leaf(x, "position", 1 + 2 * (m->nbody - 2), true);
    p[0] = d->qpos[m->jnt_qposadr[id_of(m, mjOBJ_JOINT, "slider")]];
    for (int b = 2; b < m->nbody; b++) {
        p[1 + 2 * (b - 2)] = d->xmat[9 * b + 8];
        p[2 + 2 * (b - 2)] = d->xmat[9 * b + 2];
    }
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

static void obs_pendulum(const mjModel *m, const mjData *d, expected *x)
{
    double *o = leaf(x, "orientation", 2, true);
    o[0] = xmat(m, d, "pole", "zz");
    o[1] = xmat(m, d, "pole", "xz");
    /* named.data.qvel['hinge'] is a 1-vector, not a scalar */
    leaf(x, "velocity", 1, true)[0] = d->qvel[m->jnt_dofadr[id_of(m, mjOBJ_JOINT, "hinge")]];
}

static void obs_acrobot(const mjModel *m, const mjData *d, expected *x)
{
    double *o = leaf(x, "orientations", 4, true);
    o[0] = xmat(m, d, "upper_arm", "xz");
    o[1] = xmat(m, d, "lower_arm", "xz");
    o[2] = xmat(m, d, "upper_arm", "zz");
    o[3] = xmat(m, d, "lower_arm", "zz");
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

static void obs_qpos_qvel(const mjModel *m, const mjData *d, expected *x)
{
    copy_into(leaf(x, "position", m->nq, true), d->qpos, m->nq);
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

static void obs_reacher(const mjModel *m, const mjData *d, expected *x)
{
    copy_into(leaf(x, "position", m->nq, true), d->qpos, m->nq);
    const double *target = d->geom_xpos + 3 * id_of(m, mjOBJ_GEOM, "target");
    const double *finger = d->geom_xpos + 3 * id_of(m, mjOBJ_GEOM, "finger");
    double *t = leaf(x, "to_target", 2, true);
    t[0] = target[0] - finger[0];
    t[1] = target[1] - finger[1];
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

/* cheetah and hopper: qpos[1:] (translation invariant) */
static void obs_cheetah(const mjModel *m, const mjData *d, expected *x)
{
    copy_into(leaf(x, "position", m->nq - 1, true), d->qpos + 1, m->nq - 1);
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

static void obs_walker(const mjModel *m, const mjData *d, expected *x)
{
    double *o = leaf(x, "orientations", 2 * (m->nbody - 1), true);
    for (int b = 1; b < m->nbody; b++) {
        o[2 * (b - 1)] = d->xmat[9 * b];
        o[2 * (b - 1) + 1] = d->xmat[9 * b + 2];
    }
    scalar(x, "height", d->xpos[3 * id_of(m, mjOBJ_BODY, "torso") + 2], true);
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

static void obs_hopper(const mjModel *m, const mjData *d, expected *x)
{
    obs_cheetah(m, d, x);
    double *t = leaf(x, "touch", 2, true);
    t[0] = log1p(sensor(m, d, "touch_toe", 0));
    t[1] = log1p(sensor(m, d, "touch_heel", 0));
}

static void obs_finger_common(const mjModel *m, const mjData *d, expected *x, double tip[2])
{
    tip[0] = sensor(m, d, "tip", 0) - sensor(m, d, "spinner", 0);
    tip[1] = sensor(m, d, "tip", 2) - sensor(m, d, "spinner", 2);
    double *p = leaf(x, "position", 4, true);
    p[0] = sensor(m, d, "proximal", 0);
    p[1] = sensor(m, d, "distal", 0);
    p[2] = tip[0];
    p[3] = tip[1];
    double *v = leaf(x, "velocity", 3, true);
    v[0] = sensor(m, d, "proximal_velocity", 0);
    v[1] = sensor(m, d, "distal_velocity", 0);
    v[2] = sensor(m, d, "hinge_velocity", 0);
    double *t = leaf(x, "touch", 2, true);
    t[0] = log1p(sensor(m, d, "touchtop", 0));
    t[1] = log1p(sensor(m, d, "touchbottom", 0));
}

static void obs_finger_spin(const mjModel *m, const mjData *d, expected *x)
{
    double tip[2];
    obs_finger_common(m, d, x, tip);
}

static void obs_finger_turn(const mjModel *m, const mjData *d, expected *x)
{
    double tip[2];
    obs_finger_common(m, d, x, tip);
    double *tp = leaf(x, "target_position", 2, true);
    tp[0] = sensor(m, d, "target", 0) - sensor(m, d, "spinner", 0);
    tp[1] = sensor(m, d, "target", 2) - sensor(m, d, "spinner", 2);
    double dx = tp[0] - tip[0], dz = tp[1] - tip[1];
    scalar(x, "dist_to_target", sqrt(dx * dx + dz * dz) - m->site_size[3 * id_of(m, mjOBJ_SITE, "target")],
           false);
}

/* named.data.qpos['joint'] / qvel['joint'] of a one-dof joint */
static double qpos_of(const mjModel *m, const mjData *d, const char *joint)
{
    return d->qpos[m->jnt_qposadr[id_of(m, mjOBJ_JOINT, joint)]];
}

static double qvel_of(const mjModel *m, const mjData *d, const char *joint)
{
    return d->qvel[m->jnt_dofadr[id_of(m, mjOBJ_JOINT, joint)]];
}

/* numpy's v.dot(R) for a 3-vector and a row-major 3x3 frame: v expressed in the frame's axes */
static void dot_frame(const double v[3], const double *frame, double *out)
{
    for (int j = 0; j < 3; j++)
        out[j] = v[0] * frame[j] + v[1] * frame[3 + j] + v[2] * frame[6 + j];
}

static void sub3(const double *a, const double *b, double out[3])
{
    for (int j = 0; j < 3; j++)
        out[j] = a[j] - b[j];
}

static const double *body_xpos(const mjModel *m, const mjData *d, const char *body)
{
    return d->xpos + 3 * id_of(m, mjOBJ_BODY, body);
}

static const double *body_xmat(const mjModel *m, const mjData *d, const char *body)
{
    return d->xmat + 9 * id_of(m, mjOBJ_BODY, body);
}

/* Humanoid, fish and quadruped have free bodies: their leaves computed from body poses agree to
 * rounding only (see task_case.resync), copies of qpos and qvel bit for bit. */

/* Humanoid (pure_state False): joint_angles qpos[7:], head_height, extremities in the torso frame,
 * torso_vertical xmat['torso', ['zx', 'zy', 'zz']], com_velocity the subtree sensor, velocity qvel. */
static void obs_humanoid(const mjModel *m, const mjData *d, expected *x)
{
    copy_into(leaf(x, "joint_angles", m->nq - 7, true), d->qpos + 7, m->nq - 7);
    scalar(x, "head_height", body_xpos(m, d, "head")[2], false);
    double *e = leaf(x, "extremities", 12, false);
    const double *torso = body_xpos(m, d, "torso"), *frame = body_xmat(m, d, "torso");
    static const char *const limbs[] = {"left_hand", "left_foot", "right_hand", "right_foot"};
    for (int l = 0; l < 4; l++) {
        double v[3];
        sub3(body_xpos(m, d, limbs[l]), torso, v);
        dot_frame(v, frame, e + 3 * l);
    }
    double *tv = leaf(x, "torso_vertical", 3, false);
    tv[0] = xmat(m, d, "torso", "zx");
    tv[1] = xmat(m, d, "torso", "zy");
    tv[2] = xmat(m, d, "torso", "zz");
    double *cv = leaf(x, "com_velocity", 3, false);
    for (int j = 0; j < 3; j++)
        cv[j] = sensor(m, d, "torso_subtreelinvel", j);
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

/* Swimmer: joints qpos[3:], to_target the nose-to-target vector in the head's frame (x, y), and
 * body_velocities: sensordata[12:] as rows of 6 (velocimeter, gyro per body), columns 0, 1, 5. */
static void obs_swimmer(const mjModel *m, const mjData *d, expected *x)
{
    copy_into(leaf(x, "joints", m->nq - 3, true), d->qpos + 3, m->nq - 3);
    double v[3], t[3];
    sub3(d->geom_xpos + 3 * id_of(m, mjOBJ_GEOM, "target"), d->geom_xpos + 3 * id_of(m, mjOBJ_GEOM, "nose"), v);
    dot_frame(v, body_xmat(m, d, "head"), t);
    double *tt = leaf(x, "to_target", 2, false);
    tt[0] = t[0];
    tt[1] = t[1];
    int rows = (m->nsensordata - 12) / 6;
    ck_assert_int_eq(12 + 6 * rows, m->nsensordata);
    double *bv = leaf(x, "body_velocities", 3 * rows, true);
    for (int r = 0; r < rows; r++) {
        bv[3 * r] = d->sensordata[12 + 6 * r];
        bv[3 * r + 1] = d->sensordata[12 + 6 * r + 1];
        bv[3 * r + 2] = d->sensordata[12 + 6 * r + 5];
    }
}

static const char *const fish_joints[] = {"tail1",          "tail_twist",    "tail2",        "finright_roll",
                                          "finright_pitch", "finleft_roll", "finleft_pitch"};

static void obs_fish_common(const mjModel *m, const mjData *d, expected *x)
{
    double *ja = leaf(x, "joint_angles", 7, true);
    for (int k = 0; k < 7; k++)
        ja[k] = qpos_of(m, d, fish_joints[k]);
    scalar(x, "upright", xmat(m, d, "torso", "zz"), false);
}

static void obs_fish_upright(const mjModel *m, const mjData *d, expected *x)
{
    obs_fish_common(m, d, x);
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

/* Swim adds target: the mouth-to-target vector in the mouth geom's frame. */
static void obs_fish_swim(const mjModel *m, const mjData *d, expected *x)
{
    obs_fish_common(m, d, x);
    int mouth = id_of(m, mjOBJ_GEOM, "mouth");
    double v[3];
    sub3(d->geom_xpos + 3 * id_of(m, mjOBJ_GEOM, "target"), d->geom_xpos + 3 * mouth, v);
    dot_frame(v, d->geom_xmat + 9 * mouth, leaf(x, "target", 3, false));
    copy_into(leaf(x, "velocity", m->nv, true), d->qvel, m->nv);
}

/* The sensors of the given types, in sensor order (Physics._get_sensor_names). */
static int sensors_of(const mjModel *m, const mjData *d, int type1, int type2, double *out, bool arcsinh)
{
    int n = 0;
    for (int s = 0; s < m->nsensor; s++)
        if (m->sensor_type[s] == type1 || m->sensor_type[s] == type2)
            for (int j = 0; j < m->sensor_dim[s]; j++, n++)
                if (out)
                    out[n] = arcsinh ? asinh(d->sensordata[m->sensor_adr[s] + j]) : d->sensordata[m->sensor_adr[s] + j];
    return n;
}

/* Quadruped's _common_observations: egocentric_state (the hinges' qpos, qvel, then act),
 * torso_velocity (velocimeter), torso_upright, imu (gyros and accelerometers), force_torque (arcsinh). */
static void obs_quadruped(const mjModel *m, const mjData *d, expected *x)
{
    int nh = 0;
    for (int j = 0; j < m->njnt; j++)
        nh += m->jnt_type[j] == mjJNT_HINGE;
    double *ego = leaf(x, "egocentric_state", 2 * nh + m->na, true);
    int k = 0;
    for (int j = 0; j < m->njnt; j++)
        if (m->jnt_type[j] == mjJNT_HINGE)
            ego[k++] = d->qpos[m->jnt_qposadr[j]];
    for (int j = 0; j < m->njnt; j++)
        if (m->jnt_type[j] == mjJNT_HINGE)
            ego[k++] = d->qvel[m->jnt_dofadr[j]];
    copy_into(ego + k, d->act, m->na);
    double *tv = leaf(x, "torso_velocity", 3, false);
    for (int j = 0; j < 3; j++)
        tv[j] = sensor(m, d, "velocimeter", j);
    scalar(x, "torso_upright", xmat(m, d, "torso", "zz"), false);
    int n_imu = sensors_of(m, d, mjSENS_GYRO, mjSENS_ACCELEROMETER, NULL, false);
    sensors_of(m, d, mjSENS_GYRO, mjSENS_ACCELEROMETER, leaf(x, "imu", n_imu, false), false);
    solved(x, m);
    int n_ft = sensors_of(m, d, mjSENS_FORCE, mjSENS_TORQUE, NULL, false);
    sensors_of(m, d, mjSENS_FORCE, mjSENS_TORQUE, leaf(x, "force_torque", n_ft, false), true);
    solved(x, m);
}

/* Fetch adds ball_state (the ball's position and linear velocity relative to the torso's, and its
 * angular velocity, as rows times the torso frame) and target_position in the torso frame. */
static void obs_quadruped_fetch(const mjModel *m, const mjData *d, expected *x)
{
    obs_quadruped(m, d, x);
    const double *torso = body_xpos(m, d, "torso"), *frame = body_xmat(m, d, "torso");
    const double *ball_v = d->qvel + m->jnt_dofadr[id_of(m, mjOBJ_JOINT, "ball_root")];
    const double *root_v = d->qvel + m->jnt_dofadr[id_of(m, mjOBJ_JOINT, "root")];
    double rows[3][3];
    sub3(body_xpos(m, d, "ball"), torso, rows[0]);
    sub3(ball_v, root_v, rows[1]);
    copy_into(rows[2], ball_v + 3, 3);
    double *bs = leaf(x, "ball_state", 9, false);
    for (int r = 0; r < 3; r++)
        dot_frame(rows[r], frame, bs + 3 * r);
    double v[3];
    sub3(d->site_xpos + 3 * id_of(m, mjOBJ_SITE, "target"), torso, v);
    dot_frame(v, frame, leaf(x, "target_position", 3, false));
}

/* Escape adds origin (-torso_pos . torso_frame) and rangefinder (tanh of the readings in sensor
 * order, 1.0 where one is -1: no intersection). */
static void obs_quadruped_escape(const mjModel *m, const mjData *d, expected *x)
{
    obs_quadruped(m, d, x);
    double *o = leaf(x, "origin", 3, false);
    dot_frame(body_xpos(m, d, "torso"), body_xmat(m, d, "torso"), o);
    for (int j = 0; j < 3; j++)
        o[j] = -o[j];
    int n = 0;
    for (int s = 0; s < m->nsensor; s++)
        n += m->sensor_type[s] == mjSENS_RANGEFINDER;
    double *rf = leaf(x, "rangefinder", n, false);
    n = 0;
    for (int s = 0; s < m->nsensor; s++)
        if (m->sensor_type[s] == mjSENS_RANGEFINDER) {
            double r = d->sensordata[m->sensor_adr[s]];
            rf[n++] = r == -1.0 ? 1.0 : tanh(r);
        }
}

static const char *const arm_joints[] = {"arm_root", "arm_shoulder", "arm_elbow", "arm_wrist",
                                         "finger",   "fingertip",    "thumb",     "thumbtip"};
static const char *const touch_sensors[] = {"palm_touch", "finger_touch", "thumb_touch", "fingertip_touch",
                                            "thumbtip_touch"};

/* body_2d_pose: xpos x, z and, with orientation, xquat w, y */
static void pose_2d(const mjModel *m, const mjData *d, const char *body, bool orientation, double *out)
{
    int b = id_of(m, mjOBJ_BODY, body);
    out[0] = d->xpos[3 * b];
    out[1] = d->xpos[3 * b + 2];
    if (orientation) {
        out[2] = d->xquat[4 * b];
        out[3] = d->xquat[4 * b + 2];
    }
}

/* Manipulator's and stacker's arm: arm_pos [sin, cos] rows per joint, arm_vel, touch (log1p), hand_pos. */
static void obs_arm(const mjModel *m, const mjData *d, expected *x)
{
    double *ap = matrix(x, "arm_pos", 8, 2, false);
    double *av = leaf(x, "arm_vel", 8, true);
    for (int k = 0; k < 8; k++) {
        ap[2 * k] = sin(qpos_of(m, d, arm_joints[k]));
        ap[2 * k + 1] = cos(qpos_of(m, d, arm_joints[k]));
        av[k] = qvel_of(m, d, arm_joints[k]);
    }
    double *t = leaf(x, "touch", 5, false);
    for (int k = 0; k < 5; k++)
        t[k] = log1p(sensor(m, d, touch_sensors[k], 0));
    solved(x, m);
    pose_2d(m, d, "hand", true, leaf(x, "hand_pos", 4, true));
}

/* Bring(use_peg=False): the ball and target_ball; object_vel the ball's joints x, z, y. */
static void obs_manipulator_ball(const mjModel *m, const mjData *d, expected *x)
{
    obs_arm(m, d, x);
    pose_2d(m, d, "ball", true, leaf(x, "object_pos", 4, true));
    double *ov = leaf(x, "object_vel", 3, true);
    ov[0] = qvel_of(m, d, "ball_x");
    ov[1] = qvel_of(m, d, "ball_z");
    ov[2] = qvel_of(m, d, "ball_y");
    pose_2d(m, d, "target_ball", true, leaf(x, "target_pos", 4, true));
}

/* Stack: box_pos rows per box, box_vel the boxes' joints x, y, z by name, target_pos x, z. */
static void obs_stacker(const mjModel *m, const mjData *d, expected *x)
{
    obs_arm(m, d, x);
    int n = 0;
    char name[32];
    for (;; n++) {
        snprintf(name, sizeof name, "box%d", n);
        if (mj_name2id(m, mjOBJ_BODY, name) < 0)
            break;
    }
    double *bp = matrix(x, "box_pos", n, 4, true);
    for (int b = 0; b < n; b++) {
        snprintf(name, sizeof name, "box%d", b);
        pose_2d(m, d, name, true, bp + 4 * b);
    }
    double *bv = leaf(x, "box_vel", 3 * n, true);
    for (int b = 0; b < n; b++)
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "box%d_%c", b, "xyz"[k]);
            bv[3 * b + k] = qvel_of(m, d, name);
        }
    pose_2d(m, d, "target", false, leaf(x, "target_pos", 2, true));
}

/* ---- the suite's per-episode model edits, from the env's extras ---- */

static void edit_none(mjModel *m, const double *extra)
{
    (void)m;
    (void)extra;
}

/* Reacher.initialize_episode: geom_pos['target', 'x'/'y'] */
static void edit_reacher(mjModel *m, const double *extra)
{
    int g = id_of(m, mjOBJ_GEOM, "target");
    m->geom_pos[3 * g] = extra[0];
    m->geom_pos[3 * g + 1] = extra[1];
}

/* Turn.initialize_episode: site_pos['target', 'x'/'z'] */
static void edit_finger_turn(mjModel *m, const double *extra)
{
    int s = id_of(m, mjOBJ_SITE, "target");
    m->site_pos[3 * s] = extra[0];
    m->site_pos[3 * s + 2] = extra[1];
}

/* PointMass(randomize_gains=True): wrap_prm[[0, 1]] = dir1, wrap_prm[[2, 3]] = dir2 */
static void edit_point_mass_hard(mjModel *m, const double *extra)
{
    for (int k = 0; k < 4; k++)
        m->wrap_prm[k] = extra[k];
}

/* Swimmer: geom_pos['target'] and light_pos['target_light'], x and y */
static void edit_swimmer(mjModel *m, const double *extra)
{
    int g = id_of(m, mjOBJ_GEOM, "target"), l = id_of(m, mjOBJ_LIGHT, "target_light");
    m->geom_pos[3 * g] = m->light_pos[3 * l] = extra[0];
    m->geom_pos[3 * g + 1] = m->light_pos[3 * l + 1] = extra[1];
}

/* Upright hides the target (geom_rgba alpha 0): nothing the physics sees. */
static void edit_fish_upright(mjModel *m, const double *extra)
{
    (void)extra;
    m->geom_rgba[4 * id_of(m, mjOBJ_GEOM, "target") + 3] = 0;
}

/* Swim: geom_pos['target'], x, y, z */
static void edit_fish_swim(mjModel *m, const double *extra)
{
    int g = id_of(m, mjOBJ_GEOM, "target");
    for (int k = 0; k < 3; k++)
        m->geom_pos[3 * g + k] = extra[k];
}

/* Bring: body_pos[target, ['x', 'z']], body_quat[target, ['qw', 'qy']] = cos, sin of half the angle */
static void edit_manipulator_ball(mjModel *m, const double *extra)
{
    int b = id_of(m, mjOBJ_BODY, "target_ball");
    m->body_pos[3 * b] = extra[0];
    m->body_pos[3 * b + 2] = extra[1];
    m->body_quat[4 * b] = cos(extra[2] / 2);
    m->body_quat[4 * b + 2] = sin(extra[2] / 2);
}

/* Stack: body_pos['target', 'x'], body_pos['target', 'z'] */
static void edit_stacker(mjModel *m, const double *extra)
{
    int b = id_of(m, mjOBJ_BODY, "target");
    m->body_pos[3 * b] = extra[0];
    m->body_pos[3 * b + 2] = extra[1];
}

/* lqr's draws when the suite built the model from its seed: joint i's stiffness. */
static void edit_lqr(mjModel *m, const double *extra)
{
    for (int j = 0; j < m->njnt; j++)
        m->jnt_stiffness[j] = extra[j];
}

/* Escape.initialize_episode's terrain from the env's 30 x 30 bumps, written here without SciPy's
 * recursive filter: the cubic B-spline through the bumps with mirror-symmetric ends (what
 * ndimage.zoom(order=3, mode='constant') interpolates with) from a tridiagonal solve, evaluated from
 * the kernel's closed form at k (n - 1) / (res - 1), times the bowl .5 - cos(2 pi clip(r, .04, 1)) / 2
 * on the [-1, 1]^2 grid, stored as hfield_data's float32. */
#define ESCAPE_BUMP_RES 30

static void spline_solve(double *c, int n, int stride)
{
    /* (c[i-1] + 4 c[i] + c[i+1]) / 6 = x[i], c[-1] = c[1], c[n] = c[n-2]: Thomas' algorithm */
    double sup[ESCAPE_BUMP_RES], rhs[ESCAPE_BUMP_RES];
    for (int i = 0; i < n; i++) {
        double a = i == 0 ? 0 : i == n - 1 ? 2 : 1, b = 4, up = i == 0 ? 2 : i == n - 1 ? 0 : 1;
        double r = 6 * c[i * stride];
        if (i > 0) {
            b -= a * sup[i - 1];
            r -= a * rhs[i - 1];
        }
        sup[i] = up / b;
        rhs[i] = r / b;
    }
    for (int i = n - 1; i >= 0; i--)
        c[i * stride] = i == n - 1 ? rhs[i] : rhs[i] - sup[i] * c[(i + 1) * stride];
}

static double bspline3(double t)
{
    t = fabs(t);
    return t < 1 ? 2.0 / 3.0 - t * t + t * t * t / 2 : t < 2 ? (2 - t) * (2 - t) * (2 - t) / 6 : 0;
}

static int mirror_index(int i, int n)
{
    return i < 0 ? -i : i > n - 1 ? 2 * (n - 1) - i : i;
}

static void edit_escape(mjModel *m, const double *extra)
{
    enum { N = ESCAPE_BUMP_RES };
    ck_assert_int_eq((int)(2 * m->hfield_size[0] / 2), N);
    int res = m->hfield_nrow[0];
    double c[N * N];
    memcpy(c, extra, sizeof c);
    for (int j = 0; j < N; j++)
        spline_solve(c + j, N, N);
    for (int i = 0; i < N; i++)
        spline_solve(c + i * N, N, 1);
    float *h = m->hfield_data + m->hfield_adr[0];
    for (int i = 0; i < res; i++)
        for (int j = 0; j < res; j++) {
            double u = i * (N - 1.0) / (res - 1.0), v = j * (N - 1.0) / (res - 1.0), smooth = 0;
            for (int a = -1; a <= 2; a++)
                for (int b = -1; b <= 2; b++) {
                    int ii = (int)floor(u) + a, jj = (int)floor(v) + b;
                    smooth += c[mirror_index(ii, N) * N + mirror_index(jj, N)] * bspline3(u - ii) * bspline3(v - jj);
                }
            double row = -1 + 2.0 * i / (res - 1), col = -1 + 2.0 * j / (res - 1);
            double radius = fmin(fmax(sqrt(row * row + col * col), .04), 1);
            h[i * res + j] = (float)((.5 - cos(2 * M_PI * radius) / 2) * smooth);
        }
}

typedef struct task_case {
    const char *id;
    double control_timestep; /* the suite's, in seconds */
    int n_extra;             /* per-episode draws after qpos, qvel, act in the state */
    void (*obs)(const mjModel *m, const mjData *d, expected *x);
    void (*edit)(mjModel *m, const double *extra);
    /* The env's state does not carry all a step starts from, so the shadow's steps agree to rounding
     * only and the shadow takes the env's state before it observes:
     * - the suite's initialize_episode steps the physics (cheetah settles for 200 steps), or its
     *   forwards solve constraints (manipulator's and stacker's contacts): MuJoCo 2.2's mj_forward
     *   leaves the solver's warm start (qacc_warmstart) behind, which is not in the state;
     * - free bodies (humanoid, fish, quadruped): mj_kinematics renormalizes qpos's quaternions in
     *   place, so a forward from a copied state normalizes once more than the env did, and the
     *   leaves computed from body poses (not copies of qpos, qvel) agree to rounding. */
    bool resync;
} task_case;

static const task_case cases[] = {
    {"cartpole/balance", 0.01, 0, obs_cartpole, edit_none, false},
    {"cartpole/balance_sparse", 0.01, 0, obs_cartpole, edit_none, false},
    {"cartpole/swingup", 0.01, 0, obs_cartpole, edit_none, false},
    {"cartpole/swingup_sparse", 0.01, 0, obs_cartpole, edit_none, false},
    {"pendulum/swingup", 0.02, 0, obs_pendulum, edit_none, false},
    {"acrobot/swingup", 0.01, 0, obs_acrobot, edit_none, false},
    {"acrobot/swingup_sparse", 0.01, 0, obs_acrobot, edit_none, false},
    {"point_mass/easy", 0.02, 0, obs_qpos_qvel, edit_none, false},
    {"reacher/easy", 0.02, 2, obs_reacher, edit_reacher, false},
    {"reacher/hard", 0.02, 2, obs_reacher, edit_reacher, false},
    {"cheetah/run", 0.01, 0, obs_cheetah, edit_none, true},
    {"walker/stand", 0.025, 0, obs_walker, edit_none, false},
    {"walker/walk", 0.025, 0, obs_walker, edit_none, false},
    {"walker/run", 0.025, 0, obs_walker, edit_none, false},
    {"hopper/stand", 0.02, 0, obs_hopper, edit_none, false},
    {"hopper/hop", 0.02, 0, obs_hopper, edit_none, false},
    {"finger/spin", 0.02, 0, obs_finger_spin, edit_none, false},
    {"finger/turn_easy", 0.02, 2, obs_finger_turn, edit_finger_turn, false},
    {"finger/turn_hard", 0.02, 2, obs_finger_turn, edit_finger_turn, false},
    {"ball_in_cup/catch", 0.02, 0, obs_qpos_qvel, edit_none, false},
    {"cartpole/two_poles", 0.01, 0, obs_cartpole, edit_none, false},
    {"cartpole/three_poles", 0.01, 0, obs_cartpole, edit_none, false},
    {"point_mass/hard", 0.02, 4, obs_qpos_qvel, edit_point_mass_hard, false},
    {"humanoid/stand", 0.025, 0, obs_humanoid, edit_none, true},
    {"humanoid/walk", 0.025, 0, obs_humanoid, edit_none, true},
    {"humanoid/run", 0.025, 0, obs_humanoid, edit_none, true},
    {"swimmer/swimmer6", 0.03, 2, obs_swimmer, edit_swimmer, false},
    {"swimmer/swimmer15", 0.03, 2, obs_swimmer, edit_swimmer, false},
    {"fish/upright", 0.04, 0, obs_fish_upright, edit_fish_upright, true},
    {"fish/swim", 0.04, 3, obs_fish_swim, edit_fish_swim, true},
    {"quadruped/walk", 0.02, 0, obs_quadruped, edit_none, true},
    {"quadruped/run", 0.02, 0, obs_quadruped, edit_none, true},
    {"quadruped/fetch", 0.02, 0, obs_quadruped_fetch, edit_none, true},
    {"quadruped/escape", 0.02, ESCAPE_BUMP_RES * ESCAPE_BUMP_RES, obs_quadruped_escape, edit_escape, true},
    {"manipulator/bring_ball", 0.01, 3, obs_manipulator_ball, edit_manipulator_ball, true},
    {"stacker/stack_2", 0.01, 2, obs_stacker, edit_stacker, true},
    {"stacker/stack_4", 0.01, 2, obs_stacker, edit_stacker, true},
    {"lqr/lqr_2_1", 0.03, 2, obs_qpos_qvel, edit_lqr, false},
    {"lqr/lqr_6_2", 0.03, 6, obs_qpos_qvel, edit_lqr, false},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* dm_control's Physics.step(n) with legacy_step: up-to-date positions and velocities after it. */
static void suite_step(const mjModel *m, mjData *d, int n)
{
    if (m->opt.integrator != mjINT_RK4) {
        mj_step2(m, d);
        for (int k = 1; k < n; k++)
            mj_step(m, d);
    } else {
        for (int k = 0; k < n; k++)
            mj_step(m, d);
    }
    mj_step1(m, d);
}

static const crl_tensor *get(crl_td *td, const char *prefix, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "%s%s", prefix, key);
    const crl_tensor *t = crl_td_get(td, path);
    ck_assert_msg(t != NULL, "no '%s'", path);
    return t;
}

/* The env's observation leaves in td (under prefix) and spec against x, env i of NUM. */
static void compare(const task_case *c, crl_env *env, crl_td *td, const char *prefix, int i, const expected *x,
                    int episode, int step)
{
    const crl_spec *spec = crl_env_observation_spec(env);
    ck_assert_msg(crl_spec_composite_len(spec) == (size_t)x->n, "%s: %zu observation keys, the suite has %d",
                  c->id, crl_spec_composite_len(spec), x->n);
    for (int k = 0; k < x->n; k++) {
        const crl_spec *s = crl_spec_composite_get(spec, x->name[k]);
        ck_assert_msg(s != NULL, "%s: no observation '%s'", c->id, x->name[k]);
        ck_assert_int_eq(crl_spec_dtype(s), CRL_F64);
        /* batch, then the suite's shape; its scalars become [1] as in TorchRL's DMControlEnv */
        int nd = x->cols[k] ? 3 : 2;
        int64_t want_shape[3] = {NUM, x->cols[k] ? x->dim[k] / x->cols[k] : x->dim[k], x->cols[k]};
        ck_assert_msg(crl_spec_ndim(s) == nd, "%s: '%s' has %d dims with the batch, the suite's shape needs %d",
                      c->id, x->name[k], crl_spec_ndim(s), nd);
        for (int j = 0; j < nd; j++)
            ck_assert_msg(crl_spec_shape(s)[j] == want_shape[j], "%s: '%s' dim %d is %lld, the suite's %lld%s", c->id,
                          x->name[k], j, (long long)crl_spec_shape(s)[j], (long long)want_shape[j],
                          x->scalar[k] ? " (a scalar)" : "");
        const crl_tensor *t = get(td, prefix, x->name[k]);
        ck_assert_int_eq(crl_tensor_dtype(t), CRL_F64);
        ck_assert_int_eq(crl_tensor_ndim(t), nd);
        for (int j = 0; j < nd; j++)
            ck_assert_int_eq(crl_tensor_shape(t)[j], want_shape[j]);
        const double *got = (const double *)crl_tensor_data(t) + (size_t)i * (size_t)x->dim[k];
        for (int j = 0; j < x->dim[k]; j++) {
            double want = x->v[k][j];
            double tol = x->solver_tol[k] > 0 ? x->solver_tol[k] : 1e-12;
            bool ok = x->exact[k] ? got[j] == want : fabs(got[j] - want) <= tol * (1 + fabs(want));
            ck_assert_msg(ok, "%s episode %d step %d env %d: %s[%d] = %.17g, the suite's %.17g", c->id, episode, step,
                          i, x->name[k], j, got[j], want);
        }
    }
}

typedef struct shadow {
    mjModel *m;
    mjData *d;
    int n_sub;
} shadow;

/* One episode from the reset in td: each env's shadow starts from the state it reports, then follows
 * the same actions for STEPS steps.  Takes the caller's reference to td and returns the last root's. */
static crl_td *episode_check(const task_case *c, crl_env *env, const mjModel *m0, crl_td *td, int state_dim,
                             int episode)
{
    crl_error e = {0};
    const crl_tensor *st = get(td, "", "state");
    ck_assert_int_eq(crl_tensor_shape(st)[1], state_dim);

    shadow sh[NUM];
    for (int i = 0; i < NUM; i++) {
        const double *s = (const double *)crl_tensor_data(st) + (size_t)i * (size_t)state_dim;
        sh[i].m = mj_copyModel(NULL, m0);
        ck_assert_ptr_nonnull(sh[i].m);
        c->edit(sh[i].m, s + 1 + m0->nq + m0->nv + m0->na);
        sh[i].d = mj_makeData(sh[i].m);
        ck_assert_ptr_nonnull(sh[i].d);
        sh[i].n_sub = (int)lround(c->control_timestep / sh[i].m->opt.timestep);
        ck_assert_int_ge(sh[i].n_sub, 1);
        sh[i].d->time = s[0];
        copy_into(sh[i].d->qpos, s + 1, m0->nq);
        copy_into(sh[i].d->qvel, s + 1 + m0->nq, m0->nv);
        copy_into(sh[i].d->act, s + 1 + m0->nq + m0->nv, m0->na);
        /* Physics.after_reset: forward with actuation off (quadruped's accelerometer and
         * force/torque sensors see it) */
        sh[i].m->opt.disableflags |= mjDSBL_ACTUATION;
        mj_forward(sh[i].m, sh[i].d);
        sh[i].m->opt.disableflags &= ~mjDSBL_ACTUATION;
        expected x = {0};
        c->obs(sh[i].m, sh[i].d, &x);
        compare(c, env, td, "", i, &x, episode, 0);
    }

    for (int step = 1; step <= STEPS; step++) {
        EXPECT_OK(crl_env_rand_action(env, td, &e), e);
        const crl_tensor *a = get(td, "", "action");
        for (int i = 0; i < NUM; i++)
            copy_into(sh[i].d->ctrl, (const double *)crl_tensor_data(a) + (size_t)i * (size_t)m0->nu, m0->nu);
        EXPECT_OK(crl_env_step(env, td, &e), e);
        st = get(td, "next.", "state");
        for (int i = 0; i < NUM; i++) {
            suite_step(sh[i].m, sh[i].d, sh[i].n_sub);
            const double *s = (const double *)crl_tensor_data(st) + (size_t)i * (size_t)state_dim;
            ck_assert_msg(s[0] == sh[i].d->time, "%s episode %d step %d env %d: time %.17g, the shadow's %.17g", c->id,
                          episode, step, i, s[0], sh[i].d->time);
            for (int k = 0; k < m0->nq + m0->nv; k++) {
                double want = k < m0->nq ? sh[i].d->qpos[k] : sh[i].d->qvel[k - m0->nq];
                bool ok = c->resync ? fabs(s[1 + k] - want) <= 1e-9 * (1 + fabs(want)) : s[1 + k] == want;
                ck_assert_msg(ok, "%s episode %d step %d env %d: state[%d] = %.17g, the shadow's %.17g", c->id, episode,
                              step, i, 1 + k, s[1 + k], want);
            }
            if (c->resync) {
                copy_into(sh[i].d->qpos, s + 1, m0->nq);
                copy_into(sh[i].d->qvel, s + 1 + m0->nq, m0->nv);
                copy_into(sh[i].d->act, s + 1 + m0->nq + m0->nv, m0->na);
                /* the step's closing mj_step1: acceleration-stage sensors (accelerometers, touch,
                 * force/torque) stay those of the shadow's own last substep, as Physics.step leaves them */
                mj_step1(sh[i].m, sh[i].d);
            }
            expected x = {0};
            c->obs(sh[i].m, sh[i].d, &x);
            compare(c, env, td, "next.", i, &x, episode, step);
        }
        crl_td *nx = crl_env_step_mdp(env, td, &e);
        ck_assert_msg(nx != NULL, "%s", e.message);
        crl_td_unref(td);
        td = nx;
    }
    for (int i = 0; i < NUM; i++) {
        mj_deleteData(sh[i].d);
        mj_deleteModel(sh[i].m);
    }
    return td;
}

START_TEST(test_observations)
{
    const task_case *c = &cases[_i];
    const dmc_task *t = dmc_task_lookup(c->id, NULL);
    ck_assert_ptr_nonnull(t);
    crl_error e = {0};
    dmc_model dm;
    EXPECT_OK(dmc_model_load(&dm, t, NULL, &e), e);
    const mjModel *m0 = dm.m;
    int state_dim = 1 + m0->nq + m0->nv + m0->na + c->n_extra;

    henv h;
    char ini[256];
    snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = %s\nnum_envs = %d\nseed = %d\nreturn_state = true\n",
             c->id, NUM, 11 + _i);
    EXPECT_OK(henv_open(&h, ini, &e), e);
    /* Two episodes: the second reset starts from a simulation that has run (the backend's reset must
     * leave nothing of it behind), each shadow from fresh mjData. */
    crl_td *td = NULL;
    for (int episode = 0; episode < 2; episode++) {
        crl_td_unref(td);
        td = crl_env_reset(h.env, NULL, &e);
        ck_assert_msg(td != NULL, "%s", e.message);
        td = episode_check(c, h.env, m0, td, state_dim, episode);
    }
    crl_td_unref(td);
    henv_close(&h);
    dmc_model_free(&dm);
}
END_TEST

/* dmc_reset_data, the backend's episode reset, against mj_resetData: after a run that left contacts,
 * warm starts, controls and applied forces behind, the inputs of the next mj_forward are the same bits,
 * and so is a run of steps from there with the same controls. */
START_TEST(test_reset_data)
{
    const task_case *c = &cases[_i];
    const dmc_task *t = dmc_task_lookup(c->id, NULL);
    crl_error e = {0};
    dmc_model dm;
    EXPECT_OK(dmc_model_load(&dm, t, NULL, &e), e);
    const mjModel *m = dm.m;
    mjData *ours = mj_makeData(m), *theirs = mj_makeData(m);
    ck_assert(ours && theirs);
    crl_rng rng;
    crl_rng_init(&rng, 7, (uint64_t)_i);
    /* A run that leaves everything dirty (random joints, controls, pushes). */
    dmc_randomize_joints(m, ours, &rng);
    for (int k = 0; k < 50; k++) {
        for (int u = 0; u < m->nu; u++)
            ours->ctrl[u] = crl_rng_range(&rng, -1, 1);
        for (int v = 0; v < m->nv; v++)
            ours->qfrc_applied[v] = crl_rng_range(&rng, -0.1, 0.1);
        mj_step(m, ours);
    }
    ours->xfrc_applied[6 * (m->nbody - 1)] = 0.5;
    dmc_reset_data(m, ours);
    mj_resetData(m, theirs);
#define SAME(field, n) \
    ck_assert_msg(memcmp(ours->field, theirs->field, sizeof(mjtNum) * (size_t)(n)) == 0, "%s: %s differs", c->id, #field)
    SAME(qpos, m->nq);
    SAME(qvel, m->nv);
    SAME(act, m->na);
    SAME(ctrl, m->nu);
    SAME(qfrc_applied, m->nv);
    SAME(xfrc_applied, 6 * m->nbody);
    SAME(qacc, m->nv);
    SAME(qacc_warmstart, m->nv);
    SAME(act_dot, m->na);
    SAME(userdata, m->nuserdata);
    SAME(sensordata, m->nsensordata);
    SAME(mocap_pos, 3 * m->nmocap);
    SAME(mocap_quat, 4 * m->nmocap);
    ck_assert(ours->time == theirs->time && ours->ncon == theirs->ncon && ours->nefc == theirs->nefc);
    ck_assert(memcmp(ours->warning, theirs->warning, sizeof ours->warning) == 0);
    ck_assert_int_eq(ours->pstack, theirs->pstack);
    /* From the same start: the same steps, bit for bit. */
    dmc_randomize_joints(m, ours, &rng);
    memcpy(theirs->qpos, ours->qpos, sizeof(mjtNum) * (size_t)m->nq);
    mj_forward(m, ours);
    mj_forward(m, theirs);
    for (int k = 0; k < 30; k++) {
        for (int u = 0; u < m->nu; u++)
            ours->ctrl[u] = theirs->ctrl[u] = crl_rng_range(&rng, -1, 1);
        suite_step(m, ours, 2);
        suite_step(m, theirs, 2);
        SAME(qpos, m->nq);
        SAME(qvel, m->nv);
        SAME(qacc_warmstart, m->nv);
        SAME(sensordata, m->nsensordata);
    }
#undef SAME
    mj_deleteData(ours);
    mj_deleteData(theirs);
    dmc_model_free(&dm);
}
END_TEST

/* Every task of the plugin has a case here: a task added without one fails. */
START_TEST(test_every_task_covered)
{
    for (size_t k = 0; k < dmc_task_count(); k++) {
        const char *id = dmc_task_at(k)->id;
        bool found = false;
        for (size_t j = 0; j < N_CASES && !found; j++)
            found = strcmp(cases[j].id, id) == 0;
        ck_assert_msg(found, "no observation case for %s in test_dm_control_obs.c", id);
    }
}
END_TEST

static Suite *obs_suite(void)
{
    Suite *s = suite_create("dm_control observations");
    TCase *tc = tcase_create("suite");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_observations, 0, N_CASES);
    tcase_add_loop_test(tc, test_reset_data, 0, N_CASES);
    tcase_add_test(tc, test_every_task_covered);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    dmc_install_error_hooks();
    SRunner *sr = srunner_create(obs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
