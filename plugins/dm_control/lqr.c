/* The suite's lqr domain: lqr_2_1 and lqr_6_2, chains of springs whose stiffnesses each env draws when seeded. */
#include "dmc_xml.h"

#include <math.h>
#include <stdio.h>

/* The domain's lqr.xml: Euler at 30 ms, constraints off, unit-free slide
 * joints along y; the edit below grows the chain of bodies. */
static const char lqr_xml[] =
    "<mujoco model='LQR'>"
    "<option timestep='.03'/>"
    "<default>"
    "<joint type='slide' axis='0 1 0'/>"
    "<geom type='sphere' size='.1' material='self'/>"
    "<site size='.01'/>"
    "<tendon width='.02' material='self'/>"
    "</default>"
    "<option>"
    "<flag constraint='disable'/>"
    "</option>"
    "<worldbody>"
    "<light name='light' pos='0 0 2'/>"
    "<camera name='cam0' pos='-1.428 -0.311 0.856' xyaxes='0.099 -0.995 0.000 0.350 0.035 0.936'/>"
    "<camera name='cam1' pos='1.787 2.452 4.331' xyaxes='-1 0 0 0 -0.868 0.497'/>"
    "<geom name='floor' size='4 1 .2' type='plane' material='grid'/>"
    "<geom name='origin' pos='2 0 .05' size='2 .003 .05' type='box' rgba='.5 .5 .5 .5'/>"
    "</worldbody>"
    "</mujoco>";

/* The suite's stiffness_range; its damping_range is (0, 0). */
#define LQR_STIFFNESS_LO 15.0
#define LQR_STIFFNESS_HI 25.0
#define LQR_CONTROL_COST 0.1
#define LQR_TERMINAL_TOL 1e-6

/* lqr._make_model: body_i (joint_i, geom_i, site_i) nested in body_i-1, the
 * first n_act driven by motor_i, a visual spatial tendon between neighbours.
 * The stiffness written here is the range's middle: the shared model's
 * nominal value, which each env's own draw replaces before its physics runs. */
static int edit_lqr(const dmc_task *t, struct _xmlDoc *doc, int n_bodies, int n_act, crl_error *err)
{
    static const char *const world_path[] = {"worldbody", NULL};
    xmlNode *root = xmlDocGetRootElement(doc);
    xmlNode *parent = dmc_xml_path(doc, world_path);
    if (!parent)
        return dmc_xml_missing(t, "worldbody", err);
    xmlNode *actuator = dmc_xml_add(root, "actuator", NULL);
    xmlNode *tendon = actuator ? dmc_xml_add(root, "tendon", NULL) : NULL;
    if (!tendon)
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory growing the chain", t->id);
    char stiffness[32];
    snprintf(stiffness, sizeof stiffness, "%.17g", 0.5 * (LQR_STIFFNESS_LO + LQR_STIFFNESS_HI));
    for (int i = 0; i < n_bodies; i++) {
        char body[32], joint[32], geom[32], site[32], next_site[32], motor[32], tname[32];
        snprintf(body, sizeof body, "body_%d", i);
        snprintf(joint, sizeof joint, "joint_%d", i);
        snprintf(geom, sizeof geom, "geom_%d", i);
        snprintf(site, sizeof site, "site_%d", i);
        snprintf(next_site, sizeof next_site, "site_%d", i + 1);
        snprintf(motor, sizeof motor, "motor_%d", i);
        snprintf(tname, sizeof tname, "tendon_%d", i);
        const char *body_a[] = {"name", body, "pos", i == 0 ? ".25 0 .1" : ".25 0 0", NULL};
        const char *joint_a[] = {"name", joint, "stiffness", stiffness, "damping", "0", NULL};
        const char *geom_a[] = {"name", geom, NULL};
        const char *site_a[] = {"name", site, NULL};
        const char *motor_a[] = {"name", motor, "joint", joint, NULL};
        const char *tendon_a[] = {"name", tname, NULL};
        const char *from_a[] = {"site", site, NULL};
        const char *to_a[] = {"site", next_site, NULL};
        xmlNode *child = dmc_xml_add(parent, "body", body_a);
        bool ok = child && dmc_xml_add(child, "joint", joint_a) && dmc_xml_add(child, "geom", geom_a) &&
                  dmc_xml_add(child, "site", site_a);
        if (ok && i < n_act)
            ok = dmc_xml_add(actuator, "motor", motor_a) != NULL;
        if (ok && i < n_bodies - 1) {
            xmlNode *spatial = dmc_xml_add(tendon, "spatial", tendon_a);
            ok = spatial && dmc_xml_add(spatial, "site", from_a) && dmc_xml_add(spatial, "site", to_a);
        }
        if (!ok)
            return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory growing the chain", t->id);
        parent = child;
    }
    return CRL_OK;
}

static int edit_2_1(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_lqr(t, doc, 2, 1, err);
}

static int edit_6_2(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_lqr(t, doc, 6, 2, err);
}

/* The chain's joints are the model's only ones, qpos address i for joint_i. */
static int lqr_setup(dmc_model *dm, int n_bodies, int n_act, crl_error *err)
{
    const mjModel *m = dm->m;
    if (m->njnt != n_bodies || m->nq != n_bodies || m->nv != n_bodies || m->na != 0 || m->nu != n_act)
        return crl_error_set(err, CRL_E_CONFIG,
                             "dm_control: %s: the model has %d joints, nq %d, nv %d, %d activations and %d "
                             "actuators; the task needs the suite's chain of %d slide joints and %d motors",
                             dm->task->id, m->njnt, m->nq, m->nv, m->na, m->nu, n_bodies, n_act);
    for (int i = 0; i < n_bodies; i++) {
        char name[32];
        snprintf(name, sizeof name, "joint_%d", i);
        int id = mj_name2id(m, mjOBJ_JOINT, name);
        if (id < 0 || m->jnt_type[id] != mjJNT_SLIDE || m->jnt_qposadr[id] != i)
            return crl_error_set(err, CRL_E_CONFIG,
                                 "dm_control: %s: the model's joint %d is not the slide joint '%s' the suite's "
                                 "chain has there",
                                 dm->task->id, i, name);
    }
    return CRL_OK;
}

static int setup_2_1(dmc_model *dm, crl_error *err)
{
    return lqr_setup(dm, 2, 1, err);
}

static int setup_6_2(dmc_model *dm, crl_error *err)
{
    return lqr_setup(dm, 6, 2, err);
}

/* The suite draws each joint's stiffness while building the model from the
 * env's random state, once, before any episode: extra[i] is joint i's. */
static void lqr_seed(const dmc_model *dm, double *extra, crl_rng *rng)
{
    for (int i = 0; i < dm->m->njnt; i++)
        extra[i] = crl_rng_range(rng, LQR_STIFFNESS_LO, LQR_STIFFNESS_HI);
}

static void lqr_apply(const dmc_model *dm, const double *extra)
{
    for (int i = 0; i < dm->m->njnt; i++)
        dm->m->jnt_stiffness[i] = extra[i];
}

/* qpos uniform on the sphere of radius sqrt(2), at rest. */
static void lqr_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    int nq = dm->m->nq;
    double norm;
    do {
        norm = 0;
        for (int k = 0; k < nq; k++) {
            d->qpos[k] = dmc_randn(rng);
            norm += d->qpos[k] * d->qpos[k];
        }
        norm = sqrt(norm);
    } while (norm == 0);
    for (int k = 0; k < nq; k++)
        d->qpos[k] *= sqrt(2.0) / norm;
}

static void lqr_observe(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    for (int k = 0; k < dm->m->nq; k++)
        out[0][k] = d->qpos[k];
    for (int k = 0; k < dm->m->nv; k++)
        out[1][k] = d->qvel[k];
}

/* 1 - (|q|^2 / 2 + 0.1 |u|^2 / 2) */
static double lqr_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    double q2 = 0, u2 = 0;
    for (int k = 0; k < dm->m->nq; k++)
        q2 += d->qpos[k] * d->qpos[k];
    for (int k = 0; k < dm->m->nu; k++)
        u2 += d->ctrl[k] * d->ctrl[k];
    return 1.0 - (0.5 * q2 + 0.5 * u2 * LQR_CONTROL_COST);
}

/* The episode ends once the norm of (qpos, qvel, act) is below 1e-6. */
static bool lqr_terminate(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const mjModel *m = dm->m;
    double s = 0;
    for (int k = 0; k < m->nq; k++)
        s += d->qpos[k] * d->qpos[k];
    for (int k = 0; k < m->nv; k++)
        s += d->qvel[k] * d->qvel[k];
    for (int k = 0; k < m->na; k++)
        s += d->act[k] * d->act[k];
    return sqrt(s) < LQR_TERMINAL_TOL;
}

#define LQR_TASK(nb, na, setup_fn, edit_fn)                                                               \
    {                                                                                                     \
        .domain = "lqr", .name = "lqr_" #nb "_" #na, .id = "lqr/lqr_" #nb "_" #na, .xml = lqr_xml,        \
        .time_limit = INFINITY, .control_timestep = 0.0, .n_obs = 2,                                      \
        .obs = {{"position", nb}, {"velocity", nb}}, .n_extra = nb, .setup = setup_fn, .init = lqr_init, \
        .observe = lqr_observe, .reward = lqr_reward, .edit = edit_fn, .apply = lqr_apply,                \
        .seed = lqr_seed, .terminate = lqr_terminate,                                                     \
    }

const dmc_task dmc_lqr_lqr_2_1 = LQR_TASK(2, 1, setup_2_1, edit_2_1);
const dmc_task dmc_lqr_lqr_6_2 = LQR_TASK(6, 2, setup_6_2, edit_6_2);
