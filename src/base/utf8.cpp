#include "base/utf8.h"

namespace trainit {

std::size_t utf8_length_at(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&text](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) {
    return 1;
  }
  std::size_t n = 0;
  unsigned lo = 0x80;  // the range of the second byte
  unsigned hi = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    lo = lead == 0xe0 ? 0xa0 : lo;  // no overlong form
    hi = lead == 0xed ? 0x9f : hi;  // no surrogate
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    lo = lead == 0xf0 ? 0x90 : lo;  // no overlong form
    hi = lead == 0xf4 ? 0x8f : hi;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (at + n > text.size() || byte(at + 1) < lo || byte(at + 1) > hi) {
    return 0;
  }
  for (std::size_t k = 2; k < n; ++k) {
    if ((byte(at + k) & 0xc0) != 0x80) {
      return 0;
    }
  }
  return n;
}

char32_t utf8_decode(std::string_view text, std::size_t at, std::size_t length) noexcept {
  const auto lead = static_cast<unsigned char>(text[at]);
  if (length <= 1) {
    return lead;
  }
  char32_t cp = lead & (0x7fU >> length);
  for (std::size_t k = 1; k < length; ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[at + k]) & 0x3fU);
  }
  return cp;
}

namespace {

// The length of the printable character at text[at], 0 where none is.
std::size_t printable_at(std::string_view text, std::size_t at) noexcept {
  const std::size_t n = utf8_length_at(text, at);
  return n != 0 && !is_control(utf8_decode(text, at, n)) ? n : 0;
}

}  // namespace

std::size_t first_unprintable(std::string_view text) noexcept {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n = printable_at(text, at);
    if (n == 0) {
      return at;
    }
    at += n;
  }
  return std::string_view::npos;
}

std::size_t escape_unprintable_into(std::string_view text, char* out, std::size_t size) noexcept {
  constexpr char kHex[] = "0123456789abcdef";
  std::size_t written = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n = printable_at(text, at);
    if (n != 0) {
      if (written + n > size) {
        break;
      }
      for (std::size_t k = 0; k < n; ++k) {
        out[written++] = text[at + k];
      }
      at += n;
      continue;
    }
    // A control character or a malformed sequence: its bytes one by one,
    // as far as they are not printable themselves (C1's two bytes both).
    const std::size_t length = utf8_length_at(text, at);
    const std::size_t bytes = length == 0 ? 1 : length;
    if (written + 4 * bytes > size) {
      break;
    }
    for (std::size_t k = 0; k < bytes; ++k) {
      const auto c = static_cast<unsigned char>(text[at + k]);
      out[written++] = '\\';
      out[written++] = 'x';
      out[written++] = kHex[c >> 4];
      out[written++] = kHex[c & 0xf];
    }
    at += bytes;
  }
  return written;
}

}  // namespace trainit
