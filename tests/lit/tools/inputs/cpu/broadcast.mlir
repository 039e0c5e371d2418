func.func @forward(%a: tensor<?x?x4xf32> {transfuse.name = "a"}, %b: tensor<?x?x4xf32> {transfuse.name = "b"}) -> tensor<?x?x4xf32> attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 8 : i64} {
  %c = transfuse.add %a, %b : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return %c : tensor<?x?x4xf32>
}
