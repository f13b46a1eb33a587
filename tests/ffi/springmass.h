/* A mass-spring-damper as a plain C library (no crl headers): the example
 * simulator the ffi env backend loads in tests/test_ffi.c and
 * conf/examples/ffi-springmass.ini. */
#ifndef SPRINGMASS_H
#define SPRINGMASS_H
#include <stdint.h>

typedef struct sm_sim sm_sim;

/* A new simulator (free with sm_free), or NULL when out of memory. */
void *sm_make(void);
/* The same with mass m: m < 0 makes sm_step fail, m = 0 makes the state NaN
 * within two steps (the failure paths the tests exercise). */
void *sm_make_mass(double m);
/* Restart the simulator's random stream from seed. */
void sm_seed(void *sim, uint64_t seed);
/* A random start (position and velocity in [-1, 1]); writes obs[2] = {x, v}. */
void sm_reset(void *sim, double *obs);
/* One step of dt = 0.05 with force u[0] (clipped to [-1, 1]): writes obs, the reward
 * -(x^2 + 0.1 v^2 + 0.001 u^2), and terminated (|x| > 4).  Returns 0, or -1 when the
 * force is not finite or the mass is negative. */
int32_t sm_step(void *sim, const double *u, double *obs, double *reward, uint8_t *terminated);
/* sm_step with a discrete push: action[0] = 0, 1 or 2 is the force -1, 0 or +1 (another value: -1). */
int32_t sm_step_discrete(void *sim, const int64_t *action, double *obs, double *reward, uint8_t *terminated);
/* sm_step without terminated: the plant alone, whose episodes never end. */
int32_t sm_step_plant(void *sim, const double *u, double *obs, double *reward);
void sm_free(void *sim);
/* Draw the position as a bar into rgb, a row-major [h, w, 3] frame: white, with
 * the columns between the centre and x (x = +-4 at the edges) dark blue.
 * Returns 0, or -1 when h or w is not positive. */
int32_t sm_render(const void *sim, uint8_t *rgb, int32_t h, int32_t w);
/* The same for n simulators in one call (arrays of n; obs is [n, 2]): what
 * calls = batch describes.  sm_batch_step returns -2 when n is not the
 * batch's size. */
void *sm_batch_make(int64_t n);
void sm_batch_seed(void *batch, const uint64_t *seeds, const uint8_t *mask, int64_t n);
void sm_batch_reset(void *batch, const uint8_t *mask, double *obs, int64_t n);
int32_t sm_batch_step(void *batch, const double *u, double *obs, double *reward, uint8_t *terminated, int64_t n);
void sm_batch_free(void *batch);
#endif
