/* The examples directory messages name: installed first, the source tree for an uninstalled build. */
#include "examples-private.h"

#include <stdlib.h>
#include <sys/stat.h>

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *crl__examples_dir(void)
{
    /* As $CRL_SYSCONFDIR for the config: the build names the installed path in its man pages. */
    const char *env = getenv("CRL_EXAMPLESDIR");
    if (env && *env)
        return env;
    if (is_dir(CRL_EXAMPLESDIR))
        return CRL_EXAMPLESDIR;
    if (is_dir(CRL_SRC_EXAMPLESDIR))
        return CRL_SRC_EXAMPLESDIR;
    return CRL_EXAMPLESDIR;
}
