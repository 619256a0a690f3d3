// Shared code that depends on the runtime.

#include "runtime/Json.h"
#include "common/Checksum.h"
