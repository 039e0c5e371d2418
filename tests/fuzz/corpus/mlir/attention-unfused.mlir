func.func @forward(%q: tensor<?x2x?x4xf32> {transfuse.name = "q"}, %k: tensor<?x2x?x4xf32> {transfuse.name = "k"}, %v: tensor<?x2x?x4xf32> {transfuse.name = "v"}) -> tensor<?x2x?x4xf32> attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 8 : i64} {
  %kt = transfuse.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = transfuse.matmul %q, %kt : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %t = transfuse.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32>
  %p = transfuse.softmax %t {axis = -1 : i64} : tensor<?x2x?x?xf32>
  %o = transfuse.matmul %p, %v : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return %o : tensor<?x2x?x4xf32>
}
