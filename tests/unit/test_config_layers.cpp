// Config tests of the model section's layer list beyond dense/relu: conv2d, pooling and
// embedding entries (defaults, ranges, keys a type does not take), the cnn preset, and
// their round trip through config_to_yaml.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config_test_helpers.hpp"
#include "core/error.hpp"
#include "nn/layer_registry.hpp"
#include "train/catalog.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using config_test::expect_error;
using config_test::kMinimal;
using config_test::write_yaml;

// Emits `a`, loads the text back, and checks the model section survives and re-emits
// identically (test_config.cpp's round trip covers every other key).
void expect_model_round_trip(const Config& a) {
  const std::string yaml = config_to_yaml(a);
  Config b = load_config(write_yaml(yaml), {}, catalog());
  SCOPED_TRACE(yaml);
  EXPECT_EQ(a.model.preset, b.model.preset);
  EXPECT_EQ(a.model.hidden, b.model.hidden);
  ASSERT_EQ(a.model.layers.size(), b.model.layers.size());
  for (std::size_t i = 0; i < a.model.layers.size(); ++i) {
    const LayerSpec &x = a.model.layers[i], &y = b.model.layers[i];
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.name, y.name);
    EXPECT_TRUE(x.values == y.values) << x.name;
  }
  EXPECT_EQ(a.model.width, b.model.width);
  EXPECT_EQ(a.model.stem, b.model.stem);
  b.source_file = a.source_file;
  EXPECT_EQ(config_to_yaml(b), yaml);
}

TEST(ConfigLoad, ConvLayerEntriesAndDefaults) {
  const Config c = load_config(write_yaml(std::string(kMinimal) + R"(model:
  preset: layers
  layers:
    - {type: conv2d, filters: 16, kernel: 5}
    - {type: conv2d, name: c2, filters: 8, kernel: 3, stride: 2, padding: 1, bias: false}
    - {type: maxpool, kernel: 3}
    - {type: avgpool, kernel: 3, stride: 1, padding: 1}
    - {type: global_avgpool}
    - {type: flatten}
)"),
                               {}, catalog());
  ASSERT_EQ(c.model.layers.size(), 6u);
  const LayerSpec& a = c.model.layers[0];
  EXPECT_EQ(a.name, "conv2d0");
  EXPECT_EQ(a.integer("filters"), 16);
  EXPECT_EQ(a.integer("kernel"), 5);
  EXPECT_EQ(a.integer("stride"), 1);  // conv default
  EXPECT_EQ(a.integer("padding"), 0);
  EXPECT_TRUE(a.flag("bias"));
  const LayerSpec& b = c.model.layers[1];
  EXPECT_EQ(b.name, "c2");
  EXPECT_EQ(b.integer("stride"), 2);
  EXPECT_EQ(b.integer("padding"), 1);
  EXPECT_FALSE(b.flag("bias"));
  EXPECT_EQ(c.model.layers[2].type, "maxpool");
  EXPECT_EQ(c.model.layers[2].integer("stride"), 3);  // pooling stride defaults to the kernel
  EXPECT_EQ(c.model.layers[3].integer("stride"), 1);
  EXPECT_EQ(c.model.layers[3].integer("padding"), 1);
  EXPECT_EQ(c.model.layers[4].name, "global_avgpool4");
  EXPECT_EQ(c.model.layers[5].name, "flatten5");
  expect_model_round_trip(c);
}

TEST(ConfigLoad, CnnPresetTakesNoListsAndRoundTrips) {
  const Config c = load_config(write_yaml(kMinimal), {"model.preset=cnn"}, catalog());
  EXPECT_EQ(c.model.preset, "cnn");
  EXPECT_TRUE(c.model.hidden.empty());  // the mlp default is dropped
  EXPECT_TRUE(c.model.layers.empty());
  expect_model_round_trip(c);
  const fs::path shipped_file = fs::path(HT_SOURCE_DIR) / "configs" / "fashion_mnist_cnn.yaml";
  const Config shipped = load_config(shipped_file.string(), {}, catalog());
  EXPECT_EQ(shipped.model.preset, "cnn");
  EXPECT_EQ(shipped.train.batch_size, 64);
  EXPECT_EQ(shipped.train.epochs, 5);
  EXPECT_EQ(shipped.optimizer.schedule.type, ScheduleType::kCosine);
}

TEST(ConfigLoad, ResNetLayerEntriesAndPresets) {
  const Config c = load_config(write_yaml(std::string(kMinimal) + R"(model:
  preset: layers
  layers:
    - {type: conv2d, filters: 8, kernel: 3, padding: 1, bias: false}
    - {type: batchnorm}
    - {type: relu}
    - {type: basic_block, filters: 8}
    - {type: basic_block, name: down, filters: 16, stride: 2}
    - {type: global_avgpool}
    - {type: dropout, rate: 0.2}
)"),
                               {}, catalog());
  ASSERT_EQ(c.model.layers.size(), 7u);
  EXPECT_EQ(c.model.layers[1].name, "batchnorm1");
  EXPECT_EQ(c.model.layers[3].integer("stride"), 1);
  EXPECT_EQ(c.model.layers[4].integer("filters"), 16);
  EXPECT_EQ(c.model.layers[4].integer("stride"), 2);
  EXPECT_DOUBLE_EQ(c.model.layers[6].number("rate"), 0.2);
  expect_model_round_trip(c);
  const Config r =
      load_config(write_yaml(kMinimal),
                  {"model.preset=resnet34", "model.width=16", "model.stem=small"}, catalog());
  EXPECT_EQ(r.model.width, 16);
  EXPECT_EQ(r.model.stem, "small");
  EXPECT_TRUE(r.model.hidden.empty());
  expect_model_round_trip(r);
  const std::string head = "data:\n  train: t.h5\nmodel:\n  preset: layers\n  layers:\n";
  expect_error(head + "    - {type: basic_block}\n",
               "FILE:6: model.layers[0].filters: required key is missing for a basic_block layer");
  expect_error(head + "    - {type: dropout, rate: 1}\n",
               "FILE:6: model.layers[0].rate: expected a number >= 0 and < 1, got 1");
  expect_error(head + "    - {type: batchnorm, rate: 0.5}\n",
               "FILE:6: model.layers[0].rate: only dropout layers take rate");
  expect_error("data:\n  train: t.h5\nmodel:\n  preset: cnn\n  width: 32\n",
               "FILE:5: model.width: only used with model.preset 'resnet18' or 'resnet34' "
               "(preset is 'cnn')");
  expect_error("data:\n  train: t.h5\nmodel:\n  width: 0\n",
               "FILE:4: model.width: expected an integer >= 1, got 0");
}

TEST(ConfigErrors, ConvLayerKeys) {
  const std::string head = "data:\n  train: t.h5\nmodel:\n  preset: layers\n  layers:\n";
  expect_error(head + "    - {type: conv2d, kernel: 3}\n",
               "FILE:6: model.layers[0].filters: required key is missing for a conv2d layer");
  expect_error(head + "    - {type: conv2d, filters: 3}\n",
               "FILE:6: model.layers[0].kernel: required key is missing for a conv2d layer");
  expect_error(head + "    - {type: maxpool}\n",
               "FILE:6: model.layers[0].kernel: required key is missing for a maxpool layer");
  expect_error(head + "    - {type: conv2d, filters: 0, kernel: 3}\n",
               "FILE:6: model.layers[0].filters: expected an integer >= 1, got 0");
  expect_error(head + "    - {type: conv2d, filters: 70000, kernel: 3}\n",
               "FILE:6: model.layers[0].filters: expected an integer <= 65536, got 70000");
  expect_error(head + "    - {type: conv2d, filters: 4, kernel: 0}\n",
               "FILE:6: model.layers[0].kernel: expected an integer >= 1, got 0");
  expect_error(head + "    - {type: conv2d, filters: 4, kernel: 3, stride: 0}\n",
               "FILE:6: model.layers[0].stride: expected an integer >= 1, got 0");
  expect_error(head + "    - {type: conv2d, filters: 4, kernel: 3, padding: -1}\n",
               "FILE:6: model.layers[0].padding: expected an integer >= 0, got -1");
  expect_error(head + "    - {type: conv2d, filters: 4, kernel: 3, bias: maybe}\n",
               "FILE:6: model.layers[0].bias: expected true or false, got 'maybe'");
  expect_error(head + "    - {type: maxpool, kernel: 3, padding: 2}\n",
               "FILE:6: model.layers[0].padding: expected an integer <= 1, got 2");
  expect_error(head + "    - {type: maxpool, kernel: 2, filters: 3}\n",
               "FILE:6: model.layers[0].filters: only conv2d or basic_block layers take filters");
  expect_error(
      head + "    - {type: dense, units: 3, kernel: 3}\n",
      "FILE:6: model.layers[0].kernel: only conv2d, maxpool or avgpool layers take kernel");
  expect_error(head + "    - {type: avgpool, kernel: 2, bias: true}\n",
               "FILE:6: model.layers[0].bias: only conv2d layers take bias");
  expect_error(head + "    - {type: flatten, stride: 1}\n",
               "FILE:6: model.layers[0].stride: only conv2d, maxpool, avgpool or basic_block "
               "layers take stride");
  expect_error(head + "    - {type: conv2d, filters: 4, kernal: 3}\n",
               "FILE:6: model.layers[0].kernal: unknown key (did you mean 'kernel'?)");
  const std::string cnn = "data:\n  train: t.h5\nmodel:\n  preset: cnn\n";
  expect_error(cnn + "  hidden: [10]\n",
               "FILE:5: model.hidden: only used with model.preset 'mlp' (preset is 'cnn')");
  expect_error(cnn + "  layers: [{type: relu}]\n",
               "FILE:5: model.layers: only used with model.preset 'layers' (preset is 'cnn')");
}

TEST(ConfigLoad, EmbeddingEntries) {
  const Config c = load_config(write_yaml(std::string(kMinimal) + R"(model:
  preset: layers
  layers:
    - {type: embedding, dim: 8}
    - {type: lstm, units: 4}
)"),
                               {}, catalog());
  ASSERT_EQ(c.model.layers.size(), 2u);
  EXPECT_EQ(c.model.layers[0].name, "embedding0");
  EXPECT_EQ(c.model.layers[0].integer("vocab"), 0);  // the data's vocab_size
  EXPECT_EQ(c.model.layers[0].integer("dim"), 8);
  expect_model_round_trip(c);
  const Config named = load_config(write_yaml(std::string(kMinimal) + R"(model:
  preset: layers
  layers:
    - {type: embedding, name: words, vocab: 65, dim: 3}
)"),
                                   {}, catalog());
  EXPECT_EQ(named.model.layers[0].name, "words");
  EXPECT_EQ(named.model.layers[0].integer("vocab"), 65);
  EXPECT_EQ(named.model.layers[0].integer("dim"), 3);
  expect_model_round_trip(named);
  const std::string head = "data:\n  train: t.h5\nmodel:\n  preset: layers\n  layers:\n";
  expect_error(head + "    - {type: embedding, vocab: 65}\n",
               "FILE:6: model.layers[0].dim: required key is missing for an embedding layer");
  expect_error(head + "    - {type: embedding, vocab: -1, dim: 8}\n",
               "FILE:6: model.layers[0].vocab: expected an integer >= 0, got -1");
  expect_error(head + "    - {type: embedding, dim: 0}\n",
               "FILE:6: model.layers[0].dim: expected an integer >= 1, got 0");
  expect_error(head + "    - {type: embedding, dim: 4, units: 3}\n",
               "FILE:6: model.layers[0].units: only dense, lstm or gru layers take units");
}

// Every registered layer type: its required keys come first (the loader reports them in
// order), its builder makes a layer whose type() is the registered name, and the catalog the
// loader checks against lists exactly the registered types.
TEST(LayerRegistry, EveryTypeBuildsWhatItRegisters) {
  ASSERT_EQ(catalog().layer_types.size(), layer_types().size());
  for (std::size_t i = 0; i < layer_types().size(); ++i) {
    const LayerType& t = *layer_types()[i];
    EXPECT_EQ(catalog().layer_types[i], &t.decl);
    bool optional_seen = false;
    LayerSpec spec{std::string(t.decl.name), "x", {}};
    for (const LayerKeyDecl& k : t.decl.keys) {
      EXPECT_FALSE(k.required() && optional_seen) << t.decl.name << "." << k.name;
      optional_seen = optional_seen || !k.required();
      if (k.required()) spec.set(k.name, int64_t{2});  // every required key is a size
    }
    const std::unique_ptr<Layer> layer = build_layer(spec, 0);
    EXPECT_EQ(std::string(layer->type()), t.decl.name);
    EXPECT_EQ(layer->name(), "x");
  }
  EXPECT_EQ(find_layer_type("conv"), nullptr);
  EXPECT_THROW(build_layer(LayerSpec{"conv", "x", {}}, 3), UsageError);
  EXPECT_THROW(build_layer(LayerSpec{"dense", "x", {}}, 0), UsageError);  // units missing
}

}  // namespace
}  // namespace hpctrain
