/* Loading a task's MJCF (bundled, or from a dm_control checkout) and keeping MuJoCo's errors as values. */
#include "dmc.h"
#include <crl/file.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dm_control's own model files are tens of KiB. */
#define DMC_MODEL_FILE_MAX (16u << 20)

/* The suite's shared look (its common/skybox.xml, visual.xml and
 * materials.xml): the same colours, so pictures match the suite's. */
static const char dmc_common_assets[] =
    "<asset>"
    "<texture name='skybox' type='skybox' builtin='gradient' rgb1='.4 .6 .8' rgb2='0 0 0'"
    " width='800' height='800' mark='random' markrgb='1 1 1'/>"
    "<texture name='grid' type='2d' builtin='checker' rgb1='.1 .2 .3' rgb2='.2 .3 .4'"
    " width='300' height='300' mark='edge' markrgb='.2 .3 .4'/>"
    "<material name='grid' texture='grid' texrepeat='1 1' texuniform='true' reflectance='.2'/>"
    "<material name='self' rgba='.7 .5 .3 1'/>"
    "<material name='self_default' rgba='.7 .5 .3 1'/>"
    "<material name='self_highlight' rgba='0 .5 .3 1'/>"
    "<material name='effector' rgba='.7 .4 .2 1'/>"
    "<material name='effector_default' rgba='.7 .4 .2 1'/>"
    "<material name='effector_highlight' rgba='0 .5 .3 1'/>"
    "<material name='decoration' rgba='.3 .5 .7 1'/>"
    "<material name='eye' rgba='0 .2 1 1'/>"
    "<material name='target' rgba='.6 .3 .3 1'/>"
    "<material name='target_default' rgba='.6 .3 .3 1'/>"
    "<material name='target_highlight' rgba='.6 .3 .3 .4'/>"
    "<material name='site' rgba='.5 .5 .5 .3'/>"
    "</asset>"
    "<visual>"
    "<headlight ambient='.4 .4 .4' diffuse='.8 .8 .8' specular='0.1 0.1 0.1'/>"
    "<map znear='.01'/>"
    "<quality shadowsize='2048'/>"
    "</visual>";

/* ---- MuJoCo's error and warning hooks ----
 * MuJoCo's default error handler exits the process; ours jumps back to the
 * innermost dmc_guarded of this thread, or, with none armed, keeps the
 * message (MuJoCo then carries on, as it does after a user handler). */

static _Thread_local jmp_buf *dmc_jump;
static _Thread_local char dmc_last_error[512];

static void dmc_on_error(const char *msg)
{
    snprintf(dmc_last_error, sizeof dmc_last_error, "%s", msg ? msg : "unknown error");
    if (dmc_jump)
        longjmp(*dmc_jump, 1);
}

/* Warnings (bad qacc and the like) are counted in mjData.warning, which the
 * step checks; the printed copy would only litter stdout and the cwd. */
static void dmc_on_warning(const char *msg)
{
    (void)msg;
}

void dmc_install_error_hooks(void)
{
    mju_user_error = dmc_on_error;
    mju_user_warning = dmc_on_warning;
}

int dmc_guarded(void (*fn)(void *), void *arg, const char *what, crl_error *err)
{
    jmp_buf here;
    jmp_buf *volatile outer = dmc_jump;
    if (setjmp(here)) {
        dmc_jump = outer;
        return crl_error_set(err, CRL_E_RUNTIME, "dm_control: %s: MuJoCo error: %s", what,
                             dmc_last_error);
    }
    dmc_jump = &here;
    fn(arg);
    dmc_jump = outer;
    return CRL_OK;
}

/* ---- names ---- */

static const char *type_name(int type)
{
    switch (type) {
    case mjOBJ_BODY: return "body";
    case mjOBJ_JOINT: return "joint";
    case mjOBJ_GEOM: return "geom";
    case mjOBJ_SITE: return "site";
    case mjOBJ_CAMERA: return "camera";
    case mjOBJ_ACTUATOR: return "actuator";
    case mjOBJ_SENSOR: return "sensor";
    default: return "object";
    }
}

int dmc_name(dmc_model *dm, int type, const char *name, int slot, crl_error *err)
{
    int id = mj_name2id(dm->m, type, name);
    if (id < 0)
        return crl_error_set(err, CRL_E_NOT_FOUND,
                             "dm_control: %s: the model has no %s named '%s'; the task needs it "
                             "(is suite_dir a dm_control suite directory of a matching version?)",
                             dm->task->id, type_name(type), name);
    dm->id[slot] = id;
    return CRL_OK;
}

int dmc_joint(dmc_model *dm, const char *name, int slot, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_JOINT, name, slot, err);
    if (rc == CRL_OK)
        dm->adr[slot] = dm->m->jnt_qposadr[dm->id[slot]];
    return rc;
}

/* ---- loading ---- */

typedef struct load_args {
    const char *file;
    const mjVFS *vfs;
    char error[1024];
    mjModel *m;
} load_args;

/* MuJoCo's XML parser keeps global state (the last model, for
 * mj_saveLastXML): one load at a time, whichever thread makes envs. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_call(void *p)
{
    load_args *a = p;
    a->m = mj_loadXML(a->file, a->vfs, a->error, (int)sizeof a->error);
}

/* load_call under the lock; a MuJoCo error jumps back inside it. */
static int load_locked(load_args *a, const char *what, crl_error *err)
{
    pthread_mutex_lock(&load_lock);
    int rc = dmc_guarded(load_call, a, what, err);
    pthread_mutex_unlock(&load_lock);
    return rc;
}

/* MJCF text loaded through a one-file VFS named DOMAIN.xml; a model that
 * does not compile is `bad` (CRL_E_PLUGIN bundled, CRL_E_CONFIG from suite_dir). */
static int load_text(dmc_model *dm, const dmc_task *t, const char *text, size_t len, int bad,
                     const char *what, crl_error *err)
{
    mjVFS *vfs = malloc(sizeof *vfs); /* 2 MB of names: not for the stack */
    load_args *a = calloc(1, sizeof *a);
    if (!vfs || !a || len > (size_t)0x7ffffff0) {
        free(vfs);
        free(a);
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory loading the model",
                             t->id);
    }
    mj_defaultVFS(vfs);
    char name[128];
    snprintf(name, sizeof name, "%s.xml", t->domain);
    int rc = CRL_OK;
    if (mj_makeEmptyFileVFS(vfs, name, (int)len) != 0) {
        rc = crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: cannot make the model's buffer",
                           t->id);
    } else {
        memcpy(vfs->filedata[mj_findFileVFS(vfs, name)], text, len);
        a->file = name;
        a->vfs = vfs;
        rc = load_locked(a, t->id, err);
        if (rc == CRL_OK && !a->m)
            rc = crl_error_set(err, bad, "dm_control: %s: %s does not compile: %s", t->id, what,
                               a->error);
    }
    dm->m = a->m;
    mj_deleteVFS(vfs);
    free(vfs);
    free(a);
    return rc;
}

static int load_bundled(dmc_model *dm, const dmc_task *t, crl_error *err)
{
    const char *open_end = strchr(t->xml, '>');
    if (!open_end)
        return crl_error_set(err, CRL_E_PLUGIN, "dm_control: %s: bundled model is malformed",
                             t->id);
    size_t head = (size_t)(open_end + 1 - t->xml);
    size_t ncommon = sizeof dmc_common_assets - 1, nxml = strlen(t->xml);
    size_t total = nxml + ncommon;
    char *buf = malloc(total + 1);
    if (!buf)
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory loading the model",
                             t->id);
    memcpy(buf, t->xml, head);
    memcpy(buf + head, dmc_common_assets, ncommon);
    memcpy(buf + head + ncommon, t->xml + head, nxml - head);
    buf[total] = '\0';
    int rc;
    if (t->edit) {
        char *gen = NULL;
        size_t ngen = 0;
        rc = dmc_xml_generate(t, buf, total, NULL, &gen, &ngen, err);
        if (rc == CRL_OK)
            rc = load_text(dm, t, gen, ngen, CRL_E_PLUGIN, "the bundled model", err);
        free(gen);
    } else {
        rc = load_text(dm, t, buf, total, CRL_E_PLUGIN, "the bundled model", err);
    }
    free(buf);
    return rc;
}

/* The suite's file, read here (MuJoCo does not see it), turned into the task's model. */
static int load_generated(dmc_model *dm, const dmc_task *t, const char *suite_dir,
                          const char *path, crl_error *err)
{
    char *text = NULL, *gen = NULL;
    size_t ntext = 0, ngen = 0;
    crl_error fe;
    crl_error_clear(&fe);
    if (crl_file_read(path, "model file", 0, DMC_MODEL_FILE_MAX, &text, &ntext, &fe) != CRL_OK)
        return crl_error_set(err, CRL_E_CONFIG,
                             "[plugin.dm_control] suite_dir = '%s': %s; point suite_dir at "
                             "dm_control/suite or remove it to use the bundled models",
                             suite_dir, fe.message);
    int rc = dmc_xml_generate(t, text, ntext, suite_dir, &gen, &ngen, err);
    crl_free(text);
    char what[4200];
    snprintf(what, sizeof what, "the model generated from %s", path);
    if (rc == CRL_OK)
        rc = load_text(dm, t, gen, ngen, CRL_E_CONFIG, what, err);
    free(gen);
    return rc;
}

static int load_file(dmc_model *dm, const dmc_task *t, const char *suite_dir, crl_error *err)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s.xml", suite_dir, t->domain);
    if (n < 0 || (size_t)n >= sizeof path)
        return crl_error_set(err, CRL_E_CONFIG, "[plugin.dm_control] suite_dir = '%s' is too long",
                             suite_dir);
    if (t->edit)
        return load_generated(dm, t, suite_dir, path, err);
    /* MuJoCo opens the file itself: look first, so a FIFO or device there is refused instead of blocking it. */
    crl_error oe;
    crl_error_clear(&oe);
    int fd = crl_file_open(path, "model file", 0, DMC_MODEL_FILE_MAX, NULL, &oe);
    if (fd < 0)
        return crl_error_set(err, CRL_E_CONFIG,
                             "[plugin.dm_control] suite_dir = '%s': %s; point "
                             "suite_dir at dm_control/suite (the folder holding %s.xml and "
                             "common/) or remove it to use the bundled models",
                             suite_dir, oe.message, t->domain);
    close(fd);
    load_args *a = calloc(1, sizeof *a);
    if (!a)
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory", t->id);
    a->file = path;
    int rc = load_locked(a, t->id, err);
    if (rc == CRL_OK && !a->m)
        rc = crl_error_set(err, CRL_E_CONFIG, "[plugin.dm_control] suite_dir: %s does not load: %s",
                           path, a->error);
    dm->m = a->m;
    free(a);
    return rc;
}

int dmc_model_load(dmc_model *dm, const dmc_task *t, const char *suite_dir, crl_error *err)
{
    memset(dm, 0, sizeof *dm);
    dm->task = t;
    dmc_install_error_hooks();
    int rc = suite_dir && *suite_dir ? load_file(dm, t, suite_dir, err) : load_bundled(dm, t, err);
    if (rc == CRL_OK && t->setup)
        rc = t->setup(dm, err);
    if (rc != CRL_OK)
        dmc_model_free(dm);
    return rc;
}

void dmc_model_free(dmc_model *dm)
{
    if (dm->m)
        mj_deleteModel(dm->m);
    if (dm->cache_free)
        dm->cache_free(dm->cache);
    else
        free(dm->cache);
    dm->m = NULL;
    dm->cache = NULL;
    dm->cache_free = NULL;
}
