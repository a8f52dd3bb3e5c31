// Kernel-shape sweep for the vectorized add (bench/NOTES.md has the why):
// threads per block x 16-byte vectors per thread, float32 and bfloat16,
// 2^16..2^28 elements, L2 flushed before every timed launch, median of 30.
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/tune_add.cu -o tune && ./tune
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CK(x)                                                        \
  do {                                                               \
    cudaError_t e = (x);                                             \
    if (e != cudaSuccess) {                                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                 \
      return 1;                                                      \
    }                                                                \
  } while (0)

template <typename T>
struct alignas(16) Vec {
  T v[16 / sizeof(T)];
};
__device__ __forceinline__ float add1(float a, float b) { return a + b; }
__device__ __forceinline__ __nv_bfloat16 add1(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}

// Each block covers THREADS*V vectors; thread t loads vectors t, t+THREADS, ...
// (coalesced), all loads issued before any store.
template <typename T, int THREADS, int V>
__global__ void __launch_bounds__(THREADS) vec_add(const Vec<T>* __restrict__ a,
                                                   const Vec<T>* __restrict__ b,
                                                   Vec<T>* __restrict__ out, long n_vec) {
  const long base = (long)blockIdx.x * THREADS * V + threadIdx.x;
  Vec<T> va[V], vb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    long i = base + (long)k * THREADS;
    if (i < n_vec) {
      va[k] = a[i];
      vb[k] = b[i];
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    long i = base + (long)k * THREADS;
    if (i < n_vec) {
      Vec<T> o;
#pragma unroll
      for (int j = 0; j < 16 / (int)sizeof(T); ++j) o.v[j] = add1(va[k].v[j], vb[k].v[j]);
      out[i] = o;
    }
  }
}

char* g_flush;
const size_t kFlush = 256 << 20;

template <typename T, int THREADS, int V>
float time_variant(void* a, void* b, void* o, long n) {
  long n_vec = n * sizeof(T) / 16;
  long blocks = (n_vec + THREADS * V - 1) / (THREADS * V);
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  std::vector<float> ms;
  for (int r = 0; r < 33; ++r) {
    cudaMemsetAsync(g_flush, r, kFlush);  // evict a, b, out from the 50 MB L2
    cudaEventRecord(s);
    vec_add<T, THREADS, V><<<blocks, THREADS>>>((const Vec<T>*)a, (const Vec<T>*)b, (Vec<T>*)o, n_vec);
    cudaEventRecord(e);
    cudaEventSynchronize(e);
    float t;
    cudaEventElapsedTime(&t, s, e);
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename T>
void sweep(const char* name, void* a, void* b, void* o) {
  printf("\n%s: GB/s (3 tensors) by log2(n); columns threads x vectors/thread\n", name);
  printf("log2 ");
  const char* labels[] = {"128x1", "128x2", "128x4", "256x1", "256x2", "256x4", "512x1", "512x2", "512x4"};
  for (auto l : labels) printf("%8s", l);
  printf("\n");
  for (int lg = 16; lg <= 28; ++lg) {
    long n = 1L << lg;
    float t[9] = {time_variant<T, 128, 1>(a, b, o, n), time_variant<T, 128, 2>(a, b, o, n),
                  time_variant<T, 128, 4>(a, b, o, n), time_variant<T, 256, 1>(a, b, o, n),
                  time_variant<T, 256, 2>(a, b, o, n), time_variant<T, 256, 4>(a, b, o, n),
                  time_variant<T, 512, 1>(a, b, o, n), time_variant<T, 512, 2>(a, b, o, n),
                  time_variant<T, 512, 4>(a, b, o, n)};
    printf("%4d ", lg);
    for (float ms : t) printf("%8.0f", 3.0 * n * sizeof(T) / (ms * 1e-3) / 1e9);
    printf("\n");
  }
}

int main() {
  const size_t bytes = (1L << 28) * 4;
  void *a, *b, *o;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&o, bytes));
  CK(cudaMalloc(&g_flush, kFlush));
  CK(cudaMemset(a, 1, bytes));
  CK(cudaMemset(b, 2, bytes));
  sweep<float>("float32", a, b, o);
  sweep<__nv_bfloat16>("bfloat16", a, b, o);
  CK(cudaDeviceSynchronize());
  return 0;
}
