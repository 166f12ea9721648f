/* What conv.c's oneDNN convolutions do for other kernel files: the integer
 * convolution of ConvInteger and QLinearConv (quant.c). */
#ifndef DVM_OPS_CPU_CONV_H
#define DVM_OPS_CPU_CONV_H

#include "kernel.h"
#include "shapefuncs/window.h"

/* y (i32, dims ydims) = the convolution of x (u8 or i8, less *xzp where
 * xzp is not NULL; pads count as the zero point, adding nothing) with w8
 * (s8, dims wdims), the geometry of win and group (dvm_conv_setup's,
 * checked), on `threads` of the pool. forms: a constant W's kept layouts
 * (dvm_cpu_conv_forms_new) or NULL. oneDNN's integer kernels sum exactly
 * only where dvm_isa_int8_dot (isa.h) says so. */
dvm_status *dvm_cpu_conv_s8(const char *op, const dvm_tensor *x, const int32_t *xzp, const int64_t *wdims,
                            const int8_t *w8, const dvm_window *win, int64_t group, int32_t *y, const int64_t *ydims,
                            int threads, void *forms);

/* A holder for a constant W's layouts (NULL: out of memory), and its free. */
void *dvm_cpu_conv_forms_new(void);
void dvm_cpu_conv_forms_free(void *forms);

#endif
