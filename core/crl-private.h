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

/* Prefix "LABEL: " to err's message unless it starts with LABEL already (a
 * component that named itself).  No-op when err is NULL or holds no error.
 * Code outside core/error.c never reads a crl_error through a pointer (it
 * may be NULL: tests/err-deref.sh), so checks on the message live here. */
CRL_INTERNAL void crl__error_label(crl_error *err, const char *label);

#endif
