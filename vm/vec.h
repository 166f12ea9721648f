/* The growable array: items, count, capacity. Pushing doubles the capacity
 * when full and runs `on_fail` (a statement, such as `oom = 1`) instead of
 * pushing when it cannot grow. */
#ifndef DVM_VEC_H
#define DVM_VEC_H

#include <stdlib.h>

#define DVM_VEC(T) struct { T *v; size_t n, cap; }
#define DVM_VEC_PUSH(vec, item, on_fail)                                     \
  do {                                                                       \
    if ((vec).n == (vec).cap) {                                              \
      size_t c_ = (vec).cap ? (vec).cap * 2 : 16;                            \
      void *p_ = realloc((vec).v, c_ * sizeof *(vec).v);                     \
      if (!p_) { on_fail; break; }                                           \
      (vec).v = p_;                                                          \
      (vec).cap = c_;                                                        \
    }                                                                        \
    (vec).v[(vec).n++] = (item);                                             \
  } while (0)

#endif
