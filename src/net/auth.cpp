#include "net/auth.h"

#include <sodium.h>

#include <string>

#include "net/wire.h"

namespace trainit::net {
namespace {

static_assert(std::tuple_size_v<Tag> == crypto_auth_BYTES);
static_assert(sizeof(Auth) == crypto_auth_KEYBYTES);

// Of equal length, each ending in a NUL: neither is a prefix of the other,
// so no message of one role reads as a message of the other.
constexpr std::string_view kClientLabel{"trainit control v3 client\0", 26};
constexpr std::string_view kServerLabel{"trainit control v3 server\0", 26};
static_assert(kClientLabel.size() == kServerLabel.size());

std::string message(std::string_view label, const Handshake& h) {
  wire::PayloadWriter message;
  message.bytes(label).bytes(view(h.server_nonce)).bytes(view(h.client_nonce));
  message.u32(h.host_index).u32(h.host_count).u64(h.server_instance).u64(h.client_instance);
  message.u32(static_cast<uint32_t>(h.job_id.size())).bytes(h.job_id);
  return message.data();
}

bool sodium_ready() noexcept {
  static const bool ready = ::sodium_init() >= 0;  // thread-safe, once
  return ready;
}

}  // namespace

Result<Auth> Auth::from_secret(std::string_view secret) {
  if (!sodium_ready()) {
    return Error{"libsodium could not be initialised"};
  }
  Auth auth;
  ::crypto_generichash(auth.key_.data(), auth.key_.size(), reinterpret_cast<const unsigned char*>(secret.data()),
                       secret.size(), nullptr, 0);
  return auth;
}

Nonce Auth::nonce() noexcept {
  (void)sodium_ready();  // randombytes works without it, but picks its source there
  Nonce nonce;
  ::randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

Tag Auth::sign(const std::string& message) const {
  Tag tag;
  ::crypto_auth(tag.data(), reinterpret_cast<const unsigned char*>(message.data()), message.size(), key_.data());
  return tag;
}

bool Auth::verify(std::string_view tag, const std::string& message) const {
  return tag.size() == crypto_auth_BYTES &&
         ::crypto_auth_verify(reinterpret_cast<const unsigned char*>(tag.data()),
                              reinterpret_cast<const unsigned char*>(message.data()), message.size(), key_.data()) == 0;
}

Tag Auth::client_tag(const Handshake& handshake) const {
  return sign(message(kClientLabel, handshake));
}

bool Auth::client_tag_ok(std::string_view tag, const Handshake& handshake) const {
  return verify(tag, message(kClientLabel, handshake));
}

Tag Auth::server_tag(const Handshake& handshake) const {
  return sign(message(kServerLabel, handshake));
}

bool Auth::server_tag_ok(std::string_view tag, const Handshake& handshake) const {
  return verify(tag, message(kServerLabel, handshake));
}

}  // namespace trainit::net
