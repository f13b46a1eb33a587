/* Where crl's example experiments (conf/examples) are, for messages that point at one. */
#ifndef CRL_EXAMPLES_PRIVATE_H
#define CRL_EXAMPLES_PRIVATE_H

/* $CRL_EXAMPLESDIR when set and not empty; else the installed examples directory ($(pkgdatadir)/examples) when it exists; otherwise the source
 * tree's conf/examples when that exists (an uninstalled build); otherwise the installed path.  Static
 * string, no trailing slash. */
const char *crl__examples_dir(void);

#endif
