// cuDNN convolution plans: for each convolution shape, its descriptors and the forward,
// backward-data and backward-filter algorithms, chosen once. Deterministic runs take the
// heuristics' ranking (the same choice every run, deterministic algorithms only); others
// time the candidates on the GPU (cuDNN Find, twice, summed; what PyTorch's
// cudnn.benchmark does), after a warm-up that lets an idle GPU's clocks ramp up.
// Data and filters are of the backend's activation type (for 16-bit types cuDNN's
// "pseudo" configurations: float32 arithmetic on tensor cores), in NCHW / KCRS order or
// NHWC / KRSC (channels last).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <map>
#include <tuple>

#include "backend/cuda/cudnn_util.hpp"
#include "core/conv_shape.hpp"
#include "core/dtype.hpp"

namespace hpctrain::cuda {

struct ConvPlan {
  TensorDesc x, y;
  FilterDesc w;  // also the filter gradient's: cuDNN writes dw in the activation type
  // One convolution descriptor per direction, each with the math type its algorithm was
  // timed (or ranked) with: cuDNN takes the algorithm and the descriptor's math type
  // together, and another math type may run another kernel than the one chosen.
  ConvDesc conv_fwd, conv_bwd_data, conv_bwd_filter;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t workspace = 0;  // the largest of the three algorithms' needs
};

class ConvPlanner {
 public:
  // `warm_up` runs once, before the first timing. The handle runs on `stream`. `act` is
  // the type of data and filters; tf32 applies to float32 only.
  // With nhwc, data is NHWC and filters KRSC.
  ConvPlanner(cudnnHandle_t cudnn, cudaStream_t stream, DType act, bool nhwc, bool tf32,
              bool deterministic, std::function<void()> warm_up);

  // At set-up: the cuDNN workspace shape s needs, its algorithms chosen within a generous
  // limit. The answer bounds the same convolution at other batch sizes.
  size_t workspace_bytes(const Conv2dShape& s);
  // The plan for s. A shape first seen inside the step loop (a smaller last batch) must
  // fit the workspace its layer was given, which is at least what workspace_bytes()
  // answered for the same convolution at set-up: its algorithms are chosen within that.
  // (A convolution never asked about at set-up gets the largest answer.)
  const ConvPlan& plan(const Conv2dShape& s);

 private:
  const ConvPlan& plan(const Conv2dShape& s, size_t limit);
  // Fills p: descriptors, then algorithms (timed unless deterministic) within `limit`.
  void choose(ConvPlan& p, const Conv2dShape& s, size_t limit);

  static constexpr size_t kSetupWorkspaceLimit = size_t{1} << 30;
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, int>;
  // The convolution without its batch size.
  using Geometry = std::tuple<int, int, int, int, int, int, int, int, int, int>;
  static Geometry geometry(const Conv2dShape& s) {
    return {s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
  }

  cudnnHandle_t cudnn_;
  cudaStream_t stream_;
  DType act_;
  bool nhwc_, tf32_, deterministic_;
  std::function<void()> warm_up_;  // emptied once run
  std::map<Key, ConvPlan> plans_;
  std::map<Geometry, size_t> setup_need_;  // workspace_bytes()'s smallest answer
  size_t max_workspace_ = 0;
};

}  // namespace hpctrain::cuda
