// CPU max and average pooling over NCHW planes. Each window is clipped to the input, so
// padded cells never win a max; the average always divides by kh * kw (padding counts as
// zeros). Max-pool backward scans each window again instead of storing arg-max indices.
#include <algorithm>

#include "backend/cpu_backend.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

void check_shape(const Pool2dShape& s) {
  HT_REQUIRE(s.n >= 1 && s.c >= 1 && s.h >= 1 && s.w >= 1 && s.kh >= 1 && s.kw >= 1 &&
                 s.stride_h >= 1 && s.stride_w >= 1 && s.pad_h >= 0 && s.pad_w >= 0,
             "pool2d: invalid shape");
  // pad < kernel keeps at least one input cell in every window.
  HT_REQUIRE(s.pad_h < s.kh && s.pad_w < s.kw, "pool2d: padding must be smaller than the kernel");
  HT_REQUIRE(s.out_h() >= 1 && s.out_w() >= 1, "pool2d: input smaller than the kernel");
}

// Input rows [y0, y1) and columns [x0, x1) of output (oy, ox)'s window.
struct Window {
  int y0, y1, x0, x1;
};

Window window(const Pool2dShape& s, int oy, int ox) {
  const int ys = oy * s.stride_h - s.pad_h, xs = ox * s.stride_w - s.pad_w;
  return {std::max(ys, 0), std::min(ys + s.kh, s.h), std::max(xs, 0), std::min(xs + s.kw, s.w)};
}

// Index in the plane of the window's first maximum (row-major scan, strict >). The
// selects are written so they compile to conditional moves: on random data a branch here
// mispredicts about once per window.
int argmax(const Pool2dShape& s, const float* plane, const Window& win) {
  int best = win.y0 * s.w + win.x0;
  float best_value = plane[best];
  for (int iy = win.y0; iy < win.y1; ++iy) {
    for (int ix = win.x0; ix < win.x1; ++ix) {
      const int idx = iy * s.w + ix;
      const bool better = plane[idx] > best_value;
      best = better ? idx : best;
      best_value = better ? plane[idx] : best_value;
    }
  }
  return best;
}

float window_max(const Pool2dShape& s, const float* plane, const Window& win) {
  float m = plane[win.y0 * s.w + win.x0];
  for (int iy = win.y0; iy < win.y1; ++iy) {
    for (int ix = win.x0; ix < win.x1; ++ix) m = std::max(m, plane[iy * s.w + ix]);
  }
  return m;
}

size_t planes(const Pool2dShape& s) { return static_cast<size_t>(s.n) * s.c; }
size_t in_plane(const Pool2dShape& s) { return static_cast<size_t>(s.h) * s.w; }
size_t out_plane(const Pool2dShape& s) { return static_cast<size_t>(s.out_h()) * s.out_w(); }

// Windows that tile the input without overlap or padding (kernel == stride, the usual 2x2
// pooling) take a faster path: each input cell belongs to at most one window, so backward
// writes dx once instead of zero-filling and accumulating.
bool tiles(const Pool2dShape& s) {
  return s.kh == s.stride_h && s.kw == s.stride_w && s.pad_h == 0 && s.pad_w == 0;
}

// 2x2 stride-2 max pooling of one plane (the usual case), with no window bookkeeping.
void maxpool_forward_2x2(const Pool2dShape& s, const float* in, float* out) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int oy = 0; oy < oh; ++oy) {
    const float* r0 = in + 2 * oy * s.w;
    const float* r1 = r0 + s.w;
    float* o = out + oy * ow;
    for (int ox = 0; ox < ow; ++ox) {
      o[ox] = std::max(std::max(r0[2 * ox], r0[2 * ox + 1]), std::max(r1[2 * ox], r1[2 * ox + 1]));
    }
  }
}

// Tiled max-pool backward of one plane: each window's first maximum gets its dy, every
// other cell 0. With no overlap there is nothing to accumulate, and a 2x2 window (the
// common case) is unrolled into selects that write all four cells.
void maxpool_backward_tiled(const Pool2dShape& s, const float* in, const float* d_out,
                            float* d_in) {
  const int oh = s.out_h(), ow = s.out_w();
  if (s.kh != 2 || s.kw != 2) {
    std::fill(d_in, d_in + in_plane(s), 0.0f);
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        const Window win{oy * s.kh, (oy + 1) * s.kh, ox * s.kw, (ox + 1) * s.kw};
        d_in[argmax(s, in, win)] = d_out[oy * ow + ox];
      }
    }
    return;
  }
  for (int oy = 0; oy < oh; ++oy) {
    const float* r0 = in + 2 * oy * s.w;
    const float* r1 = r0 + s.w;
    float* d0 = d_in + 2 * oy * s.w;
    float* d1 = d0 + s.w;
    for (int ox = 0; ox < ow; ++ox) {
      const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
      // First maximum in scan order a, b, c, d (strict >, as in argmax()).
      int best = 0;
      float m = a;
      best = b > m ? 1 : best;
      m = b > m ? b : m;
      best = c > m ? 2 : best;
      m = c > m ? c : m;
      best = d > m ? 3 : best;
      const float g = d_out[oy * ow + ox];
      d0[2 * ox] = best == 0 ? g : 0.0f;
      d0[2 * ox + 1] = best == 1 ? g : 0.0f;
      d1[2 * ox] = best == 2 ? g : 0.0f;
      d1[2 * ox + 1] = best == 3 ? g : 0.0f;
    }
    // An odd width leaves a last column no window covers.
    if (s.w > 2 * ow) d0[s.w - 1] = d1[s.w - 1] = 0.0f;
  }
  // An odd height leaves a last row.
  std::fill(d_in + static_cast<size_t>(2 * oh) * s.w, d_in + in_plane(s), 0.0f);
}

}  // namespace

void CpuBackend::maxpool2d_forward_f32(const Pool2dShape& s, const float* x, float* y) {
  check_shape(s);
  const int oh = s.out_h(), ow = s.out_w();
  parallel(planes(s), grain_for(in_plane(s)), [&](size_t lo, size_t hi) {
    for (size_t pl = lo; pl < hi; ++pl) {
      const float* in = x + pl * in_plane(s);
      float* out = y + pl * out_plane(s);
      if (s.kh == 2 && s.kw == 2 && tiles(s)) {
        maxpool_forward_2x2(s, in, out);
        continue;
      }
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) out[oy * ow + ox] = window_max(s, in, window(s, oy, ox));
      }
    }
  });
}

void CpuBackend::maxpool2d_backward_f32(const Pool2dShape& s, const float* x, const float* dy,
                                        float* dx) {
  check_shape(s);
  const int oh = s.out_h(), ow = s.out_w();
  parallel(planes(s), grain_for(in_plane(s)), [&](size_t lo, size_t hi) {
    for (size_t pl = lo; pl < hi; ++pl) {
      const float* in = x + pl * in_plane(s);
      const float* d_out = dy + pl * out_plane(s);
      float* d_in = dx + pl * in_plane(s);
      if (tiles(s)) {
        maxpool_backward_tiled(s, in, d_out, d_in);
        continue;
      }
      std::fill(d_in, d_in + in_plane(s), 0.0f);
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          d_in[argmax(s, in, window(s, oy, ox))] += d_out[oy * ow + ox];
        }
      }
    }
  });
}

void CpuBackend::avgpool2d_forward_f32(const Pool2dShape& s, const float* x, float* y) {
  check_shape(s);
  const int oh = s.out_h(), ow = s.out_w();
  const float inv_area = 1.0f / static_cast<float>(s.kh * s.kw);
  parallel(planes(s), grain_for(in_plane(s)), [&](size_t lo, size_t hi) {
    for (size_t pl = lo; pl < hi; ++pl) {
      const float* in = x + pl * in_plane(s);
      float* out = y + pl * out_plane(s);
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const Window win = window(s, oy, ox);
          float sum = 0.0f;
          for (int iy = win.y0; iy < win.y1; ++iy) {
            for (int ix = win.x0; ix < win.x1; ++ix) sum += in[iy * s.w + ix];
          }
          out[oy * ow + ox] = sum * inv_area;
        }
      }
    }
  });
}

void CpuBackend::avgpool2d_backward_f32(const Pool2dShape& s, const float* dy, float* dx) {
  check_shape(s);
  const int oh = s.out_h(), ow = s.out_w();
  const float inv_area = 1.0f / static_cast<float>(s.kh * s.kw);
  parallel(planes(s), grain_for(in_plane(s)), [&](size_t lo, size_t hi) {
    for (size_t pl = lo; pl < hi; ++pl) {
      const float* d_out = dy + pl * out_plane(s);
      float* d_in = dx + pl * in_plane(s);
      std::fill(d_in, d_in + in_plane(s), 0.0f);
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const Window win = window(s, oy, ox);
          const float g = d_out[oy * ow + ox] * inv_area;
          for (int iy = win.y0; iy < win.y1; ++iy) {
            for (int ix = win.x0; ix < win.x1; ++ix) d_in[iy * s.w + ix] += g;
          }
        }
      }
    }
  });
}

}  // namespace hpctrain
