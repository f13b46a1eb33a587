/* crl bench transforms: ToTensorImage, Resize and GrayScale on 500x500x3 frames in MB/s, next to memcpy of the same
 * bytes; and CartPole-v1's pixel pipeline to 84x84 grayscale, drawn large and resized or drawn at 84x84. */
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <crl/transform.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#define H 500
#define W 500

static volatile uint8_t sink;

typedef struct {
    const void *src;
    void *dst;
    size_t bytes;
} copy_state;

static void run_memcpy(void *p, uint64_t n)
{
    copy_state *c = p;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(c->dst, c->src, c->bytes);
        sink = ((volatile uint8_t *)c->dst)[i % c->bytes];
    }
}

typedef struct {
    crl_transform *t;
    crl_td *td;
    crl_error err;
    int failed;
} apply_state;

/* The transform writes to its own out key, which it reuses from call to
 * call, so what is timed is the kernel, not an allocation. */
static void run_apply(void *p, uint64_t n)
{
    apply_state *a = p;
    for (uint64_t i = 0; i < n && !a->failed; i++)
        if (crl_transform_apply(a->t, a->td, &a->err))
            a->failed = 1;
}

typedef struct {
    const char *label;      /* what is measured */
    const char *type;       /* registered transform */
    const char *kv[6];      /* its options */
    crl_dtype in_dt;        /* the frame it reads: uint8 [H, W, 3] or float32 [3, H, W] */
} bench_case;

static const bench_case cases[] = {
    { "ToTensorImage  uint8 [500,500,3] -> float32 [3,500,500]", "ToTensorImage", { "out_keys=out", NULL }, CRL_U8 },
    { "Resize bilinear  float32 [3,500,500] -> [3,64,64]", "Resize",
      { "w=64", "h=64", "in_keys=frame", "out_keys=out", NULL }, CRL_F32 },
    { "Resize nearest   float32 [3,500,500] -> [3,64,64]", "Resize",
      { "w=64", "h=64", "interpolation=nearest", "in_keys=frame", "out_keys=out", NULL }, CRL_F32 },
    { "Resize bilinear  uint8 [3,500,500] -> [3,64,64]", "Resize",
      { "w=64", "h=64", "in_keys=frame", "out_keys=out", NULL }, CRL_U8 },
    { "GrayScale  float32 [3,500,500] -> [1,500,500]", "GrayScale", { "in_keys=frame", "out_keys=out", NULL },
      CRL_F32 },
};

/* A frame of pseudo-random bytes (or their float32 / 255), fixed seed. */
static crl_tensor *make_frame(crl_dtype dt, bool hwc, crl_error *err)
{
    const int64_t shape_hwc[3] = { H, W, 3 }, shape_chw[3] = { 3, H, W };
    crl_tensor *t = crl_tensor_new(dt, 3, hwc ? shape_hwc : shape_chw, err);
    if (!t)
        return NULL;
    crl_rng rng;
    crl_rng_init(&rng, 7, 0);
    int64_t n = crl_tensor_numel(t);
    if (dt == CRL_U8) {
        uint8_t *d = crl_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            d[i] = (uint8_t)crl_rng_below(&rng, 256);
    } else {
        float *d = crl_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            d[i] = (float)crl_rng_below(&rng, 256) / 255.0f;
    }
    return t;
}

/* ---- a pixel pipeline end to end: CartPole-v1 frames to a grayscale 84x84 observation ---- */

typedef struct {
    crl_env *env;
    crl_td *td, *next;
    crl_error err;
    int failed;
} pix_state;

static void run_pix(void *p, uint64_t n)
{
    pix_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++) {
        if (crl_env_rand_step(s->env, s->td, &s->err) || crl_env_step_mdp_into(s->env, s->td, s->next, &s->err))
            s->failed = 1;
        crl_td *t = s->td;
        s->td = s->next;
        s->next = t;
    }
}

static int bench_pipeline(crl_host *host, const char *env_keys, const char *transforms, double seconds,
                          crl_bench_result *out, crl_error *err)
{
    char *text = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\nfrom_pixels = true\n"
                                 "auto_reset = next_step\n%stransforms = %s\n\n[transform.t]\ntype = ToTensorImage\n\n"
                                 "[transform.r]\ntype = Resize\nw = 84\nh = 84\n\n[transform.g]\ntype = GrayScale\n",
                                 env_keys, transforms);
    crl_error e;
    crl_error_clear(&e);
    crl_config *cfg = crl_config_new(&e);
    pix_state s = { 0 };
    int rc = CRL_OK;
    if (!cfg || crl_config_load_buffer(cfg, "crl bench transforms", text, strlen(text), CRL_LAYER_FILE, &e) ||
        !(s.env = crl_env_from_config(host, cfg, "env", &e)) || !(s.td = crl_env_reset(s.env, NULL, &e)) ||
        !(s.next = crl_td_clone(s.td, &e)))
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
    if (!rc) {
        *out = crl__bench_measure(run_pix, &s, seconds, 3);
        if (s.failed)
            rc = crl_error_pass(err, &s.err, CRL_E_RUNTIME);
    }
    crl_td_unref(s.td);
    crl_td_unref(s.next);
    crl_env_free(s.env);
    crl_config_free(cfg);
    g_free(text);
    return rc;
}

static int bench_pipelines(crl_host *host, double seconds, crl_error *err)
{
    int rc;
    if (!crl_host_find(host, CRL_KIND_ENV, "classic") && (rc = crl_host_load_name(host, "classic", err))) {
        crl_error_prefix(err, "the classic plugin is needed for the pixel pipelines: ");
        return rc;
    }
    crl_bench_result big, direct;
    rc = bench_pipeline(host, "", "t, r, g", seconds, &big, err);
    if (!rc)
        rc = bench_pipeline(host, "render_width = 84\nrender_height = 84\n", "t, g", seconds, &direct, err);
    if (rc)
        return rc;
    printf("  CartPole-v1 pixels to a grayscale [1, 84, 84] observation, per env step (physics, render, "
           "transforms):\n");
    printf("    %-54s %10.1f us/step %8.0f steps/s\n", "600x400 frame, ToTensorImage, Resize 84x84, GrayScale",
           big.ns_per_op / 1e3, 1e9 / big.ns_per_op);
    printf("    %-54s %10.1f us/step %8.0f steps/s\n", "render_width/height = 84, ToTensorImage, GrayScale",
           direct.ns_per_op / 1e3, 1e9 / direct.ns_per_op);
    printf("    drawing at 84x84: %.1fx the steps/s\n", big.ns_per_op / direct.ns_per_op);
    return CRL_OK;
}

int crl__bench_transforms(double seconds)
{
    crl_error err;
    crl_error_clear(&err);
    crl_config *cfg = NULL;
    crl_host *host = NULL;
    int rc = CRL_EXIT_RUNTIME;
    size_t ncase = sizeof cases / sizeof cases[0];
    crl_bench_result res[sizeof cases / sizeof cases[0]], base[sizeof cases / sizeof cases[0]];
    size_t in_bytes[sizeof cases / sizeof cases[0]];
    void *dst = NULL;
    if (!(cfg = crl_config_new(&err)) || !(host = crl_host_new(cfg, &err)))
        goto out;
    if (!crl_host_find(host, CRL_KIND_TRANSFORM, "ToTensorImage") && crl_host_load_name(host, "transforms", &err)) {
        crl_error_prefix(&err, "the transforms plugin is needed (set CRL_PLUGIN_PATH to its directory): ");
        goto out;
    }
    dst = g_malloc((size_t)H * W * 3 * sizeof(float));
    printf("crl bench transforms (%.2f s per measurement; one %dx%dx3 frame per operation, MB/s of the frame read, "
           "memcpy of the same bytes measured alongside)\n",
           seconds, H, W);
    for (size_t i = 0; i < ncase; i++) {
        const bench_case *c = &cases[i];
        bool hwc = !strcmp(c->type, "ToTensorImage");
        crl_tensor *frame = make_frame(c->in_dt, hwc, &err);
        crl_td *td = frame ? crl_td_new(0, NULL, &err) : NULL;
        crl_transform *t = td ? crl_transform_new(host, c->type, c->kv, &err) : NULL;
        int bad = !t || crl_td_set(td, hwc ? "pixels" : "frame", frame, &err);
        if (!bad) {
            apply_state a = { t, td, { 0 }, 0 };
            res[i] = crl__bench_measure(run_apply, &a, seconds, 3);
            if (a.failed) {
                err = a.err;
                bad = 1;
            }
        }
        if (!bad) {
            in_bytes[i] = crl_tensor_nbytes(frame);
            copy_state cp = { crl_tensor_data(frame), dst, in_bytes[i] };
            base[i] = crl__bench_measure(run_memcpy, &cp, seconds, 3);
        }
        crl_transform_free(t);
        crl_td_unref(td);
        crl_tensor_unref(frame);
        if (bad) {
            crl_error_prefix(&err, "%s: ", c->type);
            goto out;
        }
    }
    printf("  %-56s %10s %10s %12s %8s\n", "transform", "us/frame", "MB/s", "memcpy MB/s", "ratio");
    for (size_t i = 0; i < ncase; i++) {
        double mbs = (double)in_bytes[i] / res[i].ns_per_op * 1e3;
        double mbs_copy = (double)in_bytes[i] / base[i].ns_per_op * 1e3;
        printf("  %-56s %10.1f %10.0f %12.0f %7.2fx\n", cases[i].label, res[i].ns_per_op / 1e3, mbs, mbs_copy,
               mbs / mbs_copy);
    }
    printf("  ratio: the transform's MB/s over memcpy's on the same input bytes.  ToTensorImage writes four bytes\n"
           "  (a float) per byte it reads; a 64x64 Resize reads only the rows and columns it samples.\n");
    if (bench_pipelines(host, seconds, &err))
        goto out;
    rc = CRL_EXIT_OK;
out:
    if (rc != CRL_EXIT_OK)
        crl__cli_print_error("bench transforms", &err);
    g_free(dst);
    crl_host_free(host);
    crl_config_free(cfg);
    return rc;
}
