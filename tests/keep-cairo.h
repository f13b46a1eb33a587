/* Keep cairo and pixman resident for the whole test process (see below). */
#ifndef CRL_TESTS_KEEP_CAIRO_H
#define CRL_TESTS_KEEP_CAIRO_H

#include <dlfcn.h>

/* The classic plugin draws with cairo.  cairo's caches and pixman's tables
 * are allocated on first use (pixman's in a library constructor) and lost
 * when a test's host dlcloses classic.so and the libraries go with it; a
 * later load allocates them again.  Loading both once here, never closing
 * them, keeps those allocations reachable, so valgrind and LeakSanitizer see
 * only crl's own leaks.  A missing library is fine: then the plugin does not
 * use it either. */
static inline void crl_test_keep_cairo(void)
{
    (void)dlopen("libpixman-1.so.0", RTLD_NOW | RTLD_GLOBAL);
    (void)dlopen("libcairo.so.2", RTLD_NOW | RTLD_GLOBAL);
}

#endif
