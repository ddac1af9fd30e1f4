#pragma once
// The JSON that OpenAI's /v1/completions and /v1/chat/completions answer with, whole or as
// streamed chunks, built from what the engine produced.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/event_stream.h"
#include "server/generations.h"
#include "server/tool_choice.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {

enum class Api { Completions, Chat };

struct ResponseHeader {
  Api api;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  std::string model;
  std::int64_t created;
};

struct ResponseOptions {
  bool logprobs = false;       // report each token's log-probability (and its top alternatives)
  bool include_usage = false;  // streaming: a last chunk with the usage (stream_options.include_usage)
  std::vector<std::string> echo;  // completions: each generation's prompt, to put before its text
  std::size_t choices_per_prompt = 1;  // n: generations i * n .. i * n + n - 1 share prompt i, counted once
  std::optional<ToolUse> tools;        // chat with tools: each reply is taken apart into text and calls
};

std::string new_response_id(Api api);
// `prefix` and a number no other id of this process has, salted per process.
std::string unique_id(const std::string& prefix);

// With tools, a parser for a reply (nullopt without: the reply is text).
std::optional<ToolCallParser> tool_parser(const ResponseOptions& options);
// A whole reply as text and tool calls.
ParsedReply parse_reply(const ResponseOptions& options, const std::string& text);
// A call's id: the model's own, else a new one of OpenAI's form ("call_" and 24 letters or digits,
// or the 9 that Mistral's templates insist on).
std::string tool_call_id(const ToolCall& call, ToolCallFormat format);

// A response that is not streamed.
nlohmann::json whole_response(const ResponseHeader& header, const std::vector<Generation>& generations,
                              const ResponseOptions& options, const Tokenizer& tokenizer);

// The streamed chunks of a response.
std::unique_ptr<EventFormatter> chunk_formatter(ResponseHeader header, std::size_t generations, ResponseOptions options,
                                                const Tokenizer& tokenizer);

}  // namespace rf::server
