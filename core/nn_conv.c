/* Conv2d and MaxPool2d kernels over batches of [C, H, W] rows: im2col / col2im around OpenBLAS's sgemm
 * (one product per image, each of the sizes `crl bench nn` measures), and the max-pool with the argmax
 * kept for backward.  They allocate nothing: the callers own every buffer. */
#include "nn-private.h"

#include <cblas.h>
#include <float.h>

/* The k floats of one window row; the common kernel widths get a fixed-size copy (a vector move or two). */
static inline void copy_run(float *dst, const float *src, int64_t k)
{
    switch (k) {
    case 3: memcpy(dst, src, 3 * sizeof *dst); return;
    case 4: memcpy(dst, src, 4 * sizeof *dst); return;
    case 8: memcpy(dst, src, 8 * sizeof *dst); return;
    default: memcpy(dst, src, (size_t)k * sizeof *dst); return;
    }
}

static inline void add_run(float *dst, const float *src, int64_t k)
{
    switch (k) {
    case 3: for (int j = 0; j < 3; j++) dst[j] += src[j]; return;
    case 4: for (int j = 0; j < 4; j++) dst[j] += src[j]; return;
    case 8: for (int j = 0; j < 8; j++) dst[j] += src[j]; return;
    default: for (int64_t j = 0; j < k; j++) dst[j] += src[j]; return;
    }
}

/* The columns of one image x [C, H, W], one row per output pixel: col [Ho*Wo, C*k*k], zeros where the
 * window reads the padding.  Row-per-pixel (rather than [C*k*k, Ho*Wo]) makes every copy a run of k
 * adjacent floats of one image row, not a gather at the stride: the im2col of an 84x84 frame under an
 * 8x8 stride-4 kernel runs several times faster, and sgemm reads either layout at the same speed. */
static void im2col(const crl__stage *s, const float *x, float *col)
{
    int64_t k = s->k, ckk = s->cin * k * k;
    for (int64_t oy = 0; oy < s->hout; oy++)
        for (int64_t ox = 0; ox < s->wout; ox++) {
            float *dst = col + (oy * s->wout + ox) * ckk;
            int64_t x0 = ox * s->stride - s->pad;
            bool inside = x0 >= 0 && x0 + k <= s->win;
            for (int64_t c = 0; c < s->cin; c++)
                for (int64_t ki = 0; ki < k; ki++, dst += k) {
                    int64_t iy = oy * s->stride - s->pad + ki;
                    if (iy < 0 || iy >= s->hin) {
                        memset(dst, 0, (size_t)k * sizeof *dst);
                        continue;
                    }
                    const float *row = x + (c * s->hin + iy) * s->win;
                    if (inside)
                        copy_run(dst, row + x0, k);
                    else
                        for (int64_t kj = 0; kj < k; kj++)
                            dst[kj] = x0 + kj >= 0 && x0 + kj < s->win ? row[x0 + kj] : 0.0f;
                }
        }
}

/* dx [C, H, W] += the columns dcol [Ho*Wo, C*k*k] added back where im2col read them. */
static void col2im(const crl__stage *s, const float *dcol, float *dx)
{
    int64_t k = s->k, ckk = s->cin * k * k;
    for (int64_t oy = 0; oy < s->hout; oy++)
        for (int64_t ox = 0; ox < s->wout; ox++) {
            const float *src = dcol + (oy * s->wout + ox) * ckk;
            int64_t x0 = ox * s->stride - s->pad;
            bool inside = x0 >= 0 && x0 + k <= s->win;
            for (int64_t c = 0; c < s->cin; c++)
                for (int64_t ki = 0; ki < k; ki++, src += k) {
                    int64_t iy = oy * s->stride - s->pad + ki;
                    if (iy < 0 || iy >= s->hin)
                        continue;
                    float *row = dx + (c * s->hin + iy) * s->win;
                    if (inside)
                        add_run(row + x0, src, k);
                    else
                        for (int64_t kj = 0; kj < k; kj++)
                            if (x0 + kj >= 0 && x0 + kj < s->win)
                                row[x0 + kj] += src[kj];
                }
        }
}

int64_t crl__stage_in_size(const crl__stage *s) { return s->cin * s->hin * s->win; }
int64_t crl__stage_out_size(const crl__stage *s) { return s->cout * s->hout * s->wout; }
int64_t crl__stage_col_size(const crl__stage *s)
{
    return s->kind == CRL__STAGE_CONV ? s->cin * s->k * s->k * s->hout * s->wout : 0;
}

void crl__conv_forward(const crl__stage *s, const float *x, int64_t B, const float *W, const float *b, float *y,
                       float *col)
{
    int64_t ckk = s->cin * s->k * s->k, hw = s->hout * s->wout, in = crl__stage_in_size(s),
            out = crl__stage_out_size(s);
    for (int64_t r = 0; r < B; r++) {
        float *yr = y + r * out;
        for (int64_t o = 0; o < s->cout; o++)
            for (int64_t i = 0; i < hw; i++)
                yr[o * hw + i] = b[o];
        im2col(s, x + r * in, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->cout, (int)hw, (int)ckk, 1.0f, W, (int)ckk,
                    col, (int)ckk, 1.0f, yr, (int)hw);
    }
}

void crl__conv_backward(const crl__stage *s, const float *x, const float *dy, int64_t B, const float *W, float *dW,
                        float *db, float *dx, float *col)
{
    int64_t ckk = s->cin * s->k * s->k, hw = s->hout * s->wout, in = crl__stage_in_size(s),
            out = crl__stage_out_size(s);
    for (int64_t r = 0; r < B; r++) {
        const float *dyr = dy + r * out;
        for (int64_t o = 0; o < s->cout; o++) {
            float acc = 0;
            for (int64_t i = 0; i < hw; i++)
                acc += dyr[o * hw + i];
            db[o] += acc;
        }
        im2col(s, x + r * in, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->cout, (int)ckk, (int)hw, 1.0f, dyr, (int)hw,
                    col, (int)ckk, 1.0f, dW, (int)ckk);
        if (!dx)
            continue;
        /* the columns' gradient reuses col: this image's are no longer needed */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)hw, (int)ckk, (int)s->cout, 1.0f, dyr, (int)hw, W,
                    (int)ckk, 0.0f, col, (int)ckk);
        float *dxr = dx + r * in;
        memset(dxr, 0, (size_t)in * sizeof *dxr);
        col2im(s, col, dxr);
    }
}

void crl__pool_forward(const crl__stage *s, const float *x, int64_t B, float *y, int32_t *arg)
{
    int64_t in = crl__stage_in_size(s), out = crl__stage_out_size(s);
    for (int64_t r = 0; r < B; r++)
        for (int64_t c = 0; c < s->cin; c++) {
            const float *plane = x + r * in + c * s->hin * s->win;
            for (int64_t oy = 0; oy < s->hout; oy++)
                for (int64_t ox = 0; ox < s->wout; ox++) {
                    /* PyTorch's MaxPool2d: padding counts as -inf, the first maximum wins */
                    float best = -FLT_MAX;
                    int32_t at = -1;
                    for (int64_t ki = 0; ki < s->k; ki++) {
                        int64_t iy = oy * s->stride - s->pad + ki;
                        if (iy < 0 || iy >= s->hin)
                            continue;
                        for (int64_t kj = 0; kj < s->k; kj++) {
                            int64_t ix = ox * s->stride - s->pad + kj;
                            if (ix < 0 || ix >= s->win)
                                continue;
                            float v = plane[iy * s->win + ix];
                            if (at < 0 || v > best || v != v) {
                                best = v;
                                at = (int32_t)(iy * s->win + ix);
                            }
                        }
                    }
                    int64_t o = r * out + (c * s->hout + oy) * s->wout + ox;
                    y[o] = best;
                    if (arg)
                        arg[o] = at;
                }
        }
}

void crl__pool_backward(const crl__stage *s, const float *dy, int64_t B, const int32_t *arg, float *dx)
{
    int64_t in = crl__stage_in_size(s), out = crl__stage_out_size(s), plane = s->hout * s->wout;
    memset(dx, 0, (size_t)(B * in) * sizeof *dx);
    for (int64_t r = 0; r < B; r++)
        for (int64_t c = 0; c < s->cin; c++)
            for (int64_t i = 0; i < plane; i++) {
                int64_t o = r * out + c * plane + i;
                dx[r * in + c * s->hin * s->win + arg[o]] += dy[o];
            }
}

void crl__dueling_forward(const float *va, int64_t B, int64_t n, float *q)
{
    for (int64_t r = 0; r < B; r++) {
        const float *row = va + r * (n + 1);
        double mean = 0;
        for (int64_t j = 0; j < n; j++)
            mean += row[1 + j];
        mean /= (double)n;
        for (int64_t j = 0; j < n; j++)
            q[r * n + j] = (float)((double)row[0] + (double)row[1 + j] - mean);
    }
}

void crl__dueling_backward(const float *dq, int64_t B, int64_t n, float *dva)
{
    for (int64_t r = 0; r < B; r++) {
        const float *g = dq + r * n;
        float *d = dva + r * (n + 1);
        double sum = 0;
        for (int64_t j = 0; j < n; j++)
            sum += g[j];
        d[0] = (float)sum;
        for (int64_t j = 0; j < n; j++)
            d[1 + j] = (float)((double)g[j] - sum / (double)n);
    }
}
