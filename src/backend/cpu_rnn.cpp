// The CPU backend's recurrent operations: the layout swap between batch-major and
// time-major sequences and the point-wise parts of LSTM and GRU steps (the matrix products are
// the layer's gemm calls). 16-bit activations are widened, computed in float32 and rounded
// back, as cpu_mixed.cpp does for the other operations.
#include <cmath>
#include <cstring>

#include "backend/cpu_backend.hpp"
#include "core/dtype.hpp"

namespace hpctrain {
namespace {

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

}  // namespace

void CpuBackend::swap_leading(const void* src, void* dst, int a, int b, int inner) {
  const size_t row = static_cast<size_t>(inner) * dtype_size(act_type_);
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  parallel(static_cast<size_t>(a), grain_for(static_cast<size_t>(b) * inner),
           [&](size_t lo, size_t hi) {
             for (size_t i = lo; i < hi; ++i) {
               for (size_t j = 0; j < static_cast<size_t>(b); ++j) {
                 std::memcpy(d + (j * a + i) * row, s + (i * b + j) * row, row);
               }
             }
           });
}

void CpuBackend::lstm_forward_step(const void* gx, const void* gh, const float* b_ih,
                                   const float* b_hh, const float* c_prev, float* gates, float* c,
                                   void* h, int batch, int hidden) {
  const size_t nz = static_cast<size_t>(batch) * 4 * hidden;
  const size_t nh = static_cast<size_t>(batch) * hidden;
  lstm_forward_step_f32(widen(0, gx, nz), gh != nullptr ? widen(1, gh, nz) : nullptr, b_ih, b_hh,
                        c_prev, gates, c, out(2, h, nh), batch, hidden);
  narrow(2, h, nh);
}

void CpuBackend::lstm_backward_step(const float* gates, const float* c, const float* c_prev,
                                    const void* dh, float* dc, void* dz, int batch, int hidden) {
  const size_t nz = static_cast<size_t>(batch) * 4 * hidden;
  const size_t nh = static_cast<size_t>(batch) * hidden;
  lstm_backward_step_f32(gates, c, c_prev, dh != nullptr ? widen(0, dh, nh) : nullptr, dc,
                         out(1, dz, nz), batch, hidden);
  narrow(1, dz, nz);
}

void CpuBackend::lstm_forward_step_f32(const float* gx, const float* gh, const float* b_ih,
                                       const float* b_hh, const float* c_prev, float* gates,
                                       float* c, float* h, int batch, int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  parallel(static_cast<size_t>(batch), grain_for(4 * hs), [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const float* x = gx + r * 4 * hs;
      const float* g = gh != nullptr ? gh + r * 4 * hs : nullptr;
      float* a = gates + r * 4 * hs;
      for (size_t k = 0; k < 4 * hs; ++k) {
        const float z = x[k] + (g != nullptr ? g[k] : 0.0f) + b_ih[k] + b_hh[k];
        a[k] = (k >= 2 * hs && k < 3 * hs) ? std::tanh(z) : sigmoid(z);
      }
      for (size_t j = 0; j < hs; ++j) {
        const float prev = c_prev != nullptr ? c_prev[r * hs + j] : 0.0f;
        const float cell = a[hs + j] * prev + a[j] * a[2 * hs + j];
        c[r * hs + j] = cell;
        h[r * hs + j] = a[3 * hs + j] * std::tanh(cell);
      }
    }
  });
}

void CpuBackend::lstm_backward_step_f32(const float* gates, const float* c, const float* c_prev,
                                        const float* dh, float* dc, float* dz, int batch,
                                        int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  parallel(static_cast<size_t>(batch), grain_for(4 * hs), [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const float* a = gates + r * 4 * hs;
      float* d = dz + r * 4 * hs;
      for (size_t j = 0; j < hs; ++j) {
        const float i = a[j], f = a[hs + j], g = a[2 * hs + j], o = a[3 * hs + j];
        const float tc = std::tanh(c[r * hs + j]);
        const float dhj = dh != nullptr ? dh[r * hs + j] : 0.0f;
        const float dcell = dc[r * hs + j] + dhj * o * (1.0f - tc * tc);
        const float prev = c_prev != nullptr ? c_prev[r * hs + j] : 0.0f;
        d[j] = dcell * g * i * (1.0f - i);
        d[hs + j] = dcell * prev * f * (1.0f - f);
        d[2 * hs + j] = dcell * i * (1.0f - g * g);
        d[3 * hs + j] = dhj * tc * o * (1.0f - o);
        dc[r * hs + j] = dcell * f;
      }
    }
  });
}

void CpuBackend::gru_forward_step(const void* gx, const void* gh, const float* b_ih,
                                  const float* b_hh, const void* h_prev, float* gates, float* hn,
                                  void* h, int batch, int hidden) {
  const size_t nz = static_cast<size_t>(batch) * 3 * hidden;
  const size_t nh = static_cast<size_t>(batch) * hidden;
  gru_forward_step_f32(widen(0, gx, nz), gh != nullptr ? widen(1, gh, nz) : nullptr, b_ih, b_hh,
                       h_prev != nullptr ? widen(2, h_prev, nh) : nullptr, gates, hn, out(3, h, nh),
                       batch, hidden);
  narrow(3, h, nh);
}

void CpuBackend::gru_backward_step(const float* gates, const float* hn, const void* h_prev,
                                   const void* dh, void* dgx, void* dgh, void* dh_prev, int batch,
                                   int hidden) {
  const size_t nz = static_cast<size_t>(batch) * 3 * hidden;
  const size_t nh = static_cast<size_t>(batch) * hidden;
  gru_backward_step_f32(gates, hn, h_prev != nullptr ? widen(0, h_prev, nh) : nullptr,
                        widen(1, dh, nh), out(2, dgx, nz), out(3, dgh, nz),
                        dh_prev != nullptr ? out(4, dh_prev, nh) : nullptr, batch, hidden);
  narrow(2, dgx, nz);
  narrow(3, dgh, nz);
  if (dh_prev != nullptr) narrow(4, dh_prev, nh);
}

void CpuBackend::gru_forward_step_f32(const float* gx, const float* gh, const float* b_ih,
                                      const float* b_hh, const float* h_prev, float* gates,
                                      float* hn, float* h, int batch, int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  parallel(static_cast<size_t>(batch), grain_for(3 * hs), [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const float* x = gx + r * 3 * hs;
      const float* g = gh != nullptr ? gh + r * 3 * hs : nullptr;
      float* a = gates + r * 3 * hs;
      for (size_t j = 0; j < hs; ++j) {
        const float rg = sigmoid(x[j] + b_ih[j] + (g != nullptr ? g[j] : 0.0f) + b_hh[j]);
        const float zg =
            sigmoid(x[hs + j] + b_ih[hs + j] + (g != nullptr ? g[hs + j] : 0.0f) + b_hh[hs + j]);
        const float hnj = (g != nullptr ? g[2 * hs + j] : 0.0f) + b_hh[2 * hs + j];
        const float ng = std::tanh(x[2 * hs + j] + b_ih[2 * hs + j] + rg * hnj);
        const float prev = h_prev != nullptr ? h_prev[r * hs + j] : 0.0f;
        a[j] = rg;
        a[hs + j] = zg;
        a[2 * hs + j] = ng;
        hn[r * hs + j] = hnj;
        h[r * hs + j] = (1.0f - zg) * ng + zg * prev;
      }
    }
  });
}

void CpuBackend::gru_backward_step_f32(const float* gates, const float* hn, const float* h_prev,
                                       const float* dh, float* dgx, float* dgh, float* dh_prev,
                                       int batch, int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  parallel(static_cast<size_t>(batch), grain_for(3 * hs), [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const float* a = gates + r * 3 * hs;
      float* dx = dgx + r * 3 * hs;
      float* dg = dgh + r * 3 * hs;
      for (size_t j = 0; j < hs; ++j) {
        const float rg = a[j], zg = a[hs + j], ng = a[2 * hs + j];
        const float d = dh[r * hs + j];
        const float prev = h_prev != nullptr ? h_prev[r * hs + j] : 0.0f;
        const float dn = d * (1.0f - zg) * (1.0f - ng * ng);
        const float dz = d * (prev - ng) * zg * (1.0f - zg);
        const float dr = dn * hn[r * hs + j] * rg * (1.0f - rg);
        dx[j] = dr;
        dx[hs + j] = dz;
        dx[2 * hs + j] = dn;
        dg[j] = dr;
        dg[hs + j] = dz;
        dg[2 * hs + j] = dn * rg;
        if (dh_prev != nullptr) dh_prev[r * hs + j] = d * zg;
      }
    }
  });
}

}  // namespace hpctrain
