// Fuzz target: the control channel's frame decoder, message decoders and
// handshake (src/net/wire, control_common, auth, and the server's and the
// client's handshake over a real loopback connection).
//
// The input: a first byte of flags, then the bytes a peer sends. Flags:
//   1  the peer is host 0 and trainit's ControlClient (host 1 of 2) the one
//      attacked; else the peer is a client and trainit's ControlServer
//      (host 0 of 2) the one attacked;
//   2  the attacked side has the job's secret ("fuzz-secret");
//   4  the peer holds the secret too: this target writes the right proof
//      into the first HELLO (a client's) or the first WELCOME (host 0's) it
//      sends, so that the fuzzer gets past the handshake with a secret;
//   8  the server has checked in itself (a client's CHECKIN releases GO).
// The same bytes also go through a FrameReader whole and in pieces, and
// every frame through every message decoder.
//
// Properties, besides no sanitizer finding (and no leak, no descriptor left
// open): a FrameReader cuts the same frames, and fails at the same point in
// the same words, whatever pieces the bytes come in; a message that decodes
// encodes back to itself (or, for a generation, to the same value); an error
// is one line; every log line is one line, whatever the peer sent.
#include "net/control.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "fuzz_support.h"
#include "loop/loop.h"
#include "net/auth.h"
#include "net/control_common.h"
#include "net/wire.h"

namespace trainit {
namespace {

constexpr uint8_t kAttackClient = 1;
constexpr uint8_t kSecret = 2;
constexpr uint8_t kPeerSigns = 4;
constexpr uint8_t kServerCheckedIn = 8;
constexpr const char* kSecretText = "fuzz-secret";
constexpr const char* kJobId = "ma-job-fuzz";

using wire::FrameReader;
using wire::Type;

// --- The decoders, in process -------------------------------------------------

struct Cut {
  std::vector<wire::Frame> frames;
  FrameReader::Status last = FrameReader::Status::kNeedMore;
  std::string why;
};

// The frames of `bytes`, given to a FrameReader `piece` bytes at a time.
Cut cut(std::string_view bytes, size_t piece, size_t max_payload) {
  Cut out;
  FrameReader reader(max_payload);
  for (size_t at = 0; at < bytes.size() || at == 0; at += piece) {
    const std::string_view part = bytes.substr(at, piece);
    reader.append(part.data(), part.size());
    for (;;) {
      wire::Frame frame;
      out.last = reader.next(frame, out.why);
      if (out.last != FrameReader::Status::kFrame)
        break;
      out.frames.push_back(std::move(frame));
    }
    if (out.last == FrameReader::Status::kBad || bytes.empty())
      break;
  }
  return out;
}

bool same(const Cut& a, const Cut& b) {
  if (a.frames.size() != b.frames.size() || a.last != b.last || a.why != b.why)
    return false;
  for (size_t i = 0; i < a.frames.size(); ++i) {
    if (a.frames[i].type != b.frames[i].type || a.frames[i].payload != b.frames[i].payload)
      return false;
  }
  return true;
}

void check_decoders(const wire::Frame& frame) {
  const std::string& payload = frame.payload;
  FUZZ_CHECK(wire::encode(frame.type, payload).size() == wire::kHeaderSize + payload.size(), "encode");
  for (int sender : {-1, 1}) {
    StopNotice notice;
    std::string why;
    if (net::decode_stop(payload, 2, sender, notice, why)) {
      FUZZ_CHECK(net::encode_stop(notice) == payload, "STOP does not encode back: " + net::describe(notice));
    } else {
      FUZZ_CHECK(fuzz::one_line(why), why);
    }
    uint32_t generation = 0;
    if (net::decode_restart(payload, 2, sender, generation, notice, why)) {
      FUZZ_CHECK(net::encode_restart(generation, notice) == payload, "RESTART does not encode back");
    } else {
      FUZZ_CHECK(fuzz::one_line(why), why);
    }
  }
  uint32_t generation = 0;
  std::string why;
  if (net::decode_generation(frame.type, payload, generation, why)) {
    uint32_t again = 1;
    FUZZ_CHECK(
        net::decode_generation(frame.type, net::encode_generation(generation), again, why) && again == generation,
        "a generation does not encode back");
  }
  net::HelloMessage hello;
  if (net::decode_hello(payload, hello, why)) {
    FUZZ_CHECK(net::text_problem("job id", hello.job_id, net::kMaxJobId).empty(), "a HELLO's job id that is no text");
    FUZZ_CHECK(hello.has_secret ? hello.tag.size() == 32 && hello.nonce.size() == 32
                                : hello.tag.empty() && hello.nonce.empty(),
               "a HELLO's proof out of its place");
  } else {
    FUZZ_CHECK(fuzz::one_line(why), why);
  }
  int exit_code = 0;
  if (net::decode_release(payload, exit_code, why))
    FUZZ_CHECK(net::encode_release(exit_code) == payload, "RELEASE does not encode back");
  (void)net::decode_empty(frame.type, payload, why);
  const std::string problem = net::text_problem("text", payload, net::kMaxCause);
  FUZZ_CHECK(fuzz::one_line(problem), problem);
  const std::string sendable = net::sendable_text(payload, 64);
  FUZZ_CHECK(net::text_problem("text", sendable, 64).empty(), "sendable_text() made unsendable text");
  FUZZ_CHECK(fuzz::one_line(net::printable(payload)), "printable() kept a newline");
}

void check_frames(std::string_view bytes) {
  for (size_t max_payload : {wire::kMaxHelloFrame, wire::kMaxFrame}) {
    const Cut whole = cut(bytes, std::max<size_t>(bytes.size(), 1), max_payload);
    for (size_t piece : {size_t{1}, size_t{5}, size_t{13}})
      FUZZ_CHECK(same(whole, cut(bytes, piece, max_payload)), "pieces of " + std::to_string(piece) + " cut otherwise");
    if (whole.last == FrameReader::Status::kBad)
      FUZZ_CHECK(fuzz::one_line(whole.why) && !whole.why.empty(), whole.why);
    for (const wire::Frame& frame : whole.frames)
      check_decoders(frame);
  }
}

// --- The handshake, over a loopback connection ---------------------------------

size_t open_descriptors() {
  size_t n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (::readdir(dir) != nullptr)
      ++n;
    ::closedir(dir);
  }
  return n;
}

in_addr loopback() {
  return in_addr{htonl(INADDR_LOOPBACK)};
}

// Steps the loop until nothing more happens (a few steps: the loopback
// delivers at once).
void settle(Loop& loop) {
  for (int idle = 0, steps = 0; idle < 2 && steps < 64; ++steps)
    idle = loop.run_once(0) > 0 ? 0 : idle + 1;
}

std::string receive(int fd) {
  std::string bytes;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT)) > 0)
    bytes.append(buffer, static_cast<size_t>(n));
  return bytes;
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0)
      return;  // closed, or full: what is left goes unsent
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Closes with a reset, leaving no TIME_WAIT behind: this target opens
// thousands of connections a second.
void reset(Fd& fd) {
  const linger abort{1, 0};
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  fd.reset();
}

// The first frame of `bytes`: where its payload starts and how long it is,
// when the header is whole and the payload is in.
struct Span {
  Type type;
  size_t at;
  size_t size;
};
std::optional<Span> first_frame(std::string_view bytes) {
  FrameReader reader(wire::kMaxFrame);
  reader.append(bytes.data(), bytes.size());
  wire::Frame frame;
  std::string why;
  if (reader.next(frame, why) != FrameReader::Status::kFrame)
    return std::nullopt;
  return Span{frame.type, wire::kHeaderSize, frame.payload.size()};
}

net::Nonce nonce_of(std::string_view bytes) {
  net::Nonce nonce{};
  std::copy_n(bytes.begin(), std::min(bytes.size(), nonce.size()), nonce.begin());
  return nonce;
}

// The big-endian u64 at the front of `bytes` (0 when it is shorter).
uint64_t u64_at(std::string_view bytes) {
  wire::PayloadReader reader(bytes);
  uint64_t value = 0;
  (void)reader.u64(value);
  return value;
}

const net::Auth& auth() {
  static const net::Auth a = *net::Auth::from_secret(kSecretText);
  return a;
}

// The peer is a client: its bytes go to a ControlServer (host 0 of 2).
void attack_server(Loop& loop, uint8_t flags, std::string bytes) {
  ControlConfig config{.host_index = 0, .host_count = 2, .job_id = kJobId, .peer_loss = std::chrono::seconds(10)};
  if ((flags & kSecret) != 0)
    config.secret = kSecretText;
  ControlEvents events;
  std::unique_ptr<ControlServer> server;
  events.on_stop = [&](const StopNotice& notice) { FUZZ_CHECK(notice.host == 1, "a client stopped for another"); };
  events.on_restart = [&](unsigned, const StopNotice&) { server->release(3); };
  auto listening = ControlServer::listen(loop, 0, {}, config, events);
  FUZZ_CHECK(listening.ok(), listening.ok() ? "" : listening.error().message);
  server = std::move(*listening);
  if ((flags & kServerCheckedIn) != 0)
    server->check_in();

  // Not blocking: libFuzzer's timer signals would interrupt a connect().
  Fd peer(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = loopback();
  addr.sin_port = htons(server->port());
  FUZZ_CHECK(::connect(peer.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EINPROGRESS,
             std::string("cannot connect: ") + std::strerror(errno));
  settle(loop);
  const std::string challenge = receive(peer.get());
  // With the secret, the peer proves it in its HELLO: u32 index, u32 count,
  // u64 instance, u8 1, the 32-byte tag, the 32-byte nonce, then the job id.
  if ((flags & kPeerSigns) != 0 && challenge.size() == wire::kHeaderSize + 40) {
    if (auto hello = first_frame(bytes); hello && hello->type == Type::kHello && hello->size >= 17 + 64) {
      const std::string_view payload = std::string_view(bytes).substr(hello->at, hello->size);
      wire::PayloadReader reader(payload);
      uint32_t index = 0, count = 0;
      uint64_t instance = 0;
      (void)reader.u32(index);
      (void)reader.u32(count);
      (void)reader.u64(instance);
      const net::Handshake handshake{nonce_of(std::string_view(challenge).substr(wire::kHeaderSize)),
                                     nonce_of(payload.substr(17 + 32, 32)),
                                     index,
                                     count,
                                     u64_at(std::string_view(challenge).substr(wire::kHeaderSize + 32)),
                                     instance,
                                     payload.substr(17 + 64)};
      const net::Tag tag = auth().client_tag(handshake);
      std::copy(tag.begin(), tag.end(), bytes.begin() + static_cast<std::ptrdiff_t>(hello->at + 17));
    }
  }
  send_all(peer.get(), bytes);
  settle(loop);
  (void)receive(peer.get());
  (void)server->missing();
  (void)server->unfinished();
  reset(peer);
  settle(loop);
  FUZZ_CHECK(server->connections() == 0, "a closed connection is still held");
}

// Where the clients attacked connect to: one listening socket for the run.
struct Listener {
  Fd fd;
  uint16_t port = 0;
};
const Listener& client_listener() {
  static const Listener listener = [] {
    Listener l;
    l.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr = loopback();
    socklen_t len = sizeof(addr);
    FUZZ_CHECK(::bind(l.fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0 &&
                   ::listen(l.fd.get(), 16) == 0 &&
                   ::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0,
               "cannot listen");
    l.port = ntohs(addr.sin_port);
    return l;
  }();
  return listener;
}

// The peer is host 0: its bytes go to a ControlClient (host 1 of 2).
void attack_client(Loop& loop, uint8_t flags, const std::string& bytes) {
  const Listener& listener = client_listener();
  ControlConfig config{.host_index = 1, .host_count = 2, .job_id = kJobId, .peer_loss = std::chrono::seconds(10)};
  if ((flags & kSecret) != 0)
    config.secret = kSecretText;
  ControlEvents events;
  auto connecting = ControlClient::connect(loop, loopback(), listener.port, config, events);
  FUZZ_CHECK(connecting.ok(), connecting.ok() ? "" : connecting.error().message);
  std::unique_ptr<ControlClient> client = std::move(*connecting);
  client->check_in();
  Fd peer;
  for (int steps = 0; steps < 64 && !peer; ++steps) {
    (void)loop.run_once(0);
    peer.reset(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
  FUZZ_CHECK(static_cast<bool>(peer), "the client did not connect");
  settle(loop);

  // The first frame (a CHALLENGE, if the peer plays along) alone, then the
  // client's HELLO is in, and with the secret the peer's WELCOME proves it.
  const auto challenge = first_frame(bytes);
  const size_t first = challenge ? challenge->at + challenge->size : bytes.size();
  send_all(peer.get(), std::string_view(bytes).substr(0, first));
  settle(loop);
  const std::string hello = receive(peer.get());
  std::string rest = bytes.substr(first);
  if ((flags & kPeerSigns) != 0 && challenge && challenge->type == Type::kChallenge && challenge->size == 40 &&
      hello.size() == wire::kHeaderSize + 17 + 64 + std::string_view(kJobId).size()) {
    if (auto welcome = first_frame(rest); welcome && welcome->type == Type::kWelcome && welcome->size == 32) {
      const std::string_view payload = std::string_view(hello).substr(wire::kHeaderSize);
      const net::Handshake handshake{nonce_of(std::string_view(bytes).substr(challenge->at, 32)),
                                     nonce_of(payload.substr(17 + 32, 32)),
                                     1,
                                     2,
                                     u64_at(std::string_view(bytes).substr(challenge->at + 32)),
                                     u64_at(payload.substr(8)),
                                     kJobId};
      const net::Tag tag = auth().server_tag(handshake);
      std::copy(tag.begin(), tag.end(), rest.begin() + static_cast<std::ptrdiff_t>(welcome->at));
    }
  }
  send_all(peer.get(), rest);
  settle(loop);
  (void)receive(peer.get());
  (void)client->connected();
  reset(peer);
  settle(loop);
}

}  // namespace
}  // namespace trainit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainit;
  static fuzz::CheckedLog log;
  static Loop loop;
  // What lives for the whole run is opened first (the loop's descriptors
  // come with its first source): not counted as left open by an input.
  static const bool ready = [] {
    FUZZ_CHECK(loop.init() == 0, "the loop does not start");
    attack_server(loop, 0, "");
    attack_client(loop, kAttackClient, "");
    return true;
  }();
  (void)ready;
  if (size == 0)
    return 0;
  const uint8_t flags = data[0];
  const std::string_view bytes = fuzz::as_text(data + 1, size - 1);
  check_frames(bytes);
  const size_t descriptors = open_descriptors();
  if ((flags & kAttackClient) != 0)
    attack_client(loop, flags, std::string(bytes));
  else
    attack_server(loop, flags, std::string(bytes));
  FUZZ_CHECK(open_descriptors() == descriptors, "a descriptor was left open");
  return 0;
}
