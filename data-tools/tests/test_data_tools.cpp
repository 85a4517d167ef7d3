// hpctrain-data's row tools: the stratified split, contiguous shards, the synthetic set, and a
// folder -> split -> shard -> Loader pipeline.
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/random.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/image_folder.hpp"
#include "data-tools/progress_note.hpp"
#include "data-tools/row_copy.hpp"
#include "data-tools/sample_codec.hpp"
#include "data-tools/shard.hpp"
#include "data-tools/split.hpp"
#include "data-tools/synth.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "h5/h5.hpp"
#include "tools_test_helpers.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using tools_test::expect_usage_error;
using tools_test::fresh_dir;
using tools_test::pattern;
using tools_test::read_all;
using tools_test::Rows;
using tools_test::write_png;
using tools_test::write_text;

// ---------------------------------------------------------------- commit_together

// Files that belong together are all finished before any is renamed: a failure half-way
// (here a label out of range in the last one) leaves the earlier set whole, and a success
// replaces all of it.
TEST(DataToolsCommit, AFileSetIsReplacedWhole) {
  const std::string dir = fresh_dir("commit_together");
  DatasetWriterOptions o;
  o.num_classes = 2;
  const auto write_set = [&](uint8_t value, bool fail_last) {
    DatasetWriter a(dir + "/a.h5", o), b(dir + "/b.h5", o);
    const uint8_t pixels[2] = {value, value};
    const int32_t labels[2] = {0, 1}, bad[2] = {0, 7};
    a.append(2, pixels, labels);
    a.finish();  // finished, not yet renamed
    b.append(2, pixels, fail_last ? bad : labels);
    commit_together({&a, &b});
  };
  write_set(1, false);
  EXPECT_EQ(read_all(dir + "/a.h5").images[0], 1);
  expect_usage_error([&] { write_set(2, true); }, "outside");
  EXPECT_EQ(read_all(dir + "/a.h5").images[0], 1);  // not the new a beside the old b
  EXPECT_EQ(read_all(dir + "/b.h5").images[0], 1);
  EXPECT_FALSE(fs::exists(dir + "/a.h5.tmp"));
  write_set(3, false);
  EXPECT_EQ(read_all(dir + "/a.h5").images[0], 3);
  EXPECT_EQ(read_all(dir + "/b.h5").images[0], 3);
}

// Two conversions to one output at once (a job array's tasks preparing the same file): the
// second replaces the first one's temporary, the first then fails instead of renaming the
// second's half-written file, and the file under the name is the second one's, whole.
TEST(DataToolsCommit, TwoWritersOfOneFileLeaveOneWholeFile) {
  const std::string dir = fresh_dir("two_writers");
  DatasetWriterOptions o;
  o.num_classes = 2;
  const uint8_t pixels[2] = {5, 5};
  const int32_t labels[2] = {0, 1};
  std::optional<DatasetWriter> first(std::in_place, dir + "/x.h5", o);
  first->append(2, pixels, labels);
  {
    DatasetWriter second(dir + "/x.h5", o);
    second.append(2, pixels, labels);
    second.append(2, pixels, labels);
    try {
      first->close();
      ADD_FAILURE() << "the first writer renamed the second one's temporary";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not written"), std::string::npos) << e.what();
    }
    first.reset();
  }
  EXPECT_EQ(read_all(dir + "/x.h5").shape.n, 4);
  EXPECT_FALSE(fs::exists(dir + "/x.h5.tmp"));
}

// ---------------------------------------------------------------- split

// A float32 file whose single pixel holds the row index, with uneven classes: class k has
// 10 + 7k rows, interleaved (label of row i cycles with gaps) so classes are not blocks.
std::string make_indexed_file(const std::string& path, int classes) {
  DatasetWriterOptions o;
  o.type = SampleType::kF32;
  o.num_classes = classes;
  // (Appending, not "k" + to_string(k): GCC 12 warns falsely on that, bug 105329.)
  for (int k = 0; k < classes; ++k)
    o.class_names.push_back(std::string("k").append(std::to_string(k)));
  o.source = "indexed rows";
  std::vector<int32_t> labels;
  for (int k = 0; k < classes; ++k) labels.insert(labels.end(), 10 + 7 * k, k);
  Rng rng(5);
  for (size_t i = labels.size(); i > 1; --i) std::swap(labels[i - 1], labels[rng.uniform_int(i)]);
  std::vector<float> index(labels.size());
  std::iota(index.begin(), index.end(), 0.0f);
  DatasetWriter w(path, o);
  w.append(static_cast<int64_t>(labels.size()), index.data(), labels.data());
  w.close();
  return path;
}

std::vector<float> row_ids(const Rows& r) {
  std::vector<float> ids(static_cast<size_t>(r.shape.n));
  std::memcpy(ids.data(), r.images.data(), ids.size() * sizeof(float));
  return ids;
}

TEST(DataToolsSplit, StratifiedDisjointCompleteAndSeeded) {
  const std::string dir = fresh_dir("split");
  const std::string input = make_indexed_file(dir + "/in.h5", 5);  // 10..38 rows per class
  SplitOptions o;
  o.weights = {85, 2, 13};
  o.names = default_split_names(3);
  o.seed = 9;
  const SplitReport report = split_data_file(input, dir + "/s", o);
  ASSERT_EQ(report.paths,
            (std::vector<std::string>{dir + "/s-train.h5", dir + "/s-val.h5", dir + "/s-test.h5"}));
  const Rows all = read_all(input);
  std::vector<int> seen(static_cast<size_t>(all.shape.n), 0);
  for (size_t p = 0; p < 3; ++p) {
    const Rows part = read_all(report.paths[p]);
    EXPECT_EQ(part.shape.type, SampleType::kF32);
    EXPECT_EQ(part.shape.class_names, all.shape.class_names);
    EXPECT_EQ(part.shape.num_classes, 5);
    const std::string source = read_source_attribute(report.paths[p]);
    EXPECT_EQ(source.rfind("indexed rows; part '" + o.names[p] + "'", 0), 0u) << source;
    const std::vector<float> ids = row_ids(part);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));  // source order kept
    std::vector<int64_t> per_class(5, 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto row = static_cast<size_t>(ids[i]);
      ++seen[row];
      EXPECT_EQ(part.labels[i], all.labels[row]);  // the label travelled with its row
      ++per_class[static_cast<size_t>(part.labels[i])];
    }
    for (int k = 0; k < 5; ++k) {  // within a row of its share (not its own apportion: the
                                   // part totals come first, see PartTotalsFollow... below)
      EXPECT_LT(std::abs(per_class[static_cast<size_t>(k)] * 100.0 - (10 + 7 * k) * o.weights[p]),
                100.0)
          << "part " << p << " class " << k;
    }
    EXPECT_EQ(report.rows[p], apportion(120, o.weights)[p]);
    EXPECT_EQ(per_class, report.per_class[p]);
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));

  // Determinism: the same seed, the same parts; another seed, other rows.
  std::vector<int32_t> labels = all.labels;
  EXPECT_EQ(stratified_parts(labels, 5, o.weights, 9), stratified_parts(labels, 5, o.weights, 9));
  EXPECT_NE(stratified_parts(labels, 5, o.weights, 9), stratified_parts(labels, 5, o.weights, 10));
  const SplitReport again = split_data_file(input, dir + "/t", o);
  EXPECT_EQ(read_all(again.paths[1]).images, read_all(report.paths[1]).images);
}

TEST(DataToolsSplit, RejectsEmptyPartsBadWeightsAndOverwritingTheInput) {
  const std::string dir = fresh_dir("split_errors");
  const std::string input = make_indexed_file(dir + "/in.h5", 2);  // 10 + 17 rows
  SplitOptions o;
  o.weights = {1000, 1};
  o.names = {"train", "test"};
  expect_usage_error([&] { split_data_file(input, dir + "/s", o); },
                     "in.h5: --ratios 1000,1: part 'test' would be empty");
  EXPECT_FALSE(fs::exists(dir + "/s-train.h5"));
  // An output that is the input (here PREFIX-train.h5) is refused before anything is written.
  const std::string clash = make_indexed_file(dir + "/s-train.h5", 2);
  o.weights = {1, 1};
  expect_usage_error([&] { split_data_file(clash, dir + "/./s", o); }, "overwrite the input");
  EXPECT_FALSE(fs::exists(dir + "/s-test.h5"));
  EXPECT_EQ(parse_split_weights("85,2,13", "--ratios"), (std::vector<int64_t>{85, 2, 13}));
  for (const char* bad : {"", "85", "85,,13", "85,0", "a,b", "1,-2", "85,2,13,"}) {
    expect_usage_error([&] { parse_split_weights(bad, "--ratios"); }, "--ratios");
  }
  EXPECT_EQ(parse_split_names("a,b-c", 2, "--names"), (std::vector<std::string>{"a", "b-c"}));
  expect_usage_error([&] { parse_split_names("a,a", 2, "--names"); }, "repeats");
  expect_usage_error([&] { parse_split_names("a/b,c", 2, "--names"); }, "letters");
  expect_usage_error([&] { parse_split_names("a", 2, "--names"); }, "1 names for 2 parts");
  EXPECT_EQ(default_split_names(2), (std::vector<std::string>{"train", "test"}));
  EXPECT_EQ(default_split_names(4)[3], "part3");
}

// Part totals follow the whole set (apportion(n, weights)), not the sum of each class's own
// rounding, and every class stays within one row of its share. On the old code 1000 classes
// of 13 rows gave 'val' none of its 260 rows (each class's 0.26 rounded down), and 1000
// classes of 3 split 1:1 gave 2000/1000 (every tie to the first part).
std::vector<std::vector<int64_t>> part_class_counts(const std::vector<int32_t>& labels, int classes,
                                                    const std::vector<int64_t>& weights) {
  const std::vector<uint8_t> part = stratified_parts(labels, classes, weights, 3);
  std::vector<std::vector<int64_t>> c(weights.size(), std::vector<int64_t>(classes, 0));
  for (size_t i = 0; i < part.size(); ++i) ++c[part[i]][static_cast<size_t>(labels[i])];
  return c;
}

// Part totals equal apportion(n, weights); every cell within `slack` rows of n_k * w_p / W.
void expect_balanced(const std::vector<int64_t>& sizes, const std::vector<int64_t>& weights,
                     double slack = 1) {
  std::vector<int32_t> labels;
  for (size_t k = 0; k < sizes.size(); ++k) labels.insert(labels.end(), sizes[k], int32_t(k));
  const auto c = part_class_counts(labels, static_cast<int>(sizes.size()), weights);
  const int64_t total = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  const std::vector<int64_t> want = apportion(static_cast<int64_t>(labels.size()), weights);
  for (size_t p = 0; p < weights.size(); ++p) {
    EXPECT_EQ(std::accumulate(c[p].begin(), c[p].end(), int64_t{0}), want[p]) << "part " << p;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const double share = static_cast<double>(sizes[k] * weights[p]) / total;
      EXPECT_LT(std::abs(static_cast<double>(c[p][k]) - share), slack)
          << "class " << k << " of " << sizes[k] << " rows, part " << p;
    }
  }
}

TEST(DataToolsSplit, PartTotalsFollowTheWholeSetAndClassesTheirShare) {
  std::vector<int32_t> labels(13000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 1000);
  expect_balanced(std::vector<int64_t>(1000, 13), {85, 2, 13});
  expect_balanced(std::vector<int64_t>(1000, 3), {1, 1});
  expect_balanced({10, 17, 24, 31, 38}, {85, 2, 13});
  expect_balanced(std::vector<int64_t>(700, 13), {1, 1, 1, 1, 1, 1, 1});
  Rng rng(11);  // random shapes (all 300 have a division within one row)
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> sizes(1 + rng.uniform_int(40)), weights(2 + rng.uniform_int(6));
    for (int64_t& n : sizes) n = static_cast<int64_t>(rng.uniform_int(60));
    for (int64_t& w : weights) w = 1 + static_cast<int64_t>(rng.uniform_int(20));
    expect_balanced(sizes, weights);
  }
  // Where no rounding within one row meets the totals, a cell takes a second extra row (under
  // two rows off): parts 1 and 4 of 2:5:2:2:5 need 4 extras beyond the floors of 3 and 8
  // rows, and the 3-row class can give them only one each within a row, the 8-row class one.
  expect_balanced({3, 0, 8}, {2, 5, 2, 2, 5}, 2);
  expect_balanced({13, 19}, {8, 8, 9, 3, 3, 8}, 2);

  // Through the file: 1000 classes of 13 rows split 85:2:13.
  const std::string dir = fresh_dir("split_totals");
  DatasetWriterOptions o;
  o.num_classes = 1000;
  DatasetWriter w(dir + "/c.h5", o);
  w.append(13000, std::vector<uint8_t>(13000, 1).data(), labels.data());
  w.close();
  SplitOptions so;
  so.weights = {85, 2, 13};
  so.names = default_split_names(3);
  so.seed = 1;
  EXPECT_EQ(split_data_file(dir + "/c.h5", dir + "/s", so).rows,
            (std::vector<int64_t>{11050, 260, 1690}));
}

// A new split replaces the earlier parts under its prefix as a set: the parts it does not
// write go too (on the old code s-val.h5 of seed 1 stayed beside the seed-7 s-train.h5),
// whatever their names, while files split did not write stay. An input that is one of those
// parts is refused before anything is written.
TEST(DataToolsSplit, ReplacesTheEarlierPartsUnderThePrefix) {
  const std::string dir = fresh_dir("split_replace");
  const std::string input = make_indexed_file(dir + "/in.h5", 3);
  make_indexed_file(dir + "/s-notes.h5", 2);  // not a part: kept
  SplitOptions o;
  o.weights = {8, 1, 1};
  o.names = default_split_names(3);
  split_data_file(input, dir + "/s", o);
  shard_data_file(dir + "/s-train.h5", dir + "/s-train", 1, 0);  // derived from a part: kept
  const auto h5_files = [&] {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  };
  const std::set<std::string> kept = {"in.h5", "s-notes.h5", "s-train-00000-of-00001.h5"};
  const auto expect_files = [&](std::set<std::string> parts) {
    parts.insert(kept.begin(), kept.end());
    EXPECT_EQ(h5_files(), parts);
  };
  expect_files({"s-train.h5", "s-val.h5", "s-test.h5"});
  o.weights = {1, 1};
  o.names = default_split_names(2);
  o.seed = 7;
  split_data_file(input, dir + "/s", o);
  expect_files({"s-train.h5", "s-test.h5"});
  o.names = {"a", "b-2"};
  split_data_file(input, dir + "/./s", o);
  expect_files({"s-a.h5", "s-b-2.h5"});
  o.weights = {1, 1, 1, 1};
  o.names = default_split_names(4);
  split_data_file(input, dir + "/s", o);
  expect_files({"s-part0.h5", "s-part1.h5", "s-part2.h5", "s-part3.h5"});
  o.weights = {1, 1};
  o.names = {"x", "y"};
  expect_usage_error([&] { split_data_file(dir + "/s-part0.h5", dir + "/s", o); }, "--out-prefix");
  expect_files({"s-part0.h5", "s-part1.h5", "s-part2.h5", "s-part3.h5"});
}

// ---------------------------------------------------------------- shard

TEST(DataToolsShard, ContiguousCoverWithSizesWithinOne) {
  EXPECT_EQ(shard_bounds(10, 3), (std::vector<int64_t>{0, 4, 7, 10}));
  EXPECT_EQ(shard_bounds(9, 3), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(shard_output_path("d/p", 2, 8), "d/p-00002-of-00008.h5");
  EXPECT_EQ(shard_output_path("p", 3, 123456), "p-000003-of-123456.h5");

  const std::string dir = fresh_dir("shard");
  const std::string input = make_indexed_file(dir + "/in.h5", 3);  // 10 + 17 + 24 = 51 rows
  const ShardReport r = shard_data_file(input, dir + "/sh", 4, 0);
  ASSERT_EQ(r.paths.size(), 4u);
  const Rows all = read_all(input);
  float next = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Rows part = read_all(r.paths[i]);
    EXPECT_EQ(part.shape.n, i < 3 ? 13 : 12);  // 51 = 13 + 13 + 13 + 12
    EXPECT_EQ(part.shape.class_names, all.shape.class_names);
    for (size_t j = 0; j < part.labels.size(); ++j) {
      ASSERT_EQ(row_ids(part)[j], next);
      EXPECT_EQ(part.labels[j], all.labels[static_cast<size_t>(next)]);
      ++next;
    }
    EXPECT_NE(read_source_attribute(r.paths[i]).find("shard " + std::to_string(i) + " of 4"),
              std::string::npos);
  }
  EXPECT_EQ(next, 51.0f);
  expect_usage_error([&] { shard_data_file(input, dir + "/sh", 52, 0); },
                     "in.h5: --parts 52: 52 shards of 51 rows would leave some empty");
  expect_usage_error([&] { shard_data_file(input, dir + "/sh", 0, 0); }, "at least 1");
  expect_usage_error([&] { shard_data_file(dir + "/none.h5", dir + "/sh", 2, 0); }, "no such file");
}

// A new sharding replaces the earlier shards under its prefix, whatever their count (on the
// old code 4 shards stayed beside the 2 new ones, and a d-*.h5 glob read every row twice).
TEST(DataToolsShard, ReplacesTheEarlierShardsUnderThePrefix) {
  const std::string dir = fresh_dir("shard_replace");
  const std::string input = make_indexed_file(dir + "/in.h5", 3);
  make_indexed_file(dir + "/d-notes.h5", 2);  // not a shard: kept
  shard_data_file(input, dir + "/d", 4, 0);
  const ShardReport r = shard_data_file(input, dir + "/d", 2, 0);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().string());
  EXPECT_EQ(names, (std::set<std::string>{input, dir + "/d-notes.h5", r.paths[0], r.paths[1]}));
  // A shard of the set being replaced as the input: refused, nothing removed.
  expect_usage_error([&] { shard_data_file(r.paths[0], dir + "/d", 3, 0); }, "--out-prefix");
  EXPECT_TRUE(fs::exists(r.paths[0]) && fs::exists(r.paths[1]));
  EXPECT_FALSE(fs::exists(shard_output_path(dir + "/d", 0, 3)));
}

// ---------------------------------------------------------------- synth

TEST(DataToolsSynth, DeterministicBalancedAndInRange) {
  const std::string dir = fresh_dir("synth");
  SynthOptions o;
  o.n = 50;
  o.c = 2;
  o.h = 20;
  o.w = 24;
  o.classes = 3;
  o.seed = 4;
  for (SampleType t : {SampleType::kU8, SampleType::kF16, SampleType::kF32}) {
    o.type = t;
    synth_data_file(dir + "/a.h5", o);
    synth_data_file(dir + "/b.h5", o);
    const Rows a = read_all(dir + "/a.h5"), b = read_all(dir + "/b.h5");
    EXPECT_EQ(a.shape.type, t);
    EXPECT_EQ(a.shape.n, 50);
    EXPECT_EQ(a.shape.c, 2);
    EXPECT_EQ(a.shape.h, 20);
    EXPECT_EQ(a.shape.w, 24);
    EXPECT_EQ(a.shape.class_names, (std::vector<std::string>{"class0", "class1", "class2"}));
    EXPECT_EQ(a.images, b.images);
    EXPECT_EQ(a.labels, b.labels);
    for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(a.labels[static_cast<size_t>(i)], i % 3);
  }
  o.threads = 3;  // rows made in any order by several threads: the same file
  synth_data_file(dir + "/t.h5", o);
  EXPECT_EQ(read_all(dir + "/t.h5").images, read_all(dir + "/a.h5").images);
  o.seed = 5;
  synth_data_file(dir + "/c.h5", o);
  EXPECT_NE(read_all(dir + "/c.h5").images, read_all(dir + "/a.h5").images);

  // A row does not depend on which rows were made before it.
  const SynthGenerator gen(o);
  std::vector<float> x(2 * 20 * 24), y(x.size());
  gen.sample(17, x.data());
  gen.sample(3, y.data());
  gen.sample(17, y.data());
  EXPECT_EQ(x, y);
  EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return v >= 0 && v <= 1; }));

  expect_usage_error([&] { o.n = 0, synth_data_file(dir + "/d.h5", o); }, "--n");
  o.n = 1;
  o.c = 3;
  o.h = o.w = 20000;  // 2.4 GB a sample
  expect_usage_error([&] { synth_data_file(dir + "/d.h5", o); }, "over the 1 GiB limit");
  o.c = 1;
  o.n = 5;
  expect_usage_error([&] { o.classes = 1, synth_data_file(dir + "/d.h5", o); }, "--classes");
}

// Learnable: class means differ, and a nearest-class-mean rule fitted on half the rows
// classifies the other half almost perfectly.
TEST(DataToolsSynth, ClassesDifferEnoughToLearn) {
  SynthOptions o;
  o.n = 400;
  o.c = 1;
  o.h = 32;
  o.w = 40;
  o.classes = 4;
  o.seed = 2;
  const SynthGenerator gen(o);
  const size_t elems = 32 * 40;
  std::vector<std::vector<double>> mean(4, std::vector<double>(elems, 0.0));
  std::vector<float> px(elems);
  for (int64_t i = 0; i < 200; ++i) {
    gen.sample(i, px.data());
    for (size_t e = 0; e < elems; ++e) mean[static_cast<size_t>(gen.label(i))][e] += px[e] / 50;
  }
  const auto distance = [&](const std::vector<double>& m, const std::vector<float>& v) {
    double d = 0;
    for (size_t e = 0; e < elems; ++e) d += (m[e] - v[e]) * (m[e] - v[e]);
    return d;
  };
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = a + 1; b < 4; ++b) {
      double d = 0;
      for (size_t e = 0; e < elems; ++e) d += std::abs(mean[a][e] - mean[b][e]);
      EXPECT_GT(d / elems, 0.05) << a << " vs " << b;  // mean absolute pixel difference
    }
  }
  int correct = 0;
  for (int64_t i = 200; i < 400; ++i) {
    gen.sample(i, px.data());
    size_t best = 0;
    for (size_t k = 1; k < 4; ++k) {
      if (distance(mean[k], px) < distance(mean[best], px)) best = k;
    }
    correct += static_cast<int>(best) == gen.label(i);
  }
  EXPECT_GE(correct, 190) << "nearest class mean: " << correct << " of 200";
}

// ---------------------------------------------------------------- pipeline

// The tools chained as a user would: folder -> file -> split -> shard, and the Loader
// (what training reads through) serves batches of the right shape and range.
TEST(DataToolsPipeline, FolderToSplitToShardToLoader) {
  const std::string root = fresh_dir("pipeline_images");
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 12; ++i) {
      const int w = 8 + (i % 3) * 5, h = 6 + (i % 4) * 3;  // mixed sizes
      write_png(fs::path(root) / std::string("c").append(std::to_string(k)) /
                    std::to_string(i).append(".png"),
                w, h, 3, pattern(w, h, 3, k * 100 + i));
    }
  }
  write_text(fs::path(root) / "c1" / "README", "not an image");
  const std::string dir = fresh_dir("pipeline");
  ImageFolderOptions io;
  io.width = 12;
  io.height = 10;
  io.type = SampleType::kF16;
  io.shuffle = true;
  io.seed = 3;
  std::ostringstream log;
  const ImageFolderReport r = convert_image_folder(root, dir + "/all.h5", io, log);
  EXPECT_EQ(r.files, 37);
  EXPECT_EQ(r.skipped, 1);

  SplitOptions so;
  so.weights = {2, 1};
  so.names = {"train", "test"};
  so.seed = 1;
  const SplitReport sr = split_data_file(dir + "/all.h5", dir + "/set", so);
  EXPECT_EQ(sr.rows, (std::vector<int64_t>{24, 12}));
  const ShardReport shr = shard_data_file(sr.paths[0], dir + "/train", 2, 1);

  const DatasetFile shard(shr.paths[1]);
  EXPECT_EQ(shard.shape().n, 12);
  EXPECT_EQ(shard.shape().type, SampleType::kF16);
  LoaderOptions lo;
  lo.batch = 5;
  lo.threads = 1;
  Loader loader(shard, Shard{0, shard.shape().n}, lo);
  int64_t seen = 0;
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const BatchBuffer& batch = loader.next();
    for (size_t i = 0; i < static_cast<size_t>(batch.size) * 120; ++i) {
      ASSERT_GE(batch.images[i], 0.0f);
      ASSERT_LE(batch.images[i], 1.0f);
    }
    seen += batch.size;
  }
  EXPECT_EQ(seen, 12);

  // Raw mode (a device backend's loaders): the stored bytes of the same batches, which
  // decode_samples turns into exactly the floats the converting loader gives.
  LoaderOptions raw_opts = lo;
  raw_opts.raw = true;
  Loader floats(shard, Shard{0, shard.shape().n}, lo);
  Loader raw(shard, Shard{0, shard.shape().n}, raw_opts);
  for (int64_t b = 0; b < floats.batches_per_epoch(); ++b) {
    const BatchBuffer& f = floats.next();
    const BatchBuffer& rb = raw.next();
    ASSERT_EQ(f.size, rb.size);
    std::vector<float> decoded(static_cast<size_t>(rb.size) * 120);
    decode_samples(rb.images.data(), SampleType::kF16, decoded.size(), decoded.data());
    for (size_t i = 0; i < decoded.size(); ++i) ASSERT_EQ(decoded[i], f.images[i]) << i;
    for (int64_t i = 0; i < f.size; ++i) ASSERT_EQ(f.labels[i], rb.labels[i]);
  }
}

// A long command's progress: a line once the interval has passed, with the share done when
// the total is known; nothing before.
TEST(ProgressNote, PrintsOnlyWhenDue) {
  testing::internal::CaptureStdout();
  ProgressNote quiet("never", 10);  // the default interval: not due yet
  quiet.update(5);
  ProgressNote known("splitting a.h5", 200, 0.0), open_ended("reading b.h5", 0, 0.0);
  known.update(50);
  open_ended.update(7);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.find("never"), std::string::npos) << out;
  EXPECT_NE(out.find("splitting a.h5: 50 of 200 rows (25%), "), std::string::npos) << out;
  EXPECT_NE(out.find("reading b.h5: 7 rows, "), std::string::npos) << out;
}

}  // namespace
}  // namespace hpctrain
