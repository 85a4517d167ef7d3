// UTF-8 text: what YAML configs, summary.json and the token files hold.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hpctrain {

// Bytes of the UTF-8 sequence starting at s[i], or 0 if it is not a valid one: no overlong
// form, no UTF-16 surrogate (U+D800-DFFF), nothing above U+10FFFF, no NUL (a C or HDF5
// string ends there).
size_t utf8_sequence(std::string_view s, size_t i);

// The byte where `s` stops being UTF-8 (utf8_sequence 0 there); npos where all of it is.
size_t first_non_utf8(std::string_view s);

// `s` with each byte that starts no valid sequence (NUL included) replaced by U+FFFD, for
// output that must be UTF-8 (JSON) whatever bytes a name or a path held.
std::string valid_utf8(std::string_view s);

}  // namespace hpctrain
