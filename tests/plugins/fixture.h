/* Helpers shared by the test plugins: marker files that tests look for. */
#ifndef CRL_TEST_FIXTURE_H
#define CRL_TEST_FIXTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Append a formatted line to $CRL_TEST_MARKER_DIR/FILE (no-op when the
 * variable is unset), so a test can see that, and how, some code ran. */
static inline void fixture_mark(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void fixture_mark(const char *file, const char *fmt, ...)
{
    const char *dir = getenv("CRL_TEST_MARKER_DIR");
    if (!dir || !*dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* Every fini appends its plugin's name here, so tests can check the order. */
#define FIXTURE_FINI_LOG "fini.log"

#endif
