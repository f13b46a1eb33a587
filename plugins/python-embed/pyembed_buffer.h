/* pyembed_buffer: a host-allocated buffer handed to a plugin's Python half
 * as a writable memoryview. */
#ifndef CRL_PYEMBED_BUFFER_H
#define CRL_PYEMBED_BUFFER_H

#include "pyembed.h"

/* The buffer under `key` in `buffers`, checked to be a contiguous cpu `dt`
 * tensor of shape [num] + shape[0..ndim), as a (memoryview, dtype name,
 * shape tuple) tuple for the plugin's support module.  The memoryview
 * borrows the tensor's memory: the tensor must outlive it.  `who` and `id`
 * name the plugin and env in messages.  Does nothing and returns NULL when
 * *rc is already set, so a caller can chain calls and check once.  Returns
 * a new reference, or NULL with *rc set (CRL_E_NOT_FOUND: no such buffer;
 * CRL_E_SHAPE: wrong dtype, shape, device or layout; CRL_E_NOMEM) and err
 * set (err may be NULL).  Call with the GIL held. */
PyObject *pyembed_buffer(crl_td *buffers, const char *who, const char *id, int64_t num, const char *key,
                         crl_dtype dt, int ndim, const int64_t *shape, int *rc, crl_error *err);

#endif
