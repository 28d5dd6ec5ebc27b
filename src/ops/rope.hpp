// Rotary position embedding (Su et al. 2021, RoFormer §3.4), in Llama's rotate-half
// convention, applied in place to the q or k heads of a QKV projection's output.
//
//   HD  head dim (even), half = HD/2;  θ_i = theta^(−2i/HD), i < half;  theta 10000 (Llama 1,
//   2), 500000 (Llama 3: kRopeThetaLlama3)
//
// A token at absolute position p has each head's pairs (i, i + half) rotated by angle p·θ_i:
//   forward : x'_i        = x_i·cos(pθ_i) − x_{i+half}·sin(pθ_i)
//             x'_{i+half} = x_{i+half}·cos(pθ_i) + x_i·sin(pθ_i)
//   backward: the rotation by −p·θ_i of the gradient (a rotation's transpose is its inverse)
//             dx_i        = dy_i·cos + dy_{i+half}·sin
//             dx_{i+half} = dy_{i+half}·cos − dy_i·sin
// so q_m·k_n after rotation depends on m − n only. Rows are (b, t) of B sequences of T tokens
// (x: (B·T, heads·HD), any strided view: the q or the k columns of packed qkv), token t at
// position pos0 + t — a context-parallel chunk passes its first token's position.
//
// Angles are computed in double, cos and sin stored in fp32, in a table the caller builds
// once per (positions, HD, theta): RopeTable. Simulated build, charged mode: 3 touches per
// element (read x, read the table, write x) and no work.
#pragma once

#include <cstdint>

#include "tensor/tensor.hpp"

namespace meshtp {

inline constexpr double kRopeTheta = 10000.0;
inline constexpr double kRopeThetaLlama3 = 500000.0;
// A model's θ (layout::ModelShape::rope_theta), 0 meaning the default kRopeTheta.
inline double rope_theta_or_default(double theta) { return theta > 0 ? theta : kRopeTheta; }

// cos and sin of p·θ_i for positions p in [pos0, pos0 + len), i < HD/2.
struct RopeTable {
  std::int64_t pos0 = 0, len = 0, head_dim = 0;
  double theta = kRopeTheta;
  Tensor cos_sin;  // (len, HD): row p − pos0 = [cos(pθ_0) … cos(pθ_{half−1}) | sin(…) …]
};
// Throws meshtp::Error naming the values for an odd or non-positive head_dim, len < 1, pos0 < 0
// or theta ≤ 1.
RopeTable rope_table(std::int64_t head_dim, std::int64_t pos0, std::int64_t len,
                     double theta = kRopeTheta);

// x (B·T rows, heads·HD) rotated in place; its T tokens at positions table.pos0 … + T − 1
// (T = rows / batch ≤ table.len).
void rope_forward(MatrixView x, const RopeTable& table, std::int64_t batch, std::int64_t heads);
// dx (the gradient of the rotated x) rotated back in place: the gradient of the unrotated x.
void rope_backward(MatrixView dx, const RopeTable& table, std::int64_t batch, std::int64_t heads);
// The same with the table's values alone (len × HD, as RopeTable::cos_sin): what the backend's
// rope op takes (device/backend.hpp), the table then held in its memory.
void rope_forward(MatrixView x, ConstMatrixView cos_sin, std::int64_t batch, std::int64_t heads);
void rope_backward(MatrixView dx, ConstMatrixView cos_sin, std::int64_t batch, std::int64_t heads);

}  // namespace meshtp
