#pragma once
// One line in the server's log for each request: method, path, status, total time and, for one that
// generated text, its prompt and completion tokens (summed over its generations: n choices each
// count the prompt they ran) and the time to its first token. httplib serves
// a request, its streamed body included, on one thread and logs it there afterwards, so each
// thread keeps the record of the request it serves.
#include <cstddef>

#include <httplib.h>

namespace rf::server::access_log {

void begin();  // a request arrives (the pre-routing handler)
void token();  // a generated token reaches the handler (the first one's time is kept)
void usage(std::size_t prompt_tokens, std::size_t completion_tokens);  // one generation's; they add up
// Writes the line and forgets the request. Probes (/health, /metrics) are logged at debug level.
void end(const httplib::Request& req, const httplib::Response& res);

}  // namespace rf::server::access_log
