// Pooling with the CPU backend's semantics: windows clipped to the input (padded cells
// never win a max; an average always divides by kh * kw, padding counting as zeros), and a
// max's gradient going to the window's first maximum in row-major order. Backward gathers:
// each input cell sums the gradients of the windows that cover it, in window order, so no
// atomics are needed. Sums run in float over widened activations (kernels/act.cuh),
// rounded once when stored.
// Average pooling takes NCHW or NHWC data (PlaneMap; in NHWC neighbouring threads take
// neighbouring channels); max pooling here is NHWC only (cuDNN's NHWC max-pool backward
// took 0.80 ms on ResNet-34's stem in bfloat16 on an H100), a thread taking one cell's 16
// bytes of adjacent channels (kernels/pack.cuh).
#include <cstdint>

#include "core/conv_shape.hpp"
#include "kernels/act.cuh"
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"
#include "kernels/pack.cuh"

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

// Output rows [y0, y1) and columns [x0, x1) of the window of output cell (oy, ox),
// clipped to the input.
struct Window {
  int y0, y1, x0, x1;
  __device__ Window(const Pool2dShape& s, int oy, int ox)
      : y0(max(oy * s.stride_h - s.pad_h, 0)),
        y1(min(oy * s.stride_h - s.pad_h + s.kh, s.h)),
        x0(max(ox * s.stride_w - s.pad_w, 0)),
        x1(min(ox * s.stride_w - s.pad_w + s.kw, s.w)) {}
};

// The max-pool kernels index their threads' work in 32 bits below this count (32-bit
// division is several times cheaper than 64-bit, and each thread divides a few times);
// the grid-stride step (at most 65535 x 256) then cannot wrap.
constexpr size_t kMaxNarrowIndex = size_t{1} << 31;

// NHWC index of channel group `group` (V channels) of cell (b, y, x) in a [n, h, w, c]
// tensor.
__device__ __forceinline__ size_t nhwc_at(int b, int y, int x, int h, int w, int c, int group,
                                          int v) {
  return ((static_cast<size_t>(b) * h + y) * w + x) * c + static_cast<size_t>(group) * v;
}

// The window's maximum per channel: the first cell's value, replaced by a strictly greater
// one (std::max's semantics, as the CPU's window_max).
template <typename T, int V, typename Index>
__global__ void maxpool_nhwc_forward_kernel(Pool2dShape s, const T* x, T* y) {
  const int oh = s.out_h(), ow = s.out_w(), groups = s.c / V;
  const Index total = static_cast<Index>(s.n) * oh * ow * groups;
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(i % groups);
    const Index cell = i / groups;
    const int ox = static_cast<int>(cell % ow), oy = static_cast<int>((cell / ow) % oh);
    const int b = static_cast<int>(cell / (static_cast<Index>(ow) * oh));
    const Window win(s, oy, ox);
    float m[V];
    load<T, V>(x + nhwc_at(b, win.y0, win.x0, s.h, s.w, s.c, g, V), m);
    for (int iy = win.y0; iy < win.y1; ++iy) {
      for (int ix = win.x0; ix < win.x1; ++ix) {
        float v[V];
        load<T, V>(x + nhwc_at(b, iy, ix, s.h, s.w, s.c, g, V), v);
#pragma unroll
        for (int j = 0; j < V; ++j) m[j] = m[j] < v[j] ? v[j] : m[j];
      }
    }
    store<T, V>(y + static_cast<size_t>(i) * V, m);
  }
}

// dx of an input cell: the sum, over the windows that cover it in (oy, ox) order, of the
// dy of those whose first maximum it is. The cell holds a window's maximum y when
// x == y; it is the first one when no cell before it in the window does.
template <typename T, int V, typename Index>
__global__ void maxpool_nhwc_backward_kernel(Pool2dShape s, const T* x, const T* y, const T* dy,
                                             T* dx) {
  const int oh = s.out_h(), ow = s.out_w(), groups = s.c / V;
  const Index total = static_cast<Index>(s.n) * s.h * s.w * groups;
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(i % groups);
    const Index cell = i / groups;
    const int ix = static_cast<int>(cell % s.w), iy = static_cast<int>((cell / s.w) % s.h);
    const int b = static_cast<int>(cell / (static_cast<Index>(s.w) * s.h));
    float xv[V], acc[V];
    load<T, V>(x + static_cast<size_t>(i) * V, xv);
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.0f;
    // Windows oy with oy * stride - pad <= iy < oy * stride - pad + kh (as average pooling).
    const int py = iy + s.pad_h, px = ix + s.pad_w;
    const int oy0 = py >= s.kh ? (py - s.kh) / s.stride_h + 1 : 0,
              oy1 = min(py / s.stride_h, oh - 1);
    const int ox0 = px >= s.kw ? (px - s.kw) / s.stride_w + 1 : 0,
              ox1 = min(px / s.stride_w, ow - 1);
    for (int oy = oy0; oy <= oy1; ++oy) {
      for (int ox = ox0; ox <= ox1; ++ox) {
        const size_t o = nhwc_at(b, oy, ox, oh, ow, s.c, g, V);
        float mv[V];
        load<T, V>(y + o, mv);
        bool hit[V], any = false;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          hit[j] = xv[j] == mv[j];
          any = any || hit[j];
        }
        if (!any) continue;
        const Window win(s, oy, ox);
        for (int ey = win.y0; ey <= iy; ++ey) {
          for (int ex = win.x0; ex < (ey < iy ? win.x1 : ix); ++ex) {
            float ev[V];
            load<T, V>(x + nhwc_at(b, ey, ex, s.h, s.w, s.c, g, V), ev);
#pragma unroll
            for (int j = 0; j < V; ++j) hit[j] = hit[j] && ev[j] != mv[j];
          }
        }
        float dv[V];
        load<T, V>(dy + o, dv);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += hit[j] ? dv[j] : 0.0f;
      }
    }
    store<T, V>(dx + static_cast<size_t>(i) * V, acc);
  }
}

}  // namespace

void maxpool2d_nhwc_forward(DType t, const Pool2dShape& s, const void* x, void* y,
                            cudaStream_t stream) {
  const size_t cells = static_cast<size_t>(s.n) * s.out_h() * s.out_w();
  if (cells == 0 || s.c == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    with_pack<T>(pack_values<T>(s.c, {x, y}), [&](auto values) {
      constexpr int V = decltype(values)::value;
      const size_t threads = cells * s.c / V;
      if (threads <= kMaxNarrowIndex) {
        maxpool_nhwc_forward_kernel<T, V, uint32_t><<<grid_for(threads), kBlock, 0, stream>>>(
            s, static_cast<const T*>(x), static_cast<T*>(y));
      } else {
        maxpool_nhwc_forward_kernel<T, V, size_t><<<grid_for(threads), kBlock, 0, stream>>>(
            s, static_cast<const T*>(x), static_cast<T*>(y));
      }
    });
  });
  check_launch("maxpool2d_nhwc_forward");
}

void maxpool2d_nhwc_backward(DType t, const Pool2dShape& s, const void* x, const void* y,
                             const void* dy, void* dx, cudaStream_t stream) {
  const size_t cells = static_cast<size_t>(s.n) * s.h * s.w;
  if (cells == 0 || s.c == 0) return;
  with_act_type(t, [&](auto type) {
    using T = typename decltype(type)::type;
    with_pack<T>(pack_values<T>(s.c, {x, y, dy, dx}), [&](auto values) {
      constexpr int V = decltype(values)::value;
      const size_t threads = cells * s.c / V;
      const T *xt = static_cast<const T*>(x), *yt = static_cast<const T*>(y),
              *dyt = static_cast<const T*>(dy);
      if (threads <= kMaxNarrowIndex) {
        maxpool_nhwc_backward_kernel<T, V, uint32_t>
            <<<grid_for(threads), kBlock, 0, stream>>>(s, xt, yt, dyt, static_cast<T*>(dx));
      } else {
        maxpool_nhwc_backward_kernel<T, V, size_t>
            <<<grid_for(threads), kBlock, 0, stream>>>(s, xt, yt, dyt, static_cast<T*>(dx));
      }
    });
  });
  check_launch("maxpool2d_nhwc_backward");
}

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
