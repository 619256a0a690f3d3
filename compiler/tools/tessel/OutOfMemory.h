//===- OutOfMemory.h - Ending the compiler when memory runs out -*- C++ -*-===//
#ifndef TESSEL_TOOLS_TESSEL_OUTOFMEMORY_H
#define TESSEL_TOOLS_TESSEL_OUTOFMEMORY_H

namespace tessel {

/// Prints "out of memory" and ends the process with exit code 2. Allocates nothing.
[[noreturn]] void outOfMemory();

/// Makes every allocation failure end the run through outOfMemory(): operator new's (through
/// the new-handler) and LLVM's (its bad-alloc handler). malloc's are covered by this file's
/// malloc, which the whole process uses.
void installOutOfMemoryHandlers();

} // namespace tessel

#endif // TESSEL_TOOLS_TESSEL_OUTOFMEMORY_H
