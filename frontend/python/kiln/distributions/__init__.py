"""kiln.distributions: torch.distributions' Normal, Categorical, Bernoulli, Uniform, Laplace,
MultivariateNormal, Independent and kl_divergence between them, over kiln's ops (log_prob, entropy and rsample are differentiable,
and traced by kiln.compile like any other ops)."""
from .bernoulli import Bernoulli  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .normal import Normal  # noqa: F401
from .uniform import Laplace, Uniform  # noqa: F401

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "Laplace", "MultivariateNormal", "Normal",
           "Uniform", "kl_divergence", "register_kl"]
