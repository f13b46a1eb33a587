/* crl_error: error values with formatted messages. */
#include "crl-private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int crl_error_set(crl_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->reserved = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

void crl_error_prefix(crl_error *err, const char *fmt, ...)
{
    if (!err || err->code == CRL_OK)
        return;
    char prefix[CRL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    size_t plen = strlen(prefix);
    size_t mlen = strlen(err->message);
    if (plen >= sizeof err->message - 1)
        plen = sizeof err->message - 1;
    /* Keep the tail of the original message if the whole does not fit. */
    if (plen + mlen >= sizeof err->message)
        mlen = sizeof err->message - 1 - plen;
    memmove(err->message + plen, err->message, mlen);
    memcpy(err->message, prefix, plen);
    err->message[plen + mlen] = '\0';
}

int crl_error_pass(crl_error *err, const crl_error *src, int fallback)
{
    if (!src || src->code == CRL_OK) {
        if (fallback == CRL_OK) {
            crl_error_clear(err);
            return CRL_OK;
        }
        return crl_error_set(err, fallback, "%s: a call failed without recording why", crl_status_name(fallback));
    }
    if (err && err != src) {
        const char *end = memchr(src->message, '\0', sizeof src->message - 1);
        size_t n = end ? (size_t)(end - src->message) : sizeof src->message - 1;
        err->code = src->code;
        err->reserved = 0;
        memcpy(err->message, src->message, n);
        err->message[n] = '\0';
    }
    return src->code;
}

void crl__error_label(crl_error *err, const char *label)
{
    if (err && err->code != CRL_OK && label && strncmp(err->message, label, strlen(label)) != 0)
        crl_error_prefix(err, "%s: ", label);
}

void crl_error_clear(crl_error *err)
{
    if (!err)
        return;
    err->code = CRL_OK;
    err->reserved = 0;
    err->message[0] = '\0';
}

const char *crl_status_name(int code)
{
    static const char *const names[] = {
        "CRL_OK", "CRL_E_INVALID", "CRL_E_NOMEM", "CRL_E_IO", "CRL_E_CONFIG",
        "CRL_E_NOT_FOUND", "CRL_E_EXISTS", "CRL_E_ABI", "CRL_E_PLUGIN", "CRL_E_DTYPE",
        "CRL_E_SHAPE", "CRL_E_RANGE", "CRL_E_RUNTIME", "CRL_E_UNSUPPORTED", "CRL_E_PERM",
        "CRL_E_CRASH", "CRL_E_USAGE", "CRL_E_CORRUPT", "CRL_E_TIMEOUT",
    };
    if (code < 0 || (size_t)code >= sizeof names / sizeof names[0])
        return "CRL_E_UNKNOWN";
    return names[code];
}

void crl_free(void *p)
{
    g_free(p);
}
