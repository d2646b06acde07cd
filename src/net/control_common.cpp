#include "net/control_common.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "base/utf8.h"

namespace trainit::net {
namespace {

std::string plural(size_t n, std::string_view what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

bool bad(std::string& why, wire::Type type, std::string_view problem) {
  why = fmt::format("malformed {}: {}", wire::type_name(type), problem);
  return false;
}

std::string code_problem(int32_t code) {
  return code < 0 || code > 255 ? fmt::format("exit code {} is not 0-255", code) : std::string();
}

}  // namespace

std::string text_problem(std::string_view what, std::string_view text, size_t max) {
  if (text.size() > max) {
    return fmt::format("{} of {} bytes is over {}", what, text.size(), max);
  }
  const size_t at = first_unprintable(text);
  if (at == std::string_view::npos) {
    return {};
  }
  const size_t length = utf8_length_at(text, at);
  if (length == 0) {
    return fmt::format("{} is not UTF-8 (byte 0x{:02x} at byte {})", what, static_cast<unsigned char>(text[at]), at);
  }
  return fmt::format("{} holds a control character (U+{:04X} at byte {})", what,
                     static_cast<uint32_t>(utf8_decode(text, at, length)), at);
}

std::string sendable_text(std::string_view text, size_t max) {
  if (text.size() > max) {
    size_t cut = max;
    // Back to the first byte of the character cut in two (UTF-8
    // continuation bytes are 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) {
      --cut;
    }
    text = text.substr(0, cut);
  }
  // What the receiver would refuse (a malformed sequence, a control
  // character) becomes '?', a character at a time.
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_length_at(text, at);
    if (length != 0 && !is_control(utf8_decode(text, at, length))) {
      out.append(text.substr(at, length));
    } else {
      out += '?';
    }
    at += length == 0 ? 1 : length;
  }
  return out;
}

StopNotice sendable(StopNotice notice) {
  if (notice.exit_code < 0 || notice.exit_code > 255) {
    notice.exit_code = 1;
  }
  notice.rank = std::max(notice.rank, -1);
  notice.cause = sendable_text(notice.cause, kMaxCause);
  return notice;
}

std::string encode_stop(const StopNotice& notice) {
  const StopNotice sent = sendable(notice);
  wire::PayloadWriter payload;
  payload.i32(sent.exit_code).i32(sent.host).i32(sent.rank).bytes(sent.cause);
  return payload.data();
}

namespace {

bool decode_failure(wire::Type type, std::string_view payload, unsigned host_count, int sender, StopNotice& out,
                    std::string& why) {
  wire::PayloadReader reader(payload);
  int32_t code = 0, host = 0, rank = 0;
  if (!reader.i32(code) || !reader.i32(host) || !reader.i32(rank)) {
    return bad(why, type, fmt::format("{}, fewer than its fields need", plural(payload.size(), "byte")));
  }
  if (std::string problem = code_problem(code); !problem.empty()) {
    return bad(why, type, problem);
  }
  if (sender >= 0 && host != sender) {
    return bad(why, type, fmt::format("failing host {} is not host {}, which sent it", host, sender));
  }
  if (sender < 0 && (host < 0 || static_cast<unsigned>(host) >= host_count)) {
    return bad(why, type, fmt::format("failing host {} is not one of 0-{}", host, host_count - 1));
  }
  if (rank < -1) {
    return bad(why, type, fmt::format("rank {} is below -1", rank));
  }
  if (std::string problem = text_problem("cause", reader.rest(), kMaxCause); !problem.empty()) {
    return bad(why, type, problem);
  }
  out = StopNotice{code, host, rank, std::string(reader.rest())};
  return true;
}

}  // namespace

bool decode_stop(std::string_view payload, unsigned host_count, int sender, StopNotice& out, std::string& why) {
  return decode_failure(wire::Type::kStop, payload, host_count, sender, out, why);
}

std::string encode_restart(uint32_t generation, const StopNotice& notice) {
  return wire::PayloadWriter().u32(generation).data() + encode_stop(notice);
}

bool decode_restart(std::string_view payload, unsigned host_count, int sender, uint32_t& generation, StopNotice& out,
                    std::string& why) {
  wire::PayloadReader reader(payload);
  if (!reader.u32(generation)) {
    return bad(why, wire::Type::kRestart,
               fmt::format("{}, fewer than its fields need", plural(payload.size(), "byte")));
  }
  return decode_failure(wire::Type::kRestart, reader.rest(), host_count, sender, out, why);
}

std::string encode_generation(uint32_t generation) {
  return generation == 0 ? std::string() : wire::PayloadWriter().u32(generation).data();
}

bool decode_generation(wire::Type type, std::string_view payload, uint32_t& generation, std::string& why) {
  generation = 0;
  wire::PayloadReader reader(payload);
  if (payload.empty() || (payload.size() == 4 && reader.u32(generation))) {
    return true;
  }
  return bad(why, type, fmt::format("{}, not 0 or 4", plural(payload.size(), "byte")));
}

std::string encode_release(int exit_code) {
  return wire::PayloadWriter().i32(sendable(StopNotice{exit_code, 0, -1, {}}).exit_code).data();
}

bool decode_release(std::string_view payload, int& exit_code, std::string& why) {
  wire::PayloadReader reader(payload);
  int32_t code = 0;
  if (payload.size() != 4 || !reader.i32(code)) {
    return bad(why, wire::Type::kRelease, fmt::format("{}, not 4", plural(payload.size(), "byte")));
  }
  if (std::string problem = code_problem(code); !problem.empty()) {
    return bad(why, wire::Type::kRelease, problem);
  }
  exit_code = code;
  return true;
}

bool decode_hello(std::string_view payload, HelloMessage& out, std::string& why) {
  wire::PayloadReader reader(payload);
  uint8_t has_secret = 0;
  if (!reader.u32(out.index) || !reader.u32(out.count) || !reader.u64(out.instance) || !reader.u8(has_secret) ||
      has_secret > 1 ||
      (has_secret == 1 && (!reader.bytes(Tag().size(), out.tag) || !reader.bytes(Nonce().size(), out.nonce)))) {
    why = "malformed HELLO";
    return false;
  }
  out.has_secret = has_secret == 1;
  out.job_id = reader.rest();
  if (std::string problem = text_problem("job id", out.job_id, kMaxJobId); !problem.empty()) {
    why = "malformed HELLO: " + problem;
    return false;
  }
  return true;
}

std::string encode_challenge(const Nonce& nonce, uint64_t instance) {
  wire::PayloadWriter out;
  out.bytes(view(nonce)).u64(instance);
  return out.data();
}

bool decode_challenge(std::string_view payload, Nonce& nonce, uint64_t& instance, std::string& why) {
  wire::PayloadReader reader(payload);
  std::string_view bytes;
  if (!reader.bytes(nonce.size(), bytes) || !reader.u64(instance) || !reader.rest().empty()) {
    why = fmt::format("CHALLENGE without a 32-byte nonce and an instance ({} bytes)", payload.size());
    return false;
  }
  std::copy(bytes.begin(), bytes.end(), nonce.begin());
  return true;
}

uint64_t new_instance() noexcept {
  const Nonce random = Auth::nonce();
  uint64_t instance = 0;
  std::memcpy(&instance, random.data(), sizeof instance);
  return instance;
}

bool decode_empty(wire::Type type, std::string_view payload, std::string& why) {
  return payload.empty() || bad(why, type, fmt::format("{}, not 0", plural(payload.size(), "byte")));
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
  std::string out = sendable_text(text, max);
  if (text.size() > max) {
    out += "...";
  }
  return out;
}

Duration heartbeat_interval(const ControlConfig& config) {
  return std::max<Duration>(std::min<Duration>(config.heartbeat, config.peer_loss / 4), std::chrono::milliseconds(1));
}

Duration beat_interval(const ControlConfig& config) {
  return std::max<Duration>(heartbeat_interval(config), config.peer_loss / 3);
}

Clock::time_point next_beat(Duration interval, Duration offset) {
  const auto wall = std::chrono::duration_cast<Duration>(std::chrono::system_clock::now().time_since_epoch());
  const Duration into = (wall - offset) % interval;
  return Clock::now() + (into < Duration::zero() ? -into : interval - into);
}

Duration reconnect_grace(const ControlConfig& config) {
  return std::min<Duration>(config.reconnect_grace, config.peer_loss);
}

std::string silent_for(Duration silence) {
  return fmt::format("nothing heard from it for {:.1f} s", std::chrono::duration<double>(silence).count());
}

std::string closed_for(Duration grace) {
  return fmt::format("its connection closed and it did not reconnect within {:.1f} s",
                     std::chrono::duration<double>(grace).count());
}

}  // namespace trainit::net
