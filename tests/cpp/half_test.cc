// Test driver for opgen's 16-bit float types (opgen/half.h through opgen/kernel.h) and the aot
// dtype names (opgen/aot.h), run by tests/test_kernel_headers.py. Each mode reads raw
// little-endian arrays from a directory, converts or computes, and writes its results there;
// Python compares them with numpy.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "opgen/aot.h"
#include "opgen/kernel.h"

using opgen::bfloat16;
using opgen::half;

namespace {

template <typename T>
std::vector<T> read_array(const std::string &path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot read " + path);
  const std::streamsize bytes = f.tellg();
  f.seekg(0);
  std::vector<T> v(static_cast<size_t>(bytes) / sizeof(T));
  f.read(reinterpret_cast<char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return v;
}

template <typename T>
void write_array(const std::string &path, const std::vector<T> &v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

template <typename L>
std::vector<uint16_t> bits_of(const std::vector<L> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].bits;
  return out;
}

template <typename L>
std::vector<L> from_bits(const std::vector<uint16_t> &v) {
  std::vector<L> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = L::from_bits(v[i]);
  return out;
}
// ------------------------------------------------------------------------------ convert
// f32.bin, f64.bin, i64.bin, u16.bin -> <to>_from_<from>.bin
void convert(const std::string &d) {
  const auto f32 = read_array<float>(d + "/f32.bin");
  const auto f64 = read_array<double>(d + "/f64.bin");
  const auto i64 = read_array<int64_t>(d + "/i64.bin");
  const auto u16 = read_array<uint16_t>(d + "/u16.bin");
  std::vector<half> h32(f32.begin(), f32.end()), h64(f64.begin(), f64.end()), hi(i64.begin(), i64.end());
  std::vector<bfloat16> b32(f32.begin(), f32.end()), b64(f64.begin(), f64.end()), bi(i64.begin(), i64.end());
  write_array(d + "/f16_from_f32.bin", bits_of(h32));
  write_array(d + "/f16_from_f64.bin", bits_of(h64));
  write_array(d + "/f16_from_i64.bin", bits_of(hi));
  write_array(d + "/bf16_from_f32.bin", bits_of(b32));
  write_array(d + "/bf16_from_f64.bin", bits_of(b64));
  write_array(d + "/bf16_from_i64.bin", bits_of(bi));
  std::vector<float> fh(u16.size()), fb(u16.size());
  std::vector<uint16_t> b_from_h(u16.size());
  std::vector<uint8_t> nan_h(u16.size()), inf_h(u16.size());
  for (size_t i = 0; i < u16.size(); ++i) {
    const half h = half::from_bits(u16[i]);
    const bfloat16 b = bfloat16::from_bits(u16[i]);
    fh[i] = h;  // implicit conversion to float
    fb[i] = static_cast<float>(b);
    b_from_h[i] = bfloat16(h).bits;
    nan_h[i] = std::isnan(h) ? 1 : 0;  // std:: classification through the float conversion
    inf_h[i] = std::isinf(h) ? 1 : 0;
  }
  write_array(d + "/f32_from_f16.bin", fh);
  write_array(d + "/f32_from_bf16.bin", fb);
  write_array(d + "/bf16_from_f16.bin", b_from_h);
  write_array(d + "/isnan_f16.bin", nan_h);
  write_array(d + "/isinf_f16.bin", inf_h);
}

// -------------------------------------------------------------------------------- arith
// a.bin, b.bin (16-bit patterns of type L) -> results rounded back into L, and comparisons
template <typename L>
void arith_impl(const std::string &d, const std::string &tag) {
  const auto a = from_bits<L>(read_array<uint16_t>(d + "/a_" + tag + ".bin"));
  const auto b = from_bits<L>(read_array<uint16_t>(d + "/b_" + tag + ".bin"));
  const size_t n = a.size();
  std::vector<L> add(n), sub(n), mul(n), div(n), fma(n), cadd(n), cmul(n), mixd(n), mixi(n), neg(n);
  std::vector<float> mul_f(n);
  std::vector<uint8_t> lt(n), eq(n), ge(n);
  for (size_t i = 0; i < n; ++i) {
    add[i] = a[i] + b[i];           // float sum, rounded once
    sub[i] = a[i] - b[i];
    mul[i] = a[i] * b[i];
    div[i] = a[i] / b[i];
    fma[i] = a[i] * b[i] + a[i];    // whole expression in float, rounded once
    L c = a[i];
    c += b[i];
    cadd[i] = c;
    c = a[i];
    c *= b[i];
    cmul[i] = c;
    mixd[i] = a[i] * 3.0;           // double arithmetic, rounded once from double
    mixi[i] = a[i] + 1;             // float arithmetic
    neg[i] = -a[i];
    mul_f[i] = a[i] * b[i];         // the unrounded float product
    lt[i] = a[i] < b[i];
    eq[i] = a[i] == b[i];
    ge[i] = a[i] >= b[i];
  }
  const std::pair<const char *, const std::vector<L> *> outs[] = {
      {"add", &add}, {"sub", &sub}, {"mul", &mul}, {"div", &div}, {"fma", &fma},
      {"cadd", &cadd}, {"cmul", &cmul}, {"mixd", &mixd}, {"mixi", &mixi}, {"neg", &neg}};
  for (const auto &o : outs) write_array(d + "/" + o.first + "_" + tag + ".bin", bits_of(*o.second));
  write_array(d + "/mulf_" + tag + ".bin", mul_f);
  write_array(d + "/lt_" + tag + ".bin", lt);
  write_array(d + "/eq_" + tag + ".bin", eq);
  write_array(d + "/ge_" + tag + ".bin", ge);
}

// --------------------------------------------------------------------------------- math
template <typename L>
void math_impl(const std::string &d, const std::string &tag) {
  const auto x = from_bits<L>(read_array<uint16_t>(d + "/x_" + tag + ".bin"));
  const size_t n = x.size();
  std::vector<L> r(n);
  auto run = [&](const char *name, auto fn) {
    for (size_t i = 0; i < n; ++i) r[i] = fn(x[i]);
    write_array(d + "/" + name + "_" + tag + ".bin", bits_of(r));
  };
  run("exp", [](L v) { return opgen::math::exp(v); });
  run("log", [](L v) { return opgen::math::log(v); });
  run("sqrt", [](L v) { return opgen::math::sqrt(v); });
  run("rsqrt", [](L v) { return opgen::math::rsqrt(v); });
  run("tanh", [](L v) { return opgen::math::tanh(v); });
  run("sigmoid", [](L v) { return opgen::math::sigmoid(v); });
  run("abs", [](L v) { return opgen::math::abs(v); });
  run("sign", [](L v) { return opgen::math::sign(v); });
  run("erf", [](L v) { return opgen::math::erf(v); });
  run("maximum", [](L v) { return opgen::math::maximum(v, L(0.5f)); });
  run("minimum", [](L v) { return opgen::math::minimum(v, L(0.5f)); });
  run("pow", [](L v) { return opgen::math::pow(v, L(2)); });
  // mixed with float: the common type is float, stored back into L here
  run("maxf", [](L v) { return L(opgen::math::maximum(v, 0.25f)); });
  static_assert(std::is_same<decltype(opgen::math::exp(L())), L>::value, "math keeps the 16-bit type");
  static_assert(std::is_same<decltype(opgen::math::maximum(L(), 1.0f)), float>::value, "mixed gives float");
  static_assert(std::is_same<decltype(opgen::math::maximum(L(), 1.0)), double>::value, "mixed gives double");
  static_assert(std::is_same<opgen::compute_t<L>, float>::value, "16-bit floats compute in float");
  static_assert(std::is_same<opgen::compute_t<const L>, float>::value, "cv-qualified too");
  static_assert(std::is_same<decltype(L() * L()), float>::value, "products are floats");
  static_assert(std::is_same<std::common_type_t<L, L>, L>::value, "");
  static_assert(std::is_same<std::common_type_t<L, int>, float>::value, "");
}

// ---------------------------------------------------------------------------------- map
// opgen::map / map_reduce_to with 16-bit element types (compute in float), broadcasting
template <typename L>
void map_impl(const std::string &d, const std::string &tag) {
  const auto x = from_bits<L>(read_array<uint16_t>(d + "/mx_" + tag + ".bin"));  // shape (3, 1, 5)
  const auto y = from_bits<L>(read_array<uint16_t>(d + "/my_" + tag + ".bin"));  // shape (4, 1)
  const int64_t xs[] = {3, 1, 5}, ys[] = {4, 1}, os[] = {3, 4, 5};
  std::vector<L> out(60);
  auto ov = opgen::make_view<L>(out.data(), os, 3);
  using C = opgen::compute_t<L>;
  opgen::map(ov, [](C a, C b) -> C { return a * b + C(1); }, opgen::make_view<const L>(x.data(), xs, 3),
             opgen::make_view<const L>(y.data(), ys, 2));
  write_array(d + "/map_" + tag + ".bin", bits_of(out));
  // gradient of y: sum over the broadcast dims of (x * 2), reduced to y's shape, in float
  std::vector<L> gy(4);
  opgen::map_reduce_to(opgen::make_view<L>(gy.data(), ys, 2), opgen::Shape{3, 4, 5},
                       [](C a) -> C { return a * C(2); }, opgen::make_view<const L>(x.data(), xs, 3));
  write_array(d + "/reduce_" + tag + ".bin", bits_of(gy));
  // a large flat map (parallel, blocked loop): z = x * x
  const auto big = from_bits<L>(read_array<uint16_t>(d + "/big_" + tag + ".bin"));
  std::vector<L> bz(big.size());
  const int64_t bs[] = {static_cast<int64_t>(big.size())};
  opgen::map(opgen::make_view<L>(bz.data(), bs, 1), [](C a) -> C { return a * a; },
             opgen::make_view<const L>(big.data(), bs, 1));
  write_array(d + "/bigsq_" + tag + ".bin", bits_of(bz));
}
}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: half_test MODE [DIR]\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "convert") {
      convert(argv[2]);
    } else if (mode == "arith") {
      arith_impl<half>(argv[2], "f16");
      arith_impl<bfloat16>(argv[2], "bf16");
    } else if (mode == "math") {
      math_impl<half>(argv[2], "f16");
      math_impl<bfloat16>(argv[2], "bf16");
    } else if (mode == "map") {
      map_impl<half>(argv[2], "f16");
      map_impl<bfloat16>(argv[2], "bf16");
    } else if (mode == "names") {
      std::cout << opgen::aot::dtype_name_v<half> << " " << opgen::aot::dtype_name_v<bfloat16> << " "
                << opgen::aot::dtype_name_v<const float> << " " << opgen::aot::dtype_name_v<int64_t> << " "
                << opgen::aot::dtype_name_v<bool> << "\n";
      std::cout.precision(17);
      std::cout << static_cast<float>(std::numeric_limits<half>::max()) << " "
                << static_cast<float>(std::numeric_limits<half>::epsilon()) << " "
                << static_cast<float>(std::numeric_limits<half>::denorm_min()) << " "
                << static_cast<float>(std::numeric_limits<bfloat16>::max()) << " "
                << static_cast<float>(std::numeric_limits<bfloat16>::epsilon()) << "\n";
    } else {
      std::cerr << "unknown mode " << mode << "\n";
      return 2;
    }
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
