/* --input and --output arguments bound to a function's parameters or
 * results, for dvm run and dvm repl. A tensor's name may hold any
 * character, '=' and '/' included, and so may a file's path, so the forms
 * are:
 *   --input-name NAME --input FILE   NAME exactly, FILE whole: never split
 *   --input NAME=FILE                NAME one of the function's names
 *   --input FILE                     the next unbound position
 * and an argument that the second and the third forms (or two names) could
 * both read is an error that points to the first. */
#include <string.h>
#include <unistd.h>

#include "cli.h"

static void slot_info(const dvm_module *m, int f, int result, int k, dvm_param_info *info) {
  if (result) dvm_function_result(m, f, k, info);
  else dvm_function_param(m, f, k, info);
}

/* The slot whose name is exactly name, or -1. */
static int exact_slot(const dvm_module *m, int f, int result, int nslots, const char *name) {
  for (int k = 0; k < nslots; k++) {
    dvm_param_info info;
    slot_info(m, f, result, k, &info);
    if (strcmp(info.name, name) == 0) return k;
  }
  return -1;
}

/* The slots whose names followed by '=' begin arg: how many, the first two
 * in k[0], k[1]. */
static int prefix_slots(const dvm_module *m, int f, int result, int nslots, const char *arg, int k[2]) {
  int n = 0;
  for (int p = 0; p < nslots; p++) {
    dvm_param_info info;
    slot_info(m, f, result, p, &info);
    size_t len = strlen(info.name);
    if (strncmp(arg, info.name, len) == 0 && arg[len] == '=') {
      if (n < 2) k[n] = p;
      n++;
    }
  }
  return n;
}

dvm_status *dvm_cli_bind(const dvm_module *m, int f, int result, const dvm_cli_arg *args, int nargs, int nslots,
                         const char **slots) {
  const char *what = result ? "output" : "input", *fn = dvm_function_name(m, f);
  int next = 0;
  for (int i = 0; i < nargs; i++) {
    const char *arg = args[i].text, *value = arg;
    int k;
    if (args[i].is_name) {
      if (i + 1 == nargs || args[i + 1].is_name)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "--%s-name \"%s\" must be followed by an --%s FILE", what, arg,
                              what);
      if ((k = exact_slot(m, f, result, nslots, arg)) < 0)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "--%s-name: function \"%s\" has no %s named \"%s\"", what, fn,
                              what, arg);
      value = args[++i].text;
    } else {
      int named[2], n = prefix_slots(m, f, result, nslots, arg, named);
      const char *eq = strchr(arg, '=');
      dvm_param_info a, b;
      if (n > 1) {
        slot_info(m, f, result, named[0], &a);
        slot_info(m, f, result, named[1], &b);
        return dvm_status_new(DVM_INVALID_ARGUMENT, "--%s \"%s\" is ambiguous: it starts with the %s names \"%s\" and "
                              "\"%s\"; say which with --%s-name NAME --%s FILE", what, arg, what, a.name, b.name, what, what);
      }
      if (n == 1) {
        slot_info(m, f, result, k = named[0], &a);
        if (access(arg, F_OK) == 0)
          return dvm_status_new(DVM_INVALID_ARGUMENT, "--%s \"%s\" is ambiguous: it starts with the %s name \"%s\" "
                                "and is a file; say which with --%s-name NAME --%s FILE, or ./FILE", what, arg, what,
                                a.name, what, what);
        value = arg + strlen(a.name) + 1;
      } else if (eq && access(arg, F_OK) != 0) {
        return dvm_status_new(DVM_INVALID_ARGUMENT, "\"%s\": function \"%s\" has no %s named \"%.*s\" (nor is it a file)",
                              arg, fn, what, (int)(eq - arg), arg);
      } else {
        while (next < nslots && slots[next]) next++;
        if ((k = next) >= nslots)
          return dvm_status_new(DVM_INVALID_ARGUMENT, "function \"%s\" takes %d %ss; \"%s\" is one too many", fn,
                                nslots, what, arg);
      }
    }
    if (slots[k]) {
      dvm_param_info info;
      slot_info(m, f, result, k, &info);
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s %d (\"%s\") is bound twice", what, k, info.name);
    }
    slots[k] = value;
  }
  return NULL;
}
