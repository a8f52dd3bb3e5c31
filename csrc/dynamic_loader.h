// The few calls of the system's dynamic loader the host code makes, for Linux
// (dlopen/dlsym/dladdr) and Windows (LoadLibrary/GetProcAddress/
// GetModuleHandleEx), and the names of the libraries it looks in. Nothing else
// in csrc/ knows which system it is built for.
#pragma once

#include <stddef.h>
#include <stdio.h>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <dlfcn.h>
#endif

// The libraries looked up by name: the NVIDIA driver's, torch's CPU and CUDA
// libraries (torch has loaded those two, or lacks the CUDA one).
#ifdef _WIN32
#define CEE_DRIVER_LIBRARY "nvcuda.dll"
#define CEE_TORCH_CPU_LIBRARY "torch_cpu.dll"
#define CEE_TORCH_CUDA_LIBRARY "torch_cuda.dll"
#define CEE_PATH_VARIABLE "PATH"
#else
#define CEE_DRIVER_LIBRARY "libcuda.so.1"
#define CEE_TORCH_CPU_LIBRARY "libtorch_cpu.so"
#define CEE_TORCH_CUDA_LIBRARY "libtorch_cuda.so"
#define CEE_PATH_VARIABLE "LD_LIBRARY_PATH"
#endif

namespace cee {

// `symbol` of a library this process has loaded already (by its file name),
// or nullptr when that library is not loaded or lacks it. Loads nothing: torch
// loads its libraries privately (RTLD_LOCAL), so no global lookup finds them.
inline void* loaded_library_symbol(const char* library, const char* symbol) {
#ifdef _WIN32
  HMODULE lib = GetModuleHandleA(library);
  return lib ? reinterpret_cast<void*>(GetProcAddress(lib, symbol)) : nullptr;
#else
  void* lib = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return nullptr;
  void* found = dlsym(lib, symbol);
  dlclose(lib);  // RTLD_NOLOAD took a reference; its owner holds its own.
  return found;
#endif
}

// Loads a library for this process's lifetime, or nullptr with the system's
// reason in `why`.
inline void* open_library(const char* name, char* why, size_t len) {
#ifdef _WIN32
  HMODULE lib = LoadLibraryA(name);
  if (!lib) snprintf(why, len, "Windows error %lu", GetLastError());
  return reinterpret_cast<void*>(lib);
#else
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) snprintf(why, len, "%s", dlerror());
  return lib;
#endif
}

inline void* library_symbol(void* lib, const char* name) {
#ifdef _WIN32
  return reinterpret_cast<void*>(
      GetProcAddress(reinterpret_cast<HMODULE>(lib), name));
#else
  return dlsym(lib, name);
#endif
}

// The file `address` was loaded from, into out; false where unknown.
inline bool library_file_of(const void* address, char* out, size_t len) {
#ifdef _WIN32
  HMODULE lib = nullptr;
  if (!GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                              GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          static_cast<LPCSTR>(address), &lib))
    return false;
  return GetModuleFileNameA(lib, out, static_cast<DWORD>(len)) > 0;
#else
  Dl_info info = {};
  if (!address || !dladdr(address, &info) || !info.dli_fname) return false;
  snprintf(out, len, "%s", info.dli_fname);
  return true;
#endif
}

}  // namespace cee
