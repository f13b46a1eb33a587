/* (being written) */
#include "config.h"
#include "cli-private.h"
