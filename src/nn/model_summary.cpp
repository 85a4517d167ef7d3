// model_summary: a fixed-width table built from the Layer interface.
#include "nn/model_summary.hpp"

#include <cstdio>

namespace hpctrain {
namespace {

// 12345678 -> "12,345,678".
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string row(const std::string& name, const char* type, const std::string& out, int64_t params,
                int64_t macs) {
  // A name or shape wider than its column pushes the rest along, whole.
  const auto padded = [](const std::string& text, size_t width) {
    return text + std::string(text.size() < width ? width - text.size() : 0, ' ') + " ";
  };
  char numbers[48];
  std::snprintf(numbers, sizeof(numbers), "%12s %12.2f", grouped(params).c_str(),
                2e-6 * static_cast<double>(macs));
  return padded(name, 26) + padded(type, 15) + padded(out, 12) + numbers;
}

// The timing columns of a layer or part: forward and backward ms, forward GFLOP/s.
std::string time_columns(int64_t batch, double forward_s, double backward_s, int64_t macs) {
  char buf[96];
  const double flops = 2.0 * static_cast<double>(macs) * static_cast<double>(batch);
  std::snprintf(buf, sizeof(buf), " %9.3f %9.3f %9.0f", 1e3 * forward_s, 1e3 * backward_s,
                forward_s > 0 ? flops / forward_s / 1e9 : 0.0);
  return buf;
}

}  // namespace

std::string model_summary(const Model& model, const LayerTimes* times) {
  std::string s = "input " + dims_text(model.input_dims()) + "\n";
  char head[200];
  std::snprintf(head, sizeof(head), "%-26s %-15s %-12s %12s %12s%s\n", "layer", "type", "output",
                "params", "MFLOPs", times ? "    fwd_ms    bwd_ms  fwd_GF/s" : "");
  s += head;
  int64_t macs = 0;
  double layers_s = 0;
  bool parts_timed = false;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& l = *model.layers()[i];
    s += row(l.name(), l.type(), dims_text(model.layer_output_dims(i)),
             static_cast<int64_t>(l.param_count()), l.forward_macs());
    if (times) {
      s += time_columns(times->batch, times->forward_s[i], times->backward_s[i], l.forward_macs());
      layers_s += times->forward_s[i] + times->backward_s[i];
    }
    s += "\n";
    const std::vector<const Layer*> parts = l.sublayers();
    for (size_t p = 0; p < parts.size(); ++p) {
      const Layer& sub = *parts[p];
      s += row("  " + sub.name(), sub.type(), "", static_cast<int64_t>(sub.param_count()),
               sub.forward_macs());
      if (times && i < times->part_forward_s.size() && p < times->part_forward_s[i].size()) {
        parts_timed = true;
        s += time_columns(times->batch, times->part_forward_s[i][p], times->part_backward_s[i][p],
                          sub.forward_macs());
      }
      s += "\n";
    }
    macs += l.forward_macs();
  }
  char total[320];
  std::snprintf(total, sizeof(total),
                "total: %s parameters (%.1f MiB float32), %s state values, %.1f MFLOPs forward "
                "per sample (2 per multiply-add; a training step is about 3x)\n",
                grouped(static_cast<int64_t>(model.param_count())).c_str(),
                static_cast<double>(model.param_count()) * 4 / (1 << 20),
                grouped(static_cast<int64_t>(model.state_count())).c_str(),
                2e-6 * static_cast<double>(macs));
  s += total;
  if (parts_timed) {
    s += "parts of a block: each timed alone (the block's time includes their "
         "synchronisations); a batchnorm's includes the relu and residual addition fused "
         "with it\n";
  }
  if (times) {
    char step[320];
    std::snprintf(
        step, sizeof(step),
        "step at batch %lld (forward, loss, backward; no optimizer or input): %.3f ms, "
        "%.0f samples/s, %.0f GFLOP/s; the layers timed one by one sum to %.3f ms\n",
        static_cast<long long>(times->batch), 1e3 * times->step_s,
        static_cast<double>(times->batch) / times->step_s,
        6.0 * static_cast<double>(macs) * static_cast<double>(times->batch) / times->step_s / 1e9,
        1e3 * layers_s);
    s += step;
  }
  return s;
}

}  // namespace hpctrain
