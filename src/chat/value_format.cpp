#include "chat/value_format.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "chat/errors.h"
#include "chat/limits.h"
#include "tokenizer/unicode.h"

namespace rf::jinja {
namespace {

void append_hex(std::string& out, const char* prefix, unsigned value, int digits) {
  out += fmt::format("{}{:0{}x}", prefix, value, digits);
}

bool is_printable(char32_t c) {
  if (c == U' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char quote = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t pos = 0, size = 0; pos < s.size(); pos += size) {
    const char32_t c = unicode::decode_utf8(s, pos, size);
    if (c == static_cast<char32_t>(quote) || c == U'\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (is_printable(c)) {
      out.append(s, pos, size);
    } else if (c < 0x100) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x10000) {
      append_hex(out, "\\u", c, 4);
    } else {
      append_hex(out, "\\U", c, 8);
    }
  }
  return out + quote;
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (std::size_t pos = 0, size = 0; pos < s.size(); pos += size) {
    const char32_t c = unicode::decode_utf8(s, pos, size);
    switch (c) {
      case U'"':
        out += "\\\"";
        break;
      case U'\\':
        out += "\\\\";
        break;
      case U'\n':
        out += "\\n";
        break;
      case U'\r':
        out += "\\r";
        break;
      case U'\t':
        out += "\\t";
        break;
      case U'\b':
        out += "\\b";
        break;
      case U'\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7f && c < 0x10000)) {
          append_hex(out, "\\u", c, 4);
        } else if (ensure_ascii && c >= 0x10000) {  // a UTF-16 surrogate pair, as Python writes it
          append_hex(out, "\\u", 0xd800 + ((c - 0x10000) >> 10), 4);
          append_hex(out, "\\u", 0xdc00 + ((c - 0x10000) & 0x3ff), 4);
        } else {
          out.append(s, pos, size);
        }
    }
  }
  out += '"';
}

// Python's repr(float): the shortest digits that round-trip, in positional notation for
// exponents -5 < e < 16 and scientific with a two-digit exponent otherwise.
std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string_view scientific(buffer, static_cast<std::size_t>(result.ptr - buffer));
  const std::size_t e_pos = scientific.find('e');
  const bool negative = scientific.front() == '-';
  std::string digits;
  for (const char c : scientific.substr(negative, e_pos - negative)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(scientific.substr(e_pos + 1)));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += '.' + digits.substr(1);
    out += fmt::format("e{}{:02}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(exponent) + 1) + '.' +
           digits.substr(static_cast<std::size_t>(exponent) + 1);
  }
  return out;
}

class Writer {
 public:
  explicit Writer(const JsonOptions* json) : json_(json) {}

  void write(const Value& value, int depth) {
    if (depth > limits::kMaxNesting) fail("value nested more than {} levels deep", limits::kMaxNesting);
    limits::check_bytes(out.size());
    switch (value.type()) {
      case Value::Type::Undefined:
        if (json_) unserializable(value);
        out += "Undefined";
        return;
      case Value::Type::None:
        out += json_ ? "null" : "None";
        return;
      case Value::Type::Bool:
        out += json_ ? (value.as_bool() ? "true" : "false") : (value.as_bool() ? "True" : "False");
        return;
      case Value::Type::Int:
        out += std::to_string(value.as_int());
        return;
      case Value::Type::Float:
        out += json_ ? json_float(value.as_float()) : format_float(value.as_float());
        return;
      case Value::Type::String:
        if (json_) {
          append_json_string(out, value.as_string(), json_->ensure_ascii);
        } else {
          out += string_repr(value.as_string());
        }
        return;
      case Value::Type::List:
        write_list(value.as_list(), depth);
        return;
      case Value::Type::Dict:
        write_dict(value.as_dict(), depth);
        return;
      case Value::Type::Namespace:
        if (json_) unserializable(value);
        out += "<Namespace ";
        write_dict(value.as_namespace().attributes, depth);
        out += '>';
        return;
      case Value::Type::Function:
        if (json_) unserializable(value);
        out += "<function " + value.as_function().name + '>';
        return;
    }
  }

  std::string out;

 private:
  [[noreturn]] static void unserializable(const Value& value) {
    fail("Object of type {} is not JSON serializable", value.type_name());
  }

  static std::string json_float(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
    return format_float(value);
  }

  // json.dumps' layout: with an indent every item goes on its own line.
  void open_item(bool first, int depth) {
    if (!first) out += json_ ? json_->item_separator : ", ";
    if (json_ && json_->indent) {
      out += '\n';
      for (int i = 0; i < depth; ++i) out += *json_->indent;
    }
  }

  void close_container(bool empty, int depth, char close) {
    if (!empty && json_ && json_->indent) open_item(true, depth);
    out += close;
  }

  void write_list(const List& list, int depth) {
    const bool tuple = list.is_tuple && !json_;
    out += tuple ? '(' : '[';
    for (std::size_t i = 0; i < list.items.size(); ++i) {
      open_item(i == 0, depth + 1);
      write(list.items[i], depth + 1);
    }
    if (tuple && list.items.size() == 1) out += ',';
    close_container(list.items.empty(), depth, tuple ? ')' : ']');
  }

  void write_dict(const Object& object, int depth) {
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : object.entries) entries.push_back(&entry);
    if (json_ && json_->sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
      open_item(i == 0, depth + 1);
      write(Value::string(entries[i]->first), depth + 1);
      out += json_ ? json_->key_separator : ": ";
      write(entries[i]->second, depth + 1);
    }
    close_container(entries.empty(), depth, '}');
  }

  const JsonOptions* json_;  // null: Python repr
};

}  // namespace

std::string to_str(const Value& value) {
  switch (value.type()) {
    case Value::Type::Undefined:
      return {};
    case Value::Type::String:
      return value.as_string();
    default: {
      Writer writer(nullptr);
      writer.write(value, 0);
      return std::move(writer.out);
    }
  }
}

std::string to_json(const Value& value, const JsonOptions& options) {
  Writer writer(&options);
  writer.write(value, 0);
  return std::move(writer.out);
}

}  // namespace rf::jinja
