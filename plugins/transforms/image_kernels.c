/* The image group's numeric kernels: uint8 -> float images, resize tables and loops, grayscale, crops. */
#include "config.h"
#include "image_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GCC/clang vector extension: plain SSE2 on x86-64, NEON on arm64. */
typedef float v4f __attribute__((vector_size(16)));

void tfk_u8_to_f32(const uint8_t *src, float *dst, int64_t n, int64_t h, int64_t w, int64_t c, int permute,
                   int scale)
{
    /* A table keeps the division out of the loop yet gives v / 255.0f
     * exactly, as torch's div(255) does. */
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = scale ? (float)v / 255.0f : (float)v;
    const int64_t hw = h * w, img = hw * c;
    if (!permute || c == 1) {
        int64_t total = n * img;
        for (int64_t i = 0; i < total; i++)
            dst[i] = lut[src[i]];
        return;
    }
    for (int64_t b = 0; b < n; b++) {
        const uint8_t *s = src + b * img;
        float *d = dst + b * img;
        if (c == 3) {
            float *p0 = d, *p1 = d + hw, *p2 = d + 2 * hw;
            int64_t i = 0;
            /* Four pixels (12 bytes) per round: three word loads, then one
             * 16-byte store per plane. */
            for (; i + 4 <= hw; i += 4) {
                uint32_t wd[3];
                memcpy(wd, s + 3 * i, sizeof wd);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define B(k) ((wd[(k) >> 2] >> (8 * ((k) & 3))) & 0xffu)
#else
#define B(k) ((wd[(k) >> 2] >> (8 * (3 - ((k) & 3)))) & 0xffu)
#endif
                v4f r = { lut[B(0)], lut[B(3)], lut[B(6)], lut[B(9)] };
                v4f g = { lut[B(1)], lut[B(4)], lut[B(7)], lut[B(10)] };
                v4f bv = { lut[B(2)], lut[B(5)], lut[B(8)], lut[B(11)] };
#undef B
                memcpy(p0 + i, &r, sizeof r);
                memcpy(p1 + i, &g, sizeof g);
                memcpy(p2 + i, &bv, sizeof bv);
            }
            for (; i < hw; i++) {
                p0[i] = lut[s[3 * i]];
                p1[i] = lut[s[3 * i + 1]];
                p2[i] = lut[s[3 * i + 2]];
            }
        } else {
            for (int64_t k = 0; k < c; k++) {
                float *p = d + k * hw;
                const uint8_t *sk = s + k;
                for (int64_t i = 0; i < hw; i++)
                    p[i] = lut[sk[i * c]];
            }
        }
    }
}

void tfk_axis_free(tfk_axis *ax)
{
    if (!ax)
        return;
    free(ax->i0);
    free(ax->i1);
    free(ax->l0f);
    free(ax->l1f);
    free(ax->l0d);
    free(ax->l1d);
    memset(ax, 0, sizeof *ax);
}

int tfk_axis_init(tfk_axis *ax, int64_t in, int64_t out, int nearest, int dbl)
{
    memset(ax, 0, sizeof *ax);
    ax->in = in;
    ax->out = out;
    ax->nearest = nearest;
    ax->dbl = dbl;
    size_t n = (size_t)out;
    ax->i0 = malloc(n * sizeof *ax->i0);
    ax->i1 = malloc(n * sizeof *ax->i1);
    ax->l0f = malloc(n * sizeof *ax->l0f);
    ax->l1f = malloc(n * sizeof *ax->l1f);
    ax->l0d = malloc(n * sizeof *ax->l0d);
    ax->l1d = malloc(n * sizeof *ax->l1d);
    if (!ax->i0 || !ax->i1 || !ax->l0f || !ax->l1f || !ax->l0d || !ax->l1d) {
        tfk_axis_free(ax);
        return -1;
    }
    const float sf = (float)in / (float)out;
    const double sd = (double)in / (double)out;
    for (int64_t d = 0; d < out; d++) {
        int64_t i0;
        double l1 = 0.0;
        if (nearest) {
            /* PyTorch's nearest_idx: identity and exact doubling are
             * special-cased, the rest is floor(dst * scale) in float. */
            if (out == in)
                i0 = d;
            else if (out == 2 * in)
                i0 = d >> 1;
            else
                i0 = (int64_t)floorf((float)d * sf);
            if (i0 > in - 1)
                i0 = in - 1;
            ax->i0[d] = ax->i1[d] = i0;
        } else if (dbl) {
            double src = sd * ((double)d + 0.5) - 0.5;
            if (src < 0)
                src = 0;
            i0 = (int64_t)src;
            l1 = src - (double)i0;
            if (l1 < 0)
                l1 = 0;
            if (l1 > 1)
                l1 = 1;
            ax->i0[d] = i0;
            ax->i1[d] = i0 + (i0 < in - 1 ? 1 : 0);
        } else {
            float src = sf * ((float)d + 0.5f) - 0.5f;
            if (src < 0)
                src = 0;
            i0 = (int64_t)src;
            float lf = src - (float)i0;
            if (lf < 0)
                lf = 0;
            if (lf > 1)
                lf = 1;
            l1 = lf;
            ax->i0[d] = i0;
            ax->i1[d] = i0 + (i0 < in - 1 ? 1 : 0);
        }
        ax->l1d[d] = l1;
        ax->l0d[d] = 1.0 - l1;
        ax->l1f[d] = (float)l1;
        ax->l0f[d] = 1.0f - (float)l1;
    }
    return 0;
}

/* One plane, element type T computed in A: the two-tap rows blended as
 * PyTorch's linear kernel orders it, h0 * (w0 a + w1 b) + h1 * (w0 c + w1 d). */
#define RESIZE_PLANE(T, A, L0, L1, STORE)                                                          \
    do {                                                                                           \
        const int64_t iw = rx->in, ow = rx->out, oh = ry->out;                                     \
        for (int64_t y = 0; y < oh; y++) {                                                         \
            const T *r0 = s + ry->i0[y] * iw, *r1 = s + ry->i1[y] * iw;                            \
            const A h0 = ry->L0[y], h1 = ry->L1[y];                                                \
            T *o = d + y * ow;                                                                     \
            for (int64_t x = 0; x < ow; x++) {                                                     \
                const int64_t x0 = rx->i0[x], x1 = rx->i1[x];                                      \
                const A w0 = rx->L0[x], w1 = rx->L1[x];                                            \
                A v = h0 * (w0 * (A)r0[x0] + w1 * (A)r0[x1]) + h1 * (w0 * (A)r1[x0] + w1 * (A)r1[x1]); \
                STORE;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Nearest on both axes: a gather, no arithmetic. */
#define NEAREST_PLANE(T)                                                                           \
    do {                                                                                           \
        const int64_t iw = rx->in, ow = rx->out, oh = ry->out;                                     \
        const int64_t *xi = rx->i0;                                                                \
        for (int64_t y = 0; y < oh; y++) {                                                         \
            const T *r0 = s + ry->i0[y] * iw;                                                      \
            T *o = d + y * ow;                                                                     \
            for (int64_t x = 0; x < ow; x++)                                                       \
                o[x] = r0[xi[x]];                                                                  \
        }                                                                                          \
    } while (0)

void tfk_resize_f32(const float *src, float *dst, int64_t planes, const tfk_axis *ry, const tfk_axis *rx)
{
    const int64_t isz = ry->in * rx->in, osz = ry->out * rx->out;
    for (int64_t p = 0; p < planes; p++) {
        const float *s = src + p * isz;
        float *d = dst + p * osz;
        if (ry->nearest)
            NEAREST_PLANE(float);
        else
            RESIZE_PLANE(float, float, l0f, l1f, o[x] = v);
    }
}

void tfk_resize_f64(const double *src, double *dst, int64_t planes, const tfk_axis *ry, const tfk_axis *rx)
{
    const int64_t isz = ry->in * rx->in, osz = ry->out * rx->out;
    for (int64_t p = 0; p < planes; p++) {
        const double *s = src + p * isz;
        double *d = dst + p * osz;
        if (ry->nearest)
            NEAREST_PLANE(double);
        else
            RESIZE_PLANE(double, double, l0d, l1d, o[x] = v);
    }
}

static inline uint8_t round_u8(float v)
{
    v = nearbyintf(v);
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

void tfk_resize_u8(const uint8_t *src, uint8_t *dst, int64_t planes, const tfk_axis *ry, const tfk_axis *rx)
{
    const int64_t isz = ry->in * rx->in, osz = ry->out * rx->out;
    for (int64_t p = 0; p < planes; p++) {
        const uint8_t *s = src + p * isz;
        uint8_t *d = dst + p * osz;
        if (ry->nearest)
            NEAREST_PLANE(uint8_t);
        else
            RESIZE_PLANE(uint8_t, float, l0f, l1f, o[x] = round_u8(v));
    }
}

void tfk_gray_f32(const float *src, float *dst, int64_t n, int64_t hw)
{
    for (int64_t b = 0; b < n; b++) {
        const float *r = src + b * 3 * hw, *g = r + hw, *bl = g + hw;
        float *o = dst + b * hw;
        int64_t i = 0;
        /* The same operations in the same order, four lanes at a time. */
        for (; i + 4 <= hw; i += 4) {
            v4f vr, vg, vb;
            memcpy(&vr, r + i, sizeof vr);
            memcpy(&vg, g + i, sizeof vg);
            memcpy(&vb, bl + i, sizeof vb);
            v4f vo = 0.2989f * vr + 0.587f * vg + 0.114f * vb;
            memcpy(o + i, &vo, sizeof vo);
        }
        for (; i < hw; i++)
            o[i] = 0.2989f * r[i] + 0.587f * g[i] + 0.114f * bl[i];
    }
}

void tfk_gray_f64(const double *src, double *dst, int64_t n, int64_t hw)
{
    for (int64_t b = 0; b < n; b++) {
        const double *r = src + b * 3 * hw, *g = r + hw, *bl = g + hw;
        double *o = dst + b * hw;
        for (int64_t i = 0; i < hw; i++)
            o[i] = 0.2989 * r[i] + 0.587 * g[i] + 0.114 * bl[i];
    }
}

void tfk_gray_u8(const uint8_t *src, uint8_t *dst, int64_t n, int64_t hw)
{
    /* torch promotes to float32 and .to(uint8) truncates; the sum stays
     * within [0, 255] because the weights add up to 0.9999. */
    float wr[256], wg[256], wb[256];
    for (int v = 0; v < 256; v++) {
        wr[v] = 0.2989f * (float)v;
        wg[v] = 0.587f * (float)v;
        wb[v] = 0.114f * (float)v;
    }
    for (int64_t b = 0; b < n; b++) {
        const uint8_t *r = src + b * 3 * hw, *g = r + hw, *bl = g + hw;
        uint8_t *o = dst + b * hw;
        for (int64_t i = 0; i < hw; i++)
            o[i] = (uint8_t)(wr[r[i]] + wg[g[i]] + wb[bl[i]]);
    }
}

void tfk_crop(const void *src, void *dst, size_t elem, int64_t planes, int64_t h, int64_t w, int64_t top,
              int64_t left, int64_t ch, int64_t cw)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    const size_t row = (size_t)cw * elem;
    for (int64_t p = 0; p < planes; p++) {
        const uint8_t *sp = s + ((size_t)(p * h + top) * (size_t)w + (size_t)left) * elem;
        for (int64_t y = 0; y < ch; y++) {
            memcpy(d, sp, row);
            d += row;
            sp += (size_t)w * elem;
        }
    }
}
