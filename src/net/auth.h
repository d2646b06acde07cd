// The control channel's shared-secret handshake (libsodium): a mutual
// challenge-response, step by step in net/PROTOCOL.md.
//
// Both sides derive one key from the secret (crypto_generichash to 32 bytes).
// Each connection has two fresh random 32-byte nonces, the server's (in its
// CHALLENGE) and the client's (in its HELLO), and each side proves it holds
// the key with a crypto_auth tag (HMAC-SHA-512-256) over
//
//   label || server nonce || client nonce || u32 host index || u32 host count
//         || u64 server instance || u64 client instance || u32 job id length
//         || job id
//
// with the label "trainit control v3 client\0" for the client's proof (in
// its HELLO) and "trainit control v3 server\0" for the server's (in its
// WELCOME). Both nonces: neither proof is worth anything on another
// connection, whichever side replays it. The labels: one side's proof never
// serves as the other's. The job's identity (as the HELLO claims it): a
// proof is for that host of that job only. The instances: neither side can
// pass off another trainit's (one that came back after dying) as its own. This authenticates the peers, not
// the bytes that follow: the channel is not encrypted.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace trainit::net {

using Nonce = std::array<unsigned char, 32>;
using Tag = std::array<unsigned char, 32>;  // crypto_auth_BYTES

// A nonce's (or a tag's: the same type) bytes, as the wire writes them.
[[nodiscard]] inline std::string_view view(const Nonce& bytes) noexcept {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// What both proofs of one connection cover.
struct Handshake {
  Nonce server_nonce{};
  Nonce client_nonce{};
  uint32_t host_index = 0;
  uint32_t host_count = 0;
  uint64_t server_instance = 0;  // host 0's trainit (its CHALLENGE)
  uint64_t client_instance = 0;  // the client's trainit (its HELLO)
  std::string_view job_id;
};

class Auth {
 public:
  // Initialises libsodium (once, thread-safe) and derives the key.
  static Result<Auth> from_secret(std::string_view secret);

  // A fresh random nonce (libsodium's randombytes: getrandom(), no /dev
  // needed), with or without a secret.
  [[nodiscard]] static Nonce nonce() noexcept;

  // What a client sends, and what the server checks (crypto_auth_verify:
  // constant time).
  [[nodiscard]] Tag client_tag(const Handshake& handshake) const;
  [[nodiscard]] bool client_tag_ok(std::string_view tag, const Handshake& handshake) const;
  // What the server answers, and what the client checks.
  [[nodiscard]] Tag server_tag(const Handshake& handshake) const;
  [[nodiscard]] bool server_tag_ok(std::string_view tag, const Handshake& handshake) const;

 private:
  [[nodiscard]] Tag sign(const std::string& message) const;
  [[nodiscard]] bool verify(std::string_view tag, const std::string& message) const;

  std::array<unsigned char, 32> key_{};  // crypto_auth_KEYBYTES
};

}  // namespace trainit::net
