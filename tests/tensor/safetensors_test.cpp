// safetensors: round trips are bit-exact; files laid out as the reference (PyTorch's) writer
// lays them out load, including hand-written bytes and golden files made by an independent
// Python writer (tests/data/safetensors/make_golden.py); every kind of corruption fails with
// a message naming the file and the numbers; a failed save leaves the old file as it was.
#include "tensor/safetensors.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "tensor/random.hpp"
#include "error_of.hpp"

namespace meshtp {
namespace {

using meshtp::test_support::error_of;

namespace fs = std::filesystem;

const std::string kGoldenDir = std::string(MESHTP_TEST_DATA_DIR) + "/safetensors";

// The 8-byte little-endian header length, written byte by byte (no host-order assumption).
std::string le64(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file from a header text (used as given, padding included) and data bytes.
std::string file_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * 4) == 0;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "meshtp_safetensors_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write_raw(const std::string& name, const std::string& bytes) const {
    write_file_atomically(path(name), bytes);
    return path(name);
  }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename());
    return names;
  }

  fs::path dir_;
};

std::map<std::string, Tensor> sample_tensors() {
  std::map<std::string, Tensor> tensors;
  tensors["layers.0.mlp.fc1.bias"] = uniform_tensor({8}, 1);
  tensors["layers.0.mlp.fc1.weight"] = uniform_tensor({8, 3}, 2);
  tensors["x"] = normal_tensor({2, 3, 4}, 3);
  tensors["conv"] = uniform_tensor({2, 1, 3, 2}, 4);
  tensors["step"] = Tensor(Shape{}, 42.0f);  // 0-d: one element
  tensors["empty"] = Tensor({0, 3});         // no elements, still has a shape
  Tensor special({6});
  special[0] = -0.0f;
  special[1] = std::numeric_limits<float>::infinity();
  special[2] = std::numeric_limits<float>::quiet_NaN();
  special[3] = std::numeric_limits<float>::denorm_min();
  special[4] = std::numeric_limits<float>::max();
  special[5] = std::numeric_limits<float>::lowest();
  tensors["special"] = special;
  return tensors;
}

TEST_F(Safetensors, RoundTripIsBitExact) {
  const auto tensors = sample_tensors();
  for (const auto& metadata :
       {std::map<std::string, std::string>{},
        std::map<std::string, std::string>{
            {"step", "100"}, {"model", "tiny"}, {"note", "héllo \"q\"\n"}}}) {
    save_safetensors(path("w.safetensors"), tensors, metadata);
    const SafetensorsFile loaded = load_safetensors(path("w.safetensors"));
    EXPECT_EQ(loaded.path, path("w.safetensors"));
    EXPECT_EQ(loaded.metadata, metadata);
    ASSERT_EQ(loaded.tensors.size(), tensors.size());
    for (const auto& [name, t] : tensors) {
      const Tensor& back = require(loaded, name, t.shape());
      EXPECT_TRUE(bitwise_equal(back, t)) << name << " " << to_string(back.shape());
    }
  }
  EXPECT_EQ(entries(), std::set<std::string>{"w.safetensors"});
}

TEST_F(Safetensors, SavingByReferenceWritesTheSameBytes) {
  const auto tensors = sample_tensors();
  std::map<std::string, const Tensor*> refs;
  for (const auto& [name, t] : tensors) refs[name] = &t;
  save_safetensors(path("by_value"), tensors, {{"k", "v"}});
  save_safetensors(path("by_ref"), refs, {{"k", "v"}});
  EXPECT_EQ(read_file(path("by_value")), read_file(path("by_ref")));
}

TEST_F(Safetensors, SaveMatchesTheReferenceLayoutByteForByte) {
  // The same tensors as f32_only.safetensors, written there by make_golden.py.
  std::map<std::string, Tensor> tensors;
  tensors["layers.0.attn.qkv.weight"] = Tensor({3, 2}, {1, 2, 3, 4, 5, 6});
  tensors["layers.0.attn.qkv.bias"] = Tensor({3}, {-0.5f, 0.25f, 0.125f});
  tensors["step"] = Tensor(Shape{}, 7.0f);
  tensors["empty"] = Tensor({0, 4});
  save_safetensors(path("out.safetensors"), tensors, {{"format", "pt"}, {"heads", "4"}});
  EXPECT_EQ(read_file(path("out.safetensors")), read_file(kGoldenDir + "/f32_only.safetensors"));
}

TEST_F(Safetensors, HeaderIsPaddedSoDataIsEightByteAligned) {
  for (const std::string name : {"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg"}) {
    save_safetensors(path("p"), std::map<std::string, Tensor>{{name, Tensor({1})}});
    const std::string bytes = read_file(path("p"));
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u) << name;
    EXPECT_EQ(bytes.size(), 8 + n + 4);
    EXPECT_EQ(bytes.substr(8, n).find_last_not_of(' '), bytes.substr(8, n).rfind('}'));
  }
}

TEST_F(Safetensors, LoadsGoldenMixedDtypesConvertingToFp32) {
  const std::string golden = kGoldenDir + "/mixed_dtypes.safetensors";
  const SafetensorsFile file = load_safetensors(golden);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  const auto expect_values = [&](const std::string& name, const Shape& shape,
                                 const std::vector<float>& want) {
    const Tensor& t = require(file, name, shape);
    EXPECT_TRUE(bitwise_equal(t, Tensor(shape, want))) << name;
  };
  expect_values("x.f64", {3},
                {static_cast<float>(0.1), static_cast<float>(-1e30), static_cast<float>(1e-40)});
  expect_values("w.f32", {2, 3}, {0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 65504.0f});
  expect_values("scale.bf16", {2, 2}, {1.0f, -3.140625f, 256.0f, 0.0078125f});
  expect_values("emb.f16", {5},
                {1.0f, -2.0f, 65504.0f, 0x1p-24f, -std::numeric_limits<float>::infinity()});

  EXPECT_EQ(error_of([&] { load_safetensors(golden, {.convert_to_f32 = false}); }),
            golden + ": tensor 'emb.f16' has dtype F16, expected F32 (conversion is turned off)");
}

// Bytes written here by hand as the format says: entries out of data order, fields in any
// order, __metadata__ in the middle, several dtypes and a header padded with 13 spaces.
TEST_F(Safetensors, LoadsHandWrittenBytes) {
  const std::string header = R"({"b":{"shape":[2],"dtype":"F32","data_offsets":[8,16]},)"
                             R"("__metadata__":{"heads":"4","format":"pt"},)"
                             R"("h":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
                             R"("a":{"data_offsets":[0,8],"dtype":"F32","shape":[1,2]},)"
                             R"("d":{"dtype":"F64","shape":[1],"data_offsets":[26,34]},)"
                             R"("g":{"dtype":"BF16","shape":[2],"data_offsets":[22,26]}})"
                             "             ";
  const std::string data = std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8)     // a: 1, -2
                           + std::string("\x00\x00\x00\x3f\x00\x00\x40\x40", 8)   // b: 0.5, 3
                           + std::string("\x00\x3c\x00\xc0\x01\x00", 6)           // h: 1, -2, 2^-24
                           + std::string("\x80\x3f\x49\xc0", 4)                   // g: 1, -3.140625
                           + std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);  // d: 1
  const SafetensorsFile file =
      load_safetensors(write_raw("hand.safetensors", file_bytes(header, data)));
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"heads", "4"}, {"format", "pt"}}));
  EXPECT_EQ(file.tensors.size(), 5u);
  EXPECT_TRUE(bitwise_equal(require(file, "a", Shape{1, 2}), Tensor({1, 2}, {1.0f, -2.0f})));
  EXPECT_TRUE(bitwise_equal(require(file, "b", Shape{2}), Tensor({2}, {0.5f, 3.0f})));
  EXPECT_TRUE(bitwise_equal(require(file, "h"), Tensor({3}, {1.0f, -2.0f, 0x1p-24f})));
  EXPECT_TRUE(bitwise_equal(require(file, "g"), Tensor({2}, {1.0f, -3.140625f})));
  EXPECT_TRUE(bitwise_equal(require(file, "d"), Tensor({1}, {1.0f})));
}

struct Corruption {
  const char* what;
  std::string bytes;
  std::string message;  // after "PATH: "
};

std::vector<Corruption> corruptions() {
  const std::string four_floats(16, '\0');
  const auto one = [](const std::string& entry) { return R"({"w":)" + entry + "}"; };
  return {
      {"empty file", "",
       "the file is 0 bytes long, too short for a safetensors file (which starts with an "
       "8-byte header length)"},
      {"shorter than 8 bytes", std::string("\x10\x00\x00", 3),
       "the file is 3 bytes long, too short for a "
       "safetensors file (which starts with an 8-byte "
       "header length)"},
      {"header length beyond the file", le64(1000) + "{}",
       "header length 1000 extends past the end of the file (2 bytes after the length "
       "field); is this a safetensors file?"},
      {"not a safetensors file at all", "PK\x03\x04 a zip archive, say",
       "header length 8800140462016121680 extends past the end of the file (15 bytes after "
       "the length field); is this a safetensors file?"},
      {"header not an object", file_bytes("[1,2]", ""),
       "the header is [1,2], expected a JSON "
       "object"},
      {"entry not an object", file_bytes(one("3"), ""),
       "tensor 'w' is 3 in the header, expected an object"},
      {"missing dtype", file_bytes(one(R"({"shape":[4],"data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has no \"dtype\" in the header"},
      {"missing shape", file_bytes(one(R"({"dtype":"F32","data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has no \"shape\" in the header"},
      {"missing data_offsets", file_bytes(one(R"({"dtype":"F32","shape":[4]})"), four_floats),
       "tensor 'w' has no \"data_offsets\" in the header"},
      {"dtype not a string",
       file_bytes(one(R"({"dtype":32,"shape":[4],"data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has dtype 32, expected a string like \"F32\""},
      {"unsupported dtype",
       file_bytes(one(R"({"dtype":"I64","shape":[2],"data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has dtype I64; meshtp reads F32, and converts F16, BF16 and F64"},
      {"negative size",
       file_bytes(one(R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has shape [-4], expected non-negative integer sizes"},
      {"fractional size",
       file_bytes(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has shape [2.5], expected non-negative integer sizes"},
      {"shape not an array",
       file_bytes(one(R"({"dtype":"F32","shape":4,"data_offsets":[0,16]})"), four_floats),
       "tensor 'w' has shape 4, expected an array of sizes"},
      {"shape overflows",
       file_bytes(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]})"),
                  four_floats),
       "tensor 'w' has shape [4294967296, 4294967296], too large to address"},
      {"one offset",
       file_bytes(one(R"({"dtype":"F32","shape":[4],"data_offsets":[16]})"), four_floats),
       "tensor 'w' has data_offsets [16], expected [begin, end]"},
      {"offsets reversed",
       file_bytes(one(R"({"dtype":"F32","shape":[4],"data_offsets":[16,0]})"), four_floats),
       "tensor 'w' has data_offsets [16, 0), which end before they begin"},
      {"offsets do not match shape x 4",
       file_bytes(one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,12]})"), four_floats),
       "tensor 'w' of shape [2, 2] and dtype F32 needs 16 bytes, but its data_offsets [0, 12) "
       "hold 12"},
      {"truncated data",
       file_bytes(R"({"layers.0.attn.qkv.weight":{"dtype":"F32","shape":[32,32],)"
                  R"("data_offsets":[0,4096]}})",
                  std::string(3000, '\0')),
       "tensor 'layers.0.attn.qkv.weight' data [0, 4096) extends past the end of the file "
       "(3000 bytes of data)"},
      {"overlap",
       file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                  R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                  std::string(24, '\0')),
       "tensors 'a' data [0, 16) and 'b' data [8, 24) overlap"},
      {"gap",
       file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                  std::string(24, '\0')),
       "data bytes [8, 16) before tensor 'b' belong to no tensor"},
      {"trailing bytes",
       file_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), four_floats),
       "data bytes [8, 16) at the end of the file belong to no tensor"},
      {"duplicate tensor",
       file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                  four_floats),
       "'w' appears more than once in the header"},
      {"metadata not strings", file_bytes(R"({"__metadata__":{"step":100}})", ""),
       "metadata 'step' is 100, expected a string"},
      {"metadata not an object", file_bytes(R"({"__metadata__":"x"})", ""),
       "__metadata__ is \"x\", expected an object of strings"},
      {"F64 beyond fp32",
       file_bytes(one(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"),
                  std::string("\x9c\x75\x00\x88\x3c\xe4\x37\x7e", 8)),  // 1e300
       "tensor 'w' (F64) element 0 = 1e+300 is outside the fp32 range"},
  };
}

TEST_F(Safetensors, EveryCorruptionIsNamed) {
  for (const Corruption& c : corruptions()) {
    const std::string file = write_raw("bad.safetensors", c.bytes);
    EXPECT_EQ(error_of([&] { load_safetensors(file); }), file + ": " + c.message) << c.what;
  }
}

TEST_F(Safetensors, MalformedJsonIsNamedWithTheParserReason) {
  for (const std::string& header : {std::string(R"({"w":{"dtype":"F32",)"),
                                    std::string("{\"w\xff\":{}}"), std::string("        ")}) {
    const std::string file = write_raw("bad.safetensors", file_bytes(header, ""));
    const std::string message = error_of([&] { load_safetensors(file); });
    EXPECT_EQ(message.rfind(file + ": the " + std::to_string(header.size()) +
                                "-byte header is not valid JSON: [json.exception.parse_error",
                            0),
              0u)
        << message;
  }
}

TEST_F(Safetensors, MissingOrUnreadablePathIsNamed) {
  EXPECT_EQ(error_of([&] { load_safetensors(path("nope.safetensors")); }),
            "cannot open '" + path("nope.safetensors") + "': No such file or directory");
  EXPECT_EQ(error_of([&] { load_safetensors(dir_.string()); }),
            "cannot read '" + dir_.string() + "': it is a directory");
}

TEST_F(Safetensors, RequireNamesWhatIsThereAndTheShapes) {
  save_safetensors(
      path("w.safetensors"),
      std::map<std::string, Tensor>{{"a", Tensor({2, 3})}, {"b", Tensor({1})}, {"c", Tensor({4})}});
  const SafetensorsFile file = load_safetensors(path("w.safetensors"));
  EXPECT_EQ(require(file, "a").shape(), (Shape{2, 3}));
  EXPECT_EQ(&require(file, "a", Shape{2, 3}), &file.tensors.at("a"));
  EXPECT_EQ(error_of([&] { require(file, "x"); }),
            "missing tensor 'x' in " + path("w.safetensors") + " (it has: a, b, c)");
  EXPECT_EQ(error_of([&] {
              require(file, "a", Shape{3, 2});
            }),
            "tensor 'a' in " + path("w.safetensors") + " has shape [2, 3], expected [3, 2]");

  SafetensorsFile none;
  none.path = "empty.safetensors";
  EXPECT_EQ(error_of([&] { require(none, "x"); }),
            "missing tensor 'x' in empty.safetensors (it has no tensors)");
  SafetensorsFile many;
  many.path = "many.safetensors";
  for (int i = 0; i < 25; ++i) many.tensors[fmt::format("t{:02}", i)] = Tensor({1});
  const std::string message = error_of([&] { require(many, "x"); });
  EXPECT_NE(message.find("t18, t19, … (5 more))"), std::string::npos) << message;
}

TEST_F(Safetensors, BadSaveInputIsRefusedAndLeavesOldFile) {
  save_safetensors(path("w.safetensors"), sample_tensors(), {{"step", "1"}});
  const std::string good = read_file(path("w.safetensors"));
  const std::string p = path("w.safetensors");
  using Tensors = std::map<std::string, Tensor>;
  EXPECT_EQ(error_of([&] {
              save_safetensors(p, Tensors{{"", Tensor({1})}});
            }),
            "cannot save '" + p + "': a tensor has an empty name");
  EXPECT_EQ(error_of([&] {
              save_safetensors(p, Tensors{{"__metadata__", Tensor({1})}});
            }),
            "cannot save '" + p + "': '__metadata__' names the metadata, not a tensor");
  EXPECT_EQ(error_of([&] {
              save_safetensors(p, Tensors{{"w", Tensor()}});
            }),
            "cannot save '" + p + "': tensor 'w' has shape [] but 0 values (default-constructed?)");
  EXPECT_EQ(error_of([&] {
              save_safetensors(p, std::map<std::string, const Tensor*>{{"w", nullptr}});
            }),
            "cannot save '" + p + "': tensor 'w' is null");
  const std::string message = error_of([&] {
    save_safetensors(p, Tensors{{"bad\xff", Tensor({1})}});
  });
  EXPECT_EQ(message.rfind("cannot save '" + p +
                              "': a tensor name or metadata string is not "
                              "valid UTF-8",
                          0),
            0u)
      << message;
  EXPECT_EQ(read_file(p), good);
  EXPECT_EQ(entries(), std::set<std::string>{"w.safetensors"});
}

TEST_F(Safetensors, FailedSaveLeavesExistingFileByteIdentical) {
  save_safetensors(path("ckpt.safetensors"), sample_tensors(), {{"step", "100"}});
  const std::string good = read_file(path("ckpt.safetensors"));
  const std::map<std::string, Tensor> big{{"w", uniform_tensor({256, 256}, 9)}};  // 256 KiB

  // Disk full part-way through the data: files may not grow past 64 KiB.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string full = error_of([&] { save_safetensors(path("ckpt.safetensors"), big); });
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(full.rfind("cannot write '" + path("ckpt.safetensors") + "': File too large", 0), 0u)
      << full;
  EXPECT_EQ(read_file(path("ckpt.safetensors")), good);
  EXPECT_EQ(entries(), std::set<std::string>{"ckpt.safetensors"});

  // A destination that is a directory, and a directory that does not exist.
  fs::create_directory(path("dir.safetensors"));
  EXPECT_EQ(error_of([&] { save_safetensors(path("dir.safetensors"), big); }),
            "'" + path("dir.safetensors") +
                "' is a directory, not a regular file: meshtp writes only regular files");
  EXPECT_TRUE(fs::is_directory(path("dir.safetensors")));
  EXPECT_EQ(error_of([&] { save_safetensors(path("missing/ckpt.safetensors"), big); }),
            "cannot write '" + path("missing/ckpt.safetensors") +
                "': cannot create a temporary file in '" + path("missing") +
                "': No such file or directory");
  EXPECT_EQ(read_file(path("ckpt.safetensors")), good);
  EXPECT_EQ(entries(), (std::set<std::string>{"ckpt.safetensors", "dir.safetensors"}));
}

}  // namespace
}  // namespace meshtp
