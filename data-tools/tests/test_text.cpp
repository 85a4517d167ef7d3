// hpctrain-data text: tokenisation (characters as UTF-8 code points, words), the
// vocabulary (sorted; limited to the most frequent with <unk>), windows of T + 1 tokens that
// overlap by one and decode back to the text, the interleaved split with one vocabulary,
// determinism, the errors (exit 2 naming the file or option), and inspect of token files.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data-tools/inspect_data.hpp"
#include "data-tools/text_tokens.hpp"
#include "data/dataset_file.hpp"
#include "h5/h5.hpp"
#include "tools_test_helpers.hpp"

namespace hpctrain {
namespace {

using tools_test::expect_usage_error;
using tools_test::fresh_dir;
using tools_test::write_text;

// Every window of a token file decoded to text, its T + 1 tokens each.
std::vector<std::string> windows(const std::string& path) {
  const DatasetFile f(path);
  const DatasetShape& s = f.shape();
  std::vector<int32_t> in(static_cast<size_t>(s.n * s.w)), next(in.size());
  f.read_rows(0, s.n, in.data(), next.data());
  std::vector<std::string> out;
  for (int64_t r = 0; r < s.n; ++r) {
    std::string text;
    for (int64_t j = 0; j < s.w; ++j) text += s.vocabulary.at(in[r * s.w + j]);
    text += s.vocabulary.at(next[r * s.w + s.w - 1]);
    out.push_back(text);
  }
  return out;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(TextTool, SplitsCharactersAndWords) {
  EXPECT_EQ(split_tokens("aé€😀\n", "char", "x"),
            (std::vector<std::string>{"a", "é", "€", "😀", "\n"}));
  EXPECT_EQ(split_tokens("Don't stop,\n  now! élan", "word", "x"),
            (std::vector<std::string>{"Don't", "stop", ",", "\n", "now", "!", "élan"}));
  // A byte-order mark at the start is no token (it was the start of the first word).
  EXPECT_EQ(split_tokens("\xEF\xBB\xBF"
                         "BOM it",
                         "word", "x"),
            (std::vector<std::string>{"BOM", "it"}));
  EXPECT_EQ(split_tokens("\xEF\xBB\xBF"
                         "ab",
                         "char", "x"),
            (std::vector<std::string>{"a", "b"}));
  expect_usage_error([] { split_tokens(std::string("ab\xff") + "c", "char", "f.txt"); },
                     "f.txt: invalid UTF-8 at byte 2");
  expect_usage_error([] { split_tokens("a\xc3", "char", "g.txt"); },
                     "g.txt: invalid UTF-8 at byte 1");
  // Not UTF-8 either: a UTF-16 surrogate, overlong forms, a code point above U+10FFFF;
  // a NUL (an HDF5 string would end there) is no text.
  for (const char* bad : {"ab\xed\xa0\x80", "ab\xe0\x80\x80", "ab\xf0\x80\x80\x80",
                          "ab\xf4\x90\x80\x80", "ab\xc1\xbf"}) {
    expect_usage_error([&] { split_tokens(bad, "word", "h.txt"); },
                       "h.txt: invalid UTF-8 at byte 2");
  }
  expect_usage_error([] { split_tokens(std::string("ab\0c", 4), "char", "n.txt"); },
                     "n.txt: NUL byte at byte 2");
  // The last code points before and at the excluded ranges' edges are fine.
  EXPECT_EQ(split_tokens("\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\xf0\x90\x80\x80", "char", "x"),
            (std::vector<std::string>{"\xed\x9f\xbf", "\xee\x80\x80", "\xf4\x8f\xbf\xbf",
                                      "\xf0\x90\x80\x80"}));
}

TEST(TextTool, VocabularyOfManyWords) {
  // 6,000 words: a vocabulary attribute far above HDF5's 64 KiB for compact attributes.
  const std::string dir = fresh_dir("text_many");
  std::string text;
  for (int i = 0; i < 6000; ++i) text += "word" + std::to_string(i) + "x ";
  write_text(dir + "/w.txt", text);
  TextOptions o;
  o.files = {dir + "/w.txt"};
  o.out = dir + "/w.h5";
  o.seq_len = 8;
  o.level = "word";
  const TextReport r = convert_text(o);
  EXPECT_EQ(r.vocab, 6000);
  const DatasetFile f(o.out);
  ASSERT_EQ(f.shape().vocabulary.size(), 6000u);
  EXPECT_EQ(f.shape().vocabulary.front(), "word0x");
  const std::vector<std::string> w = windows(o.out);
  ASSERT_EQ(w.size(), 749u);
  EXPECT_EQ(w[1], "word8xword9xword10xword11xword12xword13xword14xword15xword16x");
}

TEST(TextTool, CharacterWindowsDecodeToTheTextAndOverlapByOne) {
  const std::string dir = fresh_dir("text_chars");
  const std::string a = "Hello, wörld!\n", b = "Ünïcode and more text.\n";
  write_text(dir + "/a.txt", a);
  write_text(dir + "/b.txt", b);
  TextOptions o;
  o.files = {dir + "/a.txt", dir + "/b.txt"};
  o.out = dir + "/out.h5";
  o.seq_len = 5;
  const TextReport r = convert_text(o);
  const std::vector<std::string> chars = split_tokens(a + b, "char", "");
  EXPECT_EQ(r.tokens, static_cast<int64_t>(chars.size()));
  const int64_t n = (r.tokens - 1) / 5;
  ASSERT_EQ(r.windows, (std::vector<int64_t>{n}));
  const DatasetFile f(o.out);
  EXPECT_EQ(f.shape().level, "char");
  EXPECT_EQ(f.shape().vocab_size, r.vocab);
  // The vocabulary: every character once, sorted by code point.
  std::set<std::string> distinct(chars.begin(), chars.end());
  EXPECT_EQ(f.shape().vocabulary, std::vector<std::string>(distinct.begin(), distinct.end()));
  const std::vector<std::string> w = windows(o.out);
  ASSERT_EQ(static_cast<int64_t>(w.size()), n);
  for (int64_t i = 0; i < n; ++i) {
    std::string want;
    for (int64_t j = 0; j <= 5; ++j) want += chars[static_cast<size_t>(i * 5 + j)];
    EXPECT_EQ(w[static_cast<size_t>(i)], want) << "window " << i;
  }
  // Determinism: the same options write the same bytes, a second later too (HDF5 kept
  // the root group's times, in seconds, in its header).
  const std::string first = bytes_of(o.out);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  convert_text(o);
  EXPECT_EQ(bytes_of(o.out), first);
}

TEST(TextTool, LimitedVocabularyKeepsTheMostFrequentAndUnknown) {
  const std::string dir = fresh_dir("text_words");
  write_text(dir + "/w.txt", "the cat and the dog and the bird saw the cat\n");
  TextOptions o;
  o.files = {dir + "/w.txt"};
  o.out = dir + "/w.h5";
  o.seq_len = 3;
  o.level = "word";
  o.vocab_size = 4;  // the: 4, cat: 2, and: 2; <unk> for dog, bird, saw, \n
  convert_text(o);
  const DatasetFile f(o.out);
  EXPECT_EQ(f.shape().vocabulary, (std::vector<std::string>{"<unk>", "and", "cat", "the"}));
  const std::vector<std::string> w = windows(o.out);
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w[0], "thecatandthe");
  EXPECT_EQ(w[1], "the<unk>andthe");
  // A size above the tokens seen keeps them all, and <unk> still stands at id 0 (for a
  // prompt's unseen words).
  o.vocab_size = 100;
  convert_text(o);
  EXPECT_EQ(DatasetFile(o.out).shape().vocabulary,
            (std::vector<std::string>{"<unk>", "\n", "and", "bird", "cat", "dog", "saw", "the"}));
}

TEST(TextTool, SplitSpreadsWindowsAndSharesTheVocabulary) {
  const std::string dir = fresh_dir("text_split");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i) + " of the text\n";
  write_text(dir + "/t.txt", text);
  TextOptions o;
  o.files = {dir + "/t.txt"};
  o.out = dir + "/out";
  o.seq_len = 16;
  o.val_fraction = 0.1;
  o.test_fraction = 0.05;
  const TextReport r = convert_text(o);
  const int64_t n = (r.tokens - 1) / 16;
  ASSERT_EQ(r.windows.size(), 3u);
  EXPECT_EQ(r.windows[0] + r.windows[1] + r.windows[2], n);
  EXPECT_NEAR(static_cast<double>(r.windows[1]), 0.1 * n, 2.0);
  EXPECT_NEAR(static_cast<double>(r.windows[2]), 0.05 * n, 2.0);
  // Every window is in exactly one split: together they are the unsplit file's windows.
  TextOptions whole = o;
  whole.out = dir + "/whole.h5";
  whole.val_fraction = whole.test_fraction = 0;
  convert_text(whole);
  std::multiset<std::string> all, parts;
  for (const std::string& w : windows(whole.out)) all.insert(w);
  for (const char* name : {"train.h5", "val.h5", "test.h5"}) {
    const std::string path = o.out + "/" + name;
    EXPECT_EQ(DatasetFile(path).shape().vocabulary, DatasetFile(whole.out).shape().vocabulary);
    for (const std::string& w : windows(path)) parts.insert(w);
  }
  EXPECT_EQ(parts, all);
  // Spread over the text: the test windows are not one block at its end.
  const std::vector<std::string> test = windows(o.out + "/test.h5");
  EXPECT_NE(test.front().find("line "), std::string::npos);
  // Split again without a test fraction: the earlier test.h5, whose windows are now in
  // train.h5, is removed with the others.
  o.test_fraction = 0;
  TextReport again = convert_text(o);
  EXPECT_TRUE(std::filesystem::exists(o.out + "/val.h5"));
  EXPECT_FALSE(std::filesystem::exists(o.out + "/test.h5"));
  EXPECT_TRUE(again.kept.empty());
  // A test.h5 that this command did not write (the user's) stays, and the report says so.
  write_text(o.out + "/test.h5", "results of another tool\n");
  again = convert_text(o);
  EXPECT_EQ(again.kept, std::vector<std::string>{o.out + "/test.h5"});
  std::ifstream kept(o.out + "/test.h5");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "results of another tool\n");
}

TEST(TextTool, OutputsThatCannotBeWrittenAreRefusedFirst) {
  const std::string dir = fresh_dir("text_outputs");
  write_text(dir + "/t.txt", "some text to cut into windows\n");
  std::filesystem::create_directories(dir + "/adir");
  std::filesystem::create_directories(dir + "/split/train.h5");
  write_text(dir + "/afile", "");
  TextOptions o;
  o.files = {dir + "/t.txt"};
  o.seq_len = 4;
  o.out = dir + "/adir";
  expect_usage_error([&] { convert_text(o); }, dir + "/adir: is a directory");
  o.out = dir + "/missing/x.h5";
  expect_usage_error([&] { convert_text(o); }, "does not exist");
  o.val_fraction = 0.2;
  o.out = dir + "/afile";
  expect_usage_error([&] { convert_text(o); }, dir + "/afile: not a directory");
  o.out = dir + "/split";
  expect_usage_error([&] { convert_text(o); }, "split/train.h5: is a directory");
  // An input named like an output's temporary file, which a writer removes first.
  o.val_fraction = 0;
  write_text(dir + "/x.h5.tmp", "text under a temporary file's name\n");
  o.files = {dir + "/x.h5.tmp"};
  o.out = dir + "/x.h5";
  expect_usage_error([&] { convert_text(o); }, "x.h5.tmp would replace the input file");
  EXPECT_TRUE(std::filesystem::exists(dir + "/x.h5.tmp"));
  // Nothing was left behind.
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"adir", "afile", "split", "t.txt", "x.h5.tmp"}));
}

TEST(TextTool, BadInputIsNamed) {
  const std::string dir = fresh_dir("text_bad");
  write_text(dir + "/short.txt", "abc");
  write_text(dir + "/empty.txt", "");
  write_text(dir + "/bad.txt", "ok\xc0\xaf");
  TextOptions o;
  o.out = dir + "/x.h5";
  o.seq_len = 4;
  o.files = {dir + "/missing.txt"};
  expect_usage_error([&] { convert_text(o); }, dir + "/missing.txt: no such file");
  o.files = {dir + "/empty.txt"};
  expect_usage_error([&] { convert_text(o); }, dir + "/empty.txt: empty file");
  o.files = {dir + "/bad.txt"};
  expect_usage_error([&] { convert_text(o); }, dir + "/bad.txt: invalid UTF-8 at byte 2");
  o.files = {dir + "/short.txt"};
  expect_usage_error([&] { convert_text(o); }, dir + "/short.txt: 3 tokens make no window of 5");
  o.seq_len = 1;
  o.level = "byte";
  expect_usage_error([&] { convert_text(o); }, "--level: expected char or word");
  o.level = "char";
  o.val_fraction = 0.6;
  o.test_fraction = 0.5;
  expect_usage_error([&] { convert_text(o); }, "--val-fraction and --test-fraction");
  o.val_fraction = 0.3;  // 2 windows: the first goes to test, the second to train
  o.test_fraction = 0.3;
  expect_usage_error([&] { convert_text(o); }, "the val split gets no window");
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.h5"));
  // An output that is an input: refused, the text left as it was.
  o.val_fraction = o.test_fraction = 0;
  o.files = {dir + "/short.txt"};
  o.out = dir + "/./short.txt";
  expect_usage_error([&] { convert_text(o); }, "would overwrite the input file");
  std::ifstream text(dir + "/short.txt");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(text)), {}), "abc");
}

// Writes `ids` ([rows, cols], int32) as /tokens of a new file with vocab_size, and /labels
// when `labels` is not empty.
void write_token_file(const std::string& path, int64_t rows, int64_t cols,
                      const std::vector<int32_t>& ids, int64_t vocab,
                      const std::vector<int32_t>& labels) {
  const H5Handle file(HT_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)),
                      H5Fclose);
  const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
  H5Handle space(HT_CHECK_H5(H5Screate_simple(2, dims, nullptr)), H5Sclose);
  H5Handle set(HT_CHECK_H5(H5Dcreate2(file.get(), "tokens", H5T_STD_I32LE, space.get(), H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT)),
               H5Dclose);
  HT_CHECK_H5(H5Dwrite(set.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()));
  h5_write_int(file.get(), "vocab_size", vocab);
  if (labels.empty()) return;
  H5Handle label_space(HT_CHECK_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
  H5Handle label_set(HT_CHECK_H5(H5Dcreate2(file.get(), "labels", H5T_STD_I32LE, label_space.get(),
                                            H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)),
                     H5Dclose);
  HT_CHECK_H5(
      H5Dwrite(label_set.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()));
}

std::string inspected(const std::string& path) {
  std::ostringstream out;
  inspect_data_file(path, out);
  return out.str();
}

TEST(TextInspect, ChecksEveryTokenIdAndShowsTheFirstWindow) {
  const std::string dir = fresh_dir("text_inspect");
  write_text(dir + "/a.txt", "abcab cabca bcabc");
  TextOptions o;
  o.files = {dir + "/a.txt"};
  o.out = dir + "/out.h5";
  o.seq_len = 4;
  convert_text(o);  // vocabulary " abc": 4 windows of 5 tokens
  std::string text = inspected(o.out);
  for (const std::string& expected :
       {std::string("tokens: [4, 5] (N, T + 1: next-token windows), T = 4"),
        std::string("vocab_size: 4, level char"),
        std::string("token ids: 4 of 4 used, none outside [0, 4)"),
        std::string("sample 0: abcab\n")}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "no '" << expected << "' in\n" << text;
  }
  // A damaged id in the last row, which the loader would meet only with that row's batch,
  // and one in the first window: counted, the first named, the window shown with it (as
  // ids: this copy has no vocabulary).
  const DatasetFile file(o.out);
  std::vector<int32_t> ids(20), next(16);
  file.read_rows(0, 4, ids.data(), next.data());
  std::vector<int32_t> rows(20);
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 4; ++j) rows[r * 5 + j] = ids[r * 4 + j];
    rows[r * 5 + 4] = next[r * 4 + 3];
  }
  rows[1] = -3;
  rows[17] = 9;
  write_token_file(dir + "/bad.h5", 4, 5, rows, 4, {});
  text = inspected(dir + "/bad.h5");
  EXPECT_NE(text.find("token ids: 4 of 4 used; outside [0, 4): 2 (the first, -3, at row 0, "
                      "column 1); training stops with exit 2 when it reads that row"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sample 0: 1 <-3?> 3 1 2\n"), std::string::npos) << text;
  // A classification file: every id checked and its class histogram.
  write_token_file(dir + "/classes.h5", 3, 2, {0, 1, 1, 2, 2, 5}, 4, {1, 0, 1});
  text = inspected(dir + "/classes.h5");
  for (const std::string& expected :
       {std::string("tokens: [3, 2] (N, T: sequences with a label), T = 2"),
        std::string("outside [0, 4): 1 (the first, 5, at row 2, column 1)"),
        std::string("num_classes: 2"), std::string("33.33%"), std::string("66.67%")}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "no '" << expected << "' in\n" << text;
  }
}

}  // namespace
}  // namespace hpctrain
