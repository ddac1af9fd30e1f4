#pragma once
// Whether the client of a request still waits for its answer: a handler that holds a non-streaming
// request for the length of a generation checks it, so that a client that hangs up cancels its
// generation at the next step instead of leaving it to run to its end. (A streaming answer learns it
// from its failed writes.) cpp-httplib 0.11 gives a handler no socket, so the connection is found
// among the process's open sockets by the request's local and peer addresses, which identify it.
#include <httplib.h>

namespace rf::server {

class ClientConnection {
 public:
  explicit ClientConnection(const httplib::Request& request);

  // True once the peer has closed its end (or the connection failed). A connection that was not
  // found (not TCP, or /proc not mounted) never reads as closed.
  bool closed() const;

 private:
  int fd_ = -1;  // not owned: httplib closes it after the handler returns
};

}  // namespace rf::server
