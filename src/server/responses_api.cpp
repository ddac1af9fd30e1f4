#include "server/responses_api.h"

#include <chrono>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace rf::server {

namespace {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Fields taken as they are, or only at the value that changes nothing here; anything else is a 400.
const std::initializer_list<std::string_view> kKnownFields = {
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "tools", "tool_choice",
    "parallel_tool_calls", "text", "store", "metadata", "user", "safety_identifier", "prompt_cache_key", "service_tier",
    "truncation", "reasoning", "include", "background", "previous_response_id", "conversation", "stream_options",
    "seed", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"};
const char* const kSampling[] = {"temperature", "top_p", "seed", "top_k", "min_p", "presence_penalty",
                                 "frequency_penalty", "repetition_penalty", "stream"};

const std::initializer_list<std::string_view> kTextParts = {"input_text", "output_text", "text"};

std::string new_id(const char* prefix) { return unique_id(std::string(prefix) + "_"); }

// `input`: a string (one user message) or items: messages, function calls and their outputs.
ordered_json messages_of(const ordered_json& input) {
  if (input.is_string()) {
    ordered_json message = {{"role", "user"}, {"content", input}};
    return ordered_json::array({std::move(message)});
  }
  if (!input.is_array() || input.empty()) bad_field("input", "must be a string or a non-empty array of items");
  ordered_json messages = ordered_json::array();
  for (std::size_t i = 0; i < input.size(); ++i) {
    const auto& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) bad_field(where, "must be an object");
    const std::string type = item.value("type", "message");
    if (type == "message") {
      const std::string role = item.value("role", "");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        bad_field(where + ".role", "must be user, assistant, system or developer");
      }
      if (!item.contains("content")) bad_field(where + ".content", "is required");
      messages.push_back({{"role", role}, {"content", text_content(item["content"], where + ".content", kTextParts)}});
    } else if (type == "function_call") {
      for (const char* key : {"call_id", "name", "arguments"}) {
        if (!item.contains(key) || !item[key].is_string()) bad_field(where + "." + key, "must be a string");
      }
      const ordered_json call = {{"id", item["call_id"]}, {"type", "function"},
                                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      // Calls made together are one assistant turn, with the text that came before them.
      if (messages.empty() || messages.back()["role"] != "assistant") messages.push_back({{"role", "assistant"}, {"content", ""}});
      messages.back()["tool_calls"].push_back(call);
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string()) bad_field(where + ".call_id", "must be a string");
      if (!item.contains("output")) bad_field(where + ".output", "is required");
      messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", text_content(item["output"], where + ".output", kTextParts)}});
    } else {
      bad_field(where + ".type", fmt::format("'{}' is not taken: give messages, function_call and function_call_output items "
                                             "(nothing is stored to refer to)", type));
    }
  }
  return messages;
}

ordered_json chat_tools(const ordered_json& tools) {
  if (!tools.is_array()) bad_field("tools", "must be an array of tools");
  ordered_json out = ordered_json::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const auto& tool = tools[i];
    if (!tool.is_object() || tool.value("type", "") != "function") {
      bad_field(fmt::format("tools[{}].type", i), "only function tools are taken");
    }
    ordered_json function = tool;
    function.erase("type");
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

ordered_json chat_tool_choice(const ordered_json& choice) {
  if (!choice.is_object()) return choice;  // "auto", "none", "required" (chat checks them)
  if (choice.value("type", "") != "function" || !choice.contains("name")) {
    bad_field("tool_choice", "must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}");
  }
  return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
}

ordered_json response_format(const ordered_json& text) {
  if (!text.is_object()) bad_field("text", "must be an object");
  const auto format = text.find("format");
  if (format == text.end() || format->is_null()) return nullptr;
  if (!format->is_object()) bad_field("text.format", "must be an object");
  const std::string type = format->value("type", "");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema") bad_field("text.format.type", "must be text, json_object or json_schema");
  ordered_json schema = {{"name", format->value("name", "response")}};
  for (const char* key : {"schema", "strict", "description"}) {
    if (format->contains(key)) schema[key] = (*format)[key];
  }
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

void refuse_unsupported(const json& body) {
  refuse_unknown_fields(body, kKnownFields);
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  for (const char* key : {"previous_response_id", "conversation"}) {
    if (given(key)) bad_field(key, "is not taken: responses are not stored; send the conversation as input items");
  }
  if (given("background") && body["background"] != false) bad_field("background", "only false is taken");
  if (given("include") && body["include"] != json::array()) bad_field("include", "no extra output is available to include");
  if (given("truncation") && body["truncation"] != "disabled") bad_field("truncation", "only 'disabled' is taken");
  if (given("reasoning") && !(body["reasoning"].is_object() && body["reasoning"].value("effort", json()).is_null())) {
    bad_field("reasoning.effort", "is not taken: this server does not steer reasoning");
  }
}

json usage_of(const RequestUsage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json message_item(const std::string& id, const std::string& text, const char* status) {
  json content = json::array();
  if (status == std::string("completed")) content.push_back(text_part(text));
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

json call_item(const ToolCall& call, const ResponseOptions& options, const char* status) {
  return {{"id", new_id("fc")},
          {"type", "function_call"},
          {"status", status},
          {"call_id", tool_call_id(call, options.tools->format)},
          {"name", call.name},
          {"arguments", call.arguments}};
}

// The response object around `output`.
json response_json(const ResponseIdentity& r, const char* status, json output, const RequestUsage* usage) {
  json out = {{"id", r.id}, {"object", "response"}, {"created_at", r.created_at}, {"status", status},
              {"error", nullptr}, {"incomplete_details", nullptr}, {"model", r.model}, {"output", std::move(output)},
              {"previous_response_id", nullptr}, {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
              {"store", false}, {"truncation", "disabled"}, {"usage", usage ? usage_of(*usage) : json(nullptr)}};
  if (status == std::string("incomplete")) out["incomplete_details"] = {{"reason", "max_output_tokens"}};
  for (const auto& [key, value] : r.settings.items()) out[key] = value;
  return out;
}

class ResponseEvents : public EventFormatter {
 public:
  ResponseEvents(ResponseIdentity identity, ResponseOptions options)
      : identity_(std::move(identity)), options_(std::move(options)), parser_(tool_parser(options_)) {}

  std::string opening() override {
    const json skeleton = response_json(identity_, "in_progress", json::array(), nullptr);
    std::string frames = send("response.created", {{"response", skeleton}});
    return frames + send("response.in_progress", {{"response", skeleton}});
  }

  std::string event(std::size_t, const StreamEvent& e) override {
    switch (e.kind) {
      case StreamEvent::Kind::Text:
        return reply(parser_ ? parser_->push(e.text) : ParsedReply{.content = e.text});
      case StreamEvent::Kind::Finished: {
        std::string frames = parser_ ? reply(parser_->finish()) : std::string();
        if (output_.empty()) frames += open_message();
        frames += close_message();
        const char* status = e.finish == FinishReason::Length ? "incomplete" : "completed";
        const json done = response_json(identity_, status, output_, &e.usage);
        return frames + send(std::string("response.") + status, {{"response", done}});
      }
      case StreamEvent::Kind::Failed:
        return send("error", {{"code", "server_error"}, {"message", e.text}, {"param", nullptr}});
    }
    return {};
  }

  std::string closing() override { return {}; }  // the Responses stream has no [DONE]

 private:
  std::string send(const std::string& type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return sse_event(type, data);
  }

  bool message_open() const { return !output_.empty() && output_.back()["status"] == "in_progress"; }

  std::string open_message() {
    if (message_open()) return {};
    output_.push_back(message_item(new_id("msg"), "", "in_progress"));
    const json where = {{"item_id", output_.back()["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}};
    json part = where;
    part["part"] = text_part("");
    std::string frames = send("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", output_.back()}});
    return frames + send("response.content_part.added", part);
  }

  std::string close_message() {
    if (!message_open()) return {};
    json& item = output_.back();
    item = message_item(item["id"], text_, "completed");
    const json where = {{"item_id", item["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}};
    json text_done = where, part_done = where;
    text_done["text"] = text_;
    text_done["logprobs"] = json::array();
    part_done["part"] = item["content"][0];
    text_.clear();
    std::string frames = send("response.output_text.done", text_done);
    frames += send("response.content_part.done", part_done);
    return frames + send("response.output_item.done", {{"output_index", output_.size() - 1}, {"item", item}});
  }

  // Text goes to the open message (opened on its first text); each call closes it and is an item.
  std::string reply(const ParsedReply& part) {
    std::string frames;
    if (!part.content.empty()) {
      frames += open_message();
      text_ += part.content;
      frames += send("response.output_text.delta", {{"item_id", output_.back()["id"]}, {"output_index", output_.size() - 1},
                                                    {"content_index", 0}, {"delta", part.content}, {"logprobs", json::array()}});
    }
    for (const auto& call : part.calls) {
      frames += close_message();
      json item = call_item(call, options_, "in_progress");
      item["arguments"] = "";
      output_.push_back(item);
      const std::size_t index = output_.size() - 1;
      frames += send("response.output_item.added", {{"output_index", index}, {"item", item}});
      frames += send("response.function_call_arguments.delta", {{"item_id", item["id"]}, {"output_index", index}, {"delta", call.arguments}});
      frames += send("response.function_call_arguments.done", {{"item_id", item["id"]}, {"output_index", index}, {"arguments", call.arguments}});
      output_[index]["arguments"] = call.arguments;
      output_[index]["status"] = "completed";
      frames += send("response.output_item.done", {{"output_index", index}, {"item", output_[index]}});
    }
    return frames;
  }

  ResponseIdentity identity_;
  ResponseOptions options_;
  std::optional<ToolCallParser> parser_;
  json output_ = json::array();
  std::string text_;  // of the open message
  std::uint64_t sequence_ = 0;
};

}  // namespace

ResponsesRequest chat_request_of(const json& body, const std::string& raw_body) {
  refuse_unsupported(body);
  const auto ordered = ordered_json::parse(raw_body);
  if (!ordered.contains("input")) bad_field("input", "is required");
  ResponsesRequest out;
  ordered_json& chat = out.chat;
  chat["messages"] = messages_of(ordered["input"]);
  if (const auto instructions = string_field(body, "instructions")) {
    ordered_json system = {{"role", "system"}, {"content", *instructions}};
    chat["messages"].insert(chat["messages"].begin(), std::move(system));
  }
  if (const auto max = integer_field(body, "max_output_tokens", 1, 1 << 30)) chat["max_tokens"] = *max;
  for (const char* key : kSampling) {
    if (ordered.contains(key)) chat[key] = ordered[key];
  }
  if (ordered.contains("tools") && !ordered["tools"].is_null()) chat["tools"] = chat_tools(ordered["tools"]);
  if (ordered.contains("tool_choice") && !ordered["tool_choice"].is_null()) chat["tool_choice"] = chat_tool_choice(ordered["tool_choice"]);
  if (ordered.contains("parallel_tool_calls")) chat["parallel_tool_calls"] = ordered["parallel_tool_calls"];
  if (ordered.contains("text") && !ordered["text"].is_null()) {
    if (auto format = response_format(ordered["text"]); !format.is_null()) chat["response_format"] = std::move(format);
  }
  json& s = out.settings;
  s["instructions"] = body.value("instructions", json());
  s["max_output_tokens"] = body.value("max_output_tokens", json());
  s["temperature"] = body.value("temperature", json());  // null: the model's default
  s["top_p"] = body.value("top_p", json());
  s["tools"] = body.value("tools", json::array());
  s["tool_choice"] = body.value("tool_choice", json("auto"));
  s["parallel_tool_calls"] = body.value("parallel_tool_calls", json(true));
  s["text"] = body.contains("text") && !body["text"].is_null() ? body["text"] : json{{"format", {{"type", "text"}}}};
  s["metadata"] = body.value("metadata", json::object());
  s["user"] = body.value("user", json());
  return out;
}

std::string responses_field(const std::string& chat_field) {
  const std::pair<std::string_view, std::string_view> renames[] = {
      {"response_format.json_schema.schema", "text.format.schema"}, {"response_format", "text.format"},
      {"max_tokens", "max_output_tokens"}, {"messages", "input"}};
  for (const auto& [from, to] : renames) {
    if (chat_field.starts_with(from)) return std::string(to) + chat_field.substr(from.size());
  }
  // Chat's tools[i].function.x is the Responses API's tools[i].x.
  if (const auto at = chat_field.find(".function."); chat_field.starts_with("tools[") && at != std::string::npos) {
    return chat_field.substr(0, at) + chat_field.substr(at + 9);
  }
  if (chat_field == "tool_choice.function.name") return "tool_choice.name";
  return chat_field;
}

ResponseIdentity new_response_identity(const std::string& model, json settings) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return {new_id("resp"), model, std::chrono::duration_cast<std::chrono::seconds>(now).count(), std::move(settings)};
}

json response_object(const ResponseIdentity& identity, const Generation& generation, const ResponseOptions& options) {
  const ParsedReply reply = parse_reply(options, generation.text);
  json output = json::array();
  if (!reply.content.empty() || reply.calls.empty()) output.push_back(message_item(new_id("msg"), reply.content, "completed"));
  for (const auto& call : reply.calls) output.push_back(call_item(call, options, "completed"));
  const char* status = generation.finish == FinishReason::Length ? "incomplete" : "completed";
  return response_json(identity, status, std::move(output), &generation.usage);
}

std::unique_ptr<EventFormatter> response_events(ResponseIdentity identity, ResponseOptions options) {
  return std::make_unique<ResponseEvents>(std::move(identity), std::move(options));
}

}  // namespace rf::server
