"""A REINFORCE episode: a policy network picks actions with a Categorical over its logits, a toy
environment steps in Python on the chosen action (.item()), rewards are discounted backwards in
a Python loop over their count, and the loss weights log-probabilities by normalized returns."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "graph-break", "rl"]
RTOL = 1e-4
ATOL = 1e-5


def build(T):
    r = rng(71)
    nn = T.nn
    policy = init_module(T, nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)))
    Categorical = T.distributions.Categorical

    def choose(state, step):
        logits = policy(state) / (1.0 + 0.1 * step)
        dist = Categorical(logits=logits)
        action = logits.argmax()
        return action, dist.log_prob(action), dist.entropy()

    def discounted(rewards, gamma):
        out, running = [], 0.0
        for rew in reversed(rewards):
            running = rew + gamma * running
            out.insert(0, running)
        returns = T.tensor(out)
        return (returns - returns.mean()) / (returns.std() + 1e-6)

    def fn(state0, moves):
        state = state0
        log_probs, rewards, entropies = [], [], []
        for step in range(6):
            action, lp, ent = choose(state, step)
            a = action.item()
            rewards.append(float(a) - 1.0 + 0.1 * step)
            log_probs.append(lp)
            entropies.append(ent)
            state = T.tanh(state + moves[a])
        returns = discounted(rewards, 0.9)
        loss = -(T.stack(log_probs) * returns).sum() - 0.01 * T.stack(entropies).sum()
        return loss, state

    return fn, [(randn(T, r, 4), randn(T, r, 3, 4)) for _ in range(2)]
