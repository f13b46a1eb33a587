/* Internals shared across libcrl's files (crl__ prefix, never exported). */
#ifndef CRL_PRIVATE_H
#define CRL_PRIVATE_H

#include "config.h"   /* autoconf's, from the build dir */
#include <glib.h>
#include <crl/crl.h>
#include <crl/config.h>
#include <crl/host.h>

/* Mark internal symbols hidden even when a file forgets -fvisibility. */
#define CRL_INTERNAL __attribute__((visibility("hidden")))

#endif
