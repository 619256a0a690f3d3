// A compiler file that reaches into the runtime.

#include "runtime/PipelineRank.h"
#include "../../runtime/Executor.h"
#include "common/PlanFile.h"
