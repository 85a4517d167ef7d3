// Which GEMM kernels OpenBLAS runs. OpenBLAS picks them from the CPU when the library
// loads, unless OPENBLAS_CORETYPE names them; `hpctrain --version` reports the choice,
// since it moves CPU throughput by tens of percent (AVX2 against AVX-512 kernels).
#pragma once

#include <string>

namespace hpctrain {

// "OpenBLAS 0.3.21 ... (kernels: Haswell)": the library's configuration and its kernels.
std::string blas_description();

}  // namespace hpctrain
