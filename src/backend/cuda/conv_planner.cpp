#include "backend/cuda/conv_planner.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace hpctrain::cuda {
namespace {

// cuDNN Find run twice (find(perf, &count) fills perf sorted by time): each algorithm's
// time becomes the sum of its two, re-sorted, so one noisy measurement decides less.
template <typename Perf, typename Find>
void find_twice(Perf* perf, int capacity, int& count, Find&& find) {
  std::vector<Perf> again(static_cast<size_t>(capacity));
  int n = 0;
  find(perf, &count);
  find(again.data(), &n);
  for (int i = 0; i < count; ++i) {
    const auto same = std::find_if(again.begin(), again.begin() + n, [&](const Perf& q) {
      return q.algo == perf[i].algo && q.mathType == perf[i].mathType;
    });
    if (same == again.begin() + n || same->status != CUDNN_STATUS_SUCCESS) {
      perf[i].status = CUDNN_STATUS_NOT_SUPPORTED;  // failed once: not a candidate
    } else {
      perf[i].time += same->time;
    }
  }
  std::stable_sort(perf, perf + count, [](const Perf& a, const Perf& b) {
    const bool ok_a = a.status == CUDNN_STATUS_SUCCESS, ok_b = b.status == CUDNN_STATUS_SUCCESS;
    return ok_a != ok_b ? ok_a : a.time < b.time;
  });
}

// The first algorithm of a ranking (heuristics' or Find's, best first) that fits the
// workspace limit (and is deterministic when asked).
template <typename Perf>
const Perf& pick(const Perf* perf, int count, size_t limit, bool deterministic, const char* what) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > limit) continue;
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return perf[i];
  }
  fail(what, "no algorithm fits the workspace limit", __FILE__, __LINE__);
}

// A convolution of s with float32 arithmetic for every data type (PSEUDO_HALF /
// PSEUDO_BFLOAT16 for 16-bit data), and `math`.
void set_conv(ConvDesc& d, const Conv2dShape& s, cudnnMathType_t math) {
  HT_CUDA(cudnnSetConvolution2dDescriptor(d.get(), s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  HT_CUDA(cudnnSetConvolutionMathType(d.get(), math));
}

}  // namespace

ConvPlanner::ConvPlanner(cudnnHandle_t cudnn, cudaStream_t stream, DType act, bool nhwc, bool tf32,
                         bool deterministic, std::function<void()> warm_up)
    : cudnn_(cudnn),
      stream_(stream),
      act_(act),
      nhwc_(nhwc),
      tf32_(tf32),
      deterministic_(deterministic),
      warm_up_(std::move(warm_up)) {}

size_t ConvPlanner::workspace_bytes(const Conv2dShape& s) {
  const size_t need = plan(s, kSetupWorkspaceLimit).workspace;
  // Every layer of this geometry was given at least the smallest answer (two models of
  // different batch sizes may share the backend).
  const auto [it, fresh] = setup_need_.emplace(geometry(s), need);
  if (!fresh) it->second = std::min(it->second, need);
  max_workspace_ = std::max(max_workspace_, need);
  return need;
}

const ConvPlan& ConvPlanner::plan(const Conv2dShape& s) {
  const auto it = setup_need_.find(geometry(s));
  return plan(s, it != setup_need_.end() ? it->second : max_workspace_);
}

const ConvPlan& ConvPlanner::plan(const Conv2dShape& s, size_t limit) {
  const Key key{s.n,  s.c_in,     s.h,        s.w,     s.c_out, s.kh,
                s.kw, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  ConvPlan& p = plans_[key];
  try {
    choose(p, s, limit);
  } catch (...) {
    plans_.erase(key);  // no half-made plan (algorithm 0, no workspace) for the next call
    throw;
  }
  return p;
}

void ConvPlanner::choose(ConvPlan& p, const Conv2dShape& s, size_t limit) {
  const cudnnDataType_t type = cudnn_type(act_);
  set_tensor(p.x, type, s.n, s.c_in, s.h, s.w, nhwc_);
  set_tensor(p.y, type, s.n, s.c_out, s.out_h(), s.out_w(), nhwc_);
  HT_CUDA(cudnnSetFilter4dDescriptor(p.w.get(), type, cudnn_format(nhwc_), s.c_out, s.c_in, s.kh,
                                     s.kw));
  // The math types the candidates may use. fp32: plain FMA arithmetic (the CPU backend's
  // results); tf32: tensor cores allowed; 16-bit data: tensor cores, which take it as it is
  // (no rounding of the operands). The rankings below name each candidate's own.
  cudnnMathType_t math = tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  if (act_ != DType::kF32) math = CUDNN_TENSOR_OP_MATH;
  ConvDesc& conv = p.conv_fwd;  // the candidates' descriptor; then forward's
  set_conv(conv, s, math);
  const bool measure = !deterministic_;
  constexpr int kFwd = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  constexpr int kBwdData = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  constexpr int kBwdFilter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  cudnnConvolutionFwdAlgoPerf_t fwd[kFwd];
  cudnnConvolutionBwdDataAlgoPerf_t bd[kBwdData];
  cudnnConvolutionBwdFilterAlgoPerf_t bf[kBwdFilter];
  int nf = 0, nd = 0, ng = 0;
  HT_CUDA(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, p.x.get(), p.w.get(), conv.get(),
                                                 p.y.get(), kFwd, &nf, fwd));
  HT_CUDA(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn_, p.w.get(), p.y.get(), conv.get(),
                                                      p.x.get(), kBwdData, &nd, bd));
  HT_CUDA(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn_, p.x.get(), p.y.get(), conv.get(),
                                                        p.w.get(), kBwdFilter, &ng, bf));
  if (measure) {
    // Scratch tensors and the largest workspace any candidate within the limit asks for.
    size_t ws = 0;
    auto widen = [&](const auto* perf, int count) {
      for (int i = 0; i < count; ++i) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) {
          ws = std::max(ws, perf[i].memory);
        }
      }
    };
    widen(fwd, nf);
    widen(bd, nd);
    widen(bf, ng);
    const size_t bytes = dtype_size(act_);
    const size_t nx = size_t(s.n) * s.c_in * s.h * s.w;
    const size_t ny = size_t(s.n) * s.c_out * s.out_h() * s.out_w();
    const size_t nw = size_t(s.c_out) * s.c_in * s.kh * s.kw;
    Scratch x(nx * bytes, stream_), y(ny * bytes, stream_), w(nw * bytes, stream_),
        work(ws, nullptr);
    if (warm_up_) {
      warm_up_();
      warm_up_ = nullptr;
    }
    find_twice(fwd, kFwd, nf, [&](cudnnConvolutionFwdAlgoPerf_t* out, int* n) {
      HT_CUDA(cudnnFindConvolutionForwardAlgorithmEx(cudnn_, p.x.get(), x.p, p.w.get(), w.p,
                                                     conv.get(), p.y.get(), y.p, kFwd, n, out,
                                                     work.p, ws));
    });
    find_twice(bd, kBwdData, nd, [&](cudnnConvolutionBwdDataAlgoPerf_t* out, int* n) {
      HT_CUDA(cudnnFindConvolutionBackwardDataAlgorithmEx(cudnn_, p.w.get(), w.p, p.y.get(), y.p,
                                                          conv.get(), p.x.get(), x.p, kBwdData, n,
                                                          out, work.p, ws));
    });
    find_twice(bf, kBwdFilter, ng, [&](cudnnConvolutionBwdFilterAlgoPerf_t* out, int* n) {
      HT_CUDA(cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnn_, p.x.get(), x.p, p.y.get(), y.p,
                                                            conv.get(), p.w.get(), w.p, kBwdFilter,
                                                            n, out, work.p, ws));
    });
  }
  const auto& f = pick(fwd, nf, limit, deterministic_, "convolution forward");
  const auto& d = pick(bd, nd, limit, deterministic_, "convolution backward data");
  const auto& g = pick(bf, ng, limit, deterministic_, "convolution backward filter");
  p.fwd = f.algo;
  p.bwd_data = d.algo;
  p.bwd_filter = g.algo;
  // As each was timed or ranked (what PyTorch does, too); fp32 keeps FMA arithmetic
  // whatever a ranking names (tensor cores would round the operands to tf32).
  const auto as_ranked = [&](cudnnMathType_t m) { return math == CUDNN_FMA_MATH ? math : m; };
  set_conv(p.conv_fwd, s, as_ranked(f.mathType));
  set_conv(p.conv_bwd_data, s, as_ranked(d.mathType));
  set_conv(p.conv_bwd_filter, s, as_ranked(g.mathType));
  p.workspace = std::max({f.memory, d.memory, g.memory});
}

}  // namespace hpctrain::cuda
