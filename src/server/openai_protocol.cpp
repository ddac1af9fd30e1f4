#include "server/openai_protocol.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace rf::server {

using nlohmann::json;

namespace {

const char* finish_reason(FinishReason reason, bool called = false) {
  if (reason == FinishReason::Length) return "length";
  return called ? "tool_calls" : "stop";
}

json tool_call_json(const ToolCall& call, ToolCallFormat format) {
  return {{"id", tool_call_id(call, format)},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json usage_json(const RequestUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

// Generation i's usage into the request's total, each prompt counted once however many choices it has.
void add_usage(RequestUsage& total, const RequestUsage& u, std::size_t i, const ResponseOptions& options) {
  if (i % options.choices_per_prompt == 0) {
    total.prompt_tokens += u.prompt_tokens;
    total.cached_prompt_tokens += u.cached_prompt_tokens;
  }
  total.completion_tokens += u.completion_tokens;
}

std::string token_text(const Tokenizer& tokenizer, std::int32_t token) { return tokenizer.decode({token}); }

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const std::vector<TokenLogprobs>& tokens, const Tokenizer& tokenizer) {
  json content = json::array();
  for (const auto& t : tokens) {
    auto entry = [&](const TokenLogprob& lp) {
      const std::string text = token_text(tokenizer, lp.token);
      return json{{"token", text}, {"logprob", lp.logprob}, {"bytes", byte_array(text)}};
    };
    json item = entry(t.chosen);
    item["top_logprobs"] = json::array();
    for (const auto& alt : t.top) item["top_logprobs"].push_back(entry(alt));
    content.push_back(std::move(item));
  }
  return {{"content", std::move(content)}};
}

// Completions (the legacy shape): parallel lists of tokens, their log-probabilities, the top
// alternatives as {token: logprob} and each token's offset in the text.
json completion_logprobs(const std::vector<TokenLogprobs>& tokens, const Tokenizer& tokenizer, std::size_t offset) {
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
  for (const auto& t : tokens) {
    const std::string text = token_text(tokenizer, t.chosen.token);
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(t.chosen.logprob);
    json top = json::object();
    for (const auto& alt : t.top) top[token_text(tokenizer, alt.token)] = alt.logprob;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset);
    offset += text.size();
  }
  return out;
}

json response_base(const ResponseHeader& h, bool chunk) {
  const char* object = h.api == Api::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}, {"system_fingerprint", nullptr}};
}

class ChunkFormatter : public EventFormatter {
 public:
  ChunkFormatter(ResponseHeader header, std::size_t generations, ResponseOptions options, const Tokenizer& tokenizer)
      : header_(std::move(header)),
        options_(std::move(options)),
        tokenizer_(tokenizer),
        text_offsets_(generations, 0),
        calls_(generations, 0) {
    for (std::size_t i = 0; i < generations && options_.tools; ++i) parsers_.push_back(*tool_parser(options_));
  }

  std::string opening() override {
    std::string frames;
    for (std::size_t i = 0; i < text_offsets_.size(); ++i) {
      // OpenAI opens each chat choice with the assistant's role; completions echo the prompt.
      if (header_.api == Api::Chat) frames += chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
      if (header_.api == Api::Completions && !options_.echo.empty()) {
        frames += chunk(i, options_.echo[i], nullptr, nullptr);
        text_offsets_[i] = options_.echo[i].size();
      }
    }
    return frames;
  }

  std::string event(std::size_t i, const StreamEvent& e) override {
    switch (e.kind) {
      case StreamEvent::Kind::Text: {
        if (e.text.empty() && !e.logprobs) return {};
        json logprobs = nullptr;
        if (options_.logprobs && e.logprobs) {
          logprobs = header_.api == Api::Chat ? chat_logprobs({*e.logprobs}, tokenizer_)
                                              : completion_logprobs({*e.logprobs}, tokenizer_, text_offsets_[i]);
        }
        text_offsets_[i] += e.text.size();
        if (!parsers_.empty()) return reply_chunks(i, parsers_[i].push(e.text), logprobs);
        return chunk(i, header_.api == Api::Chat ? json{{"content", e.text}} : json(e.text), logprobs, nullptr);
      }
      case StreamEvent::Kind::Finished: {
        add_usage(usage_, e.usage, i, options_);
        const std::string rest = parsers_.empty() ? std::string() : reply_chunks(i, parsers_[i].finish(), nullptr);
        const bool called = !parsers_.empty() && parsers_[i].called();
        return rest + chunk(i, header_.api == Api::Chat ? json::object() : json(""), nullptr, finish_reason(e.finish, called));
      }
      case StreamEvent::Kind::Failed:
        return sse_frame(error_body(500, e.text));
    }
    return {};
  }

  std::string closing() override {
    std::string frames;
    if (options_.include_usage) {
      json last = response_base(header_, true);
      last["choices"] = json::array();
      last["usage"] = usage_json(usage_);
      frames += sse_frame(last);
    }
    return frames + kSseDone;
  }

 private:
  // `content`: the chat delta or the completion text.
  std::string chunk(std::size_t i, json content, json logprobs, json finish) {
    json choice = {{"index", i}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}};
    choice[header_.api == Api::Chat ? "delta" : "text"] = std::move(content);
    json c = response_base(header_, true);
    c["choices"] = json::array({std::move(choice)});
    if (options_.include_usage) c["usage"] = nullptr;
    return sse_frame(c);
  }

  // A parsed piece of a reply: its text, then each call as OpenAI streams one (its id and name
  // with empty arguments, then the arguments).
  std::string reply_chunks(std::size_t i, const ParsedReply& reply, json logprobs) {
    std::string frames;
    if (!reply.content.empty() || !logprobs.is_null()) frames += chunk(i, {{"content", reply.content}}, logprobs, nullptr);
    for (const auto& call : reply.calls) {
      json head = tool_call_json(call, options_.tools->format);
      head["index"] = calls_[i];
      head["function"]["arguments"] = "";
      frames += chunk(i, {{"tool_calls", json::array({head})}}, nullptr, nullptr);
      const json arguments = {{"index", calls_[i]++}, {"function", {{"arguments", call.arguments}}}};
      frames += chunk(i, {{"tool_calls", json::array({arguments})}}, nullptr, nullptr);
    }
    return frames;
  }

  ResponseHeader header_;
  ResponseOptions options_;
  const Tokenizer& tokenizer_;
  std::vector<std::size_t> text_offsets_;
  std::vector<ToolCallParser> parsers_;  // one per generation, when the request offers tools
  std::vector<std::size_t> calls_;       // each generation's calls streamed so far
  RequestUsage usage_;
};

// A chat reply's text (null when it is only calls) and its tool calls.
void add_tool_calls(const Generation& g, const ResponseOptions& options, json& choice) {
  const ParsedReply reply = parse_reply(options, g.text);
  const ToolCallFormat format = options.tools->format;
  json& message = choice["message"];
  message["content"] = reply.content;
  if (reply.calls.empty()) return;
  if (reply.content.empty()) message["content"] = nullptr;
  message["tool_calls"] = json::array();
  for (const auto& call : reply.calls) message["tool_calls"].push_back(tool_call_json(call, format));
  choice["finish_reason"] = finish_reason(g.finish, true);
}

}  // namespace

std::optional<ToolCallParser> tool_parser(const ResponseOptions& options) {
  if (!options.tools) return std::nullopt;
  const auto& t = *options.tools;
  return ToolCallParser(t.format, t.names, t.parallel, t.opened);
}

ParsedReply parse_reply(const ResponseOptions& options, const std::string& text) {
  auto parser = tool_parser(options);
  if (!parser) return {.content = text};
  ParsedReply reply = parser->push(text);
  ParsedReply rest = parser->finish();
  reply.content += rest.content;
  for (auto& call : rest.calls) reply.calls.push_back(std::move(call));
  return reply;
}

std::string tool_call_id(const ToolCall& call, ToolCallFormat format) {
  if (!call.id.empty()) return call.id;
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string id = format == ToolCallFormat::Mistral ? "" : "call_";
  const std::size_t length = format == ToolCallFormat::Mistral ? 9 : 24;
  for (std::size_t i = 0; i < length; ++i) id += kAlphabet[random() % kAlphabet.size()];
  return id;
}

std::string unique_id(const std::string& prefix) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}();
  return fmt::format("{}{:016x}{:08x}", prefix, salt, ++counter);
}

std::string new_response_id(Api api) { return unique_id(api == Api::Chat ? "chatcmpl-" : "cmpl-"); }

json whole_response(const ResponseHeader& header, const std::vector<Generation>& generations, const ResponseOptions& options,
                    const Tokenizer& tokenizer) {
  json response = response_base(header, false);
  json choices = json::array();
  RequestUsage usage;
  for (std::size_t i = 0; i < generations.size(); ++i) {
    const Generation& g = generations[i];
    json choice = {{"index", i}, {"finish_reason", finish_reason(g.finish)}, {"logprobs", nullptr}};
    if (header.api == Api::Chat) {
      choice["message"] = {{"role", "assistant"}, {"content", g.text}, {"refusal", nullptr}};
      if (options.tools) add_tool_calls(g, options, choice);
      if (options.logprobs) choice["logprobs"] = chat_logprobs(g.logprobs, tokenizer);
    } else {
      const std::string echo = options.echo.empty() ? std::string() : options.echo[i];
      choice["text"] = echo + g.text;
      if (options.logprobs) choice["logprobs"] = completion_logprobs(g.logprobs, tokenizer, echo.size());
    }
    choices.push_back(std::move(choice));
    add_usage(usage, g.usage, i, options);
  }
  response["choices"] = std::move(choices);
  response["usage"] = usage_json(usage);
  return response;
}

std::unique_ptr<EventFormatter> chunk_formatter(ResponseHeader header, std::size_t generations, ResponseOptions options,
                                                const Tokenizer& tokenizer) {
  return std::make_unique<ChunkFormatter>(std::move(header), generations, std::move(options), tokenizer);
}

}  // namespace rf::server
