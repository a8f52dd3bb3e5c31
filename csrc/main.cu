// Standalone debug harness: runs the kernels through the same C launcher the
// extension uses (csrc/add_kernels.cu), with no torch, and checks every result
// against a host reference. Build with `make cpp`, run on a GPU machine:
//
//   build/cpp/cee_harness            all dtypes, sizes and offsets; exit 0 iff
//   all match build/cpp/cee_harness N          one float32 case of N elements,
//   both kernels
//
// Exit codes: 0 all correct, 1 a mismatch, 2 a CUDA error (message printed).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "add_kernels.h"

namespace {

template <typename T>
T host_add(T a, T b) {
  return static_cast<T>(a + b);
}
template <>
__half host_add(__half a, __half b) {
  return __float2half_rn(__half2float(a) + __half2float(b));
}
template <>
__nv_bfloat16 host_add(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}
template <>
int32_t host_add(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}
template <>
int64_t host_add(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}

template <typename T>
T random_value(std::mt19937_64& rng) {
  if constexpr (sizeof(T) == 2 && !std::is_integral_v<T>) {
    std::normal_distribution<float> dist(0.f, 100.f);
    if constexpr (std::is_same_v<T, __half>)
      return __float2half_rn(dist(rng));
    else
      return __float2bfloat16_rn(dist(rng));
  } else if constexpr (std::is_floating_point_v<T>) {
    std::normal_distribution<T> dist(0, 100);
    return dist(rng);
  } else {
    return static_cast<T>(rng());  // full range: exercises wrap-around
  }
}

#define CHECK_CUDA(call)                                                      \
  do {                                                                        \
    cudaError_t s_ = (call);                                                  \
    if (s_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(s_)); \
      std::exit(2);                                                           \
    }                                                                         \
  } while (0)

// Runs one case; returns the number of wrong elements (exits on CUDA errors).
template <typename T>
int64_t run_case(cee_dtype dtype, const char* name, cee_kernel kernel,
                 int64_t n, int64_t offset, std::mt19937_64& rng) {
  std::vector<T> a(n + offset), b(n + offset), out(n + offset);
  for (auto& x : a) x = random_value<T>(rng);
  for (auto& x : b) x = random_value<T>(rng);
  const size_t bytes = (n + offset) * sizeof(T);
  T *da, *db, *dout;
  CHECK_CUDA(cudaMalloc(&da, bytes));
  CHECK_CUDA(cudaMalloc(&db, bytes));
  CHECK_CUDA(cudaMalloc(&dout, bytes));
  CHECK_CUDA(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, bytes));  // poison: unwritten output shows
  char err[1024] = {0};
  if (cee_cuda_add(kernel, dtype, da + offset, db + offset, dout + offset, n, 0,
                   nullptr, "cee_harness", err, sizeof err) != 0) {
    std::fprintf(stderr, "%s\n", err);
    std::exit(2);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost));
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    T want = host_add(a[offset + i], b[offset + i]);
    if (std::memcmp(&want, &out[offset + i], sizeof(T)) != 0) ++wrong;
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  if (wrong)
    std::printf("MISMATCH %s %s n=%lld offset=%lld: %lld wrong\n", name,
                kernel == CEE_KERNEL_SIMPLE ? "simple" : "vectorized",
                (long long)n, (long long)offset, (long long)wrong);
  return wrong;
}

template <typename T>
int64_t run_dtype(cee_dtype dtype, const char* name, std::mt19937_64& rng,
                  const std::vector<int64_t>& sizes) {
  int64_t wrong = 0;
  for (cee_kernel kernel : {CEE_KERNEL_SIMPLE, CEE_KERNEL_VECTORIZED})
    for (int64_t n : sizes)
      for (int64_t offset : {0, 1, 3})
        wrong += run_case<T>(dtype, name, kernel, n, offset, rng);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  std::mt19937_64 rng(1234);
  std::printf("cee_harness: device code %s\n", cee_cuda_arch_list());
  std::vector<int64_t> sizes = {1, 2, 7, 15, 16, 17, 255, 1000, (1 << 20) + 3};
  if (argc > 1) {
    sizes = {std::atoll(argv[1])};
    int64_t wrong = run_dtype<float>(CEE_FLOAT32, "float32", rng, sizes);
    std::printf("%s\n", wrong ? "FAILED" : "OK");
    return wrong ? 1 : 0;
  }
  int64_t wrong = 0;
  wrong += run_dtype<__half>(CEE_FLOAT16, "float16", rng, sizes);
  wrong += run_dtype<__nv_bfloat16>(CEE_BFLOAT16, "bfloat16", rng, sizes);
  wrong += run_dtype<float>(CEE_FLOAT32, "float32", rng, sizes);
  wrong += run_dtype<double>(CEE_FLOAT64, "float64", rng, sizes);
  wrong += run_dtype<int8_t>(CEE_INT8, "int8", rng, sizes);
  wrong += run_dtype<int16_t>(CEE_INT16, "int16", rng, sizes);
  wrong += run_dtype<int32_t>(CEE_INT32, "int32", rng, sizes);
  wrong += run_dtype<int64_t>(CEE_INT64, "int64", rng, sizes);
  wrong += run_dtype<uint8_t>(CEE_UINT8, "uint8", rng, sizes);
  std::printf("%s: %lld wrong elements\n", wrong ? "FAILED" : "OK",
              (long long)wrong);
  return wrong ? 1 : 0;
}
