// IPv4 TCP helpers shared by the probe and the control channel.
//
// Every descriptor they make is non-blocking and close-on-exec. Each call
// returns 0 (or the value asked for) or -errno, and logs nothing: the caller
// knows what the socket was for.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "base/fd.h"

namespace trainit {

// Dotted form, "10.0.0.3".
[[nodiscard]] std::string ipv4_string(in_addr addr);
[[nodiscard]] inline bool same_ipv4(in_addr a, in_addr b) noexcept {
  return a.s_addr == b.s_addr;
}

namespace net {

// A TCP socket listening on every local address at `port` (0: the kernel
// picks one; local_port() says which), with SO_REUSEADDR so that a restarted
// host 0 binds again at once. Returns 0 and fills `out`, or -errno.
int listen_tcp(uint16_t port, Fd& out) noexcept;
// The port a bound socket has, or -errno.
int local_port(int fd) noexcept;

// Starts a TCP connection to addr:port and fills `out`. Returns 0 when it is
// connected already, -EINPROGRESS when it is under way (wait for EPOLLOUT,
// then ask connect_error()), or another -errno.
int start_connect(in_addr addr, uint16_t port, Fd& out) noexcept;
// How a connection started by start_connect() ended: 0 (connected) or -errno.
int connect_error(int fd) noexcept;

// Accepts one connection from `listen_fd` (non-blocking, close-on-exec, with
// TCP_NODELAY) and fills `out` and `peer`. Returns 0 or -errno (-EAGAIN: none
// waiting).
int accept_tcp(int listen_fd, Fd& out, in_addr& peer) noexcept;

}  // namespace net
}  // namespace trainit
