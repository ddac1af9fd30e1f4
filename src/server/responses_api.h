#pragma once
// OpenAI's Responses API (POST /v1/responses) on top of chat completions: the request put in chat's
// terms (input items as messages, instructions as the system message, flat function tools,
// text.format as response_format), and the answer in the Responses shape: a response object with
// its output items (a message of output_text, function calls), whole or as the typed stream of
// events that builds it. Nothing is stored: previous_response_id and item references are refused.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/event_stream.h"
#include "server/generations.h"
#include "server/openai_protocol.h"

namespace rf::server {

struct ResponsesRequest {
  nlohmann::ordered_json chat;  // the /v1/chat/completions body it amounts to
  nlohmann::json settings;      // what the response object repeats of the request (instructions, tools, ...)
};

// ApiError 400 naming the Responses field at fault.
ResponsesRequest chat_request_of(const nlohmann::json& body, const std::string& raw_body);

// Submitting the chat body names chat's fields in its errors; this names the Responses field.
std::string responses_field(const std::string& chat_field);

struct ResponseIdentity {
  std::string id;  // "resp_..."
  std::string model;
  std::int64_t created_at;
  nlohmann::json settings;
};
ResponseIdentity new_response_identity(const std::string& model, nlohmann::json settings);

// The answer, not streamed: `generation` read to its end.
nlohmann::json response_object(const ResponseIdentity& identity, const Generation& generation, const ResponseOptions& options);

// The answer as server-sent events: response.created ... response.completed (or .incomplete).
std::unique_ptr<EventFormatter> response_events(ResponseIdentity identity, ResponseOptions options);

}  // namespace rf::server
