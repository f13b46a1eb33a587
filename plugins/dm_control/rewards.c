/* dm_control's reward shaping: tolerance() and its sigmoids. */
#include "dmc.h"

#include <math.h>

/* sqrt(-2 ln 0.1), the gaussian scale at tolerance()'s default value_at_margin: the suite recomputes it every
 * call; libm gives the same bits once.  Set when the plugin is loaded, before any thread can step an env (while
 * 0, each call computes it as before). */
static double gauss_scale_default;

__attribute__((constructor)) static void gauss_scale_init(void)
{
    gauss_scale_default = sqrt(-2.0 * log(0.1));
}

double dmc_sigmoid_eval(double x, double value_at_1, dmc_sigmoid kind)
{
    double scale, s;
    switch (kind) {
    case DMC_GAUSSIAN:
        scale = value_at_1 == 0.1 && gauss_scale_default != 0 ? gauss_scale_default : sqrt(-2.0 * log(value_at_1));
        s = x * scale;
        return exp(-0.5 * s * s);
    case DMC_HYPERBOLIC:
        scale = acosh(1.0 / value_at_1);
        return 1.0 / cosh(x * scale);
    case DMC_LONG_TAIL:
        scale = sqrt(1.0 / value_at_1 - 1.0);
        s = x * scale;
        return 1.0 / (s * s + 1.0);
    case DMC_RECIPROCAL:
        scale = 1.0 / value_at_1 - 1.0;
        return 1.0 / (fabs(x) * scale + 1.0);
    case DMC_COSINE:
        scale = acos(2.0 * value_at_1 - 1.0) / M_PI;
        s = x * scale;
        return fabs(s) < 1.0 ? (1.0 + cos(M_PI * s)) / 2.0 : 0.0;
    case DMC_LINEAR:
        s = x * (1.0 - value_at_1);
        return fabs(s) < 1.0 ? 1.0 - s : 0.0;
    case DMC_QUADRATIC:
        s = x * sqrt(1.0 - value_at_1);
        return fabs(s) < 1.0 ? 1.0 - s * s : 0.0;
    case DMC_TANH_SQUARED:
        scale = atanh(sqrt(1.0 - value_at_1));
        s = tanh(x * scale);
        return 1.0 - s * s;
    }
    return 0.0;
}

double dmc_tolerance(double x, double lower, double upper, double margin, dmc_sigmoid kind,
                     double value_at_margin)
{
    bool in_bounds = lower <= x && x <= upper;
    if (in_bounds)
        return 1.0;
    if (margin == 0.0)
        return 0.0;
    double d = (x < lower ? lower - x : x - upper) / margin;
    return dmc_sigmoid_eval(d, value_at_margin, kind);
}

double dmc_small_control(const mjModel *m, const mjData *d)
{
    /* tolerance(u, bounds (0, 0), margin 1, quadratic, 0) spelled out: the distance is |u| exactly and the
     * quadratic's scale sqrt(1 - 0) is 1, so it is 1 - u*u inside (-1, 1) and 0 outside (or NaN); u = 0,
     * in bounds, gives 1 either way. */
    double sum = 0;
    for (int k = 0; k < m->nu; k++) {
        double u = d->ctrl[k];
        sum += fabs(u) < 1.0 ? 1.0 - u * u : 0.0;
    }
    return m->nu ? sum / m->nu : 1.0;
}
