#include "net/wire.h"

#include <fmt/core.h>

#include <cassert>

namespace trainit::wire {
namespace {

uint32_t load_u32(const char* p) noexcept {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

uint16_t load_u16(const char* p) noexcept {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>((b[0] << 8) | b[1]);
}

void store_u32(std::string& out, uint32_t value) {
  out.push_back(static_cast<char>(value >> 24));
  out.push_back(static_cast<char>(value >> 16));
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value));
}

void store_u16(std::string& out, uint16_t value) {
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value));
}

bool known_type(uint16_t type) noexcept {
  return type >= static_cast<uint16_t>(Type::kChallenge) && type <= static_cast<uint16_t>(Type::kRestart);
}

}  // namespace

const char* type_name(Type type) noexcept {
  switch (type) {
    case Type::kChallenge:
      return "CHALLENGE";
    case Type::kHello:
      return "HELLO";
    case Type::kWelcome:
      return "WELCOME";
    case Type::kRefuse:
      return "REFUSE";
    case Type::kCheckIn:
      return "CHECKIN";
    case Type::kGo:
      return "GO";
    case Type::kStop:
      return "STOP";
    case Type::kRelease:
      return "RELEASE";
    case Type::kHeartbeat:
      return "HEARTBEAT";
    case Type::kFinished:
      return "FINISHED";
    case Type::kRestart:
      return "RESTART";
  }
  return "?";
}

std::string encode(Type type, std::string_view payload) {
  assert(payload.size() <= kMaxFrame);
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  store_u32(out, kMagic);
  store_u16(out, kVersion);
  store_u16(out, static_cast<uint16_t>(type));
  store_u32(out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

FrameReader::Status FrameReader::next(Frame& out, std::string& why) {
  if (bad_) {
    why = "unreadable stream";
    return Status::kBad;
  }
  const char* p = buffer_.data() + start_;
  const size_t have = buffer_.size() - start_;
  // Each field is judged as soon as its bytes are in.
  if (have >= 4 && load_u32(p) != kMagic) {
    why = "not a trainit control frame (bad magic)";
  } else if (have >= 6 && load_u16(p + 4) != kVersion) {
    why = fmt::format("protocol version {}, this trainit speaks {}", load_u16(p + 4), kVersion);
  } else if (have >= 8 && !known_type(load_u16(p + 6))) {
    why = fmt::format("unknown frame type {}", load_u16(p + 6));
  } else if (have >= kHeaderSize && load_u32(p + 8) > max_payload_) {
    why = fmt::format("frame of {} bytes, over the limit of {}", load_u32(p + 8), max_payload_);
  } else if (have < kHeaderSize || have - kHeaderSize < load_u32(p + 8)) {
    if (start_ > 0 && start_ * 2 >= buffer_.size()) {
      buffer_.erase(0, start_);  // keep what is held at most twice what is needed
      start_ = 0;
    }
    return Status::kNeedMore;
  } else {
    const uint32_t length = load_u32(p + 8);
    out.type = static_cast<Type>(load_u16(p + 6));
    out.payload.assign(p + kHeaderSize, length);
    start_ += kHeaderSize + length;
    if (start_ == buffer_.size()) {
      buffer_.clear();
      start_ = 0;
    }
    return Status::kFrame;
  }
  bad_ = true;
  buffer_.clear();
  buffer_.shrink_to_fit();
  start_ = 0;
  return Status::kBad;
}

PayloadWriter& PayloadWriter::u8(uint8_t value) {
  data_.push_back(static_cast<char>(value));
  return *this;
}

PayloadWriter& PayloadWriter::u32(uint32_t value) {
  store_u32(data_, value);
  return *this;
}

PayloadWriter& PayloadWriter::bytes(std::string_view value) {
  data_.append(value);
  return *this;
}

bool PayloadReader::u8(uint8_t& out) noexcept {
  if (data_.empty()) {
    return false;
  }
  out = static_cast<uint8_t>(data_[0]);
  data_.remove_prefix(1);
  return true;
}

bool PayloadReader::u32(uint32_t& out) noexcept {
  if (data_.size() < 4) {
    return false;
  }
  out = load_u32(data_.data());
  data_.remove_prefix(4);
  return true;
}

bool PayloadReader::u64(uint64_t& out) noexcept {
  uint32_t high = 0;
  uint32_t low = 0;
  if (data_.size() < 8 || !u32(high) || !u32(low)) {
    return false;
  }
  out = uint64_t{high} << 32 | low;
  return true;
}

bool PayloadReader::i32(int32_t& out) noexcept {
  uint32_t value;
  if (!u32(value)) {
    return false;
  }
  out = static_cast<int32_t>(value);
  return true;
}

bool PayloadReader::bytes(size_t count, std::string_view& out) noexcept {
  if (data_.size() < count) {
    return false;
  }
  out = data_.substr(0, count);
  data_.remove_prefix(count);
  return true;
}

}  // namespace trainit::wire
