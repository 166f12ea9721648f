/* Shape functions: results and exact error messages, found through the
 * registry as the VM finds them, and inputs of every kind and rank. */
#include <stdlib.h>

#include "harness.h"
#include "kernel.h"
#include "object.h"
#include "input.h"
#include "shapefuncs/registry.h"

/* "[2,3]" for a shape value, "int" and so on for the rest. */
static const char *show(const dvm_value *v, char *buf, size_t size) {
  if (v->kind != DVM_VAL_SHAPE) return dvm_kind_name((dvm_kind)v->kind);
  return dvm_shape_format(buf, size, DVM_DTYPE_COUNT, v->rank, v->u.dims);
}

typedef struct shape_case {
  const char *fn;
  const char *in[4];
  const char *want; /* the output shape, or the whole error message */
} shape_case;

static const shape_case cases[] = {
    {"broadcast", {"[2,3]", "[2,3]"}, "[2,3]"},
    {"broadcast", {"[]", "[]"}, "[]"},
    {"broadcast", {"[]", "[5]"}, "[5]"},
    {"broadcast", {"[5]", "[]"}, "[5]"},
    {"broadcast", {"[2,3]", "[3]"}, "[2,3]"},
    {"broadcast", {"[3]", "[2,3]"}, "[2,3]"},
    {"broadcast", {"[2,3]", "[2,1]"}, "[2,3]"},
    {"broadcast", {"[2,1]", "[1,3]"}, "[2,3]"},
    {"broadcast", {"[4,1,5]", "[3,1]"}, "[4,3,5]"},
    {"broadcast", {"[1,1]", "[1]"}, "[1,1]"},
    {"broadcast", {"[2,3]", "[3]", "i1"}, "[2,3]"}, /* mod's fmod attribute after the inputs */
    {"broadcast", {"[1]", "[0]"}, "[0]"},
    {"broadcast", {"[0]", "[1]"}, "[0]"},
    {"broadcast", {"[0,3]", "[1,3]"}, "[0,3]"},
    {"broadcast", {"[2,1,0]", "[5,1]"}, "[2,5,0]"},
    {"broadcast", {"[1,1,1,1,1,1,1,1]", "[2]"}, "[1,1,1,1,1,1,1,2]"},
    {"broadcast", {"[8,1,6,1,4,1,2,1]", "[7,1,5,1,3,1,9]"}, "[8,7,6,5,4,3,2,9]"},
    {"broadcast", {"t[2,3]", "[3]"}, "[2,3]"},
    {"broadcast", {"t[7,1]", "t[1,13]"}, "[7,13]"},
    {"broadcast", {"t[0,1]", "t[4]"}, "[0,4]"},
    {"broadcast", {"[2,1]", "[1,3]", "[4,1,1]"}, "[4,2,3]"},
    {"broadcast", {"[1]", "t[5,1]", "[1,6]", "[]"}, "[5,6]"},
    {"broadcast", {"[2,3]", "[4]"}, "broadcast: [2,3] vs [4]: dim -1 3 != 4"},
    {"broadcast", {"[4]", "[2,3]"}, "broadcast: [4] vs [2,3]: dim -1 4 != 3"},
    {"broadcast", {"[2,3,4]", "[5,1,4]"}, "broadcast: [2,3,4] vs [5,1,4]: dim -3 2 != 5"},
    {"broadcast", {"[0]", "[3]"}, "broadcast: [0] vs [3]: dim -1 0 != 3"},
    {"broadcast", {"t[2,3]", "t[3,3]"}, "broadcast: [2,3] vs [3,3]: dim -2 2 != 3"},
    {"broadcast", {"[2,1]", "[1,3]", "[4]"}, "broadcast: [2,3] vs [4]: dim -1 3 != 4"},
    {"broadcast", {"[2]"}, "broadcast: takes 2 or more inputs, got 1"},
    {"broadcast", {"[2]", "i3"}, "broadcast: input 1: expected a tensor or a shape, got int"},
    {"broadcast", {"n", "[2]"}, "broadcast: input 0: expected a tensor or a shape, got none"},
    {"broadcast", {"[2,-1]", "[2]"}, "broadcast: input 0: dim 1 is negative (-1)"},
    {"broadcast", {"[1]", "[1,2,3,4,5,6,7,8,9]"}, "broadcast: input 1: shape rank 9 is over 8"},
    {"matmul", {"[2,3]", "[3,4]"}, "[2,4]"},
    {"matmul", {"[3]", "[3,4]"}, "[4]"},
    {"matmul", {"[2,3]", "[3]"}, "[2]"},
    {"matmul", {"[3]", "[3]"}, "[]"},
    {"matmul", {"[5,2,3]", "[3,4]"}, "[5,2,4]"},
    {"matmul", {"[2,3]", "[5,3,4]"}, "[5,2,4]"},
    {"matmul", {"[2,1,2,3]", "[5,3,4]"}, "[2,5,2,4]"},
    {"matmul", {"[1,5,2,3]", "[7,1,3,4]"}, "[7,5,2,4]"},
    {"matmul", {"[3]", "[5,3,4]"}, "[5,4]"},
    {"matmul", {"[5,2,3]", "[3]"}, "[5,2]"},
    {"matmul", {"[0,3]", "[3,0]"}, "[0,0]"},
    {"matmul", {"[2,0]", "[0,4]"}, "[2,4]"},
    {"matmul", {"[0,2,3]", "[3,4]"}, "[0,2,4]"},
    {"matmul", {"[1,1,1,1,1,1,2,3]", "[3,4]"}, "[1,1,1,1,1,1,2,4]"},
    {"matmul", {"t[6,2,3]", "t[1,3,4]"}, "[6,2,4]"},
    {"matmul", {"[2,3]", "[4,5]"}, "matmul: [2,3] x [4,5]: inner dims 3 != 4"},
    {"matmul", {"[3]", "[4]"}, "matmul: [3] x [4]: inner dims 3 != 4"},
    {"matmul", {"[2,3]", "[4]"}, "matmul: [2,3] x [4]: inner dims 3 != 4"},
    {"matmul", {"[2,3,4]", "[5,4,6]"}, "matmul: [2,3,4] x [5,4,6]: batch dim -3 2 != 5"},
    {"matmul", {"[2,7,3,4]", "[3,7,4,6]"}, "matmul: [2,7,3,4] x [3,7,4,6]: batch dim -4 2 != 3"},
    {"matmul", {"[]", "[3]"}, "matmul: [] x [3]: operands need rank >= 1"},
    {"matmul", {"t[3]", "t[]"}, "matmul: [3] x []: operands need rank >= 1"},
    {"matmul", {"[2,3]"}, "matmul: takes 2 inputs, got 1"},
    {"matmul", {"[2,3]", "[3,4]", "[4]"}, "matmul: takes 2 inputs, got 3"},
    {"matmul", {"[2,3]", "i3"}, "matmul: input 1: expected a tensor or a shape, got int"},
    {"matmul", {"[-2,3]", "[3,4]"}, "matmul: input 0: dim 0 is negative (-2)"},
};

static void run_case(const shape_case *c) {
  const dvm_shapefn_def *def = dvm_shapefn_find(c->fn);
  CHECK(def != NULL);
  if (!def) return;
  dvm_value in[4], out = {0};
  dvm_tensor *keep[4] = {0};
  int nin = 0;
  while (nin < 4 && c->in[nin]) {
    in[nin] = input(c->in[nin], &keep[nin]);
    nin++;
  }
  dvm_status *st = def->fn(in, nin, &out, 1);
  char buf[256];
  const char *got = st ? dvm_status_message(st) : show(&out, buf, sizeof buf);
  harness_checks++;
  if (strcmp(got, c->want) != 0 || (st && dvm_status_code(st) != DVM_INVALID_ARGUMENT)) {
    harness_failures++;
    fprintf(stderr, "%s(%s, %s, ...): want \"%s\", got %s \"%s\"\n", c->fn, c->in[0],
            c->in[1] ? c->in[1] : "-", c->want, dvm_code_name(dvm_status_code(st)), got);
  }
  dvm_status_free(st);
  for (int i = 0; i < nin; i++) dvm_tensor_release(keep[i]);
}

static void test_counts(void) {
  dvm_value in[2] = {input("[2]", NULL), input("[2]", NULL)}, out[2];
  const dvm_shapefn_def *b = dvm_shapefn_find("broadcast"), *m = dvm_shapefn_find("matmul");
  CHECK_ERR(b->fn(in, 2, out, 0), DVM_INVALID_ARGUMENT, "broadcast: gives 1 output, asked for 0");
  CHECK_ERR(b->fn(in, 2, out, 2), DVM_INVALID_ARGUMENT, "broadcast: gives 1 output, asked for 2");
  CHECK_ERR(m->fn(in, 2, out, 2), DVM_INVALID_ARGUMENT, "matmul: gives 1 output, asked for 2");
  CHECK_ERR(b->fn(in, 0, out, 1), DVM_INVALID_ARGUMENT, "broadcast: takes 2 or more inputs, got 0");
  in[1] = dvm_value_tensor(NULL);
  CHECK_ERR(b->fn(in, 2, out, 1), DVM_INVALID_ARGUMENT, "broadcast: input 1 is a null tensor");
  CHECK(dvm_shapefn_find("no such function") == NULL);
  CHECK(dvm_shapefn_find("") == NULL);
}

/* Any values at all: a shape result or an invalid-argument error, never a
 * crash or another code (run under the sanitizers). */
static void test_random_values(void) {
  uint64_t s = 88172645463325252ull;
  for (int iter = 0; iter < 20000; iter++) {
    dvm_value in[3];
    for (int i = 0; i < 3; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      memset(&in[i], 0, sizeof in[i]);
      in[i].kind = (uint8_t)(s % 4 == 0 ? s >> 8 : DVM_VAL_SHAPE); /* mostly shapes */
      in[i].rank = (uint8_t)(s >> 16) % (s % 7 == 0 ? 256 : 5);
      for (int d = 0; d < DVM_MAX_RANK; d++) /* 0..3, and now and then -1 */
        in[i].u.dims[d] = (int64_t)((s >> (20 + 4 * d)) % 4) - (s % 11 == 0);
      if (in[i].kind == DVM_VAL_TENSOR) in[i].kind = DVM_VAL_NONE; /* no tensor behind it */
    }
    const char *fn = iter % 2 ? "matmul" : "broadcast";
    int nin = 2 + (iter % 3 == 0 && iter % 2 == 0);
    dvm_value out = {0};
    dvm_status *st = dvm_shapefn_find(fn)->fn(in, nin, &out, 1);
    harness_checks++;
    if (st ? dvm_status_code(st) != DVM_INVALID_ARGUMENT
           : out.kind != DVM_VAL_SHAPE || out.rank > DVM_MAX_RANK) {
      harness_failures++;
      fprintf(stderr, "random %s: %s\n", fn, dvm_status_message(st));
    }
    dvm_status_free(st);
  }
}

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  test_counts();
  test_random_values();
  return harness_finish("shapefuncs");
}
