/* Shape functions: generate (see families.def). Not written yet. */
#include "kernel.h"

const dvm_shapefn_def dvm_shapefn_generate_table[] = {
    {NULL, NULL},
};
