/* Stepping as dm_control's Physics does, and telling a diverged simulation. */
#include "dmc.h"

#include <math.h>
#include <string.h>

void dmc_physics_step(const mjModel *m, mjData *d, int n)
{
    /* Legacy stepping: observations read positions and velocities, so a
     * step ends with mj_step1; non-RK4 steps start with mj_step2, reusing
     * that mj_step1 with the new control applied. */
    if (m->opt.integrator == mjINT_RK4) {
        for (int k = 0; k < n; k++)
            mj_step(m, d);
    } else {
        mj_step2(m, d);
        for (int k = 1; k < n; k++)
            mj_step(m, d);
    }
    mj_step1(m, d);
}

const char *dmc_divergence(const mjModel *m, const mjData *d)
{
    /* The warnings are the whole test: every step ends with mj_step1, whose
     * mj_checkPos and mj_checkVel flag any qpos or qvel NaN, infinite or
     * past mjMAXVAL, so no state that passed them holds a non-finite value. */
    (void)m;
    if (d->warning[mjWARN_BADQACC].number)
        return "accelerations became NaN, infinite or huge";
    if (d->warning[mjWARN_BADQPOS].number)
        return "positions became NaN, infinite or huge";
    if (d->warning[mjWARN_BADQVEL].number)
        return "velocities became NaN, infinite or huge";
    return NULL;
}

/* q scaled to unit length (a zero draw, vanishingly rare, stays the identity). */
static void normalize(double *q, int n)
{
    double s = 0;
    for (int k = 0; k < n; k++)
        s += q[k] * q[k];
    s = sqrt(s);
    if (s > 0)
        for (int k = 0; k < n; k++)
            q[k] /= s;
    else
        q[0] = 1.0;
}

void dmc_randomize_joints(const mjModel *m, mjData *d, crl_rng *rng)
{
    for (int j = 0; j < m->njnt; j++) {
        int type = m->jnt_type[j];
        double *q = &d->qpos[m->jnt_qposadr[j]];
        if (type == mjJNT_HINGE || type == mjJNT_SLIDE) {
            if (m->jnt_limited[j])
                *q = crl_rng_range(rng, m->jnt_range[2 * j], m->jnt_range[2 * j + 1]);
            else if (type == mjJNT_HINGE)
                *q = crl_rng_range(rng, -M_PI, M_PI);
        } else if (type == mjJNT_BALL && m->jnt_limited[j]) {
            double axis[3];
            for (int k = 0; k < 3; k++)
                axis[k] = dmc_randn(rng);
            normalize(axis, 3);
            mju_axisAngle2Quat(q, axis, crl_rng_uniform(rng) * m->jnt_range[2 * j + 1]);
        } else if (type == mjJNT_BALL) {
            for (int k = 0; k < 4; k++)
                q[k] = dmc_randn(rng);
            normalize(q, 4);
        } else if (type == mjJNT_FREE && !m->jnt_limited[j]) {
            /* The suite draws uniform [0, 1)^4, not a uniform rotation, and keeps it for its benchmarks. */
            for (int k = 0; k < 4; k++)
                q[3 + k] = crl_rng_uniform(rng);
            normalize(q + 3, 4);
        }
    }
}

void dmc_init_randomized(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    dmc_randomize_joints(dm->m, d, rng);
}

void dmc_reset_data(const mjModel *m, mjData *d)
{
    d->pstack = 0;
    d->maxuse_stack = d->maxuse_con = d->maxuse_efc = 0;
    memset(d->warning, 0, sizeof d->warning);
    memset(d->timer, 0, sizeof d->timer);
    memset(d->solver, 0, sizeof d->solver);
    d->solver_iter = d->solver_nnz = 0;
    d->solver_fwdinv[0] = d->solver_fwdinv[1] = 0;
    d->ne = d->nf = d->nefc = d->ncon = 0;
    d->time = 0;
    d->energy[0] = d->energy[1] = 0;
    /* The arrays MuJoCo names as not recomputed by mj_forward. */
    memcpy(d->qpos, m->qpos0, sizeof(mjtNum) * (size_t)m->nq);
    memset(d->qvel, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->act, 0, sizeof(mjtNum) * (size_t)m->na);
    memset(d->ctrl, 0, sizeof(mjtNum) * (size_t)m->nu);
    memset(d->qfrc_applied, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->xfrc_applied, 0, sizeof(mjtNum) * 6 * (size_t)m->nbody);
    memset(d->qacc, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->qacc_warmstart, 0, sizeof(mjtNum) * (size_t)m->nv);
    memset(d->act_dot, 0, sizeof(mjtNum) * (size_t)m->na);
    memset(d->userdata, 0, sizeof(mjtNum) * (size_t)m->nuserdata);
    memset(d->sensordata, 0, sizeof(mjtNum) * (size_t)m->nsensordata);
    memset(d->mocap_pos, 0, sizeof(mjtNum) * 3 * (size_t)m->nmocap);
    memset(d->mocap_quat, 0, sizeof(mjtNum) * 4 * (size_t)m->nmocap);
    for (int i = 0; i < m->nbody; i++) {
        int id = m->body_mocapid[i];
        if (id >= 0) {
            memcpy(d->mocap_pos + 3 * id, m->body_pos + 3 * i, sizeof(mjtNum) * 3);
            memcpy(d->mocap_quat + 4 * id, m->body_quat + 4 * i, sizeof(mjtNum) * 4);
        }
    }
}
