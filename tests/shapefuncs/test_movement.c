/* Shape functions of the movement and generate families: results and exact
 * error messages, found through the registry as the VM finds them, and
 * random inputs of every kind that must give a shape or an
 * invalid-argument error, never a crash (run under the sanitizers). */
#include <stdlib.h>

#include "harness.h"
#include "kernel.h"
#include "object.h"
#include "input.h"
#include "shapefuncs/registry.h"

#define MAX_IN 6
#define MAX_OUT 4

typedef struct shape_case {
  const char *fn;
  const char *in[MAX_IN];
  const char *want; /* the output shapes, space-separated, or the whole error message */
  int nout;         /* 0 means 1 */
} shape_case;

static const shape_case cases[] = {
    /* reshape */
    {"reshape", {"t[2,3,4]", "l[4,-1]"}, "[4,6]"},
    {"reshape", {"t[2,3,4]", "l[0,-1]"}, "[2,12]"},
    {"reshape", {"t[2,3,4]", "l[-1]"}, "[24]"},
    {"reshape", {"t[2,3,4]", "l[0,0,0,1]"}, "[2,3,4,1]"},
    {"reshape", {"t[2,3,4]", "w[3,-1,2]"}, "[3,4,2]"},
    {"reshape", {"[2,3,4]", "[6,4]"}, "[6,4]"},
    {"reshape", {"[0,3]", "l[3,0]", "i1"}, "[3,0]"},
    {"reshape", {"[0,3]", "l[-1,3]"}, "[0,3]"},
    {"reshape", {"[]", "l[1,1]"}, "[1,1]"},
    {"reshape", {"[1,1]", "l[]"}, "[]"},
    {"reshape", {"[2,3]", "l[4,-1]"}, "reshape: cannot reshape [2,3] (6 elements) to [4,-1]"},
    {"reshape", {"[2,3]", "l[5]"}, "reshape: cannot reshape [2,3] (6 elements) to [5]"},
    {"reshape", {"[2,3]", "l[-1,-1]"}, "reshape: target [-1,-1] has more than one -1"},
    {"reshape", {"[2,3]", "l[2,-3]"}, "reshape: target [2,-3]: dim 1 is negative (-3)"},
    {"reshape", {"[2,3]", "l[1,2,0]"},
     "reshape: target [1,2,0]: dim 2 is 0, a copy of a dim that [2,3] does not have"},
    {"reshape", {"[0,3]", "l[0,-1]"}, "reshape: cannot reshape [0,3] (0 elements) to [0,-1]"},
    {"reshape", {"[2,3]", "l[0,6]", "i1"}, "reshape: cannot reshape [2,3] (6 elements) to [0,6]"},
    {"reshape", {"[2,3]", "l[1,2,3,4,5,6,7,8,9]"},
     "reshape: input 1 (shape) has 9 values, at most 8"},
    {"reshape", {"[2,3]", "t[6]"},
     "reshape: input 1 (shape): expected an i64 or i32 tensor or a shape, got a f32 tensor"},
    {"reshape", {"[2,3]", "i6"},
     "reshape: input 1 (shape): expected an i64 or i32 tensor or a shape, got int"},
    {"reshape", {"[2,3]", "l[6]", "f1"},
     "reshape: input 2 (allowzero): expected an int, got float"},
    {"reshape", {"[2,3]"}, "reshape: takes 2 to 3 inputs, got 1"},
    {"reshape", {"[4611686018427387904,4]", "l[-1]"},
     "reshape: [4611686018427387904,4]: element count overflows int64"},
    /* squeeze, unsqueeze, flatten */
    {"squeeze", {"[1,3,1,5]", "l[0,2]"}, "[3,5]"},
    {"squeeze", {"[1,3,1,5]", "l[-2]"}, "[1,3,5]"},
    {"squeeze", {"[1,3,1,5]"}, "[3,5]"},
    {"squeeze", {"[1,3,1,5]", "l[]"}, "[3,5]"},
    {"squeeze", {"t[1,1]", "[1]"}, "[1]"},
    {"squeeze", {"[2,3]", "l[1]"}, "squeeze: dim 1 of [2,3] is 3, not 1"},
    {"squeeze", {"[1,1]", "l[2]"}, "squeeze: axis 2 is out of range for rank 2"},
    {"squeeze", {"[1,1]", "l[0,-2]"}, "squeeze: axes [0,-2] name dim 0 twice"},
    {"unsqueeze", {"[3,4,5]", "l[1]"}, "[3,1,4,5]"},
    {"unsqueeze", {"[3,4,5]", "l[2,4,5]"}, "[3,4,1,5,1,1]"},
    {"unsqueeze", {"[]", "l[0,-1]"}, "[1,1]"},
    {"unsqueeze", {"[2,3]", "l[-1,0]"}, "[1,2,3,1]"},
    {"unsqueeze", {"[2,3]", "l[3]"}, "unsqueeze: axis 3 is out of range for rank 3"},
    {"unsqueeze", {"[2,3]", "l[1,1]"}, "unsqueeze: axes [1,1] name dim 1 twice"},
    {"unsqueeze", {"[1,1,1,1,1,1,1]", "l[0,1]"},
     "unsqueeze: [1,1,1,1,1,1,1] with 2 new dims has rank 9, over 8"},
    {"unsqueeze", {"[2]"}, "unsqueeze: takes 2 inputs, got 1"},
    /* with_dim (Loop and Scan outputs) */
    {"with_dim", {"[1,64]", "i0", "i4000"}, "[4000,64]"},
    {"with_dim", {"t[2,1,3]", "i1", "i0"}, "[2,0,3]"},
    {"with_dim", {"[5,7]", "i-1", "i2"}, "[5,2]"},
    {"with_dim", {"[5,7]", "i2", "i2"}, "with_dim: axis 2 is out of range for rank 2"},
    {"with_dim", {"[]", "i0", "i2"}, "with_dim: axis 0 is out of range for rank 0"},
    {"with_dim", {"[5,7]", "i0", "i-1"}, "with_dim: dim -1 is negative"},
    {"with_dim", {"[5,7]", "i0", "f1"}, "with_dim: input 2 (n): expected an int, got float"},
    {"with_dim", {"[5,7]", "i0"}, "with_dim: takes 3 inputs, got 2"},
    {"flatten", {"[2,3,4,5]"}, "[2,60]"},
    {"flatten", {"[2,3,4,5]", "i0"}, "[1,120]"},
    {"flatten", {"[2,3,4,5]", "i4"}, "[120,1]"},
    {"flatten", {"[2,3,4,5]", "i-1"}, "[24,5]"},
    {"flatten", {"[]", "i0"}, "[1,1]"},
    {"flatten", {"[0,3]", "i1"}, "[0,3]"},
    {"flatten", {"[2,3]", "i3"}, "flatten: axis 3 is out of range for [2,3] (-2..2)"},
    {"flatten", {"[2,3]", "i-3"}, "flatten: axis -3 is out of range for [2,3] (-2..2)"},
    /* transpose */
    {"transpose", {"[2,3,4]", "[1,2,0]"}, "[3,4,2]"},
    {"transpose", {"t[2,3,4]"}, "[4,3,2]"},
    {"transpose", {"[7]", "l[0]"}, "[7]"},
    {"transpose", {"[]"}, "[]"},
    {"transpose", {"[2,3]", "[0,0]"},
     "transpose: perm [0,0] is not a permutation of the 2 dims of [2,3]"},
    {"transpose", {"[2,3,4]", "[1,0]"},
     "transpose: perm [1,0] is not a permutation of the 3 dims of [2,3,4]"},
    {"transpose", {"[2,3]", "l[1,-1]"},
     "transpose: perm [1,-1] is not a permutation of the 2 dims of [2,3]"},
    {"transpose", {"[2,3]", "[1,2]"},
     "transpose: perm [1,2] is not a permutation of the 2 dims of [2,3]"},
    /* gather, gather_elements */
    {"gather", {"[5,4,3]", "[2,7]", "i1"}, "[5,2,7,3]"},
    {"gather", {"[5,4,3]", "[]", "i-1"}, "[5,4]"},
    {"gather", {"[5,4]", "[3]"}, "[3,4]"},
    {"gather", {"[5]", "[0]", "i0"}, "[0]"},
    {"gather", {"[5,4]", "[3]", "i2"}, "gather: axis 2 is out of range for rank 2"},
    {"gather", {"[]", "[3]", "i0"}, "gather: axis 0 is out of range for rank 0"},
    {"gather", {"[2,2,2,2,2]", "[1,1,1,1]", "i0"},
     "[1,1,1,1,2,2,2,2]"},
    {"gather", {"[2,2,2,2,2]", "[1,1,1,1,1]", "i0"},
     "gather: data [2,2,2,2,2] and indices [1,1,1,1,1] give rank 9, over 8"},
    {"gather", {"[5,4]", "[3]", "f0"}, "gather: input 2 (axis): expected an int, got float"},
    {"gather_elements", {"[3,3]", "[2,3]", "i0"}, "[2,3]"},
    {"gather_elements", {"[4,5,6]", "[2,9,3]", "i-2"}, "[2,9,3]"},
    {"gather_elements", {"[2,3]", "[2]", "i1"},
     "gather_elements: data [2,3] and indices [2] differ in rank"},
    {"gather_elements", {"[2,3]", "[3,2]", "i1"},
     "gather_elements: indices [3,2] dim 0 is 3, over data [2,3] dim 0 (2)"},
    /* slice */
    {"slice", {"[20,10,5]", "l[0,0]", "l[3,10]", "l[0,1]", "l[1,1]"}, "[3,10,5]"},
    {"slice", {"[20,10,5]", "l[0,0,3]", "l[20,10,4]"}, "[20,10,1]"},
    {"slice", {"[20,10,5]", "l[1]", "l[1000]", "l[1]"}, "[20,9,5]"},
    {"slice", {"[20,10,5]", "l[20,10,4]", "l[0,0,1]", "l[0,1,2]", "l[-1,-3,-2]"}, "[19,3,2]"},
    {"slice", {"[20,10,5]", "l[-1]", "l[-9223372036854775807]", "l[0]", "l[-1]"}, "[20,10,5]"},
    {"slice", {"[20,10,5]", "l[0]", "l[5]", "l[-1]", "l[9223372036854775807]"}, "[20,10,1]"},
    {"slice", {"[20,10,5]", "l[3]", "l[1]", "l[0]"}, "[0,10,5]"},
    {"slice", {"[3]", "l[-8]", "l[-6]", "l[0]", "l[-1]"}, "[1]"},
    {"slice", {"[0,3]", "l[0]", "l[1]", "l[0]", "l[-1]"}, "[0,3]"},
    {"slice", {"[4,5]", "w[1]", "w[3]", "w[-1]", "w[2]"}, "[4,1]"},
    {"slice", {"[4,5]", "l[0]", "l[3]", "l[1]", "l[0]"}, "slice: step 0 for axis 1"},
    {"slice", {"[4,5]", "l[0,1]", "l[3]"}, "slice: 2 starts but 1 ends"},
    {"slice", {"[4,5]", "l[0]", "l[3]", "l[0]", "l[1,1]"},
     "slice: 1 starts but 2 steps"},
    {"slice", {"[4,5]", "l[0,0]", "l[3,3]", "l[1,-1]"}, "slice: axes [1,-1] name dim 1 twice"},
    {"slice", {"[4,5]", "l[0]", "l[3]", "l[2]"}, "slice: axis 2 is out of range for rank 2"},
    {"slice", {"[4,5]", "t[1]", "l[3]"},
     "slice: input 1 (starts): expected an i64 or i32 tensor or a shape, got a f32 tensor"},
    {"slice", {"[4,5]", "l[0]"}, "slice: takes 3 to 5 inputs, got 2"},
    /* concat, split */
    {"concat", {"[2,3]", "[4,3]", "t[1,3]", "i0"}, "[7,3]"},
    {"concat", {"[2,3]", "[2,0]", "i-1"}, "[2,3]"},
    {"concat", {"[7,13]", "i1"}, "[7,13]"},
    {"concat", {"[3,3]", "[2,4]", "i1"}, "concat: input 1 [2,4] vs input 0 [3,3]: dim 0 2 != 3"},
    {"concat", {"[3,3]", "[3]", "i0"}, "concat: input 1 [3] vs input 0 [3,3]: rank 1 != 2"},
    {"concat", {"[]", "[]", "i0"}, "concat: axis 0 is out of range for rank 0"},
    {"concat", {"[2,3]", "[2,3]"}, "concat: input 1 (axis): expected an int, got shape"},
    {"concat", {"[9223372036854775807]", "[1]", "i0"}, "concat: dim 0 of the output overflows"},
    {"split", {"[2,6]", "l[1,2,3]", "i1"}, "[2,1] [2,2] [2,3]", 3},
    {"split", {"[2,6]", "i-1"}, "[2,3] [2,3]", 2},
    {"split", {"[2,8]", "i1", "i3"}, "[2,3] [2,3] [2,2]", 3},
    {"split", {"[7]"}, "[2] [2] [2] [1]", 4},
    {"split", {"[2,4]", "i1"}, "[2,1] [2,1] [2,1] [2,1]", 4},
    {"split", {"[5]", "i0"}, "[2] [2] [1] [0]", 4},
    {"split", {"[0]", "l[0,0,0]"}, "[0] [0] [0]", 3},
    {"split", {"t[5,2]", "[1,4]"}, "[1,2] [4,2]", 2},
    {"split", {"[2,6]", "l[2,3]", "i1"}, "split: the sizes do not add up to dim 1 of [2,6] (6)", 2},
    {"split", {"[2,6]", "l[-1,7]", "i1"}, "split: size 0 is negative (-1)", 2},
    {"split", {"[2,6]", "l[3,3]", "i1"}, "split: 2 sizes for 3 outputs", 3},
    {"split", {"[2,6]", "l[3,3,0]", "i1"}, "split: input 1 (split) has 3 values, at most 2", 2},
    {"split", {"[2,6]", "i1", "i3"}, "split: num_outputs is 3, 2 outputs asked for", 2},
    {"split", {"[2,6]", "i2"}, "split: axis 2 is out of range for rank 2", 2},
    {"split", {"[2,6]", "i1", "i2", "i0"}, "split: takes 1 to 3 inputs, got 4", 2},
    /* expand, tile */
    {"expand", {"[3,1]", "l[2,1,6]"}, "[2,3,6]"},
    {"expand", {"[]", "l[2,3]"}, "[2,3]"},
    {"expand", {"[4]", "l[1]"}, "[4]"},
    {"expand", {"[3,1]", "l[0,1,4]"}, "[0,3,4]"},
    {"expand", {"[2,3]", "l[4]"}, "expand: cannot expand [2,3] to [4]: dim -1 3 != 4"},
    {"expand", {"[2,3]", "l[5,3]"}, "expand: cannot expand [2,3] to [5,3]: dim -2 2 != 5"},
    {"expand", {"[2,3]", "l[2,-1]"}, "expand: shape [2,-1] has a negative dim"},
    {"tile", {"[2,3,4,5]", "l[7,6,4,2]"}, "[14,18,16,10]"},
    {"tile", {"[2,3]", "l[0,2]"}, "[0,6]"},
    {"tile", {"[]", "l[]"}, "[]"},
    {"tile", {"[2,3]", "l[2]"}, "tile: repeats [2] do not match the rank of [2,3]"},
    {"tile", {"[2,3]", "l[2,-1]"}, "tile: repeats [2,-1]: -1 for dim 1 is negative"},
    {"tile", {"[2,3]", "l[1,4611686018427387904]"},
     "tile: dim 1 of [2,3] times 4611686018427387904 overflows"},
    /* pad */
    {"pad", {"[1,3,4,5]", "l[0,0,1,2,0,0,3,4]"}, "[1,3,8,11]"},
    {"pad", {"[1,3,4,5]", "l[0,0,1,2,0,0,3,4]", "i1"}, "[1,3,8,11]"},
    {"pad", {"[1,3,4,5]", "l[2,3,1,1]", "x[0]", "l[-1,1]"}, "[1,7,4,8]"},
    {"pad", {"[3,4]", "l[-1,2,1,-3]"}, "[3,3]"},
    {"pad", {"[7]", "l[20,13]", "i1"}, "[40]"},
    {"pad", {"[0,3]", "l[1,0,1,0]"}, "[2,3]"},
    {"pad", {"[2,3]", "l[1,1,1]"}, "pad: pads has 3 values, want 2 per axis for 2 axes"},
    {"pad", {"[2,3]", "l[-3,0,0,0]"}, "pad: pads -3 and 0 crop more than dim 0 of [2,3]"},
    {"pad", {"[0,3]", "l[1,0,0,0]", "i2"}, "pad: edge padding of dim 0 of [0,3] needs data in it"},
    {"pad", {"[2,3]", "l[-2,0,1,0]", "i1"},
     "pad: reflect padding of dim 0 of [2,3] needs data in it"},
    {"pad", {"[2,3]", "l[1,1,1,1]", "i4"},
     "pad: mode 4 is not 0 (constant), 1 (reflect), 2 (edge) or 3 (wrap)"},
    {"pad", {"[2,3]", "l[1,1,1,1]", "x[1,2]"}, "pad: input 2 (value) has 2 elements, want 1"},
    {"pad", {"[2,3]", "l[1,1]", "x[0]", "l[1,1]"}, "pad: axes [1,1] name dim 1 twice"},
    {"pad", {"[2,3]", "l[1,1,1,1]", "[1]", "i0"},
     "pad: input 2 (value): expected a tensor, got shape"},
    {"pad", {"[2,3]", "l[1,1,1,1]", "x[0]", "l[0,1]", "x[0]"},
     "pad: takes data, pads, value and axes, got 5 inputs before the mode"},
    {"pad", {"[2]", "l[9223372036854775807,1]"},
     "pad: dim 0 of [2] padded by 9223372036854775807 and 1 overflows"},
    /* trilu */
    {"trilu", {"[4,5]"}, "[4,5]"},
    {"trilu", {"t[2,3,3]", "s-1", "i0"}, "[2,3,3]"},
    {"trilu", {"[3,0,5]", "l[2]"}, "[3,0,5]"},
    {"trilu", {"[3]", "i1"}, "trilu: input [3] has rank 1, needs 2 or more"},
    {"trilu", {"[3,3]", "i2"}, "trilu: upper is 2, not 0 or 1"},
    {"trilu", {"[3,3]", "l[]"}, "trilu: input 1 (k) has no value"},
    {"trilu", {"[3,3]", "l[1,2]"}, "trilu: input 1 (k) has 2 values, at most 1"},
    {"trilu", {"[3,3]", "s0", "s1"}, "trilu: takes x and k, got 3 inputs before upper"},
    /* nonzero, range, constant_of_shape */
    {"nonzero", {"x[0,1.5,0,-0,2,nan]"}, "[1,3]"},
    {"nonzero", {"x[]"}, "[1,0]"},
    {"nonzero", {"t[2,3]"}, "[2,0]"},
    {"nonzero", {"s7"}, "[0,1]"},
    {"nonzero", {"[2,3]"}, "nonzero: input 0: expected a tensor, got shape"},
    {"range", {"s0", "s10", "s3"}, "[4]"},
    {"range", {"s10", "s4", "s-3"}, "[2]"},
    {"range", {"s5", "s1", "s1"}, "[0]"},
    {"range", {"s1", "s5", "s-1"}, "[0]"},
    {"range", {"F0.5", "F3.7", "F0.4"}, "[8]"},
    {"range", {"F1", "F-2", "F-0.25"}, "[12]"},
    {"range", {"s-9223372036854775807", "s9223372036854775807", "s1"},
     "range: start -9.22337e+18, limit 9.22337e+18 and delta 1 give too many elements"},
    {"range", {"s0", "s1", "s0"}, "range: delta is 0"},
    {"range", {"F0", "F1", "F0"}, "range: delta is 0"},
    {"range", {"F0", "Finf", "F1"}, "range: start 0, limit inf and delta 1 are not all finite"},
    {"range", {"s0", "F1", "s1"}, "range: input 1 (limit) is f32, start is i64"},
    {"range", {"s0", "l[1,2]", "s1"}, "range: input 1 (limit) has shape [2], want one element"},
    {"range", {"s0", "s1", "i1"}, "range: input 2 (delta): expected a tensor, got int"},
    {"range", {"t[]", "t[]", "t[]"}, "range: delta is 0"},
    {"constant_of_shape", {"l[4,3,2]"}, "[4,3,2]"},
    {"constant_of_shape", {"l[]", "f1"}, "[]"},
    {"constant_of_shape", {"[2,0]", "i1"}, "[2,0]"},
    {"constant_of_shape", {"l[2,-3]"}, "constant_of_shape: shape [2,-3] has a negative dim"},
    {"constant_of_shape", {"l[2]", "[1]"},
     "constant_of_shape: input 1 (value): expected an int or a float, got shape"},
};

static void run_case(const shape_case *c) {
  const dvm_shapefn_def *def = dvm_shapefn_find(c->fn);
  CHECK(def != NULL);
  if (!def) return;
  dvm_value in[MAX_IN], out[MAX_OUT] = {{0}};
  dvm_tensor *keep[MAX_IN] = {0};
  int nin = 0, nout = c->nout ? c->nout : 1;
  while (nin < MAX_IN && c->in[nin]) {
    in[nin] = input(c->in[nin], &keep[nin]);
    nin++;
  }
  dvm_status *st = def->fn(in, nin, out, nout);
  char got[512] = "";
  if (st) {
    snprintf(got, sizeof got, "%s", dvm_status_message(st));
  } else {
    for (int i = 0; i < nout; i++) {
      size_t n = strlen(got);
      if (i) got[n++] = ' ';
      if (out[i].kind == DVM_VAL_SHAPE)
        dvm_shape_format(got + n, sizeof got - n, DVM_DTYPE_COUNT, out[i].rank, out[i].u.dims);
      else
        snprintf(got + n, sizeof got - n, "%s", dvm_kind_name((dvm_kind)out[i].kind));
    }
  }
  harness_checks++;
  if (strcmp(got, c->want) != 0 || (st && dvm_status_code(st) != DVM_INVALID_ARGUMENT &&
                                    dvm_status_code(st) != DVM_OUT_OF_RANGE)) {
    harness_failures++;
    fprintf(stderr, "%s(%s, %s, ...): want \"%s\", got %s \"%s\"\n", c->fn, c->in[0],
            c->in[1] ? c->in[1] : "-", c->want, dvm_code_name(dvm_status_code(st)), got);
  }
  dvm_status_free(st);
  for (int i = 0; i < nin; i++) dvm_tensor_release(keep[i]);
}

static void test_counts(void) {
  dvm_value in[2] = {input("[2,6]", NULL), dvm_value_int(1)}, out[2];
  CHECK_ERR(dvm_shapefn_find("transpose")->fn(in, 1, out, 2), DVM_INVALID_ARGUMENT,
            "transpose: gives 1 output, asked for 2");
  CHECK_ERR(dvm_shapefn_find("split")->fn(in, 2, out, 0), DVM_INVALID_ARGUMENT,
            "split: gives 1 or more outputs, asked for 0");
  CHECK_ERR(dvm_shapefn_find("concat")->fn(in, 0, out, 1), DVM_INVALID_ARGUMENT,
            "concat: takes 2 or more inputs, got 0");
  in[0] = dvm_value_tensor(NULL);
  CHECK_ERR(dvm_shapefn_find("tile")->fn(in, 2, out, 1), DVM_INVALID_ARGUMENT,
            "tile: input 0 is a null tensor");
  CHECK_ERR(dvm_shapefn_find("nonzero")->fn(in, 1, out, 1), DVM_INVALID_ARGUMENT,
            "nonzero: input 0 is a null tensor");
}

/* A split with more outputs than fit on the stack. */
static void test_split_many(void) {
  dvm_value in[2] = {input("[2,100]", NULL), dvm_value_int(1)}, out[50];
  CHECK_OK(dvm_shapefn_find("split")->fn(in, 2, out, 50));
  CHECK(out[0].kind == DVM_VAL_SHAPE && out[49].u.dims[1] == 2 && out[49].u.dims[0] == 2);
}

static const char *const fns[] = {
    "reshape", "squeeze", "unsqueeze", "with_dim", "flatten", "transpose", "gather", "gather_elements",
    "slice", "concat", "split", "expand", "tile", "pad", "trilu", "nonzero", "range",
    "constant_of_shape", "gather_nd", "onehot", "compress", "unique", "nms",
};

/* Any values at all: shapes, an int, a none, garbage kinds, and small
 * tensors of several dtypes holding random numbers. */
static void test_random_values(void) {
  uint64_t s = 88172645463325252ull;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
  dvm_tensor *held[MAX_IN] = {0}; /* the tensor of each input, if it is one */
  static const dvm_dtype dts[] = {DVM_I64, DVM_I32, DVM_F32, DVM_I64, DVM_BOOL, DVM_F16,
                                  DVM_I64, DVM_F64};
  for (int iter = 0; iter < 40000; iter++) {
    dvm_value in[MAX_IN], out[MAX_OUT];
    int nin = (int)(NEXT() % (MAX_IN + 1)), nout = 1 + (int)(NEXT() % 3 == 0) * (int)(NEXT() % 4);
    for (int i = 0; i < MAX_IN; i++) {
      uint64_t r = NEXT();
      memset(&in[i], 0, sizeof in[i]);
      dvm_tensor_release(held[i]);
      held[i] = NULL;
      switch (r % 6) {
      case 0: in[i] = dvm_value_int((int64_t)(r >> 8) % 7 - 3); break;
      case 1: in[i].kind = (uint8_t)(r >> 8) % 10; /* garbage kinds, no tensor behind them */
        if (in[i].kind == DVM_VAL_TENSOR) in[i].kind = DVM_VAL_NONE;
        break;
      case 2:
      case 3: { /* a small tensor of random numbers */
        dvm_dtype dt = dts[(r >> 8) % 8];
        int rank = (int)((r >> 12) % 3);
        int64_t dims[2] = {(int64_t)(r >> 16) % 5, (int64_t)(r >> 20) % 3};
        CHECK_OK(dvm_tensor_create(dt, rank, dims, &held[i]));
        unsigned char *p = dvm_tensor_ptr(held[i]);
        for (size_t b = 0; b < dvm_tensor_nbytes(held[i]); b++) /* small ints, mostly */
          p[b] = b % dvm_dtype_size(dt) ? 0 : (unsigned char)(NEXT() % 7);
        in[i] = dvm_value_tensor(held[i]);
        break;
      }
      default: /* shapes: dims 0..3, now and then -1 or a rank over 8 */
        in[i].kind = DVM_VAL_SHAPE;
        in[i].rank = (uint8_t)((r >> 8) % (r % 7 == 0 ? 256 : 5));
        for (int d = 0; d < DVM_MAX_RANK; d++)
          in[i].u.dims[d] = (int64_t)((r >> (16 + 4 * d)) % 4) - (r % 11 == 0);
      }
    }
    const char *fn = fns[iter % (sizeof fns / sizeof fns[0])];
    for (int i = 0; i < MAX_OUT; i++) out[i].kind = DVM_VAL_NONE;
    dvm_status *st = dvm_shapefn_find(fn)->fn(in, nin, out, nout);
    int ok = 1;
    if (st) {
      ok = dvm_status_code(st) == DVM_INVALID_ARGUMENT || dvm_status_code(st) == DVM_OUT_OF_RANGE;
    } else {
      for (int i = 0; i < nout; i++) {
        ok &= out[i].kind == DVM_VAL_SHAPE && out[i].rank <= DVM_MAX_RANK;
        for (int d = 0; ok && d < out[i].rank; d++) ok &= out[i].u.dims[d] >= 0;
      }
    }
    harness_checks++;
    if (!ok) {
      harness_failures++;
      fprintf(stderr, "random %s (%d inputs, %d outputs): %s\n", fn, nin, nout,
              st ? dvm_status_message(st) : "a bad shape");
    }
    dvm_status_free(st);
  }
  for (int i = 0; i < MAX_IN; i++) dvm_tensor_release(held[i]);
#undef NEXT
}

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  test_counts();
  test_split_many();
  test_random_values();
  return harness_finish("shapefuncs_movement");
}
