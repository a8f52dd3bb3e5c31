// The host side of my_rms_norm and my_rms_norm_backward (ops.toml): the input
// checks, the outputs, a plain C++ loop on the CPU and the launches of
// kernels.cuh on the GPU. Included inside namespace cee_rule_rms_norm, after
// the core's host API (csrc/host_api.h).

// What both ops require of x and weight.
inline void check_x_and_weight(const Tensor& x, const Tensor& weight) {
  if (x.dim() < 1)
    cee::fail("x must have at least one dimension (the normalized one)");
  const int64_t cols = x.size(x.dim() - 1);
  if (weight.dim() != 1 || weight.size(0) != cols)
    cee::fail("weight has shape " + cee::shape_string(weight) +
              "; it must be [" + std::to_string(cols) +
              "], the size of x's last dimension");
  cee::check_same_device(x, "x", weight, "weight");
  if (x.scalar_type() != weight.scalar_type())
    cee::fail("x is " + cee::dtype_name(x.scalar_type()) + " and weight " +
              cee::dtype_name(weight.scalar_type()) + "; pass one dtype");
  if (cols > 0x7fffffff) cee::fail("the last dimension is over 2^31 - 1");
}

// How a row is spread over a block: 16-byte packs where the row length and
// every row start allow them, each thread taking `per_thread` packs (0: any
// length, one block a row), `block` threads. A kernel that keeps `max_values`
// elements a thread or fewer in registers (so that 512 threads fit in the
// register file) passes it. Two packs a thread or more where a row has 64, so
// that enough loads are in flight; `fewest` packs a thread where that leaves
// 256 threads a row; beyond, the fewest packs that 512 threads cover. A kernel
// whose instances at `wide_from` packs a thread or more take blocks of 1024
// passes it (0: none). The measurements behind each: docs/PERFORMANCE.md.
struct Geometry {
  bool vector;
  int per_thread;
  unsigned block;
  int64_t packs;  // a row's 16-byte packs, or its elements where not vector
};

inline Geometry geometry(const cee::Rows* rows, int n, int64_t element_size,
                         const void* const* data, int max_per_thread,
                         int max_values, int wide_from = 0, int fewest = 2) {
  const int64_t width = 16 / element_size;
  bool vector = rows[0].cols % width == 0;
  for (int k = 0; k < n; ++k)
    vector =
        vector && rows[k].stride % width == 0 && (uintptr_t)data[k] % 16 == 0;
  const int64_t packs = vector ? rows[0].cols / width : rows[0].cols;
  const int values = vector ? (int)width : 1;
  const int first = packs >= 256 * fewest ? fewest : packs >= 64 ? 2 : 1;
  for (int per_thread = first;
       per_thread <= max_per_thread && per_thread * values <= max_values;
       per_thread *= 2) {
    const int64_t threads = (packs + per_thread - 1) / per_thread;
    if (threads <= (wide_from && per_thread >= wide_from ? 1024 : 512))
      return {vector, per_thread,
              (unsigned)(threads < 32 ? 32 : (threads + 31) / 32 * 32), packs};
  }
  return {vector, 0, 512, packs};
}

template <typename T>
void forward_cpu(const T* x, const T* w, T* y, const cee::Rows& r, double eps) {
  typedef typename cee::Compute<T>::type A;
  typedef cee::Compute<T> C;
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * r.stride;
    T* yr = y + row * r.cols;
    double sum = 0;  // in double: a row can be long
    for (int64_t c = 0; c < r.cols; ++c)
      sum += (double)C::in(xr[c]) * (double)C::in(xr[c]);
    const A rstd = A(1 / cee::sqrt(sum / (double)r.cols + eps));
    for (int64_t c = 0; c < r.cols; ++c)
      yr[c] = C::out(C::in(xr[c]) * rstd * C::in(w[c]));
  }
}

// y = x / sqrt(mean(x^2, last dim) + eps) * weight
inline Tensor rms_norm_forward(Tensor x, Tensor weight, double eps) {
  check_x_and_weight(x, weight);
  const int dtype = cee::op_dtype(x, "x");
  cee::Rows rows[2];
  const Tensor xs = cee::as_rows(x, &rows[0]);
  const Tensor ws = cee::as_rows(weight, &rows[1]);
  Tensor y = cee::new_empty_like(x);
  if (rows[0].rows == 0 || rows[0].cols == 0) return y;
  visit_dtype(dtype, [&](auto tag) {
    typedef decltype(tag) T;
    const void* data[] = {cee::const_data(xs), cee::const_data(ws),
                          cee::const_data(y)};
    const T* xp = static_cast<const T*>(data[0]);
    const T* wp = static_cast<const T*>(data[1]);
    T* yp = cee::mutable_data<T>(y);
    if (!x.is_cuda()) return forward_cpu<T>(xp, wp, yp, rows[0], eps);
    const cee::Rows out_rows = {rows[0].rows, rows[0].cols, rows[0].cols};
    const cee::Rows all[] = {rows[0], {1, rows[0].cols, 0}, out_rows};
    Geometry g =
        geometry(all, 3, sizeof(T), data, 8, 64, 0, sizeof(T) == 2 ? 4 : 2);
    const long long n = rows[0].rows, stride = rows[0].stride;
    const long long out_stride = rows[0].cols;
    const int cols = (int)rows[0].cols;
    // 16-bit rows of 32 KiB or more stay in registers, where a second read
    // costs more than the registers it saves; ops.toml's `when` compiles the
    // held instances these rows reach only.
    const bool hold_row = sizeof(T) == 2 && cols >= 16384;
    const cee::Launch launch(x);
    // Rows too few to fill the GPU twice over, a block each, take a warp each
    // where 8 packs a thread cover them in one: more rows in flight.
    if (g.vector && g.per_thread > 0 && g.per_thread < 8 && g.block > 32 &&
        g.packs > 4 * 32 && g.packs <= 8 * 32) {
      const long long fit = (long long)launch.multiprocessors() *
                            launch.resident_blocks(
                                "rms_norm_forward", dtype,
                                {g.vector, g.per_thread, hold_row}, g.block, 0);
      if (n <= 2 * fit) g = {g.vector, 8, 32, g.packs};
    }
    // Rows of 32 threads or fewer share blocks of 256, 256 / row_threads
    // rows each: a block of one such row left most of a multiprocessor idle
    // (a block of one such row leaves most of a multiprocessor idle).
    int row_threads = (int)g.block;
    unsigned block = g.block;
    if (g.per_thread > 0 && g.block <= 32) {
      row_threads = 1;
      while ((int64_t)row_threads * g.per_thread < g.packs) row_threads *= 2;
      block = 256;
    }
    const long long per_block = block / row_threads;
    const long long blocks = (n + per_block - 1) / per_block;
    const unsigned grid = (unsigned)(blocks < (1 << 30) ? blocks : (1 << 30));
    launch("rms_norm_forward", dtype, {g.vector, g.per_thread, hold_row}, grid,
           block, 0, xp, wp, yp, n, cols, stride, out_stride, eps, row_threads);
  });
  return y;
}

template <typename T>
void backward_cpu(const T* grad, const T* x, const T* w, T* dx, T* dw,
                  const cee::Rows& gr, const cee::Rows& xr, double eps) {
  typedef typename cee::Compute<T>::type A;
  typedef cee::Compute<T> C;
  const int64_t cols = xr.cols;
  double* acc = new double[cols > 0 ? cols : 1]();
  for (int64_t row = 0; row < xr.rows; ++row) {
    const T* g = grad + row * gr.stride;
    const T* v = x + row * xr.stride;
    double squares = 0, dot = 0;  // in double: a row can be long
    for (int64_t c = 0; c < cols; ++c) {
      const double x_c = C::in(v[c]);
      squares += x_c * x_c;
      dot += x_c * (double)C::in(w[c]) * (double)C::in(g[c]);
    }
    const double rstd_sum = 1 / cee::sqrt(squares / (double)cols + eps);
    const A rstd = A(rstd_sum);
    const A scale = A(dot * rstd_sum * rstd_sum * rstd_sum / (double)cols);
    for (int64_t c = 0; c < cols; ++c) {
      dx[row * cols + c] =
          C::out(C::in(w[c]) * C::in(g[c]) * rstd - C::in(v[c]) * scale);
      acc[c] += (double)C::in(g[c]) * (double)C::in(v[c]) * rstd_sum;
    }
  }
  for (int64_t c = 0; c < cols; ++c) dw[c] = C::out(A(acc[c]));
  delete[] acc;
}

// (dx, dweight) of y = my_rms_norm(x, weight, eps) for the gradient `grad` of
// y.
inline std::tuple<Tensor, Tensor> rms_norm_backward(Tensor grad, Tensor x,
                                                    Tensor weight, double eps) {
  check_x_and_weight(x, weight);
  cee::check_same_device(grad, "grad", x, "x");
  if (grad.dim() != x.dim() || cee::shape_string(grad) != cee::shape_string(x))
    cee::fail("grad has shape " + cee::shape_string(grad) + ", x " +
              cee::shape_string(x) + "; they must be equal");
  if (grad.scalar_type() != x.scalar_type())
    cee::fail("grad is " + cee::dtype_name(grad.scalar_type()) + " and x " +
              cee::dtype_name(x.scalar_type()) + "; pass one dtype");
  const int dtype = cee::op_dtype(x, "x");
  cee::Rows rows[3];
  const Tensor gs = cee::as_rows(grad, &rows[0]);
  const Tensor xs = cee::as_rows(x, &rows[1]);
  const Tensor ws = cee::as_rows(weight, &rows[2]);
  Tensor dx = cee::new_empty_like(x);
  Tensor dw = cee::new_empty_like(weight);
  const long long n = rows[1].rows;
  const int cols = (int)rows[1].cols;
  if (cols == 0) return std::make_tuple(dx, dw);
  visit_dtype(dtype, [&](auto tag) {
    typedef decltype(tag) T;
    typedef typename cee::Compute<T>::type A;
    const T* gp = cee::const_data<T>(gs);
    const T* xp = cee::const_data<T>(xs);
    const T* wp = cee::const_data<T>(ws);
    T* dxp = cee::mutable_data<T>(dx);
    T* dwp = cee::mutable_data<T>(dw);
    if (!x.is_cuda())
      return backward_cpu<T>(gp, xp, wp, dxp, dwp, rows[0], rows[1], eps);
    const cee::Launch launch(x);
    const void* data[] = {gp, xp, wp, dxp};
    const cee::Rows all[] = {rows[0], rows[1], {1, cols, 0}, {n, cols, cols}};
    const Geometry g = geometry(all, 4, sizeof(T), data, 4, 32, 2);
    // Blocks for about 1024 threads a multiprocessor (twice or half as many
    // measured slower),
    // or as many as fit where the kernel's registers allow fewer (a block
    // more would wait for a second wave), each over 8 rows or more: each
    // block's dweight share is one row of `partial`, summed after, so that
    // extra traffic stays small.
    const int planned = g.block < 1024 ? (int)(1024 / g.block) : 1;
    const int fit = launch.resident_blocks(
        "rms_norm_backward", dtype, {g.vector, g.per_thread}, g.block, 0);
    const long long resident =
        (long long)launch.multiprocessors() * (fit < planned ? fit : planned);
    const long long some_rows = (n + 7) / 8;  // none without rows
    const int blocks = (int)(some_rows < resident ? some_rows : resident);
    Tensor partial = cee::new_empty(x, {blocks, cols}, cee::dtype_of<A>());
    A* pp = cee::mutable_data<A>(partial);
    if (n > 0) {
      const long long grad_stride = rows[0].stride, x_stride = rows[1].stride;
      const long long dx_stride = cols;
      launch("rms_norm_backward", dtype, {g.vector, g.per_thread},
             (unsigned)blocks, g.block, 0, gp, xp, wp, dxp, pp, n, cols,
             grad_stride, x_stride, dx_stride, eps);
    }
    launch("rms_norm_weight_grad", dtype, {}, (unsigned)((cols + 31) / 32), 512,
           0, (const A*)pp, dwp, blocks, cols);
  });
  return std::make_tuple(dx, dw);
}
