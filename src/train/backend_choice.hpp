// Which backend a rank computes on, and in which precision (config keys device and
// precision).
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace hpctrain {

// The backend a rank of `config` computes on: CUDA (device cuda, or auto with a GPU
// visible) on GPU local_rank modulo the visible GPUs, else the CPU with `threads`; with
// the activation type of config.precision.
std::unique_ptr<Backend> make_backend(const Config& config, int threads, int local_rank);

}  // namespace hpctrain
