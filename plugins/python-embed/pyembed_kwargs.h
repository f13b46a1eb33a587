/* pyembed_kwargs: a plugin's kwargs.NAME = VALUE options as the keyword arguments of a Python call. */
#ifndef CRL_PYEMBED_KWARGS_H
#define CRL_PYEMBED_KWARGS_H

#include "pyembed.h"

/* The kwargs.NAME = VALUE options of opts (may be NULL: an empty dict) as a dict {NAME: value}, value being the
 * Python literal VALUE spells (ast.literal_eval of the stripped text), else the text itself.  A NAME that is not
 * a Python identifier is CRL_E_CONFIG naming FILE:LINE, the section and the key.  `who` names the plugin in
 * messages.  Returns a new reference, or NULL with err set (may be NULL): CRL_E_CONFIG, CRL_E_NOMEM, or
 * CRL_E_PLUGIN when ast cannot be imported.  Call with the GIL held. */
PyObject *pyembed_kwargs(const crl_opts *opts, const char *who, crl_error *err);

#endif
