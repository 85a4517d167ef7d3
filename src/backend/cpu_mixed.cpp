// The CPU backend's operations on activations, for every activation type: float32
// activations go straight to the float32 code; 16-bit ones are widened into float scratch,
// computed in float32 and rounded back to nearest even, as a GPU computes with float
// accumulators and 16-bit storage.
#include <cstddef>

#include "backend/cpu_backend.hpp"
#include "core/convert.hpp"

namespace hpctrain {

const float* CpuBackend::widen(int slot, const void* p, size_t n) {
  if (f32()) return static_cast<const float*>(p);
  float* f = out(slot, nullptr, n);
  const auto* src = static_cast<const uint16_t*>(p);
  parallel(n, kElementGrain,
           [&](size_t lo, size_t hi) { to_float(act_type_, src + lo, f + lo, hi - lo); });
  return f;
}

float* CpuBackend::out(int slot, void* p, size_t n) {
  if (f32()) return static_cast<float*>(p);
  std::vector<float>& s = scratch_[slot];
  if (s.size() < n) s.resize(n);
  return s.data();
}

void CpuBackend::narrow(int slot, void* p, size_t n) {
  if (f32()) return;
  const float* f = scratch_[slot].data();
  auto* dst = static_cast<uint16_t*>(p);
  parallel(n, kElementGrain,
           [&](size_t lo, size_t hi) { from_float(act_type_, f + lo, dst + lo, hi - lo); });
}

void CpuBackend::convert(const float* src, void* dst, size_t n) {
  auto* d = static_cast<std::byte*>(dst);
  const size_t size = dtype_size(act_type_);
  parallel(n, kElementGrain,
           [&](size_t lo, size_t hi) { from_float(act_type_, src + lo, d + lo * size, hi - lo); });
}

void CpuBackend::decode_input(const void* raw, SampleType type, size_t n, const InputNorm& norm,
                              void* out_act) {
  float* f = out(0, out_act, n);
  decode_samples(raw, type, n, f);
  if (norm.mean != nullptr) normalize_planes(f, n, norm);
  narrow(0, out_act, n);
}

void CpuBackend::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
                      const void* b, float beta, void* c) {
  const size_t mn = static_cast<size_t>(m) * n;
  const float* af = widen(0, a, static_cast<size_t>(m) * k);
  const float* bf = widen(1, b, static_cast<size_t>(k) * n);
  float* cf = beta != 0.0f ? widen_inout(2, c, mn) : out(2, c, mn);
  gemm_f32(trans_a, trans_b, m, n, k, alpha, af, bf, beta, cf);
  narrow(2, c, mn);
}

void CpuBackend::gemm_f32_out(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                              const void* a, const void* b, float beta, float* c) {
  gemm_f32(trans_a, trans_b, m, n, k, alpha, widen(0, a, static_cast<size_t>(m) * k),
           widen(1, b, static_cast<size_t>(k) * n), beta, c);
}

void CpuBackend::add_bias(void* y, const float* bias, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * cols;
  add_bias_f32(widen_inout(0, y, n), bias, rows, cols);
  narrow(0, y, n);
}

void CpuBackend::sum_rows(const void* dy, float* dbias, int rows, int cols) {
  sum_rows_f32(widen(0, dy, static_cast<size_t>(rows) * cols), dbias, rows, cols);
}

void CpuBackend::add_channel_bias(void* y, const float* bias, int n, int c, int hw) {
  const size_t count = static_cast<size_t>(n) * c * hw;
  add_channel_bias_f32(widen_inout(0, y, count), bias, n, c, hw);
  narrow(0, y, count);
}

void CpuBackend::sum_channels(const void* dy, float* dbias, int n, int c, int hw) {
  sum_channels_f32(widen(0, dy, static_cast<size_t>(n) * c * hw), dbias, n, c, hw);
}

void CpuBackend::add(const void* a, const void* b, void* y, size_t n) {
  add_f32(widen(0, a, n), widen(1, b, n), out(2, y, n), n);
  narrow(2, y, n);
}

void CpuBackend::multiply(const void* a, const void* b, void* y, size_t n) {
  multiply_f32(widen(0, a, n), widen(1, b, n), out(2, y, n), n);
  narrow(2, y, n);
}

namespace {
size_t elems(int n, int c, int h, int w) { return static_cast<size_t>(n) * c * h * w; }
size_t input_elems(const Conv2dShape& s) { return elems(s.n, s.c_in, s.h, s.w); }
size_t output_elems(const Conv2dShape& s) { return elems(s.n, s.c_out, s.out_h(), s.out_w()); }
size_t weight_elems(const Conv2dShape& s) { return static_cast<size_t>(s.c_out) * s.patch(); }
size_t input_elems(const Pool2dShape& s) { return elems(s.n, s.c, s.h, s.w); }
size_t output_elems(const Pool2dShape& s) { return elems(s.n, s.c, s.out_h(), s.out_w()); }
}  // namespace

void CpuBackend::conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y,
                                void* workspace) {
  conv2d_forward_f32(s, widen(0, x, input_elems(s)), widen(1, w, weight_elems(s)),
                     out(2, y, output_elems(s)), workspace);
  narrow(2, y, output_elems(s));
}

void CpuBackend::conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx,
                                      void* workspace, bool accumulate) {
  conv2d_backward_data_f32(
      s, widen(0, dy, output_elems(s)), widen(1, w, weight_elems(s)),
      accumulate ? widen_inout(2, dx, input_elems(s)) : out(2, dx, input_elems(s)), workspace,
      accumulate);
  narrow(2, dx, input_elems(s));
}

void CpuBackend::conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy,
                                        float* dw, void* workspace) {
  conv2d_backward_filter_f32(s, widen(0, x, input_elems(s)), widen(1, dy, output_elems(s)), dw,
                             workspace);
}

void CpuBackend::maxpool2d_forward(const Pool2dShape& s, const void* x, void* y) {
  maxpool2d_forward_f32(s, widen(0, x, input_elems(s)), out(1, y, output_elems(s)));
  narrow(1, y, output_elems(s));
}

void CpuBackend::maxpool2d_backward(const Pool2dShape& s, const void* x, const void* /*y*/,
                                    const void* dy, void* dx) {
  maxpool2d_backward_f32(s, widen(0, x, input_elems(s)), widen(1, dy, output_elems(s)),
                         out(2, dx, input_elems(s)));
  narrow(2, dx, input_elems(s));
}

void CpuBackend::avgpool2d_forward(const Pool2dShape& s, const void* x, void* y) {
  avgpool2d_forward_f32(s, widen(0, x, input_elems(s)), out(1, y, output_elems(s)));
  narrow(1, y, output_elems(s));
}

void CpuBackend::avgpool2d_backward(const Pool2dShape& s, const void* dy, void* dx) {
  avgpool2d_backward_f32(s, widen(0, dy, output_elems(s)), out(1, dx, input_elems(s)));
  narrow(1, dx, input_elems(s));
}

void CpuBackend::relu_forward(const void* x, void* y, size_t n) {
  relu_forward_f32(widen(0, x, n), out(1, y, n), n);
  narrow(1, y, n);
}

void CpuBackend::relu_backward(const void* y, const void* dy, void* dx, size_t n) {
  relu_backward_f32(widen(0, y, n), widen(1, dy, n), out(2, dx, n), n);
  narrow(2, dx, n);
}

void CpuBackend::batchnorm_forward_training(const void* x, const float* gamma, const float* beta,
                                            void* y, int n, int c, int hw, float eps,
                                            float momentum, float* running_mean, float* running_var,
                                            float* save_mean, float* save_invstd) {
  const size_t count = static_cast<size_t>(n) * c * hw;
  batchnorm_forward_training_f32(widen(0, x, count), gamma, beta, out(1, y, count), n, c, hw, eps,
                                 momentum, running_mean, running_var, save_mean, save_invstd);
  narrow(1, y, count);
}

void CpuBackend::batchnorm_forward_inference(const void* x, const float* gamma, const float* beta,
                                             void* y, int n, int c, int hw, float eps,
                                             const float* running_mean, const float* running_var) {
  const size_t count = static_cast<size_t>(n) * c * hw;
  batchnorm_forward_inference_f32(widen(0, x, count), gamma, beta, out(1, y, count), n, c, hw, eps,
                                  running_mean, running_var);
  narrow(1, y, count);
}

void CpuBackend::batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                                    float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                                    const float* save_mean, const float* save_invstd) {
  const size_t count = static_cast<size_t>(n) * c * hw;
  float* dxf = dx != nullptr ? out(2, dx, count) : nullptr;
  batchnorm_backward_f32(widen(0, x, count), widen(1, dy, count), gamma, dxf, dgamma, dbeta, n, c,
                         hw, eps, save_mean, save_invstd);
  if (dx != nullptr) narrow(2, dx, count);
}

void CpuBackend::dropout_forward(const void* x, void* y, void* mask, size_t n, float p,
                                 uint64_t seed) {
  // The product uses the mask as stored (1 / (1 - p) rounded to the activation type), so
  // that backward's multiply(dy, mask) scales by the same factor.
  dropout_mask_f32(out(1, mask, n), n, p, seed);
  narrow(1, mask, n);
  multiply(x, mask, y, n);
}

void CpuBackend::softmax_xent(const void* logits, const int32_t* labels, int rows, int cols,
                              float grad_scale, const float* loss_scale, void* dlogits,
                              LossStats* stats) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const float scale = loss_scale != nullptr ? grad_scale * *loss_scale : grad_scale;
  float* df = dlogits != nullptr ? out(1, dlogits, n) : nullptr;
  softmax_xent_f32(widen(0, logits, n), labels, rows, cols, scale, df, stats);
  if (dlogits != nullptr) narrow(1, dlogits, n);
}

}  // namespace hpctrain
