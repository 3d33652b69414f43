"""Knowledge distillation: KL divergence between temperature-softened teacher and student
(kl_div with log_target, batchmean), plus hard-label cross entropy and a cosine embedding term."""
from cutil import init_module, randint, randn, rng

TAGS = ["loss", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    student = init_module(T, nn.Linear(8, 5))
    teacher = init_module(T, nn.Linear(8, 5), seed=9).eval()

    def fn(x, y, temp):
        with T.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        kd = F.kl_div(F.log_softmax(s_logits / temp, -1), F.log_softmax(t_logits / temp, -1),
                      reduction="batchmean", log_target=True) * temp ** 2
        kd2 = F.kl_div(F.log_softmax(s_logits, -1), F.softmax(t_logits, -1), reduction="sum")
        ce = F.cross_entropy(s_logits, y)
        cos = 1 - F.cosine_similarity(s_logits, t_logits, dim=-1).mean()
        loss = 0.7 * kd + 0.3 * ce + cos + 0.01 * kd2
        gw, = T.autograd.grad(loss, [student.weight])
        return loss.detach(), kd.detach(), gw

    r = rng(47)
    return fn, [(randn(T, r, 6, 8), randint(T, r, 0, 5, 6), 4.0), (randn(T, r, 6, 8), randint(T, r, 0, 5, 6), 2.0)]
