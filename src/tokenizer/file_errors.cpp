#include "tokenizer/file_errors.h"

namespace rf {

nlohmann::json read_json_file(const std::string& path) {
  const std::string contents = read_text_file(path);
  try {
    return nlohmann::json::parse(contents);
  } catch (const nlohmann::json::parse_error& error) {
    fail("{}: invalid JSON: {}", path, error.what());
  }
}

}  // namespace rf
