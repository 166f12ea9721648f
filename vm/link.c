/* Linking a verified module: kernels, shape functions and host functions by
 * name, and constant tensors over the module's bytes. */
#include <stdio.h>
#include <string.h>

#include "bytecode.h"
#include "hostfn.h"

dvm_status *dvm_module_link(dvm_module *m, const dvm_load_options *opts) {
  for (uint32_t i = 0; i < m->nkernels; i++) {
    /* "fused@3": one op-table kernel may back several entries, each with
     * its own payload; the name before '@' is the op table's */
    dvm_kernel_ref *k = &m->kernels[i];
    char base[128];
    size_t len = strcspn(k->name, "@");
    snprintf(base, sizeof base, "%.*s", (int)(len < sizeof base ? len : sizeof base - 1), k->name);
    k->def = dvm_ops_find(base, (dvm_device_kind)k->device);
    if (!k->def)
      return dvm_status_new(DVM_NOT_FOUND, "kernel \"%s\" for %s is not in this dvm's op table",
                            k->name, dvm_device_name((dvm_device_kind)k->device));
  }
  for (uint32_t i = 0; i < m->nshapefns; i++) {
    m->shapefns[i].def = dvm_shapefn_find(m->shapefns[i].name);
    if (!m->shapefns[i].def)
      return dvm_status_new(DVM_NOT_FOUND, "shape function \"%s\" is not in this dvm",
                            m->shapefns[i].name);
  }
  for (uint32_t i = 0; i < m->nhostfns; i++) {
    dvm_hostfn_ref *h = &m->hostfns[i];
    h->fn = dvm_hostfn_lookup(opts ? opts->hostfns : NULL, h->name);
    if (!h->fn)
      return dvm_status_new(DVM_NOT_FOUND, "host function \"%s\" (%s) is not registered", h->name,
                            h->sig);
    if (strcmp(dvm_hostfn_signature(h->fn), h->sig) != 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "host function \"%s\": the module expects "
                                                  "signature %s, the registered one is %s",
                            h->name, h->sig, dvm_hostfn_signature(h->fn));
  }
  for (uint32_t i = 0; i < m->nconsts; i++) {
    /* views of the file's storage, so a constant handed out as a result
     * keeps the bytes alive after the module is gone */
    dvm_const *c = &m->consts[i];
    size_t off = (size_t)((const uint8_t *)c->data - (const uint8_t *)m->bytes);
    dvm_status *st = dvm_tensor_view(m->data, off, (dvm_dtype)c->dtype, c->rank, c->dims, &c->tensor);
    if (st) return dvm_status_annotate(st, "constant \"%s\"", c->name);
  }
  return NULL;
}
