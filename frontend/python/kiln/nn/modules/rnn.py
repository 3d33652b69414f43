"""RNN, LSTM, GRU and their cells: composites over kiln's ops (linear, sigmoid, tanh, stack), so
autograd and kiln.compile need nothing of their own. The layers take a padded batch or a
PackedSequence (kiln.nn.utils.rnn), whose steps shrink the batch as sequences end. Parameter names, shapes, order and init
are torch's (weight_ih_l0, weight_hh_l0_reverse, ...), so state_dicts load both ways.

Under kiln.compile the layers are traced like any kiln module: the time loop unrolls into the
graph (torch.compile instead stops its graph at an nn.RNN/GRU/LSTM attribute, as
torch._dynamo.config.allow_rnn is False, and runs the rest of the frame eagerly)."""
import math
import numbers
import warnings

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

_ops = _C._ops
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# -- one time step of each kind; x_gates is x @ w_ih.T + b_ih, computed for all steps at once --
def _lstm_step(x_gates, h, c, w_hh, b_hh, w_hr):
    i, f, g, o = (x_gates + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = _ops.sigmoid(f) * c + _ops.sigmoid(i) * _ops.tanh(g)
    h = _ops.sigmoid(o) * _ops.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_step(x_gates, h, w_hh, b_hh):
    xr, xz, xn = x_gates.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = _ops.sigmoid(xr + hr)
    z = _ops.sigmoid(xz + hz)
    n = _ops.tanh(xn + r * hn)
    return n + z * (h - n)  # (1 - z) * n + z * h


def _rnn_step(x_gates, h, w_hh, b_hh, relu):
    pre = x_gates + F.linear(h, w_hh, b_hh)
    return _ops.relu(pre) if relu else _ops.tanh(pre)


def _run_direction(mode, x, h, c, params, reverse):
    """One layer in one direction over time-major x (L, N, in): the outputs (L, N, H) and the last
    state. params: w_ih, w_hh, b_ih, b_hh, w_hr (None where absent)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = params
    x_gates = F.linear(x, w_ih, b_ih)  # every step's input projection in one product
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outputs = [None] * x.shape[0]
    for t in steps:
        if mode == "LSTM":
            h, c = _lstm_step(x_gates[t], h, c, w_hh, b_hh, w_hr)
        elif mode == "GRU":
            h = _gru_step(x_gates[t], h, w_hh, b_hh)
        else:
            h = _rnn_step(x_gates[t], h, w_hh, b_hh, mode == "RNN_RELU")
        outputs[t] = h
    if not outputs:
        raise RuntimeError(f"{mode}: the input sequence is empty (length 0)")
    return _ops.stack(outputs, 0), h, c


def _run_direction_packed(mode, data, sizes, h0, c0, params, reverse):
    """One layer in one direction over packed data (the rows of each time step, batch sizes
    `sizes`, non-increasing): the packed outputs and the last state of every sequence. A
    sequence's state stops changing after its last step (forward), or starts from h0 at its last
    step (reverse)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = params
    x_gates = F.linear(data, w_ih, b_ih)
    starts = [0]
    for b in sizes:
        starts.append(starts[-1] + b)
    steps = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
    outputs = [None] * len(sizes)
    h, c = h0, c0
    active = 0 if reverse else sizes[0]
    for t in steps:
        b = sizes[t]
        if reverse and b > active:  # sequences whose last step is t join from the initial state
            h = _ops.cat([h[:active], h0[active:b]], 0) if active else h0[:b]
            if c is not None:
                c = _ops.cat([c[:active], c0[active:b]], 0) if active else c0[:b]
            active = b
        g = x_gates[starts[t]:starts[t + 1]]
        if mode == "LSTM":
            hb, cb = _lstm_step(g, h[:b], c[:b], w_hh, b_hh, w_hr)
        elif mode == "GRU":
            hb, cb = _gru_step(g, h[:b], w_hh, b_hh), None
        else:
            hb, cb = _rnn_step(g, h[:b], w_hh, b_hh, mode == "RNN_RELU"), None
        outputs[t] = hb
        h = _ops.cat([hb, h[b:]], 0) if b < h.shape[0] else hb
        if c is not None:
            c = _ops.cat([cb, c[b:]], 0) if b < c.shape[0] else cb
    return _ops.cat(outputs, 0), h, c


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        empty = lambda *shape: Parameter(_ops.empty(list(shape), dtype=dtype, device=device))  # noqa: E731
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = "_reverse" if direction == 1 else ""
                params = [("weight_ih", empty(gate_size, layer_input)), ("weight_hh", empty(gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih", empty(gate_size)), ("bias_hh", empty(gate_size))]
                if proj_size > 0:
                    params.append(("weight_hr", empty(proj_size, hidden_size)))
                names = []
                for name, param in params:
                    full = f"{name}_l{layer}{suffix}"
                    setattr(self, full, param)
                    names.append(full)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """Nothing to do: kiln keeps no packed (cuDNN) copy of the weights."""

    @property
    def _flat_weights(self):
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _layer_params(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        if self.bias:
            return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")
        return get("weight_ih"), get("weight_hh"), None, None, get("weight_hr")

    # -- argument checks, torch's messages ---------------------------------------------------
    def _check_input(self, input):
        w = self.weight_ih_l0
        if input.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). Convert input: "
                             f"input.to({w.dtype}), or convert model: model.to({input.dtype})")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _expected_hidden(self, input, size):
        batch = input.shape[0] if self.batch_first else input.shape[1]
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    @staticmethod
    def _check_hidden(hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    def _run(self, input, h0, c0):
        """The stacked layers over batched input; h0 (and c0 for LSTM) (layers*dirs, N, H)."""
        x = input.transpose(0, 1) if self.batch_first else input
        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                k = layer * directions + d
                out, h, c = _run_direction(self.mode, x, h0[k], None if c0 is None else c0[k],
                                           self._layer_params(layer, d), d == 1)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else _ops.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        output = x.transpose(0, 1) if self.batch_first else x
        return output, _ops.stack(h_n, 0), (_ops.stack(c_n, 0) if c0 is not None else None)

    def _run_packed(self, packed, h0, c0):
        """The stacked layers over a PackedSequence; h0 (c0) in the caller's batch order. Returns
        the output PackedSequence and the last states, in the caller's order."""
        from ..utils.rnn import PackedSequence
        sizes = [int(b) for b in packed.batch_sizes.tolist()]
        if not sizes:
            raise RuntimeError(f"{self.mode}: the packed sequence is empty")
        if packed.sorted_indices is not None:
            h0 = h0.index_select(1, packed.sorted_indices)
            c0 = None if c0 is None else c0.index_select(1, packed.sorted_indices)
        x = packed.data
        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                k = layer * directions + d
                out, h, c = _run_direction_packed(self.mode, x, sizes, h0[k], None if c0 is None else c0[k],
                                                  self._layer_params(layer, d), d == 1)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else _ops.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        h_n = _ops.stack(h_n, 0)
        c_n = _ops.stack(c_n, 0) if c0 is not None else None
        if packed.unsorted_indices is not None:
            h_n = h_n.index_select(1, packed.unsorted_indices)
            c_n = None if c_n is None else c_n.index_select(1, packed.unsorted_indices)
        return PackedSequence(x, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices), h_n, c_n

    def _packed_hidden(self, packed, hx, size, what="hx"):
        sizes = packed.batch_sizes.tolist()
        batch = int(sizes[0]) if sizes else 0
        expected = (self.num_layers * (2 if self.bidirectional else 1), batch, size)
        if hx is None:
            return _ops.zeros(list(expected), dtype=packed.data.dtype, device=packed.data.device)
        self._check_hidden(hx, expected, "Expected hidden size {}, got {}" if what == "hx" else
                           f"Expected hidden[{what}] size {{}}, got {{}}")
        return hx

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)


def _is_packed(input):
    return hasattr(input, "batch_sizes") and hasattr(input, "sorted_indices")


def _unbatch_dim(module):
    return 0 if module.batch_first else 1


class RNN(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return _single_state_forward(self, "RNN", input, hx)


class GRU(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return _single_state_forward(self, "GRU", input, hx)


def _single_state_forward(module, name, input, hx):
    """RNN's and GRU's forward: (output, h_n), unbatched in and out where the input is 2-D."""
    if _is_packed(input):
        module._check_input(input.data)
        hx = module._packed_hidden(input, hx, module.hidden_size)
        output, h_n, _ = module._run_packed(input, hx, None)
        return output, h_n
    if input.dim() not in (2, 3):
        raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                         + ("tensor instead" if name == "RNN" else "instead"))
    batched = input.dim() == 3
    if not batched:
        input = input.unsqueeze(_unbatch_dim(module))
    if hx is not None:
        if batched and hx.dim() != 3:
            raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        if not batched and hx.dim() != 2:
            raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
        if not batched:
            hx = hx.unsqueeze(1)
    module._check_input(input)
    expected = module._expected_hidden(input, module.hidden_size)
    if hx is None:
        hx = _ops.zeros(list(expected), dtype=input.dtype, device=input.device)
    module._check_hidden(hx, expected)
    output, h_n, _ = module._run(input, hx, None)
    if not batched:
        output, h_n = output.squeeze(_unbatch_dim(module)), h_n.squeeze(1)
    return output, h_n


class LSTM(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        if _is_packed(input):
            self._check_input(input.data)
            h_size = self.proj_size if self.proj_size > 0 else self.hidden_size
            h0 = self._packed_hidden(input, None if hx is None else hx[0], h_size, "0")
            c0 = self._packed_hidden(input, None if hx is None else hx[1], self.hidden_size, "1")
            output, h_n, c_n = self._run_packed(input, h0, c0)
            return output, (h_n, c_n)
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(_unbatch_dim(self))
        if hx is not None:
            want = 3 if batched else 2
            if hx[0].dim() != want or hx[1].dim() != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got "
                                   f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            if not batched:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self._check_input(input)
        expected_h = self._expected_hidden(input, self.proj_size if self.proj_size > 0 else self.hidden_size)
        expected_c = self._expected_hidden(input, self.hidden_size)
        if hx is None:
            hx = (_ops.zeros(list(expected_h), dtype=input.dtype, device=input.device),
                  _ops.zeros(list(expected_c), dtype=input.dtype, device=input.device))
        self._check_hidden(hx[0], expected_h, "Expected hidden[0] size {}, got {}")
        self._check_hidden(hx[1], expected_c, "Expected hidden[1] size {}, got {}")
        output, h_n, c_n = self._run(input, hx[0], hx[1])
        if not batched:
            output, h_n, c_n = output.squeeze(_unbatch_dim(self)), h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


# -- cells --------------------------------------------------------------------------------------
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        empty = lambda *shape: Parameter(_ops.empty(list(shape), dtype=dtype, device=device))  # noqa: E731
        self.weight_ih = empty(num_chunks * hidden_size, input_size)
        self.weight_hh = empty(num_chunks * hidden_size, hidden_size)
        if bias:
            self.bias_ih = empty(num_chunks * hidden_size)
            self.bias_hh = empty(num_chunks * hidden_size)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check(self, name, input, states):
        """The checks of torch's fused cell kernels (sizes of input and each state)."""
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {input.shape[1]} expected "
                               f"{self.input_size}")
        for i, h in enumerate(states):
            if h.shape[0] != input.shape[0]:
                raise RuntimeError(f"{name}: Input batch size {input.shape[0]} doesn't match hidden{i} batch size "
                                   f"{h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise RuntimeError(f"{name}: hidden{i} has inconsistent hidden_size: got {h.shape[1]}, expected "
                                   f"{self.hidden_size}")

    def _batched(self, name, input, hx):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = _ops.zeros([input.shape[0], self.hidden_size], dtype=input.dtype, device=input.device)
        elif not batched:
            hx = hx.unsqueeze(0)
        return input, hx, batched


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        input, hx, batched = self._batched("RNNCell", input, hx)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        self._check("RNNCell", input, [hx])
        h = _rnn_step(F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh,
                      self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = _ops.zeros([input.shape[0], self.hidden_size], dtype=input.dtype, device=input.device)
            hx = (zeros, zeros)
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        self._check("LSTMCell", input, list(hx))
        h, c = _lstm_step(F.linear(input, self.weight_ih, self.bias_ih), hx[0], hx[1], self.weight_hh,
                          self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        input, hx, batched = self._batched("GRUCell", input, hx)
        self._check("GRUCell", input, [hx])
        h = _gru_step(F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
