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

/* Hand a callee's error, caught in a local crl_error, on to the caller's err (which may be NULL) and return
 * its code (CRL_E_RUNTIME if the callee failed without setting one): control flow never reads the caller's
 * err back. */
CRL_INTERNAL int crl__error_pass(crl_error *err, const crl_error *local);

#endif
