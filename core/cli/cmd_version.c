/* crl version */
#include "config.h"
#include "cli-private.h"

#include <string.h>

int crl__cmd_version(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("Usage: crl version\n\nPrint the crl version, the libcrl version, the plugin ABI, and the BLAS library with the kernel\nit uses on this CPU (results of matrix products may differ in the last bits between kernels).\n");
        return CRL_EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "crl version: unexpected argument '%s'\n", argv[1]);
        return CRL_EXIT_USAGE;
    }
    printf("crl %s (libcrl %s, plugin ABI %d.%d)\n", PACKAGE_VERSION, crl_version(), CRL_ABI_MAJOR,
           CRL_ABI_MINOR);
    crl__blas_describe(stdout);
    return CRL_EXIT_OK;
}
