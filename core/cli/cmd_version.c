/* crl version */
#include "config.h"
#include "cli-private.h"

#include <string.h>

int crl__cmd_version(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("Usage: crl version\n\nPrint the crl version, the libcrl version and the plugin ABI.\n");
        return CRL_EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "crl version: unexpected argument '%s'\n", argv[1]);
        return CRL_EXIT_USAGE;
    }
    printf("crl %s (libcrl %s, plugin ABI %d.%d)\n", PACKAGE_VERSION, crl_version(), CRL_ABI_MAJOR,
           CRL_ABI_MINOR);
    return CRL_EXIT_OK;
}
