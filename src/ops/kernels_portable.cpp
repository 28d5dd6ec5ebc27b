// The portable instantiation of the fast kernels: plain arrays of 8 floats that GCC
// vectorises for the baseline ISA.
#include "ops/kernels_impl.hpp"

namespace meshtp::kernels {

const Table& portable_table() {
  static const Table t = make_table<Portable>("portable");
  return t;
}

}  // namespace meshtp::kernels
