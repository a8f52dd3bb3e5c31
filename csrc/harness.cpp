// Standalone debug harness: the product's own fatbin through the product's own
// launcher (csrc/launcher.cpp, csrc/elementwise_launch.h), with no torch, every
// result of every declared op checked against the same rule (ops/*/rule.h) run
// on the host. Build with `make cpp` (here, no GPU needed), run it on a GPU
// machine:
//
//   build/cpp/cee_harness        every op, dtype, size and offset; exit 0 iff
//   all match build/cpp/cee_harness N      one float32 case of N elements,
//   every op
//
// After each op it checks that the launcher has loaded the libraries of the
// ops run so far (one per op and dtype), and no other.
//
// Exit codes: 0 all correct, 1 a mismatch (or a library loaded that no call
// used), 2 a CUDA error (message printed).
// Memory and copies use driver entry points handed out by the launcher.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "cee_generated.h"  // the op table; includes every op's rule.h
#include "elementwise_launch.h"
#include "host_float16.h"  // the host types, shared with the CPU kernels

namespace {

template <typename T>
T random_value(std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.f, 100.f);
  if constexpr (std::is_same_v<T, c10::Half> ||
                std::is_same_v<T, c10::BFloat16>)
    return T(dist(rng));
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(dist(rng));
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(rng());  // full range: exercises wrap-around
}

struct Driver {
  PFN_cuMemAlloc_v3020 mem_alloc;
  PFN_cuMemFree_v3020 mem_free;
  PFN_cuMemcpyHtoD_v3020 htod;
  PFN_cuMemcpyDtoH_v3020 dtoh;
  PFN_cuCtxSynchronize_v2000 synchronize;
  PFN_cuGetErrorString_v6000 error_string;
};
Driver driver;

void* entry_point(const char* name) {
  char err[512];
  void* fn = cee_cuda_entry_point(name, err, sizeof err);
  if (!fn) {
    std::fprintf(stderr, "cee_harness: %s\n", err);
    std::exit(2);
  }
  return fn;
}

void check(CUresult status, const char* what) {
  if (status == CUDA_SUCCESS) return;
  const char* text = "?";
  driver.error_string(status, &text);
  std::fprintf(stderr, "%s failed: %s\n", what, text);
  std::exit(2);
}

// The op's sample scalars (harness: defaults or declared examples).
cee::ScalarValues sample_scalars(const cee::ElementwiseInfo& op) {
  cee::ScalarValues values = {};
  for (int j = 0; j < op.num_scalars; ++j) {
    values.real[j] = op.scalar_samples[j];
    values.integer[j] = (long long)op.scalar_samples[j];
  }
  return values;
}

// Whether the GPU's element equals the host's: bit for bit, or within the
// op's declared tolerance for this dtype (NaN equals NaN).
template <typename T>
bool matches(const cee::OpInfo& op, int dtype, const T& got, const T& want) {
  if (std::memcmp(&got, &want, sizeof(T)) == 0) return true;
  const double (*tolerance)[2] = op.elementwise->tolerance;
  if (!tolerance) return false;
  const double g = static_cast<double>(got), w = static_cast<double>(want);
  if (g != g && w != w) return true;
  const double rtol = tolerance[dtype][0], atol = tolerance[dtype][1];
  return std::fabs(g - w) <= atol + rtol * std::fabs(w);
}

// Runs one case of one op; returns the number of wrong elements (exits on CUDA
// errors). Inputs the op updates in place are checked like outputs.
template <typename Sig, typename T>
int64_t run_case(const cee::OpInfo& op, int dtype, const char* name, int64_t n,
                 int64_t offset, std::mt19937_64& rng) {
  constexpr int N = Sig::kInputs, M = Sig::kOutputs;
  constexpr int kOut = cee::AtLeastOne<M>::value;
  typedef typename cee::Compute<T>::type C;
  const size_t bytes = (n + offset) * sizeof(T);
  std::vector<T> in[N], out[kOut];
  CUdeviceptr din[N], dout[kOut];
  cee::Pointers<T, N, M> pointers = {};
  const void* data[N + kOut];
  for (int k = 0; k < N; ++k) {
    in[k].resize(n + offset);
    for (auto& x : in[k]) x = random_value<T>(rng);
    check(driver.mem_alloc(&din[k], bytes), "cuMemAlloc");
    check(driver.htod(din[k], in[k].data(), bytes), "cuMemcpyHtoD");
    data[k] = pointers.in[k] = (T*)(din[k] + offset * sizeof(T));
  }
  std::vector<T> poison(n + offset);
  std::memset(poison.data(), 0xff, bytes);  // unwritten output shows
  for (int j = 0; j < M; ++j) {
    out[j].resize(n + offset);
    check(driver.mem_alloc(&dout[j], bytes), "cuMemAlloc");
    check(driver.htod(dout[j], poison.data(), bytes), "cuMemcpyHtoD");
    data[N + j] = pointers.out[j] = (T*)(dout[j] + offset * sizeof(T));
  }
  const cee::ScalarValues values = sample_scalars(*op.elementwise);
  typename Sig::template Scalars<C> scalars = Sig::template scalars<C>(values);
  const cee::LaunchArgs args = {&pointers, &scalars, nullptr};
  char err[1024] = {0};
  if (cee::launch_elementwise(op, dtype, data, args, n, 0, nullptr, err,
                              sizeof err) != 0) {
    std::fprintf(stderr, "%s\n", err);
    std::exit(2);
  }
  check(driver.synchronize(), "cuCtxSynchronize");
  std::vector<T> updated[N];
  for (int k = 0; k < N; ++k)
    if (Sig::kMutated & (1u << k)) {
      updated[k].resize(n + offset);
      check(driver.dtoh(updated[k].data(), din[k], bytes), "cuMemcpyDtoH");
    }
  for (int j = 0; j < M; ++j)
    check(driver.dtoh(out[j].data(), dout[j], bytes), "cuMemcpyDtoH");
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    T v[N], o[kOut];
    for (int k = 0; k < N; ++k) v[k] = in[k][offset + i];
    cee::apply_element<Sig>(v, o, scalars);
    bool ok = true;
    for (int k = 0; k < N; ++k)
      if (Sig::kMutated & (1u << k))
        ok = ok && matches(op, dtype, updated[k][offset + i], v[k]);
    for (int j = 0; j < M; ++j)
      ok = ok && matches(op, dtype, out[j][offset + i], o[j]);
    wrong += !ok;
  }
  for (int k = 0; k < N; ++k) driver.mem_free(din[k]);
  for (int j = 0; j < M; ++j) driver.mem_free(dout[j]);
  if (wrong)
    std::printf("MISMATCH %s %s n=%lld offset=%lld: %lld wrong\n", op.name,
                name, (long long)n, (long long)offset, (long long)wrong);
  return wrong;
}

template <typename Sig, typename T>
int64_t run_dtype(const cee::OpInfo& op, int dtype, const char* name,
                  std::mt19937_64& rng, const std::vector<int64_t>& sizes) {
  int64_t wrong = 0;
  for (int64_t n : sizes)
    for (int64_t offset : {0, 1, 3})
      wrong += run_case<Sig, T>(op, dtype, name, n, offset, rng);
  return wrong;
}

// Every dtype the op declares (or float32 alone, if it has it and `one`).
template <typename Sig>
int64_t run_op(const cee::OpInfo& op, std::mt19937_64& rng,
               const std::vector<int64_t>& sizes, bool one) {
  int64_t wrong = 0;
#define CEE_RUN_DTYPE(id, device_type, size, scalar_type, name)                \
  static_assert(sizeof(HostType_##name) == size, #name);                       \
  if constexpr ((Sig::kDtypes >> CEE_DTYPE_##id) & 1u)                         \
    if (!one || CEE_DTYPE_##id == CEE_DTYPE_FLOAT32)                           \
      wrong += run_dtype<Sig, HostType_##name>(op, CEE_DTYPE_##id, #name, rng, \
                                               sizes);
  CEE_FOR_EACH_DTYPE(CEE_RUN_DTYPE)
#undef CEE_RUN_DTYPE
  return wrong;
}

// Device 0's primary context, current on this thread for the allocations.
void use_device_zero() {
  auto init = (PFN_cuInit_v2000)entry_point("cuInit");
  auto device_get = (PFN_cuDeviceGet_v2000)entry_point("cuDeviceGet");
  auto retain = (PFN_cuDevicePrimaryCtxRetain_v7000)entry_point(
      "cuDevicePrimaryCtxRetain");
  auto set_current = (PFN_cuCtxSetCurrent_v4000)entry_point("cuCtxSetCurrent");
  CUdevice dev;
  CUcontext ctx;
  check(init(0), "cuInit");
  check(device_get(&dev, 0), "cuDeviceGet");
  check(retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(set_current(ctx), "cuCtxSetCurrent");
}

// After `op` ran in its dtypes (float32 only if `one`): the launcher has
// loaded their libraries (one per op and dtype) and those of the ops before it
// (`used`), and no other; returns 1 if not (printed), else 0.
int64_t check_libraries(const cee::OpInfo& op, bool* used, bool one) {
  const int slots = cee::kFirstVectorSlot + CEE_NUM_VECTOR_SHAPES;
  for (int i = 0; i < slots * CEE_NUM_DTYPES; ++i) {
    const bool ran = !one || i % CEE_NUM_DTYPES == CEE_DTYPE_FLOAT32;
    const int kernel = op.elementwise->slots[i];
    if (ran && kernel >= 0) used[cee_kernel_libraries[kernel]] = true;
  }
  int64_t wrong = 0;
  for (int i = 0; i < cee_num_libraries(); ++i) {
    if (cee_library_loaded(i) == (used[i] ? 1 : 0)) continue;
    std::printf("LIBRARY %s is %s after %s ran\n", cee_library_name(i),
                used[i] ? "not loaded" : "loaded", op.name);
    wrong = 1;
  }
  return wrong;
}

}  // namespace

// The launcher's lookup by name expression (cee_find_kernel, for code that
// names its own kernels) finds every kernel of the table, and nothing else.
// Needs no GPU.
static bool find_kernel_works() {
  for (int i = 0; i < CEE_NUM_KERNELS; ++i) {
    const int found = cee_find_kernel(cee_kernel_expressions[i]);
    if (found < 0 || std::strcmp(cee_kernel_expressions[found],
                                 cee_kernel_expressions[i]) != 0)
      return false;
  }
  return cee_find_kernel("cee::no_such_kernel<float>") == -1;
}

// The launcher's occupancy query (cee_resident_blocks) answers for every
// kernel of the table at 128 threads a block: at least one block, no more than
// a multiprocessor's 2048 threads hold; and an unknown kernel gets an error
// that names the caller. Run last: it loads every library.
static bool resident_blocks_work() {
  char err[1024];
  for (int i = 0; i < CEE_NUM_KERNELS; ++i) {
    int blocks = 0;
    if (cee_resident_blocks(i, 128, 0, 0, &blocks, "cee_harness", err,
                            sizeof err) != 0 ||
        blocks < 1 || blocks > 2048 / 128) {
      std::printf("RESIDENT %s: %d blocks of 128 (%s)\n",
                  cee_kernel_expressions[i], blocks, err);
      return false;
    }
  }
  int blocks = 0;
  return cee_resident_blocks(CEE_NUM_KERNELS, 128, 0, 0, &blocks, "cee_harness",
                             err, sizeof err) != 0 &&
         std::strstr(err, "cee_harness: bad device 0 or kernel") == err;
}

int main(int argc, char** argv) {
  if (!find_kernel_works()) {
    std::fprintf(
        stderr,
        "cee_harness: cee_find_kernel does not find the table's kernels\n");
    return 1;
  }
  driver = {(PFN_cuMemAlloc_v3020)entry_point("cuMemAlloc"),
            (PFN_cuMemFree_v3020)entry_point("cuMemFree"),
            (PFN_cuMemcpyHtoD_v3020)entry_point("cuMemcpyHtoD"),
            (PFN_cuMemcpyDtoH_v3020)entry_point("cuMemcpyDtoH"),
            (PFN_cuCtxSynchronize_v2000)entry_point("cuCtxSynchronize"),
            (PFN_cuGetErrorString_v6000)entry_point("cuGetErrorString")};
  use_device_zero();
  std::mt19937_64 rng(1234);
  std::printf("cee_harness: device code %s\n", cee_cuda_arch_list());
  std::vector<int64_t> sizes = {1,
                                2,
                                7,
                                15,
                                16,
                                17,
                                255,
                                1000,
                                4097,
                                1 << 20,
                                (1 << 20) + 3,
                                (5 << 20) + 7};
  const bool one = argc > 1;
  if (one) sizes = {std::atoll(argv[1])};
  int64_t wrong = 0;
  bool used[CEE_NUM_LIBRARIES] = {};
#define CEE_RUN_OP(name, signature)                           \
  wrong += run_op<signature>(cee_op_##name, rng, sizes, one); \
  wrong += check_libraries(cee_op_##name, used, one);
  CEE_FOR_EACH_ELEMENTWISE_OP(CEE_RUN_OP)
#undef CEE_RUN_OP
  const bool resident = resident_blocks_work();
  if (!resident) std::printf("cee_resident_blocks: wrong answers\n");
  std::printf("%s: %lld wrong elements\n", wrong || !resident ? "FAILED" : "OK",
              (long long)wrong);
  return wrong || !resident ? 1 : 0;
}
