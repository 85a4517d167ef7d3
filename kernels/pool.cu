// Average pooling with the CPU backend's semantics: windows clipped to the input, always
// divided by kh * kw (padding counts as zeros). Backward gathers: each input cell sums the
// gradients of the windows that cover it, so no atomics are needed. Sums run in float
// over widened activations (kernels/act.cuh), rounded once when stored. Data in NCHW or
// NHWC order (PlaneMap); in NHWC neighbouring threads take neighbouring channels.
#include "backend/conv_shape.hpp"
#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

// Element offsets of one (sample, channel) plane: the plane's start for plane index p
// (sample p / c, channel p % c), and the step between neighbouring cells (NCHW: planes
// apart, cells adjacent; NHWC: channels adjacent, cells c apart).
struct PlaneMap {
  bool nhwc;
  int c;
  __device__ size_t start(size_t p, size_t cells) const {
    return nhwc ? (p / c) * cells * c + p % c : p * cells;
  }
  __device__ size_t step() const { return nhwc ? static_cast<size_t>(c) : 1; }
  // Output index i as (plane, cell in plane) for planes of `cells` cells.
  __device__ void split(size_t i, size_t cells, size_t& plane, size_t& cell) const {
    if (nhwc) {
      plane = (i / (cells * c)) * c + i % c;
      cell = (i / c) % cells;
    } else {
      plane = i / cells;
      cell = i % cells;
    }
  }
};

template <typename T>
__global__ void avgpool_forward_kernel(Pool2dShape s, PlaneMap map, const T* x, T* y) {
  const int oh = s.out_h(), ow = s.out_w();
  const size_t ocells = static_cast<size_t>(oh) * ow, icells = static_cast<size_t>(s.h) * s.w;
  const size_t total = static_cast<size_t>(s.n) * s.c * ocells;
  const float inv = 1.0f / static_cast<float>(s.kh * s.kw);
  const size_t step = map.step();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    size_t p, cell;
    map.split(i, ocells, p, cell);
    const int ox = static_cast<int>(cell % ow), oy = static_cast<int>(cell / ow);
    const T* plane = x + map.start(p, icells);
    const int y0 = max(oy * s.stride_h - s.pad_h, 0),
              y1 = min(oy * s.stride_h - s.pad_h + s.kh, s.h);
    const int x0 = max(ox * s.stride_w - s.pad_w, 0),
              x1 = min(ox * s.stride_w - s.pad_w + s.kw, s.w);
    float sum = 0.0f;
    for (int iy = y0; iy < y1; ++iy) {
      for (int ix = x0; ix < x1; ++ix) {
        sum += as_float(plane[(static_cast<size_t>(iy) * s.w + ix) * step]);
      }
    }
    y[i] = to_act<T>(sum * inv);
  }
}

template <typename T>
__global__ void avgpool_backward_kernel(Pool2dShape s, PlaneMap map, const T* dy, T* dx) {
  const int oh = s.out_h(), ow = s.out_w();
  const size_t ocells = static_cast<size_t>(oh) * ow, icells = static_cast<size_t>(s.h) * s.w;
  const size_t total = static_cast<size_t>(s.n) * s.c * icells;
  const float inv = 1.0f / static_cast<float>(s.kh * s.kw);
  const size_t step = map.step();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    size_t p, cell;
    map.split(i, icells, p, cell);
    const int ix = static_cast<int>(cell % s.w), iy = static_cast<int>(cell / s.w);
    const T* plane = dy + map.start(p, ocells);
    // Windows oy with oy * stride - pad <= iy < oy * stride - pad + kh.
    const int py = iy + s.pad_h, px = ix + s.pad_w;
    const int oy0 = py >= s.kh ? (py - s.kh) / s.stride_h + 1 : 0,
              oy1 = min(py / s.stride_h, oh - 1);
    const int ox0 = px >= s.kw ? (px - s.kw) / s.stride_w + 1 : 0,
              ox1 = min(px / s.stride_w, ow - 1);
    float sum = 0.0f;
    for (int oy = oy0; oy <= oy1; ++oy) {
      for (int ox = ox0; ox <= ox1; ++ox) {
        sum += as_float(plane[(static_cast<size_t>(oy) * ow + ox) * step]);
      }
    }
    dx[i] = to_act<T>(sum * inv);
  }
}

}  // namespace

void avgpool2d_forward(DType t, const Pool2dShape& s, bool nhwc, const void* x, void* y,
                       cudaStream_t stream) {
  const size_t total = static_cast<size_t>(s.n) * s.c * s.out_h() * s.out_w();
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    avgpool_forward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        s, PlaneMap{nhwc, s.c}, static_cast<const T*>(x), static_cast<T*>(y));
  });
  check_launch("avgpool2d_forward");
}

void avgpool2d_backward(DType t, const Pool2dShape& s, bool nhwc, const void* dy, void* dx,
                        cudaStream_t stream) {
  const size_t total = static_cast<size_t>(s.n) * s.c * s.h * s.w;
  if (total == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    avgpool_backward_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        s, PlaneMap{nhwc, s.c}, static_cast<const T*>(dy), static_cast<T*>(dx));
  });
  check_launch("avgpool2d_backward");
}

}  // namespace hpctrain::kernels
