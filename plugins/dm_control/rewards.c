/* dm_control's reward shaping: tolerance() and its sigmoids. */
#include "dmc.h"

#include <math.h>

double dmc_sigmoid_eval(double x, double value_at_1, dmc_sigmoid kind)
{
    double scale, s;
    switch (kind) {
    case DMC_GAUSSIAN:
        scale = sqrt(-2.0 * log(value_at_1));
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
    double sum = 0;
    for (int k = 0; k < m->nu; k++)
        sum += dmc_tolerance(d->ctrl[k], 0, 0, 1.0, DMC_QUADRATIC, 0.0);
    return m->nu ? sum / m->nu : 1.0;
}
