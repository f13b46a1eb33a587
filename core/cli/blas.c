/* What the `crl` program asks of the BLAS library at run time, through symbols looked up by name so that any
 * CBLAS links: OpenBLAS's thread count and which kernel it picked for this CPU. */
#include "config.h"
#include "cli-private.h"

#include <dlfcn.h>

/* OpenBLAS reads OPENBLAS_NUM_THREADS when it loads; training must be
 * single-threaded to be bitwise reproducible, so set it at run time. */
void crl__blas_single_thread(void)
{
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (set)
        set(1);
}

void crl__blas_describe(FILE *out)
{
    char *(*config)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_config");
    char *(*core)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    if (config && core)
        fprintf(out, "BLAS: %s; kernel %s (OPENBLAS_CORETYPE chooses another)\n", config(), core());
    else
        fprintf(out, "BLAS: a CBLAS other than OpenBLAS (no kernel to report)\n");
}
