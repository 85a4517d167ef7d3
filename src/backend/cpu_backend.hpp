// CPU backend: OpenBLAS for GEMM, plain vectorisable loops for the rest.
// The BLAS thread count is process-wide; set it once with set_threads().
#pragma once

#include "backend/backend.hpp"

namespace hpctrain {

class CpuBackend final : public Backend {
 public:
  // threads: BLAS threads for this rank (>= 1).
  explicit CpuBackend(int threads);
  const char* name() const override { return "cpu"; }

  void* alloc_bytes(size_t bytes) override;
  void free_bytes(void* p) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill_zero(float* x, size_t n) override;
  void synchronize() override {}

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override;
  void add_bias(float* y, const float* bias, int rows, int cols) override;
  void sum_rows(const float* dy, float* dbias, int rows, int cols) override;
  void relu_forward(const float* x, float* y, size_t n) override;
  void relu_backward(const float* y, const float* dy, float* dx, size_t n) override;
  void softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                    float grad_scale, float* dlogits, LossStats* stats) override;
  void sgd_update(float* params, const float* grads, float* velocity, size_t n,
                  const SgdParams& sgd) override;
  void scale(float* x, size_t n, float alpha) override;

  int threads() const { return threads_; }

 private:
  int threads_;
};

}  // namespace hpctrain
