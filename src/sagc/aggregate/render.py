"""A table of display strings as Markdown and as LaTeX (booktabs), rendered by hand (docs/aggregation.md)."""

from __future__ import annotations

_TEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "±": r"$\pm$", "→": r"$\rightarrow$", "×": r"$\times$",
}  # fmt: skip


def tex_escape(text: str) -> str:
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text))


def markdown_table(headers: list[str], rows: list[list[str]], notes: list[str] = ()) -> str:
    """A GitHub-flavoured Markdown table, the first 3 columns left-aligned, the rest right."""

    def esc(s: str) -> str:
        return str(s).replace("|", r"\|")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |"]
    lines.append("|" + "|".join(":---" if i < 3 else "---:" for i in range(len(headers))) + "|")
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    if notes:
        lines.append("")
        lines += [f"{n}" for n in notes]
    return "\n".join(lines) + "\n"


def latex_table(headers: list[str], rows: list[list[str]], notes: list[str] = ()) -> str:
    """A booktabs ``tabular`` (to ``\\input`` inside a ``table`` environment)."""
    n = len(headers)
    spec = "l" * min(3, n) + "r" * max(0, n - 3)
    lines = [f"\\begin{{tabular}}{{{spec}}}", r"\toprule"]
    lines.append(" & ".join(tex_escape(h) for h in headers) + r" \\")
    lines.append(r"\midrule")
    lines += [" & ".join(tex_escape(c) for c in row) + r" \\" for row in rows]
    if notes:
        lines.append(r"\midrule")
        lines += [f"\\multicolumn{{{n}}}{{l}}{{\\footnotesize {tex_escape(note)}}} \\\\" for note in notes]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
