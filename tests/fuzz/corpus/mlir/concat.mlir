func.func @forward(%a: tensor<2x?x4xf32> {transfuse.name = "a"}, %b: tensor<2x?x4xf32> {transfuse.name = "b"}) -> tensor<2x?x4xf32> attributes {transfuse.max_seq_len = 8 : i64} {
  %c = transfuse.concat %a, %b {axis = 1 : i64} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  %r = transfuse.relu %c : tensor<2x?x4xf32>
  %s = transfuse.tanh %r : tensor<2x?x4xf32>
  return %s : tensor<2x?x4xf32>
}
