// llama-server's POST /tokenize and POST /detokenize, for clients that count or inspect tokens
// (llama.cpp's web UI, llama-cpp-python's server client): the served model's own tokenizer; and its
// GET /props, which such clients read first: the context, the slots, the sampling defaults and the
// chat template.
#include <fmt/format.h>

#include "server/json_fields.h"
#include "server/routes.h"
#include "tokenizer/unicode.h"

namespace rf::server {

namespace {

// A piece as llama-server writes it: its text where that is valid UTF-8, else its bytes.
json piece(const std::string& text) {
  return unicode::is_valid_utf8(text) ? json(text) : byte_array(text);
}

void tokenize(const ModelService& model, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  refuse_unknown_fields(body, {"content", "add_special", "parse_special", "with_pieces"});
  const auto content = string_field(body, "content");
  if (!content) bad_field("content", "is required");
  // Special tokens written in the text are always recognised (as transformers does).
  if (!bool_field(body, "parse_special").value_or(true)) {
    bad_field("parse_special", "false is not supported: special tokens in the text are always recognised");
  }
  const auto ids = model.tokenizer().encode(*content, bool_field(body, "add_special").value_or(false));
  json tokens = json::array();
  const bool with_pieces = bool_field(body, "with_pieces").value_or(false);
  for (const auto id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    tokens.push_back({{"id", id}, {"piece", piece(model.tokenizer().decode({id}))}});
  }
  send_json(res, {{"tokens", std::move(tokens)}});
}

void detokenize(const ModelService& model, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  refuse_unknown_fields(body, {"tokens"});
  const auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) bad_field("tokens", "must be an array of token ids");
  const auto vocab = static_cast<long long>(model.tokenizer().vocab_size());
  std::vector<std::int32_t> ids;
  for (const auto& id : *it) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= vocab) {
      bad_field("tokens", fmt::format("must hold token ids from 0 to {}", vocab - 1));
    }
    ids.push_back(static_cast<std::int32_t>(id.get<long long>()));
  }
  send_json(res, {{"content", model.tokenizer().decode(ids)}});
}

// llama-server's names for the sampling a request gets when it sets none.
json props(ModelService& model) {
  const SamplingParams s = model.defaults().sampling();
  const json params = {{"temperature", s.temperature}, {"top_k", s.top_k},           {"top_p", s.top_p},
                       {"min_p", s.min_p},             {"repeat_penalty", s.repetition_penalty}, {"seed", -1}};
  return {{"default_generation_settings", {{"n_ctx", model.max_context()}, {"params", params}}},
          {"total_slots", model.scheduler().max_running()},
          {"model_path", model.id()},
          {"chat_template", model.chat() ? json(model.chat()->source()) : json("")},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", "rocmforge " ROCMFORGE_VERSION}};
}

}  // namespace

void add_llama_server_routes(httplib::Server& http, ServerContext& context) {
  http.Get("/props", guarded([&](const httplib::Request&, httplib::Response& res) {
    send_json(res, props(*context.require_model()));
  }));
  http.Post("/tokenize", guarded([&](const httplib::Request& req, httplib::Response& res) {
    tokenize(*context.require_model(), req, res);
  }));
  http.Post("/detokenize", guarded([&](const httplib::Request& req, httplib::Response& res) {
    detokenize(*context.require_model(), req, res);
  }));
}

}  // namespace rf::server
