#pragma once
// The route groups the server installs; each handler answers errors in OpenAI's shape.
#include <functional>

#include <httplib.h>

#include "server/server_context.h"

namespace rf::server {

// Runs a handler, turning ApiError, rf::Error (a bad request) and anything else (a bug: 500)
// into an OpenAI-shaped error response.
httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> handler);
void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
                const std::string& code = {});
void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);

void add_openai_routes(httplib::Server& http, ServerContext& context);  // /v1/models, /v1/completions, /v1/chat/completions, /v1/responses, /v1/embeddings
void add_job_routes(httplib::Server& http, ServerContext& context);     // rbee's /v1/jobs
void add_status_routes(httplib::Server& http, ServerContext& context);  // /health, /ready, /metrics
void add_image_routes(httplib::Server& http, ServerContext& context);   // OpenAI's /v1/images/generations and edits
void add_a1111_routes(httplib::Server& http, ServerContext& context);   // A1111's /sdapi/v1/...
void add_llama_server_routes(httplib::Server& http, ServerContext& context);  // llama-server's /tokenize, /detokenize, /props

// /v1/models' entry for an image model.
nlohmann::json image_model_card(const ImageService& model);

}  // namespace rf::server
