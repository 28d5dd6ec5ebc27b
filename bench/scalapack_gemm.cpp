#include "bench/scalapack_gemm.hpp"

#include "core/error.hpp"

// The C BLACS interface and the Fortran PBLAS / ScaLAPACK tools (Debian ships no header).
extern "C" {
void Cblacs_pinfo(int* mypnum, int* nprocs);
void Cblacs_get(int context, int request, int* value);
void Cblacs_gridinit(int* context, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int context);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* ictxt, const int* lld, int* info);
void psgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
             const float* alpha, const float* a, const int* ia, const int* ja, const int* desca,
             const float* b, const int* ib, const int* jb, const int* descb, const float* beta,
             float* c, const int* ic, const int* jc, const int* descc);
}

namespace meshtp::bench {
namespace {

int to_int(std::int64_t v, const char* what) {
  MESHTP_CHECK(v > 0 && v < (std::int64_t{1} << 31), "ScaLAPACK: {}={} does not fit an int", what,
               v);
  return static_cast<int>(v);
}

// Descriptor of a column-major rows × cols matrix cut into one block per process of an
// Nc × Nr grid (block rows × cols = rows/Nc × cols/Nr).
void describe(int* desc, std::int64_t rows, std::int64_t cols, int grid_rows, int grid_cols,
              int context) {
  const int m = to_int(rows, "rows"), n = to_int(cols, "cols");
  const int mb = m / grid_rows, nb = n / grid_cols, zero = 0;
  int info = 0;
  descinit_(desc, &m, &n, &mb, &nb, &zero, &zero, &context, &mb, &info);
  MESHTP_CHECK(info == 0, "ScaLAPACK descinit failed (info={}) for {}x{} in {}x{} blocks", info, m,
               n, mb, nb);
}

}  // namespace

ScalapackGemm::ScalapackGemm(int nr, int nc, const parallel::Gemm2dShape& shape,
                             layout::Dataflow dataflow)
    : dataflow_(dataflow), shape_(shape) {
  int me = 0, procs = 0;
  Cblacs_pinfo(&me, &procs);
  MESHTP_CHECK(procs == nr * nc, "ScaLAPACK grid {}x{} needs {} processes, the world has {}", nr,
               nc, nr * nc, procs);
  Cblacs_get(-1, 0, &context_);
  Cblacs_gridinit(&context_, "C", nc, nr);  // column-major: rank i·Nc + j at (j, i)
  int grid_rows = 0, grid_cols = 0, my_row = 0, my_col = 0;
  Cblacs_gridinfo(context_, &grid_rows, &grid_cols, &my_row, &my_col);
  MESHTP_CHECK(my_row == me % nc && my_col == me / nc,
               "BLACS placed rank {} at ({}, {}), expected ({}, {})", me, my_row, my_col, me % nc,
               me / nc);
  const std::int64_t m = shape.m, n = shape.n, k = shape.k;
  // Column-major views of the local buffers (see the header): X row-major ↔ Xᵀ column-major.
  describe(desc_c_, n, m, nc, nr, context_);  // Cᵀ: n × m
  switch (dataflow) {
    case layout::Dataflow::kOS:
      describe(desc_a_, k, m, nc, nr, context_);  // Aᵀ: k × m
      describe(desc_b_, n, k, nc, nr, context_);  // Bᵀ: n × k
      break;
    case layout::Dataflow::kLS:
      describe(desc_a_, k, m, nc, nr, context_);  // Aᵀ: k × m
      describe(desc_b_, k, n, nc, nr, context_);  // Bᵀ: k × n (B is n × k)
      break;
    case layout::Dataflow::kRS:
      describe(desc_a_, m, k, nc, nr, context_);  // Aᵀ: m × k (A is k × m)
      describe(desc_b_, n, k, nc, nr, context_);  // Bᵀ: n × k
      break;
  }
}

ScalapackGemm::~ScalapackGemm() {
  if (context_ >= 0) Cblacs_gridexit(context_);
}

void ScalapackGemm::run(const float* a_local, const float* b_local, float* c_local) const {
  const int m = static_cast<int>(shape_.m), n = static_cast<int>(shape_.n),
            k = static_cast<int>(shape_.k);
  const int one = 1;
  const float alpha = 1.0f, beta = 0.0f;
  // Cᵀ = op(first)·op(second) with first = the local Bᵀ buffer, second = the local Aᵀ buffer.
  const char* trans_b = dataflow_ == layout::Dataflow::kLS ? "T" : "N";
  const char* trans_a = dataflow_ == layout::Dataflow::kRS ? "T" : "N";
  psgemm_(trans_b, trans_a, &n, &m, &k, &alpha, b_local, &one, &one, desc_b_, a_local, &one, &one,
          desc_a_, &beta, c_local, &one, &one, desc_c_);
}

}  // namespace meshtp::bench
