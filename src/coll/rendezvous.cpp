// The standalone rendezvous (trainit_comm_init() without trainit): rank 0
// serves the arena it created, and with a mesh each rank's sockets to its
// peers, over an abstract unix socket named after the communicator; the
// others join it. Only ranks of the same user are served, each within the
// caller's deadline.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "coll/arena.h"
#include "coll/comm.h"

namespace trainit::coll {
namespace {

constexpr uint64_t kHelloMagic = 0x6f6c6c65486c6f43ULL;  // "CloHello"

struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t size;
};

struct Reply {
  uint64_t magic;
  int32_t status;  // 0, or the negative errno the joining rank returns
  int32_t peers;   // peer sockets sent after the arena's fd (0 or size - 1)
};

// The most descriptors one reply carries: the arena's and a socket to each peer.
constexpr int kReplyFds = kMaxPeerSockRanks;

int socket_address(const char* name, sockaddr_un* addr, socklen_t* len) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  // Abstract: no file, gone with the socket. The uid keeps users apart.
  const int n = std::snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "trainit-coll/%u/%s",
                              static_cast<unsigned>(geteuid()), name);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(addr->sun_path) - 1) {
    return -ENAMETOOLONG;
  }
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<size_t>(n));
  return 0;
}

// Waits for events on fd until deadline: 0, -ETIMEDOUT or -errno.
int poll_until(int fd, short events, int64_t deadline) {
  for (;;) {
    const int64_t left = deadline - comm_now_ns();
    if (left <= 0) {
      return -ETIMEDOUT;
    }
    pollfd pfd{fd, events, 0};
    const int r = poll(&pfd, 1, static_cast<int>((left + 999'999) / 1'000'000));
    if (r > 0) {
      return 0;
    }
    if (r < 0 && errno != EINTR) {
      return -errno;
    }
  }
}

// Reads exactly len bytes before deadline: 0, -ECONNABORTED on EOF, -errno.
int read_full(int fd, void* buf, size_t len, int64_t deadline) {
  auto* p = static_cast<unsigned char*>(buf);
  while (len > 0) {
    const int r = poll_until(fd, POLLIN, deadline);
    if (r < 0) {
      return r;
    }
    const ssize_t got = recv(fd, p, len, MSG_DONTWAIT);
    if (got == 0) {
      return -ECONNABORTED;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        continue;
      }
      return -errno;
    }
    p += got;
    len -= static_cast<size_t>(got);
  }
  return 0;
}

bool same_user(int fd, pid_t* pid) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return false;
  }
  if (pid != nullptr) {
    *pid = cred.pid;
  }
  return cred.uid == geteuid();
}

// The reply to a joining rank: its status and, on success, the arena's fd
// followed by its `peers` sockets to the other ranks.
int send_reply(int fd, int status, int arena_fd, const int* peer_socks = nullptr, int peers = 0) {
  Reply reply{kHelloMagic, status, arena_fd >= 0 ? peers : 0};
  iovec iov{&reply, sizeof(reply)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kReplyFds)] = {};
  if (arena_fd >= 0) {
    const size_t fds = 1 + static_cast<size_t>(reply.peers);
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds);
    std::memcpy(CMSG_DATA(cmsg), &arena_fd, sizeof(int));
    if (reply.peers > 0) {
      std::memcpy(CMSG_DATA(cmsg) + sizeof(int), peer_socks, sizeof(int) * static_cast<size_t>(reply.peers));
    }
  }
  return sendmsg(fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(reply)) ? 0 : -ECONNABORTED;
}

// A SOCK_SEQPACKET socketpair between every two of size ranks:
// mesh[i * size + j] is rank i's end towards rank j (-1 where i == j).
// Nothing is made (false, mesh all -1) past kMaxPeerSockRanks ranks or when
// the descriptors run out: device communicators then say so at their init.
bool make_mesh(int size, int* mesh) {
  for (int i = 0; i < size * size; ++i) {
    mesh[i] = -1;
  }
  if (size < 2 || size > kMaxPeerSockRanks) {
    return false;
  }
  for (int i = 0; i < size; ++i) {
    for (int j = i + 1; j < size; ++j) {
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        for (int k = 0; k < size * size; ++k) {
          if (mesh[k] >= 0) {
            close(mesh[k]);
            mesh[k] = -1;
          }
        }
        return false;
      }
      mesh[i * size + j] = pair[0];
      mesh[j * size + i] = pair[1];
    }
  }
  return true;
}

// Rank r's row of the mesh without its own (-1) entry: what its reply carries.
int mesh_row(const int* mesh, int size, int r, int* row) {
  int k = 0;
  for (int p = 0; p < size; ++p) {
    if (p != r) {
      row[k++] = mesh[r * size + p];
    }
  }
  return k;
}

}  // namespace

// Rank 0: serves the arena (and, with a mesh, each rank's sockets to its
// peers) to size - 1 ranks; own_socks (size entries) gets rank 0's row.
int serve_arena(const char* name, int size, int arena_fd, void* base, int64_t deadline, int* own_socks) {
  sockaddr_un addr;
  socklen_t len = 0;
  int r = socket_address(name, &addr, &len);
  if (r < 0) {
    return r;
  }
  const int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (lfd < 0) {
    return -errno;
  }
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(lfd, size) != 0) {
    r = -errno;
    close(lfd);
    return r;
  }
  auto* conns = static_cast<int*>(std::malloc(sizeof(int) * static_cast<size_t>(size)));
  if (conns == nullptr) {
    close(lfd);
    return -ENOMEM;
  }
  for (int i = 0; i < size; ++i) {
    conns[i] = -1;
  }
  int joined = 1;
  while (joined < size) {
    r = poll_until(lfd, POLLIN, deadline);
    if (r < 0) {
      break;
    }
    const int cfd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) {
      continue;
    }
    pid_t pid = 0;
    Hello hello{};
    // Another user's process may reach an abstract name: ignore it.
    if (!same_user(cfd, &pid) || read_full(cfd, &hello, sizeof(hello), deadline) < 0 || hello.magic != kHelloMagic) {
      close(cfd);
      continue;
    }
    if (hello.size != size || hello.rank <= 0 || hello.rank >= size || conns[hello.rank] >= 0) {
      (void)send_reply(cfd, -EINVAL, -1);
      close(cfd);
      continue;
    }
    conns[hello.rank] = cfd;
    arena_slot(base, hello.rank)->pid.store(pid, std::memory_order_relaxed);
    ++joined;
  }
  // Everyone is here (or the deadline passed): nobody else may join.
  close(lfd);
  int mesh[kMaxPeerSockRanks * kMaxPeerSockRanks];
  const bool meshed = r == 0 && size <= kMaxPeerSockRanks && make_mesh(size, mesh);
  for (int i = 1; i < size; ++i) {
    if (conns[i] >= 0) {
      int row[kMaxPeerSockRanks];
      const int peers = meshed ? mesh_row(mesh, size, i, row) : 0;
      if (r == 0 && send_reply(conns[i], 0, arena_fd, row, peers) < 0) {
        coll_arena_abort(base, size);  // that peer is gone already: the others see it at their first call
      }
      if (r < 0) {
        (void)send_reply(conns[i], r, -1);
      }
      close(conns[i]);
      for (int p = 0; p < peers; ++p) {
        close(row[p]);  // rank i holds its ends now
      }
    }
  }
  for (int p = 0; p < size; ++p) {
    own_socks[p] = meshed ? mesh[p] : -1;
  }
  std::free(conns);
  return r;
}

// Ranks 1…size-1: connects (retrying until rank 0 listens) and receives the
// arena's fd, and the sockets to its peers where rank 0 sent them (socks:
// size entries, -1 where none).
int join_arena(const char* name, int rank, int size, int64_t deadline, int* arena_fd, int* socks) {
  sockaddr_un addr;
  socklen_t len = 0;
  int r = socket_address(name, &addr, &len);
  if (r < 0) {
    return r;
  }
  int fd = -1;
  int64_t backoff = 100'000;
  for (;;) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return -errno;
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      break;
    }
    r = -errno;
    close(fd);
    if (r != -ECONNREFUSED && r != -ENOENT && r != -EAGAIN) {
      return r;
    }
    if (comm_now_ns() + backoff > deadline) {
      return -ETIMEDOUT;
    }
    timespec ts{0, static_cast<long>(backoff)};
    nanosleep(&ts, nullptr);
    backoff = backoff * 2 > 10'000'000 ? 10'000'000 : backoff * 2;
  }
  if (!same_user(fd, nullptr)) {
    close(fd);
    return -EPERM;
  }
  const Hello hello{kHelloMagic, rank, size};
  if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello))) {
    r = -errno;
    close(fd);
    return r;
  }
  r = poll_until(fd, POLLIN, deadline);
  if (r < 0) {
    close(fd);
    return r;
  }
  Reply reply{};
  iovec iov{&reply, sizeof(reply)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kReplyFds)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t got = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  close(fd);
  int received[kReplyFds];
  size_t fds = 0;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS && fds == 0) {
      fds = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      fds = fds > kReplyFds ? kReplyFds : fds;
      std::memcpy(received, CMSG_DATA(cmsg), sizeof(int) * fds);
    }
  }
  const bool well_formed = got == static_cast<ssize_t>(sizeof(reply)) && reply.magic == kHelloMagic;
  const bool ok = well_formed && reply.status == 0 && fds >= 1 && (msg.msg_flags & MSG_CTRUNC) == 0 &&
                  (reply.peers == 0 || (reply.peers == size - 1 && fds == static_cast<size_t>(size)));
  if (!ok) {
    for (size_t i = 0; i < fds; ++i) {
      close(received[i]);
    }
    return well_formed && reply.status < 0 ? reply.status : -ECONNABORTED;
  }
  *arena_fd = received[0];
  for (int p = 0, k = 1; p < size && reply.peers > 0; ++p) {
    socks[p] = p == rank ? -1 : received[k++];
  }
  return 0;
}

}  // namespace trainit::coll
