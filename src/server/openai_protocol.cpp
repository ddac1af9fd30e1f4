#include "server/openai_protocol.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace rf::server {

using nlohmann::json;

namespace {

const char* finish_reason(FinishReason reason) { return reason == FinishReason::Stop ? "stop" : "length"; }

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
      : header_(std::move(header)), options_(std::move(options)), tokenizer_(tokenizer), text_offsets_(generations, 0) {}

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
        return chunk(i, header_.api == Api::Chat ? json{{"content", e.text}} : json(e.text), logprobs, nullptr);
      }
      case StreamEvent::Kind::Finished:
        add_usage(usage_, e.usage, i, options_);
        return chunk(i, header_.api == Api::Chat ? json::object() : json(""), nullptr, finish_reason(e.finish));
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

  ResponseHeader header_;
  ResponseOptions options_;
  const Tokenizer& tokenizer_;
  std::vector<std::size_t> text_offsets_;
  RequestUsage usage_;
};

}  // namespace

std::string new_response_id(Api api) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}();
  return fmt::format("{}-{:016x}{:08x}", api == Api::Chat ? "chatcmpl" : "cmpl", salt, ++counter);
}

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
