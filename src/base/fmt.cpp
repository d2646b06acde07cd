// fmt's compiled part, built once here for the whole project.
//
// Debian ships fmt as headers and a shared library only, and trainit links
// fully statically, so the project compiles fmt's out-of-line functions
// itself. In header-only mode every file that formats would instantiate the
// whole formatting engine (vformat_to over every argument type, the
// shortest-float conversion) again: about 1.8 s of compiling per file at
// -Os, most of each file's time. Here the engine is made once; elsewhere
// fmt::format() calls it through fmt::vformat(), declared in the headers.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

// The templates the headers declare but define only in format-inl.h: the
// float and double conversions, and the separators for char (a static
// thousands separator, FMT_STATIC_THOUSANDS_SEPARATOR: no std::locale).
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;

}  // namespace detail
FMT_END_NAMESPACE
