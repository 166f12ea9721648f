/* The disassembler: a module as .dvms text, one instruction a line with a
 * synopsis comment in the style of SQLite's EXPLAIN. */
#include <ctype.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "asm.h"
#include "opcode.h"

static int is_ident(const char *s) {
  if (!*s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("_.:/-", *s)) return 0;
  return 1;
}

static void print_quoted(const char *s, FILE *out) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", out);
    else if (*p == '\t') fputs("\\t", out);
    else if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\x%02x", *p);
    else fputc(*p, out);
  }
  fputc('"', out);
}

void dvm_disasm_name(const char *s, FILE *out) {
  if (is_ident(s)) fputs(s, out);
  else print_quoted(s, out);
}

static void print_hex(const void *data, size_t n, FILE *out) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *p = data;
  fputs("x\"", out);
  for (size_t i = 0; i < n; i++) {
    fputc(digits[p[i] >> 4], out);
    fputc(digits[p[i] & 15], out);
  }
  fputc('"', out);
}

static void print_float(int64_t bits, FILE *out) {
  double f;
  memcpy(&f, &bits, sizeof f);
  if (isnan(f)) fprintf(out, "nan:0x%016llx", (unsigned long long)bits);
  else if (isinf(f)) fputs(f < 0 ? "-inf" : "inf", out);
  else fprintf(out, "%.17g", f);
}

/* Prints operand of letter `c` whose words start at w; returns the words used. */
static uint32_t print_operand(const dvm_module *m, const dvm_func *f, char c, const int64_t *w,
                              FILE *out) {
  int64_t x = w[0];
  switch (c) {
  case 'd': case 'r': case 'k': fprintf(out, "r%lld", (long long)x); return 1;
  case 'o': if (x < 0) fputc('-', out); else fprintf(out, "r%lld", (long long)x); return 1;
  case 'i': case 'p': case 'q': fprintf(out, "%lld", (long long)x); return 1;
  case 'f': print_float(x, out); return 1;
  /* the sigil only on bare names: the assembler reads "$" alone as a word */
  case 'c': fputs(is_ident(m->consts[x].name) ? "$" : "", out); dvm_disasm_name(m->consts[x].name, out); return 1;
  case 'F': fputs(is_ident(m->funcs[x].name) ? "@" : "", out); dvm_disasm_name(m->funcs[x].name, out); return 1;
  case 'X': dvm_disasm_name(m->kernels[x].name, out); return 1;
  case 'Y': dvm_disasm_name(m->shapefns[x].name, out); return 1;
  case 'H': dvm_disasm_name(m->hostfns[x].name, out); return 1;
  case 's': print_quoted(m->strings[x], out); return 1;
  case 'j': fprintf(out, "L%d", dvm_func_instr_index(f, (uint32_t)x)); return 1;
  case 't': fputs(dvm_dtype_name((dvm_dtype)x), out); return 1;
  case 'v': fputs(dvm_device_name((dvm_device_kind)x), out); return 1;
  default: { /* lists */
    fputc(c == 'I' ? '[' : '(', out);
    for (int64_t i = 0; i < x; i++) {
      if (i) fputs(", ", out);
      if (c == 'I') fprintf(out, "%lld", (long long)w[1 + i]);
      else fprintf(out, "r%lld", (long long)w[1 + i]);
    }
    fputc(c == 'I' ? ']' : ')', out);
    return 1 + (uint32_t)x;
  }
  }
}

void dvm_disasm_instr(const dvm_module *m, const dvm_func *f, uint32_t index, FILE *out) {
  const int64_t *c = f->code + f->starts[index];
  const dvm_opinfo *info = &dvm_opinfo_table[c[0]];
  const int64_t *operand[16];
  char *ops = NULL, *syn = NULL;
  size_t nops = 0, nsyn = 0;
  FILE *a = open_memstream(&ops, &nops), *b = a ? open_memstream(&syn, &nsyn) : NULL;
  if (!b) { /* no memory for the columns: plain operands still print */
    if (a) fclose(a);
    free(ops);
    a = b = out;
  }
  uint32_t w = 1;
  int j = 0;
  for (const char *fmt = info->format; *fmt; fmt++, j++) {
    if (j) fputs(", ", a);
    operand[j] = c + w;
    w += print_operand(m, f, *fmt, c + w, a);
  }
  if (a == out) return;
  /* the synopsis: %N replaced by operand N */
  for (const char *s = info->synopsis; *s; s++) {
    if (s[0] == '%' && isdigit((unsigned char)s[1])) {
      int k = *++s - '0';
      print_operand(m, f, info->format[k], operand[k], b);
    } else {
      fputc(*s, b);
    }
  }
  fclose(a);
  fclose(b);
  fprintf(out, "%-14s %-24s ; %u%s%s", info->name, ops, index, *syn ? ": " : "", syn);
  free(ops);
  free(syn);
}

static void print_sig(const dvm_func *f, const dvm_sig *s, const char *dir, FILE *out) {
  fprintf(out, "  .%s ", dir);
  dvm_disasm_name(s->name, out);
  fprintf(out, " %s", s->kind == DVM_VAL_NONE ? "any" : dvm_kind_name((dvm_kind)s->kind));
  if (s->kind == DVM_VAL_TENSOR) fprintf(out, " %s", dvm_dtype_name((dvm_dtype)s->dtype));
  if (dvm_sig_item_dtype(s) >= 0) fprintf(out, " %s", dvm_dtype_name((dvm_dtype)dvm_sig_item_dtype(s)));
  if (s->kind == DVM_VAL_TENSOR || s->kind == DVM_VAL_SHAPE) {
    if (s->rank < 0) {
      fputs(" *", out);
    } else {
      fputs(" [", out);
      for (int d = 0; d < s->rank; d++) {
        if (d) fputs(", ", out);
        int sym = dvm_dim_symbol(s->dims[d]);
        if (sym >= 0) dvm_disasm_name(f->syms[sym].name, out);
        else if (s->dims[d] == DVM_DIM_ANY) fputc('?', out);
        else fprintf(out, "%lld", (long long)s->dims[d]);
      }
      fputc(']', out);
    }
  }
  fputc('\n', out);
}

static void print_func(const dvm_module *m, const dvm_func *f, FILE *out) {
  fputs("\n.func ", out);
  dvm_disasm_name(f->name, out);
  fprintf(out, " regs=%u\n", f->nregs);
  for (uint32_t s = 0; s < f->nsyms; s++) {
    fputs("  .sym ", out);
    dvm_disasm_name(f->syms[s].name, out);
    fprintf(out, " r%u %lld %lld\n", f->syms[s].reg, (long long)f->syms[s].lo,
            (long long)f->syms[s].hi);
  }
  for (uint32_t p = 0; p < f->nparams; p++) print_sig(f, &f->params[p], "param", out);
  for (uint32_t p = 0; p < f->nresults; p++) print_sig(f, &f->results[p], "result", out);
  for (uint32_t k = 0; k < f->ninfo; k++) {
    fputs("  .info ", out);
    dvm_disasm_name(f->info[k].key, out);
    fputc(' ', out);
    print_quoted(f->info[k].value, out);
    fputc('\n', out);
  }
  /* labels for jump targets */
  unsigned char *target = calloc(f->ninstr, 1);
  for (uint32_t i = 0; target && i < f->ninstr; i++) {
    if (dvm_opinfo_table[f->code[f->starts[i]]].flags & DVM_OPF_JUMP)
      target[dvm_func_instr_index(f, (uint32_t)dvm_instr_jump_target(f->code, f->starts[i]))] = 1;
  }
  const char *loc = NULL;
  for (uint32_t i = 0; i < f->ninstr; i++) {
    if (f->src[i] != loc && (!f->src[i] || !loc || strcmp(f->src[i], loc) != 0)) {
      fputs("  .loc ", out);
      if (f->src[i]) dvm_disasm_name(f->src[i], out);
      else fputc('-', out);
      fputc('\n', out);
    }
    loc = f->src[i];
    if (target && target[i]) fprintf(out, "L%u:\n", i);
    fputs("  ", out);
    dvm_disasm_instr(m, f, i, out);
    fputc('\n', out);
  }
  free(target);
  fputs(".end\n", out);
}

/* What the kernel's describe hook reads from k's payload, or NULL: no
 * payload, a module not linked (assembled, not loaded), or a kernel
 * without the hook. A payload the hook cannot read gets *st. */
static bool describe(const dvm_kernel_ref *k, dvm_payload_desc *d, dvm_status **st) {
  *st = NULL;
  if (!k->payload_size || !k->def || !k->def->describe) return false;
  *st = k->def->describe(k->payload, k->payload_size, d);
  return true;
}

/* A comment line summing up k's payload; the assembler skips it. */
static void print_payload(const dvm_kernel_ref *k, FILE *out) {
  dvm_payload_desc d;
  dvm_status *st;
  if (!describe(k, &d, &st)) return;
  fprintf(out, "; %s\n", st ? dvm_status_message(st) : d.summary);
  dvm_status_free(st);
}

void dvm_disasm_gen_sources(const dvm_module *m, FILE *out) {
  for (uint32_t i = 0; i < m->nkernels; i++) {
    const dvm_kernel_ref *k = &m->kernels[i];
    dvm_payload_desc d;
    dvm_status *st;
    if (!describe(k, &d, &st) || st || !d.source_size) {
      dvm_status_free(st);
      continue;
    }
    fprintf(out, "; kernel %u ", i);
    dvm_disasm_name(k->name, out);
    fprintf(out, ": %s source, %zu bytes\n;   ", d.language, d.source_size);
    for (size_t c = 0; c < d.source_size; c++) {
      if (d.source[c] == '\n') fputs(c + 1 < d.source_size ? "\n;   " : "", out);
      else if (d.source[c]) fputc(d.source[c], out);
    }
    fputc('\n', out);
  }
}

void dvm_disasm_module(const dvm_module *m, FILE *out) {
  fprintf(out, "; dvm bytecode %d.%d\n", DVM_BC_MAJOR, DVM_BC_MINOR);
  for (uint32_t i = 0; i < m->nconsts; i++) {
    const dvm_const *c = &m->consts[i];
    fputs(".const ", out);
    dvm_disasm_name(c->name, out);
    fprintf(out, " %s [", dvm_dtype_name((dvm_dtype)c->dtype));
    for (int d = 0; d < c->rank; d++) fprintf(out, d ? ", %lld" : "%lld", (long long)c->dims[d]);
    fputs("] ", out);
    if (c->ext_path) {
      fputs("file ", out);
      print_quoted(c->ext_path, out);
      fprintf(out, " %llu 0x%016llx", (unsigned long long)c->ext_offset, (unsigned long long)c->ext_hash);
    } else {
      print_hex(c->data, c->nbytes, out);
    }
    fputc('\n', out);
  }
  for (uint32_t i = 0; i < m->nkernels; i++) {
    const dvm_kernel_ref *k = &m->kernels[i];
    fputs(".kernel ", out);
    dvm_disasm_name(k->name, out);
    fprintf(out, " %s %u", dvm_device_name((dvm_device_kind)k->device), k->nvariants);
    if (k->payload_size) {
      fputc(' ', out);
      print_hex(k->payload, k->payload_size, out);
    }
    fputc('\n', out);
    print_payload(k, out);
  }
  for (uint32_t i = 0; i < m->nshapefns; i++) {
    fputs(".shapefn ", out);
    dvm_disasm_name(m->shapefns[i].name, out);
    fputc('\n', out);
  }
  for (uint32_t i = 0; i < m->nhostfns; i++) {
    fputs(".hostfn ", out);
    dvm_disasm_name(m->hostfns[i].name, out);
    fputc(' ', out);
    print_quoted(m->hostfns[i].sig, out);
    fputc('\n', out);
  }
  for (uint32_t i = 0; i < m->nfuncs; i++) print_func(m, &m->funcs[i], out);
}
