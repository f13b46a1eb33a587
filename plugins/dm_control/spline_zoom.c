/* scipy.ndimage.zoom with its defaults (cubic spline, mode 'constant', prefilter, grid_mode False) on 2-D
 * float64 grids: quadruped/escape smooths its terrain bumps with it.
 *
 * Transcribed operation for operation from SciPy 1.10's ni_splines.c (apply_filter: the gain, then
 * the causal and anticausal passes with mirror initialisation, which SciPy uses for mode 'constant')
 * and ni_interpolation.c (NI_ZoomShift: per-axis coordinates k * zoom, the weights of
 * get_spline_interpolation_weights, mirrored coefficient indices at the edges, the 4 x 4 sum in its
 * order), so the results are SciPy's to the last bit where the C library's pow agrees. */
#include "dmc.h"

#include <math.h>

/* sqrt(3) - 2, the cubic B-spline's pole (get_filter_poles) */
#define POLE3 -0.267949192431122706472553658494127633

int dmc_zoom_len(int n, double zoom)
{
    /* Python's round(): half to even */
    double x = (double)n * zoom, f = floor(x), r = x - f;
    double v = r > 0.5 ? f + 1 : r < 0.5 ? f : (fmod(f, 2.0) == 0 ? f : f + 1);
    return v > (double)INT32_MAX ? -1 : (int)v;
}

/* _init_causal_mirror, _init_anticausal_mirror and _apply_filter (SciPy's order of operations) on the
 * n samples c[0], c[s], ..., after _apply_filter_gain. */
static void filter_line(double *c, int n, ptrdiff_t s)
{
    const double z = POLE3;
    const double gain = (1.0 - z) * (1.0 - 1.0 / z);
    for (int i = 0; i < n; i++)
        c[i * s] *= gain;
    double z_i = z;
    const double z_n_1 = pow(z, n - 1);
    c[0] = c[0] + z_n_1 * c[(n - 1) * s];
    for (int i = 1; i < n - 1; ++i) {
        c[0] += z_i * (c[i * s] + z_n_1 * c[(n - 1 - i) * s]);
        z_i *= z;
    }
    c[0] /= 1 - z_n_1 * z_n_1;
    for (int i = 1; i < n; ++i)
        c[i * s] += z * c[(i - 1) * s];
    c[(n - 1) * s] = (z * c[(n - 2) * s] + c[(n - 1) * s]) * z / (z * z - 1);
    for (int i = n - 2; i >= 0; --i)
        c[i * s] = z * (c[(i + 1) * s] - c[i * s]);
}

/* map_coordinate in mode mirror, for the integer indices of a spline's support */
static int mirror(int in, int len)
{
    if (len <= 1)
        return 0;
    int sz2 = 2 * len - 2;
    if (in < 0) {
        in = sz2 * (-in / sz2) + in;
        return in <= 1 - len ? in + sz2 : -in;
    }
    if (in > len - 1) {
        in -= sz2 * (in / sz2);
        if (in >= len)
            in = sz2 - in;
    }
    return in;
}

/* One axis of NI_ZoomShift: for output index k, the four input indices and weights, or valid 0 where
 * the coordinate falls outside [0, len - 1] (mode 'constant': the output is cval there). */
typedef struct axis_tap {
    int idx[4];
    double w[4];
    bool valid;
} axis_tap;

static axis_tap tap(int k, int len, int out_len)
{
    axis_tap t = {.valid = false};
    /* zoom = (len - 1) / (out_len - 1), or 1 for a single output sample (numpy.divide's where) */
    double zoom = out_len - 1 != 0 ? (double)(len - 1) / (double)(out_len - 1) : 1.0;
    double cc = (double)k;
    cc *= zoom;
    if (cc > (double)(len - 1))
        return t;
    t.valid = true;
    int start = (int)floor(cc) - 1;
    for (int h = 0; h < 4; h++)
        t.idx[h] = start < 0 || start + 3 >= len ? mirror(start + h, len) : start + h;
    /* get_spline_interpolation_weights, order 3 */
    double x = cc - floor(cc), y = x, z = 1.0 - x;
    t.w[1] = (y * y * (y - 2.0) * 3.0 + 4.0) / 6.0;
    t.w[2] = (z * z * (z - 2.0) * 3.0 + 4.0) / 6.0;
    t.w[0] = z * z * z / 6.0;
    t.w[3] = 1.0;
    for (int h = 0; h < 3; h++)
        t.w[3] -= t.w[h];
    return t;
}

void dmc_zoom2d(const double *in, int rows, int cols, double *coef, double *out, int orows, int ocols)
{
    for (size_t k = 0; k < (size_t)rows * (size_t)cols; k++)
        coef[k] = in[k];
    /* spline_filter: axis 0 (columns of the row-major grid), then axis 1; single samples unfiltered */
    if (rows > 1)
        for (int j = 0; j < cols; j++)
            filter_line(coef + j, rows, cols);
    if (cols > 1)
        for (int i = 0; i < rows; i++)
            filter_line(coef + (size_t)i * (size_t)cols, cols, 1);
    /* the column taps a block at a time, on the stack */
    enum { BLOCK = 64 };
    axis_tap tcs[BLOCK];
    for (int c0 = 0; c0 < ocols; c0 += BLOCK) {
        int nc = ocols - c0 < BLOCK ? ocols - c0 : BLOCK;
        for (int c = 0; c < nc; c++)
            tcs[c] = tap(c0 + c, cols, ocols);
        for (int r = 0; r < orows; r++) {
            axis_tap tr = tap(r, rows, orows);
            double *o = out + (size_t)r * (size_t)ocols + c0;
            for (int c = 0; c < nc; c++) {
                const axis_tap *tc = &tcs[c];
                double t = 0.0;
                if (tr.valid && tc->valid) {
                    for (int a = 0; a < 4; a++) {
                        const double *line = coef + (size_t)tr.idx[a] * (size_t)cols;
                        for (int b = 0; b < 4; b++) {
                            double v = line[tc->idx[b]];
                            v *= tr.w[a];
                            v *= tc->w[b];
                            t += v;
                        }
                    }
                }
                o[c] = t;
            }
        }
    }
}
