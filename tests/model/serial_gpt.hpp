// The serial GPT, independent of model/gpt.cpp: the reference block stack
// (model/reference.hpp) between the plain ops — token + position embedding, LayerNorm, a tied
// linear head (wte) and cross-entropy — on global tensors. Its loss and every parameter's
// gradient (the stack's names, and wte, wpe, lnf.weight, lnf.bias) are what the distributed
// GPT (model_gpt_test) and the serial GPT on a device backend (device_gpt_test) are held to.
// The Llama family's fields as the reference stack has them, and here: no wpe with RoPE,
// RMSNorm_f without lnf.bias, an untied head lm_head.weight.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/gpt.hpp"
#include "model/reference.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/embedding.hpp"
#include "ops/layernorm.hpp"
#include "ops/linear.hpp"
#include "ops/rmsnorm.hpp"

namespace meshtp::model {

struct SerialResult {
  double loss = 0.0;
  std::map<std::string, Tensor> grads;
};

inline SerialResult serial_gpt(const GptConfig& c, std::map<std::string, Tensor> w,
                               const std::vector<std::int32_t>& tokens,
                               const std::vector<std::int32_t>& targets) {
  const layout::ModelShape& m = c.shape;
  const std::int64_t n = m.batch * m.seq, h = m.hidden;
  const bool learned = m.position == layout::Position::kLearned;
  const bool rms = m.norm == layout::Norm::kRmsNorm;
  const std::string head = m.tie_embeddings ? "wte" : "lm_head.weight";
  Tensor x({n, h});
  Tensor zero_wpe({m.seq, h});  // RoPE: no position table (the blocks rotate q and k)
  embedding_forward(x.matrix(), tokens, m.batch, m.seq, w.at("wte").matrix(),
                    learned ? w.at("wpe").matrix() : zero_wpe.matrix());
  ReferenceStack stack({.block = {.shape = m}}, w);
  const Tensor y = stack.forward(x);
  Tensor f({n, h});
  std::vector<float> mean(n), rstd(n), lse(n);
  if (rms) {
    rmsnorm_forward(f.matrix(), rstd, y.matrix(), w.at("lnf.weight").values());
  } else {
    layernorm_forward(f.matrix(), mean, rstd, y.matrix(), w.at("lnf.weight").values(),
                      w.at("lnf.bias").values());
  }
  Tensor logits({n, c.shape.vocab});
  linear_forward(logits.matrix(), f.matrix(), w.at(head).matrix(), {});
  SerialResult r;
  r.loss = cross_entropy_forward(lse, logits.matrix(), targets);

  Tensor dlogits({n, c.shape.vocab});
  cross_entropy_backward(dlogits.matrix(), logits.matrix(), lse, targets);
  Tensor df({n, h});
  Tensor dwte({c.shape.vocab, h}), dhead({c.shape.vocab, h});
  linear_backward(df.matrix(), (m.tie_embeddings ? dwte : dhead).matrix(), {}, dlogits.matrix(),
                  f.matrix(), w.at(head).matrix());
  Tensor dy({n, h});
  Tensor dlnw({h});
  Tensor dlnb({h});
  if (rms) {
    rmsnorm_backward(dy.matrix(), dlnw.values(), df.matrix(), y.matrix(),
                     w.at("lnf.weight").values(), rstd);
  } else {
    layernorm_backward(dy.matrix(), dlnw.values(), dlnb.values(), df.matrix(), y.matrix(),
                       w.at("lnf.weight").values(), mean, rstd);
  }
  const Tensor dx = stack.backward(dy);
  Tensor dwpe({m.seq, h});
  embedding_backward(dwte.matrix(), dwpe.matrix(), dx.matrix(), tokens, m.batch, m.seq);
  r.grads = stack.grads();
  r.grads["wte"] = dwte;
  if (learned) r.grads["wpe"] = dwpe;
  r.grads["lnf.weight"] = dlnw;
  if (!rms) r.grads["lnf.bias"] = dlnb;
  if (!m.tie_embeddings) r.grads["lm_head.weight"] = dhead;
  return r;
}

}  // namespace meshtp::model
