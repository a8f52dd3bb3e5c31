// C interface of the CUDA launcher (csrc/launcher.cpp): the op-agnostic core
// that loads the embedded device code (one library per op, each at its first
// use) and launches any of its kernels through the NVIDIA driver API (no CUDA
// runtime). Used by the torch ops (csrc/ops.cpp, through
// csrc/elementwise_launch.h) and by the standalone harness (csrc/harness.cpp).
// Only plain C types cross it. libcuda.so.1 is opened at the first CUDA call,
// never at import.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Devices the launcher can serve (ordinals 0 .. CEE_MAX_DEVICES - 1).
#define CEE_MAX_DEVICES 64

// The index of a kernel instance of the device code, by the name expression it
// was compiled from (e.g. "cee::elementwise_simple<cee_ops::Add, float, 2>"),
// or -1. The generated table (cee_generated.h) gives the elementwise ops their
// indices directly; this is for code that names its own kernels.
int cee_find_kernel(const char* name_expression);

// Launches kernel `kernel` (an index as above) on `device` with `args`
// (cuLaunchKernel's array of pointers to each parameter) and `shared_bytes` of
// dynamic shared memory, on `stream` (a
// CUstream of that device's primary context; NULL: the legacy default stream).
// The kernel is loaded for the device at its first use, outside any graph
// capture's restrictions. Returns 0 on success; on failure the CUresult (or -1
// when the driver could not be used at all), with a readable message that
// starts with `op` in err[0..err_len).
int cee_launch(int kernel, unsigned grid, unsigned block, unsigned shared_bytes,
               void** args, int device, void* stream, const char* op, char* err,
               size_t err_len);

// How many blocks of `block` threads of kernel `kernel`, each with
// `shared_bytes` of dynamic shared memory, one multiprocessor of `device` runs
// at once (its registers and shared memory decide), in *blocks: what a grid
// that loops needs to fill the GPU in one wave. Loads the kernel as a launch
// would; returns 0, or cee_launch's error result and message.
int cee_resident_blocks(int kernel, unsigned block, unsigned shared_bytes,
                        int device, int* blocks, const char* op, char* err,
                        size_t err_len);

// The streaming multiprocessors of `device`, or 0 where there is no driver or
// no such device.
int cee_multiprocessor_count(int device);

// The name the driver reports for `device` ("NVIDIA H100 80GB HBM3"), looked
// up once per device, or NULL where there is no driver or no such device.
const char* cee_device_name(int device);

// A driver entry point as cuGetProcAddress returns it for the oldest CUDA the
// wheel supports (the harness uses it for memory and copies), or NULL with a
// message in err.
void* cee_cuda_entry_point(const char* name, char* err, size_t err_len);

// The device code this binary carries, e.g.
// "SASS sm_75 sm_80 ...; PTX compute_120 (NVRTC 12.0 + 12.9)".
const char* cee_cuda_arch_list(void);

// The libraries of device code (one per op and dtype, each its own fatbin,
// loaded at the first launch of one of its kernels): how many, the name of one
// (NULL out of range), and whether this process has loaded it (1) or not (0).
// What tests read to see that a first call loads its own library only.
int cee_num_libraries(void);
const char* cee_library_name(int library);
int cee_library_loaded(int library);

#ifdef __cplusplus
}
#endif
