// The command-line words every hpctrain command reads alike (core/option_words.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/option_words.hpp"

namespace hpctrain {
namespace {

using Words = std::vector<std::string>;

TEST(OptionWords, NameEqualsValueIsTheOptionAndItsValue) {
  const OptionWords r = read_option_words(
      {"--input=1x28x28", "c.yaml", "--set=model.hidden=[7]", "--resume=never", "--time"});
  EXPECT_EQ(r.words, (Words{"--input", "1x28x28", "c.yaml", "--set", "model.hidden=[7]", "--resume",
                            "never", "--time"}));
  EXPECT_FALSE(r.help);
  // An empty value stays one: the command says it is missing.
  EXPECT_EQ(read_option_words({"--out="}).words, (Words{"--out", ""}));
}

TEST(OptionWords, AnOptionsValueIsKeptWhole) {
  // A prompt of "-h" or "--x=y" is text, not help or an option (generate printed its usage).
  const OptionWords r = read_option_words({"run", "--prompt", "-h", "--set", "--x=y=z"});
  EXPECT_EQ(r.words, (Words{"run", "--prompt", "-h", "--set", "--x=y=z"}));
  EXPECT_FALSE(r.help);
  // After a flag the next word is an option again.
  EXPECT_EQ(read_option_words({"--force", "--out=a.h5"}).words,
            (Words{"--force", "--out", "a.h5"}));
}

TEST(OptionWords, AFlagTakesNoValue) {
  // "--help=1" was "--help" "1", which train named as an unknown option "--help".
  try {
    read_option_words({"c.yaml", "--help=1"});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "option --help takes no value, got '--help=1'");
  }
  EXPECT_THROW(read_option_words({"--force=yes"}), UsageError);
  // As an option's value it is text.
  EXPECT_EQ(read_option_words({"--prompt", "--help=1"}).words, (Words{"--prompt", "--help=1"}));
}

TEST(OptionWords, HelpWhereAnOptionGoes) {
  EXPECT_TRUE(read_option_words({"c.yaml", "-h"}).help);
  EXPECT_TRUE(read_option_words({"--time", "--help"}).help);
  EXPECT_TRUE(read_option_words({"--prompt", "x", "--help"}).help);
  EXPECT_FALSE(read_option_words({"--checkpoint", "--help"}).help);
  EXPECT_TRUE(is_help({"--help"}));
  EXPECT_FALSE(is_help({"-h"}));
  EXPECT_FALSE(is_help({"x", "--help"}));
}

}  // namespace
}  // namespace hpctrain
