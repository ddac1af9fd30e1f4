#include "formats/json_file.h"

#include "util/error.h"
#include "util/text_file.h"

namespace rf {

nlohmann::json parse_json(std::string_view text, std::string_view source, std::string_view part) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: {} is not valid JSON: {}", source, part, e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) { return parse_json(read_text_file(path), path, "the file"); }

}  // namespace rf
