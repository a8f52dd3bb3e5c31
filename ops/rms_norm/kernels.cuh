// RMSNorm over the last dimension, forward and backward, on the GPU:
//   y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps)   (per row)
// Compiled by NVRTC inside namespace cee_rule_rms_norm, over the core's device
// helpers (csrc/device_reductions.cuh); host.h launches the instances that
// ops.toml lists. Accumulates in float (double for double).
//
// One block per row, or, for rows of 32 threads or fewer, blockDim.x /
// row_threads rows a block, each summed within its lanes; with more rows than
// blocks take, each block loops over rows. kPerThread > 0: each thread takes
// its kPerThread packs of a row (the host picks it so that they cover the
// row). kHoldRow: the packs stay in registers for the output; otherwise they
// are read again, from L1, as Triton's kernel does (the first read marked to
// stay, the second to go): fewer registers, more blocks in flight (host.h
// picks; docs/PERFORMANCE.md). 0: any row length, one block a row, read twice
// (the second
// time mostly from L2). kVector: 16-byte packs (the host checks that the row
// length and every row start allow them).
template <typename T, bool kVector, int kPerThread, bool kHoldRow>
__global__ void __launch_bounds__(512)
    rms_norm_forward(const T* __restrict__ x, const T* __restrict__ weight,
                     T* __restrict__ y, long long rows, int cols,
                     long long x_stride, long long y_stride, double eps,
                     int row_threads) {
  typedef cee::Accumulate<T> A;
  typedef cee::Compute<T> C;
  constexpr int W = cee::PackWidth<T, kVector>::value;
  typedef cee::Pack<T, W> P;
  __shared__ A scratch[32];
  const int packs = cols / W;
  const P* w = reinterpret_cast<const P*>(weight);
  if constexpr (kHoldRow && kPerThread > 0) {
    // Rows of 32 KiB or more: one block a row, never shared (the indexing of
    // shared blocks costs registers, and then a block fewer fits).
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
      const P* xr = reinterpret_cast<const P*>(x + row * x_stride);
      P* yr = reinterpret_cast<P*>(y + row * y_stride);
      A sum[1] = {A(0)};
      A v[kPerThread][W];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = threadIdx.x + i * blockDim.x;
        P pack = {};
        if (p < packs) pack = xr[p];
#pragma unroll
        for (int j = 0; j < W; ++j) {
          v[i][j] = C::in(pack.v[j]);
          sum[0] += v[i][j] * v[i][j];
        }
      }
      cee::block_sum<1>(sum, scratch);
      const A rstd = cee::inverse_sqrt(sum[0] / A(cols) + A(eps));
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = threadIdx.x + i * blockDim.x;
        if (p >= packs) continue;
        const P wp = w[p];
        P out;
#pragma unroll
        for (int j = 0; j < W; ++j)
          out.v[j] = C::out(v[i][j] * rstd * C::in(wp.v[j]));
        yr[p] = out;
      }
    }
    return;
  }
  const int lane = threadIdx.x % row_threads, slot = threadIdx.x / row_threads;
  const int per_block = blockDim.x / row_threads;
  // Every thread of the block runs each pass (the sums need them all); a
  // thread whose row is past the end reads and writes nothing.
  for (long long first = (long long)blockIdx.x * per_block; first < rows;
       first += (long long)gridDim.x * per_block) {
    const long long row = first + slot;
    const bool valid = row < rows;
    const P* xr = reinterpret_cast<const P*>(x + (valid ? row : 0) * x_stride);
    P* yr = reinterpret_cast<P*>(y + (valid ? row : 0) * y_stride);
    A sum[1] = {A(0)};
    if constexpr (kPerThread > 0) {
      // Each pass makes all its reads first, a pack past the row's end read
      // from the row's start instead: a read inside a branch waits for the
      // sums before it (the hinted reads are volatile), so the packs would
      // arrive one by one.
      int at[kPerThread];
      P v[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = lane + i * row_threads;
        at[i] = valid && p < packs ? p : -1;
        const P* from = xr + (at[i] < 0 ? 0 : at[i]);
        v[i] = cee::load_to_reuse(from);
      }
#pragma unroll
      for (int i = 0; i < kPerThread; ++i)
        if (at[i] >= 0)
#pragma unroll
          for (int j = 0; j < W; ++j)
            sum[0] += C::in(v[i].v[j]) * C::in(v[i].v[j]);
      cee::rows_sum<1>(sum, scratch, row_threads);
      const A rstd = cee::inverse_sqrt(sum[0] / A(cols) + A(eps));
      // The output's reads in batches of 4 packs of x and of the weight: 8
      // at once spilt.
      constexpr int kBatch = kPerThread < 4 ? kPerThread : 4;
      P wv[kBatch];
#pragma unroll
      for (int b = 0; b < kPerThread; b += kBatch) {
#pragma unroll
        for (int i = b; i < b + kBatch; ++i) {
          const int p = at[i] < 0 ? 0 : at[i];
          v[i] = cee::load_last_use(xr + p);
          wv[i - b] = cee::load_to_reuse(w + p);
        }
#pragma unroll
        for (int i = b; i < b + kBatch; ++i) {
          if (at[i] < 0) continue;
          P out;
#pragma unroll
          for (int j = 0; j < W; ++j)
            out.v[j] = C::out(C::in(v[i].v[j]) * rstd * C::in(wv[i - b].v[j]));
          yr[at[i]] = out;
        }
      }
    } else {
      for (int p = threadIdx.x; p < packs; p += blockDim.x) {
        const P pack = xr[p];
#pragma unroll
        for (int j = 0; j < W; ++j)
          sum[0] += C::in(pack.v[j]) * C::in(pack.v[j]);
      }
      cee::block_sum<1>(sum, scratch);
      const A rstd = cee::inverse_sqrt(sum[0] / A(cols) + A(eps));
      for (int p = threadIdx.x; p < packs; p += blockDim.x) {
        const P pack = xr[p], wp = w[p];
        P out;
#pragma unroll
        for (int j = 0; j < W; ++j)
          out.v[j] = C::out(C::in(pack.v[j]) * rstd * C::in(wp.v[j]));
        yr[p] = out;
      }
    }
  }
}

// dx of each row, and each block's share of dweight (summed over its rows) in
// its row of dw_partial ([gridDim.x, cols], accumulation type), which
// rms_norm_weight_grad then sums. With s = sum(x * weight * grad) over a row:
//   dx = rstd * weight * grad - x * rstd^3 * s / cols
//   dweight = sum over rows of grad * x * rstd
// kPerThread > 0: the row's packs stay in registers between the two passes
// where they and the dweight sums fit 48 (kKeepRow: a second read costs more
// than a few spills); else only the sums do and the second pass reads the row
// again, mostly from L1. 0: any row length, the dweight sums in dw_partial
// itself.
// Every instance fits 64 registers, so that 1024 threads a multiprocessor
// (two blocks of 512, or one of 1024 at 2 or 4 packs a thread) hold their
// loads and overlap one warp's sums with another's loads.
template <typename T, bool kVector, int kPerThread>
__global__ void __launch_bounds__(kPerThread >= 2 ? 1024 : 512,
                                  kPerThread >= 2 ? 1 : 2)
    rms_norm_backward(const T* __restrict__ grad, const T* __restrict__ x,
                      const T* __restrict__ weight, T* __restrict__ dx,
                      cee::Accumulate<T>* __restrict__ dw_partial,
                      long long rows, int cols, long long grad_stride,
                      long long x_stride, long long dx_stride, double eps) {
  typedef cee::Accumulate<T> A;
  typedef cee::Compute<T> C;
  constexpr int W = cee::PackWidth<T, kVector>::value;
  typedef cee::Pack<T, W> P;
  __shared__ A scratch[64];
  const int packs = cols / W;
  const P* wr = reinterpret_cast<const P*>(weight);
  A* partial = dw_partial + (long long)blockIdx.x * cols;
  // A thread's packs of the gradient and x (4 registers each) and its
  // kPerThread * W float sums (double's arithmetic needs more room: it spilt).
  constexpr bool kKeepRow = sizeof(A) == 4 && kPerThread * (8 + W) <= 48;
  if constexpr (kPerThread > 0 && !kKeepRow) {
    A acc[kPerThread][W];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
#pragma unroll
      for (int j = 0; j < W; ++j) acc[i][j] = A(0);
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
      const P* gr = reinterpret_cast<const P*>(grad + row * grad_stride);
      const P* xr = reinterpret_cast<const P*>(x + row * x_stride);
      P* dr = reinterpret_cast<P*>(dx + row * dx_stride);
      A sums[2] = {A(0), A(0)};
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = threadIdx.x + i * blockDim.x;
        if (p >= packs) continue;
        const P gp = gr[p], xp = xr[p], wp = wr[p];
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A v = C::in(xp.v[j]);
          sums[0] += v * v;
          sums[1] += v * C::in(wp.v[j]) * C::in(gp.v[j]);
        }
      }
      cee::block_sum<2>(sums, scratch);
      const A rstd = cee::inverse_sqrt(sums[0] / A(cols) + A(eps));
      const A c = sums[1] * rstd * rstd * rstd / A(cols);
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = threadIdx.x + i * blockDim.x;
        if (p >= packs) continue;
        const P gp = gr[p], xp = xr[p], wp = wr[p];
        P out;
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A g = C::in(gp.v[j]), v = C::in(xp.v[j]);
          out.v[j] = C::out(C::in(wp.v[j]) * g * rstd - v * c);
          acc[i][j] += g * v * rstd;
        }
        dr[p] = out;
      }
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int p = threadIdx.x + i * blockDim.x;
      if (p >= packs) continue;
#pragma unroll
      for (int j = 0; j < W; ++j) partial[p * W + j] = acc[i][j];
    }
  } else if constexpr (kPerThread > 0) {
    // The row stays as loaded (16-bit values two a register) and is widened
    // where used; the weight is read again at each row (from L1): held as
    // floats, a 16-bit row would not fit 64 registers.
    A acc[kPerThread][W];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
#pragma unroll
      for (int j = 0; j < W; ++j) acc[i][j] = A(0);
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
      const P* gr = reinterpret_cast<const P*>(grad + row * grad_stride);
      const P* xr = reinterpret_cast<const P*>(x + row * x_stride);
      P* dr = reinterpret_cast<P*>(dx + row * dx_stride);
      P g[kPerThread], v[kPerThread];
      A sums[2] = {A(0), A(0)};
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = threadIdx.x + i * blockDim.x;
        g[i] = P{};
        v[i] = P{};
        if (p < packs) {
          g[i] = gr[p];
          v[i] = xr[p];
        }
        const P wp = p < packs ? wr[p] : P{};
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A x_j = C::in(v[i].v[j]);
          sums[0] += x_j * x_j;
          sums[1] += x_j * C::in(wp.v[j]) * C::in(g[i].v[j]);
        }
      }
      cee::block_sum<2>(sums, scratch);
      const A rstd = cee::inverse_sqrt(sums[0] / A(cols) + A(eps));
      const A c = sums[1] * rstd * rstd * rstd / A(cols);
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int p = threadIdx.x + i * blockDim.x;
        if (p >= packs) continue;
        const P wp = wr[p];
        P out;
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A g_j = C::in(g[i].v[j]), x_j = C::in(v[i].v[j]);
          out.v[j] = C::out(C::in(wp.v[j]) * g_j * rstd - x_j * c);
          acc[i][j] += g_j * x_j * rstd;
        }
        dr[p] = out;
      }
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int p = threadIdx.x + i * blockDim.x;
      if (p >= packs) continue;
#pragma unroll
      for (int j = 0; j < W; ++j) partial[p * W + j] = acc[i][j];
    }
  } else {
    // Each thread owns the same columns of the block's partial row throughout.
    for (int p = threadIdx.x; p < packs; p += blockDim.x)
#pragma unroll
      for (int j = 0; j < W; ++j) partial[p * W + j] = A(0);
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
      const P* gr = reinterpret_cast<const P*>(grad + row * grad_stride);
      const P* xr = reinterpret_cast<const P*>(x + row * x_stride);
      P* dr = reinterpret_cast<P*>(dx + row * dx_stride);
      A sums[2] = {A(0), A(0)};
      for (int p = threadIdx.x; p < packs; p += blockDim.x) {
        const P gp = gr[p], xp = xr[p], wp = wr[p];
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A v = C::in(xp.v[j]);
          sums[0] += v * v;
          sums[1] += v * C::in(wp.v[j]) * C::in(gp.v[j]);
        }
      }
      cee::block_sum<2>(sums, scratch);
      const A rstd = cee::inverse_sqrt(sums[0] / A(cols) + A(eps));
      const A c = sums[1] * rstd * rstd * rstd / A(cols);
      for (int p = threadIdx.x; p < packs; p += blockDim.x) {
        const P gp = gr[p], xp = xr[p], wp = wr[p];
        P out;
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A g = C::in(gp.v[j]), v = C::in(xp.v[j]);
          out.v[j] = C::out(C::in(wp.v[j]) * g * rstd - v * c);
          partial[p * W + j] += g * v * rstd;
        }
        dr[p] = out;
      }
    }
  }
}

// dweight: the column sums of dw_partial ([blocks, cols]). Each block of 512
// threads takes 32 columns; its 16 warps-worth of rows are summed in shared
// memory.
template <typename T>
__global__ void __launch_bounds__(512)
    rms_norm_weight_grad(const cee::Accumulate<T>* __restrict__ partial,
                         T* __restrict__ dweight, int blocks, int cols) {
  typedef cee::Accumulate<T> A;
  __shared__ A sums[16][33];
  const int lane = threadIdx.x & 31, group = threadIdx.x >> 5;
  const int col = blockIdx.x * 32 + lane;
  A s = A(0);
  if (col < cols)
    for (int b = group; b < blocks; b += 16)
      s += partial[(long long)b * cols + col];
  sums[group][lane] = s;
  __syncthreads();
  if (group == 0 && col < cols) {
    A total = A(0);
#pragma unroll
    for (int k = 0; k < 16; ++k) total += sums[k][lane];
    dweight[col] = cee::Compute<T>::out(total);
  }
}
