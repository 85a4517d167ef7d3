// Backend's defaults for the optional operations: fused ones run their parts one by one;
// a backend without device collectives, the channels-last layout or graphs says so.
#include "backend/backend.hpp"

#include <string>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace hpctrain {
namespace {

[[noreturn]] void no_collectives(const Backend& b) {
  throw Error(std::string("the ") + b.name() + " backend has no device collectives");
}

[[noreturn]] void not_channels_last(const Backend& b) {
  throw Error(std::string("the ") + b.name() + " backend does not store activations channels-last");
}

[[noreturn]] void no_graphs(const Backend& b) {
  throw Error(std::string("the ") + b.name() + " backend records no step graphs");
}

}  // namespace

void Backend::begin_capture() { no_graphs(*this); }
int Backend::end_capture() { no_graphs(*this); }
void Backend::replay(int /*id*/) { no_graphs(*this); }

void Backend::transpose(const void* /*src*/, void* /*dst*/, int /*n*/, int /*a*/, int /*b*/) {
  not_channels_last(*this);
}
void Backend::convert_filter(const float* /*kcrs*/, void* /*krsc*/, int /*k*/, int /*c*/,
                             int /*rs*/) {
  not_channels_last(*this);
}

void Backend::batchnorm_add_relu_forward(bool training, const void* x, const void* z,
                                         const float* gamma, const float* beta, void* y, int n,
                                         int c, int hw, float eps, float momentum,
                                         float* running_mean, float* running_var, float* save_mean,
                                         float* save_invstd) {
  if (training) {
    batchnorm_forward_training(x, gamma, beta, y, n, c, hw, eps, momentum, running_mean,
                               running_var, save_mean, save_invstd);
  } else {
    batchnorm_forward_inference(x, gamma, beta, y, n, c, hw, eps, running_mean, running_var);
  }
  const size_t count = static_cast<size_t>(n) * c * hw;
  if (z != nullptr) add(y, z, y, count);
  relu_forward(y, y, count);
}

void Backend::batchnorm_add_relu_backward(const void* x, const void* y, const void* dy, void* dz,
                                          const float* gamma, void* dx, float* dgamma, float* dbeta,
                                          int n, int c, int hw, float eps, const float* save_mean,
                                          const float* save_invstd) {
  relu_backward(y, dy, dz, static_cast<size_t>(n) * c * hw);
  batchnorm_backward(x, dz, gamma, dx, dgamma, dbeta, n, c, hw, eps, save_mean, save_invstd);
}

std::vector<std::byte> Backend::new_collective_id() { no_collectives(*this); }
void Backend::join_collectives(const std::vector<std::byte>& /*id*/, int /*rank*/, int /*size*/) {
  no_collectives(*this);
}
void Backend::allreduce_sum(float* /*x*/, size_t /*n*/) { no_collectives(*this); }
void Backend::broadcast(float* /*x*/, size_t /*n*/, int /*root*/) { no_collectives(*this); }

void Backend::phase_mark(int i) {
  const double t = now_seconds();
  const int prev = i == 0 ? kPhaseMarks - 1 : i - 1;
  if (i > 0 || phase_started_) phase_sums_[prev] += t - phase_stamp_[prev];
  phase_stamp_[i] = t;
  phase_started_ = true;
}

PhaseSeconds Backend::take_phases() {
  const PhaseSeconds sums = phase_sums_;
  phase_sums_ = {};
  phase_started_ = false;
  return sums;
}

}  // namespace hpctrain
