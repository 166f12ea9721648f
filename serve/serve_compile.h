/* The one piece of serve/ that needs the compiler (libdvmc). */
#ifndef DVM_SERVE_COMPILE_H
#define DVM_SERVE_COMPILE_H

#include "serve.h"

/* Compiles an ONNX file with cfg's function name and dim ranges and loads
 * the result; with `cache` (a folder, may be NULL) the compiled file is
 * kept there for the next load of the same file and settings, under the
 * model's `name`. The compiler's warnings go to o->warn (when set) with
 * the model's name; a load from the cache compiles nothing and warns
 * nothing. `*out` holds one reference; release it. */
DVM_MUST_USE dvm_status *dvms_compile_onnx(const char *path, const char *name, const dvms_config *cfg,
                                           const dvms_repo_options *o, dvm_module **out);

#endif
