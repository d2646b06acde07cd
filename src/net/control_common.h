// What the control channel's server and client share (internal).
#pragma once

#include <memory>
#include <string>
#include <string_view>

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

// The largest cause a STOP or RESTART carries; longer ones are cut when sent
// and refused when received.
inline constexpr size_t kMaxCause = 4096;
// The longest job id a HELLO carries (it must fit wire::kMaxHelloFrame).
inline constexpr size_t kMaxJobId = 1024;

// Why `text` (a peer's job id or cause) is not fit to be taken as it is:
// longer than `max` bytes, not well-formed UTF-8, or holding a control
// character (C0, DEL, C1: U+0080-U+009F), which would reach log lines, a
// console and the termination message as commands. Empty when it is fit.
[[nodiscard]] std::string text_problem(std::string_view what, std::string_view text, size_t max);
// `text` made fit to send: cut to at most `max` bytes at a UTF-8 character
// boundary, each malformed byte and control character as '?'.
[[nodiscard]] std::string sendable_text(std::string_view text, size_t max);

// What this host sends in a STOP or RESTART: an exit code outside 0-255 as 1
// (exit() would wrap 256 to 0, a success), a rank below -1 as -1, the cause
// made sendable. The failing host is the caller's to set.
[[nodiscard]] StopNotice sendable(StopNotice notice);

// The decoders take a whole payload and return false with `why` ("malformed
// STOP: exit code 256 is not 0-255") when it is not a valid message: a field
// out of bounds, too few bytes, or bytes left over. A STOP's or RESTART's
// failing host must be `sender` when it is a client's (sender >= 1: a client
// stops for itself) and one of 0..host_count-1 when host 0 relays it
// (sender < 0).
[[nodiscard]] std::string encode_stop(const StopNotice& notice);
[[nodiscard]] bool decode_stop(std::string_view payload, unsigned host_count, int sender, StopNotice& out,
                               std::string& why);
// RESTART: the generation, then the failure as STOP carries it.
[[nodiscard]] std::string encode_restart(uint32_t generation, const StopNotice& notice);
[[nodiscard]] bool decode_restart(std::string_view payload, unsigned host_count, int sender, uint32_t& generation,
                                  StopNotice& out, std::string& why);
// CHECKIN's, GO's and FINISHED's generation: an empty payload is generation
// 0, else exactly 4 bytes.
[[nodiscard]] std::string encode_generation(uint32_t generation);
[[nodiscard]] bool decode_generation(wire::Type type, std::string_view payload, uint32_t& generation, std::string& why);
// RELEASE: the exit code, 0-255.
[[nodiscard]] std::string encode_release(int exit_code);
[[nodiscard]] bool decode_release(std::string_view payload, int& exit_code, std::string& why);
// HELLO, a client's first frame: its index and the host count, its
// trainit's instance, whether it has a secret (then the tag of its proof and its nonce, in their places
// whether host 0 has a secret or not), and its job id, printable UTF-8 of at
// most kMaxJobId bytes. The views point into `payload`.
struct HelloMessage {
  uint32_t index = 0;
  uint32_t count = 0;
  uint64_t instance = 0;
  bool has_secret = false;
  std::string_view tag, nonce, job_id;
};
[[nodiscard]] bool decode_hello(std::string_view payload, HelloMessage& out, std::string& why);
// CHALLENGE: the server's nonce of this connection, then its instance.
[[nodiscard]] std::string encode_challenge(const Nonce& nonce, uint64_t instance);
[[nodiscard]] bool decode_challenge(std::string_view payload, Nonce& nonce, uint64_t& instance, std::string& why);
// A random instance for a trainit that was given none (ControlConfig).
[[nodiscard]] uint64_t new_instance() noexcept;
// HEARTBEAT: nothing at all.
[[nodiscard]] bool decode_empty(wire::Type type, std::string_view payload, std::string& why);

// "exit code 3 from host 2, rank 17: segfault" for log lines.
[[nodiscard]] std::string describe(const StopNotice& notice);
// How often each side looks after its connections (hello deadlines, silent
// peers): min(heartbeat, peer_loss / 4), at least 1 ms.
[[nodiscard]] Duration heartbeat_interval(const ControlConfig& config);
// How often a heartbeat goes out: peer_loss / 3 (three to a peer-loss
// window: two may be late), and not more often than the above. Each beat is
// a write to every peer, and at 1,024 hosts host 0's writes were most of its
// steady work: a fourth beat cost a third more of it.
[[nodiscard]] Duration beat_interval(const ControlConfig& config);
// When the next heartbeat goes out: the next point of a grid of `interval`
// on the wall clock, shifted by `offset`. Every host of a job keeps the same
// grid (their clocks are synchronised, or nearly): host 0 then reads a burst
// of heartbeats a wake-up (up to 32 a call) instead of one at a time, 1,023
// times an interval; its own go out between the bursts (offset interval/2).
[[nodiscard]] Clock::time_point next_beat(Duration interval, Duration offset);
// How long a host whose connection closed has to reconnect:
// min(reconnect_grace, peer_loss).
[[nodiscard]] Duration reconnect_grace(const ControlConfig& config);
// on_lost's why: "nothing heard from it for 10.0 s", "its connection closed
// and it did not reconnect within 1.0 s".
[[nodiscard]] std::string silent_for(Duration silence);
[[nodiscard]] std::string closed_for(Duration grace);
// A peer's text fit for a log line: malformed bytes and control characters
// as '?', cut to at most `max` bytes ("..." marks the cut).
[[nodiscard]] std::string printable(std::string_view text, size_t max = 200);

}  // namespace trainit::net
