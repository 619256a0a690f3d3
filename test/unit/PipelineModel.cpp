//===- PipelineModel.cpp - A hand-written pipelined plan for the tests ----===//

#include "test/unit/PipelineModel.h"
#include "test/unit/PlanBuilders.h"

#include <functional>
#include <map>
#include <numeric>

namespace tessel::test {

using namespace planfile;

namespace {

int64_t product(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
}

BufferRef stateRef(uint32_t index, int64_t elements) {
  return {Storage::State, index, 0, static_cast<uint64_t>(elements) * 4, DType::F32};
}

/// Writes one program: values by name on a bump-allocated arena; ports for the values it
/// exchanges. A value read that the program wrote itself (in a fused program: any earlier
/// chunk) is that buffer, and a fused program's only output ports are the host's.
class Emitter {
public:
  Emitter(Program &program, bool fused) : p_(program), fused_(fused) {}

  BufferRef value(const std::string &name, int64_t elements, DType type = DType::F32) {
    auto it = values_.find(name);
    if (it != values_.end())
      return it->second;
    BufferRef b{Storage::Arena, 0, top_ * 4, static_cast<uint64_t>(elements) * 4, type};
    top_ += static_cast<uint64_t>(elements);
    p_.arenaBytes = top_ * 4;
    return values_[name] = b;
  }
  BufferRef in(const std::string &name, std::vector<int64_t> shape,
               std::vector<std::string> split = {}, DType type = DType::F32) {
    if (values_.count(name))
      return values_[name];
    BufferRef b = value(name, product(shape), type);
    p_.inputs.push_back({name, type, shape, split, b});
    return b;
  }
  void out(const std::string &name, std::vector<int64_t> shape) {
    if (fused_ && name != "loss" && name != "logits" && name != "grad_norm" && name != "lr")
      return;
    p_.outputs.push_back({name, DType::F32, shape, {}, values_.at(name)});
  }
  void kernel(const std::string &name, std::vector<BufferRef> ins, std::vector<BufferRef> outs,
              std::vector<Attr> attrs) {
    p_.instrs.push_back(
        makeInstr(name, std::move(ins), std::move(outs), std::move(attrs), "pipeline.model:1:1"));
  }

private:
  Program &p_;
  bool fused_;
  uint64_t top_ = 0;
  std::map<std::string, BufferRef> values_;
};

using Ints = std::vector<int64_t>;

/// The state: E and its gradient, w_c and its gradient per chunk, T; in this order in both
/// plans, so that both draw the same initial weights.
struct StateIndex {
  uint32_t e = 0, eGrad = 1, t = 0;
  uint32_t w(int c) const { return 2 + 2 * static_cast<uint32_t>(c); }
  uint32_t wGrad(int c) const { return w(c) + 1; }
};

class Writer {
public:
  Writer(const PipelineModel &m, bool fused) : m_(m), fused_(fused) {
    s_.t = static_cast<uint32_t>(2 + 2 * m.chunks());
  }

  Plan plan() {
    Plan plan;
    plan.model = "pipeline";
    plan.worldSize = static_cast<uint32_t>(fused_ ? m_.dp : m_.dp * m_.stages);
    const int64_t batch = m_.dp * m_.rows;
    plan.config = {{"dims.batch", batch},
                   {"dims.seq", m_.seq},
                   {"dims.vocab", m_.vocab},
                   {"train.accumulation", int64_t(m_.microbatches)}};
    if (!fused_) {
      plan.config.push_back(
          {"pipeline.schedule", std::string(pipeline::scheduleKindName(m_.schedule))});
      plan.config.push_back({"pipeline.stages", int64_t(m_.stages)});
      plan.config.push_back({"pipeline.microbatches", int64_t(m_.microbatches)});
      plan.config.push_back({"pipeline.virtual", int64_t(m_.virtualStages)});
    }
    addState(plan);
    addMesh(plan);
    for (uint32_t stage = 0; stage < plan.pipelineStages(); ++stage)
      addPrograms(plan, stage);
    return plan;
  }

private:
  int last() const { return m_.chunks() - 1; }
  int64_t n() const { return m_.rows * m_.seq; }
  int64_t nd() const { return n() * m_.dim; }
  int64_t table() const { return m_.vocab * m_.dim; }
  uint32_t stageOf(int c) const { return static_cast<uint32_t>(c % m_.stages); }
  std::vector<std::string> batchSplit() const {
    return m_.dp > 1 ? std::vector<std::string>{"dp", ""} : std::vector<std::string>{};
  }

  void addState(Plan &plan) {
    auto tensor = [&](const std::string &name, const std::string &role, const std::string &of,
                      Ints shape, uint32_t stage) {
      StateTensor t;
      t.name = name;
      t.role = role;
      t.of = of;
      t.shape = std::move(shape);
      t.init = role == "param" ? "normal" : "zeros";
      t.initB = 0.5;
      if (!fused_)
        t.stages = {stage};
      plan.state.push_back(t);
    };
    tensor("E", "param", "", {m_.vocab, m_.dim}, 0);
    tensor("E.grad", "grad", "E", {m_.vocab, m_.dim}, 0);
    for (int c = 0; c < m_.chunks(); ++c) {
      std::string w = "w" + std::to_string(c);
      tensor(w, "param", "", {m_.dim}, stageOf(c));
      tensor(w + ".grad", "grad", w, {m_.dim}, stageOf(c));
    }
    tensor("T", "param", "", {m_.vocab, m_.dim}, stageOf(last()));
  }

  /// The mesh {dp, pp} (rank = dp index × stages + stage), with a group per axis and "world".
  void addMesh(Plan &plan) {
    if (m_.dp > 1)
      plan.mesh.push_back({"dp", static_cast<uint32_t>(m_.dp)});
    if (!fused_)
      plan.mesh.push_back({"pp", static_cast<uint32_t>(m_.stages)});
    Group world{"world", {}};
    for (uint32_t a = 0; a < plan.mesh.size(); ++a) {
      world.axes.push_back(a);
      plan.groups.push_back({plan.mesh[a].name, {a}});
    }
    plan.groups.push_back(world);
  }

  void addPrograms(Plan &plan, uint32_t stage) {
    auto add = [&](const std::string &name, auto emit) {
      Program p;
      p.name = name;
      p.stage = stage;
      Emitter e(p, fused_);
      emit(e);
      plan.programs.push_back(std::move(p));
    };
    if (fused_) {
      add("forward_backward", [&](Emitter &e) {
        for (int c = 0; c <= last(); ++c)
          forward(e, c, "forward");
        for (int c = last(); c >= 0; --c)
          backward(e, c, true, true);
      });
      add("eval", [&](Emitter &e) {
        for (int c = 0; c <= last(); ++c)
          forward(e, c, "eval");
      });
      add("sample", [&](Emitter &e) {
        for (int c = 0; c <= last(); ++c)
          forward(e, c, "sample");
      });
    } else {
      for (int c = 0; c <= last(); ++c) {
        if (stageOf(c) != stage)
          continue;
        std::string n = "." + std::to_string(c);
        add("forward" + n, [&](Emitter &e) { forward(e, c, "forward"); });
        if (m_.schedule == pipeline::ScheduleKind::ZBH1) {
          add("backward_input" + n, [&](Emitter &e) { backward(e, c, true, false); });
          add("backward_weight" + n, [&](Emitter &e) { backward(e, c, false, true); });
        } else {
          add("backward" + n, [&](Emitter &e) { backward(e, c, true, true); });
        }
        add("eval" + n, [&](Emitter &e) { forward(e, c, "eval"); });
        add("sample" + n, [&](Emitter &e) { forward(e, c, "sample"); });
      }
    }
    add("optimizer_step", [&](Emitter &e) { optimizer(e, stage); });
  }

  // Kernels.
  void scaleRows(Emitter &e, BufferRef x, BufferRef w, BufferRef y) {
    e.kernel("binary", {x, w}, {y},
             {{"op", std::string("mul")},
              {"shape", Ints{n(), m_.dim}},
              {"a_strides", Ints{m_.dim, 1}},
              {"b_strides", Ints{0, 1}}});
  }
  void multiply(Emitter &e, BufferRef a, BufferRef b, BufferRef y) {
    e.kernel("binary", {a, b}, {y},
             {{"op", std::string("mul")},
              {"shape", Ints{nd()}},
              {"a_strides", Ints{1}},
              {"b_strides", Ints{1}}});
  }
  void sumRows(Emitter &e, BufferRef x, BufferRef y) {
    e.kernel("reduce", {x}, {y},
             {{"shape", Ints{n(), m_.dim}},
              {"y_strides", Ints{0, 1}},
              {"y_elements", m_.dim},
              {"scale", 1.0}});
  }
  void sumAll(Emitter &e, BufferRef x, BufferRef y) {
    e.kernel("reduce", {x}, {y},
             {{"shape", Ints{nd()}},
              {"y_strides", Ints{0}},
              {"y_elements", int64_t(1)},
              {"scale", 1.0}});
  }
  void embed(Emitter &e, uint32_t tableState, BufferRef ids, BufferRef y) {
    e.kernel("embedding", {stateRef(tableState, table()), ids}, {y},
             {{"n", n()}, {"rows", m_.vocab}, {"cols", m_.dim}});
  }
  void sumOverDp(Emitter &e, BufferRef x, int64_t elements) {
    if (m_.dp > 1)
      e.kernel("all_reduce", {x}, {x},
               {{"group", std::string("dp")}, {"op", std::string("sum")}, {"n", elements}});
  }
  void accumulate(Emitter &e, BufferRef x, uint32_t state, int64_t elements) {
    e.kernel("accumulate", {x}, {stateRef(state, elements)}, {{"n", elements}});
  }

  /// Chunk c's forward pass; `kind` "forward" also outputs what its backward pass needs.
  void forward(Emitter &e, int c, const std::string &kind) {
    const Ints act{n(), m_.dim};
    BufferRef x;
    if (c == 0) {
      BufferRef ids = e.in("tokens", {m_.rows, m_.seq}, batchSplit(), DType::I32);
      x = e.value("x0", nd());
      embed(e, s_.e, ids, x);
      if (kind == "forward")
        e.out("x0", act);
    } else {
      x = e.in("h" + std::to_string(c - 1), act);
    }
    if (c < last()) {
      std::string h = "h" + std::to_string(c);
      scaleRows(e, x, stateRef(s_.w(c), m_.dim), e.value(h, nd()));
      e.out(h, act);
      return;
    }
    BufferRef y = e.value(kind == "sample" ? "logits" : "y", nd());
    scaleRows(e, x, stateRef(s_.w(c), m_.dim), y);
    if (kind == "sample") {
      e.out("logits", act);
      return;
    }
    BufferRef tids = e.in("targets", {m_.rows, m_.seq}, batchSplit(), DType::I32);
    BufferRef t = e.value("tgt", nd()), yt = e.value("yt", nd()), loss = e.value("loss", 1);
    embed(e, s_.t, tids, t);
    multiply(e, y, t, yt);
    sumAll(e, yt, loss);
    sumOverDp(e, loss, 1);
    e.out("loss", {1});
    if (kind == "forward")
      e.out("tgt", act);
  }

  /// Chunk c's backward pass: the input gradient (`input`) and the weight gradients (`weight`).
  void backward(Emitter &e, int c, bool input, bool weight) {
    const Ints act{n(), m_.dim};
    BufferRef g = e.in(c == last() ? "tgt" : "g" + std::to_string(c), act);
    BufferRef w = stateRef(s_.w(c), m_.dim);
    if (input) {
      std::string name = c > 0 ? "g" + std::to_string(c - 1) : "dx0";
      scaleRows(e, g, w, e.value(name, nd()));
      if (c > 0 || !weight)
        e.out(name, act);
    }
    if (!weight)
      return;
    BufferRef x = e.in(c == 0 ? "x0" : "h" + std::to_string(c - 1), act);
    std::string k = std::to_string(c);
    BufferRef prod = e.value("gw_prod" + k, nd()), gw = e.value("gw" + k, m_.dim);
    multiply(e, g, x, prod);
    sumRows(e, prod, gw);
    sumOverDp(e, gw, m_.dim);
    accumulate(e, gw, s_.wGrad(c), m_.dim);
    if (c > 0)
      return;
    BufferRef dx = e.in("dx0", act);
    BufferRef ids = e.in("tokens", {m_.rows, m_.seq}, batchSplit(), DType::I32);
    BufferRef gE = e.value("gE", table());
    e.kernel("embedding_grad", {dx, ids}, {gE}, {{"n", n()}, {"rows", m_.vocab}, {"cols", m_.dim}});
    sumOverDp(e, gE, table());
    accumulate(e, gE, s_.eGrad, table());
  }

  /// p -= 0.1 g for every parameter with a gradient the rank holds; the gradients cleared.
  void optimizer(Emitter &e, uint32_t stage) {
    BufferRef lr = e.value("lr", 1), norm = e.value("grad_norm", 1);
    e.kernel("fill", {}, {lr}, {{"n", int64_t(1)}, {"value", 0.1}});
    e.kernel("fill", {}, {norm}, {{"n", int64_t(1)}, {"value", 1.0}});
    auto update = [&](uint32_t param, uint32_t grad, int64_t elements, uint32_t holder) {
      if (!fused_ && holder != stage)
        return;
      BufferRef step = e.value("step" + std::to_string(param), elements);
      e.kernel("binary", {stateRef(grad, elements), lr}, {step},
               {{"op", std::string("mul")},
                {"shape", Ints{elements}},
                {"a_strides", Ints{1}},
                {"b_strides", Ints{0}}});
      e.kernel("binary", {stateRef(param, elements), step}, {stateRef(param, elements)},
               {{"op", std::string("sub")},
                {"shape", Ints{elements}},
                {"a_strides", Ints{1}},
                {"b_strides", Ints{1}}});
      e.kernel("fill", {}, {stateRef(grad, elements)}, {{"n", elements}, {"value", 0.0}});
    };
    update(s_.e, s_.eGrad, table(), 0);
    for (int c = 0; c < m_.chunks(); ++c)
      update(s_.w(c), s_.wGrad(c), m_.dim, stageOf(c));
    e.out("grad_norm", {1});
    e.out("lr", {1});
  }

  const PipelineModel &m_;
  bool fused_;
  StateIndex s_;
};

} // namespace

Plan PipelineModel::pipelined() const { return Writer(*this, false).plan(); }
Plan PipelineModel::fused() const { return Writer(*this, true).plan(); }

} // namespace tessel::test
