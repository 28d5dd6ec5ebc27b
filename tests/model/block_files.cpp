// Files for the `meshtp block` tests (a CTest fixture), and the check of its output.
//
//   model_block_files make DIR     writes into DIR: weights.safetensors (2 layers, h=32, a=8,
//                                  "heads" metadata), x.safetensors, dy.safetensors,
//                                  expected.safetensors (the serial reference's y, dx,
//                                  grad.*), and broken inputs: weights_missing (no
//                                  layers.1.mlp.fc2.bias), weights_truncated (the last 100
//                                  bytes cut), x_h34 (hidden 34)
//   model_block_files check EXPECTED OUT   every tensor of EXPECTED is in OUT, within 1e-4
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "model/reference.hpp"
#include "tensor/random.hpp"
#include "tensor/safetensors.hpp"
#include "test_weights.hpp"

namespace {

using namespace meshtp;

void make(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const model::StackConfig c{
      .block = {.shape = {.batch = 4, .seq = 8, .hidden = 32, .heads = 8, .layers = 2}}};
  const auto weights = model::random_weights(c.stack_layers(), c.block.shape.hidden, 300);
  const Tensor x = uniform_tensor({4, 8, 32}, 301), dy = uniform_tensor({4, 8, 32}, 302);
  save_safetensors(dir + "/weights.safetensors", weights, {{"heads", "8"}});
  save_safetensors(dir + "/x.safetensors", std::map<std::string, Tensor>{{"x", x}});
  save_safetensors(dir + "/dy.safetensors", std::map<std::string, Tensor>{{"dy", dy}});
  model::ReferenceStack serial(c, weights);
  std::map<std::string, Tensor> expected{{"y", serial.forward(x)}, {"dx", serial.backward(dy)}};
  for (const auto& [name, g] : serial.grads()) expected.emplace("grad." + name, g);
  save_safetensors(dir + "/expected.safetensors", expected);
  auto missing = weights;
  missing.erase("layers.1.mlp.fc2.bias");
  save_safetensors(dir + "/weights_missing.safetensors", missing, {{"heads", "8"}});
  const std::string full = dir + "/weights.safetensors", cut = dir + "/weights_truncated.safetensors";
  std::filesystem::copy_file(full, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, std::filesystem::file_size(full) - 100);
  save_safetensors(dir + "/x_h34.safetensors",
                   std::map<std::string, Tensor>{{"x", uniform_tensor({4, 8, 34}, 303)}});
}

int check(const std::string& expected_path, const std::string& out_path) {
  const SafetensorsFile expected = load_safetensors(expected_path);
  const SafetensorsFile out = load_safetensors(out_path);
  int bad = 0;
  for (const auto& [name, want] : expected.tensors) {
    const Tensor& got = require(out, name, want.shape());
    const double err = max_relative_error(got.values(), want.values());
    if (!(err <= 1e-4)) {
      std::printf("%s: max relative error %.3g\n", name.c_str(), err);
      ++bad;
    }
  }
  std::printf("%s: %zu tensors checked against %s, %d off\n", out_path.c_str(),
              expected.tensors.size(), expected_path.c_str(), bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "make" && argc == 3) {
      make(argv[2]);
      return 0;
    }
    if (mode == "check" && argc == 4) return check(argv[2], argv[3]);
    std::fprintf(stderr, "usage: %s make DIR | check EXPECTED OUT\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
