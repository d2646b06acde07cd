#include "os/text.h"

#include "base/redact.h"
#include "base/utf8.h"

namespace trainit {
namespace {

constexpr std::size_t kMaxNameBytes = 200;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

void append_hex_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

}  // namespace

bool is_safe_name(std::string_view text) noexcept {
  if (text.empty() || text.size() > kMaxNameBytes || !is_alnum(text[0]))
    return false;
  for (char c : text) {
    if (!is_alnum(c) && c != '.' && c != '_' && c != '-')
      return false;
  }
  return true;
}

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t n = utf8_length_at(text, i);
      if (n == 0) {
        out += "\xef\xbf\xbd";  // U+FFFD
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

std::string quote_for_message(std::string_view raw, std::size_t max_bytes) {
  const std::string hidden = redact(raw);  // before the cut, which would leave a secret's beginning
  const std::string_view text = hidden;
  bool cut = text.size() > max_bytes;
  std::string_view shown = cut ? text.substr(0, max_bytes) : text;
  std::string out = "\"";
  for (char ch : shown) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      append_hex_escape(out, c);
    } else {
      out += ch;
    }
  }
  out += cut ? "\"..." : "\"";
  return out;
}

std::string one_line(std::string_view raw) {
  const std::string text = redact(raw);  // before the escapes, which would hide a secret from it
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      append_hex_escape(out, c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::string count_of(std::size_t n, std::string_view singular, std::string_view plural) {
  std::string text = std::to_string(n);
  text += ' ';
  if (n == 1) {
    text += singular;
  } else if (plural.empty()) {
    text += singular;
    text += 's';
  } else {
    text += plural;
  }
  return text;
}

}  // namespace trainit
