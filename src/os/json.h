// Reading JSON from outside without exceptions and within bounds.
//
// nlohmann-json is used only through this boundary: the document is parsed by
// an iterative SAX builder (never a recursive descent), with the size and the
// nesting depth bounded, so hostile input can neither overflow the stack nor
// make a later recursive walk (dump, destruction) deep. Nothing here throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trainit {

using Json = nlohmann::json;

struct JsonLimits {
  std::size_t max_bytes = std::size_t{16} << 20;  // 16 MiB
  unsigned max_depth = 64;                        // nested arrays/objects
};

// Parses `text` as exactly one JSON document. Errors (one line, starting with
// `file`): text over max_bytes (errnum EFBIG); a syntax error (with line and
// column): errnum EBADMSG, "the text is not one well-formed document", which
// is also how a file caught mid-write reads; a key repeated within one
// object, or nesting deeper than max_depth (with the key path where it
// happened): errnum 0, as for a document that is wrong, not unfinished: no
// part of a document has a repeated key, or nests deeper, than the whole.
[[nodiscard]] Result<Json> parse_json(std::string_view text, std::string_view file, const JsonLimits& limits = {});

// `value` for an error message: compact ASCII-only JSON, at most `max_bytes`
// ("..." marks a cut).
[[nodiscard]] std::string json_for_message(const Json& value, std::size_t max_bytes = 80);

// --- Reading a document without holding it ----------------------------------
//
// For documents too large to keep whole (a rank table may be 16 MiB, and its
// DOM ten times that): the text is checked as parse_json() checks it, with the
// same errors word for word, while a reader is told, in document order, what
// it holds. What a reader needs for its own error messages comes with each
// value: enough of a container's compact form when it closes, for
// json_for_message_of_form(), and json_for_message(JsonScalar) for a scalar. Memory: a few KiB
// per open container, and the keys of each open object, whatever the
// document's size.

// A value that is not a container. `string` views the parser's buffer and is
// valid only during the call that hands it over.
struct JsonScalar {
  enum class Type { kNull, kBoolean, kInteger, kUnsigned, kFloat, kString };
  Type type = Type::kNull;
  bool boolean = false;
  std::int64_t integer = 0;   // kInteger: what the text wrote with a minus sign
  std::uint64_t natural = 0;  // kUnsigned
  double real = 0;            // kFloat
  std::string_view string;    // kString: valid UTF-8
};

// `value` for an error message, exactly as json_for_message() prints the same
// value held in a Json.
[[nodiscard]] std::string json_for_message(const JsonScalar& value, std::size_t max_bytes = 80);

// What json_for_message() prints (at up to 80 bytes) of a container whose
// compact form starts with `form`, as JsonStreamReader::close() gives it.
[[nodiscard]] std::string json_for_message_of_form(std::string_view form);

// What parse_json_stream() tells; returning false from any call stops the
// reading there.
class JsonStreamReader {
 public:
  virtual ~JsonStreamReader() = default;
  virtual bool scalar(const JsonScalar& value) = 0;
  // An object (or an array) starts; its values follow, then close().
  virtual bool open(bool object) = 0;
  // The key of the next value of the innermost object (never a repeat).
  virtual bool key(std::string_view key) = 0;
  // The innermost container ends. `form` is the start of its compact form
  // (dump()), enough of it for a message: json_for_message_of_form(form) is
  // what json_for_message() prints of the container.
  virtual bool close(std::string_view form) = 0;
};

// Reads `text` as parse_json() does, telling `reader`. Returns true when the
// whole text was read, false when `reader` stopped it first; the errors are
// parse_json's (errnum EFBIG or EBADMSG).
[[nodiscard]] Result<bool> parse_json_stream(std::string_view text, std::string_view file, const JsonLimits& limits,
                                             JsonStreamReader& reader);

// The string value of `key` in the top-level object of `text`, found without
// reading past it, so that a large document can be asked one question
// cheaply. nullopt when that does not tell: the text is not an object, has
// no such key at the top level or not a string there, or breaks, or nests
// deeper than `max_depth`, before it (a key of a nested object never counts).
// Nothing after the value is looked at: the text may end there, or go on
// with anything, the key again included (which parse_json refuses as a
// repeated key: see top_level_key_repeated).
[[nodiscard]] std::optional<std::string> peek_top_level_string(std::string_view text, std::string_view key,
                                                               unsigned max_depth = JsonLimits{}.max_depth);

// Whether the top-level object of `text` gives `key` twice: read, without
// building anything, until its second time, or until the top level ends or
// the text ends, breaks or nests deeper than `max_depth` (false then: not
// seen). What a peek_top_level_string() answer stands on; it costs a look at
// the whole text.
[[nodiscard]] bool top_level_key_repeated(std::string_view text, std::string_view key,
                                          unsigned max_depth = JsonLimits{}.max_depth);

}  // namespace trainit
