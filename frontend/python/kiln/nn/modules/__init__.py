"""The layers of kiln.nn."""
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh  # noqa: F401
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .dropout import Dropout, Dropout2d  # noqa: F401
from .linear import Bilinear, Flatten, Identity, Linear, Unflatten  # noqa: F401
from .module import Module  # noqa: F401
from .normalization import LayerNorm  # noqa: F401

# Tier 2: activations, attention, losses, RMSNorm.
from .activation import (  # noqa: F401
    CELU, ELU, GLU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, MultiheadAttention, PReLU,
    ReLU6, Softmin, Softplus, Softsign, Tanhshrink,
)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, CTCLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
)
from .loss import CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss  # noqa: F401
from .normalization import RMSNorm  # noqa: F401
from .padding import (  # noqa: F401
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
)
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .normalization import GroupNorm  # noqa: F401
from .pooling import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
    AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
)
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from .sparse import Embedding, EmbeddingBag  # noqa: F401
from .upsampling import PixelShuffle, PixelUnshuffle, Upsample  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .transformer import (  # noqa: F401
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)
from .activation import Hardshrink, RReLU, Softmax2d, Softshrink, Threshold  # noqa: F401
from .channelshuffle import ChannelShuffle  # noqa: F401
from .dropout import AlphaDropout, Dropout1d, Dropout3d, FeatureAlphaDropout  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .loss import (  # noqa: F401
    GaussianNLLLoss, HingeEmbeddingLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss2d,
    PoissonNLLLoss, SoftMarginLoss, TripletMarginWithDistanceLoss,
)
from .normalization import LocalResponseNorm  # noqa: F401
from .upsampling import UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .lazy import (  # noqa: F401
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,
    LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear,
    LazyModuleMixin,
)
