#include "core/view.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace meshtp {

View View::block(std::int64_t row0, std::int64_t col0, std::int64_t nrows,
                 std::int64_t ncols) const {
  MESHTP_CHECK(row0 >= 0 && col0 >= 0 && nrows >= 0 && ncols >= 0 && row0 + nrows <= rows &&
                   col0 + ncols <= cols,
               "block [{}, {}) x [{}, {}) is outside the {} view", row0, row0 + nrows, col0,
               col0 + ncols, describe(*this));
  char* base = static_cast<char*>(data);
  const auto offset = static_cast<std::size_t>(row0 * ld + col0) * element_size(type);
  return {nrows == 0 || ncols == 0 ? data : base + offset, type, nrows, ncols, ld};
}

std::string describe(const View& v) {
  return fmt::format("{} {}x{} (ld {})", to_string(v.type), v.rows, v.cols, v.ld);
}

}  // namespace meshtp
