// Models a config describes that cannot be built or run: refused when the config is loaded or
// the layers are built, with one message naming the config and the key (exit 2), instead of
// an int overflow (a conv2d's filter past INT_MAX), a layer reading activations as token
// ids, tensor names that collide, or a std::bad_alloc.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "common/usage_error.hpp"
#include "config/config.hpp"
#include "config_test_helpers.hpp"
#include "core/conv_shape.hpp"
#include "core/error.hpp"
#include "nn/alloc_error.hpp"
#include "nn/conv2d.hpp"
#include "nn/dense.hpp"
#include "nn/model.hpp"
#include "nn/presets.hpp"
#include "train/catalog.hpp"

namespace hpctrain {
namespace {

using config_test::expect_error;
using config_test::layer_list;
using test::expect_usage_error;

const std::string kHead = "data:\n  train: t.h5\nmodel:\n  preset: layers\n  layers:\n";

LayerSpec conv(const std::string& name, int64_t filters, int64_t kernel, int64_t padding) {
  return {.type = "conv2d",
          .name = name,
          .values = {{"filters", filters},
                     {"kernel", kernel},
                     {"stride", int64_t{1}},
                     {"padding", padding},
                     {"bias", true}}};
}

// Legal keys (filters up to 65536, kernel up to 1024) make filters of 2^36 weights: counted
// in 64 bits, and refused by the layer (its GEMMs take int sizes).
TEST(ModelRefusals, ConvFiltersPastIntMax) {
  Conv2dShape s;
  s.c_in = 65536;
  s.kh = s.kw = 1024;
  EXPECT_EQ(s.patch(), int64_t{1} << 36);

  Conv2d big("c", Conv2d::Options{1, 1024, 1, 512});
  expect_usage_error(
      [&] {
        big.output_dims({65536, 1, 1});
      },
      {"layer c: ", "65536 input channels", "68719476736 weights"});
  // 65536 channels with a 1x1 kernel are fine.
  Conv2d edge("e", Conv2d::Options{1, 1, 1, 0});
  EXPECT_EQ(edge.output_dims({65536, 1, 1}), (Dims{1, 1, 1}));
  // An output plane of 2^32 positions (the GEMM's columns) is refused too.
  Conv2d wide("w", Conv2d::Options{1, 1, 1, 0});
  expect_usage_error(
      [&] {
        wide.output_dims({1, 65536, 65536});
      },
      {"layer w: ", "an output plane of 65536x65536"});

  // Through the config: named as the other shape errors are.
  const ModelConfig named =
      layer_list({conv("conv2d0", 65536, 1, 0), conv("conv2d1", 1, 1024, 512)});
  expect_usage_error(
      [&] {
        build_layers(named, ModelData{10}, {1, 1, 1}, "x.yaml");
      },
      {"x.yaml: model: layer conv2d1: ", "more than 2147483647"});
}

TEST(ModelRefusals, EmbeddingOnlyFirst) {
  expect_error(kHead + "    - {type: embedding, dim: 8}\n    - {type: embedding, dim: 8}\n",
               "FILE:7: model.layers[1].type: embedding must be the first layer (it reads the "
               "data's token ids)");
  expect_error(kHead + "    - {type: relu}\n    - {type: embedding, dim: 8}\n",
               "FILE:7: model.layers[1].type: embedding must be the first layer (it reads the "
               "data's token ids)");
  const Config ok = load_config(
      config_test::write_yaml(kHead + "    - {type: embedding, dim: 8}\n    - {type: lstm, "
                                      "units: 4}\n"),
      {}, catalog());
  EXPECT_EQ(ok.model.layers.size(), 2u);
}

TEST(ModelRefusals, NamesOfABasicBlocksParts) {
  const std::string block = "    - {type: basic_block, name: b, filters: 2}\n";
  const std::string part = "    - {type: conv2d, name: b.conv1, filters: 2, kernel: 3}\n";
  const std::string why =
      ".name: 'b.conv1' starts with 'b.', the prefix of the parts of basic_block 'b' "
      "(model.layers[";
  expect_error(kHead + block + part,
               "FILE:7: model.layers[1]" + why + "0]: b.conv1, b.bn1, ...); rename one of them");
  expect_error(kHead + part + block,
               "FILE:6: model.layers[0]" + why + "1]: b.conv1, b.bn1, ...); rename one of them");
  // A dot elsewhere is fine: "bb.conv1" is not a part of "b".
  load_config(
      config_test::write_yaml(kHead + block +
                              "    - {type: conv2d, name: bb.conv1, filters: 2, kernel: "
                              "1}\n    - {type: conv2d, name: b2, filters: 2, kernel: 1}\n"),
      {}, catalog());
}

// The rate is a float32 in the layer: 0.99999999 is below 1 as a double, 1 as a float.
TEST(ModelRefusals, DropoutRateAsFloat) {
  expect_error(kHead + "    - {type: dropout, rate: 0.99999999}\n",
               "FILE:6: model.layers[0].rate: expected a number >= 0 and < 1, got 0.99999999, "
               "which is 1 as the float32 it is used as");
  load_config(config_test::write_yaml(kHead + "    - {type: dropout, rate: 0.9999999}\n"), {},
              catalog());
}

TEST(ModelRefusals, ResNetWidthHasABound) {
  const std::string head = "data:\n  train: t.h5\nmodel:\n  preset: resnet18\n";
  expect_error(head + "  width: 8193\n",
               "FILE:5: model.width: expected an integer <= 8192, got 8193");
  expect_error(head + "  width: 2147483647\n",
               "FILE:5: model.width: expected an integer <= 8192, got 2147483647");
  EXPECT_EQ(
      load_config(config_test::write_yaml(head + "  width: 8192\n"), {}, catalog()).model.width,
      8192);
}

// A layer's own refusal while the list is built names the config and the entry.
TEST(ModelRefusals, LayerErrorsNameTheEntry) {
  const ModelConfig drop =
      layer_list({{.type = "dropout", .name = "d", .values = {{"rate", 1.0}}}});
  expect_usage_error([&] { build_layers(drop, ModelData{10}, {4}, "x.yaml"); },
                     {"x.yaml: model.layers[0]: layer d: dropout needs 0 <= p < 1"});

  // An embedding's vocab against the data's and the activations' type: at build time.
  const ModelConfig lm = layer_list(
      {{.type = "embedding", .name = "e", .values = {{"vocab", int64_t{300}}, {"dim", int64_t{4}}}},
       {.type = "lstm",
        .name = "l",
        .values = {{"units", int64_t{4}}, {"layers", int64_t{1}}, {"return_sequences", false}}}});
  ModelData data{10};
  data.vocab_size = 200;
  EXPECT_NO_THROW(build_layers(lm, data, {1, 1, 5}, "x.yaml"));
  data.act_type = DType::kBF16;
  expect_usage_error(
      [&] {
        build_layers(lm, data, {1, 1, 5}, "x.yaml");
      },
      {"x.yaml: model.layers[0].vocab: embedding 'e' has vocab 300, more than "
       "the 256 token ids bfloat16 activations hold exactly"});
  data.act_type = DType::kF32;
  data.vocab_size = 400;
  expect_usage_error(
      [&] {
        build_layers(lm, data, {1, 1, 5}, "x.yaml");
      },
      {"x.yaml: model.layers[0].vocab: embedding 'e' has vocab 300 but the "
       "data's vocab_size is 400"});
}

// A buffer that cannot be allocated (2^46 samples: past any address space, so the failure
// is certain and nothing large is touched) is named; the builders turn it into exit 2.
#if defined(__SANITIZE_ADDRESS__)
#define HT_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HT_UNDER_ASAN 1
#endif
#endif

TEST(ModelRefusals, AllocationFailureNamesTheBuffer) {
#ifdef HT_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer ends the process on an allocation it cannot serve instead "
                  "of failing it; the release build runs this test";
#endif
  CpuBackend be(1);
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Dense>("d", 10));
  try {
    Model m(be, std::move(layers), {1}, int64_t{1} << 46);
    ADD_FAILURE() << "a model for 2^46 samples was allocated";
  } catch (const AllocationFailed& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer d"), std::string::npos) << what;
    const std::string line = allocation_refusal("x.yaml", e);
    EXPECT_EQ(line.rfind("x.yaml: model: cannot allocate " + what, 0), 0u) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos);
  }
  const std::bad_alloc plain;
  EXPECT_NE(allocation_refusal("x.yaml", plain).find("cannot allocate its buffers"),
            std::string::npos);
}

}  // namespace
}  // namespace hpctrain
