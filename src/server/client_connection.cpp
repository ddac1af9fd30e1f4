#include "server/client_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace rf::server {

namespace {

struct Endpoint {
  std::string host;
  int port = -1;
  bool operator==(const Endpoint&) const = default;
};

// An address as httplib writes a request's (getnameinfo, numeric host).
std::optional<Endpoint> endpoint(const sockaddr_storage& address, socklen_t length) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return std::nullopt;
  }
  return Endpoint{host, std::stoi(port)};
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
