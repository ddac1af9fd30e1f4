#pragma once
// What a request asks of the shape of its output: OpenAI's response_format (text, json_object,
// json_schema) or llama-server's `grammar` (GBNF) and `json_schema` fields, as one GBNF grammar
// for constrained decoding (grammar/).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rf::server {

struct GrammarRequest {
  std::string field;  // the field it came from, for errors
  std::string gbnf;
};

// nullopt when the output is free text. ApiError 400 naming the field for a malformed or
// unsupported one, or for more than one. `raw_body` is read again for the schema, whose
// properties must keep their order (the order the output gives them).
std::optional<GrammarRequest> requested_grammar(const std::string& raw_body, const nlohmann::json& body);

}  // namespace rf::server
