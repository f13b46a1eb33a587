/* The suite's swimmer domain: swimmer6 and swimmer15, the n-link chains its _make_model generates. */
#include "dmc_xml.h"

#include <math.h>
#include <stdio.h>

/* The head alone (three planar root joints, viscous medium of density 3000,
 * no contacts, Euler at 2 ms driven every 30 ms) and the target; the edit
 * below grows the chain of n - 1 segments, their motors (gear 5e-4) and
 * their velocimeter and gyro sensors. */
static const char swimmer_xml[] =
    "<mujoco model='swimmer'>"
    "<option timestep='0.002' density='3000'>"
    "<flag contact='disable'/>"
    "</option>"
    "<default>"
    "<default class='swimmer'>"
    "<joint type='hinge' pos='0 -.05 0' axis='0 0 1' limited='true' solreflimit='.05 1' solimplimit='0 .8 .1' armature='1e-6'/>"
    "<default class='inertial'>"
    "<geom type='box' size='.001 .05 .01' rgba='0 0 0 0' mass='.01'/>"
    "</default>"
    "<default class='visual'>"
    "<geom type='capsule' size='.01' fromto='0 -.05 0 0 .05 0' material='self' mass='0'/>"
    "</default>"
    "<site size='.01' rgba='0 0 0 0'/>"
    "</default>"
    "<default class='free'>"
    "<joint limited='false' stiffness='0' armature='0'/>"
    "</default>"
    "<motor gear='5e-4' ctrllimited='true' ctrlrange='-1 1'/>"
    "</default>"
    "<worldbody>"
    "<geom name='ground' type='plane' size='2 2 0.1' material='grid'/>"
    "<body name='head' pos='0 0 .05' childclass='swimmer'>"
    "<light name='light_1' diffuse='.8 .8 .8' pos='0 0 1.5'/>"
    "<geom name='head' type='ellipsoid' size='.02 .04 .017' pos='0 -.022 0' material='self' mass='0'/>"
    "<geom name='nose' type='sphere' pos='0 -.06 0' size='.004' material='effector' mass='0'/>"
    "<geom name='eyes' type='capsule' fromto='-.006 -.054 .005 .006 -.054 .005' size='.004' material='eye' mass='0'/>"
    "<camera name='tracking1' pos='0 -.2 .5' xyaxes='1 0 0 0 1 1' mode='trackcom' fovy='60'/>"
    "<camera name='tracking2' pos='-.9 .5 .15' xyaxes='0 -1 0 .3 0 1' mode='trackcom' fovy='60'/>"
    "<camera name='eyes' pos='0 -.058 .005' xyaxes='-1 0 0 0 0 1'/>"
    "<joint name='rootx' class='free' type='slide' axis='1 0 0' pos='0 -.05 0'/>"
    "<joint name='rooty' class='free' type='slide' axis='0 1 0' pos='0 -.05 0'/>"
    "<joint name='rootz' class='free' type='hinge' axis='0 0 1' pos='0 -.05 0'/>"
    "<geom name='inertial' class='inertial'/>"
    "<geom name='visual' class='visual'/>"
    "<site name='head'/>"
    "</body>"
    "<geom name='target' type='sphere' pos='1 1 .05' size='.1' material='target'/>"
    "<light name='target_light' diffuse='1 1 1' pos='1 1 1.5'/>"
    "</worldbody>"
    "<sensor>"
    "<framepos name='nose_pos' objtype='geom' objname='nose'/>"
    "<framepos name='target_pos' objtype='geom' objname='target'/>"
    "<framexaxis name='head_xaxis' objtype='xbody' objname='head'/>"
    "<frameyaxis name='head_yaxis' objtype='xbody' objname='head'/>"
    "<velocimeter name='head_vel' site='head'/>"
    "<gyro name='head_gyro' site='head'/>"
    "</sensor>"
    "</mujoco>";

/* swimmer._make_model for n bodies. */
static int edit_swimmer(const dmc_task *t, struct _xmlDoc *doc, crl_error *err, int n_bodies)
{
    static const char *const head_path[] = {"worldbody", "body", NULL};
    xmlNode *root = xmlDocGetRootElement(doc);
    xmlNode *head = dmc_xml_path(doc, head_path);
    if (!head)
        return dmc_xml_missing(t, "head (worldbody/body)", err);
    xmlNode *actuator = dmc_xml_add(root, "actuator", NULL);
    xmlNode *sensor = actuator ? dmc_xml_add(root, "sensor", NULL) : NULL;
    if (!sensor)
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory growing the swimmer", t->id);
    char range[64];
    double limit = 360.0 / n_bodies;
    snprintf(range, sizeof range, "%.17g %.17g", -limit, limit);
    xmlNode *parent = head;
    for (int i = 0; i < n_bodies - 1; i++) {
        char body[32], visual[32], inertial[32], site[32], joint[32], motor[32], velo[32], gyro[32];
        snprintf(body, sizeof body, "segment_%d", i);
        snprintf(visual, sizeof visual, "visual_%d", i);
        snprintf(inertial, sizeof inertial, "inertial_%d", i);
        snprintf(site, sizeof site, "site_%d", i);
        snprintf(joint, sizeof joint, "joint_%d", i);
        snprintf(motor, sizeof motor, "motor_%d", i);
        snprintf(velo, sizeof velo, "velocimeter_%d", i);
        snprintf(gyro, sizeof gyro, "gyro_%d", i);
        const char *body_a[] = {"name", body, "pos", "0 .1 0", NULL};
        const char *visual_a[] = {"class", "visual", "name", visual, NULL};
        const char *inertial_a[] = {"class", "inertial", "name", inertial, NULL};
        const char *site_a[] = {"name", site, NULL};
        const char *joint_a[] = {"name", joint, "range", range, NULL};
        const char *motor_a[] = {"name", motor, "joint", joint, NULL};
        const char *velo_a[] = {"name", velo, "site", site, NULL};
        const char *gyro_a[] = {"name", gyro, "site", site, NULL};
        xmlNode *child = dmc_xml_add(parent, "body", body_a);
        if (!child || !dmc_xml_add(child, "geom", visual_a) || !dmc_xml_add(child, "geom", inertial_a) ||
            !dmc_xml_add(child, "site", site_a) || !dmc_xml_add(child, "joint", joint_a) ||
            !dmc_xml_add(actuator, "motor", motor_a) || !dmc_xml_add(sensor, "velocimeter", velo_a) ||
            !dmc_xml_add(sensor, "gyro", gyro_a))
            return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory growing the swimmer", t->id);
        parent = child;
    }
    /* The tracking cameras back away in proportion to the length. */
    double scale = n_bodies / 6.0;
    xmlNode *cams[8];
    int ncam = dmc_xml_children(head, "camera", cams, 8);
    for (int c = 0; c < ncam && c < 8; c++) {
        xmlChar *mode = xmlGetProp(cams[c], BAD_CAST "mode");
        bool track = mode && xmlStrcmp(mode, BAD_CAST "trackcom") == 0;
        xmlFree(mode);
        if (!track)
            continue;
        xmlChar *pos = xmlGetProp(cams[c], BAD_CAST "pos");
        double p[3];
        int got = pos ? sscanf((const char *)pos, "%lf %lf %lf", &p[0], &p[1], &p[2]) : 0;
        xmlFree(pos);
        if (got != 3)
            return dmc_xml_missing(t, "three-number pos on a tracking camera", err);
        char buf[128];
        snprintf(buf, sizeof buf, "%.17g %.17g %.17g", p[0] * scale, p[1] * scale, p[2] * scale);
        int rc = dmc_xml_set(cams[c], "pos", buf, t, err);
        if (rc != CRL_OK)
            return rc;
    }
    return CRL_OK;
}

static int edit_6(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_swimmer(t, doc, err, 6);
}

static int edit_15(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_swimmer(t, doc, err, 15);
}

enum { HEAD, NOSE, TARGET, TARGET_LIGHT };

static int swimmer_setup(dmc_model *dm, int n_bodies, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_BODY, "head", HEAD, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "nose", NOSE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "target", TARGET, err);
    if (rc == CRL_OK && (dm->id[TARGET_LIGHT] = mj_name2id(dm->m, mjOBJ_LIGHT, "target_light")) < 0)
        rc = crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: %s: the model has no light named 'target_light'",
                           dm->task->id);
    const mjModel *m = dm->m;
    if (rc == CRL_OK && (m->nq != 2 + n_bodies || m->nsensordata != 12 + 6 * n_bodies || m->nu != n_bodies - 1))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has nq %d, %d sensor values and %d actuators; the "
                           "task needs the suite's %d-body swimmer (%d, %d, %d)",
                           dm->task->id, m->nq, m->nsensordata, m->nu, n_bodies, 2 + n_bodies,
                           12 + 6 * n_bodies, n_bodies - 1);
    if (rc == CRL_OK)
        dm->param[0] = m->geom_size[3 * dm->id[TARGET]];
    return rc;
}

static int setup_6(dmc_model *dm, crl_error *err)
{
    return swimmer_setup(dm, 6, err);
}

static int setup_15(dmc_model *dm, crl_error *err)
{
    return swimmer_setup(dm, 15, err);
}

/* Random heading and joint angles; the target (its x, y in extra) within
 * 0.3 of the centre one time in five, else within 2. */
static void swimmer_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    dmc_randomize_joints(dm->m, d, rng);
    double box = crl_rng_uniform(rng) < 0.2 ? 0.3 : 2.0;
    extra[0] = crl_rng_range(rng, -box, box);
    extra[1] = crl_rng_range(rng, -box, box);
}

/* The env's target into the shared model (and the light over it). */
static void swimmer_apply(const dmc_model *dm, const double *extra)
{
    mjModel *m = dm->m;
    m->geom_pos[3 * dm->id[TARGET]] = extra[0];
    m->geom_pos[3 * dm->id[TARGET] + 1] = extra[1];
    m->light_pos[3 * dm->id[TARGET_LIGHT]] = extra[0];
    m->light_pos[3 * dm->id[TARGET_LIGHT] + 1] = extra[1];
}

/* The nose-to-target vector in the head's frame, x and y. */
static void nose_to_target(const dmc_model *dm, const mjData *d, double out[2])
{
    const double *t = d->geom_xpos + 3 * dm->id[TARGET], *n = d->geom_xpos + 3 * dm->id[NOSE];
    const double *r = d->xmat + 9 * dm->id[HEAD];
    double v[3] = {t[0] - n[0], t[1] - n[1], t[2] - n[2]};
    for (int j = 0; j < 2; j++)
        out[j] = v[0] * r[j] + v[1] * r[3 + j] + v[2] * r[6 + j];
}

/* joints: qpos past the three root joints; to_target; body_velocities: each
 * body's local (vx, vy, wz) from its velocimeter and gyro. */
static void swimmer_observe(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    const mjModel *m = dm->m;
    for (int k = 3; k < m->nq; k++)
        out[0][k - 3] = d->qpos[k];
    nose_to_target(dm, d, out[1]);
    int nb = (m->nsensordata - 12) / 6;
    for (int b = 0; b < nb; b++) {
        const double *s = d->sensordata + 12 + 6 * b;
        out[2][3 * b] = s[0];
        out[2][3 * b + 1] = s[1];
        out[2][3 * b + 2] = s[5];
    }
}

static double swimmer_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    double v[2];
    nose_to_target(dm, d, v);
    double size = dm->param[0];
    return dmc_tolerance(hypot(v[0], v[1]), 0, size, 5 * size, DMC_LONG_TAIL, 0.1);
}

#define SWIMMER_TASK(n, setup_fn, edit_fn)                                                                  \
    {                                                                                                       \
        .domain = "swimmer", .name = "swimmer" #n, .id = "swimmer/swimmer" #n, .xml = swimmer_xml,          \
        .time_limit = 30.0, .control_timestep = 0.03, .n_obs = 3,                                           \
        .obs = {{"joints", (n) - 1}, {"to_target", 2}, {"body_velocities", 3 * (n)}}, .n_extra = 2,       \
        .setup = setup_fn, .init = swimmer_init, .observe = swimmer_observe, .reward = swimmer_reward,      \
        .edit = edit_fn, .apply = swimmer_apply,                                                            \
    }

const dmc_task dmc_swimmer_swimmer6 = SWIMMER_TASK(6, setup_6, edit_6);
const dmc_task dmc_swimmer_swimmer15 = SWIMMER_TASK(15, setup_15, edit_15);
