// Recurrent kernels: the batch-major <-> time-major swap of sequences and the point-wise
// parts of LSTM and GRU steps (CpuBackend's cpu_rnn.cpp computes the same in the same order; the
// transcendental functions may differ from the host's in the last bit).
#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

// dst[j][i][k] = src[i][j][k] for src [a][b][inner]; one element per thread.
template <typename T>
__global__ void swap_leading_kernel(const T* src, T* dst, int a, int b, int inner) {
  const size_t total = static_cast<size_t>(a) * b * inner;
  HT_GRID_STRIDE(e, total) {
    const size_t k = e % inner, row = e / inner;
    const size_t i = row / b, j = row % b;
    dst[(j * a + i) * inner + k] = src[e];
  }
}

__device__ __forceinline__ float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

// One thread per (row, unit): its four gates, its cell and its output.
template <typename T>
__global__ void lstm_forward_kernel(const T* gx, const T* gh, const float* b_ih, const float* b_hh,
                                    const float* c_prev, float* gates, float* c, T* h, int batch,
                                    int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  HT_GRID_STRIDE(e, static_cast<size_t>(batch) * hs) {
    const size_t r = e / hs, j = e % hs;
    float a[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const size_t k = q * hs + j;
      const float z = as_float(gx[r * 4 * hs + k]) +
                      (gh != nullptr ? as_float(gh[r * 4 * hs + k]) : 0.0f) + b_ih[k] + b_hh[k];
      a[q] = q == 2 ? tanhf(z) : sigmoid(z);
      gates[r * 4 * hs + k] = a[q];
    }
    const float prev = c_prev != nullptr ? c_prev[e] : 0.0f;
    const float cell = a[1] * prev + a[0] * a[2];
    c[e] = cell;
    h[e] = to_act<T>(a[3] * tanhf(cell));
  }
}

template <typename T>
__global__ void lstm_backward_kernel(const float* gates, const float* c, const float* c_prev,
                                     const T* dh, float* dc, T* dz, int batch, int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  HT_GRID_STRIDE(e, static_cast<size_t>(batch) * hs) {
    const size_t r = e / hs, j = e % hs;
    const float* a = gates + r * 4 * hs;
    const float i = a[j], f = a[hs + j], g = a[2 * hs + j], o = a[3 * hs + j];
    const float tc = tanhf(c[e]);
    const float dhj = dh != nullptr ? as_float(dh[e]) : 0.0f;
    const float dcell = dc[e] + dhj * o * (1.0f - tc * tc);
    const float prev = c_prev != nullptr ? c_prev[e] : 0.0f;
    T* d = dz + r * 4 * hs;
    d[j] = to_act<T>(dcell * g * i * (1.0f - i));
    d[hs + j] = to_act<T>(dcell * prev * f * (1.0f - f));
    d[2 * hs + j] = to_act<T>(dcell * i * (1.0f - g * g));
    d[3 * hs + j] = to_act<T>(dhj * tc * o * (1.0f - o));
    dc[e] = dcell * f;
  }
}

template <typename T>
__global__ void gru_forward_kernel(const T* gx, const T* gh, const float* b_ih, const float* b_hh,
                                   const T* h_prev, float* gates, float* hn, T* h, int batch,
                                   int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  HT_GRID_STRIDE(e, static_cast<size_t>(batch) * hs) {
    const size_t r = e / hs, j = e % hs;
    const T* x = gx + r * 3 * hs;
    const T* g = gh != nullptr ? gh + r * 3 * hs : nullptr;
    const float rg =
        sigmoid(as_float(x[j]) + b_ih[j] + (g != nullptr ? as_float(g[j]) : 0.0f) + b_hh[j]);
    const float zg = sigmoid(as_float(x[hs + j]) + b_ih[hs + j] +
                             (g != nullptr ? as_float(g[hs + j]) : 0.0f) + b_hh[hs + j]);
    const float hnj = (g != nullptr ? as_float(g[2 * hs + j]) : 0.0f) + b_hh[2 * hs + j];
    const float ng = tanhf(as_float(x[2 * hs + j]) + b_ih[2 * hs + j] + rg * hnj);
    const float prev = h_prev != nullptr ? as_float(h_prev[e]) : 0.0f;
    float* a = gates + r * 3 * hs;
    a[j] = rg;
    a[hs + j] = zg;
    a[2 * hs + j] = ng;
    hn[e] = hnj;
    h[e] = to_act<T>((1.0f - zg) * ng + zg * prev);
  }
}

template <typename T>
__global__ void gru_backward_kernel(const float* gates, const float* hn, const T* h_prev,
                                    const T* dh, T* dgx, T* dgh, T* dh_prev, int batch,
                                    int hidden) {
  const size_t hs = static_cast<size_t>(hidden);
  HT_GRID_STRIDE(e, static_cast<size_t>(batch) * hs) {
    const size_t r = e / hs, j = e % hs;
    const float* a = gates + r * 3 * hs;
    const float rg = a[j], zg = a[hs + j], ng = a[2 * hs + j];
    const float d = as_float(dh[e]);
    const float prev = h_prev != nullptr ? as_float(h_prev[e]) : 0.0f;
    const float dn = d * (1.0f - zg) * (1.0f - ng * ng);
    const float dz = d * (prev - ng) * zg * (1.0f - zg);
    const float dr = dn * hn[e] * rg * (1.0f - rg);
    T* dx = dgx + r * 3 * hs;
    T* dg = dgh + r * 3 * hs;
    dx[j] = to_act<T>(dr);
    dx[hs + j] = to_act<T>(dz);
    dx[2 * hs + j] = to_act<T>(dn);
    dg[j] = to_act<T>(dr);
    dg[hs + j] = to_act<T>(dz);
    dg[2 * hs + j] = to_act<T>(dn * rg);
    if (dh_prev != nullptr) dh_prev[e] = to_act<T>(d * zg);
  }
}

}  // namespace

void swap_leading(DType t, const void* src, void* dst, int a, int b, int inner,
                  cudaStream_t stream) {
  const size_t total = static_cast<size_t>(a) * b * inner;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    swap_leading_kernel<<<grid_for(total), kBlock, 0, stream>>>(static_cast<const T*>(src),
                                                                static_cast<T*>(dst), a, b, inner);
  });
  check_launch("swap_leading");
}

void lstm_forward_step(DType t, const void* gx, const void* gh, const float* b_ih,
                       const float* b_hh, const float* c_prev, float* gates, float* c, void* h,
                       int batch, int hidden, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * hidden;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    lstm_forward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        static_cast<const T*>(gx), static_cast<const T*>(gh), b_ih, b_hh, c_prev, gates, c,
        static_cast<T*>(h), batch, hidden);
  });
  check_launch("lstm_forward_step");
}

void lstm_backward_step(DType t, const float* gates, const float* c, const float* c_prev,
                        const void* dh, float* dc, void* dz, int batch, int hidden,
                        cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * hidden;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    lstm_backward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        gates, c, c_prev, static_cast<const T*>(dh), dc, static_cast<T*>(dz), batch, hidden);
  });
  check_launch("lstm_backward_step");
}

void gru_forward_step(DType t, const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                      const void* h_prev, float* gates, float* hn, void* h, int batch, int hidden,
                      cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * hidden;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    gru_forward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        static_cast<const T*>(gx), static_cast<const T*>(gh), b_ih, b_hh,
        static_cast<const T*>(h_prev), gates, hn, static_cast<T*>(h), batch, hidden);
  });
  check_launch("gru_forward_step");
}

void gru_backward_step(DType t, const float* gates, const float* hn, const void* h_prev,
                       const void* dh, void* dgx, void* dgh, void* dh_prev, int batch, int hidden,
                       cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * hidden;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    gru_backward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        gates, hn, static_cast<const T*>(h_prev), static_cast<const T*>(dh), static_cast<T*>(dgx),
        static_cast<T*>(dgh), static_cast<T*>(dh_prev), batch, hidden);
  });
  check_launch("gru_backward_step");
}

}  // namespace hpctrain::kernels
