"""The benchmark report: summary ratios (geomeans), the markdown tables and the PNG plots of a run
(bench/run.py's results dict)."""
import math
import os

PEER_TITLES = {"kiln_eager": "kiln eager", "kiln_compiled": "kiln compiled", "torch_eager": "torch eager",
               "torch_compile": "torch.compile", "jax_jit": "jax.jit"}
# (numerator, denominator): time ratios, below 1 means the numerator is faster.
RATIOS = [("kiln_eager", "torch_eager"), ("kiln_compiled", "torch_compile"), ("kiln_compiled", "torch_eager"),
          ("kiln_compiled", "kiln_eager"), ("kiln_eager", "jax_jit"), ("kiln_compiled", "jax_jit"),
          ("torch_compile", "torch_eager")]


def _ok(row, peer):
    r = row.get("peers", {}).get(peer)
    return r if r and r.get("status") == "ok" else None


def ratio(row, num, den):
    a, b = _ok(row, num), _ok(row, den)
    return a["median_s"] / b["median_s"] if a and b else None


def summary(results):
    """Geomean of each time ratio over the workload sizes where both peers ran correctly, the
    STREAM triad GB/s, and counts of ok / failed / skipped per peer."""
    rows = results.get("workloads", [])
    out = {"ratios": [], "peers": {}}
    for num, den in RATIOS:
        vals = [v for row in rows if (v := ratio(row, num, den)) is not None]
        out["ratios"].append({"num": num, "den": den, "count": len(vals),
                              "geomean": math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None,
                              "min": min(vals) if vals else None, "max": max(vals) if vals else None})
    for peer in results.get("peers", []):
        counts = {"ok": 0, "failed": 0, "skipped": 0}
        for row in rows:
            status = row.get("peers", {}).get(peer, {}).get("status")
            counts[status if status in counts else "failed"] += 1
        out["peers"][peer] = counts
    out["stream_triad_GBps"] = results.get("stream", {}).get("triad")
    return out


def _fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def _fmt_bytes(b):
    if b is None:
        return "-"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(b) >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{b} B"


def _cell(row, peer):
    r = row.get("peers", {}).get(peer)
    if r is None:
        return "-"
    if r["status"] != "ok":
        return r["status"]
    spread = (r["p75_s"] - r["p25_s"]) / 2 / r["median_s"] * 100
    return f"{_fmt_time(r['median_s'])} ±{spread:.0f}%"


def gbps(row, peer):
    r = _ok(row, peer)
    return row["bytes"] / r["median_s"] / 1e9 if r and row.get("bytes") else None


def _ratio_cell(v):
    return "-" if v is None else f"{v:.2f}"


def dynamic_lines(dy):
    """The "Dynamic shapes" section (bench/dynamic_shapes.py's results), or nothing."""
    if not dy:
        return []
    lines = ["## Dynamic shapes", "", "bench/dynamic_shapes.py: graphs compiled by `kiln.compile` (default "
             "dynamic=None) over changing sizes, and symbolic against static code at one size "
             "(median; target: ratio <= 1.15).", ""]
    if "error" in dy:
        return lines + [f"failed: {dy['error']}", ""]
    lines += ["| program | compiles | calls | total s |", "|---|---:|---:|---:|"]
    for key in ("dynamic_batch", "gpt_block_seq_8_to_64"):
        if key in dy:
            r = dy[key]
            lines.append(f"| {key} | {r['compiles']} | {r['calls']} | {r['total_s']:.2f} |")
    lines += ["", "| kernel | sizes | symbolic ms | static ms | ratio |", "|---|---|---:|---:|---:|"]
    for name, r in dy.get("kernels", {}).items():
        lines.append(f"| {name} | {r['sizes']} | {r['symbolic_ms']:.3f} | {r['static_ms']:.3f} | {r['ratio']:.3f} |")
    return lines + [""]


def training_lines(tr):
    """The "Training steps" section (bench/training_steps.py's results), or nothing."""
    lines = []
    if not tr:
        return lines
    lines += ["## Training steps", "", "bench/training_steps.py: forward, loss, backward and optimizer step "
              "(median ms per step; compiled: `kiln.compile` / `torch.compile` of the forward and loss, "
              "backward compiled by AOT autograd, first step cold; kiln-step: the whole step function "
              "compiled, optimizer step included), and the peak resident memory of a "
              "process that only trains that model.", ""]
    if "error" in tr:
        lines.append(f"failed: {tr['error']}")
    else:
        libs = ("kiln", "kiln-compiled", "torch", "torch-compiled", "kiln-step")
        lines += ["| model | " + " | ".join(f"{lib} ms/step" for lib in libs) +
                  " | kiln-compiled / torch-compiled | kiln-compiled first step ms | torch-compiled first step ms | "
                  + " | ".join(f"{lib} peak MB" for lib in libs) + " |",
                  "|---|" + "---:|" * (len(libs) * 2 + 3)]

        def cell(r, key, fmt):
            return format(r[key], fmt) if r else "-"

        for model in ("mlp", "cnn", "gpt"):
            rs = [tr.get(f"{model}/{lib}") for lib in libs]
            if not any(rs):
                continue
            kc, tc = rs[1], rs[3]
            rel = f"{kc['ms'] / tc['ms']:.2f}" if kc and tc else "-"
            lines.append(f"| {model} | " + " | ".join(cell(r, "ms", ".2f") for r in rs) + f" | {rel} | "
                         f"{cell(kc, 'first_step_ms', '.0f')} | {cell(tc, 'first_step_ms', '.0f')} | "
                         + " | ".join(cell(r, "peak_mb", ".0f") for r in rs) + " |")
        for lib in ("kiln", "torch"):
            o = tr.get(f"overhead/{lib}")
            if o:
                lines.append(f"\nautograd overhead, {lib}: `x * y` (one element, requires grad) forward "
                             f"{o['forward_us']:.2f} us, forward + backward {o['forward_backward_us']:.2f} us")
    lines.append("")
    return lines


def markdown(results, plots):
    m, st, s = results["machine"], results.get("stream", {}), results["summary"]
    peers = results["peers"]
    lines = [f"# kiln benchmarks ({results['mode']} run, {results['timestamp']})", ""]
    lines += ["## Summary: time ratios (geomean over workload sizes where both ran correctly; < 1: "
              "the first is faster)", "", "| ratio | geomean | min | max | workloads |", "|---|---:|---:|---:|---:|"]
    for r in s["ratios"]:
        if r["count"]:
            lines.append(f"| {PEER_TITLES[r['num']]} / {PEER_TITLES[r['den']]} | **{r['geomean']:.2f}** | "
                         f"{r['min']:.2f} | {r['max']:.2f} | {r['count']} |")
        else:
            lines.append(f"| {PEER_TITLES[r['num']]} / {PEER_TITLES[r['den']]} | - | - | - | 0 |")
    lines += ["", "Peers: " + "; ".join(
        f"{PEER_TITLES[p]}: {c['ok']} ok, {c['failed']} failed, {c['skipped']} skipped" for p, c in s["peers"].items()), ""]

    lines += ["## Machine", ""]
    lines.append(f"- CPU: {m['cpu']}; {m['physical_cores']} physical cores, nproc {m['nproc']}, "
                 f"OMP_NUM_THREADS={m['omp_num_threads'] or 'unset'}, {_fmt_bytes(m['memory_bytes'])} RAM, "
                 f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}")
    if "error" in st:
        lines.append(f"- STREAM: failed: {st['error']}")
    else:
        lines.append(f"- STREAM (best of {st['reps']}, {st['threads']} threads, 3 x {_fmt_bytes(st['array_bytes'])} "
                     f"arrays, LLC {_fmt_bytes(st['llc_bytes'])}): copy {st['copy']:.1f}, scale {st['scale']:.1f}, "
                     f"add {st['add']:.1f}, triad **{st['triad']:.1f} GB/s**")
    lines.append(f"- Versions: python {m['python']}, numpy {m['numpy']}, torch {m['torch']}, "
                 f"jax {m['jax'] or 'not installed'}, jaxlib {m['jaxlib'] or 'not installed'}, kiln {m['kiln']} ({m['kiln_commit']}), "
                 f"matplotlib {m['matplotlib'] or 'not installed'}; cc: {m['cc']}; c++: {m['cxx']}")
    lines.append(f"- Wall time of the run: {results['wall_s']:.0f} s")
    lines.append("")

    lines += ["## Workloads", "",
              "Median time per call after warm-up, ± half the interquartile range (percent of the median). "
              "Correctness is checked against PyTorch eager before timing: `failed` means an exception or a "
              "result that differs (reasons below), and is not timed. GB/s: bytes of the inputs and outputs "
              "(the compulsory traffic) per call of kiln compiled, and its percent of STREAM triad (meaningful "
              "for the memory-bound sizes; cache-resident data can exceed STREAM). Peak: "
              "growth of the process's resident set (VmHWM) over two steady-state calls of kiln compiled / "
              "torch.compile, after freed memory went back to the OS.", ""]
    head = ["workload", "size"] + [PEER_TITLES[p] for p in peers] + [
        "kiln eager / torch eager", "kiln compiled / torch.compile", "kiln compiled GB/s (% STREAM)", "peak RSS kiln c. / torch c."]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    triad = st.get("triad")
    failures = []
    for row in results["workloads"]:
        cells = [row["workload"], row["size"]]
        if "error" in row or "reference_error" in row:
            cells += ["error"] * len(peers) + ["-"] * 4
            failures.append((row["workload"], row["size"], "all", row.get("error") or row.get("reference_error")))
        else:
            cells += [_cell(row, p) for p in peers]
            cells.append(_ratio_cell(ratio(row, "kiln_eager", "torch_eager")))
            cells.append(_ratio_cell(ratio(row, "kiln_compiled", "torch_compile")))
            g = gbps(row, "kiln_compiled")
            cells.append("-" if g is None else f"{g:.2f} ({g / triad * 100:.0f}%)" if triad else f"{g:.2f}")
            kc, tc = _ok(row, "kiln_compiled"), _ok(row, "torch_compile")
            cells.append(f"{_fmt_bytes(kc['peak_rss_bytes']) if kc else '-'} / {_fmt_bytes(tc['peak_rss_bytes']) if tc else '-'}")
            for p in peers:
                r = row["peers"].get(p, {})
                if r.get("status") in ("failed", "skipped"):
                    failures.append((row["workload"], row["size"], p, f"{r['status']}: {r['reason']}"))
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")

    lines += ["## Overheads", ""]
    ov = results.get("overheads", {})
    if "error" in ov:
        lines.append(f"failed: {ov['error']}")
    else:
        lines += ["| | kiln | torch | numpy |", "|---|---:|---:|---:|"]
        e = ov["eager_per_op"]
        lines.append("| eager `x + y`, 1 element (us/op) | " + " | ".join(
            f"{e[lib]['add_1elem_us']:.2f}" if lib in e else "-" for lib in ("kiln", "torch", "numpy")) + " |")
        c = ov["compiled_per_call"]
        for key, title in (("fn_us", "`fn(x)` = `x + 1`, uncompiled (us/call)"),
                           ("compiled_us", "the same, compiled, inductor backend (us/call)"),
                           ("overhead_us", "compiled minus uncompiled (us/call; below 0: the compiled call beats "
                            "the eager op it replaces)")):
            lines.append(f"| {title} | " + " | ".join(
                f"{c[lib][key]:.2f}" if lib in c and key in c[lib] else "-" for lib in ("kiln", "torch")) + " | - |")
        b = ov.get("graph_break_per_call", {})
        for key, title in (("fn_us", "`fn(x)` with one graph break, uncompiled (us/call)"),
                           ("compiled_us", "the same, compiled: 2 graphs + resume function, eager backend (us/call)"),
                           ("overhead_us", "graph break: compiled minus uncompiled (us/call; target <= 3)")):
            lines.append(f"| {title} | " + " | ".join(
                f"{b[lib][key]:.2f}" if lib in b and key in b[lib] else "-" for lib in ("kiln", "torch")) + " | - |")
    lines.append("")

    lines += training_lines(results.get("training"))
    lines += dynamic_lines(results.get("dynamic_shapes"))

    lines += ["## Compile latency", "", "First call of the compiled function in a fresh process (it compiles): cold = "
              "empty cache folder (KILN_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR), warm = a second fresh process on the "
              "filled folder. Import time is not included (shown apart).", "",
              "| workload | size | library | cold first call | warm first call | second call | import | max RSS (cold) |",
              "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results.get("compile_latency", []):
        cold, warm = r["cold"], r["warm"]
        if "error" in cold or "error" in warm:
            lines.append(f"| {r['workload']} | {r['size']} | {r['lib']} | failed | | | | |")
            failures.append((r["workload"], r["size"], f"{r['lib']} compile latency", cold.get("error") or warm.get("error")))
            continue
        lines.append(f"| {r['workload']} | {r['size']} | {r['lib']} | {_fmt_time(cold['first_call_s'])} | "
                     f"{_fmt_time(warm['first_call_s'])} | {_fmt_time(warm['second_call_s'])} | "
                     f"{_fmt_time(cold['import_s'])} | {_fmt_bytes(cold['maxrss_bytes'])} |")
    lines.append("")

    scale = results.get("compile_scale")
    if scale is not None:
        lines += ["## Compile time against graph size", "",
                  "bench/compile_scale.py: the first call of a compiled function of N pointwise ops on a "
                  "64x64 float32 tensor (a chain, and a wide DAG of independent branches summed pairwise), "
                  "cold cache, a fresh process per point; seconds per phase (phases do not overlap), the "
                  "number of kernels and the size of the C++ source. The result is checked against eager.", ""]
        if "error" in scale:
            lines.append(f"failed: {scale['error']}")
            failures.append(("compile_scale", "-", "kiln_compiled", scale["error"]))
        else:
            from compile_scale import markdown as scale_markdown

            lines.append(scale_markdown(scale))
        lines.append("")

    if failures:
        lines += ["## Failed and skipped", ""]
        for w, size, peer, why in failures:
            first_line = str(why).strip().splitlines()[0] if why else ""
            lines.append(f"- {w} {size}, {PEER_TITLES.get(peer, peer)}: {first_line[:300]}")
        lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    else:
        lines += ["(no plots: matplotlib is not installed)", ""]
    return "\n".join(lines)


def plots(results, out_dir):
    """PNG files written into out_dir (their names); none when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = [r for r in results["workloads"] if "peers" in r and "error" not in r]
    labels = [f"{r['workload']}\n{r['size']}" for r in rows]
    written = []

    # Speed-up over PyTorch eager of every peer, per workload size (log scale).
    peers = [p for p in results["peers"] if p != "torch_eager"]
    if rows:
        fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.55), 5))
        width = 0.8 / max(1, len(peers))
        for i, p in enumerate(peers):
            ys = [1 / v if (v := ratio(r, p, "torch_eager")) else 0 for r in rows]
            ax.bar([x + i * width for x in range(len(rows))], ys, width, label=PEER_TITLES[p])
        ax.axhline(1, color="black", lw=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("speed-up over torch eager (higher is faster)")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))], labels, rotation=90, fontsize=7)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "speedup.png"), dpi=110)
        plt.close(fig)
        written.append("speedup.png")

    # Achieved GB/s against STREAM triad.
    triad = results.get("stream", {}).get("triad")
    bw_peers = [p for p in results["peers"] if p != "jax_jit" or any(_ok(r, p) for r in rows)]
    if rows and triad:
        fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.55), 5))
        width = 0.8 / max(1, len(bw_peers))
        for i, p in enumerate(bw_peers):
            ax.bar([x + i * width for x in range(len(rows))], [gbps(r, p) or 0 for r in rows], width,
                   label=PEER_TITLES[p])
        ax.axhline(triad, color="red", lw=1, ls="--", label=f"STREAM triad {triad:.1f} GB/s")
        ax.set_ylabel("GB/s (input + output bytes per call)")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))], labels, rotation=90, fontsize=7)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "bandwidth.png"), dpi=110)
        plt.close(fig)
        written.append("bandwidth.png")

    # Cold and warm compile latency.
    lat = [r for r in results.get("compile_latency", []) if "error" not in r["cold"] and "error" not in r["warm"]]
    if lat:
        fig, ax = plt.subplots(figsize=(max(6, len(lat) * 1.2), 4))
        xs = range(len(lat))
        ax.bar([x - 0.2 for x in xs], [r["cold"]["first_call_s"] for r in lat], 0.4, label="cold cache")
        ax.bar([x + 0.2 for x in xs], [r["warm"]["first_call_s"] for r in lat], 0.4, label="warm cache")
        ax.set_xticks(list(xs), [f"{r['lib']}\n{r['workload']} {r['size']}" for r in lat], fontsize=7)
        ax.set_ylabel("first call (s)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "compile_latency.png"), dpi=110)
        plt.close(fig)
        written.append("compile_latency.png")
    # Compile time against graph size (drawn by bench/compile_scale.py).
    if results.get("compile_scale", {}).get("plot"):
        written.append(results["compile_scale"]["plot"])
    return written
