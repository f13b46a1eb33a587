/* (being written) */
#include <crl/crl.h>
