#pragma once
// rbee's image jobs on /v1/jobs: operations image_generation, image_transform and image_inpaint,
// streamed as named server-sent events (progress, preview, complete or error), then the stream ends.
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/server_context.h"

namespace rf::server {

bool is_image_operation(const std::string& operation);
// Checks the job (every field, before anything reaches the worker), queues it and answers its id.
void create_image_job(ServerContext& context, const nlohmann::json& body, httplib::Response& res);
void stream_image_job(ServerContext& context, std::shared_ptr<Job<ImageJob>> job, httplib::Response& res);

}  // namespace rf::server
