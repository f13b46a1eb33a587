/* The components of the example plugin, one per file; plugin.c registers them. */
#ifndef EXAMPLE_H
#define EXAMPLE_H

#include <crl/crl.h>

extern const crl_component example_walk_component;    /* walk.c: env backend "walk" (Walk-v0) */
extern const crl_component example_penalty_component; /* penalty.c: transform "StepPenalty" */
extern const crl_component example_ring_component;    /* ring.c: replay storage "ring" */

#endif
