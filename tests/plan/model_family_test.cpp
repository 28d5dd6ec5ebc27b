// The Llama-family fields of a model (layout/model_shape.hpp): GPT stays the default, bad values
// are refused naming them, and the planner's counts (parameters, FLOPs, linears, memory)
// follow the fields.
#include <gtest/gtest.h>

#include <string>

#include "error_of.hpp"
#include "plan/fc_layers.hpp"
#include "plan/memory.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using test_support::error_of;

std::string model_json(const std::string& extra) {
  return R"({"name": "m", "layers": 2, "hidden": 64, "heads": 8, "vocab": 256, "batch": 2,
             "seq": 16)" +
         extra + "}";
}

TEST(ModelFamily, GptIsTheDefaultAndItsJsonIsUnchanged) {
  const ModelSpec m = parse_model(model_json(""), "test");
  EXPECT_TRUE(m.is_gpt());
  EXPECT_EQ(m.kv(), 8);
  EXPECT_EQ(m.ffn(), 256);
  EXPECT_EQ(m.qkv_width(), 192);
  EXPECT_EQ(m.layer_params(), 12.0 * 64 * 64 + 13.0 * 64);
  const nlohmann::json j = to_json(m);
  for (const char* key : {"kv_heads", "ffn_hidden", "activation", "norm", "position",
                          "tie_embeddings"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  EXPECT_EQ(model_from_json(j, "round trip"), m);
}

TEST(ModelFamily, BadValuesAreRefusedNamingThem) {
  const auto error = [](const std::string& extra) {
    return error_of([&] { (void)parse_model(model_json(extra), "'m.json'"); });
  };
  EXPECT_EQ(error(R"(, "kv_heads": 3)"),
            "model 'm': heads=8 is not divisible by kv_heads=3 (each KV head serves a whole "
            "group of query heads)");
  EXPECT_EQ(error(R"(, "kv_heads": 16)"), "model 'm': kv_heads=16 must be at most heads=8");
  EXPECT_EQ(error(R"(, "kv_heads": -1)"), "model 'm': kv_heads=-1 must be at least 0");
  EXPECT_EQ(error(R"(, "ffn_hidden": -5)"), "model 'm': ffn_hidden=-5 must be at least 0");
  EXPECT_EQ(error(R"(, "activation": "relu")"),
            "model 'm.json': activation: unknown activation 'relu' (valid: gelu, swiglu)");
  EXPECT_EQ(error(R"(, "norm": "batchnorm")"),
            "model 'm.json': norm: unknown norm 'batchnorm' (valid: layernorm, rmsnorm)");
  EXPECT_EQ(error(R"(, "position": "alibi")"),
            "model 'm.json': position: unknown position 'alibi' (valid: learned, rope)");
  EXPECT_EQ(error(R"(, "tie_embeddings": "no")"),
            "model 'm.json': tie_embeddings=\"no\" must be true or false");
  EXPECT_NE(error(R"(, "kv_head": 2)").find("kv_head"), std::string::npos);
  EXPECT_EQ(error(R"(, "position": "rope", "rope_theta": 1)"),
            "model 'm': rope_theta=1 must be 0 (the default, 10000) or in (1, 1e12]");
  EXPECT_EQ(error(R"(, "rope_theta": 500000)"),
            "model 'm': rope_theta=500000 applies to position=rope, not position=learned");
}

TEST(ModelFamily, Llama3PresetsCountThePapersParameters) {
  // "The Llama 3 Herd of Models", Table 3: 8B, 70B, 405B (8.03B, 70.6B, 406B as Meta counts).
  EXPECT_NEAR(load_model("llama3-8b").total_params() / 1e9, 8.03, 0.01);
  EXPECT_NEAR(load_model("llama3-70b").total_params() / 1e9, 70.55, 0.1);
  EXPECT_NEAR(load_model("llama3-405b").total_params() / 1e9, 405.9, 0.5);
  const ModelSpec m = load_model("llama3-405b");
  EXPECT_FALSE(m.is_gpt());
  EXPECT_EQ(m.kv(), 8);
  EXPECT_EQ(m.qkv_width(), 16384 + 2 * 8 * 128);
  EXPECT_EQ(m.mlp1_width(), 2 * 53248);
}

TEST(ModelFamily, TheRuntimeRefusesANonGptModelNamingTheField) {
  EXPECT_NE(error_of([] { load_model("llama3-8b").require_gpt("model 'llama3-8b'"); })
                .find("model 'llama3-8b': kv_heads=8 (heads=32): this runtime runs GPT"),
            std::string::npos);
  ModelSpec m = parse_model(model_json(R"(, "norm": "rmsnorm")"), "test");
  EXPECT_NE(error_of([&] { m.require_gpt("model 'm'"); }).find("model 'm': norm=rmsnorm: "),
            std::string::npos);
  EXPECT_EQ(error_of([] { load_model("gpt3-175b").require_gpt("x"); }), "");
}

TEST(ModelFamily, FlopsAndLinearsFollowTheFields) {
  ModelSpec m = parse_model(model_json(R"(, "kv_heads": 2, "ffn_hidden": 96,
                                          "activation": "swiglu")"),
                            "test");
  const double h = 64, d = 8, g = 2, f = 96, b = 2, s = 16;
  const double weights = h * (h + 2 * g * d) + h * h + h * 2 * f + f * h;
  EXPECT_DOUBLE_EQ(m.linear_weights(), weights);
  EXPECT_DOUBLE_EQ(m.layer_flops(), 6 * b * s * weights + 12 * b * s * s * h);
  const auto fc = fc_layers(m);
  EXPECT_EQ(fc[0].out, 64 + 2 * 2 * 8);
  EXPECT_EQ(fc[2].out, 2 * 96);
  EXPECT_EQ(fc[3].in, 96);
  // No biases with SwiGLU; LayerNorm's 2h per norm.
  EXPECT_DOUBLE_EQ(m.layer_params(), weights + 4 * h);
  m.norm = layout::Norm::kRmsNorm;
  EXPECT_DOUBLE_EQ(m.layer_params(), weights + 2 * h);
}

TEST(ModelFamily, MemoryFollowsTheFields) {
  // GQA keeps smaller K/V activations; an untied head holds a second vocabulary table.
  const ModelSpec mha = parse_model(model_json(""), "test");
  ModelSpec gqa = mha;
  gqa.kv_heads = 2;
  const layout::Plan one{};
  EXPECT_LT(layer_activation_bytes(gqa, one), layer_activation_bytes(mha, one));
  EXPECT_NEAR(layer_activation_bytes(mha, one) - layer_activation_bytes(gqa, one),
              2.0 * 16 * 64 * 1.5 * mha.element_bytes(), 1e-9);
  ModelSpec untied = mha;
  untied.tie_embeddings = false;
  const auto params_bytes = [&](const ModelSpec& m, layout::Runtime runtime) {
    return rank_memory(m, one, 0, HeadBuffers::kRuntime, runtime).params_bytes;
  };
  // In the model's precision under Megatron-LM; in fp32 under this runtime (its masters).
  EXPECT_DOUBLE_EQ(params_bytes(untied, layout::Runtime::kMegatron) -
                       params_bytes(mha, layout::Runtime::kMegatron),
                   256.0 * 64 * mha.element_bytes());
  EXPECT_DOUBLE_EQ(
      params_bytes(untied, layout::Runtime::kMeshtp) - params_bytes(mha, layout::Runtime::kMeshtp),
      256.0 * 64 * 4);
}

}  // namespace
}  // namespace meshtp::plan
