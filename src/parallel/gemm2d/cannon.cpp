// Cannon's algorithm (Cannon '69; MeshSlice §2.3.2) on a square q × q mesh: skew the moving
// blocks once, then q steps of multiply-and-shift with send/recv, the next step's blocks in
// flight (isend/irecv, tested between row bands) while the current product runs.
// Rectangular meshes are rejected by validate(); the skew is the extra traffic the paper
// charges against it.
//
// OS  C_ij = Σ_l A_il·B_lj. Skew: row i shifts A left by i, column j shifts B up by j, so
//     chip (i,j) holds A_i,l and B_l,j with l = (i+j) mod q. Step t: C_ij += A·B; then A
//     moves one chip left, B one chip up (l advances by 1). q steps, q−1 shifts.
// LS  C_ij = Σ_l A_il·B_jlᵀ, A stationary on (i,l). Chip (i,l) contributes to every C_ij of
//     its row, so the running sums travel instead of A: step t, chip (i,l) holds B_jl with
//     j = (i+l+t) mod q (skew: column l shifts B up by l), computes P = A_il·B_jlᵀ, adds
//     the running sum for C_ij arriving from (i, l+1) and passes it to (i, l−1); B moves up.
//     After q steps the sum for C_ij sits on (i, (j−i+1) mod q): one more send along the
//     row delivers it (the un-skew).
// RS  C_ij = Σ_l A_li ᵀ·B_lj, B stationary: the mirror of LS with rows and columns swapped
//     (A moves left along the row, running sums move up the column).
// LS and RS share one routine: `move` is the comm the travelling operand uses, `sum` the one
// the running sums use, u / v this rank's index in them.
//
// Worked example, OS on 2×2:
//   before        (0,0): A00 B00   (0,1): A01 B01   (1,0): A10 B10   (1,1): A11 B11
//   skew          (0,0): A00 B00   (0,1): A01 B11   (1,0): A11 B10   (1,1): A10 B01
//   t = 0         C00 = A00·B00, C01 = A01·B11, C10 = A11·B10, C11 = A10·B01; shift A left, B up
//   t = 1         (0,0): A01 B10 → C00 += A01·B10; (0,1): A00 B01; (1,0): A10 B00; (1,1): A11 B11
//   after         chip (i,j) holds C_ij (and rotated copies of A, B, discarded).
//
// Cost per rank (worst rank; |X| = local block bytes):
//   OS  skew |A|+|B|, then (q−1)·(|A|+|B|): row q·|A_ij|, column q·|B_ij|; calls 2q (+2 skew)
//   LS  column: skew |B| + (q−1)·|B|; row: (q−1)·|C| running sums + |C| un-skew
//   RS  row: skew |A| + (q−1)·|A|;   column: (q−1)·|C| + |C|
//   Sync steps: q+1 send/recv rounds. Versus Collective 2D, one extra block per direction.
#include "parallel/gemm2d/gemm2d_impl.hpp"

namespace meshtp::parallel::detail {
namespace {

using comm::Request;

int mod(int x, int q) { return ((x % q) + q) % q; }

// Starts rotating `block` (packed) by `shift` positions towards lower indices of `group`:
// this rank (index `me`) ends with the block of index me+shift. Returns a view of the result,
// `block` itself (shift ≡ 0, nothing sent) or `buf`, valid once `out` and `in` complete.
View start_rotation(const comm::Communicator& group, int me, int shift, const View& block,
                    const View& buf, Request& out, Request& in) {
  const int q = group.size();
  if (mod(shift, q) == 0) return block;
  in = group.irecv(msg(buf), mod(me + shift, q), 0);
  out = group.isend(cmsg(block), mod(me - shift, q), 0);
  return buf;
}

void cannon_os(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
               Gemm2dWorkspace& ws) {
  const int q = g.nr;
  const View a_buf[2] = {ws.get(0, a.rows, a.cols, a.type), ws.get(1, a.rows, a.cols, a.type)};
  const View b_buf[2] = {ws.get(2, b.rows, b.cols, b.type), ws.get(3, b.rows, b.cols, b.type)};
  // Skew into buffer 1 (or keep the input): step t reads buffer t mod 2 from t = 1 on. A's
  // rotation (along the row) and B's (along the column) run at once: one after the other, a
  // column's transfers waited for the slowest row's (a 4x4 torus: 14.1 ms against 12.1).
  Request skew[4];
  View a_held = start_rotation(*g.row, g.j, g.i, a, a_buf[1], skew[0], skew[1]);
  View b_held = start_rotation(*g.col, g.i, g.j, b, b_buf[1], skew[2], skew[3]);
  comm::wait_all(skew);
  const int left = mod(g.j - 1, q), right = mod(g.j + 1, q);
  const int up = mod(g.i - 1, q), down = mod(g.i + 1, q);
  for (int t = 0; t < q; ++t) {
    Request a_out, a_in, b_out, b_in;
    const int next = t % 2;  // never the buffer a_held / b_held live in
    if (t + 1 < q) {
      a_in = g.row->irecv(msg(a_buf[next]), right, 0);
      b_in = g.col->irecv(msg(b_buf[next]), down, 0);
      a_out = g.row->isend(cmsg(a_held), left, 0);
      b_out = g.col->isend(cmsg(b_held), up, 0);
    }
    gemm_poking(a_held, Trans::kNo, b_held, Trans::kNo, c, t == 0 ? 0.0f : 1.0f,
                {&a_out, &a_in, &b_out, &b_in}, o.progress_splits, ws);
    a_out.wait();
    a_in.wait();
    b_out.wait();
    b_in.wait();
    a_held = a_buf[next];
    b_held = b_buf[next];
  }
}

// The LS / RS routine. `moving` travels along `move` (index v there), the running sums along
// `sum` (index u there); product(held, out) computes out = this rank's partial for the target.
template <typename Product>
void cannon_stationary(const comm::Communicator& move, int v, const comm::Communicator& sum, int u,
                       const View& moving, const View& c, Gemm2dWorkspace& ws, Product product) {
  const int q = move.size();
  const View m_buf[2] = {ws.get(0, moving.rows, moving.cols, moving.type),
                         ws.get(1, moving.rows, moving.cols, moving.type)};
  const View sums[2] = {ws.get(2, c.rows, c.cols, c.type), ws.get(3, c.rows, c.cols, c.type)};
  const View incoming = ws.get(4, c.rows, c.cols, c.type);
  // Skew: the travelling block of index v+u.
  Request skew[2];
  View held = start_rotation(move, v, u, moving, m_buf[1], skew[0], skew[1]);
  comm::wait_all(skew);
  const int m_prev = mod(v - 1, q), m_next = mod(v + 1, q);
  const int s_prev = mod(u - 1, q), s_next = mod(u + 1, q);
  Request sum_out[2], sum_in;
  for (int t = 0; t < q; ++t) {
    const int x = t % 2;
    Request m_out, m_in;
    if (t + 1 < q) {
      m_in = move.irecv(msg(m_buf[x]), m_next, 0);
      m_out = move.isend(cmsg(held), m_prev, 0);
    }
    sum_out[x].wait();  // step t−2's send read sums[x]
    product(held, sums[x], InFlight{&m_out, &m_in, &sum_in, &sum_out[1 - x]});
    if (t > 0) {
      sum_in.wait();
      ws.backend().add(sums[x], incoming);
    }
    if (t + 1 < q) {
      sum_out[x] = sum.isend(cmsg(sums[x]), s_prev, 0);
      sum_in = sum.irecv(msg(incoming), s_next, 0);
    }
    m_out.wait();
    m_in.wait();
    held = m_buf[x];
  }
  sum_out[0].wait();
  sum_out[1].wait();
  // Un-skew: the finished sum here belongs to index u+v−1; ours is on u−v+1.
  const View& done = sums[(q - 1) % 2];
  const int to = mod(u + v - 1, q), from = mod(u - v + 1, q);
  if (to == u) {
    ws.backend().copy(c, done);
  } else {
    sum.sendrecv(cmsg(done), to, msg(c), from, 0);
  }
}

void cannon_ls(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
               Gemm2dWorkspace& ws) {
  // B travels up the column (index i), running sums left along the row (index j).
  cannon_stationary(*g.col, g.i, *g.row, g.j, b, c, ws,
                    [&](const View& held, const View& out, const InFlight& f) {
                      gemm_poking(a, Trans::kNo, held, Trans::kYes, out, 0.0f, f, o.progress_splits,
                                  ws);
                    });
}

void cannon_rs(const Grid& g, const View& a, const View& b, const View& c, const Gemm2dOptions& o,
               Gemm2dWorkspace& ws) {
  // A travels left along the row (index j), running sums up the column (index i).
  cannon_stationary(*g.row, g.j, *g.col, g.i, a, c, ws,
                    [&](const View& held, const View& out, const InFlight& f) {
                      gemm_poking(held, Trans::kYes, b, Trans::kNo, out, 0.0f, f, o.progress_splits,
                                  ws);
                    });
}

}  // namespace

const Gemm2dDataflows kCannon = {cannon_os, cannon_ls, cannon_rs};

}  // namespace meshtp::parallel::detail
