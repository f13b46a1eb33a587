/* (being written) */
#include "crl-private.h"
