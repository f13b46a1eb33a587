/* crl plugin SDK: counter-based random streams (Philox4x32-10, Random123).
 *
 * A stream is a (seed, stream id) pair: the same pair gives the same numbers
 * on every machine, and different stream ids give independent streams (one
 * per env or worker).  The state is a plain struct: put it where you like. */
#ifndef CRL_RNG_H
#define CRL_RNG_H

#include <crl/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_rng {
    uint32_t key[2];   /* from the seed */
    uint32_t ctr[4];   /* ctr[2..3] hold the stream id, ctr[0..1] count blocks */
    uint32_t out[4];   /* the current output block */
    uint32_t idx;      /* next unused word of out (4 = empty) */
    uint32_t reserved;
} crl_rng;

/* Start stream `stream` of `seed`. */
CRL_API void crl_rng_init(crl_rng *r, uint64_t seed, uint64_t stream);
CRL_API uint32_t crl_rng_u32(crl_rng *r);
CRL_API uint64_t crl_rng_u64(crl_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
CRL_API double crl_rng_uniform(crl_rng *r);
/* Uniform float in [0, 1) with 24 random bits. */
CRL_API float crl_rng_uniform_f32(crl_rng *r);
/* Uniform double in [low, high). */
CRL_API double crl_rng_range(crl_rng *r, double low, double high);
/* Unbiased integer in [0, n); n > 0 (returns 0 for n <= 0). */
CRL_API uint64_t crl_rng_below(crl_rng *r, uint64_t n);
/* Standard normal (Box-Muller, deterministic given the stream). */
CRL_API double crl_rng_normal(crl_rng *r);

/* The seed chain: set_seed(seed) seeds with `seed` and returns
 * crl_seed_next(seed), the seed for the next env or worker.  The chain is a
 * pure function of its input, so it can be continued from any element:
 * next = first 64 bits of Philox4x32-10(counter = {0, 0, 0x5eedc4a1, 0},
 * key = {seed low 32 bits, seed high 32 bits}), output word 0 being the low
 * half (as crl_rng_u64 combines words). */
CRL_API uint64_t crl_seed_next(uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
