#include "config/yaml_text.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace hpctrain {
namespace {

struct Source {
  const std::string* text;  // null: no quote is checked
  size_t skip;              // bytes before yaml-cpp's positions (a UTF-8 byte-order mark)
  const std::string& name;
  bool lines;
  std::string where(const YAML::Mark& mark) const {
    return !lines || mark.is_null() || mark.line < 0 ? name
                                                     : name + ":" + std::to_string(mark.line + 1);
  }
};

// Whether the quoted string that opens at text[at] (' or ") closes before the text ends:
// '' within '...' and a backslash escape within "..." do not close it.
bool quote_closes(const std::string& text, size_t at) {
  const char quote = text[at];
  for (size_t i = at + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;
      } else {
        return true;
      }
    }
  }
  return false;
}

void check_scalar(const YAML::Node& node, const Source& source) {
  const std::string* text = source.text;
  const std::string& value = node.Scalar();
  if (const size_t bad = first_non_utf8(value); bad != std::string::npos) {
    if (value[bad] == '\0') {
      throw UsageError(source.where(node.Mark()) + ": a string holding a NUL character");
    }
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(value[bad]));
    throw UsageError(source.where(node.Mark()) + ": a string that is not UTF-8 text (byte " + byte +
                     " at byte " + std::to_string(bad) + " of it)");
  }
  // yaml-cpp tags a string written in quotes (or as a block scalar) "!", a plain one "?".
  const YAML::Mark mark = node.Mark();
  if (text == nullptr || node.Tag() != "!" || mark.is_null() || mark.pos < 0) return;
  const size_t at = static_cast<size_t>(mark.pos) + source.skip;
  if (at < text->size() && ((*text)[at] == '"' || (*text)[at] == '\'') &&
      !quote_closes(*text, at)) {
    throw UsageError(source.where(mark) + ": YAML syntax error: the string quoted with " +
                     ((*text)[at] == '"' ? "\"" : "'") +
                     " here is never closed (it would run to the end, taking in the keys after "
                     "it)");
  }
}

// An alias can make a node its own descendant (&a [*a]): the walk stops at a depth no
// config reaches, where the config's own reading names the problem.
constexpr int kMaxDepth = 256;

void check_node(const YAML::Node& node, const Source& source, int depth) {
  if (depth > kMaxDepth) return;
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      check_scalar(node, source);
      break;
    case YAML::NodeType::Sequence:
      for (const YAML::Node& item : node) check_node(item, source, depth + 1);
      break;
    case YAML::NodeType::Map:
      for (auto it = node.begin(); it != node.end(); ++it) {
        check_node(it->first, source, depth + 1);
        check_node(it->second, source, depth + 1);
      }
      break;
    default:
      break;
  }
}

}  // namespace

void check_yaml_text(const YAML::Node& root, const std::string* text, const std::string& source,
                     bool lines) {
  // yaml-cpp's positions count from after a UTF-8 byte-order mark, and in characters of a
  // UTF-16 or UTF-32 text (a NUL among its first bytes), whose quotes are then not checked.
  const bool bom = text != nullptr && text->rfind("\xEF\xBB\xBF", 0) == 0;
  if (text != nullptr && (text->substr(0, 4).find('\0') != std::string::npos ||
                          text->rfind("\xFF\xFE", 0) == 0 || text->rfind("\xFE\xFF", 0) == 0)) {
    text = nullptr;
  }
  check_node(root, Source{text, bom ? size_t{3} : 0, source, lines}, 0);
}

}  // namespace hpctrain
