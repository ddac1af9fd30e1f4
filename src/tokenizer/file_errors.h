#pragma once
// Errors of the tokenizer loaders name the file they were reading.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "formats/json_file.h"  // read_json_file, which the loaders use beside read_text_file
#include "util/error.h"
#include "util/text_file.h"

namespace rf {

// Runs `step` (returning what it returns) so that any error it throws names `path`.
template <typename Step>
auto with_path_in_errors(const std::string& path, Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const nlohmann::json::exception& error) {
    fail("{}: {}", path, error.what());
  } catch (const Error& error) {
    if (std::string_view(error.what()).starts_with(path)) throw;
    fail("{}: {}", path, error.what());
  }
}

}  // namespace rf
