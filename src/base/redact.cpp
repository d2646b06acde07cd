#include "base/redact.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace trainit {
namespace {

std::vector<std::string>& secrets() {
  static std::vector<std::string> list;
  return list;
}

// The value as a JSON string holds it, without the quotes.
std::string json_escaped(std::string_view value) {
  std::string out;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

// The registered secret that starts `text`, longest first; empty: none.
std::string_view secret_at(std::string_view text) noexcept {
  for (const std::string& s : secrets()) {
    if (text.substr(0, s.size()) == s) {
      return s;
    }
  }
  return {};
}

// Whether `haystack` holds `needle` (upper case) in any case.
bool contains_upper(std::string_view haystack, std::string_view needle) noexcept {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::toupper(static_cast<unsigned char>(a)) == b; });
  return it != haystack.end();
}

}  // namespace

bool is_secret_name(std::string_view name) noexcept {
  if (contains_upper(name.substr(0, 4), "CRED")) {
    return true;
  }
  for (std::string_view word : {"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"}) {
    if (contains_upper(name, word)) {
      return true;
    }
  }
  return false;
}

void add_secret(std::string_view value) {
  if (value.size() < kMinSecretSize) {
    return;
  }
  auto& list = secrets();
  for (std::string form : {std::string(value), json_escaped(value)}) {
    if (std::find(list.begin(), list.end(), form) == list.end()) {
      list.push_back(std::move(form));
    }
  }
  // Longest first: a secret that holds another is hidden whole.
  std::stable_sort(list.begin(), list.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

bool has_secrets() noexcept {
  return !secrets().empty();
}

std::string redact(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    if (std::string_view s = secret_at(text); !s.empty()) {
      out += kRedactedText;
      text.remove_prefix(s.size());
    } else {
      out += text.front();
      text.remove_prefix(1);
    }
  }
  return out;
}

std::size_t redact_into(std::string_view text, char* out, std::size_t size) noexcept {
  std::size_t n = 0;
  auto put = [&](std::string_view piece) {
    const std::size_t k = std::min(piece.size(), size - n);
    std::copy_n(piece.data(), k, out + n);
    n += k;
  };
  while (!text.empty() && n < size) {
    if (std::string_view s = secret_at(text); !s.empty()) {
      put(kRedactedText);
      text.remove_prefix(s.size());
    } else {
      put(text.substr(0, 1));
      text.remove_prefix(1);
    }
  }
  return n;
}

}  // namespace trainit
