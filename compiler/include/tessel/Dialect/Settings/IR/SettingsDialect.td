//===- SettingsDialect.td - The module's settings ----------*- tablegen -*-===//
#ifndef TESSEL_SETTINGS_DIALECT
#define TESSEL_SETTINGS_DIALECT

include "mlir/IR/OpBase.td"

def Settings_Dialect : Dialect {
  let name = "tessel";
  let cppNamespace = "::tessel::settings";
  let summary = "The settings a module carries from the spec to the plan";
  let description = [{
    Attributes only. The front end records the spec's `parallel` and `train` sections on the
    module as `tessel.parallel` (#tessel.parallel) and `tessel.train` (#tessel.train); the
    pipeline schedule records its figures as `tessel.pipeline` (#tessel.pipeline). Every
    discardable attribute named `tessel.*` is verified here, once, whichever dialect's ops
    carry it: a setting of the wrong kind, or a name this dialect does not know, fails the
    module's verification rather than being read as its default by some later pass.

    ```mlir
    module attributes {
      tessel.parallel = #tessel.parallel<mesh = {dp = 2 : i64, tp = 2 : i64},
                                         shard = {heads = ["tp"], batch = ["dp"]}, zero = 1>,
      tessel.train = #tessel.train<batch = 16, micro_batch = 4, accumulation = 2, steps = 600,
                                   optimizer = <lr = 6.000000e-04>, clip = 1.000000e+00>
    } { ... }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
}

#endif // TESSEL_SETTINGS_DIALECT
