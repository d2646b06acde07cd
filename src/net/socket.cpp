#include "net/socket.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

namespace trainit {

std::string ipv4_string(in_addr addr) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

namespace net {
namespace {

sockaddr_in make_address(in_addr addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = htons(port);
  return sa;
}

// Control frames are small and each one waits for an answer: no Nagle delay.
void set_nodelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int listen_tcp(uint16_t port, Fd& out) noexcept {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return -errno;
  }
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
    return -errno;
  }
  const sockaddr_in sa = make_address(in_addr{htonl(INADDR_ANY)}, port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) < 0 || ::listen(fd.get(), SOMAXCONN) < 0) {
    return -errno;
  }
  out = std::move(fd);
  return 0;
}

int local_port(int fd) noexcept {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) < 0) {
    return -errno;
  }
  return ntohs(sa.sin_port);
}

int start_connect(in_addr addr, uint16_t port, Fd& out) noexcept {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return -errno;
  }
  set_nodelay(fd.get());
  const sockaddr_in sa = make_address(addr, port);
  int r = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) < 0 ? -errno : 0;
  if (r == -EINTR) {
    r = -EINPROGRESS;  // a non-blocking connect goes on in the background
  }
  if (r == 0 || r == -EINPROGRESS) {
    out = std::move(fd);
  }
  return r;
}

int connect_error(int fd) noexcept {
  int error = 0;
  socklen_t len = sizeof(error);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0) {
    return -errno;
  }
  return -error;
}

int accept_tcp(int listen_fd, Fd& out, in_addr& peer) noexcept {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  int fd;
  do {
    fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
  out.reset(fd);
  set_nodelay(fd);
  peer = sa.sin_addr;
  return 0;
}

}  // namespace net
}  // namespace trainit
