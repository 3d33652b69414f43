"""kiln.backends.cudnn (torch.backends.cudnn): kiln does not use cuDNN (its convolutions are its
own kernels), so is_available() is False and the flags below change nothing in kiln; they are
kept, with torch's defaults, because training scripts set them (`cudnn.benchmark = True`).
`deterministic`: kiln's kernels give the same results run to run whatever it says."""

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None
