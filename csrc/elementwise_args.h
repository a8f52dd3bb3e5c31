// The parameters of the elementwise kernels, as the host builds them and the
// device reads them: one definition for the launcher (csrc/ops.cpp,
// csrc/harness.cpp), the CPU kernels and NVRTC. No standard library.
//
// Every kernel takes (Pointers<T, N, M>, Scalars, [Strided<N>,] long long n):
// - the tensors' data: the op's N inputs (those it updates in place are
//   written back), then its M new outputs;
// - the op's scalar arguments, in the struct its signature declares
//   (buildtools/signatures.py), already in the dtype's compute type;
// - for the strided kernel only, the sizes and strides of the call.
#pragma once

#include "element_math.h"

namespace cee {

constexpr int kMaxInputs = 8;
constexpr int kMaxOutputs = 4;
constexpr int kMaxScalars = 8;
// Dimensions of the strided kernel after merging (make_strided in
// elementwise_host.h); a call with more runs on dense copies of its inputs.
constexpr int kMaxDims = 8;

// An array of at least one element (C++ has no empty arrays).
template <int N>
struct AtLeastOne {
  static constexpr int value = N > 0 ? N : 1;
};

template <typename T, int N, int M>
struct Pointers {
  T* in[N];
  T* out[AtLeastOne<M>::value];
};

// The op's scalar arguments as the schema passed them (float -> real, int and
// bool -> integer, by position); each signature converts them to its Scalars.
struct ScalarValues {
  double real[kMaxScalars];
  long long integer[kMaxScalars];
};

// Sizes and strides (in elements) of a call over the output's shape, its
// dimensions merged where every tensor allows; a broadcast input has stride 0.
template <int N>
struct Strided {
  int ndim;
  long long sizes[kMaxDims];
  long long strides[N][kMaxDims];

  // The element offset of each input for linear output index i.
  CEE_HOST_DEVICE void offsets(long long i, long long (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const long long q = i / sizes[d];
      const long long r = i - q * sizes[d];
      i = q;
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
    }
  }
};

// One element of an op, in the dtype's compute type (element_math.h): loads
// converted in, the signature's call of the rule, results converted out. The
// inputs the op updates in place come back in v.
template <typename Sig, typename T>
CEE_HOST_DEVICE void apply_element(
    T (&v)[Sig::kInputs], T (&o)[AtLeastOne<Sig::kOutputs>::value],
    const typename Sig::template Scalars<typename Compute<T>::type>& s) {
  typedef Compute<T> Convert;
  typename Convert::type cv[Sig::kInputs];
  typename Convert::type co[AtLeastOne<Sig::kOutputs>::value];
  for (int k = 0; k < Sig::kInputs; ++k) cv[k] = Convert::in(v[k]);
  Sig::element(cv, co, s);
  for (int k = 0; k < Sig::kInputs; ++k)
    if (Sig::kMutated & (1u << k)) v[k] = Convert::out(cv[k]);
  for (int j = 0; j < Sig::kOutputs; ++j) o[j] = Convert::out(co[j]);
}

}  // namespace cee
