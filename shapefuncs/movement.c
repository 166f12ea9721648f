/* Shape functions: movement (see families.def). Not written yet. */
#include "kernel.h"

const dvm_shapefn_def dvm_shapefn_movement_table[] = {
    {NULL, NULL},
};
