/* A stand-in for a newer libcrl (soname libcrl.so.0, symbol versions CRL_1.2 and CRL_1.3 from
 * libcrl_future.map) that the abi_symbol_next fixture links against instead of core/libcrl.la, so that
 * the fixture needs libcrl.so.0 version CRL_1.3.  Never loaded: the tests run against the real libcrl. */
#include <stddef.h>

/* Stands for a libcrl function a future ABI minor adds. */
int crl_future_symbol(void);
int crl_future_symbol(void)
{
    return 13;
}

/* An old one (same name as the real libcrl's, version CRL_1.2), so the fixture needs both versions as a
 * plugin built against a newer SDK would. */
void crl_host_log(void *host, int level, const char *fmt, ...);
void crl_host_log(void *host, int level, const char *fmt, ...)
{
    (void)host;
    (void)level;
    (void)fmt;
}
