// The scalar kernels: the reference every vector kernel must match bit for bit.
#define KERNEL_NS scalar_isa
#define KERNEL_WIDTH 0
#define KERNEL_NAME "scalar"
#include "coll/kernels_impl.h"

namespace trainit::coll {

const Kernels* kernels_scalar() {
  return &scalar_isa::kTable;
}

}  // namespace trainit::coll
