"""Models written the way a PyTorch user writes them, for any library T (kiln or torch): a
GPT-2-style character model and a small CNN. Used by test_training.py and bench/."""
import math


def gpt_classes(T):
    nn, F = T.nn, T.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head, block_size, use_sdpa):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.n_head, self.n_embd, self.use_sdpa = n_head, n_embd, use_sdpa
            self.register_buffer("bias", T.tril(T.ones(block_size, block_size)).view(1, 1, block_size, block_size))

        def forward(self, x):
            B, Tn, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, Tn, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, Tn, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, Tn, self.n_head, C // self.n_head).transpose(1, 2)
            if self.use_sdpa:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :Tn, :Tn] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, Tn, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head, block_size, use_sdpa):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd, bias=True)
            self.attn = CausalSelfAttention(n_embd, n_head, block_size, use_sdpa)
            self.ln_2 = nn.LayerNorm(n_embd, bias=True)
            self.mlp = MLP(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32, use_sdpa=True):
            super().__init__()
            self.block_size = block_size
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block(n_embd, n_head, block_size, use_sdpa and i % 2 == 0)
                                 for i in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd, bias=True),
            ))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = T.arange(0, t, dtype=T.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            params = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for n, p in params.items() if p.dim() >= 2]
            nodecay = [p for n, p in params.items() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay},
                      {"params": nodecay, "weight_decay": 0.0}]
            return T.optim.AdamW(groups, lr=learning_rate, betas=betas)

        @T.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = T.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = T.multinomial(probs, num_samples=1)
                idx = T.cat((idx, idx_next), dim=1)
            return idx

    return GPT


def cnn(T):
    nn = T.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding="same", bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))


def copy_weights(src_torch, dst_kiln, kiln):
    """Gives a kiln module the torch module's parameters and buffers (same names)."""
    state = {k: kiln.from_numpy(v.detach().cpu().numpy().copy()) for k, v in src_torch.state_dict().items()}
    dst_kiln.load_state_dict(state)
