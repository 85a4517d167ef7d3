// The reader threads' normalisation and augmentation: (x - mean) / std per channel; shifts
// fill with zeros and mirrors reverse rows; the draws depend on the seed, the rank, the
// batch and the sample only, so a loader started at a later batch (a resume) repeats them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data-tools/stats.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 24, kC = 2, kH = 4, kW = 5, kPlane = kH * kW;

class PreprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::path(::testing::TempDir()) /
             ("ht_pre_" +
              std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".h5"))
                .string();
    images_.resize(kRows * kC * kPlane);
    for (size_t i = 0; i < images_.size(); ++i) images_[i] = static_cast<uint8_t>(1 + i % 250);
    std::vector<int32_t> labels(kRows, 0);
    DatasetWriterOptions o;
    o.type = SampleType::kU8;
    o.c = kC;
    o.h = kH;
    o.w = kW;
    o.num_classes = 2;
    DatasetWriter writer(path_, o);
    writer.append(kRows, images_.data(), labels.data());
    writer.close();
  }
  void TearDown() override { fs::remove(path_); }

  // Every sample of `epochs` epochs of a loader over the whole file, in batch order, from
  // batch `first_seq` on; raw: the loader keeps the (augmented) stored bytes, which the CPU
  // backend then decodes and normalises as a GPU's decode_input does.
  std::vector<std::vector<float>> samples(const Preprocess& p, int64_t first_seq = 0,
                                          int epochs = 2, bool raw = false) const {
    const DatasetFile file(path_);
    LoaderOptions o;
    o.batch = 4;
    o.epochs = epochs;
    o.shuffle = true;
    o.seed = 5;
    o.rank = 1;
    o.first_seq = first_seq;
    o.preprocess = p;
    o.raw = raw;
    Loader loader(file, Shard{0, kRows}, o);
    std::vector<std::vector<float>> out;
    EXPECT_EQ(loader.leaves_normalization(), raw && !p.mean.empty());
    CpuBackend cpu(1);
    const InputNorm norm{p.mean.data(), p.inv_std.data(), static_cast<int>(p.mean.size()),
                         static_cast<size_t>(kPlane)};
    for (int64_t b = first_seq; b < epochs * loader.batches_per_epoch(); ++b) {
      const BatchBuffer& x = loader.next();
      for (int64_t i = 0; i < x.size; ++i) {
        std::vector<float> sample(kC * kPlane);
        if (raw) {
          EXPECT_EQ(loader.shape().type, SampleType::kU8);
          const auto* bytes = reinterpret_cast<const uint8_t*>(x.images.data()) + i * kC * kPlane;
          cpu.decode_input(bytes, SampleType::kU8, sample.size(),
                           loader.leaves_normalization() ? norm : InputNorm{}, sample.data());
        } else {
          std::copy_n(x.images.begin() + i * kC * kPlane, kC * kPlane, sample.begin());
        }
        out.push_back(std::move(sample));
      }
    }
    return out;
  }

  std::string path_;
  std::vector<uint8_t> images_;
};

TEST_F(PreprocessTest, NormalisesPerChannel) {
  Preprocess p;
  p.mean = {0.25f, 0.5f};
  p.inv_std = {2.0f, 4.0f};
  const auto plain = samples({});
  const auto norm = samples(p);
  ASSERT_EQ(plain.size(), norm.size());
  for (size_t s = 0; s < plain.size(); ++s) {
    for (int64_t ch = 0; ch < kC; ++ch) {
      for (int64_t j = 0; j < kPlane; ++j) {
        const size_t k = static_cast<size_t>(ch * kPlane + j);
        EXPECT_FLOAT_EQ(norm[s][k], (plain[s][k] - p.mean[ch]) * p.inv_std[ch]);
      }
    }
  }
  // Raw batches keep the stored bytes; a backend's decode gives the same floats.
  EXPECT_EQ(samples(p, 0, 2, /*raw=*/true), norm);
}

TEST_F(PreprocessTest, ShiftsFillWithZerosAndMirrorsReverseRows) {
  Preprocess p;
  p.flip = true;
  p.crop_padding = 1;
  const auto plain = samples({});
  const auto aug = samples(p);
  ASSERT_EQ(plain.size(), aug.size());
  std::set<std::tuple<bool, int, int>> seen;
  for (size_t s = 0; s < plain.size(); ++s) {
    // Find the (mirror, dy, dx) that turns the plain sample into the augmented one: exactly
    // one must fit, for every channel at once.
    int fits = 0;
    for (const bool mirror : {false, true}) {
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          bool ok = true;
          for (int64_t ch = 0; ch < kC && ok; ++ch) {
            for (int64_t y = 0; y < kH && ok; ++y) {
              for (int64_t x = 0; x < kW && ok; ++x) {
                const int64_t sy = y + dy, shifted = x + dx;
                const int64_t sx = mirror ? kW - 1 - shifted : shifted;
                const float want = sy >= 0 && sy < kH && sx >= 0 && sx < kW
                                       ? plain[s][ch * kPlane + sy * kW + sx]
                                       : 0.0f;
                ok = aug[s][ch * kPlane + y * kW + x] == want;
              }
            }
          }
          if (ok) {
            ++fits;
            seen.insert({mirror, dy, dx});
          }
        }
      }
    }
    EXPECT_EQ(fits, 1) << "sample " << s;
  }
  EXPECT_GE(seen.size(), 8u) << "48 samples should draw most of the 18 (mirror, dy, dx)";
  EXPECT_EQ(samples(p, 0, 2, /*raw=*/true), aug);
}

TEST_F(PreprocessTest, DrawsRepeatWhenStartedLater) {
  Preprocess p;
  p.flip = true;
  p.crop_padding = 2;
  p.mean = {0.5f, 0.5f};
  p.inv_std = {3.0f, 3.0f};
  const auto whole = samples(p);
  EXPECT_EQ(samples(p), whole);  // deterministic, whatever the reader threads' timing
  // Shifted and mirrored as stored bytes, normalised by the backend: the same floats.
  EXPECT_EQ(samples(p, 0, 2, /*raw=*/true), whole);
  // A loader resumed at batch 7 of 12 gives the uninterrupted run's samples from there.
  const auto resumed = samples(p, 7);
  ASSERT_EQ(resumed.size(), whole.size() - 7 * 4);
  EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), whole.begin() + 7 * 4));
}

TEST_F(PreprocessTest, StatsArePerChannelAndStoredAsAttributes) {
  const ChannelStats s = channel_stats({path_});
  ASSERT_EQ(s.mean.size(), 2u);
  EXPECT_EQ(s.rows, kRows);
  for (int64_t ch = 0; ch < kC; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < kPlane; ++j) {
        const double v = images_[(r * kC + ch) * kPlane + j] / 255.0;
        sum += v;
        sq += v * v;
      }
    }
    const double n = kRows * kPlane, m = sum / n;
    EXPECT_NEAR(s.mean[ch], m, 1e-6);
    EXPECT_NEAR(s.std[ch], std::sqrt(sq / n - m * m), 1e-6);
  }
  store_channel_stats(path_, s);
  const DatasetFile file(path_);
  EXPECT_EQ(file.shape().mean, s.mean);
  EXPECT_EQ(file.shape().stddev, s.std);
}

}  // namespace
}  // namespace hpctrain
