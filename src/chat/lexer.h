#pragma once
// Splits a template into text and the tokens inside {{ }} and {% %}, applying jinja2's
// whitespace control with transformers' settings (trim_blocks and lstrip_blocks on).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rf::jinja {

struct Token {
  enum class Kind {
    Text,
    VariableBegin,
    VariableEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Operator,
    End
  };
  Kind kind;
  std::string text;    // the text, name, operator or number as written; a string literal's value
  std::size_t offset;  // where it starts in the source
};

// `source` as normalize_source() returns it. The last token is End. Throws rf::Error.
std::vector<Token> tokenize(std::string_view source);

}  // namespace rf::jinja
