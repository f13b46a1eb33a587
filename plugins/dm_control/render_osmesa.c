/* Offscreen pixels without a display or GPU: MuJoCo's renderer in an OSMesa context. */
#define _GNU_SOURCE
#include "dmc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OSMesa is opened at run time, so the plugin loads (and steps) on machines
 * without it and only pixels need it.  Its few constants, from GL/osmesa.h. */
#define DMC_OSMESA_RGBA 0x1908      /* GL_RGBA */
#define DMC_GL_UNSIGNED_BYTE 0x1401

typedef void *osmesa_ctx;
typedef osmesa_ctx (*create_ext_fn)(unsigned format, int depth, int stencil, int accum,
                                    osmesa_ctx share);
typedef unsigned char (*make_current_fn)(osmesa_ctx ctx, void *buffer, unsigned type, int w,
                                         int h);
typedef void (*destroy_fn)(osmesa_ctx ctx);

/* Debian's libosmesa6 (libOSMesa.so.8); the unversioned name comes with
 * libosmesa6-dev.  CRL_DM_CONTROL_GL_LIBRARY names another (tests use it to
 * see the missing-library error). */
static const char *const osmesa_names[] = {"libOSMesa.so.8", "libOSMesa.so.6", "libOSMesa.so"};

static struct {
    pthread_mutex_t lock;
    void *lib;
    create_ext_fn create;
    make_current_fn make_current;
    destroy_fn destroy;
} gl = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, NULL};

/* The library's entry points into gl, or CRL_E_UNSUPPORTED naming the
 * package.  Success is kept; a failure is tried again next time (the
 * package may have been installed meanwhile). */
static int open_osmesa(crl_error *err)
{
    const char *forced = getenv("CRL_DM_CONTROL_GL_LIBRARY");
    bool force = forced && *forced;
    pthread_mutex_lock(&gl.lock);
    if (gl.create && !force) {
        pthread_mutex_unlock(&gl.lock);
        return CRL_OK;
    }
    const char *tried = force ? forced : osmesa_names[0];
    const char *why = NULL;
    void *lib = NULL;
    /* RTLD_GLOBAL: MuJoCo's GL loader finds OSMesaGetProcAddress by name. */
    if (force) {
        lib = dlopen(forced, RTLD_NOW | RTLD_GLOBAL);
        why = lib ? NULL : dlerror();
    } else {
        for (size_t i = 0; i < sizeof osmesa_names / sizeof osmesa_names[0] && !lib; i++) {
            lib = dlopen(osmesa_names[i], RTLD_NOW | RTLD_GLOBAL);
            if (!lib && i == 0)
                why = dlerror();
        }
    }
    int rc = CRL_OK;
    if (lib) {
        create_ext_fn create = (create_ext_fn)(uintptr_t)dlsym(lib, "OSMesaCreateContextExt");
        make_current_fn make_current = (make_current_fn)(uintptr_t)dlsym(lib, "OSMesaMakeCurrent");
        destroy_fn destroy = (destroy_fn)(uintptr_t)dlsym(lib, "OSMesaDestroyContext");
        if (create && make_current && destroy) {
            if (!gl.lib) {
                gl.lib = lib;
                gl.create = create;
                gl.make_current = make_current;
                gl.destroy = destroy;
            } else {
                dlclose(lib); /* the same library again: keep the first handle */
            }
        } else {
            why = "it lacks OSMesaCreateContextExt, OSMesaMakeCurrent or OSMesaDestroyContext";
            dlclose(lib);
            lib = NULL;
        }
    }
    if (!lib)
        rc = crl_error_set(err, CRL_E_UNSUPPORTED,
                           "dm_control: pixels need OSMesa for offscreen OpenGL, and %s cannot be "
                           "used (%s); install the Debian package libosmesa6 (apt-get install "
                           "libosmesa6), or set from_pixels = false",
                           tried, why ? why : "not found");
    pthread_mutex_unlock(&gl.lock);
    return rc;
}

struct dmc_renderer {
    osmesa_ctx ctx;
    unsigned char *buffer; /* the context's window framebuffer; MuJoCo draws offscreen */
    uint8_t *flip;         /* one frame, bottom row first as glReadPixels gives it */
    int width, height;
    mjvScene scene;
    mjvCamera camera;
    mjvOption option;
    mjrContext con;
    bool scene_made, con_made;
    /* the heightfields as the context last took them: a task that rewrites hfield_data (escape's
     * terrain) gets them uploaded again before the next frame, as the suite's mjr_uploadHField */
    float *hfield;
    int nhfielddata;
};

typedef struct make_args {
    dmc_renderer *r;
    mjModel *m;
} make_args;

static void make_call(void *p)
{
    make_args *a = p;
    mjv_makeScene(a->m, &a->r->scene, 1000);
    a->r->scene_made = true;
    mjr_makeContext(a->m, &a->r->con, mjFONTSCALE_150);
    a->r->con_made = true;
    mjr_setBuffer(mjFB_OFFSCREEN, &a->r->con);
}

dmc_renderer *dmc_renderer_new(mjModel *m, int width, int height, crl_error *err)
{
    if (open_osmesa(err) != CRL_OK)
        return NULL;
    dmc_renderer *r = calloc(1, sizeof *r);
    if (r) {
        r->buffer = malloc((size_t)width * (size_t)height * 4);
        r->flip = malloc((size_t)width * (size_t)height * 3);
    }
    if (!r || !r->buffer || !r->flip) {
        dmc_renderer_free(r);
        crl_error_set(err, CRL_E_NOMEM, "dm_control: out of memory for a %d x %d renderer", width,
                      height);
        return NULL;
    }
    r->width = width;
    r->height = height;
    if (m->nhfielddata > 0) {
        r->hfield = malloc(sizeof(float) * (size_t)m->nhfielddata);
        if (!r->hfield) {
            dmc_renderer_free(r);
            crl_error_set(err, CRL_E_NOMEM, "dm_control: out of memory for a renderer's heightfields");
            return NULL;
        }
        memcpy(r->hfield, m->hfield_data, sizeof(float) * (size_t)m->nhfielddata);
        r->nhfielddata = m->nhfielddata;
    }
    mjv_defaultScene(&r->scene);
    mjv_defaultCamera(&r->camera);
    mjv_defaultOption(&r->option);
    mjr_defaultContext(&r->con);
    r->ctx = gl.create(DMC_OSMESA_RGBA, 24, 8, 0, NULL);
    if (!r->ctx) {
        dmc_renderer_free(r);
        crl_error_set(err, CRL_E_RUNTIME, "dm_control: OSMesa could not create a GL context");
        return NULL;
    }
    if (!gl.make_current(r->ctx, r->buffer, DMC_GL_UNSIGNED_BYTE, width, height)) {
        dmc_renderer_free(r);
        crl_error_set(err, CRL_E_RUNTIME, "dm_control: OSMesa could not make its context current");
        return NULL;
    }
    /* The offscreen framebuffer is sized from the model's visual settings. */
    if (m->vis.global.offwidth < width)
        m->vis.global.offwidth = width;
    if (m->vis.global.offheight < height)
        m->vis.global.offheight = height;
    make_args a = {r, m};
    int rc = dmc_guarded(make_call, &a, "making the offscreen GL context", err);
    if (rc == CRL_OK && r->con.currentBuffer != mjFB_OFFSCREEN)
        rc = crl_error_set(err, CRL_E_RUNTIME,
                           "dm_control: MuJoCo has no offscreen framebuffer in the OSMesa context");
    if (rc != CRL_OK) {
        dmc_renderer_free(r);
        return NULL;
    }
    return r;
}

typedef struct draw_args {
    dmc_renderer *r;
    mjModel *m;
    mjData *d;
} draw_args;

static void draw_call(void *p)
{
    draw_args *a = p;
    dmc_renderer *r = a->r;
    const mjModel *m = a->m;
    for (int h = 0; r->nhfielddata == m->nhfielddata && h < m->nhfield; h++) {
        size_t n = (size_t)m->hfield_nrow[h] * (size_t)m->hfield_ncol[h];
        float *mine = r->hfield + m->hfield_adr[h];
        const float *now = m->hfield_data + m->hfield_adr[h];
        if (memcmp(mine, now, n * sizeof(float)) != 0) {
            mjr_uploadHField(m, &r->con, h);
            memcpy(mine, now, n * sizeof(float));
        }
    }
    mjrRect viewport = {0, 0, r->width, r->height};
    mjv_updateScene(a->m, a->d, &r->option, NULL, &r->camera, mjCAT_ALL, &r->scene);
    mjr_render(viewport, &r->scene, &r->con);
    mjr_readPixels(r->flip, NULL, viewport, &r->con);
}

int dmc_renderer_draw(dmc_renderer *r, mjModel *m, mjData *d, int camera, uint8_t *rgb,
                      crl_error *err)
{
    /* Several renderers may share a thread: each makes its own context current. */
    if (!gl.make_current(r->ctx, r->buffer, DMC_GL_UNSIGNED_BYTE, r->width, r->height))
        return crl_error_set(err, CRL_E_RUNTIME, "dm_control: OSMesa could not make its context current");
    mjr_setBuffer(mjFB_OFFSCREEN, &r->con);
    if (camera >= 0) {
        r->camera.type = mjCAMERA_FIXED;
        r->camera.fixedcamid = camera;
    } else {
        mjv_defaultFreeCamera(m, &r->camera);
    }
    draw_args a = {r, m, d};
    int rc = dmc_guarded(draw_call, &a, "rendering", err);
    if (rc != CRL_OK)
        return rc;
    size_t row = (size_t)r->width * 3;
    for (int y = 0; y < r->height; y++)
        memcpy(rgb + (size_t)y * row, r->flip + (size_t)(r->height - 1 - y) * row, row);
    return CRL_OK;
}

void dmc_renderer_free(dmc_renderer *r)
{
    if (!r)
        return;
    if (r->ctx) {
        gl.make_current(r->ctx, r->buffer, DMC_GL_UNSIGNED_BYTE, r->width, r->height);
        if (r->con_made)
            mjr_freeContext(&r->con);
        /* Unbound first: Mesa frees the context's framebuffer only then. */
        gl.make_current(NULL, NULL, 0, 0, 0);
        gl.destroy(r->ctx);
    }
    if (r->scene_made)
        mjv_freeScene(&r->scene);
    free(r->buffer);
    free(r->flip);
    free(r->hfield);
    free(r);
}
