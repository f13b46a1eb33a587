/* Counter-based random streams: Philox4x32-10 (Random123) and the seed chain. */
#include "crl-private.h"

#include <math.h>
#include <Random123/philox.h>

/* The fixed counter word that separates the seed chain from every stream
 * (streams put their id in ctr[2..3], the chain uses ctr[2] = this tag). */
#define CRL_SEED_CHAIN_TAG 0x5eedc4a1u

void crl_rng_init(crl_rng *r, uint64_t seed, uint64_t stream)
{
    if (!r)
        return;
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0;
    r->ctr[1] = 0;
    r->ctr[2] = (uint32_t)stream;
    r->ctr[3] = (uint32_t)(stream >> 32);
    for (int i = 0; i < 4; i++)
        r->out[i] = 0;
    r->idx = 4;
    r->reserved = 0;
}

/* Compute the block for the current counter, then advance the 64-bit block
 * count held in ctr[0..1]. */
static void rng_refill(crl_rng *r)
{
    philox4x32_ctr_t c = {{r->ctr[0], r->ctr[1], r->ctr[2], r->ctr[3]}};
    philox4x32_key_t k = {{r->key[0], r->key[1]}};
    philox4x32_ctr_t o = philox4x32(c, k);
    for (int i = 0; i < 4; i++)
        r->out[i] = o.v[i];
    r->idx = 0;
    if (++r->ctr[0] == 0)
        ++r->ctr[1];
}

uint32_t crl_rng_u32(crl_rng *r)
{
    if (r->idx >= 4)
        rng_refill(r);
    return r->out[r->idx++];
}

/* The first word drawn is the low half. */
uint64_t crl_rng_u64(crl_rng *r)
{
    uint64_t lo = crl_rng_u32(r);
    uint64_t hi = crl_rng_u32(r);
    return lo | (hi << 32);
}

double crl_rng_uniform(crl_rng *r)
{
    return (double)(crl_rng_u64(r) >> 11) * 0x1p-53;
}

float crl_rng_uniform_f32(crl_rng *r)
{
    return (float)(crl_rng_u32(r) >> 8) * 0x1p-24f;
}

double crl_rng_range(crl_rng *r, double low, double high)
{
    double v = low + (high - low) * crl_rng_uniform(r);
    /* Rounding of low + span * u can land on high; keep the interval
     * half-open as documented. */
    if (v >= high && high > low)
        v = nextafter(high, low);
    return v;
}

/* Lemire's multiply-and-reject: the high word of x * n is uniform in
 * [0, n) once the few low products below (2^w mod n) are rejected. */
uint64_t crl_rng_below(crl_rng *r, uint64_t n)
{
    if (n == 0)
        return 0;
    if (n <= UINT32_MAX) {
        uint32_t n32 = (uint32_t)n;
        uint64_t m = (uint64_t)crl_rng_u32(r) * n32;
        uint32_t lo = (uint32_t)m;
        if (lo < n32) {
            uint32_t thresh = (uint32_t)(-n32) % n32;
            while (lo < thresh) {
                m = (uint64_t)crl_rng_u32(r) * n32;
                lo = (uint32_t)m;
            }
        }
        return m >> 32;
    }
#if defined(__SIZEOF_INT128__)
    unsigned __int128 m = (unsigned __int128)crl_rng_u64(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t thresh = (0 - n) % n;
        while (lo < thresh) {
            m = (unsigned __int128)crl_rng_u64(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
#else
    /* Plain rejection: accept x below the largest multiple of n. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n;
    uint64_t x;
    do
        x = crl_rng_u64(r);
    while (x > limit);
    return x % n;
#endif
}

/* Box-Muller, cosine branch only: every call consumes exactly four 32-bit
 * words (two 53-bit uniforms) and keeps no cached second value, so the
 * result depends only on the stream position, never on call history
 * outside the stream. */
double crl_rng_normal(crl_rng *r)
{
    double u1 = 1.0 - crl_rng_uniform(r);   /* (0, 1]: log is finite */
    double u2 = crl_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2);
}

/* next = words 0 (low half) and 1 (high half) of
 * Philox4x32-10({0, 0, 0x5eedc4a1, 0}, {seed lo, seed hi}). */
uint64_t crl_seed_next(uint64_t seed)
{
    philox4x32_ctr_t c = {{0, 0, CRL_SEED_CHAIN_TAG, 0}};
    philox4x32_key_t k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    philox4x32_ctr_t o = philox4x32(c, k);
    return (uint64_t)o.v[0] | ((uint64_t)o.v[1] << 32);
}
