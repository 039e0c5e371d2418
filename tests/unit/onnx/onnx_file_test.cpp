// Tests for frontend/onnx/OnnxFile.h: a model written with libonnx's
// protobuf classes reads back with its external data in place; every bad
// file (truncated, no graph, external data outside the model's folder,
// past its file's end, or of the wrong size) is one error naming the file
// and the tensor. A tensor's values read from raw data or the typed field,
// float16 and bfloat16 widened exactly, sizes checked against the dims.
#include "frontend/onnx/OnnxFile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using mlir::transfuse::onnx_import::readOnnxModel;
using mlir::transfuse::onnx_import::readTensor;

class OnnxFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("transfuse_onnx_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string &name) const { return (dir_ / name).string(); }
  void write(const std::string &name, const std::string &bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  // A model whose graph has an inline initializer "a" [2] and an external
  // one "w" [3] at `location`, `offset`, `length`.
  std::string model(const std::string &location, const std::string &offset = "4",
                    const std::string &length = "12") const {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto *g = m.mutable_graph();
    g->set_name("g");
    onnx::TensorProto *a = g->add_initializer();
    a->set_name("a");
    a->set_data_type(onnx::TensorProto::FLOAT);
    a->add_dims(2);
    a->add_float_data(1.5f);
    a->add_float_data(-2.0f);
    onnx::TensorProto *w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair{"location", location}, {"offset", offset}, {"length", length}}) {
      if (v.empty())
        continue;
      onnx::StringStringEntryProto *e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    return m.SerializeAsString();
  }
  std::string error(const std::string &file) const {
    auto m = readOnnxModel(path(file));
    if (m)
      return "read";
    return llvm::toString(m.takeError());
  }
  fs::path dir_;
};

TEST_F(OnnxFileTest, ExternalDataIsReadIn) {
  const float w[] = {0.25f, 0.5f, 4.0f};
  write("w.bin", std::string("skip") + std::string(reinterpret_cast<const char *>(w), sizeof w));
  write("m.onnx", model("w.bin"));
  auto m = readOnnxModel(path("m.onnx"));
  ASSERT_TRUE(!!m) << llvm::toString(m.takeError());
  const onnx::GraphProto &g = m->graph();
  ASSERT_EQ(g.initializer_size(), 2);
  EXPECT_EQ(g.initializer(0).float_data_size(), 2);
  const onnx::TensorProto &t = g.initializer(1);
  EXPECT_EQ(t.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(t.external_data_size(), 0);
  ASSERT_EQ(t.raw_data().size(), sizeof w);
  EXPECT_EQ(0, std::memcmp(t.raw_data().data(), w, sizeof w));
  // Without offset and length: the whole file.
  write("whole.bin", std::string(reinterpret_cast<const char *>(w), sizeof w));
  write("whole.onnx", model("whole.bin", "", ""));
  EXPECT_EQ(error("whole.onnx"), "read");
  // In a subfolder of the model's.
  fs::create_directories(dir_ / "data");
  write("data/w.bin", std::string(reinterpret_cast<const char *>(w), sizeof w));
  write("sub.onnx", model("data/w.bin", "0", "12"));
  EXPECT_EQ(error("sub.onnx"), "read");
}

TEST_F(OnnxFileTest, BadFilesAreOneErrorEach) {
  write("w.bin", std::string(16, 'x'));
  const std::string m = path("m.onnx");
  write("m.onnx", model("/etc/passwd"));
  EXPECT_EQ(error("m.onnx"), m + ": tensor 'w': external data location '/etc/passwd' is absolute "
                                 "(it must lie in the model's folder)");
  write("m.onnx", model("../w.bin"));
  EXPECT_EQ(error("m.onnx"),
            m + ": tensor 'w': external data location '../w.bin' leaves the model's folder ('..')");
  fs::create_directories(dir_ / "outside");
  std::ofstream((dir_ / "outside" / "x.bin").string()) << std::string(12, 'y');
  fs::create_directories(dir_ / "inner");
  fs::create_symlink(dir_ / "outside", dir_ / "inner" / "link");
  write("inner/m.onnx", model("link/x.bin", "0", "12"));
  EXPECT_EQ(error("inner/m.onnx"), path("inner/m.onnx") +
                                       ": tensor 'w': external data location 'link/x.bin' leaves "
                                       "the model's folder (through a link)");
  write("m.onnx", model("w.bin", "8", "12"));
  EXPECT_EQ(error("m.onnx"), m + ": tensor 'w': external data [8, 20) lies past the end of "
                                 "'w.bin' (16 bytes)");
  write("m.onnx", model("w.bin", "0", "8"));
  EXPECT_EQ(error("m.onnx"),
            m + ": tensor 'w': external data holds 8 bytes; its dims and type need 12");
  write("m.onnx", model("w.bin", "x", "8"));
  EXPECT_EQ(error("m.onnx"),
            m + ": tensor 'w': external data offset 'x' is not a non-negative integer");
  write("m.onnx", model("absent.bin", "0", "12"));
  EXPECT_EQ(error("m.onnx"), m + ": tensor 'w': cannot open its external data 'absent.bin'");
  std::string whole = model("w.bin", "0", "12");
  write("cut.onnx", whole.substr(0, whole.size() / 2));
  EXPECT_EQ(error("cut.onnx"), path("cut.onnx") + ": not an ONNX model (the protobuf does not "
                                                  "parse: a truncated or foreign file)");
  onnx::ModelProto empty;
  empty.set_ir_version(8);
  write("nograph.onnx", empty.SerializeAsString());
  EXPECT_EQ(error("nograph.onnx"), path("nograph.onnx") + ": an ONNX model without a graph");
  EXPECT_EQ(error("absent.onnx").rfind("cannot read '" + path("absent.onnx") + "'", 0), 0u);
}

onnx::TensorProto tensor(int32_t type, std::vector<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name("t");
  t.set_data_type(type);
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

TEST(OnnxTensorTest, ValuesFromRawDataAndTypedFields) {
  // float: typed and raw (little-endian) give the same values.
  onnx::TensorProto f = tensor(onnx::TensorProto::FLOAT, {2, 2});
  for (float x : {1.0f, -2.5f, 0.0f, 3e-8f})
    f.add_float_data(x);
  auto typed = readTensor(f, "m.onnx");
  ASSERT_TRUE(!!typed) << llvm::toString(typed.takeError());
  EXPECT_EQ(typed->floats, (std::vector<float>{1.0f, -2.5f, 0.0f, 3e-8f}));
  EXPECT_EQ(typed->dims, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(typed->isFloat());
  onnx::TensorProto fr = tensor(onnx::TensorProto::FLOAT, {4});
  fr.set_raw_data(std::string(reinterpret_cast<const char *>(typed->floats.data()), 16));
  auto raw = readTensor(fr, "m.onnx");
  ASSERT_TRUE(!!raw);
  EXPECT_EQ(raw->floats, typed->floats);
  // float16 (1, -2, 0.5, the smallest subnormal, infinity) and bfloat16 (1,
  // -3), raw and in int32_data.
  onnx::TensorProto h = tensor(onnx::TensorProto::FLOAT16, {5});
  const uint16_t halves[] = {0x3C00, 0xC000, 0x3800, 0x0001, 0x7C00};
  h.set_raw_data(std::string(reinterpret_cast<const char *>(halves), sizeof halves));
  auto hv = readTensor(h, "m.onnx");
  ASSERT_TRUE(!!hv) << llvm::toString(hv.takeError());
  EXPECT_EQ(hv->floats[0], 1.0f);
  EXPECT_EQ(hv->floats[1], -2.0f);
  EXPECT_EQ(hv->floats[2], 0.5f);
  EXPECT_EQ(hv->floats[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(hv->floats[4]));
  onnx::TensorProto b = tensor(onnx::TensorProto::BFLOAT16, {2});
  b.add_int32_data(0x3F80);
  b.add_int32_data(0xC040);
  auto bv = readTensor(b, "m.onnx");
  ASSERT_TRUE(!!bv);
  EXPECT_EQ(bv->floats, (std::vector<float>{1.0f, -3.0f}));
  // Integers: int64 typed and raw, int32 and bool in int32_data, int8 raw.
  onnx::TensorProto i64 = tensor(onnx::TensorProto::INT64, {3});
  for (int64_t x : {int64_t{-1}, int64_t{1} << 40, int64_t{7}})
    i64.add_int64_data(x);
  auto iv = readTensor(i64, "m.onnx");
  ASSERT_TRUE(!!iv);
  EXPECT_EQ(iv->ints, (std::vector<int64_t>{-1, int64_t{1} << 40, 7}));
  EXPECT_FALSE(iv->isFloat());
  onnx::TensorProto i64r = tensor(onnx::TensorProto::INT64, {3});
  i64r.set_raw_data(std::string(reinterpret_cast<const char *>(iv->ints.data()), 24));
  auto ir = readTensor(i64r, "m.onnx");
  ASSERT_TRUE(!!ir);
  EXPECT_EQ(ir->ints, iv->ints);
  onnx::TensorProto i8 = tensor(onnx::TensorProto::INT8, {2});
  i8.set_raw_data(std::string("\xff\x05", 2));
  auto i8v = readTensor(i8, "m.onnx");
  ASSERT_TRUE(!!i8v);
  EXPECT_EQ(i8v->ints, (std::vector<int64_t>{-1, 5}));
  // A scalar (no dims) holds one value.
  onnx::TensorProto s = tensor(onnx::TensorProto::BOOL, {});
  s.add_int32_data(1);
  auto sv = readTensor(s, "m.onnx");
  ASSERT_TRUE(!!sv);
  EXPECT_EQ(sv->ints, (std::vector<int64_t>{1}));
}

TEST(OnnxTensorTest, SizesThatDisagreeAndOtherTypesAreErrors) {
  auto error = [](const onnx::TensorProto &t) {
    auto v = readTensor(t, "m.onnx");
    return v ? std::string("read") : llvm::toString(v.takeError());
  };
  onnx::TensorProto f = tensor(onnx::TensorProto::FLOAT, {3});
  f.set_raw_data(std::string(8, '\0'));
  EXPECT_EQ(error(f), "m.onnx: tensor 't': holds 8 bytes for dims that need 3 values of 4 bytes");
  onnx::TensorProto g = tensor(onnx::TensorProto::FLOAT, {2, 2});
  g.add_float_data(1.0f);
  EXPECT_EQ(error(g), "m.onnx: tensor 't': holds 1 values for dims that need 4 values");
  onnx::TensorProto n = tensor(onnx::TensorProto::FLOAT, {-1});
  EXPECT_EQ(error(n), "m.onnx: tensor 't': dims [-1] are negative or too large");
  onnx::TensorProto str = tensor(onnx::TensorProto::STRING, {1});
  str.add_string_data("x");
  EXPECT_EQ(error(str).rfind("m.onnx: tensor 't': data type 8 is not supported", 0), 0u)
      << error(str);
}

} // namespace
