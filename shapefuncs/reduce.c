/* Shape functions: reduce (see families.def). Not written yet. */
#include "kernel.h"

const dvm_shapefn_def dvm_shapefn_reduce_table[] = {
    {NULL, NULL},
};
