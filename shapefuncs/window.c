/* Shape functions: window (see families.def). Not written yet. */
#include "kernel.h"

const dvm_shapefn_def dvm_shapefn_window_table[] = {
    {NULL, NULL},
};
