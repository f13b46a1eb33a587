/* Conv2d and MaxPool2d kernels over batches of [C, H, W] rows: im2col / col2im around OpenBLAS's sgemm
 * (one product per image, each of the sizes `crl bench nn` measures), and the max-pool with the argmax
 * kept for backward.  They allocate nothing: the callers own every buffer. */
#include "nn-private.h"

#include <cblas.h>
#include <float.h>

/* col [C*k*k, Ho*Wo] of one image x [C, H, W]; zeros where the window reads the padding. */
static void im2col(const crl__stage *s, const float *x, float *col)
{
    int64_t hw = s->hout * s->wout;
    if (s->pad == 0) {
        /* every window lies inside the image: no bounds to check, and rows are copies at stride 1 */
        for (int64_t c = 0; c < s->cin; c++)
            for (int64_t ki = 0; ki < s->k; ki++)
                for (int64_t kj = 0; kj < s->k; kj++) {
                    float *row = col + ((c * s->k + ki) * s->k + kj) * hw;
                    const float *plane = x + c * s->hin * s->win + ki * s->win + kj;
                    for (int64_t oy = 0; oy < s->hout; oy++) {
                        const float *src = plane + oy * s->stride * s->win;
                        float *dst = row + oy * s->wout;
                        if (s->stride == 1)
                            memcpy(dst, src, (size_t)s->wout * sizeof *dst);
                        else
                            for (int64_t ox = 0; ox < s->wout; ox++)
                                dst[ox] = src[ox * s->stride];
                    }
                }
        return;
    }
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t ki = 0; ki < s->k; ki++)
            for (int64_t kj = 0; kj < s->k; kj++) {
                float *row = col + ((c * s->k + ki) * s->k + kj) * hw;
                const float *plane = x + c * s->hin * s->win;
                for (int64_t oy = 0; oy < s->hout; oy++) {
                    int64_t iy = oy * s->stride - s->pad + ki;
                    float *dst = row + oy * s->wout;
                    if (iy < 0 || iy >= s->hin) {
                        memset(dst, 0, (size_t)s->wout * sizeof *dst);
                        continue;
                    }
                    const float *src = plane + iy * s->win;
                    for (int64_t ox = 0; ox < s->wout; ox++) {
                        int64_t ix = ox * s->stride - s->pad + kj;
                        dst[ox] = ix >= 0 && ix < s->win ? src[ix] : 0.0f;
                    }
                }
            }
}

/* dx [C, H, W] += the columns dcol [C*k*k, Ho*Wo] scattered back where im2col read them. */
static void col2im(const crl__stage *s, const float *dcol, float *dx)
{
    int64_t hw = s->hout * s->wout;
    if (s->pad == 0) {
        for (int64_t c = 0; c < s->cin; c++)
            for (int64_t ki = 0; ki < s->k; ki++)
                for (int64_t kj = 0; kj < s->k; kj++) {
                    const float *row = dcol + ((c * s->k + ki) * s->k + kj) * hw;
                    float *plane = dx + c * s->hin * s->win + ki * s->win + kj;
                    for (int64_t oy = 0; oy < s->hout; oy++) {
                        float *dst = plane + oy * s->stride * s->win;
                        const float *src = row + oy * s->wout;
                        for (int64_t ox = 0; ox < s->wout; ox++)
                            dst[ox * s->stride] += src[ox];
                    }
                }
        return;
    }
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t ki = 0; ki < s->k; ki++)
            for (int64_t kj = 0; kj < s->k; kj++) {
                const float *row = dcol + ((c * s->k + ki) * s->k + kj) * hw;
                float *plane = dx + c * s->hin * s->win;
                for (int64_t oy = 0; oy < s->hout; oy++) {
                    int64_t iy = oy * s->stride - s->pad + ki;
                    if (iy < 0 || iy >= s->hin)
                        continue;
                    const float *src = row + oy * s->wout;
                    float *dst = plane + iy * s->win;
                    for (int64_t ox = 0; ox < s->wout; ox++) {
                        int64_t ix = ox * s->stride - s->pad + kj;
                        if (ix >= 0 && ix < s->win)
                            dst[ix] += src[ox];
                    }
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->cout, (int)hw, (int)ckk, 1.0f, W, (int)ckk,
                    col, (int)hw, 1.0f, yr, (int)hw);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->cout, (int)ckk, (int)hw, 1.0f, dyr, (int)hw,
                    col, (int)hw, 1.0f, dW, (int)ckk);
        if (!dx)
            continue;
        /* the columns' gradient reuses col: this image's are no longer needed */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ckk, (int)hw, (int)s->cout, 1.0f, W, (int)ckk, dyr,
                    (int)hw, 0.0f, col, (int)hw);
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
