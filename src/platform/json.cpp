#include "platform/json.h"

#include <fmt/format.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "platform/text.h"

namespace trainit {
namespace {

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
      return false;
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& ex) {
    std::string_view what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    if (auto cut = what.find("] "); what.starts_with("[json.exception.") && cut != std::string_view::npos) {
      what.remove_prefix(cut + 2);
    }
    error_ = "not valid JSON: " + one_line(what);
    return false;
  }

  [[nodiscard]] const std::string& error() const { return error_; }

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
      path += one_line(k->size() > 64 ? k->substr(0, 64) + "..." : *k);
    }
    return path.empty() ? "top level" : path;
  }

  Json& root_;
  unsigned max_depth_;
  std::vector<Json*> stack_;
  std::string key_;
  std::string error_;
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
      return Error{fmt::format("{}: {}", one_line(file), builder.error()), EBADMSG};
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

}  // namespace trainit
