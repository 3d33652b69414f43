#!/usr/bin/env python3
"""Eager nn kernels, kiln vs PyTorch on CPU: forward and backward ops called directly.

Each case times the forward op and its backward op (the kernels autograd runs: e.g.
convolution_backward for conv2d) with identical float32 inputs, and prints the median time per
call in milliseconds, median and min, and kiln's min / torch's min (below 1.0: kiln faster). Both libraries use all cores
(torch.get_num_threads(); kiln's OpenMP default, which its GEMMs and oneDNN's convolutions
share) unless --threads N pins both (OMP_NUM_THREADS for kiln, set before it loads;
torch.set_num_threads).

    python bench/nn_kernels.py [--rounds N] [--case NAME] [--threads N]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np


def timings_ms(fn, rounds):
    """(median, min) milliseconds per call over `rounds` calls after two warm-up calls; the min
    is the steadier number on a shared machine."""
    fn()
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, min(times) * 1e3


def arrays(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def cases(torch):
    import kiln

    K, A = kiln, torch.ops.aten
    kt = lambda a: (kiln.from_numpy(a.copy()), torch.from_numpy(a.copy()))  # noqa: E731

    # conv2d: a CNN-sized layer, 32x16x32x32 input, 32 3x3 filters, padding 1.
    (kx, tx), (kw, tw), (kb, tb), (kg, tg) = map(kt, arrays(0, (32, 16, 32, 32), (32, 16, 3, 3), (32,),
                                                            (32, 32, 32, 32)))
    conv = [[1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    yield ("conv2d 32x16x32x32 k3 ->32",
           lambda: K.convolution(kx, kw, kb, *conv), lambda: A.convolution(tx, tw, tb, *conv),
           lambda: K.convolution_backward(kg, kx, kw, [32], *conv, [1, 1, 1]),
           lambda: A.convolution_backward(tg, tx, tw, [32], *conv, [True, True, True]))

    # conv2d, a wider stride-2 layer.
    (kx2, tx2), (kw2, tw2), (kg2, tg2) = map(kt, arrays(1, (32, 64, 16, 16), (128, 64, 3, 3), (32, 128, 8, 8)))
    conv2 = [[2, 2], [1, 1], [1, 1], False, [0, 0], 1]
    yield ("conv2d 32x64x16x16 k3 s2 ->128",
           lambda: K.convolution(kx2, kw2, None, *conv2), lambda: A.convolution(tx2, tw2, None, *conv2),
           lambda: K.convolution_backward(kg2, kx2, kw2, None, *conv2, [1, 1, 0]),
           lambda: A.convolution_backward(tg2, tx2, tw2, None, *conv2, [True, True, False]))

    # A ResNet block's 3x3 layer at batch 1, and the small CNN's first layer at batch 32.
    for seed, (n, c, hw, co) in ((8, (1, 64, 56, 64)), (9, (32, 3, 16, 16))):
        (kx3, tx3), (kw3, tw3), (kg3, tg3) = map(kt, arrays(seed, (n, c, hw, hw), (co, c, 3, 3),
                                                            (n, co, hw, hw)))
        yield (f"conv2d {n}x{c}x{hw}x{hw} k3 ->{co}",
               lambda x=kx3, w=kw3: K.convolution(x, w, None, *conv),
               lambda x=tx3, w=tw3: A.convolution(x, w, None, *conv),
               lambda g=kg3, x=kx3, w=kw3: K.convolution_backward(g, x, w, None, *conv, [1, 1, 0]),
               lambda g=tg3, x=tx3, w=tw3: A.convolution_backward(g, x, w, None, *conv,
                                                                  [True, True, False]))

    # max_pool2d 2x2 over the conv output.
    (kp, tp), = map(kt, arrays(2, (32, 32, 32, 32)))
    kout, kidx = K.max_pool2d_with_indices(kp, [2, 2], [2, 2], [0, 0], [1, 1], False)
    tout, tidx = A.max_pool2d_with_indices(tp, [2, 2], [2, 2], [0, 0], [1, 1], False)
    (kpg, tpg), = map(kt, arrays(3, tuple(tout.shape)))
    pool = [[2, 2], [2, 2], [0, 0], [1, 1], False]
    yield ("max_pool2d 32x32x32x32 k2",
           lambda: K.max_pool2d_with_indices(kp, *pool), lambda: A.max_pool2d_with_indices(tp, *pool),
           lambda: K.max_pool2d_with_indices_backward(kpg, kp, *pool, kidx),
           lambda: A.max_pool2d_with_indices_backward(tpg, tp, *pool, tidx))

    # batch_norm in training over the conv output.
    (kn, tn), (knw, tnw), (knb, tnb), (kng, tng) = map(kt, arrays(4, (32, 32, 32, 32), (32,), (32,),
                                                               (32, 32, 32, 32)))
    krm, trm = kiln.zeros(32), torch.zeros(32)
    krv, trv = kiln.ones(32), torch.ones(32)
    _, ksm, ksi = K.native_batch_norm(kn, knw, knb, krm, krv, True, 0.1, 1e-5)
    _, tsm, tsi = A.native_batch_norm(tn, tnw, tnb, trm, trv, True, 0.1, 1e-5)
    yield ("batch_norm 32x32x32x32 train",
           lambda: K.native_batch_norm(kn, knw, knb, krm, krv, True, 0.1, 1e-5),
           lambda: A.native_batch_norm(tn, tnw, tnb, trm, trv, True, 0.1, 1e-5),
           lambda: K.native_batch_norm_backward(kng, kn, knw, krm, krv, ksm, ksi, True, 1e-5, [1, 1, 1]),
           lambda: A.native_batch_norm_backward(tng, tn, tnw, trm, trv, tsm, tsi, True, 1e-5, [True, True, True]))

    # embedding: GPT-2-sized table, a 16x256 batch of token ids.
    (ke, te), = map(kt, arrays(5, (8192, 768)))
    ids = np.random.default_rng(6).integers(0, 8192, (16, 256))
    ki, ti = kiln.from_numpy(ids.copy()), torch.from_numpy(ids.copy())
    (keg, teg), = map(kt, arrays(7, (16, 256, 768)))
    yield ("embedding 8192x768, 16x256 ids",
           lambda: K.embedding(ke, ki), lambda: A.embedding(te, ti),
           lambda: K.embedding_dense_backward(keg, ki, 8192, -1, False),
           lambda: A.embedding_dense_backward(teg, ti, 8192, -1, False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--case", default="", help="run only cases whose name contains this")
    parser.add_argument("--threads", type=int, default=0, help="threads for both libraries (default: theirs)")
    args = parser.parse_args()
    if args.threads:
        if "kiln" in sys.modules:
            raise SystemExit("--threads must be applied before kiln is imported")
        os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    kiln_threads = args.threads or "OpenMP default"
    print(f"threads: torch {torch.get_num_threads()}, kiln {kiln_threads}; ms per call over {args.rounds} calls")
    print(f"{'case':32} {'pass':9} {'kiln med':>9} {'torch med':>9} {'kiln min':>9} {'torch min':>9} {'min ratio':>9}")
    with torch.no_grad():
        for name, kf, tf, kb, tb in cases(torch):
            if args.case not in name:
                continue
            for label, k, t in (("forward", kf, tf), ("backward", kb, tb)):
                (km, kn), (tm, tn) = timings_ms(k, args.rounds), timings_ms(t, args.rounds)
                print(f"{name:32} {label:9} {km:9.3f} {tm:9.3f} {kn:9.3f} {tn:9.3f} {kn / tn:9.2f}")


if __name__ == "__main__":
    main()
