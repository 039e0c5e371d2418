func.func @forward(%z: tensor<?x?x37xf32> {transfuse.name = "logits"}, %y: tensor<?x?xi32> {transfuse.name = "labels"}) -> (tensor<f32> {transfuse.name = "loss"}) attributes {transfuse.max_batch = 3 : i64, transfuse.max_seq_len = 5 : i64} {
  %l = transfuse.cross_entropy %z, %y {ignore_index = 1 : i64, label_smoothing = 1.0e-01 : f64} : (tensor<?x?x37xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
