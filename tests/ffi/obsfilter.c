/* Observation functions as a plain C library (no crl headers), for FunctionTransform's tests: what a
 * researcher's own feature code looks like. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

void of_affine(const double *in, double *out, double scale, double shift, int64_t n);
int32_t of_energy(const float *in, float *out, int64_t count, double k);
void *of_gain_new(double g);
void of_gain(void *h, const float *in, float *out, int64_t n, int64_t index);
void of_gain_free(void *h);
int64_t of_frees(void);
int32_t of_checked(const double *in, double *out, int64_t n);
void of_nan_above(const double *in, double *out, int64_t n);

/* out[k] = scale * in[k] + shift for k < n. */
void of_affine(const double *in, double *out, double scale, double shift, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        out[k] = scale * in[k] + shift;
}

/* The energy of a mass-spring state (position, velocity): one value per row, for `count` rows at once. */
int32_t of_energy(const float *in, float *out, int64_t count, double k)
{
    if (count <= 0)
        return -2;
    for (int64_t r = 0; r < count; r++) {
        double x = in[2 * r], v = in[2 * r + 1];
        out[r] = (float)(0.5 * k * x * x + 0.5 * v * v);
    }
    return 0;
}

/* A gain kept in a handle. */
typedef struct gain {
    double g;
} gain;

static int64_t frees;

void *of_gain_new(double g)
{
    gain *h = malloc(sizeof *h);
    if (h)
        h->g = g;
    return h;
}

void of_gain(void *h, const float *in, float *out, int64_t n, int64_t index)
{
    const gain *p = h;
    for (int64_t k = 0; k < n; k++)
        out[k] = (float)(p->g * in[k] + (double)index);
}

void of_gain_free(void *h)
{
    free(h);
    frees++;
}

int64_t of_frees(void)
{
    return frees;
}

/* Fails (returns -1) on a negative first element. */
int32_t of_checked(const double *in, double *out, int64_t n)
{
    if (in[0] < 0)
        return -1;
    for (int64_t k = 0; k < n; k++)
        out[k] = in[k];
    return 0;
}

/* Writes NaN where the input is above 10. */
void of_nan_above(const double *in, double *out, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        out[k] = in[k] > 10 ? NAN : in[k];
}
