// Fuzz target: the sd_notify receiver (src/notify/receiver): datagrams to
// trainit's NOTIFY_SOCKET, read with their credentials, split into KEY=VALUE
// lines, and what exec mode passes on to its own supervisor (READY=1 and
// STATUS=..., through a Notifier whose NOTIFY_SOCKET this target reads).
//
// The input: a first byte of flags, then datagrams separated by the byte
// 0x1e (at most 8). Flags: 1, each datagram comes with two descriptors
// (SCM_RIGHTS); 2, the receiver serves another pid than the sender's.
//
// Properties, besides no sanitizer finding: the lines handed over are those
// of the datagram that have a '=' after a non-empty key, in order, and
// none holds a newline; a datagram from another pid is dropped and
// counted; no descriptor is left open; what reaches the supervisor is
// READY=1 or one STATUS= line; every log line is one line.
#include "notify/notify.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "fuzz_support.h"
#include "notify/receiver.h"

namespace trainit {
namespace {

constexpr uint8_t kWithDescriptors = 1;
constexpr uint8_t kOtherPid = 2;
constexpr char kSeparator = '\x1e';
constexpr size_t kMaxDatagrams = 8;
constexpr size_t kReceiverBuffer = 4096;  // what NotifyReceiver::drain() reads of a datagram

size_t open_descriptors() {
  size_t n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (::readdir(dir) != nullptr)
      ++n;
    ::closedir(dir);
  }
  return n;
}

// The supervisor's end: an abstract datagram socket, named in NOTIFY_SOCKET
// for Notifier::from_environment().
class Supervisor {
 public:
  Supervisor() {
    fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    const std::string name = "trainit-fuzz-supervisor-" + std::to_string(::getpid());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    FUZZ_CHECK(::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0, "cannot bind the supervisor");
    ::setenv("NOTIFY_SOCKET", ("@" + name).c_str(), 1);
  }

  std::vector<std::string> take() {
    std::vector<std::string> out;
    char buffer[8192];
    ssize_t n;
    while ((n = ::recv(fd_.get(), buffer, sizeof(buffer), MSG_DONTWAIT)) >= 0)
      out.emplace_back(buffer, static_cast<size_t>(n));
    return out;
  }

 private:
  Fd fd_;
};

// Sends `message` to the receiver at `address` ("@name"), with two
// descriptors when asked.
void send_datagram(const std::string& address, std::string_view message, bool descriptors) {
  Fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, address.data() + 1, address.size() - 1);
  msghdr msg{};
  msg.msg_name = &addr;
  msg.msg_namelen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  iovec iov{const_cast<char*>(message.data()), message.size()};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  Fd passed[2] = {Fd(::dup(0)), Fd(::dup(1))};
  if (descriptors) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    const int fds[2] = {passed[0].get(), passed[1].get()};
    std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  }
  (void)::sendmsg(fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

// The lines parse_notify_message() must hand over, found another way.
std::vector<std::pair<std::string, std::string>> expected_lines(std::string_view message) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string line;
  for (size_t i = 0; i <= message.size(); ++i) {
    if (i < message.size() && message[i] != '\n') {
      line += message[i];
      continue;
    }
    if (const size_t eq = line.find('='); eq != std::string::npos && eq > 0)
      out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    line.clear();
  }
  return out;
}

}  // namespace
}  // namespace trainit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainit;
  static fuzz::CheckedLog log;
  static Supervisor supervisor;
  if (size == 0)
    return 0;
  const uint8_t flags = data[0];
  std::vector<std::string_view> datagrams;
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  while (datagrams.size() < kMaxDatagrams) {
    const size_t end = rest.find(kSeparator);
    datagrams.push_back(rest.substr(0, end));
    if (end == std::string_view::npos)
      break;
    rest.remove_prefix(end + 1);
  }

  const size_t descriptors_before = open_descriptors();
  {
    NotifyReceiver receiver;
    FUZZ_CHECK(receiver.open() == 0, "cannot open the receiver");
    receiver.serve((flags & kOtherPid) != 0 ? ::getpid() + 1 : ::getpid());
    Notifier notifier = Notifier::from_environment();
    for (std::string_view datagram : datagrams)
      send_datagram(receiver.address(), datagram, (flags & kWithDescriptors) != 0);

    std::vector<std::pair<std::string, std::string>> lines;
    const int taken = receiver.drain([&](std::string_view key, std::string_view value) {
      FUZZ_CHECK(!key.empty() && key.find('=') == std::string_view::npos, std::string(key));
      FUZZ_CHECK(fuzz::one_line(key) && fuzz::one_line(value), std::string(key) + "=" + std::string(value));
      lines.emplace_back(key, value);
      // As exec mode passes them on (init/exec/exec_mode.cpp).
      if (key == "READY" && value == "1")
        (void)notifier.send("READY=1");
      else if (key == "STATUS")
        notifier.status(value);
    });
    FUZZ_CHECK(taken >= 0, "drain failed");
    if ((flags & kOtherPid) != 0) {
      FUZZ_CHECK(taken == 0 && lines.empty() && receiver.dropped() == datagrams.size(), "a stranger was heard");
    } else {
      FUZZ_CHECK(static_cast<size_t>(taken) == datagrams.size() && receiver.dropped() == 0, "a datagram was lost");
      std::vector<std::pair<std::string, std::string>> expected;
      for (std::string_view datagram : datagrams) {
        for (auto& line : expected_lines(datagram.substr(0, kReceiverBuffer)))
          expected.push_back(std::move(line));
      }
      FUZZ_CHECK(lines == expected, "the lines handed over are not the datagrams'");
    }
    for (const std::string& message : supervisor.take()) {
      FUZZ_CHECK(message == "READY=1" || (message.starts_with("STATUS=") && fuzz::one_line(message)), message);
    }
  }
  FUZZ_CHECK(open_descriptors() == descriptors_before, "a descriptor was left open");
  return 0;
}
