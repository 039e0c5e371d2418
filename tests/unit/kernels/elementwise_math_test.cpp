// The elementwise table (runtime/kernels/ElementwiseMath.h) against itself,
// on every Highway target compiled in: for each row, the Highway function it
// names (the very tokens generated code prints) matches the row's scalar
// template evaluated in double, over random inputs and a tail. Binary rows
// and relu are one IEEE operation (exact); exp, tanh, the gelus and silu are held
// to the tolerances of elementwise_test.cpp. A new row needs no new test:
// it is checked here, exactly unless it gets a tolerance below.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/unit/kernels/elementwise_math_test.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/elementwise-inl.h"

#include <hwy/tests/hwy_gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
namespace tk = transfuse::kernels::HWY_NAMESPACE;

/// The allowed error of the vector form of `kind` at x against the double
/// reference `ref` (0: exact to fp32 rounding); y is a binary op's second operand.
double tolerance(math::Kind kind, double x, double y, double ref) {
  switch (kind) {
    case math::Kind::kPow:  // the rounding of y·log|x| scales the relative error
      return 2e-7 * (1 + std::fabs(y * std::log(std::fabs(x)))) * std::fabs(ref);
    case math::Kind::kExp: return 3e-7 * std::fabs(ref);
    case math::Kind::kTanh: return 3e-7;
    case math::Kind::kGelu: return 3e-7 * std::max(1.0, std::fabs(x));
    case math::Kind::kGeluTanh: return 5e-7 * std::max(1.0, std::fabs(x));
    case math::Kind::kSilu: return 3e-7 * std::max(1.0, std::fabs(x));
    case math::Kind::kSigmoid: return 3e-7;
    case math::Kind::kErf: return 2e-7;
    default: return 0.0;
  }
}

/// Evaluates `f(d, a, b)` vector by vector (a partial last vector through
/// LoadTail) and compares each lane with the table's scalar template.
template <int kArity, class F>
void CheckRow(math::Kind kind, const std::vector<float>& a, const std::vector<float>& b,
              const F& f) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d), n = a.size();
  std::vector<float> out(n + N);
  for (size_t i = 0; i < n; i += N) {
    const size_t m = std::min(N, n - i);
    const auto x = tk::LoadTail(d, a.data() + i, m, 0.0f);
    const auto y = tk::LoadTail(d, b.data() + i, m, 1.0f);
    hn::StoreU(f(d, x, y), d, out.data() + i);
  }
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double ref = kArity == 2 ? math::apply<double>(kind, a[i], b[i])
                                   : math::apply<double>(kind, a[i]);
    const double tol = tolerance(kind, a[i], b[i], ref);
    const bool ok = (std::isnan(out[i]) && std::isnan(ref)) || out[i] == static_cast<float>(ref) ||
                    std::fabs(out[i] - ref) <= tol;
    if (!ok && ++bad <= 3)
      ADD_FAILURE() << math::info(kind).enumerator << " (" << math::info(kind).vector
                    << ") at x=" << a[i] << (kArity == 2 ? " y=" + std::to_string(b[i]) : "")
                    << ": " << out[i] << " vs " << ref;
  }
}

void TestTableRowsMatchTheirTemplates() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-9.0f, 9.0f), positive(0.25f, 4.0f);
  const size_t n = 1000 + 3;  // a partial last vector on every target
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = wide(rng);
    b[i] = positive(rng) * (i % 2 ? -1.0f : 1.0f);  // no division by zero
    if (i % 5 == 0) b[i] = static_cast<float>(static_cast<int>(i / 5 % 6) - 3 + (i / 5 % 6 >= 3));
  }  // every fifth b an integer in [-3, 3] \ {0}: pow of negative bases
  a[0] = 0.0f, a[1] = -0.0f, a[2] = 1e-30f, a[3] = -1e-30f;
#define TRANSFUSE_CHECK_ROW(kind, arity, scalar, vector, tag)                      \
  CheckRow<arity>(math::Kind::kind, a, b, [](auto d, auto x, auto y) {             \
    (void)d, (void)y;                                                              \
    if constexpr (arity == 2 && tag) return vector(d, x, y);                       \
    else if constexpr (arity == 2) return vector(x, y);                            \
    else if constexpr (tag) return vector(d, x);                                   \
    else return vector(x);                                                         \
  });
  TRANSFUSE_ELEMENTWISE_OPS(TRANSFUSE_CHECK_ROW)
#undef TRANSFUSE_CHECK_ROW
}

}  // namespace
}  // namespace transfuse::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace transfuse::kernels {
namespace {
HWY_BEFORE_TEST(ElementwiseMathTest);
HWY_EXPORT_AND_TEST_P(ElementwiseMathTest, TestTableRowsMatchTheirTemplates);
}  // namespace
}  // namespace transfuse::kernels
#endif
