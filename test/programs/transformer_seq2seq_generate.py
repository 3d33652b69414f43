"""A full nn.Transformer (encoder-decoder, batch_first) as translation code uses it: a source key
padding mask from lengths, Transformer.generate_square_subsequent_mask for the decoder, token
embeddings scaled by sqrt(d_model), a teacher-forced loss with ignore_index on padding, and a
greedy decoding loop that re-runs the decoder on the growing prefix (eval mode)."""
import math

import numpy as np

from cutil import init_module, randint, rng, tensor

TAGS = ["nn", "attention", "masking", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    V, D, PAD, BOS = 11, 16, 0, 1
    emb = init_module(T, T.nn.Embedding(V, D), seed=1)
    tr = init_module(T, T.nn.Transformer(d_model=D, nhead=4, num_encoder_layers=2, num_decoder_layers=1,
                                         dim_feedforward=32, dropout=0.0, batch_first=True), seed=2)
    head = init_module(T, T.nn.Linear(D, V), seed=3)
    tr.eval()

    def fn(src, src_len, tgt):
        S = src.shape[1]
        src_pad = T.arange(S)[None, :] >= src_len[:, None]
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        causal = T.nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        h = tr(emb(src) * math.sqrt(D), emb(tgt_in) * math.sqrt(D), tgt_mask=causal,
               src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
               tgt_key_padding_mask=tgt_in == PAD)
        logits = head(h)
        loss = T.nn.functional.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD)
        with T.no_grad():
            memory = tr.encoder(emb(src) * math.sqrt(D), src_key_padding_mask=src_pad)
            ys = T.full((src.shape[0], 1), BOS, dtype=T.long)
            for _ in range(4):
                m = tr.generate_square_subsequent_mask(ys.shape[1])
                out = tr.decoder(emb(ys) * math.sqrt(D), memory, tgt_mask=m, tgt_is_causal=True,
                                 memory_key_padding_mask=src_pad)
                nxt = head(out[:, -1]).argmax(-1, keepdim=True)
                ys = T.cat([ys, nxt], dim=1)
        return loss, logits, ys

    r = rng(160)
    src = randint(T, r, 2, V, 3, 6)
    tgt = r.integers(2, V, size=(3, 5))
    tgt[:, 0] = BOS
    tgt[0, 3:] = PAD
    return fn, [(src, tensor(T, np.array([6, 4, 2])), tensor(T, tgt.astype(np.int64)))]
