// A communicator that reaches up into the devices' kernel calls.
#include "runtime/device/KernelCall.h"
#include "runtime/support/Json.h"
