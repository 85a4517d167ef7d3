// Geometry of a 2-D convolution or pooling over an NCHW float32 batch: plain structs
// every backend understands (cuDNN descriptors are built from the same fields).
// Output size is floor((in + 2 * pad - kernel) / stride) + 1, as in PyTorch and cuDNN.
// constexpr, so CUDA kernels can use them (nvcc --expt-relaxed-constexpr).
#pragma once

#include <cstdint>

namespace hpctrain {

// Output extent along one axis; <= 0 when the padded input is smaller than the kernel.
constexpr int conv_out_size(int in, int kernel, int stride, int pad) {
  const int span = in + 2 * pad - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

// x [n, c_in, h, w] * w [c_out, c_in, kh, kw] -> y [n, c_out, out_h(), out_w()].
struct Conv2dShape {
  int n = 0, c_in = 0, h = 0, w = 0;
  int c_out = 0, kh = 0, kw = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;

  constexpr int out_h() const { return conv_out_size(h, kh, stride_h, pad_h); }
  constexpr int out_w() const { return conv_out_size(w, kw, stride_w, pad_w); }
  // Elements of one filter (the GEMM inner dimension): c_in * kh * kw, in 64 bits (legal
  // keys reach 65536 * 1024 * 1024; Conv2d::output_dims refuses a layer past INT_MAX).
  constexpr int64_t patch() const { return int64_t{c_in} * kh * kw; }
};

// x [n, c, h, w] -> y [n, c, out_h(), out_w()], each channel pooled on its own.
// Padded cells never win a max; for the average they count as zeros (the window size
// kh * kw is always the divisor, PyTorch's count_include_pad default).
struct Pool2dShape {
  int n = 0, c = 0, h = 0, w = 0;
  int kh = 0, kw = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;

  constexpr int out_h() const { return conv_out_size(h, kh, stride_h, pad_h); }
  constexpr int out_w() const { return conv_out_size(w, kw, stride_w, pad_w); }
};

}  // namespace hpctrain
