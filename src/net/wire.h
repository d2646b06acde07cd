// The control channel's wire format (net/control.h speaks it). Every message,
// its fields and their bounds, the handshake step by step and what the
// channel does not protect: net/PROTOCOL.md, beside this file.
//
// A frame is a 12-byte header, then `length` bytes of payload, all integers
// big-endian:
//
//   u32 magic 'TRIT'   u16 version (kVersion)   u16 type   u32 length
//
// A payload is a few fixed-size integers, then at most one byte string that
// runs to the end of the payload (a job id or cause: printable text). A reader
// that meets a wrong magic, another version, an unknown type or a length over
// its limit gives up on the connection: there is no resynchronising a byte
// stream. The limit is kMaxFrame, and kMaxHelloFrame before a peer is known.
// This file cuts frames; the fields of each message are checked where the
// message is taken (net/control_common.h's decoders, the server's HELLO).
//
// The messages, by type (s: host 0's server, c: a client, host 1..H-1):
//
//   1 CHALLENGE s->c  the server's 32-byte nonce, u64 its instance
//   2 HELLO     c->s  u32 host index, u32 host count, u64 instance, u8 has secret,
//                     [32-byte tag, 32-byte client nonce: with a secret],
//                     job id
//   3 WELCOME   s->c  empty, or the server's 32-byte tag (with a secret)
//   4 REFUSE    s->c  why, in words; then the server closes
//   5 CHECKIN   c->s  [u32 generation] (empty: generation 0)
//   6 GO        s->c  [u32 generation] (empty: generation 0)
//   7 STOP      both  i32 exit code, i32 failing host, i32 failing rank, cause
//   8 RELEASE   s->c  i32 exit code
//   9 HEARTBEAT both  empty
//  10 FINISHED  c->s  [u32 generation] (empty: generation 0)
//  11 RESTART   both  u32 generation, then STOP's fields
//
// Version 2 changed what the handshake's tags cover and made the
// CHALLENGE's nonce mandatory. Version 3 (this one) adds each side's
// instance (a random number a trainit keeps for its life: a host that
// comes back as another instance is a host whose trainit died), covered by
// the tags. An older peer is refused by its header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainit::wire {

inline constexpr uint32_t kMagic = 0x54524954;  // "TRIT"
inline constexpr uint16_t kVersion = 3;
inline constexpr size_t kHeaderSize = 12;
inline constexpr size_t kMaxFrame = size_t{64} * 1024;  // largest payload
inline constexpr size_t kMaxHelloFrame = 4096;          // largest payload before the handshake is done

enum class Type : uint16_t {
  kChallenge = 1,
  kHello = 2,
  kWelcome = 3,
  kRefuse = 4,
  kCheckIn = 5,
  kGo = 6,
  kStop = 7,
  kRelease = 8,
  kHeartbeat = 9,
  kFinished = 10,
  kRestart = 11,
};
[[nodiscard]] const char* type_name(Type type) noexcept;

struct Frame {
  Type type = Type::kHeartbeat;
  std::string payload;
};

// The bytes of one frame. `payload` must not be longer than kMaxFrame.
[[nodiscard]] std::string encode(Type type, std::string_view payload = {});

// Cuts a byte stream into frames. Bytes go in with append(); next() takes the
// frames out one at a time. A header is judged as soon as its bytes arrive:
// four bytes of anything else than 'TRIT' are refused without waiting for
// more.
class FrameReader {
 public:
  enum class Status { kFrame, kNeedMore, kBad };

  explicit FrameReader(size_t max_payload = kMaxFrame) noexcept : max_payload_(max_payload) {}
  void set_max_payload(size_t max_payload) noexcept { max_payload_ = max_payload; }
  void append(const char* data, size_t size) { buffer_.append(data, size); }
  // kFrame: `out` holds the next frame. kNeedMore: wait for more bytes.
  // kBad: the stream is not ours; `why` says how, and the reader stays bad.
  Status next(Frame& out, std::string& why);
  // Bytes held but not taken out yet.
  [[nodiscard]] size_t buffered() const noexcept { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  size_t start_ = 0;  // the first byte not taken yet
  size_t max_payload_;
  bool bad_ = false;
};

// Builds a payload.
class PayloadWriter {
 public:
  PayloadWriter& u8(uint8_t value);
  PayloadWriter& u32(uint32_t value);
  PayloadWriter& u64(uint64_t value) {
    return u32(static_cast<uint32_t>(value >> 32)).u32(static_cast<uint32_t>(value));
  }
  PayloadWriter& i32(int32_t value) { return u32(static_cast<uint32_t>(value)); }
  PayloadWriter& bytes(std::string_view value);
  [[nodiscard]] const std::string& data() const noexcept { return data_; }

 private:
  std::string data_;
};

// Reads a payload front to back; each call returns false (and reads nothing)
// when the payload is too short.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view data) noexcept : data_(data) {}
  bool u8(uint8_t& out) noexcept;
  bool u32(uint32_t& out) noexcept;
  bool u64(uint64_t& out) noexcept;
  bool i32(int32_t& out) noexcept;
  bool bytes(size_t count, std::string_view& out) noexcept;
  // Whatever is left: the payload's trailing string.
  [[nodiscard]] std::string_view rest() const noexcept { return data_; }

 private:
  std::string_view data_;
};

}  // namespace trainit::wire
