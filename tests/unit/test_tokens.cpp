// Token files as training reads them (docs/formats.md, "Token files"): next-token files
// give T labels per sample (the row's columns 1..T, read from the one stored row), token
// classification files one; ids outside the vocabulary are refused with their row and
// column; the loader carries T labels per sample through cache and streaming alike; the
// model builder fits embeddings to the vocabulary and makes the classifier predict every
// step.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "common/usage_error.hpp"
#include "core/error.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "h5/h5.hpp"
#include "nn/embedding.hpp"
#include "nn/model.hpp"
#include "nn/presets.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using test::expect_usage_error;

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("ht_tokens_" + name)).string();
}

struct TokenFile {
  int64_t rows = 0, cols = 0;
  std::vector<int32_t> tokens;  // rows * cols
  hid_t type = H5T_STD_I32LE;
  int64_t vocab_size = 0;               // 0: no attribute
  std::vector<std::string> vocabulary;  // empty: no attribute
  std::string level;                    // empty: no attribute
  std::vector<int32_t> labels;          // empty: no /labels
};

void write_tokens(const std::string& path, const TokenFile& t) {
  h5_quiet();
  H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                H5Fclose);
  const hsize_t dims[2] = {static_cast<hsize_t>(t.rows), static_cast<hsize_t>(t.cols)};
  H5Handle space(HT_CHECK_H5(H5Screate_simple(2, dims, nullptr)), H5Sclose);
  H5Handle set(HT_CHECK_H5(H5Dcreate2(file.get(), "tokens", t.type, space.get(), H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT)),
               H5Dclose);
  if (!t.tokens.empty()) {
    HT_CHECK_H5(
        H5Dwrite(set.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.tokens.data()));
  }
  if (!t.labels.empty()) {
    const hsize_t n[1] = {t.labels.size()};
    H5Handle label_space(HT_CHECK_H5(H5Screate_simple(1, n, nullptr)), H5Sclose);
    H5Handle labels(HT_CHECK_H5(H5Dcreate2(file.get(), "labels", H5T_STD_I16LE, label_space.get(),
                                           H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
                    H5Dclose);
    HT_CHECK_H5(
        H5Dwrite(labels.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.labels.data()));
  }
  if (t.vocab_size > 0) h5_write_int(file.get(), "vocab_size", t.vocab_size);
  if (!t.vocabulary.empty()) h5_write_strings(file.get(), "vocabulary", t.vocabulary, false);
  if (!t.level.empty()) h5_write_strings(file.get(), "level", {t.level}, true);
}

// Rows of 5 tokens (T = 4 steps): row r holds (r * 3 + j) % 7.
TokenFile next_token_file(int64_t rows) {
  TokenFile t;
  t.rows = rows;
  t.cols = 5;
  t.vocab_size = 7;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < t.cols; ++j) t.tokens.push_back(static_cast<int32_t>((r * 3 + j) % 7));
  }
  t.vocabulary = {"a", "b", "c", "d", "e", "\n", "é"};
  t.level = "char";
  return t;
}

TEST(TokenFile, NextTokensAreTheShiftedRow) {
  const std::string path = temp_path("lm.h5");
  const TokenFile t = next_token_file(6);
  write_tokens(path, t);
  const DatasetFile file(path);
  const DatasetShape& s = file.shape();
  EXPECT_TRUE(s.tokens());
  EXPECT_EQ(s.n, 6);
  EXPECT_EQ((Dims{s.c, s.h, s.w}), (Dims{1, 1, 4}));
  EXPECT_EQ(s.labels_per_sample, 4);
  EXPECT_EQ(s.num_classes, 7);
  EXPECT_EQ(s.vocab_size, 7);
  EXPECT_EQ(s.vocabulary, t.vocabulary);
  EXPECT_EQ(s.level, "char");
  EXPECT_EQ(s.sample_bytes(), 4 * sizeof(int32_t));

  std::vector<int32_t> inputs(3 * 4), labels(3 * 4);
  file.read_rows(2, 3, inputs.data(), labels.data());
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(inputs[r * 4 + j], t.tokens[(2 + r) * 5 + j]) << r << "," << j;
      EXPECT_EQ(labels[r * 4 + j], t.tokens[(2 + r) * 5 + j + 1]) << r << "," << j;
    }
  }
  // Scattered rows (two runs) read the same.
  const int64_t rows[3] = {0, 1, 4};
  file.read_row_set(rows, 3, inputs.data(), labels.data());
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(inputs[k * 4 + j], t.tokens[rows[k] * 5 + j]);
      EXPECT_EQ(labels[k * 4 + j], t.tokens[rows[k] * 5 + j + 1]);
    }
  }
}

TEST(TokenFile, ClassificationHasOneLabelPerSequence) {
  const std::string path = temp_path("cls.h5");
  TokenFile t = next_token_file(4);
  t.type = H5T_STD_U16LE;  // any integer type is read as int32
  t.labels = {1, 0, 2, 1};
  write_tokens(path, t);
  const DatasetFile file(path);
  EXPECT_EQ(file.shape().w, 5);
  EXPECT_EQ(file.shape().labels_per_sample, 1);
  EXPECT_EQ(file.shape().num_classes, 3);
  std::vector<int32_t> inputs(4 * 5), labels(4);
  file.read_rows(0, 4, inputs.data(), labels.data());
  EXPECT_EQ(inputs, t.tokens);
  EXPECT_EQ(labels, t.labels);
}

TEST(TokenFile, IdOutsideTheVocabularyNamesRowAndColumn) {
  const std::string path = temp_path("bad_id.h5");
  TokenFile t = next_token_file(4);
  t.tokens[2 * 5 + 4] = 7;  // the last column: a target only
  write_tokens(path, t);
  const DatasetFile file(path);
  std::vector<int32_t> inputs(16), labels(16);
  file.read_rows(0, 2, inputs.data(), labels.data());  // rows before it are fine
  expect_usage_error([&] { file.read_rows(1, 3, inputs.data(), labels.data()); },
                     {path, "token 7 at row 2, column 4", "outside [0, 7)"});
  t.tokens[2 * 5 + 4] = 1;
  t.tokens[3 * 5 + 0] = -2;
  const std::string negative = temp_path("negative_id.h5");
  write_tokens(negative, t);
  const DatasetFile again(negative);
  const int64_t rows[2] = {0, 3};
  expect_usage_error([&] { again.read_row_set(rows, 2, inputs.data(), labels.data()); },
                     {negative, "token -2 at row 3, column 0"});
}

TEST(TokenFile, MalformedFilesAreRefusedWithTheirFile) {
  const std::string path = temp_path("malformed.h5");
  TokenFile t = next_token_file(3);
  t.vocab_size = 0;
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); }, {path, "attribute vocab_size is missing"});
  t = next_token_file(3);
  t.vocabulary.pop_back();
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); },
                     {path, "attribute vocabulary has 6 entries but vocab_size is 7"});
  t = next_token_file(3);
  t.level = "byte";
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); }, {path, "attribute level"});
  t = next_token_file(3);
  t.type = H5T_IEEE_F32LE;
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); }, {path, "/tokens has type float32"});
  t = next_token_file(3);
  t.cols = 1;
  t.tokens = {1, 2, 3};
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); }, {path, "needs T + 1 >= 3 columns"});
  // One target per row (T = 1) would be taken for labelled sequences.
  t.cols = 2;
  t.tokens = {1, 2, 2, 0, 0, 1};
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); }, {path, "needs T + 1 >= 3 columns"});
  t = next_token_file(3);
  t.labels = {0, 1};
  write_tokens(path, t);
  expect_usage_error([&] { DatasetFile f(path); },
                     {path, "/tokens has 3 samples but /labels has 2"});
}

TEST(TokenLoader, BatchesCarryEveryStepsLabelCachedOrStreamed) {
  const std::string path = temp_path("loader.h5");
  const TokenFile t = next_token_file(11);
  write_tokens(path, t);
  const DatasetFile file(path);
  const Shard shard{2, 9};
  LoaderOptions o;
  o.batch = 4;
  o.epochs = 2;
  o.shuffle = true;
  o.seed = 5;
  LoaderOptions streaming = o;
  streaming.cache_bytes = 0;
  Loader cached(file, shard, o), streamed(file, shard, streaming);
  for (int64_t b = 0; b < 2 * cached.batches_per_epoch(); ++b) {
    const BatchBuffer& x = cached.next();
    const BatchBuffer& y = streamed.next();
    ASSERT_EQ(x.size, y.size);
    for (int64_t i = 0; i < x.size; ++i) {
      // Which file row this sample is: find it by its first id and its labels.
      const int32_t* labels = x.labels.data() + i * 4;
      bool found = false;
      for (int64_t r = shard.begin; r < shard.begin + shard.count && !found; ++r) {
        bool same = true;
        for (int64_t j = 0; j < 4; ++j) {
          same = same && x.images[i * 4 + j] == static_cast<float>(t.tokens[r * 5 + j]) &&
                 labels[j] == t.tokens[r * 5 + j + 1];
        }
        found = same;
      }
      EXPECT_TRUE(found) << "batch " << b << " sample " << i << " is no row of the shard";
    }
    EXPECT_TRUE(std::equal(x.images.begin(), x.images.begin() + x.size * 4, y.images.begin()));
    EXPECT_TRUE(std::equal(x.labels.begin(), x.labels.begin() + x.size * 4, y.labels.begin()));
  }
}

ModelConfig sequence_model(bool return_sequences) {
  ModelConfig mc;
  mc.preset = "layers";
  mc.hidden.clear();
  mc.layers = {
      {.type = "embedding",
       .name = "embed",
       .values = {{"vocab", int64_t{0}}, {"dim", int64_t{3}}}},
      {.type = "lstm",
       .name = "lstm",
       .values = {{"units", int64_t{5}},
                  {"layers", int64_t{1}},
                  {"return_sequences", return_sequences}}},
  };
  return mc;
}

TEST(TokenModel, ClassifierPredictsEveryStepOverTheVocabulary) {
  CpuBackend be(1);
  ModelData data;
  data.num_classes = 7;
  data.vocab_size = 7;
  data.per_step = 4;
  Model m(be, build_layers(sequence_model(true), data, {1, 1, 4}, "lm.yaml"), {1, 1, 4}, 2);
  EXPECT_EQ(m.output_dims(), (Dims{4, 7}));
  const auto* embedding = dynamic_cast<const Embedding*>(m.layers()[0].get());
  ASSERT_NE(embedding, nullptr);
  EXPECT_EQ(embedding->vocab(), 7);
  // The last step only: no prediction per step; the message says what to change.
  expect_usage_error(
      [&] {
        build_layers(sequence_model(false), data, {1, 1, 4}, "lm.yaml");
      },
      {"lm.yaml", "4 next tokens per sample", "an output of 5", "return_sequences: true"});
  // Without the embedding the token ids are one step of 4 features: return_sequences is
  // there already, and the message said to add it.
  ModelConfig no_embedding = sequence_model(true);
  no_embedding.layers.erase(no_embedding.layers.begin());
  expect_usage_error(
      [&] {
        build_layers(no_embedding, data, {1, 1, 4}, "lm.yaml");
      },
      {"lm.yaml", "an output of 1x5", "one step of 4 features without an embedding layer first"});
  ModelConfig mlp;
  expect_usage_error(
      [&] {
        build_layers(mlp, data, {1, 1, 4}, "lm.yaml");
      },
      {"lm.yaml", "model.preset: mlp cannot predict the next token"});
  // An embedding needs token data.
  ModelData images;
  images.num_classes = 10;
  expect_usage_error(
      [&] {
        build_layers(sequence_model(false), images, {1, 28, 28}, "x.yaml");
      },
      {"x.yaml", "embedding 'embed' needs token data"});
}

}  // namespace
}  // namespace hpctrain
