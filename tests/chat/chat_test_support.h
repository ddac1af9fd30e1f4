#pragma once
// Shared helpers of the chat template tests.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "util/error.h"

namespace rf::test {

// A template and what it renders to with no variables.
struct TemplateCase {
  const char* source;
  const char* expected;
};

inline std::string render_template(const std::string& source,
                                   const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  return ChatTemplate::parse(source).render(context);
}

// The rf::Error message of rendering (or parsing) `source`; fails the test if none is thrown.
inline std::string render_error(const std::string& source,
                                const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  try {
    const std::string output = render_template(source, context);
    ADD_FAILURE() << "expected an error, got output: " << output;
  } catch (const Error& error) {
    return error.what();
  }
  return {};
}

// A file of the repository, by its path from the repository root.
inline std::string read_repository_file(const std::string& path) {
  std::ifstream in(std::string(ROCMFORGE_SOURCE_DIR) + "/" + path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace rf::test
