/* The image group's numeric kernels (contiguous buffers, leading dims flattened), shared by its transforms and tests. */
#ifndef CRL_TF_IMAGE_KERNELS_H
#define CRL_TF_IMAGE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* uint8 [n, h, w, c] -> float32 [n, c, h, w] (permute) or [n, h, w, c]
 * (keep), each value v becoming v / 255.0f when scale, else (float)v. */
void tfk_u8_to_f32(const uint8_t *src, float *dst, int64_t n, int64_t h, int64_t w, int64_t c, int permute,
                   int scale);

/* Resize tables of one axis (PyTorch's upsample kernels on a size, not a
 * scale factor).  Bilinear (align_corners = False, half-pixel centres):
 * src = max(0, (dst + 0.5) * in / out - 0.5), i0 = floor(src),
 * i1 = i0 + (i0 < in - 1), lambda1 = src - i0.  Nearest (legacy 'nearest'):
 * i0 = i1 = min(floor(dst * (float)in / out), in - 1), lambda1 = 0.
 * Index arithmetic in float as PyTorch does for float32 and uint8 inputs
 * (in double when dbl). */
typedef struct tfk_axis {
    int64_t in, out;
    int nearest, dbl;
    int64_t *i0, *i1;
    float *l0f, *l1f;
    double *l0d, *l1d;
} tfk_axis;

/* Fill ax for in -> out (>= 1 each); 0, or -1 when out of memory. */
int tfk_axis_init(tfk_axis *ax, int64_t in, int64_t out, int nearest, int dbl);
void tfk_axis_free(tfk_axis *ax);

/* planes x [ih, iw] -> planes x [oh, ow] with the row table ry and column
 * table rx.  uint8 rounds half to even (torchvision's round before the
 * cast). */
void tfk_resize_f32(const float *src, float *dst, int64_t planes, const tfk_axis *ry, const tfk_axis *rx);
void tfk_resize_f64(const double *src, double *dst, int64_t planes, const tfk_axis *ry, const tfk_axis *rx);
void tfk_resize_u8(const uint8_t *src, uint8_t *dst, int64_t planes, const tfk_axis *ry, const tfk_axis *rx);

/* [n, 3, hw] -> [n, 1, hw]: 0.2989 r + 0.587 g + 0.114 b (torchvision's
 * rgb_to_grayscale), in the element type (float for uint8, truncated). */
void tfk_gray_f32(const float *src, float *dst, int64_t n, int64_t hw);
void tfk_gray_f64(const double *src, double *dst, int64_t n, int64_t hw);
void tfk_gray_u8(const uint8_t *src, uint8_t *dst, int64_t n, int64_t hw);

/* planes x [h, w] of elem-byte elements -> planes x [ch, cw] starting at
 * (top, left); the window must lie inside. */
void tfk_crop(const void *src, void *dst, size_t elem, int64_t planes, int64_t h, int64_t w, int64_t top,
              int64_t left, int64_t ch, int64_t cw);

#endif
