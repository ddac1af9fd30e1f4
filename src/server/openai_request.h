#pragma once
// The body of a /v1/completions or /v1/chat/completions request (or of a Responses request, put
// in chat's terms) checked and submitted to the model: one generation per prompt and choice.
// Mistakes are 400s naming their field.
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/generations.h"
#include "server/model_service.h"
#include "server/openai_protocol.h"
#include "server/server_context.h"

namespace rf::server {

struct SubmittedRequest {
  std::shared_ptr<ModelService> model;
  std::unique_ptr<Generations> generations;
  ResponseOptions response;  // how the answer reads them
  bool stream = false;
};

// `raw_body` is read again where key order matters (schemas); `model` answers it.
SubmittedRequest submit_request(std::shared_ptr<ModelService> model, Api api, const std::string& raw_body,
                                const nlohmann::json& body);

// A non-streamed request's generations read to their end: nullopt when the client has hung up
// (what still runs is cancelled as `generations` goes); ApiError 503 when the server stops first,
// 500 for a generation that failed.
std::optional<std::vector<Generation>> read_answer(const ServerContext& context, const httplib::Request& req,
                                                   Generations& generations);

}  // namespace rf::server
