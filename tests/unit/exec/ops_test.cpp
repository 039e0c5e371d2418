// The generic ops of runtime/exec/Ops.h against scalar references written
// here independently (index arithmetic per element, double where rounding
// matters), over ranks 1..4, NumPy broadcasting (size-1 dims, missing leading
// dims, [1] and rank-0 operands), odd sizes, sizes 0, and sizes big enough to
// run on the thread pool. Every output buffer has a guard element past its
// end that must stay untouched.
//
// Tolerances: binary, select, scale, relu, transpose, concat, slice, gather,
// masks, reduce max: exact. exp |err| <= 3e-7·|ref|, tanh <= 3e-7 absolute
// (std:: float functions, <= 1 ulp). gelu <= 3e-7·max(1,|x|), gelu_tanh
// <= 5e-7·max(1,|x|) (the kernels' stated bounds). reduce sum/mean
// <= 1e-6·Σ|x| (/ count for mean). softmax <= 2e-6·ref + 1e-9. matmul
// <= 1.2·(K+2)·u·Σ_k|a·b| with u = 2^-24 (the GEMM test's bound).
// positional encoding <= 2e-7 absolute (fp32 rounding of a double value).
#include "runtime/exec/Ops.h"
#include "runtime/kernels/ElementwiseMath.h"

#include "runtime/Philox.h"
#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace transfuse::exec {
namespace {

namespace math = kernels::math;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint8_t kGuardByte = 0xA5;

std::string str(const Shape& s) {
  std::string r = "[";
  for (int i = 0; i < s.rank; ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Shape cat(const Shape& a, std::initializer_list<int64_t> tail) {
  Shape s = a;
  for (int64_t v : tail) s.dims[s.rank++] = v;
  return s;
}

// Multi-index of flat index `flat` in shape s.
std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.rank);
  for (int d = s.rank - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (int d = 0; d < s.rank; ++d) f = f * s[d] + idx[d];
  return f;
}

// The flat index into s read by output element `flat` of os (NumPy broadcasting).
int64_t bcastIndex(const Shape& s, const Shape& os, int64_t flat) {
  const std::vector<int64_t> o = unravel(flat, os);
  int64_t f = 0;
  for (int d = 0; d < s.rank; ++d) f = f * s[d] + (s[d] == 1 ? 0 : o[d + os.rank - s.rank]);
  return f;
}

std::vector<float> randoms(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<uint8_t> randomBytes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

// n floats of NaN plus one guard element.
std::vector<float> outBuf(int64_t n) { return std::vector<float>(n + 1, std::nanf("")); }
void expectGuard(const std::vector<float>& v) {
  EXPECT_TRUE(std::isnan(v.back())) << "wrote past the end";
}

// ---- binary ---------------------------------------------------------------

struct BCase {
  Shape a, b, out;
};

std::vector<BCase> binaryCases() {
  return {
      {{7}, {7}, {7}},
      {{2, 3, 5}, {2, 3, 5}, {2, 3, 5}},
      {{2, 3, 5}, {5}, {2, 3, 5}},
      {{2, 3, 5}, {3, 5}, {2, 3, 5}},
      {{2, 3, 5}, {1}, {2, 3, 5}},
      {{1}, {2, 3, 5}, {2, 3, 5}},
      {{5}, {2, 3, 5}, {2, 3, 5}},
      {{2, 1, 5}, {1, 3, 1}, {2, 3, 5}},
      {{2, 3, 1}, {2, 3, 4}, {2, 3, 4}},
      {{2, 1, 3, 5}, {4, 1, 5}, {2, 4, 3, 5}},
      {{3, 1, 1, 7}, {1, 2, 5, 1}, {3, 2, 5, 7}},
      {{1, 1}, {1}, {1, 1}},
      {{}, {3}, {3}},
      {{3}, {}, {3}},
      {{0, 5}, {5}, {0, 5}},
      {{2, 0, 3}, {1, 3}, {2, 0, 3}},
      // Big enough for the pool: flat, against a scalar, rows, general.
      {{70001}, {70001}, {70001}},
      {{70001}, {1}, {70001}},
      {{300, 257}, {257}, {300, 257}},
      {{2, 300, 131}, {2, 1, 131}, {2, 300, 131}},
  };
}

TEST(OpsBinary, MatchesScalarReference) {
  rt::ThreadPool pool(3);
  for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
    for (ElementwiseKind op : {ElementwiseKind::kAdd, ElementwiseKind::kSub, ElementwiseKind::kMul,
                               ElementwiseKind::kDiv}) {
      for (const BCase& c : binaryCases()) {
        SCOPED_TRACE(str(c.a) + " op" + std::to_string(int(op)) + " " + str(c.b) + " -> " +
                     str(c.out) + (p ? " pool" : ""));
        std::vector<float> a = randoms(c.a.numel(), 1);
        std::vector<float> b = randoms(c.b.numel(), 2, 0.5f, 2.0f);  // no division by 0
        for (size_t i = 0; i < b.size(); i += 2) b[i] = -b[i];
        std::vector<float> out = outBuf(c.out.numel());
        binary(op, a.data(), c.a, b.data(), c.b, out.data(), c.out, p);
        int bad = 0;
        for (int64_t i = 0; i < c.out.numel(); ++i) {
          const double x = a[bcastIndex(c.a, c.out, i)], y = b[bcastIndex(c.b, c.out, i)];
          const double r = math::apply(op, x, y);
          // One IEEE operation: correctly rounded, so the fp32 result is exact.
          if (out[i] != static_cast<float>(r) && ++bad <= 3)
            ADD_FAILURE() << "at " << i << ": " << out[i] << " != " << static_cast<float>(r);
        }
        expectGuard(out);
      }
    }
  }
}

// ---- unary, scale ---------------------------------------------------------

// The definition (ElementwiseMath.h), evaluated in double.
double refUnary(ElementwiseKind op, double x) { return math::apply(op, x); }

double unaryTol(ElementwiseKind op, double x, double ref) {
  switch (op) {
    case ElementwiseKind::kRelu: return 0;
    case ElementwiseKind::kExp: return 3e-7 * std::fabs(ref);
    case ElementwiseKind::kTanh: return 3e-7;
    case ElementwiseKind::kGelu: return 3e-7 * std::max(1.0, std::fabs(x));
    case ElementwiseKind::kGeluTanh: return 5e-7 * std::max(1.0, std::fabs(x));
    case ElementwiseKind::kSigmoid: return 3e-7;
    case ElementwiseKind::kErf: return 2e-7;
    default: return 0;
  }
}

// Inverted dropout: each element kept (scaled by 1/(1 - rate)) exactly when
// the Philox draw of its index says so, in place or not, on any thread count.
TEST(OpsDropout, MatchesThePhiloxDraw) {
  rt::ThreadPool pool(2);
  for (int64_t n : {0, 1, 1023, 1024, 5000}) {
    std::vector<float> x(n), y(n), z(n);
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f + 0.001f * static_cast<float>(i);
    exec::dropout(x.data(), y.data(), n, 0.25, 9, 4, 3, nullptr);
    z = x;
    exec::dropout(z.data(), z.data(), n, 0.25, 9, 4, 3, &pool);  // in place, 2 threads
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool kept = rt::philoxUniform(9, 4, 3, static_cast<uint64_t>(i)) >= 0.25;
      dropped += !kept;
      ASSERT_EQ(y[i], kept ? x[i] * static_cast<float>(1.0 / 0.75) : 0.0f) << i;
      ASSERT_EQ(z[i], y[i]) << i;
    }
    if (n >= 1000) EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.05);
  }
}

TEST(OpsUnary, MatchesScalarReference) {
  rt::ThreadPool pool(3);
  for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
    for (ElementwiseKind op : {ElementwiseKind::kRelu, ElementwiseKind::kExp,
                               ElementwiseKind::kTanh, ElementwiseKind::kGelu,
                               ElementwiseKind::kGeluTanh, ElementwiseKind::kSigmoid,
                               ElementwiseKind::kErf}) {
      for (int64_t n : {0, 1, 2, 7, 33, 100, 1001, 70001}) {
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE("op " + std::to_string(int(op)) + " n " + std::to_string(n) +
                       (inPlace ? " in place" : "") + (p ? " pool" : ""));
          const std::vector<float> x = randoms(n, 3, -6.0f, 6.0f);
          std::vector<float> y = outBuf(n);
          if (inPlace) {
            std::copy(x.begin(), x.end(), y.begin());
            unary(op, y.data(), y.data(), n, p);
          } else {
            unary(op, x.data(), y.data(), n, p);
          }
          int bad = 0;
          for (int64_t i = 0; i < n; ++i) {
            const double ref = refUnary(op, x[i]);
            if (!(std::fabs(y[i] - ref) <= unaryTol(op, x[i], ref)) && ++bad <= 3)
              ADD_FAILURE() << "x " << x[i] << ": " << y[i] << " vs " << ref;
          }
          expectGuard(y);
        }
      }
    }
  }
}

TEST(OpsScale, MatchesScalarReference) {
  rt::ThreadPool pool(3);
  for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
    for (int64_t n : {0, 1, 5, 17, 70001}) {
      const std::vector<float> x = randoms(n, 4);
      std::vector<float> y = outBuf(n);
      scale(x.data(), 0.125f * 3, y.data(), n, p);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 0.375f) << "n " << n << " i " << i;
      expectGuard(y);
      scale(y.data(), -2.0f, y.data(), n, p);  // in place
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 0.375f * -2.0f);
    }
  }
}

// ---- select -----------------------------------------------------------------

TEST(OpsSelect, MatchesScalarReference) {
  struct Case {
    Shape c, a, b, out;
  };
  const Case cases[] = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
      {{4, 4}, {2, 3, 4, 4}, {1}, {2, 3, 4, 4}},       // causal mask, -inf fill
      {{2, 1, 1, 5}, {2, 3, 4, 5}, {}, {2, 3, 4, 5}},  // key padding mask
      {{1}, {3}, {3}, {3}},
      {{3, 1}, {1, 4}, {3, 4}, {3, 4}},
      {{7}, {1}, {7}, {7}},
      {{0, 3}, {3}, {1}, {0, 3}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(str(k.c) + " ? " + str(k.a) + " : " + str(k.b) + " -> " + str(k.out));
    std::vector<uint8_t> c = randomBytes(k.c.numel(), 5);
    for (uint8_t& v : c) v &= 1;
    const std::vector<float> a = randoms(k.a.numel(), 6), b = randoms(k.b.numel(), 7);
    std::vector<float> out = outBuf(k.out.numel());
    select(c.data(), k.c, a.data(), k.a, b.data(), k.b, out.data(), k.out);
    for (int64_t i = 0; i < k.out.numel(); ++i) {
      const float ref = c[bcastIndex(k.c, k.out, i)] ? a[bcastIndex(k.a, k.out, i)]
                                                      : b[bcastIndex(k.b, k.out, i)];
      ASSERT_EQ(out[i], ref) << "at " << i;
    }
    expectGuard(out);
  }
}

// ---- transpose, concat, slice (byte-generic) ---------------------------------

void expectBytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(int(got[i]), int(want[i])) << "byte " << i;
}

TEST(OpsTranspose, MatchesScalarReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{5}, {0}},
      {{3, 4}, {1, 0}},
      {{3, 4}, {0, 1}},
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {1, 0, 2}},  // keeps the last axis: runs of 4
      {{2, 3, 4, 5}, {0, 2, 1, 3}},
      {{2, 3, 4, 5}, {3, 2, 1, 0}},
      {{2, 3, 4, 5}, {0, 1, 2, 3}},
      {{2, 3, 4, 5}, {1, 3, 0, 2}},
      {{1, 3, 1, 4}, {2, 3, 0, 1}},
      {{7, 1}, {1, 0}},
      {{2, 0, 3}, {2, 1, 0}},
      {{33, 65}, {1, 0}},
  };
  for (size_t es : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    for (const Case& c : cases) {
      Shape ys;
      ys.rank = c.x.rank;
      for (int i = 0; i < ys.rank; ++i) ys.dims[i] = c.x[c.perm[i]];
      SCOPED_TRACE(str(c.x) + " -> " + str(ys) + " elem " + std::to_string(es));
      const int64_t n = c.x.numel();
      const std::vector<uint8_t> x = randomBytes(n * es, 8);
      std::vector<uint8_t> y(n * es + 1, kGuardByte), want(n * es + 1, kGuardByte);
      for (int64_t o = 0; o < n; ++o) {
        const std::vector<int64_t> yi = unravel(o, ys);
        std::vector<int64_t> xi(c.x.rank);
        for (int i = 0; i < ys.rank; ++i) xi[c.perm[i]] = yi[i];
        std::memcpy(&want[o * es], &x[ravel(xi, c.x) * es], es);
      }
      transpose(x.data(), c.x, c.perm.data(), y.data(), es);
      expectBytes(y, want);
    }
  }
}

TEST(OpsConcat, MatchesScalarReference) {
  struct Case {
    std::vector<Shape> in;
    int axis;
  };
  const Case cases[] = {
      {{{3}, {4}, {0}}, 0},
      {{{5}}, 0},
      {{{2, 3}, {2, 1}, {2, 4}}, 1},
      {{{2, 3}, {1, 3}}, 0},
      {{{2, 3, 4}, {2, 0, 4}, {2, 2, 4}}, 1},
      {{{2, 3, 4}, {2, 3, 1}}, 2},
      {{{1, 2, 3, 2}, {1, 2, 3, 5}}, 3},
      {{{2, 3, 4, 5}, {1, 3, 4, 5}}, 0},
      {{{2, 1, 4, 5}, {2, 2, 4, 5}, {2, 1, 4, 5}}, 1},
      {{{0, 3}, {0, 2}}, 1},
  };
  for (size_t es : {size_t{1}, size_t{4}, size_t{8}}) {
    for (const Case& c : cases) {
      Shape os = c.in[0];
      os.dims[c.axis] = 0;
      std::vector<std::vector<uint8_t>> data;
      std::vector<const void*> ptrs;
      for (size_t k = 0; k < c.in.size(); ++k) {
        os.dims[c.axis] += c.in[k][c.axis];
        data.push_back(randomBytes(c.in[k].numel() * es, 9 + k));
        ptrs.push_back(data.back().data());
      }
      SCOPED_TRACE(str(os) + " axis " + std::to_string(c.axis) + " elem " + std::to_string(es));
      const int64_t n = os.numel();
      std::vector<uint8_t> y(n * es + 1, kGuardByte), want(n * es + 1, kGuardByte);
      for (int64_t o = 0; o < n; ++o) {
        std::vector<int64_t> idx = unravel(o, os);
        size_t k = 0;
        while (idx[c.axis] >= c.in[k][c.axis]) idx[c.axis] -= c.in[k++][c.axis];
        std::memcpy(&want[o * es], &data[k][ravel(idx, c.in[k]) * es], es);
      }
      concat(ptrs.data(), c.in.data(), static_cast<int>(c.in.size()), c.axis, y.data(), es);
      expectBytes(y, want);
    }
  }
}

TEST(OpsSlice, MatchesScalarReference) {
  struct Case {
    Shape x;
    int axis;
    int64_t start, length;
  };
  const Case cases[] = {
      {{7}, 0, 2, 3},          {{7}, 0, 0, 0},          {{7}, 0, 0, 7},
      {{7}, 0, 6, 1},          {{3, 5}, 1, 1, 3},       {{3, 5}, 0, 2, 1},
      {{2, 3, 4}, 1, 1, 2},    {{2, 3, 4}, 2, 3, 1},    {{2, 3, 4}, 0, 0, 2},
      {{2, 3, 4, 5}, 3, 1, 4}, {{2, 3, 4, 5}, 0, 1, 1}, {{2, 3, 4, 5}, 2, 1, 2},
      {{0, 4}, 1, 1, 2},       {{3, 4}, 1, 2, 0},
  };
  for (size_t es : {size_t{1}, size_t{4}, size_t{8}}) {
    for (const Case& c : cases) {
      Shape ys = c.x;
      ys.dims[c.axis] = c.length;
      SCOPED_TRACE(str(c.x) + " axis " + std::to_string(c.axis) + " [" +
                   std::to_string(c.start) + ", +" + std::to_string(c.length) + ") elem " +
                   std::to_string(es));
      const std::vector<uint8_t> x = randomBytes(c.x.numel() * es, 12);
      const int64_t n = ys.numel();
      std::vector<uint8_t> y(n * es + 1, kGuardByte), want(n * es + 1, kGuardByte);
      for (int64_t o = 0; o < n; ++o) {
        std::vector<int64_t> idx = unravel(o, ys);
        idx[c.axis] += c.start;
        std::memcpy(&want[o * es], &x[ravel(idx, c.x) * es], es);
      }
      slice(x.data(), c.x, c.axis, c.start, c.length, y.data(), es);
      expectBytes(y, want);
    }
  }
}

// ---- unfold -------------------------------------------------------------------

// unfold against its definition element by element (image pixel (b, c, y, x)
// goes to row (y / ph)·(w / pw) + x / pw, column (c·ph + y % ph)·pw + x % pw),
// and unfoldGrad back to the image bit for bit; a guard element after each
// output stays untouched.
TEST(OpsUnfold, MatchesDefinitionAndGradInverts) {
  struct Case {
    int64_t b, c, h, w, ph, pw;
  };
  const Case cases[] = {{1, 1, 2, 2, 1, 1}, {2, 3, 8, 8, 4, 4}, {1, 2, 6, 9, 2, 3},
                        {3, 3, 16, 16, 16, 16}, {2, 1, 4, 10, 4, 5}, {0, 3, 4, 4, 2, 2}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::to_string(k.b) + "x" + std::to_string(k.c) + "x" + std::to_string(k.h) +
                 "x" + std::to_string(k.w) + " patch " + std::to_string(k.ph) + "x" +
                 std::to_string(k.pw));
    const int64_t n = k.b * k.c * k.h * k.w, across = k.w / k.pw;
    const int64_t rows = (k.h / k.ph) * across, cols = k.c * k.ph * k.pw;
    const std::vector<float> x = randoms(n, 21);
    std::vector<float> y = outBuf(n), back = outBuf(n);
    exec::unfold(x.data(), y.data(), k.b, k.c, k.h, k.w, k.ph, k.pw);
    for (int64_t b = 0; b < k.b; ++b)
      for (int64_t c = 0; c < k.c; ++c)
        for (int64_t yy = 0; yy < k.h; ++yy)
          for (int64_t xx = 0; xx < k.w; ++xx) {
            const int64_t row = (yy / k.ph) * across + xx / k.pw;
            const int64_t col = (c * k.ph + yy % k.ph) * k.pw + xx % k.pw;
            ASSERT_EQ(y[(b * rows + row) * cols + col], x[((b * k.c + c) * k.h + yy) * k.w + xx]);
          }
    EXPECT_TRUE(std::isnan(y[n])) << "wrote past the end";
    exec::unfoldGrad(y.data(), back.data(), k.b, k.c, k.h, k.w, k.ph, k.pw);
    EXPECT_TRUE(n == 0 || std::memcmp(back.data(), x.data(), n * sizeof(float)) == 0);
    EXPECT_TRUE(std::isnan(back[n])) << "wrote past the end";
  }
}

// ---- rotary -------------------------------------------------------------------

// rotary against its definition in double (θ = fp32(p · f), p = offset + s),
// full and partial rotation, any offset; the inverse rotation brings x back
// within rounding, in place; a guard element after the output stays untouched.
TEST(OpsRotary, MatchesDefinitionAndInverseUndoes) {
  struct Case {
    int64_t outer, seq, width, headDim, pairs, offset;
  };
  const Case cases[] = {{1, 1, 4, 4, 2, 0},    {2, 5, 64, 16, 8, 3}, {3, 7, 96, 32, 12, 100},
                        {1, 3, 24, 8, 4, 4095}, {2, 4, 40, 20, 10, 1}, {0, 3, 8, 8, 4, 0}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::to_string(k.outer) + "x" + std::to_string(k.seq) + "x" +
                 std::to_string(k.width) + " head " + std::to_string(k.headDim) + " pairs " +
                 std::to_string(k.pairs) + " offset " + std::to_string(k.offset));
    const int64_t n = k.outer * k.seq * k.width;
    const std::vector<float> x = randoms(n, 35);
    std::vector<float> freq(k.pairs);
    for (int64_t i = 0; i < k.pairs; ++i) freq[i] = std::pow(10000.0f, -2.0f * i / k.headDim);
    std::vector<float> y = outBuf(n);
    exec::rotary(x.data(), y.data(), k.outer, k.seq, k.width, k.headDim, freq.data(), k.pairs,
                 k.offset, false);
    for (int64_t r = 0; r < k.outer * k.seq; ++r)
      for (int64_t h = 0; h < k.width; h += k.headDim) {
        const float* xr = x.data() + r * k.width + h;
        const float* yr = y.data() + r * k.width + h;
        const float p = static_cast<float>(k.offset + r % k.seq);
        for (int64_t i = 0; i < k.pairs; ++i) {
          const double angle = static_cast<float>(p * freq[i]);
          const double c = std::cos(angle), sn = std::sin(angle);
          ASSERT_NEAR(yr[i], xr[i] * c - xr[i + k.pairs] * sn, 1e-6) << r << " " << h << " " << i;
          ASSERT_NEAR(yr[i + k.pairs], xr[i + k.pairs] * c + xr[i] * sn, 1e-6);
        }
        for (int64_t i = 2 * k.pairs; i < k.headDim; ++i) ASSERT_EQ(yr[i], xr[i]);
      }
    EXPECT_TRUE(std::isnan(y[n])) << "wrote past the end";
    exec::rotary(y.data(), y.data(), k.outer, k.seq, k.width, k.headDim, freq.data(), k.pairs,
                 k.offset, true);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-6) << i;
  }
}

// ---- reduce -------------------------------------------------------------------

TEST(OpsReduce, MatchesScalarReference) {
  struct Case {
    Shape x;
    uint32_t mask;
  };
  const Case cases[] = {
      {{7}, 1},          {{7}, 0},          {{3, 5}, 1},       {{3, 5}, 2},
      {{3, 5}, 3},       {{2, 3, 4}, 5},    {{2, 3, 4}, 2},    {{2, 3, 4}, 7},
      {{2, 3, 4}, 4},    {{2, 3, 4, 5}, 6}, {{2, 3, 4, 5}, 9}, {{2, 3, 4, 5}, 15},
      {{2, 3, 4, 5}, 8}, {{2, 1, 4}, 2},    {{1}, 1},          {{1000, 3}, 1},
      {{3, 1001}, 2},    {{0, 4}, 1},       {{3, 0}, 2},       {{0, 4}, 2},
      {{37, 70}, 1},     {{5, 6, 130}, 3},  {{4, 0, 9}, 3},    // leading axes: columnSums
  };
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    for (const Case& c : cases) {
      Shape ys;
      for (int d = 0; d < c.x.rank; ++d)
        if (!((c.mask >> d) & 1)) ys.dims[ys.rank++] = c.x[d];
      SCOPED_TRACE("op " + std::to_string(int(op)) + " " + str(c.x) + " mask " +
                   std::to_string(c.mask) + " -> " + str(ys));
      const std::vector<float> x = randoms(c.x.numel(), 13, -3.0f, 3.0f);
      const int64_t ny = ys.numel();
      std::vector<double> sum(ny, 0.0), absSum(ny, 0.0), mx(ny, -INFINITY);
      std::vector<int64_t> count(ny, 0);
      for (int64_t i = 0; i < c.x.numel(); ++i) {
        const std::vector<int64_t> xi = unravel(i, c.x);
        std::vector<int64_t> yi;
        for (int d = 0; d < c.x.rank; ++d)
          if (!((c.mask >> d) & 1)) yi.push_back(xi[d]);
        const int64_t o = ravel(yi, ys);
        sum[o] += x[i];
        absSum[o] += std::fabs(x[i]);
        mx[o] = std::max(mx[o], double(x[i]));
        ++count[o];
      }
      std::vector<float> y = outBuf(ny);
      reduce(op, x.data(), c.x, c.mask, y.data());
      for (int64_t o = 0; o < ny; ++o) {
        if (op == ReduceOp::kMax) {
          ASSERT_EQ(y[o], static_cast<float>(mx[o])) << "at " << o;  // -inf when empty
        } else if (op == ReduceOp::kMean && count[o] == 0) {
          ASSERT_TRUE(std::isnan(y[o])) << "a mean over nothing is 0/0, at " << o;
        } else {
          const double div = op == ReduceOp::kMean ? double(count[o]) : 1.0;
          ASSERT_NEAR(y[o], sum[o] / div, 1e-6 * absSum[o] / div) << "at " << o;
        }
      }
      expectGuard(y);
    }
  }
}

// ---- softmax ------------------------------------------------------------------

TEST(OpsSoftmax, MatchesScalarReference) {
  struct Case {
    Shape x;
    int axis;
  };
  const Case cases[] = {
      {{7}, 0},          {{1}, 0},          {{3, 5}, 1},       {{3, 5}, 0},
      {{2, 3, 4}, 0},    {{2, 3, 4}, 1},    {{2, 3, 4}, 2},    {{2, 3, 4, 5}, 2},
      {{2, 3, 4, 5}, 0}, {{2, 1, 4, 33}, 3}, {{2, 4, 1}, 1},   {{4, 1}, 1},
      {{0, 5}, 1},       {{3, 0}, 0},       {{300, 257}, 1},   {{5, 17, 9}, 1},
  };
  rt::ThreadPool pool(3);
  for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(str(c.x) + " axis " + std::to_string(c.axis) + (p ? " pool" : ""));
      const int64_t n = c.x.numel(), width = c.x[c.axis];
      int64_t inner = 1;
      for (int d = c.axis + 1; d < c.x.rank; ++d) inner *= c.x[d];
      const int64_t outer = width * inner == 0 ? 0 : n / (width * inner);
      std::vector<float> x = randoms(n, 14, -8.0f, 8.0f);
      // Offsets up to 150 apart: a wrong maximum overflows exp or loses the
      // row to underflow.
      for (int64_t i = 0; i < n; ++i) x[i] += 25.0f * static_cast<float>(i % 7);
      // Row (outer 0, inner 0) fully masked; row (last outer, last inner) partly.
      if (n > 0) {
        for (int64_t k = 0; k < width; ++k) x[k * inner] = -kInf;
        if (outer * inner > 1)
          for (int64_t k = 0; k < width; k += 2) x[((outer - 1) * width + k) * inner + inner - 1] = -kInf;
      }
      std::vector<float> y = outBuf(n);
      softmax(x.data(), c.x, c.axis, y.data(), p);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          auto at = [&](int64_t k) { return (o * width + k) * inner + j; };
          double m = -INFINITY, s = 0;
          for (int64_t k = 0; k < width; ++k) m = std::max(m, double(x[at(k)]));
          for (int64_t k = 0; k < width; ++k)
            s += m == -INFINITY ? 0.0 : std::exp(double(x[at(k)]) - m);
          for (int64_t k = 0; k < width; ++k) {
            const double ref = s == 0 ? 0.0 : std::exp(double(x[at(k)]) - m) / s;
            ASSERT_NEAR(y[at(k)], ref, 2e-6 * ref + 1e-9) << "o " << o << " j " << j << " k " << k;
          }
        }
      }
      expectGuard(y);
    }
  }
}

// ---- matmul -------------------------------------------------------------------

TEST(OpsMatmul, MatchesScalarReference) {
  struct Case {
    Shape batchA, batchB, batchOut;
    int64_t M, K, N;
  };
  const Case cases[] = {
      {{}, {}, {}, 3, 5, 4},
      {{}, {}, {}, 1, 1, 1},
      {{2, 3}, {}, {2, 3}, 4, 6, 5},       // [B,S,D]·[D,E]: one GEMM when !transA
      {{4}, {4}, {4}, 7, 9, 17},
      {{2, 3}, {2, 3}, {2, 3}, 5, 8, 5},   // per-head attention scores
      {{2, 1}, {3}, {2, 3}, 3, 4, 6},      // both batches broadcast
      {{1}, {5}, {5}, 2, 3, 33},
      {{}, {2, 2}, {2, 2}, 3, 2, 4},       // a shared, b varies
      {{3}, {1}, {3}, 4, 5, 3},            // b shared through a size-1 dim
      {{2}, {2}, {2}, 3, 0, 4},            // K = 0: zeros
      {{2}, {}, {2}, 0, 3, 4},             // M = 0
      {{0}, {}, {0}, 3, 3, 3},             // no matrices
      {{2}, {}, {2}, 64, 100, 65},
      {{}, {}, {3}, 2, 3, 4},              // a and b both broadcast
      {{2, 1}, {1}, {2, 3}, 3, 5, 2},      // b shared, a broadcast in part
  };
  constexpr double kU = 1.0 / (1 << 24);
  rt::ThreadPool pool(3);
  for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const Shape as = ta ? cat(c.batchA, {c.K, c.M}) : cat(c.batchA, {c.M, c.K});
          const Shape bs = tb ? cat(c.batchB, {c.N, c.K}) : cat(c.batchB, {c.K, c.N});
          const Shape os = cat(c.batchOut, {c.M, c.N});
          SCOPED_TRACE(str(as) + (ta ? "ᵀ" : "") + " · " + str(bs) + (tb ? "ᵀ" : "") + " -> " +
                       str(os) + (p ? " pool" : ""));
          const std::vector<float> a = randoms(as.numel(), 15), b = randoms(bs.numel(), 16);
          std::vector<float> out = outBuf(os.numel());
          matmul(a.data(), as, ta, b.data(), bs, tb, out.data(), os, p);
          const Shape ob = c.batchOut;
          for (int64_t bi = 0; bi < ob.numel(); ++bi) {
            const int64_t aBase = bcastIndex(c.batchA, ob, bi) * c.M * c.K;
            const int64_t bBase = bcastIndex(c.batchB, ob, bi) * c.K * c.N;
            for (int64_t i = 0; i < c.M; ++i)
              for (int64_t j = 0; j < c.N; ++j) {
                double s = 0, sAbs = 0;
                for (int64_t k = 0; k < c.K; ++k) {
                  const double x = a[aBase + (ta ? k * c.M + i : i * c.K + k)];
                  const double y = b[bBase + (tb ? j * c.K + k : k * c.N + j)];
                  s += x * y;
                  sAbs += std::fabs(x * y);
                }
                ASSERT_NEAR(out[(bi * c.M + i) * c.N + j], s, 1.2 * (c.K + 2) * kU * sAbs)
                    << "batch " << bi << " at " << i << ", " << j;
              }
          }
          expectGuard(out);
        }
      }
    }
  }
}

// ---- weight_grad ---------------------------------------------------------------

TEST(OpsWeightGrad, MatchesScalarReferenceAndThreadsAgree) {
  struct Case {
    Shape lead;
    int64_t K, N;
  };
  const Case cases[] = {
      {{3, 5}, 4, 6},     {{1}, 1, 1},     {{2, 31}, 64, 96},  // rows over many batches
      {{7}, 33, 17},      {{0, 4}, 3, 5},  // no rows: zeros
      {{2, 3, 4}, 5, 3},
  };
  constexpr double kU = 1.0 / (1 << 24);
  rt::ThreadPool pool(3);
  for (const Case& c : cases) {
    const Shape xs = cat(c.lead, {c.K}), gs = cat(c.lead, {c.N});
    SCOPED_TRACE(str(xs) + " " + str(gs));
    const std::vector<float> x = randoms(xs.numel(), 21), g = randoms(gs.numel(), 22);
    std::vector<float> serial = outBuf(c.K * c.N), threaded = outBuf(c.K * c.N);
    weightGrad(x.data(), xs, g.data(), gs, serial.data(), nullptr);
    weightGrad(x.data(), xs, g.data(), gs, threaded.data(), &pool);
    const int64_t rows = c.lead.numel();
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = 0, sAbs = 0;
        for (int64_t r = 0; r < rows; ++r) {
          s += double(x[r * c.K + k]) * g[r * c.N + n];
          sAbs += std::fabs(double(x[r * c.K + k]) * g[r * c.N + n]);
        }
        ASSERT_NEAR(serial[k * c.N + n], s, 1.2 * (rows + 2) * kU * sAbs) << k << ", " << n;
      }
    EXPECT_EQ(0, std::memcmp(serial.data(), threaded.data(), sizeof(float) * c.K * c.N));
    expectGuard(serial);
    expectGuard(threaded);
  }
}

// ---- gather -------------------------------------------------------------------

TEST(OpsGather, CopiesTableRows) {
  const int64_t vocab = 11;
  for (int64_t dim : {0, 1, 5, 16}) {
    const std::vector<float> table = randoms(vocab * dim, 17);
    for (const Shape& is : {Shape{2, 3}, Shape{4}, Shape{0}, Shape{2, 2, 2}, Shape{1, 3, 1, 2}}) {
      SCOPED_TRACE(str(is) + " dim " + std::to_string(dim));
      std::vector<int32_t> ids(is.numel());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % vocab);
      if (!ids.empty()) ids[0] = 0, ids.back() = vocab - 1;
      std::vector<float> out = outBuf(is.numel() * dim);
      const rt::Status st = gather(table.data(), vocab, dim, ids.data(), is, "input 'x'", out.data());
      ASSERT_TRUE(st.isOk()) << st.message();
      for (int64_t i = 0; i < is.numel(); ++i)
        for (int64_t j = 0; j < dim; ++j) ASSERT_EQ(out[i * dim + j], table[ids[i] * dim + j]);
      expectGuard(out);
    }
  }
}

TEST(OpsGather, OutOfRangeIdIsAnErrorAndWritesNothing) {
  const int64_t vocab = 23, dim = 4;
  const std::vector<float> table = randoms(vocab * dim, 18);
  struct Case {
    Shape shape;
    int64_t badAt;
    int32_t id;
    const char* name;
    std::string message;
  };
  const Case cases[] = {
      {{2, 4}, 7, 99, "input 'src_tokens'",
       "token id 99 in input 'src_tokens' at [1, 3] is outside the vocabulary [0, 23)"},
      {{5}, 2, -1, "input 'tgt_tokens'",
       "token id -1 in input 'tgt_tokens' at [2] is outside the vocabulary [0, 23)"},
      {{2, 3, 2}, 11, 23, "input 'ids'",  // id == vocab, the last element
       "token id 23 in input 'ids' at [1, 2, 1] is outside the vocabulary [0, 23)"},
  };
  for (const Case& c : cases) {
    std::vector<int32_t> ids(c.shape.numel(), 5);
    ids[c.badAt] = c.id;
    std::vector<float> out(c.shape.numel() * dim + 1, -7.0f);
    const rt::Status st = gather(table.data(), vocab, dim, ids.data(), c.shape, c.name, out.data());
    ASSERT_FALSE(st.isOk());
    EXPECT_EQ(st.message(), c.message);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], -7.0f) << "wrote element " << i;
  }
  // The first bad id (in row-major order) is the one reported.
  std::vector<int32_t> ids = {1, 30, 2, -5};
  std::vector<float> out(4 * dim);
  const rt::Status st = gather(table.data(), vocab, dim, ids.data(), Shape{2, 2}, "input 't'", out.data());
  EXPECT_EQ(st.message(), "token id 30 in input 't' at [0, 1] is outside the vocabulary [0, 23)");
}

// ---- masks, positions, copy -----------------------------------------------------

TEST(OpsMasks, KeyPaddingMask) {
  for (int64_t padId : {0, 1, 100000}) {
    for (int64_t n : {0, 1, 13}) {
      std::vector<int32_t> tok(n);
      for (int64_t i = 0; i < n; ++i) tok[i] = i % 3 == 0 ? static_cast<int32_t>(padId) : int32_t(i);
      std::vector<uint8_t> out(n + 1, kGuardByte);
      keyPaddingMask(tok.data(), n, padId, out.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(int(out[i]), tok[i] != padId ? 1 : 0) << i;
      EXPECT_EQ(out[n], kGuardByte);
    }
  }
}

TEST(OpsMasks, CausalMaskIsBottomRightAligned) {
  for (auto [sq, sk] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {4, 4}, {1, 5}, {3, 7}, {5, 3}, {0, 3}, {2, 0}, {6, 6}}) {
    std::vector<uint8_t> out(sq * sk + 1, kGuardByte);
    causalMask(sq, sk, out.data());
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) {
        // Query i is at absolute position sk - sq + i and sees keys up to it.
        const int want = j <= sk - sq + i ? 1 : 0;
        ASSERT_EQ(int(out[i * sk + j]), want) << sq << "x" << sk << " at " << i << ", " << j;
      }
    EXPECT_EQ(out[sq * sk], kGuardByte);
  }
  std::vector<uint8_t> m(9);
  causalMask(3, 3, m.data());
  EXPECT_EQ(m, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
}

TEST(OpsPositionalEncoding, MatchesDoubleReference) {
  struct Case {
    int64_t length, offset, dim;
  };
  for (const Case& c : {Case{7, 0, 8}, Case{3, 1000, 6}, Case{5, 3, 5}, Case{0, 0, 4},
                        Case{1, 0, 1}, Case{4, 99999, 512}}) {
    std::vector<float> out = outBuf(c.length * c.dim);
    positionalEncoding(c.length, c.offset, c.dim, /*halves=*/false, out.data());
    for (int64_t p = 0; p < c.length; ++p)
      for (int64_t j = 0; j < c.dim; ++j) {
        const double angle = double(p + c.offset) / std::pow(10000.0, double(j / 2 * 2) / c.dim);
        const double ref = j % 2 ? std::cos(angle) : std::sin(angle);
        ASSERT_NEAR(out[p * c.dim + j], ref, 2e-7) << "p " << p << " j " << j;
      }
    expectGuard(out);
    if (c.dim % 2) continue;
    // Marian's halves: the same sines, then the same cosines (HF's
    // MarianSinusoidalPositionalEmbedding: pos / 10000^(2i/dim)).
    std::vector<float> halves = outBuf(c.length * c.dim);
    positionalEncoding(c.length, c.offset, c.dim, /*halves=*/true, halves.data());
    for (int64_t p = 0; p < c.length; ++p)
      for (int64_t i = 0; i < c.dim / 2; ++i) {
        const double angle = double(p + c.offset) / std::pow(10000.0, double(2 * i) / c.dim);
        ASSERT_NEAR(halves[p * c.dim + i], std::sin(angle), 2e-7) << "p " << p << " i " << i;
        ASSERT_NEAR(halves[p * c.dim + c.dim / 2 + i], std::cos(angle), 2e-7) << "p " << p;
      }
    expectGuard(halves);
  }
  std::vector<float> pe(2 * 4);
  positionalEncoding(2, 0, 4, false, pe.data());
  EXPECT_EQ(pe[0], 0.0f);  // sin 0
  EXPECT_EQ(pe[1], 1.0f);  // cos 0
  EXPECT_FLOAT_EQ(pe[4], static_cast<float>(std::sin(1.0)));
  EXPECT_FLOAT_EQ(pe[6], static_cast<float>(std::sin(0.01)));  // 1 / 10000^(2/4)
}

TEST(OpsCopy, CopiesBytes) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{4096}}) {
    const std::vector<uint8_t> x = randomBytes(n, 19);
    std::vector<uint8_t> y(n + 1, kGuardByte);
    copyBytes(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i]);
    EXPECT_EQ(y[n], kGuardByte);
    copyBytes(y.data(), y.data(), n);  // a result that is its own input
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i]);
  }
}

}  // namespace
}  // namespace transfuse::exec
