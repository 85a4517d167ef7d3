// Which backend a rank computes on, and in which precision (config keys device, cpu_ranks
// and precision).
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace hpctrain {

// The backend rank `rank` of `config` computes on: the CPU with `threads` when cpu_ranks
// lists it; else CUDA (device cuda, or auto with a GPU visible) on GPU local_rank modulo
// the visible GPUs; else the CPU. With the activation type of config.precision.
std::unique_ptr<Backend> make_backend(const Config& config, int threads, int rank, int local_rank);

// The activation type of `precision`: bfloat16, float16, else float32.
DType activation_type(Precision precision);

}  // namespace hpctrain
