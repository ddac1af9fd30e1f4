// OpenAI's API: GET /v1/models, POST /v1/completions, POST /v1/chat/completions and POST
// /v1/responses, streamed (server-sent events) or not, and POST /v1/embeddings.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/embeddings_api.h"
#include "server/json_fields.h"
#include "server/openai_protocol.h"
#include "server/openai_request.h"
#include "server/responses_api.h"
#include "server/routes.h"

namespace rf::server {

namespace {

using nlohmann::json;

json model_card(const ModelService& model) {
  return {{"id", model.id()}, {"object", "model"}, {"created", model.created()}, {"owned_by", "rocmforge"},
          {"kind", "text"}, {"max_model_len", model.max_context()}};
}

void check_model_name(const json& body, const ModelService& model) {
  const auto name = string_field(body, "model");
  if (name && !model.answers_to(*name)) {
    throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'", *name, model.id()), "model",
                   "model_not_found");
  }
}

void complete(ServerContext& context, Api api, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model_name(body, *context.require_model());
  auto submitted = submit_request(context.require_model(), api, req.body, body);
  const auto& model = submitted.model;
  ResponseHeader header{api, new_response_id(api), model->id(), model->created()};
  if (submitted.stream) {
    auto formatter = chunk_formatter(header, submitted.generations->size(), submitted.response, model->tokenizer());
    stream_events(res, std::move(submitted.generations), std::move(formatter), model);
    return;
  }
  const auto results = read_answer(context, req, *submitted.generations);
  if (results) send_json(res, whole_response(header, *results, submitted.response, model->tokenizer()));
}

// POST /v1/responses: the request as a chat one, the answer in the Responses shape.
void respond(ServerContext& context, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model_name(body, *context.require_model());
  const ResponsesRequest request = chat_request_of(body, req.body);
  const std::string chat = request.chat.dump();
  SubmittedRequest submitted;
  try {
    submitted = submit_request(context.require_model(), Api::Chat, chat, json::parse(chat));
  } catch (const ApiError& e) {
    if (e.param.empty()) throw;
    std::string message = e.what();
    const std::string quoted = "'" + e.param + "'";
    if (message.starts_with(quoted)) message = "'" + responses_field(e.param) + "'" + message.substr(quoted.size());
    throw ApiError(e.status, message, responses_field(e.param), e.code);
  }
  const auto& model = submitted.model;
  ResponseIdentity identity = new_response_identity(model->id(), request.settings);
  if (submitted.stream) {
    stream_events(res, std::move(submitted.generations), response_events(std::move(identity), submitted.response), model);
    return;
  }
  const auto results = read_answer(context, req, *submitted.generations);
  if (results) send_json(res, response_object(identity, results->front(), submitted.response));
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerContext& context) {
  http.Get("/v1/models", guarded([&](const httplib::Request&, httplib::Response& res) {
    const auto image = context.image_model();
    const json card = image ? image_model_card(*image) : model_card(*context.require_model());
    send_json(res, {{"object", "list"}, {"data", json::array({card})}});
  }));
  http.Get(R"(/v1/models/(.+))", guarded([&](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    const auto image = context.image_model();
    const auto model = image ? nullptr : context.require_model();
    if (image ? !image->answers_to(name) : !model->answers_to(name)) {
      throw ApiError(404, fmt::format("The model '{}' does not exist", name), "model", "model_not_found");
    }
    send_json(res, image ? image_model_card(*image) : model_card(*model));
  }));
  http.Post("/v1/completions", guarded([&](const httplib::Request& req, httplib::Response& res) {
    complete(context, Api::Completions, req, res);
  }));
  http.Post("/v1/chat/completions", guarded([&](const httplib::Request& req, httplib::Response& res) {
    complete(context, Api::Chat, req, res);
  }));
  http.Post("/v1/embeddings", guarded([&](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    check_model_name(body, *context.require_model());
    send_json(res, create_embeddings(*context.require_model(), body));
  }));
  http.Post("/v1/responses", guarded([&](const httplib::Request& req, httplib::Response& res) { respond(context, req, res); }));
}

}  // namespace rf::server
