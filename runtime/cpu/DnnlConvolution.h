// Float32 2-d convolution forward and backward through oneDNN (DnnlConvolution.cpp).
#pragma once
#include <cstdint>

namespace kiln::cpu {

// The geometry of one convolution: input [n, c, h, w], weight [cout, c / groups, kh, kw], output
// [n, cout, oh, ow]; strides, paddings and dilations (1 = none) as PyTorch's.
struct DnnlConvShape {
  int64_t n, c, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, groups;
};

// out = conv(x, w) (+ b when not null), every array contiguous NCHW / OIHW, or with
// `channelsLast` x and out channels-last (NHWC in memory: oneDNN's direct kernels read and
// write that layout without a reorder). Returns false (and writes nothing) when oneDNN has no
// primitive for this shape.
bool dnnlConvolutionForward(const DnnlConvShape& s, const float* x, const float* w, const float* b,
                            float* out, bool channelsLast = false);

// The input and weight gradients (either may be null: not wanted) of that convolution, from
// grad_output go; the same contract as dnnlConvolutionForward.
bool dnnlConvolutionBackward(const DnnlConvShape& s, const float* go, const float* x,
                             const float* w, float* gi, float* gw);

} // namespace kiln::cpu
