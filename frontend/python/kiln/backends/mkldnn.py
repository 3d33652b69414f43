"""kiln.backends.mkldnn (torch.backends.mkldnn): kiln's CPU GEMMs and matmul epilogues run on
oneDNN (the library formerly named MKL-DNN), which every build links."""

enabled = True


def is_available():
    return True
