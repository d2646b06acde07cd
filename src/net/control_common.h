// What the control channel's server and client share (internal).
#pragma once

#include <memory>
#include <string>

#include "net/control.h"

namespace trainit::net {

// Calls `fn(args...)` when it is set, through a copy of it: the handler may
// destroy the object that holds it. Returns whether that object (whose
// `alive` token this is) still exists afterwards.
template <typename Fn, typename... Args>
bool emit(const std::shared_ptr<char>& alive, const Fn& fn, Args&&... args) {
  const std::weak_ptr<char> watch = alive;
  if (fn) {
    const Fn copy = fn;
    copy(std::forward<Args>(args)...);
  }
  return !watch.expired();
}

[[nodiscard]] std::string encode_stop(const StopNotice& notice);
[[nodiscard]] bool decode_stop(const std::string& payload, StopNotice& out);
// RESTART: the generation, then the failure as STOP carries it.
[[nodiscard]] std::string encode_restart(uint32_t generation, const StopNotice& notice);
[[nodiscard]] bool decode_restart(const std::string& payload, uint32_t& generation, StopNotice& out);
// CHECKIN's and GO's generation: an empty payload is generation 0.
[[nodiscard]] std::string encode_generation(uint32_t generation);
[[nodiscard]] bool decode_generation(const std::string& payload, uint32_t& generation);
// "exit code 3 from host 2, rank 17: segfault" for log lines.
[[nodiscard]] std::string describe(const StopNotice& notice);
// How often heartbeats go out: min(heartbeat, peer_loss / 4), at least 1 ms.
[[nodiscard]] Duration heartbeat_interval(const ControlConfig& config);
// The largest cause a STOP carries; longer ones are cut.
inline constexpr size_t kMaxCause = 4096;
// The longest job id a HELLO carries (it must fit wire::kMaxHelloFrame).
inline constexpr size_t kMaxJobId = 1024;
// A peer's text fit for a log line: control bytes as '?', at most `max` bytes.
[[nodiscard]] std::string printable(std::string_view text, size_t max = 200);
[[nodiscard]] std::string_view view(const Nonce& bytes) noexcept;

}  // namespace trainit::net
