// CPU implementations of the Backend operations. Memory is 64-byte aligned so
// the loops vectorise; GEMM goes to OpenBLAS (cblas, row-major).
#include "backend/cpu_backend.hpp"

#include <cblas.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.hpp"
#include "core/op_params.hpp"

namespace hpctrain {

CpuBackend::CpuBackend(int threads, size_t conv_chunk_bytes, bool stage_as_device, DType act_type)
    : act_type_(act_type),
      threads_(threads),
      conv_chunk_bytes_(conv_chunk_bytes),
      stage_as_device_(stage_as_device) {
  HT_REQUIRE(threads >= 1, "CPU backend needs at least one thread");
  openblas_set_num_threads(1);  // the pool parallelises around BLAS calls
  pool_ = std::make_unique<ThreadPool>(threads);
}

CpuBackend::~CpuBackend() = default;

void* CpuBackend::alloc_bytes(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}

void CpuBackend::free_bytes(void* p) { std::free(p); }

void CpuBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::fill_zero(float* x, size_t n) {
  if (n > 0) std::memset(x, 0, n * sizeof(float));
}

void CpuBackend::copy(const void* src, void* dst, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::gemm_f32(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float* a, const float* b, float beta, float* c) {
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  const auto op_a = trans_a ? CblasTrans : CblasNoTrans, op_b = trans_b ? CblasTrans : CblasNoTrans;
  // Small products are not worth splitting.
  const size_t grain = static_cast<double>(m) * n * k < kParallelGemmWork ? SIZE_MAX : 16;
  if (m >= n) {
    // Rows [lo, hi) of C: rows of op(A), which start at row lo of A, or column lo if A^T.
    parallel(static_cast<size_t>(m), grain, [&](size_t lo, size_t hi) {
      const float* a_part = a + (trans_a ? lo : lo * lda);
      cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<int>(hi - lo), n, k, alpha, a_part, lda, b,
                  ldb, beta, c + lo * n, n);
    });
  } else {
    // Columns [lo, hi) of C: columns of op(B), which start at column lo of B, or row lo if B^T.
    parallel(static_cast<size_t>(n), grain, [&](size_t lo, size_t hi) {
      const float* b_part = b + (trans_b ? lo * ldb : lo);
      cblas_sgemm(CblasRowMajor, op_a, op_b, m, static_cast<int>(hi - lo), k, alpha, a, lda, b_part,
                  ldb, beta, c + lo, n);
    });
  }
}

void CpuBackend::add_bias_f32(float* y, const float* bias, int rows, int cols) {
  parallel(static_cast<size_t>(rows), grain_for(cols), [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      float* row = y + r * cols;
      for (int j = 0; j < cols; ++j) row[j] += bias[j];
    }
  });
}

void CpuBackend::sum_rows_f32(const float* dy, float* dbias, int rows, int cols) {
  // Columns split across threads; each column summed over the rows in order.
  parallel(static_cast<size_t>(cols), grain_for(rows), [&](size_t lo, size_t hi) {
    std::fill(dbias + lo, dbias + hi, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const float* row = dy + static_cast<size_t>(r) * cols;
      for (size_t j = lo; j < hi; ++j) dbias[j] += row[j];
    }
  });
}

void CpuBackend::add_channel_bias_f32(float* y, const float* bias, int n, int c, int hw) {
  parallel(static_cast<size_t>(n) * c, grain_for(hw), [&](size_t lo, size_t hi) {
    for (size_t pl = lo; pl < hi; ++pl) {
      float* plane = y + pl * hw;
      const float b = bias[pl % c];
      for (int j = 0; j < hw; ++j) plane[j] += b;
    }
  });
}

void CpuBackend::sum_channels_f32(const float* dy, float* dbias, int n, int c, int hw) {
  constexpr int kLanes = 8;  // independent partial sums, so the loop vectorises
  parallel(static_cast<size_t>(c), grain_for(static_cast<size_t>(n) * hw),
           [&](size_t lo, size_t hi) {
             for (size_t ch = lo; ch < hi; ++ch) {
               // Double across planes: a sum over a whole batch can be ~1e5 terms.
               double sum = 0.0;
               for (int i = 0; i < n; ++i) {
                 const float* plane = dy + (static_cast<size_t>(i) * c + ch) * hw;
                 float lanes[kLanes] = {};
                 int j = 0;
                 for (; j + kLanes <= hw; j += kLanes) {
                   for (int l = 0; l < kLanes; ++l) lanes[l] += plane[j + l];
                 }
                 for (; j < hw; ++j) lanes[0] += plane[j];
                 for (float v : lanes) sum += v;
               }
               dbias[ch] = static_cast<float>(sum);
             }
           });
}

void CpuBackend::add_f32(const float* a, const float* b, float* y, size_t n) {
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) y[i] = a[i] + b[i];
  });
}

void CpuBackend::multiply_f32(const float* a, const float* b, float* y, size_t n) {
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) y[i] = a[i] * b[i];
  });
}

void CpuBackend::relu_forward_f32(const float* x, float* y, size_t n) {
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  });
}

void CpuBackend::relu_backward_f32(const float* y, const float* dy, float* dx, size_t n) {
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    // dy is read whatever y is: a load under the condition keeps the loop scalar, and its
    // branch, taken for about half the values, mispredicts often.
    for (size_t i = lo; i < hi; ++i) {
      const float g = dy[i];
      dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
  });
}

void CpuBackend::softmax_xent_f32(const float* logits, const int32_t* labels, int rows, int cols,
                                  float grad_scale, float* dlogits, LossStats* stats) {
  double loss_sum = 0.0;
  double correct = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * cols;
    // Subtract the max before exponentiating: exp never overflows.
    int arg_max = 0;
    for (int j = 1; j < cols; ++j) {
      if (z[j] > z[arg_max]) arg_max = j;
    }
    const float z_max = z[arg_max];
    double sum = 0.0;
    for (int j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(z[j] - z_max));
    const int label = labels[r];
    const double log_sum = std::log(sum);
    loss_sum += log_sum - static_cast<double>(z[label] - z_max);
    if (arg_max == label) correct += 1.0;
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<size_t>(r) * cols;
      const double inv_sum = 1.0 / sum;
      for (int j = 0; j < cols; ++j) {
        const double p = std::exp(static_cast<double>(z[j] - z_max)) * inv_sum;
        d[j] = static_cast<float>(grad_scale * (p - (j == label ? 1.0 : 0.0)));
      }
    }
  }
  stats->loss_sum += loss_sum;
  stats->correct += correct;
  stats->count += rows;
}

void CpuBackend::sgd_update(float* params, const float* grads, float* velocity, size_t n,
                            const SgdParams& sgd, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;
  const float lr = sgd.lr, mu = sgd.momentum, wd = sgd.weight_decay;
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    if (mu == 0.0f) {
      for (size_t i = lo; i < hi; ++i) params[i] -= lr * (grads[i] + wd * params[i]);
    } else if (sgd.nesterov) {
      for (size_t i = lo; i < hi; ++i) {
        const float g = grads[i] + wd * params[i];
        const float v = mu * velocity[i] + g;
        velocity[i] = v;
        params[i] -= lr * (g + mu * v);
      }
    } else {
      for (size_t i = lo; i < hi; ++i) {
        const float v = mu * velocity[i] + grads[i] + wd * params[i];
        velocity[i] = v;
        params[i] -= lr * v;
      }
    }
  });
}

void CpuBackend::adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                             const AdamParams& adam, const float* step, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;
  const AdamCoefficients c = adam_coefficients(adam, *step);
  // Captured by value, so that the loop vectorises: the compiler cannot tell the stores
  // below from writes to captured references.
  parallel(n, kElementGrain, [=](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) adam_element(c, params[i], grads[i], m[i], v[i]);
  });
}

void CpuBackend::count_step(float* counter, const float* skip) {
  if (skip == nullptr || *skip == 0.0f) *counter += 1.0f;
}

void CpuBackend::sum_squares(const float* x, size_t n, float* acc) {
  // Fixed blocks whatever the thread count, summed in order: the same result every time.
  const size_t blocks = (n + kElementGrain - 1) / kElementGrain;
  if (block_sums_.size() < blocks) block_sums_.resize(blocks);
  parallel(blocks, 1, [&](size_t lo, size_t hi) {
    for (size_t b = lo; b < hi; ++b) {
      double sum = 0;
      for (size_t i = b * kElementGrain; i < std::min(n, (b + 1) * kElementGrain); ++i) {
        sum += static_cast<double>(x[i]) * x[i];
      }
      block_sums_[b] = sum;
    }
  });
  double total = *acc;
  for (size_t b = 0; b < blocks; ++b) total += block_sums_[b];
  *acc = static_cast<float>(total);
}

void CpuBackend::clip_by_norm(float* x, size_t n, const float* acc, float max_norm) {
  const float coef = max_norm / (std::sqrt(*acc) + 1e-6f);
  if (coef < 1.0f) scale(x, n, coef);
}

void CpuBackend::scale(float* x, size_t n, float alpha) {
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) x[i] *= alpha;
  });
}

void CpuBackend::accumulate(float* sum, const float* x, size_t n) {
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) sum[i] += x[i];
  });
}

void CpuBackend::unscale_grads(float* grads, size_t n, float* state) {
  const float inv = 1.0f / state[LossScaleState::kScale];
  std::atomic<bool> overflow{false};
  // All exponent bits set: an infinity or a NaN. An OR over integers vectorises, where a
  // loop that stops at the first non-finite value does not.
  const auto nonfinite = [](float g) {
    uint32_t bits;
    std::memcpy(&bits, &g, sizeof(bits));
    return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  };
  parallel(n, kElementGrain, [&](size_t lo, size_t hi) {
    uint32_t bad = 0;
    if (inv != 1.0f) {
      for (size_t i = lo; i < hi; ++i) {
        const float g = grads[i] * inv;
        grads[i] = g;
        bad |= nonfinite(g);
      }
    } else {  // a fixed scale (train.on_nonfinite: skip_step) only reads
      for (size_t i = lo; i < hi; ++i) bad |= nonfinite(grads[i]);
    }
    if (bad != 0) overflow.store(true, std::memory_order_relaxed);
  });
  if (overflow.load()) state[LossScaleState::kFoundInf] = 1.0f;
}

void CpuBackend::update_loss_scale(float* state, float growth, float backoff, int interval) {
  float& scale = state[LossScaleState::kScale];
  float& good = state[LossScaleState::kGood];
  if (state[LossScaleState::kFoundInf] != 0.0f) {
    scale *= backoff;
    good = 0.0f;
    state[LossScaleState::kSkipped] += 1.0f;
  } else if (++good >= static_cast<float>(interval)) {
    scale *= growth;
    good = 0.0f;
  }
  state[LossScaleState::kFoundInf] = 0.0f;
}

void CpuBackend::merge_loss_stats(LossStats* into, LossStats* step, const float* skip) {
  if (*skip == 0.0f) {
    into->loss_sum += step->loss_sum;
    into->correct += step->correct;
    into->count += step->count;
  }
  *step = LossStats{};
}

}  // namespace hpctrain
