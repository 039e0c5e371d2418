func.func @forward(%q: tensor<1x2x4x8xf32> {transfuse.name = "q"}, %k: tensor<1x2x4x8xf32> {transfuse.name = "k"}, %v: tensor<1x2x4x16xf32> {transfuse.name = "v"}) -> tensor<1x2x4x16xf32> {
  %o = transfuse.attention %q, %k, %v {scale = 0.35 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}
