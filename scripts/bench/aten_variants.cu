// torch.add's own CUDA kernel, built from the installed torch's headers, next
// to a hand-written copy of its structure (benchmarks/NOTES.md change 26: does
// torch.add's bfloat16 lead on the H200 live in its code or in how torch's
// binary was built?). Not part of the package: it exports the interface of
// scripts/bench/tune_variants.cu, so scripts/bench/tune_variants.py times it,
// and it can be given together with that library to time both in one process:
//
//   T=$(python -c "import torch, os; print(os.path.dirname(torch.__file__))")
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -DNDEBUG \
//     --expt-relaxed-constexpr --expt-extended-lambda \
//     -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ \
//     -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ \
//     -I$T/include -I$T/include/torch/csrc/api/include -isystem $CUDA_INC \
//     scripts/bench/aten_variants.cu -o build/tune/libaten_variants.so
//   python -m scripts.bench.tune_variants build/tune/libaten_variants.so \
//     build/tune/libtune_variants.so --dtypes bfloat16 --sizes 26-28 \
//     --rounds 9
//
// The -D flags are torch's own build flags. ATen's headers include cuSPARSE's
// and cuBLAS's: $CUDA_INC is the include folder of a CUDA toolkit or of the
// nvidia-*-cu13 wheels that has them.
#include <ATen/OpMathType.h>
#include <cuda_bf16.h>

#include <ATen/native/cuda/Loops.cuh>
#include <array>
#include <cstdint>

namespace {

// As BinaryAddSubKernel.cu's CUDAFunctor_add: self + alpha * other in float.
template <typename scalar_t>
struct AtenAdd {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_t alpha_;
  __device__ scalar_t operator()(scalar_t self, scalar_t other) const {
    return static_cast<opmath_t>(self) + alpha_ * static_cast<opmath_t>(other);
  }
};

// The same kernel with our element rule: a + b in float (FADD, no alpha).
template <typename scalar_t>
struct PlainAdd {
  using opmath_t = at::opmath_type<scalar_t>;
  __device__ scalar_t operator()(scalar_t self, scalar_t other) const {
    return static_cast<opmath_t>(self) + static_cast<opmath_t>(other);
  }
};

// As gpu_kernel launches it for contiguous tensors: 128 threads, a grid over
// io_block_work_size elements, `vec` elements per access (8 for 2-byte types on
// sm_90).
template <typename F, int vec>
int launch_aten(F f, const void* a, const void* b, void* out, int64_t n,
                cudaStream_t stream) {
  using namespace at::native;
  std::array<char*, 3> data{static_cast<char*>(out), (char*)a, (char*)b};
  constexpr auto io_size = calc_io_size<F>();
  const int64_t grid =
      (n + io_block_work_size<io_size>() - 1) / io_block_work_size<io_size>();
  vectorized_elementwise_kernel<vec, F, std::array<char*, 3>>
      <<<grid, num_threads(), 0, stream>>>((int)n, f, data);
  return (int)cudaGetLastError();
}

// ATen's structure written out by hand for bfloat16: a block-level "full
// block?" test on `remaining`, one 16-byte load per input per thread, float
// add, one packed store; the last block element by element. I: int (ATen's
// index) or int64_t (ours).
__device__ __forceinline__ uint32_t add_bf16x2(uint32_t x, uint32_t y) {
  const float2 fx = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&x));
  const float2 fy = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&y));
  __nv_bfloat162 r = __floats2bfloat162_rn(fx.x + fy.x, fx.y + fy.y);
  return *reinterpret_cast<uint32_t*>(&r);
}

// ATen's launch on sm_90 for bfloat16: 128 threads, 8 elements each.
constexpr int kAtenThreads = 128, kBlockWork = 1024;

template <typename I>
__global__ void __launch_bounds__(kAtenThreads)
    aten_shape_by_hand(I n, const __nv_bfloat16* a, const __nv_bfloat16* b,
                       __nv_bfloat16* out) {
  const I base = (I)kBlockWork * (I)blockIdx.x;
  const I remaining = n - base;
  if (remaining >= kBlockWork) {
    const uint4 x = reinterpret_cast<const uint4*>(a + base)[threadIdx.x];
    const uint4 y = reinterpret_cast<const uint4*>(b + base)[threadIdx.x];
    uint4 r;
    r.x = add_bf16x2(x.x, y.x);
    r.y = add_bf16x2(x.y, y.y);
    r.z = add_bf16x2(x.z, y.z);
    r.w = add_bf16x2(x.w, y.w);
    reinterpret_cast<uint4*>(out + base)[threadIdx.x] = r;
  } else {
    for (I i = threadIdx.x; i < remaining; i += kAtenThreads) {
      out[base + i] = __float2bfloat16(__bfloat162float(a[base + i]) +
                                       __bfloat162float(b[base + i]));
    }
  }
}

template <typename I>
int launch_by_hand(const void* a, const void* b, void* out, int64_t n,
                   cudaStream_t stream) {
  const int64_t grid = (n + kBlockWork - 1) / kBlockWork;
  aten_shape_by_hand<I><<<grid, kAtenThreads, 0, stream>>>(
      (I)n, static_cast<const __nv_bfloat16*>(a),
      static_cast<const __nv_bfloat16*>(b), static_cast<__nv_bfloat16*>(out));
  return (int)cudaGetLastError();
}

// Bisect from ATen's kernel toward ours ("body-*" variants): its vec8 body
// copied (kCopy), then one difference of ours at a time: a 64-bit count and
// block test (kWide), the tail path first (kTailFirst), our parameter layout
// (inputs in a struct, the output, then a 64-bit count; kOurParams), and our
// occupancy (kCopy16Blocks). Only the last loses ATen's lead (change 26).
enum Bisect { kCopy, kWide, kTailFirst, kOurParams, kCopy16Blocks };

template <int kind, typename F, typename array_t, typename N_t>
__device__ __forceinline__ void aten_body(N_t n, F f, array_t data) {
  using namespace at::native;
  using traits = function_traits<F>;
  constexpr auto io_size = calc_io_size<F>();
  constexpr int bw = io_block_work_size<io_size>();
  const N_t remaining = n - (N_t)bw * (N_t)blockIdx.x;
  auto tail = [&] {
    auto policy = memory::policies::unroll<
        array_t, TrivialOffsetCalculator<traits::arity>,
        TrivialOffsetCalculator<1>, memory::LoadWithoutCast,
        memory::StoreWithoutCast, elems_per_thread<io_size>()>(
        data, (int)remaining, TrivialOffsetCalculator<traits::arity>(),
        TrivialOffsetCalculator<1>(), memory::LoadWithoutCast(),
        memory::StoreWithoutCast());
    elementwise_kernel_helper(f, policy);
  };
  auto full = [&] {
    elementwise_kernel_helper(
        f,
        memory::policies::vectorized<8, array_t, elems_per_thread<io_size>()>(
            data));
  };
  if constexpr (kind == kTailFirst) {
    if (remaining < bw) {
      tail();
    } else {
      full();
    }
  } else {
    if (remaining >= bw) {
      full();
    } else {
      tail();
    }
  }
}

// kMinBlocks 16: the registers capped so that 16 blocks fit per SM, as ours
// (ATen's unrolled tail path takes 40-48 registers, which leaves room for
// 10-12 blocks of 128 threads: 62-75% of the SM's threads).
template <int kind, typename F, typename N_t, int kMinBlocks = 1>
__global__ void __launch_bounds__(kAtenThreads, kMinBlocks)
    aten_copy(N_t n, F f, std::array<char*, 3> data) {
  aten_body<kind>(n, f, data);
}

struct OurInputs {
  const c10::BFloat16* x[2];
};

template <typename F>
__global__ void __launch_bounds__(kAtenThreads)
    aten_copy_our_params(OurInputs in, c10::BFloat16* out, long long n) {
  std::array<char*, 3> data{(char*)out, (char*)in.x[0], (char*)in.x[1]};
  aten_body<kCopy>((int)n, F{}, data);
}

int launch_bisect(int kind, const void* a, const void* b, void* out, int64_t n,
                  cudaStream_t stream) {
  using F = PlainAdd<c10::BFloat16>;
  std::array<char*, 3> data{static_cast<char*>(out), (char*)a, (char*)b};
  static_assert(
      at::native::io_block_work_size<at::native::calc_io_size<F>()>() ==
      kBlockWork);
  const int64_t grid = (n + kBlockWork - 1) / kBlockWork;
  switch (kind) {
    case kCopy:
      aten_copy<kCopy, F, int>
          <<<grid, kAtenThreads, 0, stream>>>((int)n, F{}, data);
      break;
    case kWide:
      aten_copy<kWide, F, int64_t>
          <<<grid, kAtenThreads, 0, stream>>>(n, F{}, data);
      break;
    case kTailFirst:
      aten_copy<kTailFirst, F, int>
          <<<grid, kAtenThreads, 0, stream>>>((int)n, F{}, data);
      break;
    case kCopy16Blocks:
      aten_copy<kCopy, F, int, 16>
          <<<grid, kAtenThreads, 0, stream>>>((int)n, F{}, data);
      break;
    default:
      aten_copy_our_params<F><<<grid, kAtenThreads, 0, stream>>>(
          OurInputs{{static_cast<const c10::BFloat16*>(a),
                     static_cast<const c10::BFloat16*>(b)}},
          static_cast<c10::BFloat16*>(out), (long long)n);
  }
  return (int)cudaGetLastError();
}

const char* const kNames[] = {
    "aten-vec8",       "aten-vec4",     "aten-vec8-fadd", "by-hand-i32",
    "by-hand-i64",     "body",          "body-wide",      "body-tail-first",
    "body-our-params", "body-16-blocks"};

}  // namespace

extern "C" int tune_variant_count() {
  return (int)(sizeof(kNames) / sizeof(kNames[0]));
}

extern "C" const char* tune_variant_name(int v) { return kNames[v]; }

// Variants 0..kWithFloat32-1 (ATen's own kernel) have float32 too; the others
// are written for bfloat16 only.
constexpr int kWithFloat32 = 3;

// 1 when variant v has dtype (0 float32, 1 bfloat16).
extern "C" int tune_variant_supports(int v, int dtype) {
  return dtype == 1 || (dtype == 0 && v < kWithFloat32);
}

// dtype: 0 float32, 1 bfloat16. Returns a cudaError_t, or -2 for a
// variant/dtype pair that tune_variant_supports says does not exist.
extern "C" int tune_add(int v, int dtype, const void* a, const void* b,
                        void* out, int64_t n, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  using BF16 = c10::BFloat16;
  if (dtype == 1) {
    switch (v) {
      case 0: return launch_aten<AtenAdd<BF16>, 8>({1.0f}, a, b, out, n, s);
      case 1: return launch_aten<AtenAdd<BF16>, 4>({1.0f}, a, b, out, n, s);
      case 2: return launch_aten<PlainAdd<BF16>, 8>({}, a, b, out, n, s);
      case 3: return launch_by_hand<int>(a, b, out, n, s);
      case 4: return launch_by_hand<int64_t>(a, b, out, n, s);
      case 5:
      case 6:
      case 7:
      case 8:
      case 9: return launch_bisect(v - 5, a, b, out, n, s);
    }
  } else if (dtype == 0) {
    static_assert(kWithFloat32 == 3, "the float32 cases below: 0, 1, 2");
    switch (v) {
      case 0:
      case 1: return launch_aten<AtenAdd<float>, 4>({1.0f}, a, b, out, n, s);
      case 2: return launch_aten<PlainAdd<float>, 4>({}, a, b, out, n, s);
    }
  }
  return -2;
}
