/* Check suite: the image and shape transforms of plugins/transforms (kernels, specs, TensorDicts, the pixel pipeline). */
#include "config.h"

/* The image group is registered from this program as a built-in plugin
 * (crl_plugin_builtin_*): the suite needs neither transforms.so nor the
 * other groups. */
#define CRL_PLUGIN_BUILTIN

#include <check.h>
#include "keep-cairo.h"
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/env.h>
#include <crl/host.h>
#include <crl/transform.h>

#include "image_common.h"
#include "image_kernels.h"

static int image_group_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return tf_register_image(host, err);
}
CRL_PLUGIN_DEFINE(tf_image_test, "transforms", PACKAGE_VERSION, "MIT", "the image group of the transforms plugin",
                  NULL, image_group_init, NULL)

/* ---- fixtures ------------------------------------------------------------ */

typedef struct fx {
    crl_config *cfg;
    crl_host *host;
    crl_env *env;
} fx;

/* A host with the image group; extra_ini is appended to the config (may
 * hold [env] and [transform.*] sections).  Loads classic when asked. */
static void fx_open(fx *f, const char *extra_ini, bool classic)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    char *text = g_strdup_printf("[plugins]\nload = %s\n%s", classic ? "classic" : "", extra_ini ? extra_ini : "");
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->host = crl_host_new(f->cfg, &e);
    ck_assert_msg(f->host != NULL, "host: %s", e.message);
    rc = crl_host_load_builtin(f->host, crl_plugin_builtin_tf_image_test, &e);
    ck_assert_msg(rc == CRL_OK, "image group: %s", e.message);
    if (classic) {
        rc = crl_host_load_configured(f->host, &e);
        ck_assert_msg(rc == CRL_OK, "classic: %s (CRL_PLUGIN_PATH=%s)", e.message,
                      getenv("CRL_PLUGIN_PATH") ? getenv("CRL_PLUGIN_PATH") : "unset");
    }
}

static void fx_close(fx *f)
{
    crl_env_free(f->env);
    crl_host_free(f->host);
    crl_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

static crl_transform *mk(fx *f, const char *type, const char *const *kv)
{
    crl_error e = { 0 };
    crl_transform *t = crl_transform_new(f->host, type, kv, &e);
    ck_assert_msg(t != NULL, "crl_transform_new(%s): %s", type, e.message);
    return t;
}

static crl_tensor *tensor(crl_dtype dt, int ndim, const int64_t *shape)
{
    crl_error e = { 0 };
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    return t;
}

static crl_td *td_with(int bnd, const int64_t *batch, const char *key, crl_tensor *t)
{
    crl_error e = { 0 };
    crl_td *td = crl_td_new(bnd, batch, &e);
    ck_assert_ptr_nonnull(td);
    if (key) {
        ck_assert_msg(crl_td_set(td, key, t, &e) == CRL_OK, "%s", e.message);
        crl_tensor_unref(t);
    }
    return td;
}

static void apply_ok(crl_transform *t, crl_td *td)
{
    crl_error e = { 0 };
    int rc = crl_transform_apply(t, td, &e);
    ck_assert_msg(rc == CRL_OK, "apply %s: %s", crl_transform_type(t), e.message);
}

static void check_shape(const crl_tensor *t, int ndim, const int64_t *shape)
{
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(crl_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_msg(crl_tensor_shape(t)[i] == shape[i], "dim %d: %lld != %lld", i,
                      (long long)crl_tensor_shape(t)[i], (long long)shape[i]);
}

static void fill_iota(crl_tensor *t)
{
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, (double)i);
}

/* ---- references (written from the torchvision / PyTorch formulas) --------- */

/* torchvision resize without antialias, bilinear: F.interpolate(...,
 * mode="bilinear", align_corners=False) on a size. */
static double ref_bilinear(const double *img, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t y, int64_t x)
{
    double sy = ((double)y + 0.5) * (double)ih / (double)oh - 0.5;
    double sx = ((double)x + 0.5) * (double)iw / (double)ow - 0.5;
    sy = sy < 0 ? 0 : sy;
    sx = sx < 0 ? 0 : sx;
    int64_t y0 = (int64_t)floor(sy), x0 = (int64_t)floor(sx);
    int64_t y1 = y0 + 1 < ih ? y0 + 1 : ih - 1, x1 = x0 + 1 < iw ? x0 + 1 : iw - 1;
    double ly = sy - (double)y0, lx = sx - (double)x0;
    double top = (1 - lx) * img[y0 * iw + x0] + lx * img[y0 * iw + x1];
    double bot = (1 - lx) * img[y1 * iw + x0] + lx * img[y1 * iw + x1];
    return (1 - ly) * top + ly * bot;
}

/* PyTorch's legacy 'nearest': floor(dst * in / out), clamped. */
static int64_t ref_nearest(int64_t d, int64_t in, int64_t out)
{
    int64_t i = (int64_t)floorf((float)d * ((float)in / (float)out));
    return i < in - 1 ? i : in - 1;
}

/* ---- kernels --------------------------------------------------------------- */

START_TEST(kernel_bilinear_known)
{
    tfk_axis ay, ax;
    float src[16], dst[25];
    for (int i = 0; i < 16; i++)
        src[i] = (float)i;
    /* torchvision: resize(arange(16).view(4, 4), [2, 2], antialias=False) */
    ck_assert_int_eq(tfk_axis_init(&ay, 4, 2, 0, 0), 0);
    ck_assert_int_eq(tfk_axis_init(&ax, 4, 2, 0, 0), 0);
    tfk_resize_f32(src, dst, 1, &ay, &ax);
    const float want4[4] = { 2.5f, 4.5f, 10.5f, 12.5f };
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabsf(dst[i] - want4[i]) < 1e-6f, "4x4->2x2 [%d] = %g, want %g", i, dst[i], want4[i]);
    tfk_axis_free(&ay);
    tfk_axis_free(&ax);
    /* 3x3 -> 5x5: source coords 0, 0.4, 1, 1.6, 2 (the last clamped), and
     * the image is linear (3 y + x), so out = 3 sy + sx */
    ck_assert_int_eq(tfk_axis_init(&ay, 3, 5, 0, 0), 0);
    ck_assert_int_eq(tfk_axis_init(&ax, 3, 5, 0, 0), 0);
    tfk_resize_f32(src, dst, 1, &ay, &ax);
    const double s[5] = { 0, 0.4, 1.0, 1.6, 2.0 };
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 5; x++)
            ck_assert_msg(fabs(dst[y * 5 + x] - (3 * s[y] + s[x])) < 1e-5, "3x3->5x5 [%d,%d] = %.7g, want %.7g", y, x,
                          dst[y * 5 + x], 3 * s[y] + s[x]);
    ck_assert_msg(fabsf(dst[1 * 5 + 1] - 1.6f) < 1e-5f && fabsf(dst[2 * 5 + 3] - 4.6f) < 1e-5f, "spot values");
    tfk_axis_free(&ay);
    tfk_axis_free(&ax);
}
END_TEST

START_TEST(kernel_bilinear_reference)
{
    /* odd sizes, up and down, against the double reference */
    const int64_t sizes[][4] = { { 7, 9, 4, 13 }, { 5, 5, 11, 3 }, { 1, 6, 3, 2 }, { 500, 500, 64, 64 } };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t ih = sizes[k][0], iw = sizes[k][1], oh = sizes[k][2], ow = sizes[k][3];
        double *srcd = g_new(double, ih * iw * 2), *dstd = g_new(double, oh * ow * 2);
        float *srcf = g_new(float, ih * iw * 2), *dstf = g_new(float, oh * ow * 2);
        for (int64_t i = 0; i < ih * iw * 2; i++) {
            srcd[i] = sin(0.37 * (double)i) * 10.0 + (double)(i % 7);
            srcf[i] = (float)srcd[i];
        }
        tfk_axis ayf, axf, ayd, axd;
        ck_assert_int_eq(tfk_axis_init(&ayf, ih, oh, 0, 0) | tfk_axis_init(&axf, iw, ow, 0, 0), 0);
        ck_assert_int_eq(tfk_axis_init(&ayd, ih, oh, 0, 1) | tfk_axis_init(&axd, iw, ow, 0, 1), 0);
        tfk_resize_f32(srcf, dstf, 2, &ayf, &axf);
        tfk_resize_f64(srcd, dstd, 2, &ayd, &axd);
        for (int p = 0; p < 2; p++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t x = 0; x < ow; x++) {
                    double want = ref_bilinear(srcd + p * ih * iw, ih, iw, oh, ow, y, x);
                    int64_t i = p * oh * ow + y * ow + x;
                    ck_assert_msg(fabs(dstd[i] - want) < 1e-12, "f64 %lldx%lld->%lldx%lld [%d,%lld,%lld]: %.17g vs %.17g",
                                  (long long)ih, (long long)iw, (long long)oh, (long long)ow, p, (long long)y,
                                  (long long)x, dstd[i], want);
                    ck_assert_msg(fabs(dstf[i] - want) < 1e-4, "f32 [%d,%lld,%lld]: %.9g vs %.9g", p, (long long)y,
                                  (long long)x, dstf[i], want);
                }
        tfk_axis_free(&ayf);
        tfk_axis_free(&axf);
        tfk_axis_free(&ayd);
        tfk_axis_free(&axd);
        g_free(srcd);
        g_free(dstd);
        g_free(srcf);
        g_free(dstf);
    }
}
END_TEST

START_TEST(kernel_nearest)
{
    tfk_axis ay, ax;
    float src[16], dst[25];
    for (int i = 0; i < 16; i++)
        src[i] = (float)i;
    ck_assert_int_eq(tfk_axis_init(&ay, 4, 2, 1, 0) | tfk_axis_init(&ax, 4, 2, 1, 0), 0);
    tfk_resize_f32(src, dst, 1, &ay, &ax);
    const float want4[4] = { 0, 2, 8, 10 };
    for (int i = 0; i < 4; i++)
        ck_assert_msg(dst[i] == want4[i], "nearest 4x4->2x2 [%d] = %g", i, dst[i]);
    tfk_axis_free(&ay);
    tfk_axis_free(&ax);
    /* 3 -> 5: floor(d * 0.6) = 0, 0, 1, 1, 2 */
    ck_assert_int_eq(tfk_axis_init(&ay, 3, 5, 1, 0) | tfk_axis_init(&ax, 3, 5, 1, 0), 0);
    tfk_resize_f32(src, dst, 1, &ay, &ax);
    const int idx[5] = { 0, 0, 1, 1, 2 };
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 5; x++)
            ck_assert_msg(dst[y * 5 + x] == (float)(3 * idx[y] + idx[x]), "nearest 3x3->5x5 [%d,%d]", y, x);
    tfk_axis_free(&ay);
    tfk_axis_free(&ax);
    /* 500 -> 64 and 7 -> 3 against the formula; 2 -> 4 is exact doubling */
    const int64_t io[][2] = { { 500, 64 }, { 7, 3 }, { 2, 4 }, { 5, 13 } };
    for (size_t k = 0; k < 4; k++) {
        ck_assert_int_eq(tfk_axis_init(&ay, io[k][0], io[k][1], 1, 0), 0);
        for (int64_t d = 0; d < io[k][1]; d++)
            ck_assert_msg(ay.i0[d] == ref_nearest(d, io[k][0], io[k][1]), "%lld->%lld dst %lld: %lld", (long long)io[k][0],
                          (long long)io[k][1], (long long)d, (long long)ay.i0[d]);
        tfk_axis_free(&ay);
    }
    ck_assert_int_eq(tfk_axis_init(&ay, 500, 64, 1, 0), 0);
    ck_assert_int_eq(ay.i0[63], 492); /* floor(63 * 7.8125) */
    tfk_axis_free(&ay);
}
END_TEST

START_TEST(kernel_resize_u8_rounds_half_even)
{
    /* four 2x2 planes -> 1x1: the means 1.5, 2.5, 0.25, 1.25 round (half to
     * even, as torch.round) to 2, 2, 0, 1 */
    const uint8_t src[16] = { 0, 1, 2, 3, 1, 2, 2, 5, 0, 0, 0, 1, 1, 1, 1, 2 };
    uint8_t dst[4];
    tfk_axis ay, ax;
    ck_assert_int_eq(tfk_axis_init(&ay, 2, 1, 0, 0) | tfk_axis_init(&ax, 2, 1, 0, 0), 0);
    tfk_resize_u8(src, dst, 4, &ay, &ax);
    ck_assert_int_eq(dst[0], 2);
    ck_assert_int_eq(dst[1], 2);
    ck_assert_int_eq(dst[2], 0);
    ck_assert_int_eq(dst[3], 1);
    tfk_axis_free(&ay);
    tfk_axis_free(&ax);
}
END_TEST

START_TEST(kernel_gray_and_to_tensor)
{
    /* two images [3, 1, 2] */
    const float rgb[12] = { 1, 0, 0, 1, 0, 0.5f, /* r, g planes of image 0 (hw = 2) */ 0, 1, 2, 4, 6, 8 };
    float g[4];
    tfk_gray_f32(rgb, g, 2, 2);
    ck_assert(fabsf(g[0] - 0.2989f) < 1e-7f);
    ck_assert(fabsf(g[1] - (0.587f + 0.114f * 0.5f)) < 1e-7f);
    ck_assert(fabsf(g[2] - (0.2989f * 0 + 0.587f * 2 + 0.114f * 6)) < 1e-6f);
    ck_assert(fabsf(g[3] - (0.2989f * 1 + 0.587f * 4 + 0.114f * 8)) < 1e-6f);
    /* uint8 truncates: 255,255,255 -> 254.97 -> 254; 100,150,200 -> 140.74 -> 140 */
    const uint8_t u[6] = { 255, 100, 255, 150, 255, 200 };
    uint8_t gu[2];
    tfk_gray_u8(u, gu, 1, 2);
    ck_assert_int_eq(gu[0], 254);
    ck_assert_int_eq(gu[1], 140);
    /* [1, 2, 2, 3] HWC -> CHW / 255 */
    uint8_t hwc[12];
    for (int i = 0; i < 12; i++)
        hwc[i] = (uint8_t)(i * 20);
    float chw[12];
    tfk_u8_to_f32(hwc, chw, 1, 2, 2, 3, 1, 1);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 4; p++)
            ck_assert(chw[c * 4 + p] == (float)hwc[p * 3 + c] / 255.0f);
    /* a two-channel image takes the general path */
    tfk_u8_to_f32(hwc, chw, 2, 1, 3, 2, 1, 0);
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 2; c++)
            for (int p = 0; p < 3; p++)
                ck_assert(chw[b * 6 + c * 3 + p] == (float)hwc[b * 6 + p * 2 + c]);
}
END_TEST

/* ---- transforms on TensorDicts ------------------------------------------- */

START_TEST(to_tensor_image_batched)
{
    fx f;
    fx_open(&f, NULL, false);
    crl_transform *t = mk(&f, "ToTensorImage", NULL);
    const int64_t b[1] = { 2 }, sh[4] = { 2, 3, 4, 3 };
    crl_tensor *px = tensor(CRL_U8, 4, sh);
    for (int64_t i = 0; i < crl_tensor_numel(px); i++)
        crl_tensor_flat_set(px, i, (double)((i * 37) % 256));
    crl_tensor *keep = crl_tensor_ref(px);
    crl_td *td = td_with(1, b, "pixels", px);
    apply_ok(t, td);
    crl_tensor *out = crl_td_get(td, "pixels");
    const int64_t want[4] = { 2, 3, 3, 4 };
    check_shape(out, 4, want);
    ck_assert_int_eq(crl_tensor_dtype(out), CRL_F32);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 3; c++)
            for (int64_t y = 0; y < 3; y++)
                for (int64_t x = 0; x < 4; x++) {
                    int64_t io[4] = { n, y, x, c }, oo[4] = { n, c, y, x };
                    double v = crl_tensor_get_f64(keep, io);
                    ck_assert(crl_tensor_get_f64(out, oo) == (double)((float)v / 255.0f));
                }
    /* float input: permuted, not divided (TorchRL's from_int=None) */
    crl_tensor *fl = crl_tensor_cast(keep, CRL_F64, NULL);
    crl_td_set(td, "pixels", fl, NULL);
    apply_ok(t, td);
    out = crl_td_get(td, "pixels");
    int64_t o1[4] = { 1, 2, 1, 3 }, i1[4] = { 1, 1, 3, 2 };
    ck_assert(crl_tensor_get_f64(out, o1) == crl_tensor_get_f64(keep, i1));
    crl_tensor_unref(fl);
    crl_tensor_unref(keep);
    crl_td_unref(td);
    crl_transform_free(t);
    /* from_int = true and dtype = float64 on an int32 image */
    const char *kv[] = { "from_int=true", "dtype=float64", NULL };
    t = mk(&f, "ToTensorImage", kv);
    const int64_t s3[3] = { 1, 1, 3 };
    crl_tensor *ip = tensor(CRL_I32, 3, s3);
    crl_tensor_flat_set(ip, 0, 255);
    crl_tensor_flat_set(ip, 1, 51);
    crl_tensor_flat_set(ip, 2, 0);
    td = td_with(0, NULL, "pixels", ip);
    apply_ok(t, td);
    out = crl_td_get(td, "pixels");
    ck_assert_int_eq(crl_tensor_dtype(out), CRL_F64);
    ck_assert(crl_tensor_flat_get(out, 0) == 1.0);
    ck_assert(fabs(crl_tensor_flat_get(out, 1) - 0.2) < 1e-7);
    crl_td_unref(td);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

START_TEST(resize_batched_and_out_keys)
{
    fx f;
    fx_open(&f, NULL, false);
    const char *kv[] = { "w=5", "h=5", "out_keys=small", NULL };
    crl_transform *t = mk(&f, "Resize", kv);
    const int64_t b[1] = { 2 }, sh[4] = { 2, 2, 3, 3 };
    crl_tensor *px = tensor(CRL_F32, 4, sh);
    fill_iota(px);
    crl_td *td = td_with(1, b, "pixels", px);
    apply_ok(t, td);
    ck_assert_ptr_nonnull(crl_td_get(td, "pixels")); /* the in key stays */
    crl_tensor *out = crl_td_get(td, "small");
    const int64_t want[4] = { 2, 2, 5, 5 };
    check_shape(out, 4, want);
    const double s[5] = { 0, 0.4, 1.0, 1.6, 2.0 };
    for (int64_t p = 0; p < 4; p++)
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 5; x++) {
                int64_t idx[4] = { p / 2, p % 2, y, x };
                double v = crl_tensor_get_f64(out, idx);
                ck_assert_msg(fabs(v - (9.0 * (double)p + 3 * s[y] + s[x])) < 1e-5, "plane %lld [%d,%d] = %g",
                              (long long)p, y, x, v);
            }
    crl_td_unref(td);
    crl_transform_free(t);
    /* nearest, non-square: TorchRL's w is the rows, h the columns */
    const char *kn[] = { "w=2", "h=3", "interpolation=nearest", NULL };
    t = mk(&f, "Resize", kn);
    const int64_t s2[3] = { 1, 4, 6 };
    crl_tensor *u = tensor(CRL_U8, 3, s2);
    fill_iota(u);
    td = td_with(0, NULL, "pixels", u);
    apply_ok(t, td);
    out = crl_td_get(td, "pixels");
    const int64_t w2[3] = { 1, 2, 3 };
    check_shape(out, 3, w2);
    ck_assert_int_eq(crl_tensor_dtype(out), CRL_U8);
    const double wantn[6] = { 0, 2, 4, 12, 14, 16 }; /* rows 0, 2; cols 0, 2, 4 */
    for (int i = 0; i < 6; i++)
        ck_assert_msg(crl_tensor_flat_get(out, i) == wantn[i], "nearest [%d] = %g", i, crl_tensor_flat_get(out, i));
    crl_td_unref(td);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

START_TEST(grayscale_and_crops)
{
    fx f;
    fx_open(&f, NULL, false);
    crl_transform *g = mk(&f, "GrayScale", NULL);
    const int64_t b[1] = { 2 }, sh[4] = { 2, 3, 2, 2 };
    crl_tensor *px = tensor(CRL_F32, 4, sh);
    for (int64_t i = 0; i < 24; i++)
        crl_tensor_flat_set(px, i, (double)(i % 5) / 4.0);
    crl_tensor *keep = crl_tensor_ref(px);
    crl_td *td = td_with(1, b, "pixels", px);
    apply_ok(g, td);
    crl_tensor *out = crl_td_get(td, "pixels");
    const int64_t want[4] = { 2, 1, 2, 2 };
    check_shape(out, 4, want);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t p = 0; p < 4; p++) {
            float r = (float)crl_tensor_flat_get(keep, n * 12 + p), gg = (float)crl_tensor_flat_get(keep, n * 12 + 4 + p),
                  bl = (float)crl_tensor_flat_get(keep, n * 12 + 8 + p);
            ck_assert((float)crl_tensor_flat_get(out, n * 4 + p) == 0.2989f * r + 0.587f * gg + 0.114f * bl);
        }
    /* one channel passes through */
    apply_ok(g, td);
    check_shape(crl_td_get(td, "pixels"), 4, want);
    crl_tensor_unref(keep);
    crl_td_unref(td);
    crl_transform_free(g);

    /* CenterCrop 2x3 of [2, 5, 7]: top = round(1.5) = 2, left = round(2) = 2 */
    const char *kc[] = { "w=2", "h=3", NULL };
    crl_transform *cc = mk(&f, "CenterCrop", kc);
    const int64_t s5[4] = { 2, 2, 5, 7 };
    crl_tensor *img = tensor(CRL_I16, 4, s5);
    fill_iota(img);
    td = td_with(1, b, "pixels", img);
    apply_ok(cc, td);
    out = crl_td_get(td, "pixels");
    const int64_t wc[4] = { 2, 2, 2, 3 };
    check_shape(out, 4, wc);
    for (int64_t p = 0; p < 4; p++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 3; x++)
                ck_assert(crl_tensor_flat_get(out, p * 6 + y * 3 + x) == (double)(p * 35 + (2 + y) * 7 + 2 + x));
    crl_td_unref(td);
    crl_transform_free(cc);
    /* CenterCrop on 6 rows keeping 3: round(1.5) = 2; on 8 keeping 3: round(2.5) = 2 (half to even) */
    const char *kc2[] = { "w=3", "h=1", NULL };
    cc = mk(&f, "CenterCrop", kc2);
    const int64_t s8[2] = { 8, 1 };
    img = tensor(CRL_F64, 2, s8);
    fill_iota(img);
    td = td_with(0, NULL, "pixels", img);
    apply_ok(cc, td);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "pixels"), 0) == 2.0);
    crl_td_unref(td);
    crl_transform_free(cc);

    /* Crop at (top 1, left 3), 3 rows x 2 columns */
    const char *kr[] = { "w=3", "h=2", "top=1", "left=3", NULL };
    crl_transform *cr = mk(&f, "Crop", kr);
    img = tensor(CRL_U8, 4, s5);
    fill_iota(img);
    td = td_with(1, b, "pixels", img);
    apply_ok(cr, td);
    out = crl_td_get(td, "pixels");
    const int64_t wr[4] = { 2, 2, 3, 2 };
    check_shape(out, 4, wr);
    for (int64_t p = 0; p < 4; p++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 2; x++)
                ck_assert(crl_tensor_flat_get(out, p * 6 + y * 2 + x) == (double)((p * 35 + (1 + y) * 7 + 3 + x) % 256));
    crl_td_unref(td);
    crl_transform_free(cr);
    fx_close(&f);
}
END_TEST

START_TEST(shape_transforms)
{
    fx f;
    fx_open(&f, NULL, false);
    const int64_t b[1] = { 2 }, sh[4] = { 2, 2, 3, 4 };
    /* PermuteTransform dims = -1, -3, -2: [2 | 2, 3, 4] -> [2 | 4, 2, 3] */
    const char *kp[] = { "dims=-1,-3,-2", "in_keys=x", "out_keys=y", NULL };
    crl_transform *t = mk(&f, "PermuteTransform", kp);
    crl_tensor *x = tensor(CRL_F32, 4, sh);
    fill_iota(x);
    crl_td *td = td_with(1, b, "x", x);
    apply_ok(t, td);
    crl_tensor *y = crl_td_get(td, "y");
    const int64_t wp[4] = { 2, 4, 2, 3 };
    check_shape(y, 4, wp);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 4; c++)
            for (int64_t i = 0; i < 2; i++)
                for (int64_t j = 0; j < 3; j++) {
                    int64_t oi[4] = { n, c, i, j }, ii[4] = { n, i, j, c };
                    ck_assert(crl_tensor_get_f64(y, oi) == crl_tensor_get_f64(x, ii));
                }
    crl_transform_free(t);
    /* a transpose of equal dims, written in place */
    const char *kt[] = { "dims=-1,-2", "in_keys=sq", NULL };
    t = mk(&f, "PermuteTransform", kt);
    const int64_t s22[3] = { 2, 2, 2 };
    crl_tensor *sq = tensor(CRL_I64, 3, s22);
    fill_iota(sq);
    crl_td_set(td, "sq", sq, NULL);
    crl_tensor_unref(sq);
    apply_ok(t, td);
    const double wt[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
    for (int i = 0; i < 8; i++)
        ck_assert(crl_tensor_flat_get(crl_td_get(td, "sq"), i) == wt[i]);
    crl_transform_free(t);

    /* UnsqueezeTransform dim = -1 then SqueezeTransform dim = -1 */
    const char *ku[] = { "dim=-1", "in_keys=x", NULL };
    t = mk(&f, "UnsqueezeTransform", ku);
    apply_ok(t, td);
    const int64_t wu[5] = { 2, 2, 3, 4, 1 };
    check_shape(crl_td_get(td, "x"), 5, wu);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "x"), 23) == 23.0);
    crl_transform_free(t);
    const char *ks[] = { "dim=-1", "in_keys=x", NULL };
    t = mk(&f, "SqueezeTransform", ks);
    apply_ok(t, td);
    check_shape(crl_td_get(td, "x"), 4, sh);
    crl_transform_free(t);
    /* allow_positive_dim: dim 0 is the first dim after the batch dims */
    const char *kup[] = { "dim=0", "allow_positive_dim=true", "in_keys=x", NULL };
    t = mk(&f, "UnsqueezeTransform", kup);
    apply_ok(t, td);
    const int64_t wup[5] = { 2, 1, 2, 3, 4 };
    check_shape(crl_td_get(td, "x"), 5, wup);
    crl_transform_free(t);
    const char *ksp[] = { "dim=0", "allow_positive_dim=true", "in_keys=x", NULL };
    t = mk(&f, "SqueezeTransform", ksp);
    apply_ok(t, td);
    check_shape(crl_td_get(td, "x"), 4, sh);
    crl_transform_free(t);

    /* FlattenObservation -3 .. -2: [2 | 2, 3, 4] -> [2 | 6, 4], values in order */
    const char *kf[] = { "first_dim=-3", "last_dim=-2", "in_keys=x", NULL };
    t = mk(&f, "FlattenObservation", kf);
    apply_ok(t, td);
    const int64_t wf[3] = { 2, 6, 4 };
    check_shape(crl_td_get(td, "x"), 3, wf);
    for (int i = 0; i < 48; i++)
        ck_assert(crl_tensor_flat_get(crl_td_get(td, "x"), i) == (double)i);
    crl_transform_free(t);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* IndexSelectTransform: the entries in the order given, negative from the end, along a middle dim too;
 * out_keys keep the input; bad indices and dims name the key, shape and index. */
START_TEST(index_select)
{
    fx f;
    fx_open(&f, NULL, false);
    const int64_t b[1] = { 3 }, sh[2] = { 3, 4 };
    crl_tensor *x = tensor(CRL_F32, 2, sh);
    fill_iota(x);
    crl_td *td = td_with(1, b, "observation", x);
    const char *kv[] = { "indices=2, 0, -1", NULL };
    crl_transform *t = mk(&f, "IndexSelectTransform", kv);
    apply_ok(t, td);
    const int64_t want[2] = { 3, 3 };
    const crl_tensor *y = crl_td_get(td, "observation");
    check_shape(y, 2, want);
    const double vals[9] = { 2, 0, 3, 6, 4, 7, 10, 8, 11 };
    for (int i = 0; i < 9; i++)
        ck_assert_double_eq(crl_tensor_flat_get(y, i), vals[i]);
    crl_transform_free(t);
    /* dim 0 after the batch dim of a [2 | 3, 2] int64 tensor, into another key */
    const int64_t b2[1] = { 2 }, s3[3] = { 2, 3, 2 };
    crl_tensor *z = tensor(CRL_I64, 3, s3);
    fill_iota(z);
    crl_td *td2 = td_with(1, b2, "z", z);
    const char *kd[] = { "indices=1", "dim=0", "in_keys=z", "out_keys=z1", NULL };
    t = mk(&f, "IndexSelectTransform", kd);
    apply_ok(t, td2);
    const int64_t w2[3] = { 2, 1, 2 };
    check_shape(crl_td_get(td2, "z1"), 3, w2);
    check_shape(crl_td_get(td2, "z"), 3, s3);
    const double v2[4] = { 2, 3, 8, 9 };
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(td2, "z1"), i), v2[i]);
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td2, "z1")), CRL_I64);
    crl_transform_free(t);
    crl_td_unref(td2);
    /* out of range, a dim inside the batch, not whole, none given */
    const char *kb[] = { "indices=0, 3", NULL };
    t = mk(&f, "IndexSelectTransform", kb);
    crl_error e = { 0 };
    ck_assert_int_eq(crl_transform_apply(t, td, &e), CRL_E_SHAPE);
    ck_assert_msg(strstr(e.message, "'observation'") && strstr(e.message, "index 3 is outside") &&
                  strstr(e.message, "[3, 3]"), "%s", e.message);
    crl_transform_free(t);
    const char *kbd[] = { "indices=0", "dim=-2", NULL };
    t = mk(&f, "IndexSelectTransform", kbd);
    ck_assert_int_eq(crl_transform_apply(t, td, &e), CRL_E_SHAPE);
    ck_assert_msg(strstr(e.message, "dim = -2 names none"), "%s", e.message);
    crl_transform_free(t);
    const char *kh[] = { "indices=0.5", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "IndexSelectTransform", kh, &e));
    ck_assert_msg(e.code == CRL_E_CONFIG && strstr(e.message, "0.5 is not a whole number"), "%s", e.message);
    ck_assert_ptr_null(crl_transform_new(f.host, "IndexSelectTransform", NULL, &e));
    ck_assert_msg(strstr(e.message, "indices"), "%s", e.message);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

START_TEST(cat_tensors)
{
    fx f;
    fx_open(&f, NULL, false);
    const char *kv[] = { "in_keys=velocity, orientations", "out_key=observation", NULL };
    crl_transform *t = mk(&f, "CatTensors", kv);
    const int64_t b[1] = { 3 }, so[2] = { 3, 4 }, sv[2] = { 3, 2 };
    crl_tensor *o = tensor(CRL_F64, 2, so), *v = tensor(CRL_F64, 2, sv);
    fill_iota(o);
    for (int i = 0; i < 6; i++)
        crl_tensor_flat_set(v, i, 100.0 + i);
    crl_td *td = td_with(1, b, "orientations", o);
    crl_td_set(td, "velocity", v, NULL);
    crl_tensor_unref(v);
    apply_ok(t, td);
    ck_assert(!crl_td_has(td, "orientations") && !crl_td_has(td, "velocity"));
    crl_tensor *out = crl_td_get(td, "observation");
    const int64_t w[2] = { 3, 6 };
    check_shape(out, 2, w);
    /* sorted keys: orientations first, then velocity */
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 4; c++)
            ck_assert(crl_tensor_flat_get(out, r * 6 + c) == (double)(r * 4 + c));
        for (int c = 0; c < 2; c++)
            ck_assert(crl_tensor_flat_get(out, r * 6 + 4 + c) == 100.0 + r * 2 + c);
    }
    crl_td_unref(td);
    crl_transform_free(t);

    /* unsorted, kept keys, along dim -2, with a key one dim short */
    const char *kv2[] = { "in_keys=b, a", "sort=false", "del_keys=false", "unsqueeze_if_needed=true", NULL };
    t = mk(&f, "CatTensors", kv2);
    const int64_t sa[2] = { 3, 1 }, sb[1] = { 3 };
    crl_tensor *ta = tensor(CRL_F32, 2, sa), *tb = tensor(CRL_F32, 1, sb);
    fill_iota(ta);
    for (int i = 0; i < 3; i++)
        crl_tensor_flat_set(tb, i, -1.0 - i);
    td = td_with(1, b, "a", ta);
    crl_td_set(td, "b", tb, NULL);
    crl_tensor_unref(tb);
    apply_ok(t, td);
    ck_assert(crl_td_has(td, "a") && crl_td_has(td, "b"));
    out = crl_td_get(td, "observation_vector");
    const int64_t w2[2] = { 3, 2 };
    check_shape(out, 2, w2);
    for (int r = 0; r < 3; r++) {
        ck_assert(crl_tensor_flat_get(out, r * 2) == -1.0 - r);
        ck_assert(crl_tensor_flat_get(out, r * 2 + 1) == (double)r);
    }
    crl_td_unref(td);
    crl_transform_free(t);
    fx_close(&f);
}
END_TEST

/* ---- specs ------------------------------------------------------------------ */

static crl_spec *pixel_obs(int bnd, const int64_t *batch, int64_t h, int64_t w)
{
    crl_error e = { 0 };
    int64_t sh[4];
    for (int i = 0; i < bnd; i++)
        sh[i] = batch[i];
    sh[bnd] = h;
    sh[bnd + 1] = w;
    sh[bnd + 2] = 3;
    crl_spec *c = crl_spec_composite(bnd, batch, &e);
    crl_spec *px = crl_spec_bounded(CRL_U8, bnd + 3, sh, 0, 255, &e);
    crl_spec *ob = crl_spec_unbounded(CRL_F32, bnd + 1, (int64_t[]){ bnd ? batch[0] : 3, 3 }, &e);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(crl_spec_composite_set(c, "pixels", px, &e), CRL_OK);
    if (ob)
        crl_spec_composite_set(c, "observation", ob, &e);
    crl_spec_unref(px);
    crl_spec_unref(ob);
    return c;
}

START_TEST(specs_image_chain)
{
    fx f;
    fx_open(&f, NULL, false);
    crl_error e = { 0 };
    const int64_t b[1] = { 4 };
    crl_spec *obs = pixel_obs(1, b, 500, 500);
    crl_transform *tt = mk(&f, "ToTensorImage", NULL);
    const char *kr[] = { "w=64", "h=64", NULL };
    crl_transform *rs = mk(&f, "Resize", kr);
    crl_transform *gs = mk(&f, "GrayScale", NULL);
    crl_spec *s1 = crl_transform_observation_spec(tt, obs, &e);
    ck_assert_msg(s1 != NULL, "%s", e.message);
    const crl_spec *p1 = crl_spec_composite_get(s1, "pixels");
    ck_assert_int_eq(crl_spec_get_kind(p1), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_dtype(p1), CRL_F32);
    const int64_t w1[4] = { 4, 3, 500, 500 };
    ck_assert_int_eq(crl_spec_ndim(p1), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(crl_spec_shape(p1)[i], w1[i]);
    ck_assert(crl_tensor_flat_get(crl_spec_low(p1), 0) == 0.0);
    ck_assert(crl_tensor_flat_get(crl_spec_high(p1), 12345) == 1.0);
    crl_spec *s2 = crl_transform_observation_spec(rs, s1, &e);
    ck_assert_msg(s2 != NULL, "%s", e.message);
    crl_spec *s3 = crl_transform_observation_spec(gs, s2, &e);
    ck_assert_msg(s3 != NULL, "%s", e.message);
    const crl_spec *p3 = crl_spec_composite_get(s3, "pixels");
    const int64_t w3[4] = { 4, 1, 64, 64 };
    ck_assert_int_eq(crl_spec_ndim(p3), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(crl_spec_shape(p3)[i], w3[i]);
    ck_assert_int_eq(crl_spec_dtype(p3), CRL_F32);
    ck_assert_int_eq(crl_spec_get_kind(p3), CRL_SPEC_BOUNDED);
    /* the bounds went through the transforms: 0.2989 + 0.587 + 0.114 */
    ck_assert(fabs(crl_tensor_flat_get(crl_spec_high(p3), 7) - 0.9999) < 1e-6);
    ck_assert_ptr_nonnull(crl_spec_composite_get(s3, "observation"));
    crl_spec_unref(s1);
    crl_spec_unref(s2);
    crl_spec_unref(s3);

    /* CatTensors: Unbounded result, in keys gone */
    const char *kc[] = { "in_keys=observation, extra", "out_key=vec", NULL };
    crl_transform *ct = mk(&f, "CatTensors", kc);
    crl_spec *ex = crl_spec_bounded(CRL_F32, 2, (int64_t[]){ 4, 2 }, -1, 1, &e);
    crl_spec_composite_set(obs, "extra", ex, &e);
    crl_spec_unref(ex);
    crl_spec *s4 = crl_transform_observation_spec(ct, obs, &e);
    ck_assert_msg(s4 != NULL, "%s", e.message);
    const crl_spec *v = crl_spec_composite_get(s4, "vec");
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(crl_spec_get_kind(v), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_shape(v)[1], 5);
    ck_assert_ptr_null(crl_spec_composite_get(s4, "observation"));
    ck_assert_ptr_null(crl_spec_composite_get(s4, "extra"));
    ck_assert_ptr_nonnull(crl_spec_composite_get(s4, "pixels"));
    crl_spec_unref(s4);
    crl_transform_free(ct);

    crl_spec_unref(obs);
    crl_transform_free(tt);
    crl_transform_free(rs);
    crl_transform_free(gs);
    fx_close(&f);
}
END_TEST

/* ---- bad input ------------------------------------------------------------- */

static void apply_fails(crl_transform *t, crl_td *td, int code, const char *const *needles)
{
    crl_error e = { 0 };
    int rc = crl_transform_apply(t, td, &e);
    ck_assert_msg(rc == code, "%s: got %s (%s), want %s", crl_transform_type(t), crl_status_name(rc), e.message,
                  crl_status_name(code));
    ck_assert_int_eq(e.code, code);
    for (size_t i = 0; needles && needles[i]; i++)
        ck_assert_msg(strstr(e.message, needles[i]), "'%s' not in: %s", needles[i], e.message);
}

START_TEST(bad_inputs)
{
    fx f;
    fx_open(&f, NULL, false);
    crl_error e = { 0 };
    /* missing key: names it and the keys present */
    crl_transform *tt = mk(&f, "ToTensorImage", NULL);
    const int64_t s3[1] = { 3 };
    crl_td *td = td_with(0, NULL, "observation", tensor(CRL_F32, 1, s3));
    crl_td_set(td, "reward", tensor(CRL_F32, 1, s3), NULL);
    crl_tensor_unref(crl_td_get(td, "reward"));
    apply_fails(tt, td, CRL_E_NOT_FOUND, (const char *[]){ "pixels", "observation", "reward", NULL });
    /* wrong dtype: a bool image */
    const int64_t shw[3] = { 2, 2, 3 };
    crl_tensor *bp = tensor(CRL_BOOL, 3, shw);
    crl_td_set(td, "pixels", bp, NULL);
    crl_tensor_unref(bp);
    apply_fails(tt, td, CRL_E_DTYPE, (const char *[]){ "ToTensorImage", "pixels", "bool", "uint8", NULL });
    /* wrong rank: a vector as an image */
    crl_tensor *vp = tensor(CRL_U8, 1, s3);
    crl_td_set(td, "pixels", vp, NULL);
    crl_tensor_unref(vp);
    apply_fails(tt, td, CRL_E_SHAPE, (const char *[]){ "pixels", "[3]", "[..., H, W, C]", NULL });
    crl_transform_free(tt);

    /* Resize on int64, GrayScale on [.., 4, H, W] and on HWC frames */
    const char *kr[] = { "w=8", NULL };
    crl_transform *rs = mk(&f, "Resize", kr);
    const int64_t s4[3] = { 3, 4, 4 };
    crl_tensor *ip = tensor(CRL_I64, 3, s4);
    crl_td_set(td, "pixels", ip, NULL);
    crl_tensor_unref(ip);
    apply_fails(rs, td, CRL_E_DTYPE, (const char *[]){ "Resize", "int64", "ToTensorImage", NULL });
    crl_transform_free(rs);
    crl_transform *gs = mk(&f, "GrayScale", NULL);
    const int64_t s44[3] = { 4, 5, 5 };
    crl_tensor *fp = tensor(CRL_F32, 3, s44);
    crl_td_set(td, "pixels", fp, NULL);
    crl_tensor_unref(fp);
    apply_fails(gs, td, CRL_E_SHAPE, (const char *[]){ "GrayScale", "[4, 5, 5]", "3", NULL });
    crl_transform_free(gs);

    /* crops larger than the image */
    const char *kc[] = { "w=6", NULL };
    crl_transform *cc = mk(&f, "CenterCrop", kc);
    apply_fails(cc, td, CRL_E_SHAPE, (const char *[]){ "CenterCrop", "6 x 6", "[4, 5, 5]", NULL });
    crl_transform_free(cc);
    const char *kcr[] = { "w=2", "top=4", NULL };
    crl_transform *cr = mk(&f, "Crop", kcr);
    apply_fails(cr, td, CRL_E_SHAPE, (const char *[]){ "Crop", "top + w <= 5", NULL });
    crl_transform_free(cr);

    /* squeeze of a dim that is not 1; unsqueeze out of range; flatten */
    const char *ks[] = { "dim=-1", "in_keys=pixels", NULL };
    crl_transform *sq = mk(&f, "SqueezeTransform", ks);
    apply_fails(sq, td, CRL_E_SHAPE, (const char *[]){ "size 5", NULL });
    crl_transform_free(sq);
    const char *ku[] = { "dim=-5", "in_keys=pixels", NULL };
    crl_transform *us = mk(&f, "UnsqueezeTransform", ku);
    apply_fails(us, td, CRL_E_SHAPE, (const char *[]){ "-5", NULL });
    crl_transform_free(us);
    const char *kp[] = { "dims=-1,-2,-3,-4", "in_keys=pixels", NULL };
    crl_transform *pm = mk(&f, "PermuteTransform", kp);
    apply_fails(pm, td, CRL_E_SHAPE, (const char *[]){ "4 trailing dims", NULL });
    crl_transform_free(pm);

    /* CatTensors: mixed dtypes and mismatched shapes */
    const char *kct[] = { "in_keys=pixels, observation", NULL };
    crl_transform *ct = mk(&f, "CatTensors", kct);
    apply_fails(ct, td, CRL_E_SHAPE, (const char *[]){ "observation", "one rank", NULL });
    crl_transform_free(ct);
    const char *kct2[] = { "in_keys=observation, o2", NULL };
    ct = mk(&f, "CatTensors", kct2);
    crl_tensor *o2 = tensor(CRL_F64, 1, s3);
    crl_td_set(td, "o2", o2, NULL);
    crl_tensor_unref(o2);
    apply_fails(ct, td, CRL_E_DTYPE, (const char *[]){ "float64", "float32", NULL });
    crl_transform_free(ct);
    crl_td_unref(td);

    /* bad options */
    const char *bad1[] = { "dims=-1,-1", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "PermuteTransform", bad1, &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "dims"), "%s", e.message);
    const char *bad2[] = { "dim=1", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "UnsqueezeTransform", bad2, &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "allow_positive_dim"), "%s", e.message);
    const char *bad3[] = { "in_keys=a", "dim=0", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "CatTensors", bad3, &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    const char *bad4[] = { "in_keys=a,b", "out_keys=c", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "GrayScale", bad4, &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "out_keys"), "%s", e.message);
    const char *bad5[] = { "interpolation=bicubic", "w=3", NULL };
    ck_assert_ptr_null(crl_transform_new(f.host, "Resize", bad5, &e));
    ck_assert_ptr_null(crl_transform_new(f.host, "Resize", NULL, &e)); /* w is required */

    /* specs: missing key names the available ones; wrong dtype */
    crl_spec *obs = pixel_obs(0, NULL, 8, 8);
    const char *kk[] = { "in_keys=pixel", NULL };
    crl_transform *t2 = mk(&f, "ToTensorImage", kk);
    ck_assert_ptr_null(crl_transform_observation_spec(t2, obs, &e));
    ck_assert_int_eq(e.code, CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'pixel'") && strstr(e.message, "pixels") && strstr(e.message, "observation"),
                  "%s", e.message);
    crl_transform_free(t2);
    crl_transform *g2 = mk(&f, "GrayScale", NULL); /* on HWC frames, before ToTensorImage */
    ck_assert_ptr_null(crl_transform_observation_spec(g2, obs, &e));
    ck_assert_int_eq(e.code, CRL_E_SHAPE);
    ck_assert_msg(strstr(e.message, "ToTensorImage"), "%s", e.message);
    crl_transform_free(g2);
    crl_spec_unref(obs);
    fx_close(&f);
}
END_TEST

/* ---- the tutorial's pixel pipeline on native Pendulum ---------------------- */

/* The [env] and [transform.*] sections of conf/examples/pendulum-pixels-64.ini;
 * extra holds more [env] lines. */
#define PIPELINE_INI(extra)                                                                                  \
    "[env]\nbackend = classic\nid = Pendulum-v1\nseed = 0\nfrom_pixels = true\npixels_only = false\n" extra \
    "transforms = totensor, resize, gray\n"                                                                  \
    "[transform.totensor]\ntype = ToTensorImage\n"                                                           \
    "[transform.resize]\ntype = Resize\nw = 64\nh = 64\n"                                                    \
    "[transform.gray]\ntype = GrayScale\n"

START_TEST(pendulum_pixels_64)
{
    fx f;
    fx_open(&f, PIPELINE_INI(""), true);
    crl_error e = { 0 };
    f.env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(f.env != NULL, "env: %s", e.message);
    ck_assert_int_eq((int)crl_env_transform_count(f.env), 3);
    const crl_spec *px = crl_spec_composite_get(crl_env_observation_spec(f.env), "pixels");
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(crl_spec_dtype(px), CRL_F32);
    ck_assert_int_eq(crl_spec_ndim(px), 3);
    ck_assert_int_eq(crl_spec_shape(px)[0], 1);
    ck_assert_int_eq(crl_spec_shape(px)[1], 64);
    ck_assert_int_eq(crl_spec_shape(px)[2], 64);
    const crl_spec *base = crl_spec_composite_get(crl_env_base_observation_spec(f.env), "pixels");
    ck_assert_int_eq(crl_spec_dtype(base), CRL_U8);
    ck_assert_int_eq(crl_spec_shape(base)[2], 3);

    crl_td *td = crl_env_reset(f.env, NULL, &e);
    ck_assert_msg(td != NULL, "reset: %s", e.message);
    crl_tensor *p = crl_td_get(td, "pixels");
    const int64_t w[3] = { 1, 64, 64 };
    check_shape(p, 3, w);
    ck_assert_int_eq(crl_tensor_dtype(p), CRL_F32);
    /* the frame as the three transforms compute it from the raw render */
    const int64_t fs[3] = { crl_env_render_height(f.env), crl_env_render_width(f.env), 3 };
    crl_tensor *frame = tensor(CRL_U8, 3, fs);
    ck_assert_msg(crl_env_render(f.env, 0, frame, &e) == CRL_OK, "render: %s", e.message);
    crl_td *raw = td_with(0, NULL, "pixels", frame);
    for (size_t i = 0; i < 3; i++)
        apply_ok(crl_env_transform_at(f.env, i), raw);
    ck_assert(crl_tensor_equal(crl_td_get(raw, "pixels"), p));
    double lo = 1, hi = 0;
    for (int64_t i = 0; i < crl_tensor_numel(p); i++) {
        double v = crl_tensor_flat_get(p, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    ck_assert_msg(lo >= 0 && hi <= 1 && hi > lo, "pixels in [%g, %g]", lo, hi);
    crl_td_unref(raw);
    ck_assert_int_eq(crl_env_rand_step(f.env, td, &e), CRL_OK);
    check_shape(crl_td_get(td, "next.pixels"), 3, w);
    crl_td_unref(td);
    ck_assert_msg(crl_env_check_specs(f.env, 5, &e) == CRL_OK, "check_specs: %s", e.message);
    fx_close(&f);
}
END_TEST

START_TEST(pendulum_batched_pixels)
{
    fx f;
    fx_open(&f, PIPELINE_INI("num_envs = 3\n"), true);
    crl_error e = { 0 };
    f.env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(f.env != NULL, "env: %s", e.message);
    crl_td *td = crl_env_reset(f.env, NULL, &e);
    ck_assert_msg(td != NULL, "reset: %s", e.message);
    const int64_t w[4] = { 3, 1, 64, 64 };
    check_shape(crl_td_get(td, "pixels"), 4, w);
    crl_td_unref(td);
    ck_assert_msg(crl_env_check_specs(f.env, 3, &e) == CRL_OK, "check_specs: %s", e.message);
    fx_close(&f);
}
END_TEST

/* Every transform of the group passes check_env_specs on a classic env:
 * the pixel ones on Pendulum's frames (2 envs, after ToTensorImage where they
 * need CHW), the shape ones on CartPole's observation. */
static const char *const spec_cases[][2] = {
    { "Pendulum-v1", "transforms = t\n[transform.t]\ntype = ToTensorImage\n" },
    { "Pendulum-v1", "transforms = t, r\n[transform.t]\ntype = ToTensorImage\n"
                     "[transform.r]\ntype = Resize\nw = 32\nh = 48\ninterpolation = nearest\n" },
    { "Pendulum-v1", "transforms = t, c\n[transform.t]\ntype = ToTensorImage\n"
                     "[transform.c]\ntype = CenterCrop\nw = 100\nh = 80\n" },
    { "Pendulum-v1", "transforms = t, c\n[transform.t]\ntype = ToTensorImage\n"
                     "[transform.c]\ntype = Crop\nw = 64\nh = 64\ntop = 10\nleft = 20\n" },
    { "Pendulum-v1", "transforms = t, g\n[transform.t]\ntype = ToTensorImage\n[transform.g]\ntype = GrayScale\n" },
    { "Pendulum-v1", "transforms = p\n[transform.p]\ntype = PermuteTransform\ndims = -1, -3, -2\nin_keys = pixels\n" },
    { "CartPole-v1", "transforms = u\n[transform.u]\ntype = UnsqueezeTransform\ndim = -1\nin_keys = observation\n" },
    { "CartPole-v1", "transforms = u, s\n[transform.u]\ntype = UnsqueezeTransform\ndim = -1\nin_keys = observation\n"
                     "[transform.s]\ntype = SqueezeTransform\ndim = -1\nin_keys = observation\n" },
    { "Pendulum-v1", "transforms = t, f\n[transform.t]\ntype = ToTensorImage\n"
                     "[transform.f]\ntype = FlattenObservation\nfirst_dim = -3\nlast_dim = -1\nin_keys = pixels\n" },
    { "CartPole-v1", "transforms = i\n[transform.i]\ntype = IndexSelectTransform\nindices = 0, 2\n" },
    { "CartPole-v1", "transforms = p, c\n[transform.p]\ntype = PermuteTransform\ndims = -1\nin_keys = observation\n"
                     "out_keys = obs2\n[transform.c]\ntype = CatTensors\nin_keys = observation, obs2\n"
                     "out_key = both\n" },
};

START_TEST(every_transform_check_specs)
{
    const char *id = spec_cases[_i][0];
    bool pixels = strcmp(id, "Pendulum-v1") == 0;
    char ini[2048];
    snprintf(ini, sizeof ini, "[env]\nbackend = classic\nid = %s\nseed = 3\nnum_envs = 2\n%s%s", id,
             pixels ? "from_pixels = true\npixels_only = false\n" : "", spec_cases[_i][1]);
    fx f;
    fx_open(&f, ini, true);
    crl_error e = { 0 };
    f.env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_msg(f.env != NULL, "case %d: env: %s", _i, e.message);
    ck_assert_msg(crl_env_check_specs(f.env, 4, &e) == CRL_OK, "case %d: check_specs: %s", _i, e.message);
    fx_close(&f);
}
END_TEST

START_TEST(env_missing_key)
{
    /* GrayScale straight on Pendulum's state: no 'pixels'; the error names
     * the key and what the env has */
    const char ini[] = "[env]\nbackend = classic\nid = Pendulum-v1\ntransforms = gray\n"
                       "[transform.gray]\ntype = GrayScale\n";
    fx f;
    fx_open(&f, ini, true);
    crl_error e = { 0 };
    f.env = crl_env_from_config(f.host, f.cfg, "env", &e);
    ck_assert_ptr_null(f.env);
    ck_assert_int_eq(e.code, CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'pixels'") && strstr(e.message, "observation"), "%s", e.message);
    fx_close(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("transforms_image");
    TCase *k = tcase_create("kernels");
    tcase_add_test(k, kernel_bilinear_known);
    tcase_add_test(k, kernel_bilinear_reference);
    tcase_add_test(k, kernel_nearest);
    tcase_add_test(k, kernel_resize_u8_rounds_half_even);
    tcase_add_test(k, kernel_gray_and_to_tensor);
    suite_add_tcase(s, k);
    TCase *t = tcase_create("transforms");
    tcase_add_test(t, to_tensor_image_batched);
    tcase_add_test(t, resize_batched_and_out_keys);
    tcase_add_test(t, grayscale_and_crops);
    tcase_add_test(t, shape_transforms);
    tcase_add_test(t, index_select);
    tcase_add_test(t, cat_tensors);
    tcase_add_test(t, specs_image_chain);
    tcase_add_test(t, bad_inputs);
    suite_add_tcase(s, t);
    TCase *env = tcase_create("env");
    tcase_set_timeout(env, 60);
    tcase_add_test(env, pendulum_pixels_64);
    tcase_add_loop_test(env, every_transform_check_specs, 0, (int)(sizeof spec_cases / sizeof spec_cases[0]));
    tcase_add_test(env, pendulum_batched_pixels);
    tcase_add_test(env, env_missing_key);
    suite_add_tcase(s, env);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
