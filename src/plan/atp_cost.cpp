#include "plan/atp_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "core/error.hpp"

namespace meshtp::plan {

double atp_comm_time(const ModelSpec& m, int d1, int d2, double b1, double b2) {
  const double h = m.hidden;
  double per_token = 0;  // 7h/(d1·B2) + 2h/(d2·B1), seconds per token per byte-element
  if (d2 > 1) per_token += 7.0 * h / (d1 * b2);
  if (d1 > 1) per_token += 2.0 * h / (d2 * b1);
  return 2.0 * m.layers * static_cast<double>(m.tokens()) * m.element_bytes() * per_token;
}

std::optional<std::string> atp_invalid_reason(const ModelSpec& m, int d1, int d2, int chunks) {
  return layout::atp_block_invalid_reason(m, d1, d2, chunks);
}

double chunk_stages_time(const std::vector<ChunkStage>& stages, int chunks, double dim_sharing) {
  MESHTP_CHECK(chunks >= 1, "chunks={} must be at least 1", chunks);
  double t = 0;                  // the device's clock
  double free[2] = {0, 0};       // when each mesh dim's engine has done what it was given
  std::vector<double> done(static_cast<std::size_t>(chunks), 0.0);  // previous stage's chunks
  for (const ChunkStage& st : stages) {
    MESHTP_CHECK(st.mesh_dim == 0 || st.mesh_dim == 1, "mesh dim {} of a 2-D mesh",
                 st.mesh_dim);
    for (double& d : done) {
      t = std::max(t, d) + st.compute_s;
      if (st.comm_s > 0) {
        double& engine = free[st.mesh_dim];
        if (dim_sharing >= 1) {
          // The dims take turns on one resource: one queue for both, in the order started.
          engine = std::max({t, free[0], free[1]}) + st.comm_s;
          free[1 - st.mesh_dim] = engine;
        } else {
          const double start = std::max(t, engine);
          const double other_busy = std::max(0.0, free[1 - st.mesh_dim] - start);
          engine = start + st.comm_s + dim_sharing * std::min(st.comm_s, other_busy);
        }
        d = engine;
        if (st.blocking) t = d;
      } else {
        d = t;
      }
    }
    t += st.after_s;
  }
  return std::max({t, free[0], free[1]});
}

namespace {

// The header's stages of one pass, per chunk, from the priced ops (GeMMs and collectives)
// and the elementwise ones; `recompute_s` (whole batch) joins the attention core's backward.
std::vector<ChunkStage> block_stages(const AtpEstimate& est, const MeshLinks& links,
                                     const ElementwiseEstimate& elementwise, bool backward,
                                     double recompute_s) {
  const double c = est.chunks;
  auto op = [&](const char* name) -> const AtpOp& {
    for (const AtpOp& a : est.ops) {
      if (a.name == name && a.backward == backward) return a;
    }
    fail("the ATP estimate has no {} op '{}'", backward ? "backward" : "forward", name);
  };
  // A linear's GeMM per chunk: the forward's, or in backward the dX product (dW: dw_s).
  auto gemm = [&](const char* name) { return op(name).chunk_s; };
  auto ew = [&](std::initializer_list<const char*> names) {
    double t = 0;
    for (const ElementwiseOp& o : elementwise.ops) {
      for (const char* name : names) {
        if (o.backward == backward && o.name == name) t += o.seconds;
      }
    }
    return t;
  };
  // One chunk's call of `name`'s collective of this kind (none: no stage on that dim).
  auto call = [&](const char* name, layout::CollectiveKind kind, int dim, bool blocking,
                  double compute_s, double after_s) {
    ChunkStage st{.compute_s = compute_s, .mesh_dim = dim, .blocking = blocking,
                  .after_s = after_s};
    for (const layout::AtpCall& x : op(name).calls) {
      if (x.kind == kind && x.mesh_dim == dim) {
        st.comm_s = collective_time(links.dims[static_cast<std::size_t>(dim)], kind,
                                    x.message_bytes);
      }
    }
    return st;
  };
  using K = layout::CollectiveKind;
  const double chunk_ew = 1 / c;
  if (!backward) {
    return {
        call("ln1", K::kAllReduce, 1, true, ew({"ln1"}) * chunk_ew, 0),
        call("qkv", K::kReduceScatter, 1, false, gemm("qkv"), 0),
        call("proj", K::kAllGather, 1, false,
             ew({"qkv bias", "softmax", "attention io", "attention dropout"}) * chunk_ew +
                 gemm("attention"),
             0),
        call("proj", K::kAllReduce, 0, false, gemm("proj"), 0),
        call("ln2", K::kAllReduce, 1, true,
             ew({"proj bias", "proj dropout mask", "residual1", "ln2"}) * chunk_ew, 0),
        call("mlp1", K::kAllReduce, 1, false, gemm("mlp1"), 0),
        call("mlp2", K::kAllReduce, 0, false, ew({"mlp1 bias", "gelu"}) * chunk_ew + gemm("mlp2"),
             0),
        ChunkStage{.compute_s = ew({"mlp2 bias", "mlp2 dropout mask", "residual2"}) * chunk_ew},
    };
  }
  // dW GeMM (the other product of the linear's backward) and its bias gradient, whole batch.
  auto dw = [&](const char* name, const char* bias) { return op(name).dw_s + ew({bias}); };
  return {
      call("mlp2", K::kAllReduce, 1, false, gemm("mlp2"), dw("mlp2", "mlp2 bias")),
      call("mlp1", K::kAllReduce, 0, false, ew({"gelu"}) * chunk_ew + gemm("mlp1"),
           dw("mlp1", "mlp1 bias")),
      call("ln2", K::kAllReduce, 1, true, ew({"residual2", "mlp2 dropout mask", "ln2"}) * chunk_ew,
           0),
      call("proj", K::kReduceScatter, 1, false, gemm("proj"), dw("proj", "proj bias")),
      call("qkv", K::kAllGather, 1, false,
           (op("attention").compute_s + ew({"softmax", "attention io", "attention dropout"}) +
            recompute_s) *
               chunk_ew,
           0),
      call("qkv", K::kAllReduce, 0, false, gemm("qkv"), dw("qkv", "qkv bias")),
      call("ln1", K::kAllReduce, 1, true, ew({"residual1", "proj dropout mask", "ln1"}) * chunk_ew,
           0),
  };
}

}  // namespace

AtpEstimate atp_estimate(const ModelSpec& m, const MeshLinks& links, int chunks,
                         const GemmModel& gemm, const ElementwiseEstimate& elementwise) {
  const int d1 = links.mesh[0], d2 = links.mesh[1];
  if (auto reason = atp_invalid_reason(m, d1, d2, chunks)) fail("ATP on {}x{}: {}", d1, d2,
                                                                *reason);
  MESHTP_CHECK(gemm.flops_per_s() > 0, "GeMM rate {} FLOP/s must be positive", gemm.flops_per_s());
  const double n = static_cast<double>(d1) * d2;
  const double M = static_cast<double>(m.tokens());
  const double h = m.hidden, b = m.batch, s = m.seq, e = m.element_bytes();

  AtpEstimate est;
  est.chunks = chunks;
  const int eb = static_cast<int>(e);
  const double c = chunks, mc = M / c;  // a chunk's tokens
  // A linear in→out on this rank: the first of a pair (qkv, mlp1) holds in/d2 × out/d1, the
  // second (proj, mlp2) in/d1 × out/d2 (ATP §3.2's row- then column-first); per chunk its
  // forward and dX products, and one dW product over the whole batch.
  const auto linear = [&](AtpOp& a, double in, double out, bool first) {
    const double k = in / (first ? d2 : d1), n_out = out / (first ? d1 : d2);
    if (!a.backward) {
      a.chunk_s = gemm.seconds(mc, n_out, k, eb);
    } else {
      a.chunk_s = gemm.seconds(mc, k, n_out, eb);
      a.dw_s = gemm.seconds(k, n_out, M, eb);
    }
  };
  // The attention core, heads over all n ranks: per chunk b/c sequences of a/n heads
  // (core/gemm_model.hpp attention_seconds: the products the runtime's op runs; fused,
  // flash_attention_seconds: the products over the tiles it visits, its bytes elementwise).
  const double hd = h / m.heads, pairs = b / c * m.heads / n;
  const bool fused = m.attention == Attention::kFused;
  const auto attention = [&](AtpOp& a) {
    a.chunk_s = fused ? flash_attention_seconds(gemm, s, hd, pairs, a.backward)
                      : attention_seconds(gemm, s, hd, pairs, eb, a.backward);
  };
  // (name, forward FLOPs of the op over all ranks); the LayerNorms' are elementwise.hpp's.
  // The linears' widths (layout/model_shape.hpp: 3h and 4h for GPT).
  const double qkv = static_cast<double>(m.qkv_width()), mlp1 = static_cast<double>(m.mlp1_width()),
               ffn = static_cast<double>(m.ffn());
  const std::pair<const char*, double> shapes[] = {
      {"ln1", 0},
      {"qkv", 2 * M * h * qkv},
      {"attention", 4 * b * s * s * h},
      {"proj", 2 * M * h * h},
      {"ln2", 0},
      {"mlp1", 2 * M * h * mlp1},
      {"mlp2", 2 * M * ffn * h},
  };
  const std::vector<layout::AtpCall> traffic = layout::atp_block_traffic(
      {.d1 = d1, .d2 = d2, .tokens = m.tokens(), .hidden = m.hidden, .chunks = chunks,
       .element_bytes = static_cast<int>(e)});
  double comm_dim[2][2] = {{0, 0}, {0, 0}};  // [backward][mesh dim]: the pass's calls there
  for (const bool backward : {false, true}) {
    for (const auto& [name, flops] : shapes) {
      AtpOp a;
      a.name = name;
      a.backward = backward;
      a.flops_per_rank = flops / n * (backward ? 2 : 1);
      const std::string_view op = name;
      if (op == "qkv") linear(a, h, qkv, true);
      if (op == "proj") linear(a, h, h, false);
      if (op == "mlp1") linear(a, h, mlp1, true);
      if (op == "mlp2") linear(a, ffn, h, false);
      if (op == "attention") attention(a);
      a.compute_s = c * a.chunk_s + a.dw_s;
      for (const layout::AtpCall& call : traffic) {
        if (call.op != a.name || call.backward != backward) continue;
        a.calls.push_back(call);
        a.sent_bytes += call.bytes_per_rank();
        const double t = call.launches * collective_time(links.dims[static_cast<std::size_t>(
                                                             call.mesh_dim)],
                                                         call.kind, call.message_bytes);
        a.comm_s += t;
        comm_dim[backward ? 1 : 0][call.mesh_dim] += t;
      }
      (backward ? est.compute_bwd_s : est.compute_fwd_s) += a.compute_s;
      (backward ? est.comm_bwd_s : est.comm_fwd_s) += a.comm_s;
      est.ops.push_back(std::move(a));
    }
  }
  const double comm_fwd = est.comm_fwd_s;  // every chunk's calls, each with its latency
  double attention_forward_s = 0;  // what selective recomputation runs again, whole batch
  for (const AtpOp& a : est.ops) {
    if (a.name == "attention" && !a.backward) attention_forward_s = a.compute_s;
  }  // every chunk's calls, each with its latency
  est.elementwise_fwd_s = elementwise.forward_s;
  est.elementwise_bwd_s = elementwise.backward_s;
  est.compute_fwd_s += elementwise.forward_s;
  est.compute_bwd_s += elementwise.backward_s;
  const double compute_fwd = est.compute_fwd_s;
  // The runtime's schedule (the header's stages); selective recomputation runs the
  // attention core's forward again inside its backward loop (model/block.cpp), where
  // communication may hide it, so it is priced as the difference it makes there.
  const double sharing = links.dim_sharing;
  est.forward_s =
      chunk_stages_time(block_stages(est, links, elementwise, false, 0), chunks, sharing);
  est.backward_s =
      chunk_stages_time(block_stages(est, links, elementwise, true, 0), chunks, sharing);

  double recompute_compute = 0, recompute_comm = 0;
  switch (m.recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective:
      // Fused attention re-runs nothing (model/block.cpp: its backward recomputes the
      // probabilities tile by tile whatever the recomputation).
      recompute_compute = fused ? 0 : attention_forward_s + elementwise.softmax_forward_s;
      est.recompute_s =
          chunk_stages_time(block_stages(est, links, elementwise, true, recompute_compute), chunks,
                            sharing) -
          est.backward_s;
      break;
    case Recompute::kFull:
      recompute_compute = compute_fwd;
      recompute_comm = comm_fwd;
      est.recompute_s = est.forward_s;
      break;
  }
  est.layer_s = est.forward_s + est.backward_s + est.recompute_s;
  const double layers = m.layers;
  est.t_step_s = layers * est.layer_s;
  est.t_comm_s = layers * (comm_fwd + est.comm_bwd_s + recompute_comm);
  est.t_compute_s = layers * (compute_fwd + est.compute_bwd_s + recompute_compute);
  return est;
}

}  // namespace meshtp::plan
