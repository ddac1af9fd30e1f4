#include "server/openai_request.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/client_connection.h"
#include "server/generation_fields.h"
#include "server/json_fields.h"
#include "server/structured_output.h"
#include "server/tool_choice.h"
#include "tokenizer/fill_in_middle.h"

namespace rf::server {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxPrompts = 64;

struct Prompt {
  std::vector<std::int32_t> tokens;
  std::string text;  // for echo
};

// /v1/completions' prompt: a string, an array of strings, an array of token ids, or an array of those.
// With a suffix, each text is the prefix of a fill-in-the-middle prompt (a model with its tokens).
std::vector<Prompt> completion_prompts(const json& body, const Tokenizer& tokenizer, const std::optional<FimTokens>& fim) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) bad_field("prompt", "is required");
  const json& p = *it;
  const std::string suffix = string_field(body, "suffix").value_or("");
  if (!suffix.empty() && !fim) {
    bad_field("suffix", "this model has no fill-in-the-middle tokens (<|fim_prefix|>, <fim_prefix>, <PRE>, <｜fim▁begin｜>)");
  }
  if (!suffix.empty() && bool_field(body, "echo").value_or(false)) bad_field("echo", "cannot be combined with a suffix");
  auto from_text = [&](const std::string& text) {
    return Prompt{suffix.empty() ? tokenizer.encode(text, true) : fim_prompt(tokenizer, *fim, text, suffix), text};
  };
  auto from_ids = [&](const json& ids) {
    if (!suffix.empty()) bad_field("suffix", "takes text prompts, not token ids");
    auto tokens = token_ids_field(ids, "prompt");
    return Prompt{tokens, tokenizer.decode(tokens)};
  };
  if (p.is_string()) return {from_text(p.get<std::string>())};
  if (!p.is_array() || p.empty()) bad_field("prompt", "must be a string, an array of strings or an array of token ids");
  if (p.front().is_number()) return {from_ids(p)};
  if (p.size() > kMaxPrompts) bad_field("prompt", fmt::format("may hold at most {} prompts", kMaxPrompts));
  std::vector<Prompt> prompts;
  for (const auto& item : p) {
    if (item.is_string()) {
      prompts.push_back(from_text(item.get<std::string>()));
    } else if (item.is_array()) {
      prompts.push_back(from_ids(item));
    } else {
      bad_field("prompt", "must be a string, an array of strings or an array of token ids");
    }
  }
  return prompts;
}

const ChatPrompt& chat_template(const ModelService& model) {
  if (!model.chat()) throw ApiError(400, fmt::format("the model '{}' has no chat template: use /v1/completions", model.id()));
  return *model.chat();
}

Prompt chat_prompt(const json& body, const ModelService& model, const std::optional<ToolUse>& tools) {
  const auto it = body.find("messages");
  if (it == body.end() || it->is_null()) bad_field("messages", "is required");
  const bool add_generation_prompt = bool_field(body, "add_generation_prompt").value_or(true);
  json extra = json::object();
  if (const auto kwargs = body.find("chat_template_kwargs"); kwargs != body.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) bad_field("chat_template_kwargs", "must be an object");
    extra = *kwargs;
  }
  const std::string text = chat_template(model).render(*it, add_generation_prompt, extra, tools ? &*tools : nullptr);
  // The template writes the special tokens (BOS included) itself.
  return {model.tokenizer().encode(text, false), text};
}

// Fields of OpenAI's API (and llama-server's) that would change the answer and that this server does
// not implement yet (issue #28): a 400 naming the field, never a 200 that ignores it. Their neutral
// values pass: an empty list, "text", best_of equal to n.
void refuse_unimplemented(const json& body, std::size_t n, Api api) {
  auto given = [&](const char* name) -> const json* {
    const auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  auto empty = [](const json& v) { return (v.is_array() || v.is_object() || v.is_string()) && v.empty(); };
  for (const char* name : {"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}) {
    if (const json* f = given(name); api == Api::Completions && f && !empty(*f)) {
      bad_field(name, "tools are taken by /v1/chat/completions, not /v1/completions");
    }
  }
  if (const json* f = given("suffix"); api == Api::Chat && f && !empty(*f)) {
    bad_field("suffix", "is taken by /v1/completions (fill-in-the-middle), not by chat");
  }
  if (const json* f = given("best_of"); f && !(f->is_number_integer() && f->get<long long>() == static_cast<long long>(n))) {
    bad_field("best_of", "is not implemented: only best_of equal to n (every choice returned) is taken");
  }
  if (const json* f = given("modalities"); f && *f != json::array({"text"})) bad_field("modalities", "only [\"text\"] is taken");
  if (given("audio")) bad_field("audio", "audio output is not implemented");
}

// The special token that opens the format's calls, kept in the text so that the parser sees it.
std::vector<std::int32_t> marker_tokens(ToolCallFormat format, const Tokenizer& tokenizer) {
  std::vector<std::int32_t> shown;
  for (const std::string_view text : tool_call_syntax(format)) {
    const auto id = tokenizer.token_to_id(text);
    if (id && tokenizer.is_special(*id)) shown.push_back(*id);
  }
  return shown;
}

}  // namespace

SubmittedRequest submit_request(std::shared_ptr<ModelService> model, Api api, const std::string& raw_body, const json& body) {
  // The legacy completions endpoint stops at 16 tokens unless told otherwise, as OpenAI's does.
  GenerationRequest request;
  request.options = generation_fields(body, model->defaults(), api == Api::Completions ? std::optional(16) : std::nullopt);
  const auto n = static_cast<std::size_t>(integer_field(body, "n", 1, 16).value_or(1));
  refuse_unimplemented(body, n, api);
  ResponseOptions response;
  if (api == Api::Chat) response.tools = requested_tools(raw_body, body, chat_template(*model).tool_format());
  auto wanted = requested_grammar(raw_body, body);
  if (wanted && response.tools) bad_field(wanted->field, "cannot be combined with tools (unless tool_choice is 'none')");
  if (response.tools && response.tools->gbnf) wanted = GrammarRequest{"tools", *response.tools->gbnf};
  if (wanted) {
    try {
      request.options.grammar = model->grammar(wanted->gbnf);
    } catch (const Error& e) {
      bad_field(wanted->field, e.what());
    }
  }
  if (response.tools) request.options.shown_special_tokens = marker_tokens(response.tools->format, model->tokenizer());
  response.choices_per_prompt = n;
  if (api == Api::Chat) {
    response.logprobs = bool_field(body, "logprobs").value_or(false);
    const auto top = integer_field(body, "top_logprobs", 0, 20);
    if (top && !response.logprobs) bad_field("top_logprobs", "needs 'logprobs': true");
    if (response.logprobs) request.top_logprobs = static_cast<int>(top.value_or(0));
  } else if (const auto top = integer_field(body, "logprobs", 0, 5)) {
    response.logprobs = true;
    request.top_logprobs = static_cast<int>(*top);
  }
  const bool stream = bool_field(body, "stream").value_or(false);
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad_field("stream_options", "must be an object");
    response.include_usage = bool_field(*it, "include_usage").value_or(false);
  }
  const bool echo = api == Api::Completions && bool_field(body, "echo").value_or(false);

  const auto prompts = api == Api::Chat ? std::vector<Prompt>{chat_prompt(body, *model, response.tools)}
                                        : completion_prompts(body, model->tokenizer(), model->fim());
  // One call queues all of its sequences or none: one larger than the server holds could never run.
  if (const std::size_t sequences = prompts.size() * n; sequences > static_cast<std::size_t>(model->capacity())) {
    bad_field(n > 1 ? "n" : "prompt",
              fmt::format("asks for {} sequences ({} prompts, n = {}), more than the server holds at once ({}: "
                          "--max-seqs plus --max-queue)", sequences, prompts.size(), n, model->capacity()));
  }
  std::vector<GenerationRequest> requests;
  for (const auto& prompt : prompts) {
    for (std::size_t choice = 0; choice < n; ++choice) {
      request.prompt = prompt.tokens;
      requests.push_back(request);
      ++request.options.sampling.seed;  // n choices of one seed must still differ
      if (echo) response.echo.push_back(prompt.text);
    }
  }
  auto channels = model->submit_all(std::move(requests));
  return {model, std::make_unique<Generations>(std::move(channels)), std::move(response), stream};
}

std::optional<std::vector<Generation>> read_answer(const ServerContext& context, const httplib::Request& req,
                                                   Generations& generations) {
  const ClientConnection client(req);
  auto results = read_all(generations, [&] { return context.stopping() || client.closed(); });
  if (!results && context.stopping()) throw ApiError(503, "the server is shutting down");
  for (const auto& g : results ? *results : std::vector<Generation>{}) {
    if (g.error) throw ApiError(500, *g.error);
  }
  return results;
}

}  // namespace rf::server
