"""nn.TransformerEncoder and nn.TransformerDecoder stacks (pre- and post-norm, gelu and relu,
dropout 0) with a causal tgt mask from generate_square_subsequent_mask and padding masks."""
import numpy as np
from cutil import init_module, randn, rng, tensor

TAGS = ["nn", "attention", "masking"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    nn = T.nn
    D = 16
    enc_layer = nn.TransformerEncoderLayer(D, 4, 32, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
    encoder = nn.TransformerEncoder(enc_layer, num_layers=2, norm=nn.LayerNorm(D),
                                    enable_nested_tensor=False)
    dec_layer = nn.TransformerDecoderLayer(D, 2, 24, dropout=0.0, batch_first=True)
    decoder = nn.TransformerDecoder(dec_layer, num_layers=2)
    model = init_module(T, nn.ModuleDict({"enc": encoder, "dec": decoder}))
    model.eval()

    def fn(src, tgt, src_len):
        S, L = src.shape[1], tgt.shape[1]
        src_pad = T.arange(S)[None, :] >= src_len[:, None]
        mem = model["enc"](src, src_key_padding_mask=src_pad)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(L)
        out = model["dec"](tgt, mem, tgt_mask=tgt_mask, memory_key_padding_mask=src_pad)
        return mem, out

    r = rng(104)
    src_len = tensor(T, np.array([6, 4, 5], dtype=np.int64))
    return fn, [(randn(T, r, 3, 6, D), randn(T, r, 3, 4, D), src_len)]
