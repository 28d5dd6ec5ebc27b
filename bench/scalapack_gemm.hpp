// ScaLAPACK's psgemm on the same grid and the same local blocks as parallel::gemm2d: the
// baseline column of `meshtp bench gemm2d`.
//
// ScaLAPACK is column-major; meshtp is row-major with chip (i, j) holding block (i, j). A
// row-major r × c block is, byte for byte, the column-major c × r block of the transpose,
// and block (i, j) of X is block (j, i) of Xᵀ. So the BLACS grid is Nc × Nr in column-major
// order — rank i·Nc + j sits at grid (row j, column i) — and psgemm computes Cᵀ:
//   OS  C = A·B   ⇔  Cᵀ = Bᵀ·Aᵀ          psgemm('N', 'N', n, m, k, Bᵀ, Aᵀ, Cᵀ)
//   LS  C = A·Bᵀ  ⇔  Cᵀ = B·Aᵀ           psgemm('T', 'N', …) on the local Bᵀ
//   RS  C = Aᵀ·B  ⇔  Cᵀ = Bᵀ·A           psgemm('N', 'T', …) on the local Aᵀ
// with one block per process (block sizes = local block sizes), so every rank's C buffer
// afterwards holds exactly the C_ij that gemm2d produces: results compare element-wise.
//
// BLACS uses MPI_COMM_WORLD underneath (the process grid spans the whole world); meshtp's
// own code still never touches MPI.
#pragma once

#include "parallel/gemm2d/gemm2d.hpp"

namespace meshtp::bench {

class ScalapackGemm {
 public:
  // Collective over the world (BLACS grid creation); nr·nc must equal the world size.
  ScalapackGemm(int nr, int nc, const parallel::Gemm2dShape& shape, layout::Dataflow dataflow);
  ~ScalapackGemm();
  ScalapackGemm(const ScalapackGemm&) = delete;
  ScalapackGemm& operator=(const ScalapackGemm&) = delete;

  // c_local = this rank's C_ij; a_local, b_local are the gemm2d local blocks (contiguous).
  void run(const float* a_local, const float* b_local, float* c_local) const;

 private:
  int context_ = -1;
  layout::Dataflow dataflow_;
  parallel::Gemm2dShape shape_;
  int desc_a_[9] = {}, desc_b_[9] = {}, desc_c_[9] = {};
};

}  // namespace meshtp::bench
