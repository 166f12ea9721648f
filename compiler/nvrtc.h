/* NVRTC, loaded at run time: CUDA C source to cubin and PTX.
 *
 * libnvrtc is found with dlopen (never linked), so dvm builds and runs on
 * machines without the CUDA toolkit; asking for CUDA code there fails with
 * a status that says NVRTC could not be loaded and where it was looked for. */
#ifndef DVMC_NVRTC_H
#define DVMC_NVRTC_H

#include <stddef.h>

#include "dvm/status.h"

/* Loads NVRTC once (thread-safe); DVM_UNAVAILABLE with the paths tried
 * when it is not there. */
DVM_MUST_USE dvm_status *dvmc_nvrtc_load(void);

/* Compiles `src` for `arch`: 80, 90, ... gives a cubin for sm_<arch>;
 * -80, -90, ... gives PTX for compute_<-arch> (text, NUL included).
 * *image is malloc'ed. Errors name the program and carry NVRTC's log. */
DVM_MUST_USE dvm_status *dvmc_nvrtc_compile(const char *src, const char *name, int arch,
                                            void **image, size_t *size);

#endif
