// UTF-8 as the text trainit takes from outside (a peer's cause, a rank's
// exception) must be: well-formed, and without control characters, which
// would reach a console or a log as commands rather than text.
#pragma once

#include <cstddef>
#include <string_view>

namespace trainit {

// The length of the well-formed UTF-8 sequence at text[at] (1 for ASCII), 0
// where none starts there: a stray continuation byte, a lead byte without its
// continuation, an overlong form, a surrogate or a value above U+10FFFF.
[[nodiscard]] std::size_t utf8_length_at(std::string_view text, std::size_t at) noexcept;

// The code point of the well-formed sequence of `length` bytes at text[at].
[[nodiscard]] char32_t utf8_decode(std::string_view text, std::size_t at, std::size_t length) noexcept;

// C0 (U+0000-U+001F), DEL and C1 (U+0080-U+009F): the control characters.
[[nodiscard]] constexpr bool is_control(char32_t cp) noexcept {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

// The byte offset of the first thing in `text` that is not printable UTF-8
// text (a malformed sequence or a control character), or npos.
[[nodiscard]] std::size_t first_unprintable(std::string_view text) noexcept;

// `text` into `out` (at most `size` bytes, cut there, never inside an
// escape), every byte of what first_unprintable() finds written as \xNN:
// a log line or message of one line, whatever text it quotes. No allocation.
// Returns the length written.
std::size_t escape_unprintable_into(std::string_view text, char* out, std::size_t size) noexcept;

}  // namespace trainit
