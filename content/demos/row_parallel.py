# Row-parallel linear layer Y = X A (Megatron convention: A has shape (in, out)),
# simulated on tp "ranks" with numpy only, forward and backward, checked against
# the unsharded layer.  B = batch, D = in features, O = out features.
import numpy as np

rng = np.random.default_rng(0)                 # fixed seed: same output every run
B, D, O, tp = 2, 4, 3, 2
VALUES = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])  # small non-zero integers: exact
X = rng.choice(VALUES, size=(B, D))            # (B, D)
A = rng.choice(VALUES, size=(D, O))            # (D, O)
dY = rng.choice(VALUES, size=(B, O))           # (B, O) upstream gradient

# Row parallel: rank r holds rows r*D/tp ... (r+1)*D/tp of A (some INPUT features)
# and the matching columns of X (the input arrives already split on its last dim).
X_shards = np.split(X, tp, axis=1)             # tp x (B, D/tp)
A_shards = np.split(A, tp, axis=0)             # tp x (D/tp, O)

# Forward: each rank computes a partial sum over its own features ...
partials = [x @ a for x, a in zip(X_shards, A_shards)]   # tp x (B, O), full shape!
# ... and an AllReduce(sum) ADDS them; afterwards every rank holds the full Y.
Y = sum(partials)                              # (B, O), replicated on all ranks

# Backward: Y is replicated, so every rank already has the full dY: no communication.
dX_shards = [dY @ a.T for a in A_shards]       # tp x (B, D/tp): sharded like X
dA_shards = [x.T @ dY for x in X_shards]       # tp x (D/tp, O): sharded like A

# Unsharded reference.
Y_ref, dX_ref, dA_ref = X @ A, dY @ A.T, X.T @ dY
for r in range(tp):
    print(f"rank {r}: partial Y = {partials[r].tolist()}")
print("Y (after AllReduce) =", Y.tolist())
print("Y reference         =", Y_ref.tolist())
print("max |Y  - ref|  =", np.abs(Y - Y_ref).max())
# Concatenating the partials (an AllGather) would be wrong: wrong shape, wrong values.
print(f"concatenated partials have shape {np.concatenate(partials, axis=1).shape} "
      f"but Y has shape {Y.shape}")
print("max |dX - ref|  =", np.abs(np.concatenate(dX_shards, axis=1) - dX_ref).max())
print("max |dA - ref|  =", np.abs(np.concatenate(dA_shards, axis=0) - dA_ref).max())
