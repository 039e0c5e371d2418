func.func @forward(%x: tensor<?x?x8xf32> {transfuse.name = "x"}, %ids: tensor<?x?xi32> {transfuse.name = "ids"}) -> tensor<?x?x8xf32> attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %two = transfuse.constant dense<2.0> : tensor<f32>
  %eps = transfuse.constant dense<1.0e-06> : tensor<f32>
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %half = transfuse.constant dense<0.5> : tensor<f32>
  %r2 = transfuse.constant dense<0.707106769> : tensor<f32>
  %p = transfuse.pow %x, %two : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %v = transfuse.reduce_mean %p {axes = array<i64: 2>, keep_dims = true} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %e = transfuse.add %v, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %s = transfuse.sqrt %e : tensor<?x?x1xf32>
  %n = transfuse.div %x, %s : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %a = transfuse.mul %n, %r2 : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %f = transfuse.erf %a : tensor<?x?x8xf32>
  %b = transfuse.add %f, %one : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %c = transfuse.mul %n, %b : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %g = transfuse.mul %c, %half : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %sg = transfuse.sigmoid %g : tensor<?x?x8xf32>
  %y = transfuse.mul %g, %sg : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %tri = transfuse.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %l = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %t1 = transfuse.slice %tri length %l {axis = 0 : i64, start = 0 : i64} : (tensor<4x4xi1>, index) -> tensor<?x4xi1>
  %t2 = transfuse.slice %t1 length %l {axis = 1 : i64, start = 0 : i64} : (tensor<?x4xi1>, index) -> tensor<?x?xi1>
  %m = transfuse.cast %t2 : (tensor<?x?xi1>) -> tensor<?x?xf32>
  %z = transfuse.matmul %m, %y : (tensor<?x?xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %z : tensor<?x?x8xf32>
}
