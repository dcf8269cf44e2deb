// --tandem-autodiff end to end: per gradient rule, a small f64 graph with loss = sum(op(x..) * r)
// (r a fixed random tensor, so every output element weighs differently) is compiled with the
// autodiff pass through the whole CPU pipeline and run; each gradient must match central finite
// differences of the forward plan, element by element.
//
// Precision: the graphs are f64 (the reference CPU kernels run f64), so with h = 1e-5 the
// central difference is off by O(h^2 f''') ~ 1e-10 plus rounding ~ 1e-16 / h ~ 1e-11; a wrong
// rule (a missing term, a transposed operand, a wrong broadcast sum) is off by O(1). The
// tolerance 1e-6 * (1 + |fd|) sits between the two.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/autodiff/GradientRules.h"
#include "frontend/GraphBuilder.h"
#include "mlir/IR/Diagnostics.h"
#include "runtime/OpTable.h"
#include "tools/driver/Driver.h"

using namespace tandem;

namespace {

// A differentiated graph input: name, shape and the range its values are drawn from.
struct Param {
  std::string name;
  Shape shape;
  double lo = -1.0, hi = 1.0;
};
using BuildFn = std::function<Value(GraphBuilder&, const std::vector<Value>&)>;

Tensor randomTensor(const Shape& s, unsigned seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(numElements(s));
  for (double& x : v) x = u(rng);
  return Tensor::fromVector<double>(s, v);
}

// The dtype the graphs of a check are built in: f64 for the finite differences, f32 for the
// comparison of the f32 plan (oneDNN kernels) with the f64 gradients.
DType gDType = DType::F64;

Tensor toF32(const Tensor& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = (float)t.data<double>()[i];
  return Tensor::fromVector<float>(t.shape(), v);
}
// An f64 tensor as a constant of the check's dtype.
Value constOf(GraphBuilder& g, const Tensor& t) {
  return g.constant(gDType == DType::F64 ? t : toF32(t));
}

// The graph of one check: the params as inputs of gDType (all tandem.trainable),
// y = build(...), loss = ReduceSum(y * r). Compiled for the CPU, with or without autodiff.
std::unique_ptr<Executable> compile(const std::vector<Param>& params, const BuildFn& build,
                                    bool autodiff, std::string* error) {
  GraphBuilder g;
  std::vector<Value> ins;
  for (const Param& p : params)
    ins.push_back(g.input(p.name, gDType, std::vector<Dim>(p.shape.begin(), p.shape.end())));
  Value y = build(g, ins);
  if (!g.ok()) {
    *error = g.error();
    return nullptr;
  }
  Value r = constOf(g, randomTensor(y.shape(), 99, -1.0, 1.0));
  g.output(g.reduceSum(g.mul(y, r), {}, false), "loss");
  auto module = g.finish(error);
  if (!module) return nullptr;
  mlir::func::FuncOp main = getMainFunc(*module);
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    main.setArgAttr(i, "tandem.trainable", mlir::UnitAttr::get(g.context()));
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  if (autodiff) co.autodiff = CompileOptions::Autodiff{};
  CompileResult result;
  std::string diags;
  mlir::ScopedDiagnosticHandler h(g.context(), [&](mlir::Diagnostic& d) {
    diags += d.str() + "\n";
    return mlir::success();
  });
  Status st = compileModuleToPlan(*module, co, &result);
  if (!st.isOk()) {
    *error = st.message() + "\n" + diags;
    return nullptr;
  }
  std::unique_ptr<Executable> exe;
  st = Executable::load(result.plan, LoadOptions{1}, &exe);
  if (!st.isOk()) *error = st.message();
  return exe;
}

double scalarOf(const Tensor& t) { return t.data<double>()[0]; }

// Compares every gradient element with a central difference of the forward plan (f64), then
// runs the same graph in f32 (where the oneDNN kernels and their fused groups take over) and
// compares its gradients with the f64 ones: f32 rounding through a few ops of fan-in <= 100 is
// ~1e-5 relative, a kernel mishandling a backward shape (ConvTranspose's output padding, the
// weight-gradient Conv's large kernel, a transposed Gemm) is off by O(1).
void checkGradients(const std::vector<Param>& params, const BuildFn& build) {
  gDType = DType::F64;
  std::string error;
  auto grad = compile(params, build, true, &error);
  ASSERT_TRUE(grad) << error;
  auto fwd = compile(params, build, false, &error);
  ASSERT_TRUE(fwd) << error;
  std::vector<Tensor> values;
  for (size_t i = 0; i < params.size(); ++i)
    values.push_back(randomTensor(params[i].shape, 7 + (unsigned)i, params[i].lo, params[i].hi));
  // The gradients are the plan's outputs after the loss, named after their inputs.
  std::vector<std::string> names = {"loss"};
  for (const Param& p : params) names.push_back(p.name + "_grad");
  EXPECT_EQ(grad->outputNames(), names);
  std::vector<Tensor> outs;
  Status st = grad->run(values, &outs);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(outs.size(), 1 + params.size());
  constexpr double h = 1e-5;
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(outs[1 + i].shape(), params[i].shape) << params[i].name;
    const double* analytic = outs[1 + i].data<double>();
    double worst = 0;
    for (int64_t j = 0; j < values[i].numel(); ++j) {
      double* x = values[i].data<double>() + j;
      const double x0 = *x;
      std::vector<Tensor> lp, lm;
      *x = x0 + h;
      ASSERT_TRUE(fwd->run(values, &lp).isOk());
      *x = x0 - h;
      ASSERT_TRUE(fwd->run(values, &lm).isOk());
      *x = x0;
      const double fd = (scalarOf(lp[0]) - scalarOf(lm[0])) / (2 * h);
      const double err = std::abs(analytic[j] - fd);
      worst = std::max(worst, err / (1 + std::abs(fd)));
      EXPECT_NEAR(analytic[j], fd, 1e-6 * (1 + std::abs(fd)))
          << "d loss / d " << params[i].name << "[" << j << "]";
    }
    EXPECT_LT(worst, 1e-6) << params[i].name;
  }

  gDType = DType::F32;
  auto grad32 = compile(params, build, true, &error);
  gDType = DType::F64;
  ASSERT_TRUE(grad32) << error;
  std::vector<Tensor> values32, outs32;
  for (const Tensor& t : values) values32.push_back(toF32(t));
  st = grad32->run(values32, &outs32);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(outs32.size(), outs.size());
  for (size_t i = 0; i < params.size(); ++i)
    for (int64_t j = 0; j < values[i].numel(); ++j) {
      const double ref = outs[1 + i].data<double>()[j];
      EXPECT_NEAR(outs32[1 + i].data<float>()[j], ref, 1e-4 * (1 + std::abs(ref)))
          << "f32 d loss / d " << params[i].name << "[" << j << "]";
    }
}

Value scalarOfType(GraphBuilder& g, double v) {
  return constOf(g, Tensor::fromVector<double>({}, {v}));
}

// ---- element-wise binary, with broadcasting ----

TEST(AutodiffGrad, Add) {
  auto f = [](GraphBuilder& g, const std::vector<Value>& v) { return g.add(v[0], v[1]); };
  checkGradients({{"a", {2, 3}}, {"b", {3}}}, f);
  checkGradients({{"a", {2, 1, 3}}, {"b", {4, 1}}}, f);
  checkGradients({{"a", {2, 3}}, {"b", {2, 3}}}, f);
}

TEST(AutodiffGrad, Sub) {
  auto f = [](GraphBuilder& g, const std::vector<Value>& v) { return g.sub(v[0], v[1]); };
  checkGradients({{"a", {2, 3}}, {"b", {1, 3}}}, f);
  checkGradients({{"a", {3}}, {"b", {2, 2, 3}}}, f);
}

TEST(AutodiffGrad, Mul) {
  auto f = [](GraphBuilder& g, const std::vector<Value>& v) { return g.mul(v[0], v[1]); };
  checkGradients({{"a", {2, 3}}, {"b", {3}}}, f);
  checkGradients({{"a", {2, 1, 3}}, {"b", {4, 1}}}, f);
}

TEST(AutodiffGrad, Div) {
  auto f = [](GraphBuilder& g, const std::vector<Value>& v) { return g.div(v[0], v[1]); };
  checkGradients({{"a", {2, 3}}, {"b", {3}, 0.5, 2.0}}, f);
  checkGradients({{"a", {4, 1}}, {"b", {2, 1, 3}, 0.5, 2.0}}, f);
}

TEST(AutodiffGrad, Pow) {
  // Constant exponent (the usual x^2), then a trainable exponent over a positive base.
  checkGradients({{"x", {2, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.pow(v[0], scalarOfType(g, 3.0));
  });
  checkGradients({{"x", {2, 3}, 0.5, 2.0}, {"e", {3}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) { return g.pow(v[0], v[1]); });
}

TEST(AutodiffGrad, Sum) {
  checkGradients({{"a", {2, 3}}, {"b", {3}}, {"c", {2, 1}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) { return g.sum(v); });
}

TEST(AutodiffGrad, SelectionOps) {
  checkGradients({{"x", {2, 3, 4}}, {"slope", {3, 1}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) { return g.prelu(v[0], v[1]); });
  checkGradients({{"a", {2, 3}}, {"b", {3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    Tensor c = Tensor::alloc(DType::Bool, {2, 3});
    const uint8_t bits[] = {1, 0, 0, 1, 1, 0};
    std::copy(bits, bits + 6, c.data<uint8_t>());
    Value cond = g.constant(c);
    return g.where(cond, v[0], v[1]);
  });
  checkGradients({{"a", {2, 3}}, {"b", {3}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) { return g.max({v[0], v[1]}); });
  checkGradients({{"a", {2, 1}}, {"b", {2, 3}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) { return g.min({v[0], v[1]}); });
}

// ---- unary ----

void checkUnary(const char* name, std::function<Value(GraphBuilder&, Value)> f, double lo = -2,
                double hi = 2) {
  SCOPED_TRACE(name);
  checkGradients({{"x", {3, 4}, lo, hi}},
                 [&](GraphBuilder& g, const std::vector<Value>& v) { return f(g, v[0]); });
}

TEST(AutodiffGrad, Unary) {
  checkUnary("Relu", [](GraphBuilder& g, Value x) { return g.relu(x); });
  checkUnary("Sigmoid", [](GraphBuilder& g, Value x) { return g.sigmoid(x); });
  checkUnary("Tanh", [](GraphBuilder& g, Value x) { return g.tanh(x); });
  checkUnary("Exp", [](GraphBuilder& g, Value x) { return g.exp(x); });
  checkUnary("Log", [](GraphBuilder& g, Value x) { return g.log(x); }, 0.5, 3);
  checkUnary("Sqrt", [](GraphBuilder& g, Value x) { return g.sqrt(x); }, 0.5, 3);
  checkUnary("Reciprocal", [](GraphBuilder& g, Value x) { return g.reciprocal(x); }, 0.5, 3);
  checkUnary("Neg", [](GraphBuilder& g, Value x) { return g.neg(x); });
  checkUnary("Abs", [](GraphBuilder& g, Value x) { return g.abs(x); });
  checkUnary("Erf", [](GraphBuilder& g, Value x) { return g.erf(x); });
  checkUnary("Softplus", [](GraphBuilder& g, Value x) { return g.softplus(x); });
  checkUnary("LeakyRelu", [](GraphBuilder& g, Value x) { return g.leakyRelu(x, 0.2f); });
  checkUnary("Identity", [](GraphBuilder& g, Value x) { return g.identity(x); });
  checkUnary("Dropout", [](GraphBuilder& g, Value x) { return g.dropout(x, 0.3f); });
  checkUnary("Elu", [](GraphBuilder& g, Value x) { return g.elu(x, 0.7f); });
  checkUnary("Selu", [](GraphBuilder& g, Value x) { return g.selu(x); });
  checkUnary("HardSigmoid", [](GraphBuilder& g, Value x) { return g.hardSigmoid(x); }, -4, 4);
  checkUnary("HardSwish", [](GraphBuilder& g, Value x) { return g.op("HardSwish", {x})[0]; }, -5, 5);
  checkUnary("Sin", [](GraphBuilder& g, Value x) { return g.op("Sin", {x})[0]; });
  checkUnary("Cos", [](GraphBuilder& g, Value x) { return g.op("Cos", {x})[0]; });
  checkUnary("Clip", [](GraphBuilder& g, Value x) {
    return g.clip(x, scalarOfType(g, -0.5), scalarOfType(g, 1.0));
  });
  checkUnary("Clip(max)", [](GraphBuilder& g, Value x) {
    return g.clip(x, std::nullopt, scalarOfType(g, 0.3));
  });
  for (const char* approx : {"none", "tanh"}) {
    checkUnary(approx, [approx](GraphBuilder& g, Value x) {
      AttrMap a;
      a.set("approximate", Attr::ofString(approx));
      return g.op("Gelu", {x}, a)[0];
    });
  }
}

// ---- contractions ----

TEST(AutodiffGrad, MatMul) {
  auto f = [](GraphBuilder& g, const std::vector<Value>& v) { return g.matMul(v[0], v[1]); };
  checkGradients({{"a", {2, 3}}, {"b", {3, 4}}}, f);
  checkGradients({{"a", {2, 2, 3}}, {"b", {3, 4}}}, f);        // B broadcast over the batch
  checkGradients({{"a", {2, 1, 2, 3}}, {"b", {3, 3, 2}}}, f);  // both broadcast
  checkGradients({{"a", {3}}, {"b", {3, 4}}}, f);              // 1-D A
  checkGradients({{"a", {2, 3}}, {"b", {3}}}, f);              // 1-D B
  // A weight over a batch of matrices: B's gradient is one product over every row.
  checkGradients({{"a", {2, 3, 2, 3}}, {"b", {3, 4}}}, f);
  checkGradients({{"a", {2, 2, 3}}, {"b", {3}}}, f);           // 1-D B over a batch
}

TEST(AutodiffGrad, Gemm) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transA=") + (ta ? "1" : "0") + " transB=" + (tb ? "1" : "0"));
      Shape as = ta ? Shape{3, 2} : Shape{2, 3}, bs = tb ? Shape{4, 3} : Shape{3, 4};
      checkGradients({{"a", as}, {"b", bs}, {"c", {4}}},
                     [&](GraphBuilder& g, const std::vector<Value>& v) {
                       return g.gemm(v[0], v[1], v[2], GemmOptions{0.5f, 2.0f, ta, tb});
                     });
    }
  checkGradients({{"a", {2, 3}}, {"b", {3, 4}}, {"c", {2, 1}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   return g.gemm(v[0], v[1], v[2]);
                 });
}

// ---- softmax and reductions ----

TEST(AutodiffGrad, Softmax) {
  for (int64_t axis : {-1, 0}) {
    checkGradients({{"x", {3, 4}}}, [axis](GraphBuilder& g, const std::vector<Value>& v) {
      return g.softmax(v[0], axis);
    });
    checkGradients({{"x", {2, 3, 4}}}, [axis](GraphBuilder& g, const std::vector<Value>& v) {
      return g.logSoftmax(v[0], axis);
    });
  }
}

TEST(AutodiffGrad, Reductions) {
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reduceSum(v[0], {0, 2}, false);
  });
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reduceSum(v[0], {-1}, true);
  });
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reduceMean(v[0], {1}, false);
  });
  checkGradients({{"x", {2, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reduceMean(v[0], {}, true);
  });
}

TEST(AutodiffGrad, ExtremumAndNormReductions) {
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reduceMax(v[0], {1}, false);
  });
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reduceMin(v[0], {}, true);
  });
  for (const char* op : {"ReduceSumSquare", "ReduceL2"}) {
    SCOPED_TRACE(op);
    checkGradients({{"x", {2, 3, 4}}}, [op](GraphBuilder& g, const std::vector<Value>& v) {
      AttrMap a;
      a.set("axes", Attr::ofInts({0, 2}));
      a.set("keepdims", Attr::ofInt(0));
      return g.op(op, {v[0]}, a)[0];
    });
  }
}

// ---- normalisation ----

TEST(AutodiffGrad, LayerNormalization) {
  checkGradients({{"x", {2, 5}}, {"scale", {5}}, {"bias", {5}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   return g.layerNormalization(v[0], v[1], v[2]);
                 });
  checkGradients({{"x", {2, 3, 4}}, {"scale", {3, 4}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   return g.layerNormalization(v[0], v[1], {}, 1);
                 });
}

TEST(AutodiffGrad, BatchNormalization) {
  checkGradients({{"x", {2, 3, 2, 2}}, {"scale", {3}}, {"bias", {3}}, {"mean", {3}},
                  {"var", {3}, 0.5, 2.0}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   return g.batchNormalization(v[0], v[1], v[2], v[3], v[4], 1e-3f);
                 });
}

// Training mode: batch statistics, so every x element moves every output of its channel. The
// loss also reads the running statistics (their own weights), which brings in the rule's
// running-mean and running-variance terms, and the input statistics get their momentum share.
TEST(AutodiffGrad, BatchNormalizationTraining) {
  for (const Shape& x : {Shape{3, 2, 2, 3}, Shape{4, 3}}) {
    SCOPED_TRACE(shapeToString(x));
    const int64_t C = x[1];
    for (bool readStats : {false, true})
      checkGradients({{"x", x, -1.0, 2.0}, {"scale", {C}, 0.5, 2.0}, {"bias", {C}},
                      {"mean", {C}}, {"var", {C}, 0.5, 2.0}},
                     [&](GraphBuilder& g, const std::vector<Value>& v) {
                       AttrMap a;
                       a.set("epsilon", Attr::ofFloat(1e-3f));
                       a.set("momentum", Attr::ofFloat(0.8f));
                       a.set("training_mode", Attr::ofInt(1));
                       std::vector<Value> r = g.op("BatchNormalization", v, a, 3);
                       if (!readStats) return r[0];
                       // y + 3 * running_mean + 5 * running_var, broadcast over y.
                       Shape b(x.size(), 1);
                       b[1] = C;
                       Value stats = g.add(g.mul(r[1], constOf(g, Tensor::fromVector<double>({}, {3.0}))),
                                           g.mul(r[2], constOf(g, Tensor::fromVector<double>({}, {5.0}))));
                       return g.add(r[0], g.reshape(stats, std::vector<int64_t>(b.begin(), b.end())));
                     });
  }
}

// ---- shape and data movement ----

TEST(AutodiffGrad, Reshaping) {
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.reshape(v[0], {4, 6});
  });
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.flatten(v[0], 2);
  });
  checkGradients({{"x", {2, 1, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.unsqueeze(g.squeeze(v[0], {1}), {0});
  });
  checkGradients({{"x", {2, 3, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.transpose(v[0], {1, 2, 0});
  });
  checkGradients({{"x", {3, 1}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.expand(v[0], {2, 3, 4});
  });
}

TEST(AutodiffGrad, ConcatSplitSlice) {
  checkGradients({{"a", {2, 3}}, {"b", {2, 1}}, {"c", {2, 2}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   return g.concat({v[0], v[1], v[2]}, 1);
                 });
  // Split: the middle part reaches no output (its gradient is zeros).
  checkGradients({{"x", {2, 7}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    std::vector<Value> p = g.split(v[0], 1, {3, 1, 3});
    return g.mul(p[0], p[2]);
  });
  checkGradients({{"x", {4, 5}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.slice(v[0], {1, -4}, {3, 100}, {0, 1});
  });
  // Steps other than 1 (Swin's PatchMerging x[..., 0::2, 1::2, :]; a reversal; a step of 3
  // that stops short of the end; a negative step from a clamped start to the beginning).
  checkGradients({{"x", {2, 6, 7, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.slice(v[0], {0, 1}, {100, 100}, {1, 2}, {2, 2});
  });
  checkGradients({{"x", {3, 8}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.slice(v[0], {-1, 1}, {std::numeric_limits<int64_t>::min(), 7}, {0, 1}, {-1, 3});
  });
  checkGradients({{"x", {9, 2}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.slice(v[0], {100}, {-100}, {0}, {-2});
  });
  checkGradients({{"x", {5, 4}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.slice(v[0], {-2}, {0}, {1}, {-3});  // one element: column 2
  });
}

TEST(AutodiffGrad, PadTile) {
  checkGradients({{"x", {2, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.pad(v[0], {1, 0, 2, 1});
  });
  checkGradients({{"x", {2, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.tile(v[0], {2, 3});
  });
}

TEST(AutodiffGrad, GatherEmbedding) {
  // Repeated and negative indices: their rows' gradients add up.
  checkGradients({{"table", {5, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.gather(v[0], g.constant(Tensor::fromVector<int64_t>({2, 3}, {1, 4, 1, 0, -1, 2})));
  });
}

TEST(AutodiffGrad, GatherOtherAxes) {
  // A transformer's last position (x[:, -1]: a scalar index on axis 1), index matrices on the
  // middle and last axes (repeated and negative), and i32 indices.
  checkGradients({{"x", {2, 4, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.gather(v[0], g.constant(Tensor::fromVector<int64_t>({}, {-1})), 1);
  });
  checkGradients({{"x", {2, 4, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.gather(v[0], g.constant(Tensor::fromVector<int64_t>({2, 3}, {1, 3, 1, 0, -1, 2})), 1);
  });
  checkGradients({{"x", {2, 4, 3}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.gather(v[0], g.constant(Tensor::fromVector<int32_t>({4}, {2, 0, 2, -2})), 2);
  });
  checkGradients({{"x", {3, 2, 2, 5}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.gather(v[0], g.constant(Tensor::fromVector<int64_t>({2, 1}, {4, 1})), -1);
  });
}

TEST(AutodiffGrad, EmbeddingBag) {
  // Bags [0, 3), [3, 3) (empty; [3, 4) for mean and max, whose empty bag is NaN or -inf),
  // [2, 6) overlapping the first, [5, 7): index -1 (row 4) and row 1 twice; per-sample weights
  // as a constant. Sum, mean and max (random rows: no ties).
  auto ints = [](GraphBuilder& g, std::vector<int64_t> v) {
    return g.constant(Tensor::fromVector<int64_t>({(int64_t)v.size()}, v));
  };
  for (const char* mode : {"sum", "mean", "max"})
    for (bool weighted : {false, true}) {
      SCOPED_TRACE(std::string(mode) + (weighted ? " weighted" : ""));
      checkGradients({{"table", {5, 3}}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
        std::optional<Value> psw;
        if (weighted)
          psw = constOf(g, Tensor::fromVector<double>({7}, {0.5, -2, 1.5, 3, 0.25, -1, 2}));
        return g.embeddingBag(v[0], ints(g, {1, 3, 0, 1, 2, -1, 1}), ints(g, {0, 3, 2, 5}),
                              ints(g, {3, std::string(mode) == "sum" ? 3 : 4, 6, 7}), mode, psw);
      });
    }
}

// ---- convolution and pooling ----

struct ConvCase {
  Shape x, w;
  ConvOptions o;
};

TEST(AutodiffGrad, Conv) {
  std::vector<ConvCase> cases = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, {}},
      {{1, 4, 6, 5}, {6, 2, 3, 2}, {{}, {2, 1}, {1, 0, 1, 1}, {}, 2, "NOTSET"}},  // groups 2
      {{1, 2, 7, 7}, {2, 1, 3, 3}, {{}, {2, 2}, {1, 1, 0, 0}, {2, 1}, 2, "NOTSET"}},  // depthwise
      {{2, 2, 8}, {3, 2, 3}, {{}, {3}, {2, 1}, {2}, 1, "NOTSET"}},  // 1-D, stride 3, dilation 2
      {{1, 2, 5, 6}, {2, 2, 3, 3}, {{}, {2, 2}, {}, {}, 1, "SAME_UPPER"}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(shapeToString(c.x) + " * " + shapeToString(c.w));
    checkGradients({{"x", c.x}, {"w", c.w}, {"b", {c.w[0]}}},
                   [&](GraphBuilder& g, const std::vector<Value>& v) {
                     return g.conv(v[0], v[1], v[2], c.o);
                   });
  }
}

// ConvTranspose: dX a Conv of dY by W, dW the weight gradient of that Conv (W's own layout),
// over strides with output padding, groups, dilations, 1-D, output_shape and SAME_UPPER (the
// pads split as the kernel splits them) and VALID.
struct ConvTransposeCase {
  Shape x, w;
  ConvTransposeOptions o;
};

TEST(AutodiffGrad, ConvTranspose) {
  auto opts = [](std::vector<int64_t> s, std::vector<int64_t> pads, std::vector<int64_t> dil, int64_t group,
                 std::vector<int64_t> outPad, std::vector<int64_t> outShape = {}, std::string autoPad = "NOTSET") {
    ConvTransposeOptions o;
    o.strides = std::move(s);
    o.pads = std::move(pads);
    o.dilations = std::move(dil);
    o.group = group;
    o.outputPadding = std::move(outPad);
    o.outputShape = std::move(outShape);
    o.autoPad = std::move(autoPad);
    return o;
  };
  std::vector<ConvTransposeCase> cases = {
      {{2, 3, 4, 4}, {3, 2, 3, 3}, {}},
      {{1, 4, 3, 4}, {4, 3, 3, 3}, opts({2, 2}, {1, 1, 1, 1}, {}, 1, {1, 1})},  // U-Net upsampling
      {{1, 4, 3, 3}, {4, 2, 2, 3}, opts({2, 1}, {0, 1, 1, 0}, {}, 2, {1, 0})},   // groups 2
      {{1, 2, 4}, {2, 3, 3}, opts({1}, {1, 0}, {2}, 1, {})},                      // 1-D, dilation 2
      {{1, 2, 3}, {2, 2, 2}, opts({1}, {}, {3}, 1, {2})},                         // output_padding >= stride
      {{1, 2, 3, 3}, {2, 2, 3, 3}, opts({2, 2}, {}, {}, 1, {}, {6, 7})},          // output_shape
      {{1, 2, 3, 2}, {2, 3, 3, 3}, opts({2, 2}, {}, {}, 1, {}, {}, "SAME_UPPER")},
      {{1, 2, 3, 2}, {2, 3, 2, 2}, opts({2, 2}, {}, {}, 1, {}, {}, "VALID")},
  };
  for (const ConvTransposeCase& c : cases) {
    SCOPED_TRACE(shapeToString(c.x) + " *T " + shapeToString(c.w));
    checkGradients({{"x", c.x}, {"w", c.w}, {"b", {c.w[1] * c.o.group}}},
                   [&](GraphBuilder& g, const std::vector<Value>& v) {
                     return g.convTranspose(v[0], v[1], v[2], c.o);
                   });
  }
}

// GroupNormalization (groups of 2 channels, 4-D and 3-D) and InstanceNormalization: the
// LayerNormalization rule per (sample, group), with the scale and bias gradients per channel.
TEST(AutodiffGrad, GroupAndInstanceNormalization) {
  for (const Shape& x : {Shape{2, 4, 3, 3}, Shape{1, 6, 5}})
    for (int64_t groups : {int64_t(2), x[1]}) {
      SCOPED_TRACE(shapeToString(x) + " groups " + std::to_string(groups));
      checkGradients({{"x", x}, {"s", {x[1]}, 0.5, 2.0}, {"b", {x[1]}}},
                     [&](GraphBuilder& g, const std::vector<Value>& v) {
                       AttrMap a;
                       a.set("epsilon", Attr::ofFloat(1e-3f));
                       if (groups != x[1]) a.set("num_groups", Attr::ofInt(groups));
                       return g.op(groups != x[1] ? "GroupNormalization" : "InstanceNormalization",
                                   {v[0], v[1], v[2]}, a)[0];
                     });
    }
}

// Resize: nearest x2 (a U-Net's upsampling), linear with align_corners to a non-integer size,
// cubic shrinking, and a 5-D nearest; the gradient is dY through each axis's tap matrix.
TEST(AutodiffGrad, Resize) {
  struct Case { Shape x, y; std::string mode, ctm; };
  for (const Case& c : {Case{{1, 2, 3, 4}, {1, 2, 6, 8}, "nearest", "half_pixel"},
                        Case{{1, 2, 3, 4}, {1, 2, 5, 7}, "linear", "align_corners"},
                        Case{{1, 1, 6, 5}, {1, 1, 4, 3}, "cubic", "half_pixel"},
                        Case{{1, 1, 2, 3, 2}, {1, 1, 4, 3, 4}, "nearest", "asymmetric"}}) {
    SCOPED_TRACE(c.mode + " " + shapeToString(c.x) + " -> " + shapeToString(c.y));
    checkGradients({{"x", c.x}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
      AttrMap a;
      a.set("mode", Attr::ofString(c.mode));
      a.set("coordinate_transformation_mode", Attr::ofString(c.ctm));
      std::vector<int64_t> sizes(c.y.begin(), c.y.end());
      Tensor t = Tensor::fromVector<int64_t>({(int64_t)sizes.size()}, sizes);
      return g.op("Resize", {v[0], Value(), Value(), g.constant(t)}, a)[0];
    });
  }
}

// A diffusion U-Net's up block in one graph: Conv -> GroupNorm -> SiLU -> nearest Resize x2 ->
// Concat with a skip -> ConvTranspose (stride 2): the rules compose, and the f32 plan (oneDNN
// kernels, fusion and host layouts) agrees with the f64 one.
TEST(AutodiffGrad, DiffusionUpBlock) {
  checkGradients({{"x", {1, 4, 3, 3}}, {"w", {4, 4, 3, 3}}, {"s", {4}, 0.5, 2.0}, {"skip", {1, 2, 6, 6}},
                  {"wt", {6, 2, 2, 2}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   ConvOptions co;
                   co.pads = {1, 1, 1, 1};
                   Value c = g.conv(v[0], v[1], std::nullopt, co);
                   AttrMap gn;
                   gn.set("num_groups", Attr::ofInt(2));
                   Value n = g.op("GroupNormalization", {c, v[2], v[2]}, gn)[0];
                   Value a = g.mul(n, g.sigmoid(n));
                   AttrMap rz;
                   rz.set("mode", Attr::ofString("nearest"));
                   Tensor sizes = Tensor::fromVector<int64_t>({4}, {1, 4, 6, 6});
                   Value u = g.op("Resize", {a, Value(), Value(), g.constant(sizes)}, rz)[0];
                   ConvTransposeOptions to;
                   to.strides = {2, 2};
                   return g.convTranspose(g.concat({u, v[3]}, 1), v[4], std::nullopt, to);
                 });
}

TEST(AutodiffGrad, Pooling) {
  checkGradients({{"x", {2, 3, 4, 5}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.globalAveragePool(v[0]);
  });
  checkGradients({{"x", {2, 3, 4, 5}}}, [](GraphBuilder& g, const std::vector<Value>& v) {
    return g.globalMaxPool(v[0]);
  });
  std::vector<PoolOptions> pools = {
      {{2, 2}, {2, 2}, {}, {}, false, false, "NOTSET"},
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, false, "NOTSET"},
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, true, "NOTSET"},
      {{2, 3}, {1, 2}, {0, 1, 1, 0}, {}, true, false, "NOTSET"},
  };
  for (const PoolOptions& o : pools) {
    checkGradients({{"x", {1, 2, 5, 6}}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
      return g.averagePool(v[0], o);
    });
  }
}

TEST(AutodiffGrad, MaxPool) {
  // Overlapping windows (stride < kernel), padding, dilations, ceil_mode, 1-D and 2-D. Random
  // inputs have no ties, and a perturbation of 1e-5 does not move a window's argmax.
  std::vector<std::pair<Shape, PoolOptions>> pools = {
      {{1, 2, 5, 6}, {{2, 2}, {2, 2}, {}, {}, false, false, "NOTSET"}},
      {{2, 2, 5, 6}, {{3, 3}, {1, 2}, {1, 1, 1, 1}, {}, false, false, "NOTSET"}},
      {{1, 2, 7, 7}, {{2, 2}, {2, 2}, {1, 0, 0, 1}, {2, 2}, true, false, "NOTSET"}},
      {{2, 3, 9}, {{3}, {2}, {}, {}, false, false, "SAME_UPPER"}},
  };
  for (const auto& [xs, o] : pools) {
    SCOPED_TRACE(shapeToString(xs));
    checkGradients({{"x", xs}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
      return g.maxPool(v[0], o);
    });
  }
}

// ---- losses: through their Grad ops ----

TEST(AutodiffGrad, Losses) {
  // Labels with an ignored one (-1) and a class weight: mean divides by the kept weights' sum.
  auto labels = [](GraphBuilder& g, Shape s, std::vector<int64_t> v) {
    return g.constant(Tensor::fromVector<int64_t>(s, v));
  };
  auto attrs = [](const char* reduction, bool ignore) {
    AttrMap a;
    a.set("reduction", Attr::ofString(reduction));
    if (ignore) a.set("ignore_index", Attr::ofInt(-1));
    return a;
  };
  const Tensor weight = Tensor::fromVector<double>({3}, {0.5, 2.0, 1.0});
  for (const char* red : {"mean", "sum", "none"}) {
    SCOPED_TRACE(red);
    checkGradients({{"x", {4, 3}}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
      return g.op("SoftmaxCrossEntropyLoss",
                  {v[0], labels(g, {4}, {2, 0, -1, 1}), constOf(g, weight)}, attrs(red, true))[0];
    });
    checkGradients({{"x", {4, 3}}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
      return g.op("NegativeLogLikelihoodLoss",
                  {v[0], labels(g, {4}, {2, 0, -1, 1}), constOf(g, weight)}, attrs(red, true))[0];
    });
  }
  // [N, C, D] scores, both SoftmaxCrossEntropyLoss results used: the loss's gradient plus
  // LogSoftmax's through log_prob.
  checkGradients({{"x", {2, 3, 2}}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
    std::vector<Value> r = g.op("SoftmaxCrossEntropyLoss", {v[0], labels(g, {2, 2}, {0, 2, 1, 1})},
                                attrs("none", false), 2);
    return g.add(r[0], g.reduceSum(g.mul(r[1], r[1]), {1}, false));
  });  // MSE (torch nn.MSELoss, reduction mean; ONNX has no op for it): mean((x - y)^2), both
  // operands differentiated.
  checkGradients({{"x", {3, 4}}, {"y", {3, 4}}}, [&](GraphBuilder& g, const std::vector<Value>& v) {
    Value d = g.sub(v[0], v[1]);
    return g.reduceMean(g.mul(d, d), {}, false);
  });
}

// ---- a small MLP: the rules composed, fan-out summed ----

TEST(AutodiffGrad, MlpWithSoftmaxCrossEntropy) {
  // loss-like head: -sum(onehot * logsoftmax(relu(x W1 + b1) W2 + b2)), x also read twice.
  checkGradients({{"x", {4, 3}}, {"w1", {3, 5}}, {"b1", {5}}, {"w2", {5, 2}}, {"b2", {2}}},
                 [](GraphBuilder& g, const std::vector<Value>& v) {
                   Value h = g.relu(g.add(g.matMul(v[0], v[1]), v[2]));
                   Value logits = g.gemm(h, v[3], v[4]);
                   Value oneHot = constOf(g, Tensor::fromVector<double>(
                       {4, 2}, {1, 0, 0, 1, 0, 1, 1, 0}));
                   Value nll = g.neg(g.mul(g.logSoftmax(logits), oneHot));
                   return g.add(nll, g.reduceSum(g.mul(v[0], v[0]), {}, true));
                 });
}

// ---- the gradients train: plain SGD on the host over the gradient plan ----

TEST(AutodiffTraining, SgdOnTheGradientPlanLowersTheLoss) {
  // A 4-8-2 MLP (f32, oneDNN kernels) learning "x0 + x1 > 0" with softmax cross-entropy written
  // with existing ops; 60 full-batch steps of SGD with the plan's gradients must cut the loss
  // well below its start (ln 2 ~ 0.69 for an untrained net) and classify the batch.
  const int64_t B = 32;
  Tensor x = toF32(randomTensor({B, 4}, 3, -1, 1));
  std::vector<float> labels(B * 2);
  for (int64_t i = 0; i < B; ++i) {
    const bool pos = x.data<float>()[i * 4] + x.data<float>()[i * 4 + 1] > 0;
    labels[i * 2 + (pos ? 1 : 0)] = 1;
  }
  GraphBuilder g;
  Value xin = g.input("x", DType::F32, {B, 4});
  std::vector<Value> w = {g.input("w1", DType::F32, {4, 8}), g.input("b1", DType::F32, {8}),
                          g.input("w2", DType::F32, {8, 2}), g.input("b2", DType::F32, {2})};
  Value logits = g.gemm(g.tanh(g.gemm(xin, w[0], w[1])), w[2], w[3]);
  Value target = g.constant(Tensor::fromVector<float>({B, 2}, labels));
  Value nll = g.neg(g.reduceSum(g.mul(g.logSoftmax(logits), target), {1}, false));
  g.output(g.reduceMean(nll, {}, false), "loss");
  g.output(logits, "logits");
  std::string error;
  auto module = g.finish(&error);
  ASSERT_TRUE(module) << error;
  mlir::func::FuncOp main = getMainFunc(*module);
  for (unsigned i = 1; i < 5; ++i)
    main.setArgAttr(i, "tandem.trainable", mlir::UnitAttr::get(g.context()));
  CompileOptions co;
  ASSERT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.autodiff = CompileOptions::Autodiff{};
  CompileResult result;
  Status st = compileModuleToPlan(*module, co, &result);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(result.plan, LoadOptions{1}, &exe).isOk());
  EXPECT_EQ(exe->outputNames(),
            (std::vector<std::string>{"loss", "logits", "w1_grad", "b1_grad", "w2_grad",
                                      "b2_grad"}));
  std::vector<Tensor> params = {toF32(randomTensor({4, 8}, 11, -0.5, 0.5)),
                                Tensor::fromVector<float>({8}, std::vector<float>(8, 0.f)),
                                toF32(randomTensor({8, 2}, 12, -0.5, 0.5)),
                                Tensor::fromVector<float>({2}, {0.f, 0.f})};
  float first = 0, last = 0;
  std::vector<Tensor> outs;
  for (int step = 0; step < 60; ++step) {
    std::vector<Tensor> in = {x};
    in.insert(in.end(), params.begin(), params.end());
    ASSERT_TRUE(exe->run(in, &outs).isOk());
    last = outs[0].data<float>()[0];
    if (step == 0) first = last;
    for (size_t p = 0; p < params.size(); ++p)
      for (int64_t j = 0; j < params[p].numel(); ++j)
        params[p].data<float>()[j] -= 1.0f * outs[2 + p].data<float>()[j];
  }
  EXPECT_GT(first, 0.5f);
  EXPECT_LT(last, 0.25f * first) << "first " << first << ", last " << last;
  int correct = 0;
  for (int64_t i = 0; i < B; ++i) {
    const float* l = outs[1].data<float>() + i * 2;
    correct += (l[1] > l[0]) == (labels[i * 2 + 1] == 1);
  }
  EXPECT_GE(correct, B - 2);
}

// ---- the table and the rules agree ----

TEST(AutodiffRules, OpTableSaysWhichOpsHaveARule) {
  size_t n = 0;
  const OpInfo* ops = allOps(&n);
  std::vector<std::string> flagged;
  for (size_t i = 0; i < n; ++i)
    if (ops[i].has(kGradient)) flagged.push_back(ops[i].name);
  std::sort(flagged.begin(), flagged.end());
  EXPECT_EQ(flagged, autodiff::gradientRuleOps());
}

}  // namespace
