func.func @loss(%x: tensor<?x?x8xf32> {transfuse.name = "x"}, %ids: tensor<?x?xi32> {transfuse.name = "ids"}, %labels: tensor<?x?xi32> {transfuse.name = "labels"}) -> (tensor<f32> {transfuse.name = "loss"}) attributes {transfuse.max_batch = 3 : i64, transfuse.max_seq_len = 6 : i64} {
  %e = transfuse.param "emb" {init = #transfuse.init<normal_0.02>} : tensor<11x8xf32>
  %pos = transfuse.param "pos" {init = #transfuse.init<normal_0.02>} : tensor<6x8xf32>
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<8x8xf32>
  %bias = transfuse.param "bias" {init = #transfuse.init<uniform_fan_in>, fan_in = 8 : i64} : tensor<8xf32>
  %gamma = transfuse.param "ln.weight" {init = #transfuse.init<ones>} : tensor<8xf32>
  %beta = transfuse.param "ln.bias" {init = #transfuse.init<zeros>} : tensor<8xf32>
  %h = transfuse.gather %e, %ids : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %t = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %p = transfuse.slice %pos length %t {axis = 0 : i64, start = 0 : i64} : (tensor<6x8xf32>, index) -> tensor<?x8xf32>
  %hp = transfuse.add %h, %p : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
  %a = transfuse.add %hp, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %y = transfuse.matmul %a, %w {transpose_rhs = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %yb = transfuse.add %y, %bias : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %g = transfuse.gelu %yb : tensor<?x?x8xf32>
  %r = transfuse.relu %g : tensor<?x?x8xf32>
  %n = transfuse.layer_norm %r, %gamma, %beta {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %z = transfuse.matmul %n, %e {transpose_rhs = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %l = transfuse.cross_entropy %z, %labels {ignore_index = 1 : i64, label_smoothing = 1.0e-01 : f64} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  %sq = transfuse.mul %n, %n : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %ms = transfuse.reduce_mean %sq {axes = array<i64: 0, 1, 2>} : (tensor<?x?x8xf32>) -> tensor<f32>
  %reg = transfuse.scale %ms {factor = 0.01 : f64} : tensor<f32>
  %total = transfuse.add %l, %reg : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %total : tensor<f32>
}
