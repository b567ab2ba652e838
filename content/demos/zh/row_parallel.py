# 行并行线性层 Y = X A（Megatron 的写法：A 的形状是 (in, out)），
# 只用 numpy 在 tp 个 "rank" 上模拟前向和反向，并与未分片的线性层对照。
# B = 批大小，D = 输入特征数，O = 输出特征数。
import numpy as np

rng = np.random.default_rng(0)                 # 固定随机种子：每次运行输出都一样
B, D, O, tp = 2, 4, 3, 2
VALUES = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])  # 小的非零整数：计算是精确的
X = rng.choice(VALUES, size=(B, D))            # (B, D)
A = rng.choice(VALUES, size=(D, O))            # (D, O)
dY = rng.choice(VALUES, size=(B, O))           # (B, O) 上游梯度

# 行并行：rank r 持有 A 的第 r*D/tp ... (r+1)*D/tp 行（一部分输入特征），
# 以及 X 对应的列（输入到达时已经沿最后一维切好）。
X_shards = np.split(X, tp, axis=1)             # tp x (B, D/tp)
A_shards = np.split(A, tp, axis=0)             # tp x (D/tp, O)

# 前向：每个 rank 只对自己的特征求部分和……
partials = [x @ a for x, a in zip(X_shards, A_shards)]   # tp x (B, O)，形状是完整的！
# ……再由 AllReduce(sum) 把它们相加；之后每个 rank 都持有完整的 Y。
Y = sum(partials)                              # (B, O)，各 rank 上都有一份

# 反向：Y 在各 rank 上是复制的，所以每个 rank 本来就有完整的 dY：不需要通信。
dX_shards = [dY @ a.T for a in A_shards]       # tp x (B, D/tp)：和 X 一样切分
dA_shards = [x.T @ dY for x in X_shards]       # tp x (D/tp, O)：和 A 一样切分

# 未分片参考。
Y_ref, dX_ref, dA_ref = X @ A, dY @ A.T, X.T @ dY
for r in range(tp):
    print(f"rank {r}：部分 Y = {partials[r].tolist()}")
print("Y（AllReduce 之后）=", Y.tolist())
print("Y 参考值          =", Y_ref.tolist())
print("max |Y  - 参考| =", np.abs(Y - Y_ref).max())
# 把部分结果拼接起来（AllGather）是错的：形状不对，数值也不对。
print(f"拼接后的部分结果形状是 {np.concatenate(partials, axis=1).shape}，"
      f"而 Y 的形状是 {Y.shape}")
print("max |dX - 参考| =", np.abs(np.concatenate(dX_shards, axis=1) - dX_ref).max())
print("max |dA - 参考| =", np.abs(np.concatenate(dA_shards, axis=0) - dA_ref).max())
