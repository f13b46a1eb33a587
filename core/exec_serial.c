/* The serial executor: every worker block stepped in order in the calling thread (the baseline). */
#include "exec-private.h"

static int serial_run(crl__exec *x, crl_error *err)
{
    for (size_t b = 0; b < x->nblocks; b++) {
        int rc = crl__exec_run_block(x, b, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

const crl__exec_kind crl__exec_kind_serial = {
    .name = "serial",
    .start = NULL,
    .run = serial_run,
    .stop = NULL,
};
