/* IEEE 754 binary16 <-> float/double conversion (round to nearest even). */
#include "tensor-private.h"

#include <string.h>

float crl__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        /* Zero or subnormal: mant * 2^-24 is exact in float. */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | (mant << 13);
    else
        bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t crl__double_to_half(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);
    int exp = (int)((b >> 52) & 0x7ff);
    uint64_t mant = b & ((UINT64_C(1) << 52) - 1);

    if (exp == 0x7ff) {
        if (mant == 0)
            return sign | 0x7c00u;
        /* NaN: keep the top payload bits, force quiet so it stays a NaN. */
        return (uint16_t)(sign | 0x7e00u | (uint16_t)(mant >> 42));
    }
    if (exp == 0)
        return sign; /* double subnormals are far below half's range */

    int e = exp - 1023;
    if (e > 15)
        return sign | 0x7c00u;
    uint64_t m = mant | (UINT64_C(1) << 52);
    /* Keep 11 significant bits for normals; fewer for half subnormals,
     * whose exponent is pinned at -14. */
    int shift = e >= -14 ? 42 : 42 + (-14 - e);
    if (shift > 54)
        return sign; /* below half the smallest subnormal */
    uint64_t q = m >> shift;
    uint64_t rem = m & ((UINT64_C(1) << shift) - 1);
    uint64_t halfway = UINT64_C(1) << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1)))
        q++;
    if (e >= -14) {
        /* A carry out of the mantissa bumps the exponent; 31 is inf. */
        uint32_t v = ((uint32_t)(e + 15) << 10) + (uint32_t)q - 0x400u;
        if (v >= 0x7c00u)
            return sign | 0x7c00u;
        return (uint16_t)(sign | v);
    }
    /* Subnormal; q == 0x400 rounds up into the smallest normal, same bits. */
    return (uint16_t)(sign | q);
}

float crl_half_to_float(uint16_t h)
{
    return crl__half_to_float(h);
}

uint16_t crl_float_to_half(float f)
{
    return crl__double_to_half((double)f);
}
