/* crl plugin SDK: everything a plugin needs. */
#ifndef CRL_CRL_H
#define CRL_CRL_H
#include <crl/error.h>
#include <crl/tensor.h>
#include <crl/td.h>
#include <crl/rng.h>
#include <crl/spec.h>
#include <crl/options.h>
#include <crl/plugin.h>
#include <crl/env_backend.h>
#include <crl/transform_backend.h>
#include <crl/storage_backend.h>
#include <crl/checkpoint.h>
#include <crl/file.h>
#include <crl/nn.h>
#include <crl/distributions.h>
#include <crl/actor.h>
#include <crl/value.h>
#include <crl/rnn.h>
#include <crl/loss_backend.h>
#endif
