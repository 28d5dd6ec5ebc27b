// A stand-in for a device the host cannot read, for testing code written on the seam without a
// GPU: its memory holds the bitwise complement (~b) of every byte of its values. Code that
// reads or writes such memory other than through the backend (InvertedBackend) or a
// host-staged transport (InvertedMemory) sees complemented floats (tiny or huge values, or
// NaN), so its results are wrong and the test comparing them with the serial product fails.
//
//   InvertedMemory   (inverted_memory.hpp) what a host-staged transport copies through,
//                    counting its copies and staging allocations
//   InvertedBackend  device/backend.hpp's view primitives (GeMM, copies, add, zero, events)
//                    and view ops (norms, vocabulary shard, activations, attention core,
//                    RoPE): each fetches its views into host memory, runs the CPU backend, and
//                    stores the results back (HostCopy, below). Whole-array layer ops are not
//                    the stand-in's: they throw.
#pragma once

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "device/backend.hpp"
#include "inverted_memory.hpp"
#include "ops/cpu_backend.hpp"

namespace meshtp::testing {

class InvertedBackend final : public device::Backend {
 public:
  std::string name() const override { return "inverted (test stand-in)"; }

  std::shared_ptr<InvertedMemory> memory = std::make_shared<InvertedMemory>();
  int gemm_calls = 0;  // view GeMMs, banded or not

  device::Array alloc(std::int64_t count, Element type) override {
    MESHTP_CHECK(type == Element::kF32 || type == Element::kF64 || type == Element::kBF16,
                 "the inverted stand-in holds fp32, fp64 sums and bf16 operands, not {}",
                 to_string(type));
    const std::size_t size =
        static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * element_size(type);
    auto* bytes = new std::vector<unsigned char>(size, 0xFF);
    InvertedMemory::track(bytes->data(), size);
    std::shared_ptr<void> data(bytes->data(), [bytes](void*) {
      InvertedMemory::untrack(bytes->data());
      delete bytes;
    });
    return device::Array(std::move(data), type, count);
  }
  void zero(device::Array& a) override { zero(a.view(1, a.count())); }
  void upload(device::Array& a, std::span<const float> values) override {
    MESHTP_CHECK(static_cast<std::int64_t>(values.size()) == a.count(), "upload: {} values for {}",
                 values.size(), a.count());
    if (a.type() == Element::kBF16) {  // rounded on the host, as the CPU backend rounds
      std::vector<std::uint16_t> bits(values.size());
      floats_to_bf16(values.data(), bits.data(), a.count());
      memory->to_device(a.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
      return;
    }
    memory->to_device(a.data(), values.data(), values.size() * sizeof(float));
  }
  std::vector<float> download(const device::Array& a) override {
    std::vector<float> out(static_cast<std::size_t>(a.count()));
    if (a.type() == Element::kBF16) {
      std::vector<std::uint16_t> bits(out.size());
      memory->to_host(bits.data(), a.data(), bits.size() * sizeof(std::uint16_t));
      bf16_to_floats(bits.data(), out.data(), a.count());
      return out;
    }
    memory->to_host(out.data(), a.data(), out.size() * sizeof(float));
    return out;
  }
  void copy(device::Array& dst, const device::Array& src) override {
    copy(dst.view(1, dst.count()), src.view(1, src.count()));
  }
  void synchronize() override {}

  std::shared_ptr<DeviceMemory> device_memory() override { return memory; }
  void gemm(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b, float alpha,
            float beta, device::Epilogue epilogue, const View& bias) override {
    ++gemm_calls;
    HostCopy hc = fetch(c);
    cpu_backend().gemm(hc.host, fetch(a).host, trans_a, fetch(b).host, trans_b, alpha, beta,
                       epilogue, fetch(bias).host);
    store({&hc});
  }
  void copy(const View& dst, const View& src) override {
    MESHTP_CHECK(dst.rows == src.rows && dst.cols == src.cols, "copy: {} into {}", describe(src),
                 describe(dst));
    if (dst.type != src.type) {  // converting: the CPU backend's conversion on host copies
      HostCopy hd = fetch(dst);
      cpu_backend().copy(hd.host, fetch(src).host);
      store({&hd});
      return;
    }
    HostCopy h = fetch(src);
    h.device = dst;  // the source's bytes, stored where dst is
    store({&h});
  }
  void add(const View& dst, const View& src) override {
    HostCopy hd = fetch(dst);
    cpu_backend().add(hd.host, fetch(src).host);
    store({&hd});
  }
  void zero(const View& dst) override {
    HostCopy hd = fetch(dst);
    cpu_backend().zero(hd.host);
    store({&hd});
  }
  void add_bias(const View& y, const View& bias) override {
    HostCopy hy = fetch(y);
    cpu_backend().add_bias(hy.host, fetch(bias).host);
    store({&hy});
  }
  void bias_grad(const View& db, const View& dy) override {
    HostCopy hdb = fetch(db);
    cpu_backend().bias_grad(hdb.host, fetch(dy).host);
    store({&hdb});
  }
  void copy_blocks(std::span<const View> dst, std::span<const View> src) override {
    MESHTP_CHECK(dst.size() == src.size(), "copy_blocks: {} for {}", dst.size(), src.size());
    for (std::size_t i = 0; i < dst.size(); ++i) copy(dst[i], src[i]);
  }
  // As the GPU does: one GeMM, then the pokes once (a queueing device).
  void gemm_in_bands(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b,
                     float beta, int, const std::function<void()>& between) override {
    gemm(c, a, trans_a, b, trans_b, 1.0f, beta, device::Epilogue::kNone, {});
    between();
  }
  std::shared_ptr<device::Event> record() override { return cpu_backend().record(); }
  void wait(device::Event& event) override { cpu_backend().wait(event); }
  void* native_stream() override { return nullptr; }

  void residual(const View& sum, const View& a, const View& b) override {
    const HostCopy ha = fetch(a), hb = fetch(b);
    HostCopy hs = fetch(sum);
    cpu_backend().residual(hs.host, ha.host, hb.host);
    store({&hs});
  }
  // The norms: each view fetched to the host, the CPU backend's op, the outputs stored back.
  void norm_forward(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                    const View& x, const View& w, const View& b) override {
    HostCopy hy = fetch(y), hm = fetch(mean), hr = fetch(rstd);
    cpu_backend().norm_forward(norm, hy.host, hm.host, hr.host, fetch(x).host, fetch(w).host,
                               fetch(b).host);
    store({&hy, &hm, &hr});
  }
  void residual_norm_forward(layout::Norm norm, const View& sum, const View& y, const View& mean,
                             const View& rstd, const View& a, const View& b_in, const View& w,
                             const View& b) override {
    // sum may alias a or b_in: fetch them first (the host op reads its own copies).
    const HostCopy ha = fetch(a), hbin = fetch(b_in);
    HostCopy hs = fetch(sum), hy = fetch(y), hm = fetch(mean), hr = fetch(rstd);
    cpu_backend().residual_norm_forward(norm, hs.host, hy.host, hm.host, hr.host, ha.host,
                                        hbin.host, fetch(w).host, fetch(b).host);
    store({&hs, &hy, &hm, &hr});
  }
  void norm_backward(layout::Norm norm, const View& dx, const View& dw, const View& db,
                     const View& dy, const View& x, const View& w, const View& mean,
                     const View& rstd) override {
    HostCopy hdx = fetch(dx), hdw = fetch(dw), hdb = fetch(db);
    cpu_backend().norm_backward(norm, hdx.host, hdw.host, hdb.host, fetch(dy).host, fetch(x).host,
                                fetch(w).host, fetch(mean).host, fetch(rstd).host);
    store({&hdx, &hdw, &hdb});
  }
  void norm_forward_sums(layout::Norm norm, const View& sums, const View& x) override {
    HostCopy hs = fetch(sums);
    cpu_backend().norm_forward_sums(norm, hs.host, fetch(x).host);
    store({&hs});
  }
  void norm_forward_apply(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                          const View& x, const View& w, const View& b, const View& sums,
                          std::int64_t c_global) override {
    HostCopy hy = fetch(y), hm = fetch(mean), hr = fetch(rstd);
    cpu_backend().norm_forward_apply(norm, hy.host, hm.host, hr.host, fetch(x).host, fetch(w).host,
                                     fetch(b).host, fetch(sums).host, c_global);
    store({&hy, &hm, &hr});
  }
  void norm_backward_sums(layout::Norm norm, const View& sums, const View& dw, const View& db,
                          const View& dy, const View& x, const View& w, const View& mean,
                          const View& rstd) override {
    HostCopy hs = fetch(sums), hdw = fetch(dw), hdb = fetch(db);
    cpu_backend().norm_backward_sums(norm, hs.host, hdw.host, hdb.host, fetch(dy).host,
                                     fetch(x).host, fetch(w).host, fetch(mean).host,
                                     fetch(rstd).host);
    store({&hs, &hdw, &hdb});
  }
  void norm_backward_apply(layout::Norm norm, const View& dx, const View& dy, const View& x,
                           const View& w, const View& mean, const View& rstd, const View& sums,
                           std::int64_t c_global) override {
    HostCopy hdx = fetch(dx);
    cpu_backend().norm_backward_apply(norm, hdx.host, fetch(dy).host, fetch(x).host, fetch(w).host,
                                      fetch(mean).host, fetch(rstd).host, fetch(sums).host,
                                      c_global);
    store({&hdx});
  }

  // The vocabulary shard's ops, the same way.
  void embedding_shard_forward(const View& out, std::span<const std::int32_t> tokens,
                               const View& wte, std::int64_t begin) override {
    HostCopy ho = fetch(out);
    cpu_backend().embedding_shard_forward(ho.host, tokens, fetch(wte).host, begin);
    store({&ho});
  }
  void embedding_shard_backward(const View& dwte, const View& dout,
                                std::span<const std::int32_t> tokens, std::int64_t begin) override {
    HostCopy hd = fetch(dwte);
    cpu_backend().embedding_shard_backward(hd.host, fetch(dout).host, tokens, begin);
    store({&hd});
  }
  void cross_entropy_shard_max(const View& logits, const View& row_max, std::int64_t begin,
                               std::int64_t vocab_real) override {
    HostCopy hl = fetch(logits), hm = fetch(row_max);
    cpu_backend().cross_entropy_shard_max(hl.host, hm.host, begin, vocab_real);
    store({&hl, &hm});
  }
  void cross_entropy_shard_sums(const View& sums, const View& logits, const View& row_max,
                                std::span<const std::int32_t> targets, std::int64_t begin,
                                std::int64_t vocab_real) override {
    HostCopy hs = fetch(sums);
    cpu_backend().cross_entropy_shard_sums(hs.host, fetch(logits).host, fetch(row_max).host,
                                           targets, begin, vocab_real);
    store({&hs});
  }
  double cross_entropy_shard_loss(const View& lse, const View& row_max, const View& sums) override {
    HostCopy hl = fetch(lse);
    const double loss =
        cpu_backend().cross_entropy_shard_loss(hl.host, fetch(row_max).host, fetch(sums).host);
    store({&hl});
    return loss;
  }
  void cross_entropy_shard_backward(const View& logits, const View& lse,
                                    std::span<const std::int32_t> targets, std::int64_t begin,
                                    float scale) override {
    HostCopy hl = fetch(logits);
    cpu_backend().cross_entropy_shard_backward(hl.host, fetch(lse).host, targets, begin, scale);
    store({&hl});
  }

  // The block's activations and attention core, the same way.
  void gelu_forward(const View& y, const View& x) override {
    HostCopy hy = fetch(y);
    cpu_backend().gelu_forward(hy.host, fetch(x).host);
    store({&hy});
  }
  void residual_grad(const View& d, const View& dy) override { copy(d, dy); }
  void bias_gelu(const View& y, const View& pre, const View& bias) override {
    HostCopy hy = fetch(y), hp = fetch(pre);
    if (y.data == pre.data) {
      cpu_backend().bias_gelu(hp.host, hp.host, fetch(bias).host);
      store({&hp});
      return;
    }
    cpu_backend().bias_gelu(hy.host, hp.host, fetch(bias).host);
    store({&hy, &hp});
  }
  void gelu_backward(const View& dx, const View& x, const View& dy) override {
    HostCopy hdx = fetch(dx);
    cpu_backend().gelu_backward(hdx.host, fetch(x).host, fetch(dy).host);
    store({&hdx});
  }
  void swiglu_forward(const View& y, const View& x) override {
    HostCopy hy = fetch(y);
    cpu_backend().swiglu_forward(hy.host, fetch(x).host);
    store({&hy});
  }
  void swiglu_backward(const View& dx, const View& x, const View& dy) override {
    HostCopy hdx = fetch(dx);
    cpu_backend().swiglu_backward(hdx.host, fetch(x).host, fetch(dy).host);
    store({&hdx});
  }
  void attention_core_forward(const View& out, const View& att, const View& qkv, std::int64_t b,
                              std::int64_t t, std::int64_t nh) override {
    HostCopy ho = fetch(out), ha = fetch(att);
    cpu_backend().attention_core_forward(ho.host, ha.host, fetch(qkv).host, b, t, nh);
    store({&ho, &ha});
  }
  void attention_core_backward(const View& dqkv, const View& scratch, const View& dout,
                               const View& qkv, const View& att, std::int64_t b, std::int64_t t,
                               std::int64_t nh) override {
    HostCopy hd = fetch(dqkv), hs = fetch(scratch);
    cpu_backend().attention_core_backward(hd.host, hs.host, fetch(dout).host, fetch(qkv).host,
                                          fetch(att).host, b, t, nh);
    store({&hd, &hs});
  }
  std::int64_t flash_attention_scratch(const FlashAttention& a, std::int64_t tq, std::int64_t tk,
                                       std::int64_t hd) const override {
    return cpu_backend().flash_attention_scratch(a, tq, tk, hd);
  }
  void flash_attention_forward(const View& out, const View& lse, const View& scratch, const View& q,
                               const View& k, const View& v, const FlashAttention& a) override {
    HostCopy ho = fetch(out), hl = fetch(lse), hs = fetch(scratch);
    cpu_backend().flash_attention_forward(ho.host, hl.host, hs.host, fetch(q).host, fetch(k).host,
                                          fetch(v).host, a);
    store({&ho, &hl, &hs});
  }
  void flash_attention_backward(const View& dq, const View& dk, const View& dv, const View& scratch,
                                const View& dout, const View& q, const View& k, const View& v,
                                const View& out, const View& lse,
                                const FlashAttention& a) override {
    HostCopy hq = fetch(dq), hk = fetch(dk), hv = fetch(dv), hs = fetch(scratch);
    cpu_backend().flash_attention_backward(hq.host, hk.host, hv.host, hs.host, fetch(dout).host,
                                           fetch(q).host, fetch(k).host, fetch(v).host,
                                           fetch(out).host, fetch(lse).host, a);
    store({&hq, &hk, &hv, &hs});
  }
  void flash_attention_merge(const View& out, const View& lse, const View& part,
                             const View& part_lse, const FlashAttention& a) override {
    HostCopy ho = fetch(out), hl = fetch(lse);
    cpu_backend().flash_attention_merge(ho.host, hl.host, fetch(part).host, fetch(part_lse).host,
                                        a);
    store({&ho, &hl});
  }

  void gather_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                   std::span<const float> scale) override {
    HostCopy hd = fetch(dst);
    cpu_backend().gather_rows(hd.host, fetch(src).host, index, scale);
    store({&hd});
  }
  void scatter_add_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                        std::span<const float> scale) override {
    HostCopy hd = fetch(dst);
    cpu_backend().scatter_add_rows(hd.host, fetch(src).host, index, scale);
    store({&hd});
  }
  std::vector<float> row_dots(const View& a, std::span<const std::int64_t> index,
                              const View& b) override {
    return cpu_backend().row_dots(fetch(a).host, index, fetch(b).host);
  }

  void rope(const View& x, const View& cos_sin, std::int64_t batch, std::int64_t heads,
            bool backward) override {
    HostCopy hx = fetch(x);
    cpu_backend().rope(hx.host, fetch(cos_sin).host, batch, heads, backward);
    store({&hx});
  }

  // A view's values on the host, of any element type (an empty view: an empty copy), and
  // back: what the ops above run the CPU backend on.
  struct HostCopy {
    std::vector<unsigned char> bytes;
    View device, host;
  };
  HostCopy fetch(const View& v) const {
    HostCopy h;
    h.device = v;
    if (v.data == nullptr) return h;
    MESHTP_CHECK(v.ld >= v.cols, "the inverted stand-in: {}", describe(v));
    const std::size_t row = static_cast<std::size_t>(v.cols) * element_size(v.type);
    h.bytes.resize(std::max<std::size_t>(static_cast<std::size_t>(v.rows) * row, 1));
    for (std::int64_t i = 0; i < v.rows; ++i) {
      InvertedMemory::invert(h.bytes.data() + i * row,
                             static_cast<const unsigned char*>(v.data) +
                                 i * v.ld * static_cast<std::int64_t>(element_size(v.type)),
                             row);
    }
    h.host = View::packed(h.bytes.data(), v.type, v.rows, v.cols);
    return h;
  }
  // A host copy as an fp32 array of the CPU backend's kind (not owning its bytes).
  static device::Array host_array(HostCopy& h) {
    return device::Array(std::shared_ptr<void>(h.bytes.data(), [](void*) {}), h.host.type,
                         h.host.elements());
  }
  void store(std::initializer_list<const HostCopy*> copies) const {
    for (const HostCopy* h : copies) {
      const View& v = h->device;
      if (v.data == nullptr) continue;
      const std::size_t row = static_cast<std::size_t>(v.cols) * element_size(v.type);
      for (std::int64_t i = 0; i < v.rows; ++i) {
        InvertedMemory::invert(static_cast<unsigned char*>(v.data) +
                                   i * v.ld * static_cast<std::int64_t>(element_size(v.type)),
                               h->bytes.data() + i * row, row);
      }
    }
  }

  // The optimizer's (train/adamw.hpp), on host copies through the CPU backend.
  double sum_of_squares(const device::Array& a) override {
    HostCopy h = fetch(a.view(1, a.count()));
    return cpu_backend().sum_of_squares(host_array(h));
  }
  void scale(device::Array& a, float alpha) override {
    HostCopy h = fetch(a.view(1, a.count()));
    device::Array host = host_array(h);
    cpu_backend().scale(host, alpha);
    store({&h});
  }
  void adamw_update(std::span<const device::AdamWParam> params, const AdamWStep& step) override {
    for (const device::AdamWParam& t : params) {
      const std::int64_t n = t.p.count();
      HostCopy p = fetch(t.p.view(1, n)), g = fetch(t.g.view(1, n)), m = fetch(t.m.view(1, n)),
               v = fetch(t.v.view(1, n));
      const device::Array hp = host_array(p);
      const device::AdamWParam host{hp, host_array(g), host_array(m), host_array(v), hp};
      cpu_backend().adamw_update(std::span(&host, 1), step);
      store({&p, &m, &v});
      MESHTP_CHECK(t.p_compute.empty() || t.p_compute.data() == t.p.data(),
                   "the inverted stand-in: fp32 compute copies are the parameters themselves");
    }
  }
  // A size, not an op: the CPU's (attention_core_backward's scratch).
  std::int64_t attention_scratch(std::int64_t b, std::int64_t t, std::int64_t nh) const override {
    return cpu_backend().attention_scratch(b, t, nh);
  }
};

}  // namespace meshtp::testing
