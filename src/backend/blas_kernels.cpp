// OpenBLAS's self-description.
#include "backend/blas_kernels.hpp"

#include <cblas.h>

namespace hpctrain {

std::string blas_description() {
  return std::string(openblas_get_config()) + " (kernels: " + openblas_get_corename() + ")";
}

}  // namespace hpctrain
