// The control channel's shared-secret handshake (libsodium).
//
// Both sides derive one key from the secret (crypto_generichash to 32 bytes)
// and prove they hold it without sending it, each answering the other's
// random 32-byte challenge with a crypto_auth tag (HMAC-SHA-512-256):
//
//   client tag = auth("trainit hello"   || server nonce || client nonce
//                     || u32 host index || u32 host count || job id)
//   server tag = auth("trainit welcome" || client nonce || server nonce)
//
// The labels keep one side's tag from ever serving as the other's; the
// client's tag also covers what its HELLO claims. This authenticates the
// peers, not the bytes that follow: the channel is not encrypted.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace trainit::net {

using Nonce = std::array<unsigned char, 32>;
using Tag = std::array<unsigned char, 32>;  // crypto_auth_BYTES

class Auth {
 public:
  // Initialises libsodium (once, thread-safe) and derives the key.
  static Result<Auth> from_secret(std::string_view secret);

  // A fresh random challenge (getrandom(): no /dev needed).
  [[nodiscard]] static Nonce nonce() noexcept;

  // What a client sends, and what the server checks (crypto_auth_verify:
  // constant time) against what the HELLO claims.
  [[nodiscard]] Tag client_tag(const Nonce& server_nonce, const Nonce& client_nonce, uint32_t host_index,
                               uint32_t host_count, std::string_view job_id) const;
  [[nodiscard]] bool client_tag_ok(std::string_view tag, const Nonce& server_nonce, const Nonce& client_nonce,
                                   uint32_t host_index, uint32_t host_count, std::string_view job_id) const;
  // What the server answers, and what the client checks.
  [[nodiscard]] Tag server_tag(const Nonce& client_nonce, const Nonce& server_nonce) const;
  [[nodiscard]] bool server_tag_ok(std::string_view tag, const Nonce& client_nonce, const Nonce& server_nonce) const;

 private:
  [[nodiscard]] Tag sign(const std::string& message) const;
  [[nodiscard]] bool verify(std::string_view tag, const std::string& message) const;

  std::array<unsigned char, 32> key_{};  // crypto_auth_KEYBYTES
};

}  // namespace trainit::net
