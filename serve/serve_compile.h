/* The one piece of serve/ that needs the compiler (libdvmc). */
#ifndef DVM_SERVE_COMPILE_H
#define DVM_SERVE_COMPILE_H

#include "serve.h"

/* Compiles an ONNX file with cfg's function name and dim ranges and loads
 * the result; with `cache` (a folder, may be NULL) the compiled file is
 * kept there for the next load of the same file and settings, under the
 * model's `name`. `*out` holds one reference; release it. */
DVM_MUST_USE dvm_status *dvms_compile_onnx(const char *path, const char *name, const dvms_config *cfg,
                                           const char *cache, dvm_module **out);

#endif
