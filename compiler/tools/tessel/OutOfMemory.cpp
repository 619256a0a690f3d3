//===- OutOfMemory.cpp - Ending the compiler when memory runs out ---------===//
//
// A compile that runs out of memory (a huge model, or an address-space limit) must end with a
// message, not an abort or a crash. Three kinds of allocation fail differently: operator new
// calls the new-handler, LLVM's own allocations call its bad-alloc handler, and MLIR allocates
// each operation with malloc and uses the result unchecked, so that a failure there is a
// segmentation fault. This file therefore also defines malloc, calloc and realloc (and free,
// which glibc requires to be replaced with them) for the whole process, over glibc's own
// allocator, treating a null result as the end of the run, as an xmalloc would.
//
//===----------------------------------------------------------------------===//

#include "OutOfMemory.h"

#include "llvm/Support/ErrorHandling.h"

#include <cstddef>
#include <cstdlib>
#include <new>
#include <unistd.h>

extern "C" {
// glibc's allocator under its own names, which the definitions below forward to.
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *pointer, size_t size);
void __libc_free(void *pointer);

void *malloc(size_t size) noexcept {
  void *p = __libc_malloc(size);
  if (!p && size)
    tessel::outOfMemory();
  return p;
}

void *calloc(size_t count, size_t size) noexcept {
  void *p = __libc_calloc(count, size);
  if (!p && count && size)
    tessel::outOfMemory();
  return p;
}

void *realloc(void *pointer, size_t size) noexcept {
  void *p = __libc_realloc(pointer, size);
  if (!p && size)
    tessel::outOfMemory();
  return p;
}

void free(void *pointer) noexcept { __libc_free(pointer); }
}

namespace tessel {

void outOfMemory() {
  static const char message[] =
      "tessel: error: out of memory (the model needs more memory than this machine or its "
      "address-space limit gives)\n";
  ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
  std::_Exit(2);
}

void installOutOfMemoryHandlers() {
  std::set_new_handler([] { outOfMemory(); });
  llvm::install_bad_alloc_error_handler([](void *, const char *, bool) { outOfMemory(); });
}

} // namespace tessel
