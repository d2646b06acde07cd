#include "os/json.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <utility>
#include <vector>

#include "os/text.h"

namespace trainit {
namespace {

// "[json.exception.parse_error.101] parse error at line 1, column 2: ...;
// last read: '...'" without its tag, as one line, the text it quotes (a
// token: a number or string can be megabytes) cut after 64 bytes.
std::string syntax_error(const nlohmann::detail::exception& ex) {
  std::string_view what = ex.what();
  if (auto cut = what.find("] "); what.starts_with("[json.exception.") && cut != std::string_view::npos) {
    what.remove_prefix(cut + 2);
  }
  const auto open = what.find('\'');
  const auto close = what.rfind('\'');
  constexpr std::size_t kQuoted = 64;
  if (open != std::string_view::npos && close > open + 1 + kQuoted) {
    return fmt::format("not valid JSON: {}...{}", one_line(what.substr(0, open + 1 + kQuoted)),
                       one_line(what.substr(close)));
  }
  return "not valid JSON: " + one_line(what);
}

// How a key shows in a key path: cut after 64 bytes.
std::string path_key(std::string_view key) {
  return one_line(key.size() > 64 ? std::string(key.substr(0, 64)) + "..." : key);
}

// Builds the DOM from nlohmann's (iterative) SAX parser, refusing depth and
// repeated keys as it goes. A container is only ever added to while it is the
// innermost open one, so the pointers on the stack stay valid.
class BoundedBuilder {
 public:
  BoundedBuilder(Json& root, unsigned max_depth) : root_(root), max_depth_(max_depth) {}

  bool null() { return put(Json(nullptr)) != nullptr; }
  bool boolean(bool v) { return put(Json(v)) != nullptr; }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)) != nullptr; }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)) != nullptr; }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return put(Json(v)) != nullptr; }
  bool string(Json::string_t& v) { return put(Json(std::move(v))) != nullptr; }
  bool binary(Json::binary_t& v) { return put(Json::binary(std::move(v))) != nullptr; }
  bool start_object(std::size_t /*elements*/) { return open(Json::value_t::object); }
  bool start_array(std::size_t /*elements*/) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    Json::object_t& object = stack_.back()->get_ref<Json::object_t&>();
    if (object.find(k) != object.end()) {
      error_ = fmt::format("{}: repeated key", location(&k));
      errnum_ = 0;  // see errnum()
      return false;
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
    error_ = syntax_error(ex);
    return false;
  }

  [[nodiscard]] const std::string& error() const { return error_; }
  // EBADMSG: the text is not (yet) one whole document; 0: it has a repeated
  // key, or nests too deep, which no part of a document caught mid-write
  // does unless the whole document does too.
  [[nodiscard]] int errnum() const { return errnum_; }

 private:
  Json* put(Json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      auto& array = parent.get_ref<Json::array_t&>();
      array.push_back(std::move(value));
      return &array.back();
    }
    auto& object = parent.get_ref<Json::object_t&>();
    auto [it, inserted] = object.emplace(std::move(key_), std::move(value));
    (void)inserted;  // key() refused repeats
    return &it->second;
  }

  bool open(Json::value_t type) {
    if (stack_.size() >= max_depth_) {
      error_ = fmt::format("{}: nested deeper than {} levels", location(nullptr), max_depth_);
      errnum_ = 0;  // see errnum()
      return false;
    }
    stack_.push_back(put(Json(type)));
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  // The key path of the value about to be added (or of `pending_key` in the
  // innermost object), e.g. "server_list[1].device[3]".
  std::string location(const std::string* pending_key) const {
    std::string path;
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      const Json& container = *stack_[i];
      bool innermost = i + 1 == stack_.size();
      if (container.is_array()) {
        std::size_t n = container.size();
        path += fmt::format("[{}]", innermost ? n : n - 1);
        continue;
      }
      const std::string* k = nullptr;
      if (innermost) {
        k = pending_key != nullptr ? pending_key : &key_;
      } else {
        // The open child is the value last inserted under key_ at that level;
        // find it by address.
        for (const auto& [name, value] : container.get_ref<const Json::object_t&>()) {
          if (&value == stack_[i + 1])
            k = &name;
        }
      }
      if (k == nullptr)
        continue;
      if (!path.empty())
        path += '.';
      path += path_key(*k);
    }
    return path.empty() ? "top level" : path;
  }

  Json& root_;
  unsigned max_depth_;
  std::vector<Json*> stack_;
  std::string key_;
  std::string error_;
  int errnum_ = EBADMSG;
};

// --- the streaming reader ------------------------------------------------------

// json_for_message() prints at most 80 bytes by default and marks a longer
// value with "...": 81 bytes of a value's compact form tell both.
constexpr std::size_t kMessageBytes = 80;
constexpr std::size_t kShown = kMessageBytes + 1;

// An object's compact form lists its keys in sorted order (nlohmann's
// std::map). Each member takes at least 4 bytes and a comma ("":0,), so the
// 17 smallest keys fill more than kShown bytes: only they can show.
constexpr std::size_t kShownMembers = 17;

// Appends the compact form of `text` as a JSON string, quotes included, as
// nlohmann's dump(-1, ' ', true) writes it, until `out` holds `limit` bytes
// (then cut there).
void append_string(std::string& out, std::string_view text, std::size_t limit) {
  if (out.size() >= limit)
    return;
  const bool plain =
      std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {
    out += '"';
    out.append(text.substr(0, limit - out.size()));
    if (out.size() < limit)
      out += '"';
  } else {
    // Each byte shows as at least one: as many bytes as are left to show,
    // to the end of a code point, show the same.
    std::size_t n = std::min(text.size(), limit - out.size());
    while (n < text.size() && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80)
      ++n;
    out += Json(std::string(text.substr(0, n))).dump(-1, ' ', true, Json::error_handler_t::replace);
  }
  if (out.size() > limit)
    out.resize(limit);
}

// The compact form of `value`, cut at `limit` bytes.
std::string scalar_form(const JsonScalar& value, std::size_t limit) {
  std::string out;
  switch (value.type) {
    case JsonScalar::Type::kNull:
      out = "null";
      break;
    case JsonScalar::Type::kBoolean:
      out = value.boolean ? "true" : "false";
      break;
    case JsonScalar::Type::kInteger:
      out = std::to_string(value.integer);
      break;
    case JsonScalar::Type::kUnsigned:
      out = std::to_string(value.natural);
      break;
    case JsonScalar::Type::kFloat:
      out = Json(value.real).dump();
      break;
    case JsonScalar::Type::kString:
      append_string(out, value.string, limit);
      break;
  }
  if (out.size() > limit)
    out.resize(limit);
  return out;
}

// What json_for_message() makes of a compact form of at least max_bytes + 1
// bytes (or all of it).
std::string message_form(std::string form, std::size_t max_bytes) {
  if (form.size() > max_bytes) {
    form.resize(max_bytes);
    form += "...";
  }
  return one_line(form);
}

// The keys of one object, to refuse a repeat: every key's bytes once, in one
// arena, found by hash once there are more than a few. About 1.5 times a
// key's bytes in all, for an object of a million keys as for one of three.
class KeySet {
 public:
  // False when `key` is already there.
  bool insert(std::string_view key) {
    if (slots_.empty() && size_ < kLinear) {
      for (std::size_t at = 0; at < arena_.size();) {
        auto [k, next] = entry(at);
        if (k == key)
          return false;
        at = next;
      }
    } else {
      if (slots_.empty())
        rehash(4 * kLinear);
      if (find(key) != nullptr)
        return false;
    }
    const auto offset = static_cast<std::uint32_t>(arena_.size());
    if (key.size() < kLongKey) {
      arena_ += static_cast<char>(key.size());
    } else {
      const auto length = static_cast<std::uint32_t>(key.size());
      arena_ += static_cast<char>(kLongKey);
      arena_.append(reinterpret_cast<const char*>(&length), sizeof(length));
    }
    arena_.append(key);
    ++size_;
    if (!slots_.empty()) {
      if (4 * size_ > 3 * slots_.size())
        rehash(2 * slots_.size());
      else
        *free_slot(key) = offset + 1;
    }
    return true;
  }

  void clear() {
    arena_.clear();
    slots_.clear();
    size_ = 0;
  }

 private:
  static constexpr std::size_t kLinear = 8;
  static constexpr std::size_t kLongKey = 0xff;  // a length byte of 0xff: 4 bytes of length follow

  // The key at `offset` in the arena, and where the next one starts.
  [[nodiscard]] std::pair<std::string_view, std::size_t> entry(std::size_t offset) const {
    std::size_t length = static_cast<unsigned char>(arena_[offset++]);
    if (length == kLongKey) {
      std::uint32_t long_length = 0;
      std::memcpy(&long_length, arena_.data() + offset, sizeof(long_length));
      length = long_length;
      offset += sizeof(long_length);
    }
    return {std::string_view(arena_).substr(offset, length), offset + length};
  }

  const std::uint32_t* find(std::string_view key) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = std::hash<std::string_view>{}(key)&mask;; i = (i + 1) & mask) {
      if (slots_[i] == 0)
        return nullptr;
      if (entry(slots_[i] - 1).first == key)
        return &slots_[i];
    }
  }

  std::uint32_t* free_slot(std::string_view key) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = std::hash<std::string_view>{}(key)&mask;
    while (slots_[i] != 0)
      i = (i + 1) & mask;
    return &slots_[i];
  }

  void rehash(std::size_t slots) {
    slots_.assign(slots, 0);
    for (std::size_t at = 0; at < arena_.size();) {
      auto [k, next] = entry(at);
      *free_slot(k) = static_cast<std::uint32_t>(at) + 1;
      at = next;
    }
  }

  std::string arena_;                 // per key: its length (one byte, or 0xff and 4), then its bytes
  std::vector<std::uint32_t> slots_;  // arena offset + 1; 0: free. Empty while few keys.
  std::size_t size_ = 0;
};

// Runs nlohmann's SAX parser for a JsonStreamReader: the same checks as
// BoundedBuilder, and each container's compact form built as it goes, from
// the first kShown bytes of its values (the kShownMembers smallest keys of an
// object).
class StreamDriver {
 public:
  StreamDriver(JsonStreamReader& reader, unsigned max_depth) : reader_(reader), max_depth_(max_depth) {}

  bool null() { return scalar(JsonScalar{}); }
  bool boolean(bool v) {
    JsonScalar s;
    s.type = JsonScalar::Type::kBoolean;
    s.boolean = v;
    return scalar(s);
  }
  bool number_integer(Json::number_integer_t v) {
    JsonScalar s;
    s.type = JsonScalar::Type::kInteger;
    s.integer = v;
    return scalar(s);
  }
  bool number_unsigned(Json::number_unsigned_t v) {
    JsonScalar s;
    s.type = JsonScalar::Type::kUnsigned;
    s.natural = v;
    return scalar(s);
  }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) {
    JsonScalar s;
    s.type = JsonScalar::Type::kFloat;
    s.real = v;
    return scalar(s);
  }
  bool string(Json::string_t& v) {
    JsonScalar s;
    s.type = JsonScalar::Type::kString;
    s.string = v;
    return scalar(s);
  }
  bool binary(Json::binary_t& /*v*/) {  // not in JSON text
    error_ = "not valid JSON: binary data";
    return false;
  }
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    Frame& f = stack_[depth_ - 1];
    if (!f.keys.insert(k)) {
      error_ = fmt::format("{}: repeated key", location(&k));
      errnum_ = 0;  // see errnum()
      return false;
    }
    f.key.assign(k, 0, 65);
    keep_member(f, k);
    return reader_.key(k) || stop();
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
    error_ = syntax_error(ex);
    return false;
  }

  [[nodiscard]] const std::string& error() const { return error_; }
  // EBADMSG: the text is not (yet) one whole document; 0: it has a repeated
  // key, or nests too deep, which no part of a document caught mid-write
  // does unless the whole document does too.
  [[nodiscard]] int errnum() const { return errnum_; }
  [[nodiscard]] bool stopped() const { return stopped_; }

 private:
  struct Member {
    std::string key;  // cut to its first kShown + 3 bytes: what can show, and how it sorts
    std::string form;
  };
  struct Frame {
    bool object = false;
    std::size_t count = 0;        // values started in it
    std::string key;              // objects: the current key's first 65 bytes (for locations)
    std::string form;             // arrays: "[" and the values so far, at most kShown bytes
    std::vector<Member> members;  // objects: the kShownMembers smallest keys so far
    int member = -1;              // objects: the current key's entry in members, or -1
    KeySet keys;                  // objects: every key so far
  };

  bool stop() {
    stopped_ = true;
    return false;
  }

  bool scalar(const JsonScalar& value) {
    if (depth_ > 0)
      ++stack_[depth_ - 1].count;
    if (!reader_.scalar(value))
      return stop();
    if (depth_ > 0 && wants_value(stack_[depth_ - 1]))
      add_value(stack_[depth_ - 1], scalar_form(value, kShown));
    return true;
  }

  bool open(bool object) {
    if (depth_ >= max_depth_) {
      error_ = fmt::format("{}: nested deeper than {} levels", location(nullptr), max_depth_);
      errnum_ = 0;  // see errnum()
      return false;
    }
    if (depth_ > 0)
      ++stack_[depth_ - 1].count;
    if (!reader_.open(object))
      return stop();
    if (stack_.size() == depth_)
      stack_.emplace_back();
    Frame& f = stack_[depth_++];
    f.object = object;
    f.count = 0;
    f.key.clear();
    f.form = object ? "" : "[";
    f.members.clear();
    f.member = -1;
    f.keys.clear();
    return true;
  }

  bool close() {
    Frame& f = stack_[--depth_];
    if (f.object) {
      std::sort(f.members.begin(), f.members.end(), [](const Member& a, const Member& b) { return a.key < b.key; });
      f.form = "{";
      for (const Member& m : f.members) {
        if (f.form.size() >= kShown)
          break;
        if (f.form.size() > 1)
          f.form += ',';
        append_string(f.form, m.key, kShown);
        f.form += ':';
        f.form += m.form;
      }
    }
    if (f.form.size() < kShown)
      f.form += f.object ? '}' : ']';
    if (f.form.size() > kShown)
      f.form.resize(kShown);
    if (!reader_.close(f.form))
      return stop();
    if (depth_ > 0 && wants_value(stack_[depth_ - 1]))
      add_value(stack_[depth_ - 1], f.form);
    return true;
  }

  static bool wants_value(const Frame& parent) {
    return parent.object ? parent.member >= 0 : parent.form.size() < kShown;
  }

  static void add_value(Frame& parent, const std::string& form) {
    if (parent.object) {
      parent.members[static_cast<std::size_t>(parent.member)].form = form;
      parent.member = -1;
      return;
    }
    if (parent.count > 1)
      parent.form += ',';
    parent.form += form;
    if (parent.form.size() > kShown)
      parent.form.resize(kShown);
  }

  // Keeps `key` among the object's smallest keys, or not.
  static void keep_member(Frame& f, std::string_view key) {
    std::size_t n = std::min(key.size(), kShown + 3);
    while (n < key.size() && (static_cast<unsigned char>(key[n]) & 0xc0) == 0x80)
      --n;  // cut at the start of a code point
    key = key.substr(0, n);
    f.member = -1;
    if (f.members.size() < kShownMembers) {
      f.members.push_back(Member{std::string(key), {}});
      f.member = static_cast<int>(f.members.size() - 1);
      return;
    }
    auto largest = std::max_element(f.members.begin(), f.members.end(),
                                    [](const Member& a, const Member& b) { return a.key < b.key; });
    if (key < largest->key) {
      largest->key.assign(key);
      largest->form.clear();
      f.member = static_cast<int>(largest - f.members.begin());
    }
  }

  // As BoundedBuilder::location.
  std::string location(const std::string* pending_key) const {
    std::string path;
    for (std::size_t i = 0; i < depth_; ++i) {
      const Frame& f = stack_[i];
      const bool innermost = i + 1 == depth_;
      if (!f.object) {
        path += fmt::format("[{}]", innermost ? f.count : f.count - 1);
        continue;
      }
      if (!path.empty())
        path += '.';
      path += path_key(innermost && pending_key != nullptr ? *pending_key : f.key);
    }
    return path.empty() ? "top level" : path;
  }

  JsonStreamReader& reader_;
  unsigned max_depth_;
  std::vector<Frame> stack_;  // frames [0, depth_) are open; the rest kept for reuse
  std::size_t depth_ = 0;
  std::string error_;
  int errnum_ = EBADMSG;
  bool stopped_ = false;
};

}  // namespace

Result<Json> parse_json(std::string_view text, std::string_view file, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Error{
        fmt::format("{}: {} bytes, larger than the limit of {} bytes", one_line(file), text.size(), limits.max_bytes),
        EFBIG};
  }
  try {
    Json root;
    BoundedBuilder builder(root, limits.max_depth);
    if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
      return Error{fmt::format("{}: {}", one_line(file), builder.error()), builder.errnum()};
    }
    return root;
  } catch (const std::exception& e) {  // allocation failure: the only way left to throw
    return Error{fmt::format("{}: cannot parse: {}", one_line(file), one_line(e.what()))};
  }
}

std::string json_for_message(const Json& value, std::size_t max_bytes) {
  std::string text;
  try {
    text = value.dump(-1, ' ', true, Json::error_handler_t::replace);
  } catch (const std::exception&) {
    return "(unprintable)";
  }
  if (text.size() > max_bytes) {
    text.resize(max_bytes);
    text += "...";
  }
  return one_line(text);
}

std::string json_for_message_of_form(std::string_view form) {
  return message_form(std::string(form.substr(0, kShown)), kMessageBytes);
}

std::string json_for_message(const JsonScalar& value, std::size_t max_bytes) {
  try {
    return message_form(scalar_form(value, max_bytes + 1), max_bytes);
  } catch (const std::exception&) {
    return "(unprintable)";
  }
}

Result<bool> parse_json_stream(std::string_view text, std::string_view file, const JsonLimits& limits,
                               JsonStreamReader& reader) {
  if (text.size() > limits.max_bytes) {
    return Error{
        fmt::format("{}: {} bytes, larger than the limit of {} bytes", one_line(file), text.size(), limits.max_bytes),
        EFBIG};
  }
  try {
    StreamDriver driver(reader, limits.max_depth);
    if (Json::sax_parse(text.begin(), text.end(), &driver))
      return true;
    if (driver.stopped())
      return false;
    return Error{fmt::format("{}: {}", one_line(file), driver.error()), driver.errnum()};
  } catch (const std::exception& e) {  // allocation failure (here or in the reader)
    return Error{fmt::format("{}: cannot parse: {}", one_line(file), one_line(e.what()))};
  }
}

}  // namespace trainit
