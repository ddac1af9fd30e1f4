#include "server/client_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace rf::server {

namespace {

struct Endpoint {
  std::string host;
  int port = -1;
  bool operator==(const Endpoint&) const = default;
};

// An IP address as httplib writes a request's (getnameinfo, numeric host). Other families have no
// port (glibc's getnameinfo names a Unix socket's path as its service).
std::optional<Endpoint> endpoint(const sockaddr_storage& address, socklen_t length) {
  if (address.ss_family != AF_INET && address.ss_family != AF_INET6) return std::nullopt;
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, service, sizeof service,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return std::nullopt;
  }
  Endpoint e{host};
  const std::string_view port(service);
  if (std::from_chars(port.data(), port.data() + port.size(), e.port).ec != std::errc{}) return std::nullopt;
  return e;
}

template <class Name>
std::optional<Endpoint> endpoint_of(int fd, Name name) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (name(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return std::nullopt;
  return endpoint(address, length);
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& request) {
  const Endpoint local{request.local_addr, request.local_port}, peer{request.remote_addr, request.remote_port};
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc{}) continue;
    struct stat info {};
    if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
    if (endpoint_of(fd, getsockname) == local && endpoint_of(fd, getpeername) == peer) {
      fd_ = fd;
      return;
    }
  }
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  // Readable: the next request of a kept-alive connection, or its end (a read of 0 bytes).
  char byte;
  return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace rf::server
