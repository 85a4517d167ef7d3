// Generation by a language model trained on windows of T tokens from a zero state: the
// next token after a context depends only on the last T tokens, so each step runs the
// model once on the last min(T, n) tokens, placed at the start of the window. The model
// is causal (an embedding, recurrent layers, per-step layers), so the padding after the
// context does not change the prediction at the context's last position, which is read.
#include "apps/generate.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "apps/model_target.hpp"
#include "backend/cpu_backend.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/option_words.hpp"
#include "core/random.hpp"
#include "data-tools/text_tokens.hpp"
#include "data/dataset_files.hpp"

namespace hpctrain {
namespace {

constexpr const char* kGenerateUsage =
    "usage: hpctrain generate TARGET --prompt TEXT [--length N] [--checkpoint PATH]\n"
    "                         [--temperature T] [--seed S] [--set key.path=value]...\n"
    "\n"
    "Prints TEXT and N (default 200) tokens sampled from a language model (data.train: a\n"
    "next-token file with a vocabulary). TARGET is a run directory (its config.yaml and\n"
    "newest valid checkpoint), a checkpoint (with the config stored in it) or a config (the\n"
    "newest valid checkpoint in its checkpoint.dir); --checkpoint PATH takes that\n"
    "checkpoint's parameters instead. Each token is drawn from softmax(logits / T)\n"
    "(default 1; 0: always the most likely), from random stream S (default 1): the same\n"
    "arguments print the same text. Runs on one CPU core, without MPI.\n";

struct Options {
  TargetArgs target;
  std::string prompt;
  int64_t length = 200;
  double temperature = 1.0;
  uint64_t seed = 1;
  bool has_prompt = false;
};

double parse_number(const std::string& option, const std::string& text, double lo, double hi) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v >= lo && v <= hi)) {
    throw UsageError("generate: " + option + ": expected a number in [" +
                     std::to_string(static_cast<long long>(lo)) + ", " +
                     std::to_string(static_cast<long long>(hi)) + "], got '" + text + "'");
  }
  return v;
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    if (take_target_arg(args, i, o.target, "generate")) continue;
    const bool has_value = i + 1 < args.size();
    const std::string& a = args[i];
    if (a == "--prompt" && has_value) {
      o.prompt = args[++i];
      o.has_prompt = true;
    } else if (a == "--length" && has_value) {
      const double v = parse_number(a, args[++i], 1, 1e6);
      if (v != std::floor(v)) throw UsageError("generate: --length: expected a whole number");
      o.length = static_cast<int64_t>(v);
    } else if (a == "--temperature" && has_value) {
      o.temperature = parse_number(a, args[++i], 0, 100);
    } else if (a == "--seed" && has_value) {
      const double v = parse_number(a, args[++i], 0, 9e15);
      if (v != std::floor(v)) throw UsageError("generate: --seed: expected a whole number");
      o.seed = static_cast<uint64_t>(v);
    } else {
      throw UsageError("generate: unknown or incomplete option '" + a + "' (see --help)");
    }
  }
  if (o.target.target.empty() || !o.has_prompt) {
    throw UsageError("generate: expected TARGET --prompt TEXT (see --help)");
  }
  if (o.prompt.empty()) throw UsageError("generate: --prompt: empty (give at least one token)");
  return o;
}

// The prompt as ids, split as hpctrain-data text split the training text (characters or
// its word rule; invalid UTF-8 is exit 2); unknown pieces become <unk> where the vocabulary
// has it.
std::vector<int32_t> encode(const std::string& text, const DatasetShape& shape,
                            const std::string& file) {
  std::map<std::string, int32_t> ids;
  for (size_t i = 0; i < shape.vocabulary.size(); ++i) {
    ids.emplace(shape.vocabulary[i], static_cast<int32_t>(i));
  }
  const auto unk = ids.find("<unk>");
  const std::vector<std::string> pieces =
      split_tokens(text, shape.level == "word" ? "word" : "char", "generate: --prompt");
  std::vector<int32_t> out;
  for (const std::string& p : pieces) {
    const auto it = ids.find(p);
    if (it != ids.end()) {
      out.push_back(it->second);
    } else if (unk != ids.end()) {
      out.push_back(unk->second);
    } else {
      throw UsageError("generate: --prompt: '" + one_line(p) + "' is not in the vocabulary of " +
                       file);
    }
  }
  if (out.empty()) throw UsageError("generate: --prompt: no tokens in '" + one_line(text) + "'");
  return out;
}

// Word level: whether a space goes between the text printed last and the next token. None
// at a line's start or end, before closing punctuation or after an opening bracket, as the
// text the words were split from had them.
bool spaced(const std::string& before, const std::string& token) {
  if (before.empty() || token.empty()) return false;
  const char last = before.back(), next = token.size() == 1 ? token[0] : 'a';
  return last != '\n' && last != ' ' && last != '(' && last != '[' && last != '{' &&
         std::string_view("\n.,;:!?)]}").find(next) == std::string_view::npos;
}

// Draws from softmax(logits / temperature); temperature 0 takes the arg-max.
int32_t sample(const float* logits, int64_t n, double temperature, Rng& rng) {
  const int64_t best = std::max_element(logits, logits + n) - logits;
  if (temperature == 0) return static_cast<int32_t>(best);
  std::vector<double> p(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[static_cast<size_t>(i)] = std::exp((logits[i] - logits[best]) / temperature);
    sum += p[static_cast<size_t>(i)];
  }
  double u = rng.uniform() * sum;
  for (int64_t i = 0; i < n; ++i) {
    u -= p[static_cast<size_t>(i)];
    if (u < 0) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(best);  // rounding left u >= 0: the mass ends at the top
}

}  // namespace

int cmd_generate(const std::vector<std::string>& args) {
  if (is_help(args)) {
    std::cout << kGenerateUsage;
    return kExitOk;
  }
  const Options o = parse(args);
  const ModelTarget target = resolve_model_target(o.target);
  const Config& config = target.config;
  const std::unique_ptr<DataSource> data = open_training_data(config);
  const DatasetShape& shape = data->shape();
  if (shape.labels_per_sample <= 1) {
    throw UsageError(data->path() +
                     ": data.train is not a next-token file (/tokens [N, T + 1] "
                     "without /labels): its model does not generate text");
  }
  if (shape.vocabulary.empty()) {
    throw UsageError(data->path() +
                     ": attribute vocabulary is missing: ids cannot be "
                     "turned into text");
  }
  const std::vector<int32_t> prompt = encode(o.prompt, shape, data->path());

  // Read once the prompt is known to be in the vocabulary (a prompt that is not is the
  // error, whatever the checkpoint).
  const LoadedCheckpoint checkpoint = read_target_checkpoint(target, "generate");
  CpuBackend backend(1);
  const std::unique_ptr<Model> model = load_checkpoint_model(backend, config, shape, 1, checkpoint);

  const int64_t steps = shape.w, vocab = shape.num_classes;
  const bool words = shape.level == "word";
  std::vector<int32_t> context = prompt;
  std::vector<float> window(static_cast<size_t>(steps));
  std::vector<float> logits(static_cast<size_t>(steps * vocab));
  Rng rng(o.seed);
  std::cout << o.prompt;
  std::string before = o.prompt;  // the text printed last
  for (int64_t k = 0; k < o.length; ++k) {
    const int64_t m = std::min<int64_t>(steps, static_cast<int64_t>(context.size()));
    std::fill(window.begin(), window.end(), 0.0f);
    std::copy(context.end() - m, context.end(), window.begin());
    const Tensor& out = model->forward(window.data(), 1, /*training=*/false);
    backend.copy_to_host(logits.data(), out.data, logits.size() * sizeof(float));
    const int32_t next = sample(logits.data() + (m - 1) * vocab, vocab, o.temperature, rng);
    context.push_back(next);
    const std::string& token = shape.vocabulary[static_cast<size_t>(next)];
    if (words && spaced(before, token)) std::cout << ' ';
    std::cout << token;
    before = token;
  }
  std::cout << "\n";
  return kExitOk;
}

}  // namespace hpctrain
