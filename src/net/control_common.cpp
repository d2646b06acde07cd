#include "net/control_common.h"

#include <fmt/format.h>

#include <algorithm>

namespace trainit::net {

std::string encode_stop(const StopNotice& notice) {
  wire::PayloadWriter payload;
  payload.i32(notice.exit_code).i32(notice.host).i32(notice.rank);
  payload.bytes(std::string_view(notice.cause).substr(0, kMaxCause));
  return payload.data();
}

bool decode_stop(const std::string& payload, StopNotice& out) {
  wire::PayloadReader reader(payload);
  int32_t code, host, rank;
  if (!reader.i32(code) || !reader.i32(host) || !reader.i32(rank)) {
    return false;
  }
  out = StopNotice{code, host, rank, std::string(reader.rest())};
  return true;
}

std::string encode_restart(uint32_t generation, const StopNotice& notice) {
  return wire::PayloadWriter().u32(generation).data() + encode_stop(notice);
}

bool decode_restart(const std::string& payload, uint32_t& generation, StopNotice& out) {
  wire::PayloadReader reader(payload);
  return reader.u32(generation) && decode_stop(payload.substr(4), out);
}

std::string encode_generation(uint32_t generation) {
  return generation == 0 ? std::string() : wire::PayloadWriter().u32(generation).data();
}

bool decode_generation(const std::string& payload, uint32_t& generation) {
  generation = 0;
  if (payload.empty()) {
    return true;
  }
  wire::PayloadReader reader(payload);
  return reader.u32(generation);
}

std::string describe(const StopNotice& notice) {
  std::string text = fmt::format("exit code {} from host {}", notice.exit_code, notice.host);
  if (notice.rank >= 0) {
    text += fmt::format(", rank {}", notice.rank);
  }
  if (!notice.cause.empty()) {
    text += fmt::format(": {}", notice.cause);
  }
  return text;
}

std::string printable(std::string_view text, size_t max) {
  std::string out(text.substr(0, max));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      c = '?';
    }
  }
  if (text.size() > max) {
    out += "...";
  }
  return out;
}

std::string_view view(const Nonce& bytes) noexcept {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Duration heartbeat_interval(const ControlConfig& config) {
  return std::max<Duration>(std::min<Duration>(config.heartbeat, config.peer_loss / 4), std::chrono::milliseconds(1));
}

}  // namespace trainit::net
