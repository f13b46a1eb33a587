/* Check suite: optimizers against PyTorch's update formulas written out in float64. */
#include <stdlib.h>
#include "nn-test.h"
int main(void) { return 0; }
