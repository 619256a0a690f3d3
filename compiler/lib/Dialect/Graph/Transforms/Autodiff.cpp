//===- Autodiff.cpp - Reverse-mode differentiation of @forward ------------===//

#include "tessel/Dialect/Graph/Transforms/DeadCode.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_AUTODIFF
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

/// Gradients collected so far, summed when a value feeds several ops.
class GradientMap {
public:
  void add(OpBuilder &b, Location loc, Value of, Value grad) {
    Value &slot = grads_[of];
    slot = slot ? AddOp::create(b, loc, slot.getType(), slot, grad).getResult() : grad;
  }
  Value lookup(Value of) const { return grads_.lookup(of); }

private:
  DenseMap<Value, Value> grads_;
};

struct Autodiff : tessel::impl::AutodiffBase<Autodiff> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("has no @forward function to differentiate");
      return signalPassFailure();
    }
    if (module.lookupSymbol("forward_backward")) {
      module.emitError("already has @forward_backward");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    if (ret.getNumOperands() != 1 || getNamedShape(ret.getOperand(0).getType()) != NamedShape{}) {
      forward.emitError("must return the scalar loss to be differentiated");
      return signalPassFailure();
    }

    numberDropouts(forward);
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto fb = cast<func::FuncOp>(b.clone(*forward));
    fb.setSymName("forward_backward");
    if (failed(differentiate(fb, settings::trainOf(module).getAccumulation())))
      return signalPassFailure();
    removeDropouts(forward);
  }

  void numberDropouts(func::FuncOp func) {
    int64_t next = 0;
    func.walk([&](DropoutOp op) {
      op.setMaskAttr(IntegerAttr::get(IntegerType::get(op.getContext(), 64), next++));
    });
  }

  /// Evaluation runs without dropout: each dropout forwards its input.
  void removeDropouts(func::FuncOp func) {
    func.walk([](DropoutOp op) {
      op.getResult().replaceAllUsesWith(op.getInput());
      op.erase();
    });
  }

  LogicalResult differentiate(func::FuncOp func, int64_t accumulation) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);

    OpBuilder b(ret);
    GradientMap grads;
    // The gradient of the step's mean loss with respect to this micro-batch's mean loss.
    grads.add(b, loss.getLoc(), loss,
              ConstantOp::create(b, loss.getLoc(), loss.getType(),
                                 b.getF64FloatAttr(1.0 / static_cast<double>(accumulation))));

    SmallVector<ParamOp> params;
    for (Operation *op : llvm::reverse(forwardOps)) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        params.push_back(param);
        continue;
      }
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any)
        continue; // Nothing downstream of this op reaches the loss.
      auto rule = dyn_cast<DifferentiableOpInterface>(op);
      if (!rule)
        return op->emitOpError("has no gradient rule");
      Operation *before = ret->getPrevNode();
      SmallVector<Value> operandGrads;
      if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitOpError("gradient rule returned ")
               << operandGrads.size() << " gradients for " << op->getNumOperands() << " operands";
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
        if (grad)
          grads.add(b, op->getLoc(), operand, grad);
      inheritLayer(op, before, ret);
    }

    // Parameters in the order the forward pass declares them.
    for (ParamOp param : llvm::reverse(params))
      if (Value g = grads.lookup(param.getResult()))
        AccumulateGradOp::create(b, param.getLoc(), g, param.getNameAttr());
    // Gradients of float inputs, and forward values only they needed, feed nothing.
    eraseDeadPureOps(body);
    return success();
  }

  /// Backward ops belong to the layer of the forward op they differentiate, so that layer-
  /// wise passes (pipeline stages, recomputation) see them together.
  static void inheritLayer(Operation *op, Operation *before, Operation *end) {
    Attribute layer = op->getAttr("graph.layer");
    if (!layer)
      return;
    for (Operation *o = before ? before->getNextNode() : &end->getBlock()->front(); o != end;
         o = o->getNextNode())
      o->setAttr("graph.layer", layer);
  }
};

} // namespace
