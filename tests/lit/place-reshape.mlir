// RUN: tandem-opt %s -split-input-file --tandem-place="target=cpu=xeon-8480" | FileCheck %s

// Reshaping ops run as steps. A Flatten that is the last reader of its input shares the
// input's buffer (plan-memory) and costs only the step's dispatch: 3 us on this spec.
// CHECK-LABEL: func.func @main
// CHECK: tandem.flatten {{.*}}placement_costs = {cpu = 3.000000e-06 : f64}
func.func @main(%a: tensor<64x32x32xf32>) -> tensor<64x1024xf32> {
  %0 = tandem.relu %a : (tensor<64x32x32xf32>) -> tensor<64x32x32xf32>
  %1 = tandem.flatten %0 {axis = 1 : i64} : (tensor<64x32x32xf32>) -> tensor<64x1024xf32>
  return %1 : tensor<64x1024xf32>
}

// -----

// One whose input is read again (here: also returned) copies it: 3 us + 2 x 256 KB at
// 245.76 GB/s = 3 us + 2.133 us.
// CHECK-LABEL: func.func @main
// CHECK: tandem.flatten {{.*}}placement_costs = {cpu = 5.1333{{[0-9]*}}E-6 : f64}
func.func @main(%a: tensor<64x32x32xf32>) -> (tensor<64x1024xf32>, tensor<64x32x32xf32>) {
  %0 = tandem.relu %a : (tensor<64x32x32xf32>) -> tensor<64x32x32xf32>
  %1 = tandem.flatten %0 {axis = 1 : i64} : (tensor<64x32x32xf32>) -> tensor<64x1024xf32>
  return %1, %0 : tensor<64x1024xf32>, tensor<64x32x32xf32>
}
