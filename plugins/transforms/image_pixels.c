/* Image transforms on pixels: ToTensorImage, Resize, CenterCrop, Crop, GrayScale (TorchRL's, numerics of torchvision). */
#include "config.h"
#include "image_common.h"
#include "image_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define KEY_OPTIONS(doc_in)                                                                                  \
    { "in_keys", CRL_OPT_LIST, 0, "pixels", 0, 0, NULL, doc_in },                                            \
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL,                                                           \
      "keys to write, one per in key (empty: write over the in keys)" }

static int feat_check(img_tf *t, int ndim, const int64_t *shape, int batch_ndim, int need, const char *key,
                      const char *layout, crl_error *err)
{
    if (ndim - batch_ndim >= need)
        return CRL_OK;
    char b[160];
    return crl_error_set(err, CRL_E_SHAPE,
                         "%s: key '%s' has shape %s (%d batch dim%s); it needs an image laid out as %s, i.e. at least "
                         "%d dims after the batch dims",
                         t->who, key, img_shape_str(ndim, shape, b, sizeof b), batch_ndim, batch_ndim == 1 ? "" : "s",
                         layout, need);
}

static int dtype_check(img_tf *t, crl_dtype dt, const char *key, crl_error *err)
{
    if (dt == CRL_U8 || dt == CRL_F32 || dt == CRL_F64)
        return CRL_OK;
    return crl_error_set(err, CRL_E_DTYPE,
                         "%s: key '%s' is %s; it works on uint8, float32 or float64 images (put ToTensorImage or "
                         "DTypeCastTransform before it)",
                         t->who, key, crl_dtype_name(dt) ? crl_dtype_name(dt) : "of an unknown dtype");
}

static int nomem(img_tf *t, crl_error *err)
{
    return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", t->who);
}

static void free_extra_plain(img_tf *t)
{
    free(t->extra);
}

/* ---- ToTensorImage ---------------------------------------------------- */

typedef struct {
    int from_int;        /* -1 auto, 0, 1 */
    bool shape_tolerant;
    crl_dtype dtype;
} tti_params;

static int tti_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                    img_plan *p, crl_error *err)
{
    const tti_params *q = t->extra;
    int rc;
    if (dt == CRL_BOOL || dt >= CRL_DTYPE_COUNT)
        return crl_error_set(err, CRL_E_DTYPE,
                             "%s: key '%s' is %s; it needs a uint8 image (or an integer or float one)", t->who, key,
                             crl_dtype_name(dt) ? crl_dtype_name(dt) : "of an unknown dtype");
    p->permute = !q->shape_tolerant || (ndim > 0 && (shape[ndim - 1] == 1 || shape[ndim - 1] == 3));
    if (p->permute && (rc = feat_check(t, ndim, shape, batch_ndim, 3, key, "[..., H, W, C]", err)))
        return rc;
    p->scale = q->from_int == 1 || (q->from_int < 0 && !crl_dtype_is_float(dt));
    p->out_dt = q->dtype;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    if (p->permute) {
        p->shape[ndim - 3] = shape[ndim - 1];
        p->shape[ndim - 2] = shape[ndim - 3];
        p->shape[ndim - 1] = shape[ndim - 2];
    }
    return CRL_OK;
}

static int tti_run(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    int nd = crl_tensor_ndim(in);
    const int64_t *sh = crl_tensor_shape(in);
    if (crl_tensor_dtype(in) == CRL_U8 && crl_tensor_dtype(out) == CRL_F32) {
        int64_t h = nd >= 3 ? sh[nd - 3] : 1, w = nd >= 2 ? sh[nd - 2] : 1, c = nd >= 1 ? sh[nd - 1] : 1;
        int64_t img = h * w * c, n = img ? crl_tensor_numel(in) / img : 0;
        if (n)
            tfk_u8_to_f32(crl_tensor_data(in), crl_tensor_data(out), n, h, w, c, p->permute, p->scale);
        return CRL_OK;
    }
    /* Any other dtype pair: permute, divide as torch does (in float32 for
     * a float32/float16 result, else in double), cast into out. */
    crl_tensor *view = NULL;
    crl_error e;
    crl_error_clear(&e);
    if (p->permute) {
        int dims[CRL_MAX_DIMS];
        for (int i = 0; i < nd - 3; i++)
            dims[i] = i;
        dims[nd - 3] = nd - 1;
        dims[nd - 2] = nd - 3;
        dims[nd - 1] = nd - 2;
        view = crl_tensor_permute((crl_tensor *)in, dims, &e);
    } else {
        view = crl_tensor_ref((crl_tensor *)in);
    }
    crl_tensor *tmp = view ? crl_tensor_cast(view, CRL_F64, &e) : NULL;
    crl_tensor_unref(view);
    if (!tmp)
        return e.code ? crl_error_pass(err, &e, CRL_E_NOMEM) : nomem(t, err);
    if (p->scale) {
        double *v = crl_tensor_data(tmp);
        int64_t n = crl_tensor_numel(tmp);
        if (crl_tensor_dtype(out) == CRL_F64)
            for (int64_t i = 0; i < n; i++)
                v[i] = v[i] / 255.0;
        else
            for (int64_t i = 0; i < n; i++)
                v[i] = (double)((float)v[i] / 255.0f);
    }
    int rc = crl_tensor_copy(out, tmp, err);
    crl_tensor_unref(tmp);
    return rc;
}

static int tti_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, "ToTensorImage", false, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    tti_params *q = calloc(1, sizeof *q);
    const char *fi = NULL, *dt = NULL;
    int rc = q ? CRL_OK : nomem(t, err);
    if (!rc)
        rc = crl_opts_string(o, "from_int", &fi, err);
    if (!rc)
        rc = crl_opts_string(o, "dtype", &dt, err);
    if (!rc)
        rc = crl_opts_bool(o, "shape_tolerant", &q->shape_tolerant, err);
    if (!rc) {
        q->from_int = !strcmp(fi, "auto") ? -1 : !strcmp(fi, "true") ? 1 : 0;
        if (!crl_dtype_from_name(dt, &q->dtype))
            rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] dtype = %s is not a dtype", crl_opts_origin(o, "dtype"),
                               crl_opts_section(o), dt);
    }
    if (rc) {
        free(q);
        img_tf_destroy(t);
        return rc;
    }
    t->extra = q;
    t->free_extra = free_extra_plain;
    t->plan = tti_plan;
    t->run = tti_run;
    *out = t;
    return CRL_OK;
}

static const crl_option tti_options[] = {
    KEY_OPTIONS("uint8 images [..., H, W, C] to turn into float [..., C, H, W]"),
    { "from_int", CRL_OPT_ENUM, 0, "auto", 0, 0, "auto|true|false",
      "divide by 255: auto does it for integer inputs only (TorchRL's from_int=None)" },
    { "shape_tolerant", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "leave the layout alone when the last dim is not 1 or 3 (already channels-first)" },
    { "dtype", CRL_OPT_ENUM, 0, "float32", 0, 0, "float32|float64|float16", "dtype of the result" },
    CRL_OPTIONS_END
};

/* ---- Resize ------------------------------------------------------------- */

typedef struct {
    int64_t w, h;
    int nearest;
    tfk_axis ay[2], ax[2]; /* cached tables, [dbl] */
} resize_params;

static void resize_free(img_tf *t)
{
    resize_params *q = t->extra;
    if (!q)
        return;
    for (int i = 0; i < 2; i++) {
        tfk_axis_free(&q->ay[i]);
        tfk_axis_free(&q->ax[i]);
    }
    free(q);
}

static int resize_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                       img_plan *p, crl_error *err)
{
    const resize_params *q = t->extra;
    int rc;
    if ((rc = dtype_check(t, dt, key, err)) ||
        (rc = feat_check(t, ndim, shape, batch_ndim, 2, key, "[..., C, H, W]", err)))
        return rc;
    for (int i = 0; i < 2; i++)
        if (shape[ndim - 2 + i] < 1)
            return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' is an empty image; nothing to resize", t->who, key);
    p->out_dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->shape[ndim - 2] = q->w;
    p->shape[ndim - 1] = q->h;
    return CRL_OK;
}

static int axis_get(tfk_axis *ax, int64_t in, int64_t out, int nearest, int dbl)
{
    if (ax->i0 && ax->in == in && ax->out == out && ax->nearest == nearest && ax->dbl == dbl)
        return 0;
    tfk_axis_free(ax);
    return tfk_axis_init(ax, in, out, nearest, dbl);
}

static int resize_run(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    (void)p;
    resize_params *q = t->extra;
    int nd = crl_tensor_ndim(in);
    const int64_t *sh = crl_tensor_shape(in);
    crl_dtype dt = crl_tensor_dtype(in);
    int dbl = dt == CRL_F64;
    if (axis_get(&q->ay[dbl], sh[nd - 2], q->w, q->nearest, dbl) ||
        axis_get(&q->ax[dbl], sh[nd - 1], q->h, q->nearest, dbl))
        return nomem(t, err);
    int64_t plane = sh[nd - 2] * sh[nd - 1];
    int64_t planes = crl_tensor_numel(in) / plane;
    if (crl_tensor_dtype(out) != dt)
        return crl_error_set(err, CRL_E_DTYPE, "%s: internal dtype mismatch (%s -> %s)", t->who, crl_dtype_name(dt),
                             crl_dtype_name(crl_tensor_dtype(out)));
    if (dt == CRL_F32)
        tfk_resize_f32(crl_tensor_data(in), crl_tensor_data(out), planes, &q->ay[0], &q->ax[0]);
    else if (dt == CRL_F64)
        tfk_resize_f64(crl_tensor_data(in), crl_tensor_data(out), planes, &q->ay[1], &q->ax[1]);
    else
        tfk_resize_u8(crl_tensor_data(in), crl_tensor_data(out), planes, &q->ay[0], &q->ax[0]);
    return CRL_OK;
}

/* w (and h, which defaults to w): TorchRL hands [w, h] to torchvision as
 * (height, width), so w is the output's rows and h its columns. */
static int read_wh(const crl_opts *o, int64_t *w, int64_t *h, crl_error *err)
{
    int rc;
    if ((rc = crl_opts_int(o, "w", w, err)))
        return rc;
    *h = *w;
    if (crl_opts_is_set(o, "h") && (rc = crl_opts_int(o, "h", h, err)))
        return rc;
    return CRL_OK;
}

static int resize_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, "Resize", false, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    resize_params *q = calloc(1, sizeof *q);
    t->extra = q;
    t->free_extra = resize_free;
    const char *interp = NULL;
    int rc = q ? CRL_OK : nomem(t, err);
    if (!rc)
        rc = read_wh(o, &q->w, &q->h, err);
    if (!rc)
        rc = crl_opts_string(o, "interpolation", &interp, err);
    if (rc) {
        img_tf_destroy(t);
        return rc;
    }
    q->nearest = !strcmp(interp, "nearest");
    t->plan = resize_plan;
    t->run = resize_run;
    *out = t;
    return CRL_OK;
}

static const crl_option resize_options[] = {
    { "w", CRL_OPT_INT, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 65536, NULL,
      "output rows (TorchRL's w: the second-to-last dim)" },
    { "h", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 65536, NULL, "output columns, the last dim (default: w)" },
    { "interpolation", CRL_OPT_ENUM, 0, "bilinear", 0, 0, "bilinear|nearest",
      "bilinear (half-pixel centres, no antialias) or PyTorch's legacy nearest" },
    KEY_OPTIONS("images [..., C, H, W] to resize"),
    CRL_OPTIONS_END
};

/* ---- CenterCrop and Crop ---------------------------------------------- */

typedef struct {
    int64_t w, h, top, left;
    bool center;
} crop_params;

static int crop_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                     img_plan *p, crl_error *err)
{
    int rc;
    (void)dt;
    const crop_params *q = t->extra;
    if ((rc = feat_check(t, ndim, shape, batch_ndim, 2, key, "[..., H, W]", err)))
        return rc;
    int64_t H = shape[ndim - 2], W = shape[ndim - 1];
    char b[160];
    if (q->center) {
        if (q->w > H || q->h > W)
            return crl_error_set(err, CRL_E_SHAPE,
                                 "%s: a %lld x %lld crop (w x h) does not fit in key '%s' of shape %s; use w <= %lld "
                                 "and h <= %lld",
                                 t->who, (long long)q->w, (long long)q->h, key, img_shape_str(ndim, shape, b, sizeof b),
                                 (long long)H, (long long)W);
        /* torchvision: int(round((H - h) / 2.0)), Python rounds half to even */
        p->top = (int64_t)nearbyint((double)(H - q->w) / 2.0);
        p->left = (int64_t)nearbyint((double)(W - q->h) / 2.0);
    } else {
        if (q->top + q->w > H || q->left + q->h > W)
            return crl_error_set(err, CRL_E_SHAPE,
                                 "%s: the window rows [%lld, %lld) x columns [%lld, %lld) (top, w, left, h) does not "
                                 "fit in key '%s' of shape %s; keep top + w <= %lld and left + h <= %lld",
                                 t->who, (long long)q->top, (long long)(q->top + q->w), (long long)q->left,
                                 (long long)(q->left + q->h), key, img_shape_str(ndim, shape, b, sizeof b),
                                 (long long)H, (long long)W);
        p->top = q->top;
        p->left = q->left;
    }
    p->out_dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->shape[ndim - 2] = q->w;
    p->shape[ndim - 1] = q->h;
    return CRL_OK;
}

static int crop_run(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    const crop_params *q = t->extra;
    int nd = crl_tensor_ndim(in);
    const int64_t *sh = crl_tensor_shape(in);
    if (crl_tensor_dtype(out) != crl_tensor_dtype(in))
        return crl_error_set(err, CRL_E_DTYPE, "%s: internal dtype mismatch", t->who);
    int64_t H = sh[nd - 2], W = sh[nd - 1];
    int64_t planes = H * W != 0 ? crl_tensor_numel(in) / (H * W) : 0;
    tfk_crop(crl_tensor_data(in), crl_tensor_data(out), crl_dtype_size(crl_tensor_dtype(in)), planes, H, W, p->top,
             p->left, q->w, q->h);
    return CRL_OK;
}

static int crop_create_common(const crl_opts *o, void **out, bool center, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, center ? "CenterCrop" : "Crop", false, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crop_params *q = calloc(1, sizeof *q);
    t->extra = q;
    t->free_extra = free_extra_plain;
    int rc = q ? CRL_OK : nomem(t, err);
    if (!rc) {
        q->center = center;
        rc = read_wh(o, &q->w, &q->h, err);
    }
    if (!rc && !center && !(rc = crl_opts_int(o, "top", &q->top, err)))
        rc = crl_opts_int(o, "left", &q->left, err);
    if (rc) {
        img_tf_destroy(t);
        return rc;
    }
    t->plan = crop_plan;
    t->run = crop_run;
    *out = t;
    return CRL_OK;
}

static int ccrop_create(const crl_opts *o, void **out, crl_error *err)
{
    return crop_create_common(o, out, true, err);
}

static int crop_create(const crl_opts *o, void **out, crl_error *err)
{
    return crop_create_common(o, out, false, err);
}

static const crl_option ccrop_options[] = {
    { "w", CRL_OPT_INT, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 65536, NULL,
      "rows kept around the centre (TorchRL's w: the second-to-last dim)" },
    { "h", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 65536, NULL, "columns kept, the last dim (default: w)" },
    KEY_OPTIONS("images [..., H, W] to crop"),
    CRL_OPTIONS_END
};

static const crl_option crop_options[] = {
    { "w", CRL_OPT_INT, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 65536, NULL,
      "rows kept (TorchRL's w: the second-to-last dim)" },
    { "h", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 65536, NULL, "columns kept, the last dim (default: w)" },
    { "top", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 65536, NULL, "first row kept" },
    { "left", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 65536, NULL, "first column kept" },
    KEY_OPTIONS("images [..., H, W] to crop"),
    CRL_OPTIONS_END
};

/* ---- GrayScale -------------------------------------------------------- */

static int gray_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                     img_plan *p, crl_error *err)
{
    int rc;
    if ((rc = dtype_check(t, dt, key, err)) ||
        (rc = feat_check(t, ndim, shape, batch_ndim, 3, key, "[..., C, H, W]", err)))
        return rc;
    int64_t c = shape[ndim - 3];
    if (c != 3 && c != 1) {
        char b[160];
        return crl_error_set(err, CRL_E_SHAPE,
                             "%s: key '%s' has shape %s: %lld channels at dim -3, it needs 3 (RGB) or 1, channels "
                             "first (put ToTensorImage before it for [H, W, C] frames)",
                             t->who, key, img_shape_str(ndim, shape, b, sizeof b), (long long)c);
    }
    p->copy = c == 1;
    p->out_dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->shape[ndim - 3] = 1;
    return CRL_OK;
}

static int gray_run(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    if (p->copy)
        return crl_tensor_copy(out, in, err);
    int nd = crl_tensor_ndim(in);
    const int64_t *sh = crl_tensor_shape(in);
    int64_t hw = sh[nd - 2] * sh[nd - 1];
    int64_t n = hw ? crl_tensor_numel(in) / (3 * hw) : 0;
    crl_dtype dt = crl_tensor_dtype(in);
    if (crl_tensor_dtype(out) != dt)
        return crl_error_set(err, CRL_E_DTYPE, "%s: internal dtype mismatch", t->who);
    if (dt == CRL_F32)
        tfk_gray_f32(crl_tensor_data(in), crl_tensor_data(out), n, hw);
    else if (dt == CRL_F64)
        tfk_gray_f64(crl_tensor_data(in), crl_tensor_data(out), n, hw);
    else
        tfk_gray_u8(crl_tensor_data(in), crl_tensor_data(out), n, hw);
    return CRL_OK;
}

static int gray_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, "GrayScale", false, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    t->plan = gray_plan;
    t->run = gray_run;
    *out = t;
    return CRL_OK;
}

static const crl_option gray_options[] = {
    KEY_OPTIONS("RGB images [..., 3, H, W] to turn into [..., 1, H, W]"),
    CRL_OPTIONS_END
};

/* ---- registration ----------------------------------------------------- */

/* TorchRL's Resize repr (torchvision's InterpolationMode names). */
static int resize_repr(void *p, char *buf, size_t size)
{
    const img_tf *t = p;
    const resize_params *q = t->extra;
    char *keys = tf_pylist(t->keys.n, t->keys.in);
    if (!keys)
        return -1;
    int n = snprintf(buf, size, "Resize(w=%lld, h=%lld, interpolation=InterpolationMode.%s, keys=%s)",
                     (long long)q->w, (long long)q->h, q->nearest ? "NEAREST" : "BILINEAR", keys);
    free(keys);
    return n;
}

#define IMG_OPS(create_, repr_)                                                                              \
    { .struct_size = sizeof(crl_transform_ops), .create = create_, .transform_specs = img_tf_specs,           \
      .call = img_tf_call, .destroy = img_tf_destroy, .repr = repr_ }

static const crl_transform_ops tti_ops = IMG_OPS(tti_create, NULL);
static const crl_transform_ops resize_ops = IMG_OPS(resize_create, resize_repr);
static const crl_transform_ops ccrop_ops = IMG_OPS(ccrop_create, NULL);
static const crl_transform_ops crop_ops = IMG_OPS(crop_create, NULL);
static const crl_transform_ops gray_ops = IMG_OPS(gray_create, NULL);

int tf_register_image_pixels(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register(host, "ToTensorImage", "uint8 images [..., H, W, C] to float [..., C, H, W] in [0, 1]",
                          tti_options, &tti_ops, err)) ||
        (rc = tf_register(host, "Resize", "resize images [..., C, H, W] to [..., C, w, h] (bilinear or nearest)",
                          resize_options, &resize_ops, err)) ||
        (rc = tf_register(host, "CenterCrop", "crop the centre w x h of images [..., H, W]", ccrop_options, &ccrop_ops,
                          err)) ||
        (rc = tf_register(host, "Crop", "crop a w x h window at (top, left) of images [..., H, W]", crop_options,
                          &crop_ops, err)) ||
        (rc = tf_register(host, "GrayScale", "RGB images [..., 3, H, W] to luma [..., 1, H, W] (ITU-R 601-2)",
                          gray_options, &gray_ops, err)))
        return rc;
    return CRL_OK;
}
