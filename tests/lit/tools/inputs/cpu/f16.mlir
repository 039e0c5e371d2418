func.func @forward(%a: tensor<4xf16> {transfuse.name = "a"}) -> tensor<4xf16> {
  %c = transfuse.relu %a : tensor<4xf16>
  %d = transfuse.relu %c : tensor<4xf16>
  return %d : tensor<4xf16>
}
