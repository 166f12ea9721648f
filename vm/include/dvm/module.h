/* Modules: a loaded, verified .dvmb file.
 *
 * A module is immutable after loading and may be shared by any number of VMs
 * on any number of threads. It is reference-counted; each VM created from it
 * holds a reference. */
#ifndef DVM_MODULE_H
#define DVM_MODULE_H

#include "dvm/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dvm_module dvm_module;
typedef struct dvm_hostfn_registry dvm_hostfn_registry;

/* Host functions: C functions an embedder registers under a name, which a
 * .dvmb calls with `hostcall`. The signature is "ARGS->RET": one letter per
 * argument and one for the return, from
 *   i  int64_t            f  double
 *   t  dvm_tensor *  (argument: borrowed; return: a new reference, NULL = failure)
 *   v  void (return only)
 * e.g. "tf->t" is `dvm_tensor *fn(dvm_tensor *x, double s)`. The module names
 * the function and its signature; loading resolves it against the registry
 * and fails if it is missing or its signature differs. */
DVM_API DVM_MUST_USE dvm_status *dvm_hostfn_registry_create(dvm_hostfn_registry **out);
DVM_API DVM_MUST_USE dvm_status *dvm_hostfn_register(dvm_hostfn_registry *reg, const char *name,
                                             const char *signature, void (*fn)(void));
DVM_API void dvm_hostfn_registry_destroy(dvm_hostfn_registry *reg); /* after the modules using it */

typedef struct dvm_load_options {
  const dvm_hostfn_registry *hostfns; /* may be NULL; borrowed for the module's life */
  /* The folder the files of external constants are found in (a module
   * compiled with dvmc_compile_options.data_dir, kept elsewhere, as a
   * cache keeps it); NULL: the module file's folder, and for a module
   * given in memory none. */
  const char *data_dir;
} dvm_load_options;

/* Loads and verifies a module. The file is mapped, and constants are used
 * in place. Constants the module keeps in other files (external data,
 * docs/bytecode.md 3.9) are found relative to the file's folder (or
 * opts->data_dir) and checked against their hashes. `opts` may be NULL.
 * `*out` holds one reference; release it. */
DVM_API DVM_MUST_USE dvm_status *dvm_module_load_file(const char *path, const dvm_load_options *opts,
                                              dvm_module **out);
/* Same, from memory; the bytes are copied, the caller keeps `data`. A
 * module with external constants is refused (DVM_UNIMPLEMENTED) unless
 * opts->data_dir says where their files are. */
DVM_API DVM_MUST_USE dvm_status *dvm_module_load_memory(const void *data, size_t size,
                                                const dvm_load_options *opts, dvm_module **out);
DVM_API void dvm_module_retain(dvm_module *m);
DVM_API void dvm_module_release(dvm_module *m); /* NULL is fine */

/* Functions and their signatures. A dim is a constant (symbol == NULL,
 * value >= 0), a named symbol (symbol != NULL), or unknown (value -1). */
typedef struct dvm_dim_info {
  int64_t value;
  const char *symbol;
} dvm_dim_info;

typedef struct dvm_param_info {
  const char *name;
  dvm_kind kind;   /* DVM_VAL_NONE means "any" */
  dvm_dtype dtype; /* tensors; for a tuple, that of every tensor inside it
                      (an ONNX sequence or optional), DVM_DTYPE_COUNT: any */
  int rank;        /* tensors and shapes; -1 when any rank */
  dvm_dim_info dims[DVM_MAX_RANK];
} dvm_param_info;

typedef struct dvm_symbol_info {
  const char *name;
  int64_t lo, hi; /* allowed range, inclusive */
} dvm_symbol_info;

DVM_API int dvm_module_function_count(const dvm_module *m);
DVM_API int dvm_module_find_function(const dvm_module *m, const char *name); /* -1 if absent */
DVM_API const char *dvm_function_name(const dvm_module *m, int f);
DVM_API int dvm_function_param_count(const dvm_module *m, int f);
DVM_API int dvm_function_result_count(const dvm_module *m, int f);
DVM_API int dvm_function_symbol_count(const dvm_module *m, int f);
DVM_API void dvm_function_param(const dvm_module *m, int f, int i, dvm_param_info *out);
DVM_API void dvm_function_result(const dvm_module *m, int f, int i, dvm_param_info *out);
DVM_API void dvm_function_symbol(const dvm_module *m, int f, int i, dvm_symbol_info *out);
/* A fact the compiler recorded for tools (the file's info section), or
 * NULL: "peak" is the peak memory in bytes as a formula of the symbols
 * (docs/bytecode.md, section 3.8). The string lives as long as m. */
DVM_API const char *dvm_function_info(const dvm_module *m, int f, const char *key);

/* Whether t's memory is m's constant data (a result may be a module
 * constant or a view of one): it is shared by every VM and may be mapped
 * read-only, so it must not be written. Embedders that hand results on as
 * writable buffers (the Python package) mark these read-only. */
DVM_API bool dvm_module_holds(const dvm_module *m, const dvm_tensor *t);

/* Sizes for `dvm inspect`. */
DVM_API int dvm_module_constant_count(const dvm_module *m);
DVM_API size_t dvm_module_constant_bytes(const dvm_module *m);
DVM_API int dvm_module_kernel_count(const dvm_module *m);
/* Constant i (0 <= i < dvm_module_constant_count) and its name, both
 * borrowed from m; NULL for another i. */
DVM_API const dvm_tensor *dvm_module_constant(const dvm_module *m, int i, const char **name);
/* Bytes of constants' plain data whose pages the linker gave back to the
 * system once kernels had packed them (a module mapped from a file only;
 * docs/kernels.md): they are read again from the file only where a reader
 * needs the plain form. */
DVM_API size_t dvm_module_released_bytes(const dvm_module *m);

#ifdef __cplusplus
}
#endif
#endif
