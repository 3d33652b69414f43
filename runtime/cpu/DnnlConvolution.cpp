// Float32 convolution forward through oneDNN's convolution primitive (what PyTorch's CPU
// convolution uses too): the input and output are reordered between kiln's NCHW and the blocked
// layouts oneDNN's direct kernels want, which is cheaper than im2col's columns. Primitives and
// their reorders are cached per thread by shape.
#include "runtime/cpu/DnnlConvolution.h"

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <optional>

namespace kiln::cpu {

namespace {

using dnnl::memory;
using Key = std::array<int64_t, 18>;

struct ConvPrimitive {
  dnnl::convolution_forward conv;
  memory userSrc, userWei, userBias, userDst;
  memory src, wei, dst; // the primitive's layouts: the user memory itself when they agree
  std::optional<dnnl::reorder> srcIn, weiIn, dstOut;
};

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

std::unique_ptr<ConvPrimitive> build(const DnnlConvShape& s, bool hasBias, bool channelsLast) {
  dnnl::engine& eng = cpuEngine();
  const auto f32 = memory::data_type::f32;
  const auto any = memory::format_tag::any;
  memory::dims src{s.n, s.c, s.h, s.w}, dst{s.n, s.cout, s.oh, s.ow}, bias{s.cout};
  memory::dims wei = s.groups == 1
                         ? memory::dims{s.cout, s.c, s.kh, s.kw}
                         : memory::dims{s.groups, s.cout / s.groups, s.c / s.groups, s.kh, s.kw};
  memory::dims strides{s.sh, s.sw}, dilation{s.dh - 1, s.dw - 1}, padL{s.ph, s.pw};
  memory::dims padR{(s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.ph,
                    (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pw};
  memory::desc srcAny(src, f32, any), weiAny(wei, f32, any), dstAny(dst, f32, any);
  auto desc = hasBias ? dnnl::convolution_forward::desc(
                            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                            srcAny, weiAny, memory::desc(bias, f32, memory::format_tag::x), dstAny,
                            strides, dilation, padL, padR)
                      : dnnl::convolution_forward::desc(
                            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                            srcAny, weiAny, dstAny, strides, dilation, padL, padR);
  dnnl::convolution_forward::primitive_desc pd(desc, eng);
  auto p = std::make_unique<ConvPrimitive>();
  p->conv = dnnl::convolution_forward(pd);
  const auto act = channelsLast ? memory::format_tag::nhwc : memory::format_tag::nchw;
  p->userSrc = memory({src, f32, act}, eng, DNNL_MEMORY_NONE);
  p->userDst = memory({dst, f32, act}, eng, DNNL_MEMORY_NONE);
  p->userWei = memory({wei, f32, s.groups == 1 ? memory::format_tag::oihw : memory::format_tag::goihw},
                      eng, DNNL_MEMORY_NONE);
  if (hasBias) p->userBias = memory({bias, f32, memory::format_tag::x}, eng, DNNL_MEMORY_NONE);
  auto stage = [&](const memory& user, const memory::desc& want, memory& mem,
                   std::optional<dnnl::reorder>& r, bool in) {
    if (want == user.get_desc()) {
      mem = user;
      return;
    }
    mem = memory(want, eng);
    r = in ? dnnl::reorder(user, mem) : dnnl::reorder(mem, user);
  };
  stage(p->userSrc, pd.src_desc(), p->src, p->srcIn, true);
  stage(p->userWei, pd.weights_desc(), p->wei, p->weiIn, true);
  stage(p->userDst, pd.dst_desc(), p->dst, p->dstOut, false);
  return p;
}

// One operand of a primitive: kiln's plain memory, the primitive's layout, the reorder between.
struct Staged {
  memory user, mem;
  std::optional<dnnl::reorder> r;
  Staged() = default;
  Staged(const memory::desc& plain, const memory::desc& want, bool in) {
    user = memory(plain, cpuEngine(), DNNL_MEMORY_NONE);
    if (want == plain) {
      mem = user;
      return;
    }
    mem = memory(want, cpuEngine());
    r = in ? dnnl::reorder(user, mem) : dnnl::reorder(mem, user);
  }
  const memory& in(dnnl::stream& st, const void* data) {
    user.set_data_handle(const_cast<void*>(data));
    if (r) r->execute(st, user, mem);
    return mem;
  }
  // An output: bind kiln's memory before the primitive runs (it is written directly when the
  // layouts agree), then finish() copies the primitive's layout into it.
  const memory& out(void* data) {
    user.set_data_handle(data);
    return mem;
  }
  void finish(dnnl::stream& st) {
    if (r) r->execute(st, mem, user);
  }
};

struct ConvBackward {
  std::optional<dnnl::convolution_backward_data> data;
  std::optional<dnnl::convolution_backward_weights> weights;
  Staged goData, w, gi, goWeights, x, gw;
};

std::unique_ptr<ConvBackward> buildBackward(const DnnlConvShape& s, bool wantInput,
                                            bool wantWeight) {
  dnnl::engine& eng = cpuEngine();
  const auto f32 = memory::data_type::f32;
  const auto any = memory::format_tag::any, nchw = memory::format_tag::nchw;
  memory::dims src{s.n, s.c, s.h, s.w}, dst{s.n, s.cout, s.oh, s.ow};
  memory::dims wei = s.groups == 1
                         ? memory::dims{s.cout, s.c, s.kh, s.kw}
                         : memory::dims{s.groups, s.cout / s.groups, s.c / s.groups, s.kh, s.kw};
  auto weiTag = s.groups == 1 ? memory::format_tag::oihw : memory::format_tag::goihw;
  memory::dims strides{s.sh, s.sw}, dilation{s.dh - 1, s.dw - 1}, padL{s.ph, s.pw};
  memory::dims padR{(s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.ph,
                    (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pw};
  memory::desc srcAny(src, f32, any), weiAny(wei, f32, any), dstAny(dst, f32, any);
  memory::desc srcPlain(src, f32, nchw), weiPlain(wei, f32, weiTag), dstPlain(dst, f32, nchw);
  dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, srcAny, weiAny, dstAny,
                                      strides, dilation, padL, padR),
      eng);
  auto p = std::make_unique<ConvBackward>();
  if (wantInput) {
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, srcAny, weiAny,
                                              dstAny, strides, dilation, padL, padR),
        eng, fwd);
    p->data = dnnl::convolution_backward_data(pd);
    p->goData = Staged(dstPlain, pd.diff_dst_desc(), true);
    p->w = Staged(weiPlain, pd.weights_desc(), true);
    p->gi = Staged(srcPlain, pd.diff_src_desc(), false);
  }
  if (wantWeight) {
    dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, srcAny,
                                                 weiAny, dstAny, strides, dilation, padL, padR),
        eng, fwd);
    p->weights = dnnl::convolution_backward_weights(pd);
    p->goWeights = Staged(dstPlain, pd.diff_dst_desc(), true);
    p->x = Staged(srcPlain, pd.src_desc(), true);
    p->gw = Staged(weiPlain, pd.diff_weights_desc(), false);
  }
  return p;
}

} // namespace

bool dnnlConvolutionBackward(const DnnlConvShape& s, const float* go, const float* x,
                             const float* w, float* gi, float* gw) {
  if (gi == nullptr && gw == nullptr) return true;
  std::array<int64_t, 18> key{s.n, s.c, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw, s.ph,
                              s.pw, s.dh, s.dw, s.oh, s.ow, s.groups, gi != nullptr, gw != nullptr};
  thread_local std::map<std::array<int64_t, 18>, std::unique_ptr<ConvBackward>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::unique_ptr<ConvBackward> p;
    try {
      p = buildBackward(s, gi != nullptr, gw != nullptr);
    } catch (const dnnl::error&) {
      p = nullptr; // no oneDNN kernel for this shape: the caller's im2col path runs
    }
    it = cache.emplace(key, std::move(p)).first;
  }
  ConvBackward* p = it->second.get();
  if (p == nullptr) return false;
  dnnl::stream st(cpuEngine());
  if (gi) {
    const memory& g = p->goData.in(st, go);
    const memory& wm = p->w.in(st, w);
    p->data->execute(st, {{DNNL_ARG_DIFF_DST, g}, {DNNL_ARG_WEIGHTS, wm},
                          {DNNL_ARG_DIFF_SRC, p->gi.out(gi)}});
    p->gi.finish(st);
  }
  if (gw) {
    const memory& g = p->goWeights.in(st, go);
    const memory& xm = p->x.in(st, x);
    p->weights->execute(st, {{DNNL_ARG_DIFF_DST, g}, {DNNL_ARG_SRC, xm},
                             {DNNL_ARG_DIFF_WEIGHTS, p->gw.out(gw)}});
    p->gw.finish(st);
  }
  st.wait();
  return true;
}

bool dnnlConvolutionForward(const DnnlConvShape& s, const float* x, const float* w, const float* b,
                            float* out, bool channelsLast) {
  Key key{s.n, s.c, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.oh, s.ow,
          s.groups, b != nullptr, channelsLast};
  thread_local std::map<Key, std::unique_ptr<ConvPrimitive>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::unique_ptr<ConvPrimitive> p;
    try {
      p = build(s, b != nullptr, channelsLast);
    } catch (const dnnl::error&) {
      p = nullptr; // no oneDNN kernel for this shape: the caller's im2col path runs
    }
    it = cache.emplace(key, std::move(p)).first;
  }
  ConvPrimitive* p = it->second.get();
  if (p == nullptr) return false;
  dnnl::stream stream(cpuEngine());
  p->userSrc.set_data_handle(const_cast<float*>(x));
  p->userWei.set_data_handle(const_cast<float*>(w));
  p->userDst.set_data_handle(out);
  if (p->srcIn) p->srcIn->execute(stream, p->userSrc, p->src);
  if (p->weiIn) p->weiIn->execute(stream, p->userWei, p->wei);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei}, {DNNL_ARG_DST, p->dst}};
  if (b) {
    p->userBias.set_data_handle(const_cast<float*>(b));
    args.emplace(DNNL_ARG_BIAS, p->userBias);
  }
  p->conv.execute(stream, args);
  if (p->dstOut) p->dstOut->execute(stream, p->dst, p->userDst);
  stream.wait();
  return true;
}

} // namespace kiln::cpu
