// Tests of the config loader's errors about the YAML text itself, before any key is read:
// syntax, empty files, second documents, quotes left open, strings that are not UTF-8.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config_test_helpers.hpp"
#include "core/error.hpp"
#include "train/catalog.hpp"

namespace hpctrain {
namespace {

using config_test::expect_error;
using config_test::load_error;
using config_test::write_yaml;

namespace fs = std::filesystem;

TEST(ConfigErrors, FileLevelProblems) {
  // yaml-cpp words the syntax message; the location and prefix are ours.
  std::string path;
  const std::string syntax = load_error("data:\n  train: t.h5\n  val: [v.h5\nx: 1\n", {}, &path);
  EXPECT_EQ(syntax.rfind(path + ":4: YAML syntax error: ", 0), 0u) << syntax;

  const std::string empty = load_error("", {}, &path);
  EXPECT_EQ(empty.rfind(path + ": config file is empty", 0), 0u) << empty;
  const std::string comments = load_error("# nothing here\n", {}, &path);
  EXPECT_EQ(comments.rfind(path + ": config file is empty", 0), 0u) << comments;
  expect_error("- a\n- b\n", "FILE:1: expected a map of sections at the top level, got a list");
  // A study file (docs/study.md) says what it is; a YAML merge key says the reader keeps it.
  const std::string study = load_error("config: x.yaml\nvariants:\n  - {name: a}\n", {}, &path);
  EXPECT_EQ(study, path +
                       ": a study file (config: and variants:), not a training config: run "
                       "it with hpctrain study");
  expect_error("data:\n  train: t.h5\nrun:\n  <<: {name: x}\n",
               "FILE:4: run.<<: a YAML merge key, which the config reader does not resolve: give "
               "the keys, or an alias (*name) for a whole section");
  expect_error("train: {epochs: 2}\n---\ntrain: {epochs: 9, bogus: 1}\n",
               "FILE:2: a second YAML document ('---', or text after '...'): a config is one "
               "document");
  // Text after a "..." that ends the document is a second document too (yaml-cpp ignored it).
  expect_error("train: {epochs: 2}\n... # end\ntrain: {epochs: 3}\n",
               "FILE:3: a second YAML document ('---', or text after '...'): a config is one "
               "document");
  EXPECT_EQ(
      load_error("train: {epochs: 0}\n...\n# only a comment after the end\n", {}).find("second"),
      std::string::npos);
  EXPECT_EQ(load_error("run: {name: a}\n", {"run.name=a\n---\nb"}),
            "--set run.name: a second YAML document in the value ('---', or text after '...')");
  // A leading "---", comments and directives are not content; a block scalar's lines are.
  EXPECT_EQ(load_error("%YAML 1.2\n# c\n---\ntrain: {epochs: 0}\n", {}).find("second"),
            std::string::npos);
  expect_error("data:\n  train: |\n    a\n---\n",
               "FILE:4: a second YAML document ('---', or text after '...'): a "
               "config is one document");

  const std::string missing = (fs::path(::testing::TempDir()) / "no_such_config.yaml").string();
  try {
    load_config(missing, {}, catalog());
    ADD_FAILURE() << "loaded a missing file";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open config file");
  }
  EXPECT_THROW(load_config(::testing::TempDir(), {}, catalog()), UsageError);
}

// A quote left open ran to the end of the file: yaml-cpp took the keys after it into the
// string and the run trained with their defaults, exit 0. Strings that are not UTF-8 went
// into summary.json, which was then not JSON.
TEST(ConfigErrors, QuotesLeftOpenAndTextThatIsNotUtf8) {
  const std::string never_closed =
      " here is never closed (it would run to the end, taking in the keys after it)";
  expect_error("data:\n  train: t.h5\nrun:\n  name: \"quoted\ntrain:\n  epochs: 1\n",
               "FILE:4: YAML syntax error: the string quoted with \"" + never_closed);
  expect_error("data:\n  train: t.h5\nrun:\n  name: 'it''s\ntrain: {epochs: 1}\n",
               "FILE:4: YAML syntax error: the string quoted with '" + never_closed);
  // Closed quotes with their escapes, and a quote inside a block scalar, are strings.
  const Config ok = load_config(
      write_yaml("data: {train: t.h5}\nrun:\n  name: 'it''s'\n  dir: \"a\\\"b\"\n"), {}, catalog());
  EXPECT_EQ(ok.run.name, "it's");
  EXPECT_EQ(ok.run.dir, "a\"b");
  EXPECT_NO_THROW(
      load_config(write_yaml("data:\n  train: |\n    \"a\nrun: {name: '}'}\n"), {}, catalog()));
  // yaml-cpp counts its positions after a UTF-8 byte-order mark.
  expect_error(
      "\xEF\xBB\xBF"
      "data: {train: t.h5}\nrun:\n  dir: \"x\"\n  name: \"y\ntrain: {epochs: 1}\n",
      "FILE:4: YAML syntax error: the string quoted with \"" + never_closed);
  EXPECT_NO_THROW(load_config(write_yaml("\xEF\xBB\xBF"
                                         "data: {train: t.h5}\nrun: {dir: 'a''', name: \"b\"}\n"),
                              {}, catalog()));
  expect_error("data: {train: t.h5}\nrun:\n  name: \"bad\xff\xfename\"\n",
               "FILE:3: a string that is not UTF-8 text (byte 0xFF at byte 3 of it)");
  expect_error("data: {train: t.h5}\nrun: {dir: \"runs/nul\\0b\"}\n",
               "FILE:2: a string holding a NUL character");
  expect_error("data: {train: t.h5}\n",
               "--set run.name: a string that is not UTF-8 text (byte "
               "0xC3 at byte 1 of it)",
               {"run.name=a\xc3("});
}

}  // namespace
}  // namespace hpctrain
