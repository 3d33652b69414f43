"""kiln.distributions: torch.distributions' Normal, Categorical, Bernoulli, Uniform, Laplace,
MultivariateNormal, Independent, Gamma, Chi2, StudentT, Beta, Dirichlet, Exponential, LogNormal,
OneHotCategorical, MixtureSameFamily, Cauchy, HalfNormal, HalfCauchy, Gumbel, Geometric, Pareto, Weibull,
Poisson, the relaxed Bernoulli / one-hot categorical,
TransformedDistribution (with transforms) and kl_divergence
between them, over kiln's ops (log_prob, entropy and rsample are differentiable, and traced by
kiln.compile like any other ops; gamma and Dirichlet sampling is a graph break, see _gamma.py)."""
from .bernoulli import Bernoulli  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .distribution import Distribution, ExponentialFamily  # noqa: F401
from .gamma import Beta, Chi2, Dirichlet, Gamma, StudentT  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .more import (  # noqa: F401
    Cauchy, ExpRelaxedCategorical, Geometric, Gumbel, HalfCauchy, HalfNormal, InverseGamma, Kumaraswamy,
    LogitRelaxedBernoulli, Multinomial, Pareto,
    Poisson, RelaxedBernoulli, RelaxedOneHotCategorical, Weibull,
)
from .multivariate_normal import LowRankMultivariateNormal, MultivariateNormal  # noqa: F401
from .normal import Normal  # noqa: F401
from .uniform import Laplace, Uniform  # noqa: F401
from . import transforms  # noqa: F401
from .transformed_distribution import (  # noqa: F401
    Exponential, LogNormal, MixtureSameFamily, OneHotCategorical, TransformedDistribution,
)

__all__ = ["Bernoulli", "Beta", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Distribution", "Exponential", "ExponentialFamily", "Gamma",
           "ExpRelaxedCategorical", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "InverseGamma", "Kumaraswamy", "Laplace",
           "LogitRelaxedBernoulli", "LogNormal", "LowRankMultivariateNormal", "Multinomial", "Pareto", "Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical",
           "Weibull", "MixtureSameFamily", "MultivariateNormal", "Normal", "OneHotCategorical", "StudentT",
           "TransformedDistribution", "Uniform", "kl_divergence", "register_kl", "transforms"]
