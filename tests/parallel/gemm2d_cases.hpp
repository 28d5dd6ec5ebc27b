// What the 2D GeMM tests share: the serial product a case is held to, and a case's name for
// failure messages.
#pragma once

#include <sstream>
#include <string>

#include "mesh/device_mesh.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::parallel {

// C = op(A)·op(B) as the dataflow reads A and B (rs: Aᵀ·B, ls: A·Bᵀ, os: A·B), serially.
inline Tensor serial_product(Dataflow dataflow, const Tensor& a, const Tensor& b,
                             const Gemm2dShape& s) {
  Tensor c({s.m, s.n});
  const Trans ta = dataflow == Dataflow::kRS ? Trans::kYes : Trans::kNo;
  const Trans tb = dataflow == Dataflow::kLS ? Trans::kYes : Trans::kNo;
  gemm_reference(a.matrix(), ta, b.matrix(), tb, c.matrix());
  return c;
}

inline std::string describe(const mesh::DeviceMesh& mesh, const Gemm2dShape& s,
                            const Gemm2dOptions& o) {
  std::ostringstream os;
  os << "rank " << mesh.rank() << ", " << mesh.to_string() << ", m=" << s.m << " n=" << s.n
     << " k=" << s.k << ", " << o;
  return os.str();
}

}  // namespace meshtp::parallel
