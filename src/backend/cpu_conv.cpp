// CPU convolutions lowered to GEMM (im2col / col2im), one GEMM per chunk of g samples:
//   col [K, g*P]  K = c_in*kh*kw rows, one column per (sample, oy, ox), P = out_h*out_w
//   forward:  Y [c_out, g*P]  = W [c_out, K] * col
//   data:     dcol [K, g*P]   = W^T * dY, then col2im adds each column back into dx
//   filter:   dW [c_out, K]  += dY [c_out, g*P] * col^T
// Y and dY are [c_out, P] blocks of the NCHW tensor when g = 1; for g > 1 they are staged
// in a [c_out, g*P] buffer after col, so small feature maps still give a wide GEMM.
#include <cblas.h>

#include <algorithm>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

void check_shape(const Conv2dShape& s) {
  HT_REQUIRE(s.n >= 1 && s.c_in >= 1 && s.h >= 1 && s.w >= 1 && s.c_out >= 1 && s.kh >= 1 &&
                 s.kw >= 1 && s.stride_h >= 1 && s.stride_w >= 1 && s.pad_h >= 0 && s.pad_w >= 0,
             "conv2d: invalid shape");
  HT_REQUIRE(s.out_h() >= 1 && s.out_w() >= 1, "conv2d: input smaller than the kernel");
}

size_t out_plane(const Conv2dShape& s) { return static_cast<size_t>(s.out_h()) * s.out_w(); }
size_t in_plane(const Conv2dShape& s) { return static_cast<size_t>(s.h) * s.w; }

// Output columns [lo, hi) whose input column ox*stride - pad + kj lies inside [0, w).
struct ColumnRange {
  int lo, hi;
};

ColumnRange valid_columns(const Conv2dShape& s, int kj) {
  const int first = s.pad_w - kj;  // smallest ox * stride that is in range
  const int last = s.w - 1 + s.pad_w - kj;
  const int lo = first <= 0 ? 0 : (first + s.stride_w - 1) / s.stride_w;
  const int hi = last < 0 ? 0 : std::min(s.out_w(), last / s.stride_w + 1);
  return {std::min(lo, hi), hi};
}

// Writes the patches of samples x[0, g) into col [K, g*P].
void im2col(const Conv2dShape& s, const float* x, int g, float* col) {
  const int oh = s.out_h(), ow = s.out_w();
  const size_t p = out_plane(s), row_len = g * p;
  for (int c = 0; c < s.c_in; ++c) {
    for (int ki = 0; ki < s.kh; ++ki) {
      for (int kj = 0; kj < s.kw; ++kj) {
        float* row = col + ((static_cast<size_t>(c) * s.kh + ki) * s.kw + kj) * row_len;
        const ColumnRange r = valid_columns(s, kj);
        const int offset = kj - s.pad_w;  // input column of ox is ox * stride + offset
        for (int i = 0; i < g; ++i) {
          const float* plane = x + (static_cast<size_t>(i) * s.c_in + c) * in_plane(s);
          float* dst = row + i * p;
          for (int oy = 0; oy < oh; ++oy, dst += ow) {
            const int iy = oy * s.stride_h - s.pad_h + ki;
            if (iy < 0 || iy >= s.h) {
              std::fill(dst, dst + ow, 0.0f);
              continue;
            }
            const float* src = plane + static_cast<size_t>(iy) * s.w;
            std::fill(dst, dst + r.lo, 0.0f);
            if (s.stride_w == 1) {
              std::copy(src + r.lo + offset, src + r.hi + offset, dst + r.lo);
            } else {
              for (int ox = r.lo; ox < r.hi; ++ox) dst[ox] = src[ox * s.stride_w + offset];
            }
            std::fill(dst + r.hi, dst + ow, 0.0f);
          }
        }
      }
    }
  }
}

// Overwrites dx for samples [0, g) with the sum of each input's entries in col [K, g*P].
void col2im(const Conv2dShape& s, const float* col, int g, bool accumulate, float* dx) {
  const int oh = s.out_h(), ow = s.out_w();
  const size_t p = out_plane(s), row_len = g * p;
  if (!accumulate) std::fill(dx, dx + g * s.c_in * in_plane(s), 0.0f);
  for (int c = 0; c < s.c_in; ++c) {
    for (int ki = 0; ki < s.kh; ++ki) {
      for (int kj = 0; kj < s.kw; ++kj) {
        const float* row = col + ((static_cast<size_t>(c) * s.kh + ki) * s.kw + kj) * row_len;
        const ColumnRange r = valid_columns(s, kj);
        const int offset = kj - s.pad_w;
        for (int i = 0; i < g; ++i) {
          float* plane = dx + (static_cast<size_t>(i) * s.c_in + c) * in_plane(s);
          const float* src = row + i * p;
          for (int oy = 0; oy < oh; ++oy, src += ow) {
            const int iy = oy * s.stride_h - s.pad_h + ki;
            if (iy < 0 || iy >= s.h) continue;
            float* dst = plane + static_cast<size_t>(iy) * s.w;
            if (s.stride_w == 1) {  // adjacent: the loop vectorises
              float* d = dst + offset;
              for (int ox = r.lo; ox < r.hi; ++ox) d[ox] += src[ox];
            } else {
              for (int ox = r.lo; ox < r.hi; ++ox) dst[ox * s.stride_w + offset] += src[ox];
            }
          }
        }
      }
    }
  }
}

// stage [c_out, g*P] <- t [g, c_out, P] (the NCHW block of g samples), and back.
void gather_channels(const float* t, int g, int channels, size_t p, float* stage) {
  for (int i = 0; i < g; ++i) {
    for (int ch = 0; ch < channels; ++ch) {
      const float* src = t + (static_cast<size_t>(i) * channels + ch) * p;
      std::copy(src, src + p, stage + (static_cast<size_t>(ch) * g + i) * p);
    }
  }
}

void scatter_channels(const float* stage, int g, int channels, size_t p, float* t) {
  for (int i = 0; i < g; ++i) {
    for (int ch = 0; ch < channels; ++ch) {
      const float* src = stage + (static_cast<size_t>(ch) * g + i) * p;
      std::copy(src, src + p, t + (static_cast<size_t>(i) * channels + ch) * p);
    }
  }
}

}  // namespace

int CpuBackend::conv_chunk(const Conv2dShape& s) const {
  const size_t per_sample = (static_cast<size_t>(s.patch()) + s.c_out) * out_plane(s) * 4;
  const size_t fit = conv_chunk_bytes_ / per_sample;
  return static_cast<int>(std::clamp<size_t>(fit, 1, static_cast<size_t>(s.n)));
}

size_t CpuBackend::conv_thread_floats(const Conv2dShape& s, int g) const {
  // col for the chunk, plus the staging buffer when a chunk holds several samples.
  const size_t stage = g > 1 ? static_cast<size_t>(s.c_out) * g * out_plane(s) : 0;
  return static_cast<size_t>(s.patch()) * g * out_plane(s) + stage;
}

int CpuBackend::conv_threads(const Conv2dShape& s) const { return std::min(threads_, s.n); }

size_t CpuBackend::conv2d_workspace_bytes(const Conv2dShape& s) {
  check_shape(s);
  // Per thread: its scratch; threads after the first also a partial filter gradient.
  const int t = conv_threads(s);
  const size_t partial = static_cast<size_t>(s.c_out) * s.patch();
  return (t * conv_thread_floats(s, conv_chunk(s)) + (t - 1) * partial) * sizeof(float);
}

namespace {

// Samples [first, last) of thread t of `threads` over n samples.
struct SampleRange {
  int first, last;
};
SampleRange samples_of(int t, int threads, int n) {
  return {static_cast<int>(static_cast<int64_t>(n) * t / threads),
          static_cast<int>(static_cast<int64_t>(n) * (t + 1) / threads)};
}

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b,
           float beta, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, trans_a ? m : k, b,
              trans_b ? k : n, beta, c, n);
}

}  // namespace

// Each thread lowers its own contiguous samples, chunk by chunk, in its part of the
// workspace, with single-threaded GEMMs.
void CpuBackend::conv2d_forward_f32(const Conv2dShape& s, const float* x, const float* w, float* y,
                                    void* workspace) {
  check_shape(s);
  const int g_max = conv_chunk(s), k = static_cast<int>(s.patch()), threads = conv_threads(s);
  const size_t p = out_plane(s);
  pool_->run([&](int t) {
    if (t >= threads) return;
    float* col = static_cast<float*>(workspace) + t * conv_thread_floats(s, g_max);
    float* stage = col + static_cast<size_t>(k) * g_max * p;
    const SampleRange r = samples_of(t, threads, s.n);
    for (int n0 = r.first; n0 < r.last; n0 += g_max) {
      const int g = std::min(g_max, r.last - n0);
      float* y_block = y + static_cast<size_t>(n0) * s.c_out * p;
      im2col(s, x + static_cast<size_t>(n0) * s.c_in * in_plane(s), g, col);
      sgemm(false, false, s.c_out, static_cast<int>(g * p), k, w, col, 0.0f,
            g == 1 ? y_block : stage);
      if (g > 1) scatter_channels(stage, g, s.c_out, p, y_block);
    }
  });
}

void CpuBackend::conv2d_backward_data_f32(const Conv2dShape& s, const float* dy, const float* w,
                                          float* dx, void* workspace, bool accumulate) {
  check_shape(s);
  const int g_max = conv_chunk(s), k = static_cast<int>(s.patch()), threads = conv_threads(s);
  const size_t p = out_plane(s);
  pool_->run([&](int t) {
    if (t >= threads) return;
    float* dcol = static_cast<float*>(workspace) + t * conv_thread_floats(s, g_max);
    float* stage = dcol + static_cast<size_t>(k) * g_max * p;
    const SampleRange r = samples_of(t, threads, s.n);
    for (int n0 = r.first; n0 < r.last; n0 += g_max) {
      const int g = std::min(g_max, r.last - n0);
      const float* dy_block = dy + static_cast<size_t>(n0) * s.c_out * p;
      if (g > 1) gather_channels(dy_block, g, s.c_out, p, stage);
      sgemm(true, false, k, static_cast<int>(g * p), s.c_out, w, g == 1 ? dy_block : stage, 0.0f,
            dcol);
      col2im(s, dcol, g, accumulate, dx + static_cast<size_t>(n0) * s.c_in * in_plane(s));
    }
  });
}

// Thread 0 accumulates its samples' filter gradient in dw, thread t > 0 in its partial;
// then dw += the partials, in thread order.
void CpuBackend::conv2d_backward_filter_f32(const Conv2dShape& s, const float* x, const float* dy,
                                            float* dw, void* workspace) {
  check_shape(s);
  const int g_max = conv_chunk(s), k = static_cast<int>(s.patch()), threads = conv_threads(s);
  const size_t p = out_plane(s), dw_size = static_cast<size_t>(s.c_out) * k;
  float* partials = static_cast<float*>(workspace) + threads * conv_thread_floats(s, g_max);
  pool_->run([&](int t) {
    if (t >= threads) return;
    float* col = static_cast<float*>(workspace) + t * conv_thread_floats(s, g_max);
    float* stage = col + static_cast<size_t>(k) * g_max * p;
    float* target = t == 0 ? dw : partials + (t - 1) * dw_size;
    const SampleRange r = samples_of(t, threads, s.n);
    for (int n0 = r.first; n0 < r.last; n0 += g_max) {
      const int g = std::min(g_max, r.last - n0);
      const float* dy_block = dy + static_cast<size_t>(n0) * s.c_out * p;
      if (g > 1) gather_channels(dy_block, g, s.c_out, p, stage);
      im2col(s, x + static_cast<size_t>(n0) * s.c_in * in_plane(s), g, col);
      // The first chunk overwrites, the others accumulate.
      sgemm(false, true, s.c_out, k, static_cast<int>(g * p), g == 1 ? dy_block : stage, col,
            n0 == r.first ? 0.0f : 1.0f, target);
    }
  });
  if (threads > 1) {
    parallel(dw_size, kElementGrain, [&](size_t lo, size_t hi) {
      for (int t = 1; t < threads; ++t) {
        const float* part = partials + (t - 1) * dw_size;
        for (size_t i = lo; i < hi; ++i) dw[i] += part[i];
      }
    });
  }
}

}  // namespace hpctrain
