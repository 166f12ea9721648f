/* The dvm embedding API: include this one header. */
#ifndef DVM_DVM_H
#define DVM_DVM_H

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "dvm/value.h"
#include "dvm/module.h"
#include "dvm/vm.h"
#include "dvm/debug.h"
#include "dvm/profile.h"
#include "dvm/generate.h"
#include "dvm/tokenizer.h"
#include "dvm/npy.h"
#include "dvm/asm.h"

#endif
