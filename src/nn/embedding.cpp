// Embedding forward (a row lookup) and backward (the rows of dy summed into the table's
// gradient by id), through the backend's embedding operations.
#include "nn/embedding.hpp"

#include <string>

#include "core/error.hpp"
#include "nn/layer_registry.hpp"

namespace hpctrain {
namespace {

// Ids are exact in float32 below 2^24 (the data's int32 ids become float32 values).
constexpr int64_t kMaxVocab = int64_t{1} << 24;

// The most ids activations of type t hold exactly (0 .. limit - 1): integers up to 2^p
// with p bits of significand (bfloat16 8, float16 11).
int64_t exact_ids(DType t) {
  switch (t) {
    case DType::kBF16:
      return 256;
    case DType::kF16:
      return 2048;
    case DType::kF32:
      break;
  }
  return kMaxVocab;
}

}  // namespace

Embedding::Embedding(std::string name, int64_t vocab, int64_t dim)
    : Layer(std::move(name)), vocab_(vocab), dim_(dim) {
  HT_REQUIRE(vocab >= 0 && dim >= 1, "embedding: needs vocab >= 0 and dim >= 1");
}

void Embedding::fit_vocab(int64_t data_vocab, DType act_type) {
  if (vocab_ == 0) {
    vocab_ = data_vocab;
  } else if (vocab_ < data_vocab) {
    throw UsageError("embedding '" + name() + "' has vocab " + std::to_string(vocab_) +
                     " but the data's vocab_size is " + std::to_string(data_vocab));
  }
  if (vocab_ > exact_ids(act_type)) {
    throw UsageError("embedding '" + name() + "' has vocab " + std::to_string(vocab_) +
                     ", more than the " + std::to_string(exact_ids(act_type)) + " token ids " +
                     to_string(act_type) +
                     " activations hold exactly (use precision fp32 or a smaller vocab)");
  }
}

Dims Embedding::output_dims(const Dims& input) {
  if (vocab_ <= 0) {
    throw UsageError("model.layers: embedding '" + name() +
                     "' has vocab 0 and no token data to take the vocab_size from");
  }
  steps_ = dims_elems(input);
  return {steps_, dim_};
}

void Embedding::allocate(Backend& backend, int64_t max_batch) {
  const DType t = backend.act_type();
  HT_REQUIRE(vocab_ <= exact_ids(t), "embedding '" + name() + "': vocab " + std::to_string(vocab_) +
                                         " is not exact in " + to_string(t) +
                                         " (fit_vocab was not called)");
  zeros_ = DeviceArray<std::byte>(
      backend, static_cast<size_t>(max_batch * steps_) * dtype_size(t));  // zero-filled
}

void Embedding::bind(const ParamSlice& p) {
  table_ = p.weights_at(0);
  dtable_ = p.grads;
}

void Embedding::init_params(Rng& rng, float* host_params) {
  // N(0, 1), as torch.nn.Embedding.
  const size_t n = param_count();
  for (size_t i = 0; i < n; ++i) host_params[i] = static_cast<float>(rng.normal());
}

void Embedding::forward(Backend& backend, const Tensor& x, Tensor& y, bool /*training*/) {
  backend.embedding_forward(x.data, table_, y.data, static_cast<int>(x.batch * steps_),
                            static_cast<int>(vocab_), static_cast<int>(dim_));
}

void Embedding::backward(Backend& backend, const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                         Tensor* dx) {
  const int rows = static_cast<int>(x.batch * steps_);
  backend.embedding_backward(x.data, dy.data, dtable_, rows, static_cast<int>(vocab_),
                             static_cast<int>(dim_));
  if (dx != nullptr) {
    backend.copy(zeros_.data(), dx->data,
                 static_cast<size_t>(rows) * dtype_size(backend.act_type()));
  }
}

extern const LayerType kEmbeddingLayer = {
    {"embedding",
     "token ids (a sequence of T ids, as token data's samples [1, 1, T]) to rows of a "
     "trained table [vocab, dim], as PyTorch's nn.Embedding: outputs [T, dim], a sequence for "
     "lstm, gru and per_step dense layers; N(0, 1) initialisation",
     {{"dim", integer(1, kMaxChannels), std::nullopt, "features per token"},
      {"vocab", integer(0, kMaxVocab), int64_t{0},
       "the table's rows: ids 0 .. vocab - 1; 0: the data's vocab_size. At most 256 with "
       "precision bf16 and 2048 with fp16 (the ids must be exact in the activation type)"}}},
    [](const LayerSpec& s) -> std::unique_ptr<Layer> {
      return std::make_unique<Embedding>(s.name, s.integer("vocab"), s.integer("dim"));
    }};

}  // namespace hpctrain
