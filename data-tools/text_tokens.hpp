// hpctrain-data text: text files into token windows (docs/formats.md, "Token files"). The
// files are read in the order given and split into tokens: characters (UTF-8 code points)
// or words; the vocabulary is built over all of them, and the token stream is cut into
// windows of T + 1 tokens that overlap by one (window i starts at token i T), so every
// token but the first is a target once (but the last (tokens - 1) mod T, which fill no
// window). With validation and test fractions the windows are
// spread over three files that share the vocabulary, interleaved over the whole text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct TextOptions {
  std::vector<std::string> files;
  // A file; with a fraction, a directory for train.h5 and val.h5 and/or test.h5 (a file
  // for each fraction above 0).
  std::string out;
  int64_t seq_len = 0;
  std::string level = "char";  // or "word"
  int64_t vocab_size = 0;      // 0: every token seen; else <unk> + the V - 1 most frequent
  double val_fraction = 0, test_fraction = 0;
};

struct TextReport {
  int64_t tokens = 0, vocab = 0;
  std::vector<std::string> outputs;  // the files written
  std::vector<int64_t> windows;      // per output
  // A split's: files under the name of a split it does not write that an earlier split did
  // not write either (the user's), left in place.
  std::vector<std::string> kept;
};

// Throws UsageError naming the file or option for bad input (a missing or empty file,
// invalid UTF-8, too little text, bad options), Error when an output cannot be written;
// nothing is left under an output name then.
TextReport convert_text(const TextOptions& options);

// The tokens of `text` at `level` ("char": UTF-8 code points; "word": runs of letters,
// digits, apostrophes and non-ASCII characters, each other ASCII character on its own,
// "\n" kept, other white space dropped). Throws UsageError naming `what` and the byte
// offset of invalid UTF-8 (overlong forms, surrogates and code points above U+10FFFF
// included) or of a NUL byte.
std::vector<std::string> split_tokens(const std::string& text, const std::string& level,
                                      const std::string& what);

}  // namespace hpctrain
