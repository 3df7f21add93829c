"""The estimator lab's records as text, CSV, a figure and a JSON file (`jsbench estimators`' outputs).

A record is what `jsbench.analysis.estimators.run_lab` (one policy state) or `run_lab_along` (states along a
training run, under "states") returns.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["lab_table", "lab_csv", "lab_text", "plot_along", "write_lab_record", "CSV_FIELDS", "csv_values", "csv_text"]


def _ci(ci) -> str:
    return "" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}"


def _num(x, fmt=".2f") -> str:
    return "" if x is None else format(x, fmt)


def lab_table(record: dict) -> str:
    """The 80-column table of one lab record: ratios to rloo with their CIs, and the chosen shrinkage."""
    c = record["config"]
    state = "untrained" if not c["policy"] else c["policy"]
    level = round(100 * c["level"])
    lines = [f"{c['backbone']}, {c['steps']} steps, B={c['contexts']}, K={c['samples']}, {state}: "
             f"{c['rollouts']} rollouts, seed {c['seed']}",
             f"ratios to rloo, {level}% paired-bootstrap CI; b-MSE on {c['mean_rollouts']} rollouts, M={c['mean_samples']}",
             f"{'baseline':<10}{'grad var':>9}{'CI':>12}{'grad MSE':>9}{'CI':>12}{'b-MSE':>7}{'CI':>12}{'shrink':>8}",
             "-" * 79]
    for row in record["rows"]:
        lines.append(f"{row['baseline']:<10}{_num(row['grad_var_ratio']):>9}{_ci(row['grad_var_ci']):>12}"
                     f"{_num(row['grad_mse_ratio']):>9}{_ci(row['grad_mse_ci']):>12}"
                     f"{_num(row['baseline_mse_ratio']):>7}{_ci(row['baseline_mse_ci']):>12}{_num(row['shrinkage']):>8}")
    lines.append(f"mean reward {record['reward_mean']:.3f}; {record['seconds']:.0f} s")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["baseline", "grad_var_ratio", "grad_var_ci_lo", "grad_var_ci_hi", "grad_mse_ratio", "grad_mse_ci_lo",
              "grad_mse_ci_hi", "baseline_mse_ratio", "baseline_mse_ci_lo", "baseline_mse_ci_hi", "shrinkage",
              "shrinkage_sd", "grad_var", "grad_mse", "baseline_mse"]


def csv_values(row: dict) -> list:
    out = []
    for f in CSV_FIELDS:
        key, _, end = f.rpartition("_ci_")
        if end in ("lo", "hi") and key:
            ci = row.get(f"{key}_ci")
            out.append(None if ci is None else ci[0 if end == "lo" else 1])
        else:
            out.append(row.get(f))
    return out


def csv_text(header: list[str], lines: list[list]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for line in lines:
        w.writerow(["" if v is None else (format(v, ".6g") if isinstance(v, float) else v) for v in line])
    return buf.getvalue()


def lab_csv(record: dict) -> str:
    """Every row of a lab record (one block per measured update when measured along a run), values exact to 6 digits."""
    states = record.get("states") or [record]
    lead = ["update"] if "states" in record else []
    lines = [([s["update"]] if lead else []) + csv_values(row) for s in states for row in s["rows"]]
    return csv_text(lead + CSV_FIELDS, lines)


def lab_text(record: dict) -> str:
    """The terminal form: one table per measured state."""
    if "states" not in record:
        return lab_table(record)
    parts = [f"along {record['run']} (replayed; matches its saved policy: {record['replay_matches_policy']})\n"]
    for state in record["states"]:
        parts.append(f"\nafter {state['update']} updates\n" + lab_table(state))
    return "".join(parts)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.family": "DejaVu Sans", "svg.hashsalt": "jsbench", "path.simplify": False})
    return plt


def plot_along(record: dict, path: Path) -> Path:
    """Each ratio to rloo with its CI against updates, one panel per measure; PNG without dates or versions."""
    from jsbench.io import replacing

    plt = _pyplot()
    states = record["states"]
    names = [row["baseline"] for row in states[0]["rows"]]
    x = [s["update"] for s in states]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharex=True)
    for ax, (key, title) in zip(axes, (("grad_var", "tr Cov(g) / rloo"), ("grad_mse", "gradient MSE / rloo"),
                                      ("baseline_mse", "baseline MSE / rloo"))):
        for name in names:
            rows = [next(r for r in s["rows"] if r["baseline"] == name) for s in states]
            if any(r[f"{key}_ratio"] is None for r in rows):
                continue
            y = [r[f"{key}_ratio"] for r in rows]
            line, = ax.plot(x, y, marker="o", ms=3, lw=1.2, label=name)
            ax.fill_between(x, [r[f"{key}_ci"][0] for r in rows], [r[f"{key}_ci"][1] for r in rows], color=line.get_color(), alpha=0.15, lw=0)
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("updates")
        ax.grid(alpha=0.3, lw=0.4)
    axes[0].legend(fontsize=7)
    c = record["config"]
    fig.suptitle(f"{c['backbone']}, {c['steps']} steps, B={c['contexts']}, K={c['samples']}, {c['rollouts']} rollouts per point "
                 f"({round(100 * c['level'])}% CI)", fontsize=9)
    fig.tight_layout()
    with replacing(path, ".tmp.png") as tmp:
        fig.savefig(tmp, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def write_lab_record(record: dict, out: str | Path) -> list[Path]:
    """The record as JSON at `out`, and for a run measured along training its figure beside it (.png)."""
    import json

    from jsbench.io import write_text_atomic

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(record, indent=1, sort_keys=True) + "\n")
    written = [out]
    if "states" in record:
        written.append(plot_along(record, out.with_suffix(".png")))
    return written
