#include "server/job_registry.h"

#include <uuid/uuid.h>

namespace rf::server {

std::string new_job_id() {
  uuid_t uuid;
  uuid_generate_random(uuid);
  char text[37];
  uuid_unparse_lower(uuid, text);
  return std::string("job-") + text;
}

}  // namespace rf::server
