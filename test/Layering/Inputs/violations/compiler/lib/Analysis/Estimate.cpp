// A compiler file that reaches into the runtime, once through a relative path.
#include "../../../runtime/core/Executor.h"
#include "common/plan/PlanFile.h"
#include "runtime/PipelineRank.h"
