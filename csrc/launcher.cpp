// CUDA launcher: runs the embedded device code's kernels through the NVIDIA
// driver API, with no CUDA runtime.
//
// Op-agnostic: it knows kernels by their index in the generated table
// (cee_generated.h, from the op declarations), never by what they compute.
//
// Why the driver API: the device code is CUDA 12 (NVRTC), which every driver
// >= CEE_MIN_DRIVER runs, and a launcher that links no cudart adds no newer
// floor of its own. What it relies on:
// - libcuda.so.1 is opened at the first CUDA call (never at import, so CPU-only
//   machines load the extension); every entry point comes from
//   cuGetProcAddress asking for CUDA 12.0 behaviour, the oldest driver we
//   promise, through the versioned PFN_*_vNNNNN types of cudaTypedefs.h (a test
//   checks each against the CUDA 12.0 driver API).
// - the device code is one library per op and dtype (a fatbin of its own,
//   every target in it; cee_generated.h says which library each kernel is
//   in). A library is loaded with cuLibraryLoadData at the first launch of one
//   of its kernels, once per process (its own Once: a failed load keeps its
//   error), and serves every device (context-independent). So the first call
//   of an op in a dtype loads those few kernels only: its cost does not grow
//   with the number of ops and dtypes in the wheel (cold start), and the
//   driver's loading cost grows with the kernels a library holds.
// - a launch runs in the primary context of the tensors' device. torch has
//   made it current already (device guard); if not (another thread, the
//   harness), it is pushed for the launch and popped again, so the caller's
//   context state never changes.
// - before a kernel's first launch on a device, it is resolved for that
//   device's context with cuLibraryGetKernel then cuKernelGetFunction (both
//   CUDA 12.0), which loads it there, and the launch then uses that
//   CUfunction. So no launch relies on the driver loading the kernel lazily
//   inside cuLaunchKernel, which drivers before CUDA 12.3 cannot do while the
//   stream captures a CUDA graph.
// - graph capture: the library load and the kernel resolution run with this
//   thread's capture mode set to relaxed (cuThreadExchangeStreamCaptureMode),
//   so the first call of an op made inside torch.cuda.graph capture may still
//   load its library and kernel: those are not stream work, and the only call
//   on the capturing stream is cuLaunchKernel of a resolved CUfunction. A
//   driver that refuses anyway gets an error saying to call the op once
//   before capturing.
// - a toolkit stub libcuda.so.1, or a driver without code for the GPU, gets
//   one error that names the cause and the fix.
// Compiled by zig with the other host code; includes only NVIDIA's C headers.
#include "launcher.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "cee_generated.h"  // CEE_DEVICE_CODE, cee_kernel_names, CEE_MIN_DRIVER
#include "dynamic_loader.h"

// Each library's fatbin, embedded by the generated device_code.S (section
// .nv_fatbin; .nv_fatb in a Windows DLL) under the symbol cee_fatbin_<name>.
#define CEE_DECLARE_FATBIN(index, name) \
  extern "C" const unsigned char cee_fatbin_##name[];
CEE_FOR_EACH_LIBRARY(CEE_DECLARE_FATBIN)
#undef CEE_DECLARE_FATBIN

namespace {

// The oldest driver API the launcher asks for (pyproject.toml min-driver-cuda).
constexpr int kDriverApiVersion = CEE_MIN_DRIVER_API;
constexpr int kMaxDevices = CEE_MAX_DEVICES;

// Every driver entry point the launcher uses, with the version of its ABI
// (the N of PFN_name_vN). tests/building/test_launcher.py reads this list.
#define CEE_DRIVER_ENTRY_POINTS(X)            \
  X(cuInit, 2000)                             \
  X(cuGetErrorName, 6000)                     \
  X(cuGetErrorString, 6000)                   \
  X(cuDeviceGet, 2000)                        \
  X(cuDeviceGetAttribute, 2000)               \
  X(cuDeviceGetName, 2000)                    \
  X(cuDevicePrimaryCtxRetain, 7000)           \
  X(cuCtxGetCurrent, 4000)                    \
  X(cuCtxPushCurrent, 4000)                   \
  X(cuCtxPopCurrent, 4000)                    \
  X(cuThreadExchangeStreamCaptureMode, 10010) \
  X(cuLibraryLoadData, 12000)                 \
  X(cuLibraryGetKernel, 12000)                \
  X(cuKernelGetFunction, 12000)               \
  X(cuLaunchKernel, 4000)                     \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)

struct Driver {
#define CEE_DRIVER_MEMBER(name, version) PFN_##name##_v##version name;
  CEE_DRIVER_ENTRY_POINTS(CEE_DRIVER_MEMBER)
#undef CEE_DRIVER_MEMBER
  PFN_cuGetProcAddress_v12000 get_proc_address;
};

// One setup step (the driver; a library of device code), tried once: its
// error is kept for every later call. Its mutex serializes the first try only.
struct Once {
  std::mutex mutex;
  bool tried = false;
  std::atomic<bool> ok{false};
  CUresult status = CUDA_SUCCESS;  // the failing driver call's result, if any
  char error[512] = {0};
};

// One library of device code (one op's fatbin for one dtype), loaded at the
// first launch of one of its kernels.
struct Library {
  Once step;
  CUlibrary handle = nullptr;  // set by step
};

const unsigned char* const kFatbins[CEE_NUM_LIBRARIES] = {
#define CEE_FATBIN_ADDRESS(index, name) cee_fatbin_##name,
    CEE_FOR_EACH_LIBRARY(CEE_FATBIN_ADDRESS)
#undef CEE_FATBIN_ADDRESS
};

// The driver, the loaded libraries and what was looked up in them. Calls
// after the first read atomics only (launch-bound callers count every lock);
// the mutex serializes the first look-ups of kernels and contexts.
struct State {
  std::mutex mutex;
  Once driver_step;
  Library libraries[CEE_NUM_LIBRARIES];
  Driver driver = {};
  CUkernel kernels[CEE_NUM_KERNELS] = {};  // under the mutex
  std::atomic<CUcontext> primary[kMaxDevices] = {};
  // Each device's name (cee_device_name), once looked up.
  char device_names[kMaxDevices][256] = {};
  std::atomic<bool> named[kMaxDevices] = {};
  // Each kernel, once resolved (loaded) for the device's primary context.
  std::atomic<CUfunction> functions[kMaxDevices][CEE_NUM_KERNELS] = {};
};

State& state() {
  static State s;
  return s;
}

void describe_driver_error(const Driver& d, CUresult status, const char* what,
                           char* out, size_t len) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(status, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(status, &text);
  snprintf(out, len, "%s failed: %s (%s)", what, name ? name : "CUDA_ERROR_?",
           text ? text : "no description");
}

// One entry point as CUDA 12.0 behaves, or nullptr.
void* entry_point(const Driver& d, const char* name) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found;
  if (d.get_proc_address(name, &fn, kDriverApiVersion,
                         CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                         &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS)
    return nullptr;
  return fn;
}

// The CUDA toolkit ships a libcuda.so.1 for linking only (lib64/stubs); found
// first on the library path, it answers CUDA_ERROR_STUB_LIBRARY to every call.
void describe_stub(void* symbol, char* out, size_t len) {
  char path[256] = CEE_DRIVER_LIBRARY;
  cee::library_file_of(symbol, path, sizeof path);
  char folder[256];
  snprintf(folder, sizeof folder, "%s", path);
  char* slash = strrchr(folder, '/');
#ifdef _WIN32
  if (char* back = strrchr(folder, '\\'); back && (!slash || back > slash))
    slash = back;
#endif
  if (slash) slash[slash == folder ? 1 : 0] = '\0';  // "/x": the root stays
  snprintf(out, len,
           "the " CEE_DRIVER_LIBRARY
           " this process loaded (%s) is the CUDA toolkit's stub library "
           "(CUDA_ERROR_STUB_LIBRARY), made for linking, not an NVIDIA driver. "
           "Remove %s from " CEE_PATH_VARIABLE
           " (and the loader's configuration), and install an NVIDIA driver "
           ">= " CEE_MIN_DRIVER
           " on a GPU machine; the CPU kernels work without one",
           path, slash ? folder : ".");
}

// Opens the driver library (libcuda.so.1, nvcuda.dll) and takes the entry
// points; false with once.error set.
bool load_driver(State& s, Once& once) {
  char why[256] = "";
  void* lib = cee::open_library(CEE_DRIVER_LIBRARY, why, sizeof why);
  if (!lib) {
    snprintf(once.error, sizeof once.error,
             "cannot load the NVIDIA driver library " CEE_DRIVER_LIBRARY
             " (%s). Install an NVIDIA driver >= " CEE_MIN_DRIVER
             " (CUDA " CEE_MIN_DRIVER_CUDA
             "); the CPU kernels work without one",
             why);
    return false;
  }
  auto driver_version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(
      cee::library_symbol(lib, "cuDriverGetVersion"));
  int version = 0;
  if (driver_version && driver_version(&version) == CUDA_ERROR_STUB_LIBRARY) {
    once.status = CUDA_ERROR_STUB_LIBRARY;
    describe_stub(reinterpret_cast<void*>(driver_version), once.error,
                  sizeof once.error);
    return false;
  }
  s.driver.get_proc_address = reinterpret_cast<PFN_cuGetProcAddress_v12000>(
      cee::library_symbol(lib, "cuGetProcAddress_v2"));
  if (version < kDriverApiVersion || !s.driver.get_proc_address) {
    snprintf(once.error, sizeof once.error,
             "the NVIDIA driver supports CUDA %d.%d; this wheel's GPU kernels "
             "need a driver for CUDA >= " CEE_MIN_DRIVER_CUDA
             " (>= " CEE_MIN_DRIVER "). Update the NVIDIA driver",
             version / 1000, version % 1000 / 10);
    return false;
  }
  Driver& d = s.driver;
#define CEE_DRIVER_LOAD(name, version)                                       \
  d.name = reinterpret_cast<PFN_##name##_v##version>(entry_point(d, #name)); \
  if (!d.name) {                                                             \
    snprintf(once.error, sizeof once.error,                                  \
             "the NVIDIA driver has no %s for CUDA " CEE_MIN_DRIVER_CUDA,    \
             #name);                                                         \
    return false;                                                            \
  }
  CEE_DRIVER_ENTRY_POINTS(CEE_DRIVER_LOAD)
#undef CEE_DRIVER_LOAD
  return true;
}

bool initialize_driver(State& s, Once& once) {
  if (!load_driver(s, once)) return false;
  once.status = s.driver.cuInit(0);
  if (once.status == CUDA_ERROR_STUB_LIBRARY) {
    describe_stub(reinterpret_cast<void*>(s.driver.cuInit), once.error,
                  sizeof once.error);
    return false;
  }
  if (once.status != CUDA_SUCCESS) {
    describe_driver_error(s.driver, once.status, "cuInit", once.error,
                          sizeof once.error);
    return false;
  }
  return true;
}

// While this thread captures a CUDA graph in the default (global) mode, the
// driver refuses calls it deems unsafe; loading code is not stream work, so
// the loading calls run in relaxed mode and the caller's mode is restored.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(const Driver& d) : d_(d) {
    ok_ = d_.cuThreadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCapture() {
    if (ok_) d_.cuThreadExchangeStreamCaptureMode(&mode_);
  }

 private:
  const Driver& d_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool ok_ = false;
};

// Loads one library's fatbin (cuLibraryLoadData); its kernels are resolved
// for a device at their first launch there (resolve_kernel).
bool load_library(State& s, int index, Once& once) {
  RelaxedCapture relaxed(s.driver);
  // The fatbin lies in this binary's read-only data for the whole process and
  // is never unloaded: the driver may read it in place rather than copy it
  // first (a hint, CUDA 12.0's), which makes the first call cheaper.
  CUlibraryOption options[] = {CU_LIBRARY_BINARY_IS_PRESERVED};
  void* values[] = {reinterpret_cast<void*>(static_cast<uintptr_t>(1))};
  once.status =
      s.driver.cuLibraryLoadData(&s.libraries[index].handle, kFatbins[index],
                                 nullptr, nullptr, 0, options, values, 1);
  if (once.status != CUDA_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what,
             "loading the device code of %s (cuLibraryLoadData)",
             cee_library_names[index]);
    describe_driver_error(s.driver, once.status, what, once.error,
                          sizeof once.error);
    return false;
  }
  return true;
}

// Runs a setup step (step(once) -> ok) once per process; false with its error
// in err.
template <typename Step>
bool run_once(Once& once, Step step, char* err, size_t err_len) {
  if (once.ok.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(once.mutex);
  if (!once.tried) {
    once.tried = true;
    once.ok.store(step(once), std::memory_order_release);
  }
  if (once.ok.load(std::memory_order_relaxed)) return true;
  snprintf(err, err_len, "%s", once.error);
  return false;
}

bool driver_ready(State& s, char* err, size_t err_len) {
  return run_once(
      s.driver_step, [&s](Once& once) { return initialize_driver(s, once); },
      err, err_len);
}

// The kernel loaded for the device's primary context (current), resolved at its
// first use: cuLibraryGetKernel in its library (loaded; context-independent,
// once) then cuKernelGetFunction.
CUresult resolve_kernel(State& s, int device, int kernel, CUfunction* out,
                        const char** what) {
  std::atomic<CUfunction>& cached = s.functions[device][kernel];
  if ((*out = cached.load(std::memory_order_acquire))) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(s.mutex);
  if ((*out = cached.load(std::memory_order_relaxed))) return CUDA_SUCCESS;
  RelaxedCapture relaxed(s.driver);
  CUresult status = CUDA_SUCCESS;
  if (!s.kernels[kernel]) {
    *what = "cuLibraryGetKernel";
    status = s.driver.cuLibraryGetKernel(
        &s.kernels[kernel], s.libraries[cee_kernel_libraries[kernel]].handle,
        cee_kernel_names[kernel]);
  }
  if (status == CUDA_SUCCESS) {
    *what = "loading the kernel for this GPU (cuKernelGetFunction)";
    status = s.driver.cuKernelGetFunction(out, s.kernels[kernel]);
  }
  if (status == CUDA_SUCCESS) cached.store(*out, std::memory_order_release);
  return status;
}

// The device's primary context (torch's), retained once for the process.
CUresult primary_context(State& s, int device, CUcontext* out) {
  std::atomic<CUcontext>& cached = s.primary[device];
  if ((*out = cached.load(std::memory_order_acquire))) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(s.mutex);
  if ((*out = cached.load(std::memory_order_relaxed))) return CUDA_SUCCESS;
  RelaxedCapture relaxed(s.driver);
  CUdevice dev;
  CUresult status = s.driver.cuDeviceGet(&dev, device);
  if (status == CUDA_SUCCESS)
    status = s.driver.cuDevicePrimaryCtxRetain(out, dev);
  if (status == CUDA_SUCCESS) cached.store(*out, std::memory_order_release);
  return status;
}

bool no_code_for_gpu(CUresult status) {
  return status == CUDA_ERROR_NO_BINARY_FOR_GPU ||
         status == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
         status == CUDA_ERROR_INVALID_PTX;
}

bool capture_refused(CUresult status) {
  return status >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
         status <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

void describe_launch_error(const Driver& d, CUresult status, int device,
                           const char* op, const char* what, char* err,
                           size_t err_len) {
  char driver_error[256];
  describe_driver_error(d, status, what, driver_error, sizeof driver_error);
  if (no_code_for_gpu(status)) {
    int major = 0, minor = 0;
    char name[128] = "unknown GPU";
    CUdevice dev;
    if (d.cuDeviceGet(&dev, device) == CUDA_SUCCESS) {
      d.cuDeviceGetAttribute(&major,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
      d.cuDeviceGetAttribute(&minor,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
      d.cuDeviceGetName(name, sizeof name, dev);
    }
    snprintf(err, err_len,
             "%s: this cuda_ext_example wheel has no GPU code for cuda:%d "
             "(%s, compute capability %d.%d, sm_%d%d). The wheel carries %s. "
             "Use a GPU from that list, or build from source for your GPU "
             "(see `python -m cuda_ext_example doctor`). [%s]",
             op, device, name, major, minor, major, minor, CEE_DEVICE_CODE,
             driver_error);
    return;
  }
  if (capture_refused(status)) {
    snprintf(err, err_len,
             "%s: the first call on cuda:%d ran inside CUDA graph capture and "
             "this driver could not load the kernels there. Call the op once "
             "before capturing (torch.cuda.graph's warm-up). [%s]",
             op, device, driver_error);
    return;
  }
  snprintf(err, err_len, "%s: CUDA driver error on cuda:%d: %s", op, device,
           driver_error);
}

// Runs use(function, &what) with `kernel` loaded and resolved for `device`,
// in the device's primary context (pushed if another is current, popped
// after). Returns the failing driver call's result (-1: no driver or bad
// arguments), with a message that starts with `op` in err.
template <typename Use>
int with_kernel(int kernel, int device, const char* op, char* err,
                size_t err_len, Use use) {
  char reason[512];
  State& s = state();
  if (!driver_ready(s, reason, sizeof reason)) {
    snprintf(err, err_len, "%s: %s", op, reason);
    return -1;
  }
  if (device < 0 || device >= kMaxDevices || kernel < 0 ||
      kernel >= CEE_NUM_KERNELS) {
    snprintf(err, err_len, "%s: bad device %d or kernel %d", op, device,
             kernel);
    return -1;
  }
  const Driver& d = s.driver;
  const int index = cee_kernel_libraries[kernel];
  Library& library = s.libraries[index];
  auto load = [&s, index](Once& once) { return load_library(s, index, once); };
  if (!run_once(library.step, load, reason, sizeof reason)) {
    char what[128];
    snprintf(what, sizeof what,
             "loading the device code of %s (cuLibraryLoadData)",
             cee_library_names[index]);
    describe_launch_error(d, library.step.status, device, op, what, err,
                          err_len);
    return -1;
  }
  const char* what = "cuDevicePrimaryCtxRetain";
  CUcontext ctx = nullptr, current = nullptr;
  CUresult status = primary_context(s, device, &ctx);
  if (status == CUDA_SUCCESS) status = d.cuCtxGetCurrent(&current);
  const bool push = status == CUDA_SUCCESS && current != ctx;
  if (push) status = d.cuCtxPushCurrent(ctx);
  if (status == CUDA_SUCCESS) {
    CUfunction function = nullptr;
    status = resolve_kernel(s, device, kernel, &function, &what);
    if (status == CUDA_SUCCESS) status = use(d, function, &what);
    if (push) {
      CUcontext popped;
      d.cuCtxPopCurrent(&popped);
    }
  }
  if (status != CUDA_SUCCESS)
    describe_launch_error(d, status, device, op, what, err, err_len);
  return (int)status;
}

}  // namespace

extern "C" int cee_find_kernel(const char* name_expression) {
  for (int i = 0; i < CEE_NUM_KERNELS; ++i)
    if (strcmp(cee_kernel_expressions[i], name_expression) == 0) return i;
  return -1;
}

extern "C" int cee_launch(int kernel, unsigned grid, unsigned block,
                          unsigned shared_bytes, void** args, int device,
                          void* stream, const char* op, char* err,
                          size_t err_len) {
  return with_kernel(kernel, device, op, err, err_len,
                     [&](const Driver& d, CUfunction f, const char** what) {
                       *what = "cuLaunchKernel";
                       return d.cuLaunchKernel(
                           f, grid, 1, 1, block, 1, 1, shared_bytes,
                           static_cast<CUstream>(stream), args, nullptr);
                     });
}

extern "C" int cee_resident_blocks(int kernel, unsigned block,
                                   unsigned shared_bytes, int device,
                                   int* blocks, const char* op, char* err,
                                   size_t err_len) {
  *blocks = 0;
  // The last answer per device and kernel, keyed by its question: a host
  // function asks the same one at every call.
  static std::atomic<uint64_t> answers[kMaxDevices][CEE_NUM_KERNELS] = {};
  const uint64_t question = (uint64_t)shared_bytes << 32 | (uint64_t)block << 8;
  if (device >= 0 && device < kMaxDevices && kernel >= 0 &&
      kernel < CEE_NUM_KERNELS) {
    const uint64_t known =
        answers[device][kernel].load(std::memory_order_relaxed);
    if (known && (known & ~uint64_t(0xff)) == question) {
      *blocks = (int)(known & 0xff);
      return 0;
    }
  }
  const int status =
      with_kernel(kernel, device, op, err, err_len,
                  [&](const Driver& d, CUfunction f, const char** what) {
                    *what = "cuOccupancyMaxActiveBlocksPerMultiprocessor";
                    return d.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        blocks, f, (int)block, shared_bytes);
                  });
  if (status == 0 && *blocks > 0 && *blocks < 256)
    answers[device][kernel].store(question | (uint64_t)*blocks,
                                  std::memory_order_relaxed);
  return status;
}

extern "C" const char* cee_device_name(int device) {
  State& s = state();
  char err[512];
  if (device < 0 || device >= kMaxDevices || !driver_ready(s, err, sizeof err))
    return nullptr;
  if (s.named[device].load(std::memory_order_acquire))
    return s.device_names[device];
  std::lock_guard<std::mutex> lock(s.mutex);
  CUdevice dev;
  if (!s.named[device].load(std::memory_order_relaxed)) {
    if (s.driver.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        s.driver.cuDeviceGetName(s.device_names[device],
                                 sizeof s.device_names[device],
                                 dev) != CUDA_SUCCESS)
      return nullptr;
    s.named[device].store(true, std::memory_order_release);
  }
  return s.device_names[device];
}

extern "C" int cee_multiprocessor_count(int device) {
  State& s = state();
  char err[512];
  CUdevice dev;
  int count = 0;
  if (device < 0 || device >= kMaxDevices ||
      !driver_ready(s, err, sizeof err) ||
      s.driver.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
      s.driver.cuDeviceGetAttribute(&count,
                                    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                    dev) != CUDA_SUCCESS)
    return 0;
  return count;
}

extern "C" void* cee_cuda_entry_point(const char* name, char* err,
                                      size_t err_len) {
  State& s = state();
  if (!driver_ready(s, err, err_len)) return nullptr;
  void* fn = entry_point(s.driver, name);
  if (!fn)
    snprintf(err, err_len, "the NVIDIA driver has no %s for CUDA %s", name,
             CEE_MIN_DRIVER_CUDA);
  return fn;
}

extern "C" const char* cee_cuda_arch_list(void) { return CEE_DEVICE_CODE; }

extern "C" int cee_num_libraries(void) { return CEE_NUM_LIBRARIES; }

extern "C" const char* cee_library_name(int library) {
  return library >= 0 && library < CEE_NUM_LIBRARIES
             ? cee_library_names[library]
             : nullptr;
}

extern "C" int cee_library_loaded(int library) {
  if (library < 0 || library >= CEE_NUM_LIBRARIES) return 0;
  return state().libraries[library].step.ok.load(std::memory_order_acquire);
}
