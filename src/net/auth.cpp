#include "net/auth.h"

#include <sodium.h>

#include <string>

#include "net/wire.h"

namespace trainit::net {
namespace {

static_assert(std::tuple_size_v<Tag> == crypto_auth_BYTES);
static_assert(sizeof(Auth) == crypto_auth_KEYBYTES);

std::string_view view(const Nonce& nonce) {
  return {reinterpret_cast<const char*>(nonce.data()), nonce.size()};
}

std::string client_message(const Nonce& server_nonce, const Nonce& client_nonce, uint32_t host_index,
                           uint32_t host_count, std::string_view job_id) {
  wire::PayloadWriter message;
  message.bytes("trainit hello").bytes(view(server_nonce)).bytes(view(client_nonce));
  message.u32(host_index).u32(host_count).bytes(job_id);
  return message.data();
}

std::string server_message(const Nonce& client_nonce, const Nonce& server_nonce) {
  wire::PayloadWriter message;
  message.bytes("trainit welcome").bytes(view(client_nonce)).bytes(view(server_nonce));
  return message.data();
}

}  // namespace

Result<Auth> Auth::from_secret(std::string_view secret) {
  if (::sodium_init() < 0) {
    return Error{"libsodium could not be initialised"};
  }
  Auth auth;
  ::crypto_generichash(auth.key_.data(), auth.key_.size(), reinterpret_cast<const unsigned char*>(secret.data()),
                       secret.size(), nullptr, 0);
  return auth;
}

Nonce Auth::nonce() noexcept {
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

Tag Auth::client_tag(const Nonce& server_nonce, const Nonce& client_nonce, uint32_t host_index, uint32_t host_count,
                     std::string_view job_id) const {
  return sign(client_message(server_nonce, client_nonce, host_index, host_count, job_id));
}

bool Auth::client_tag_ok(std::string_view tag, const Nonce& server_nonce, const Nonce& client_nonce,
                         uint32_t host_index, uint32_t host_count, std::string_view job_id) const {
  return verify(tag, client_message(server_nonce, client_nonce, host_index, host_count, job_id));
}

Tag Auth::server_tag(const Nonce& client_nonce, const Nonce& server_nonce) const {
  return sign(server_message(client_nonce, server_nonce));
}

bool Auth::server_tag_ok(std::string_view tag, const Nonce& client_nonce, const Nonce& server_nonce) const {
  return verify(tag, server_message(client_nonce, server_nonce));
}

}  // namespace trainit::net
