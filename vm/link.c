/* Linking a verified module: kernels, shape functions and host functions by
 * name, constant tensors over the module's bytes, and the forms of them
 * that kernels prepack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"
#include "hostfn.h"
#include "instr.h"
#include "object.h"
#include "opcode.h"
#include "registry.h"

/* How the instructions of a function read one register: not at all, only
 * as input `slot` of kernel `def` (whose forms replace the plain bytes), or
 * otherwise (plain). */
typedef struct reg_reads {
  const dvm_kernel_def *def;
  int slot;
  bool plain;
} reg_reads;

static void note_read(reg_reads *r, const dvm_kernel_def *def, int slot) {
  if (!def || (r->def && (r->def != def || r->slot != slot))) r->plain = true;
  r->def = def;
  r->slot = slot;
}

/* Notes how the instructions of f read each constant (dvm_const.plain,
 * .reader): plain when a `const` loads it into a register that something
 * reads other than one kernel input whose form of it replaces the plain
 * bytes (conv's forms, for one, are made lazily from them), or when two
 * such inputs differ. Per register, not per path, so no jump can hide a
 * reader; one kernel input per register keeps it linear. */
static dvm_status *mark_reads(dvm_module *m, const dvm_func *f) {
  reg_reads *regs = calloc(f->nregs + 1, sizeof *regs);
  if (!regs) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < f->ninstr; i++) {
    const int64_t *c = f->code + f->starts[i];
    const dvm_kernel_def *def = c[0] == DVM_OP_INVOKE ? m->kernels[c[1]].def : NULL;
    const int64_t *ins = def ? c + 4 + c[3] : NULL; /* invoke: X o R(out) R(in) R(attrs) */
    const int64_t *o = c + 1;
    for (const char *fmt = dvm_opinfo_table[c[0]].format; *fmt; fmt++) {
      int64_t count = dvm_operand_is_list(*fmt) ? *o++ : 1;
      bool reads = *fmt == 'r' || *fmt == 'o' || *fmt == 'R'; /* 'k', release, drops it unread */
      for (int64_t q = 0; q < count; q++, o++) {
        if (!reads || *o < 0) continue;
        bool input = ins && def->prepack_replaces && o > ins && o <= ins + ins[0];
        note_read(&regs[*o], input ? def : NULL, input ? (int)(o - ins - 1) : 0);
      }
    }
  }
  for (uint32_t i = 0; i < f->ninstr; i++) {
    const int64_t *c = f->code + f->starts[i];
    if (c[0] != DVM_OP_CONST) continue;
    const reg_reads *r = &regs[c[1]];
    dvm_const *k = &m->consts[c[2]];
    if (r->plain || (r->def && k->reader && (k->reader != r->def || k->reader_slot != r->slot))) k->plain = true;
    else if (r->def) k->reader = r->def, k->reader_slot = r->slot;
  }
  free(regs);
  return NULL;
}

bool dvm_const_packed_only(const dvm_const *c) {
  return !c->plain && c->reader && dvm_tensor_packed(c->tensor, c->reader, c->reader_slot);
}

/* Lets the kernels that have a prepack hook build their forms of the
 * constants f feeds them. A linear walk that knows which constant each
 * register last got from `const`, and which value from `imm` (forgotten on
 * any other write): a guess, as a jump may bring another value, but a wrong
 * one only wastes a form or misses one, since a kernel looks for its form
 * on the tensor it is actually given. */
#define HINTS 16 /* hints for an invoke's first attributes: more than any hook reads */

typedef struct known {
  int64_t konst; /* const index + 1, or 0 */
  dvm_attr_hint imm;
} known;

static dvm_status *prepack_function(dvm_module *m, const dvm_func *f) {
  known *kn = calloc(f->nregs ? f->nregs : 1, sizeof *kn);
  if (!kn) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = NULL;
  for (uint32_t i = 0; i < f->ninstr && !st; i++) {
    const int64_t *c = f->code + f->starts[i];
    if (c[0] == DVM_OP_CONST) {
      dvm_ops_CONST x = dvm_decode_CONST(c);
      kn[x.dst] = (known){x.constant + 1, {0, 0}};
      continue;
    }
    if (c[0] == DVM_OP_IMM) {
      dvm_ops_IMM x = dvm_decode_IMM(c);
      kn[x.dst] = (known){0, {1, x.value}};
      continue;
    }
    if (c[0] == DVM_OP_INVOKE) {
      dvm_ops_INVOKE x = dvm_decode_INVOKE(c);
      const dvm_kernel_def *def = m->kernels[x.kernel].def;
      dvm_attr_hint hints[HINTS];
      int nattrs = x.attrs.n < HINTS ? (int)x.attrs.n : HINTS;
      for (int a = 0; a < nattrs; a++) hints[a] = kn[x.attrs.v[a]].imm;
      for (int64_t j = 0; j < x.ins.n && def->prepack && !st; j++) {
        int64_t r = x.ins.v[j];
        if (!kn[r].konst) continue;
        dvm_tensor *t = m->consts[kn[r].konst - 1].tensor;
        if (dvm_tensor_packed(t, def, (int)j)) continue;
        void *data = NULL;
        void (*free_data)(void *) = NULL;
        dvm_const *kc = &m->consts[kn[r].konst - 1];
        /* the plain bytes, read to pack, go back when the kernel reads its
         * form only (an external constant's once its hash is checked,
         * vm/extdata.c): during packing, as the hook reads them, where it
         * says so (dvm_tensor_consumed), else right after; packing weight
         * after weight then holds little of one plain weight at a time, not
         * the whole file beside the forms */
        bool consume = !kc->ext_path && def->prepack_replaces && !kc->plain && kc->reader == def &&
                       kc->reader_slot == (int)j;
        t->consumable = consume;
        st = def->prepack(t, (int)j, hints, nattrs, &data, &free_data);
        t->consumable = false;
        if (!st && data) st = dvm_tensor_attach_packed(t, def, (int)j, data, free_data);
        if (!st && data && consume && dvm_const_packed_only(kc)) m->released += dvm_tensor_drop_pages(t);
        if (!st && data && kc->ext_path && dvm_const_packed_only(kc)) st = dvm_extdata_settle(m, kc);
        if (st) st = dvm_status_annotate(st, "prepacking constant \"%s\" for kernel \"%s\"",
                                         m->consts[kn[r].konst - 1].name, m->kernels[x.kernel].name);
      }
      continue; /* invoke writes tensors, not registers */
    }
    const char *fmt = dvm_opinfo_table[c[0]].format;
    for (const int64_t *o = c + 1; *fmt; fmt++) { /* every other write forgets */
      int64_t count = dvm_operand_is_list(*fmt) ? *o++ : 1;
      for (int64_t q = 0; q < count; q++, o++)
        if (*fmt == 'd' || *fmt == 'D' || *fmt == 'k') kn[*o] = (known){0, {0, 0}};
    }
  }
  free(kn);
  return st;
}

/* A string constant: a tensor of its own, its strings read from the blob. */
static dvm_status *string_const(dvm_const *c) {
  dvm_status *st = dvm_tensor_create(DVM_STRING, c->rank, c->dims, &c->tensor);
  if (!st && (st = dvm_strings_blob_read(c->data, c->tensor))) {
    dvm_tensor_release(c->tensor);
    c->tensor = NULL;
  }
  return st;
}

dvm_status *dvm_module_link(dvm_module *m, const dvm_load_options *opts) {
  for (uint32_t i = 0; i < m->nkernels; i++) {
    /* "fused@3": one op-table kernel may back several entries, each with
     * its own payload; the name before '@' is the op table's */
    dvm_kernel_ref *k = &m->kernels[i];
    char base[128];
    size_t len = strcspn(k->name, "@");
    snprintf(base, sizeof base, "%.*s", (int)(len < sizeof base ? len : sizeof base - 1), k->name);
    k->def = m->reg->kernel(base, (dvm_device_kind)k->device);
    if (!k->def)
      return dvm_status_new(DVM_NOT_FOUND, "kernel \"%s\" for %s is not in this dvm's op table",
                            k->name, dvm_device_name((dvm_device_kind)k->device));
  }
  for (uint32_t i = 0; i < m->nshapefns; i++) {
    m->shapefns[i].def = m->reg->shapefn(m->shapefns[i].name);
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
    dvm_storage *s = c->storage ? c->storage : m->data; /* an external file's (vm/extdata.c) */
    size_t off = (size_t)((const uint8_t *)c->data - (const uint8_t *)s->ptr);
    dvm_status *st = c->dtype == DVM_STRING ? string_const(c) : dvm_tensor_view(s, off, (dvm_dtype)c->dtype, c->rank,
                                                                                c->dims, &c->tensor);
    if (st) return dvm_status_annotate(st, "constant \"%s\"", c->name);
  }
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    dvm_status *st = mark_reads(m, &m->funcs[i]);
    if (st) return st;
  }
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    dvm_status *st = prepack_function(m, &m->funcs[i]);
    if (st) return dvm_status_annotate(st, "function \"%s\"", m->funcs[i].name);
  }
  return NULL;
}
