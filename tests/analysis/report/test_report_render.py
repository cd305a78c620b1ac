"""Markdown and HTML of the report's blocks (``analysis.report.render``): one content, every value escaped for
its format, the HTML self-contained."""

from __future__ import annotations

from report_folder import EVIL, analysis_folder

from analysis import report
from analysis.report import Bullets, Heading, Image, Paragraph, Table, render_html, render_markdown


def test_every_value_is_escaped(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    md, page = (p.read_text() for p in report.write_report(folder))
    assert EVIL not in page and EVIL not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert page.count("<script") == 0 and "<style>" in page  # inline CSS, nothing else active


def test_markdown_of_each_kind_of_block() -> None:
    blocks = [Heading("A *title*", 1), Paragraph("warning", strong=True), Paragraph("two\nlines"),
              Bullets(["a_b", "c|d"]), Table(["x", "y"], [["1", "<b>"]]),
              Image("figures/my fig.png", "Caption [1]", "figures/my fig.pdf"), Image("f.png", "no pdf")]
    assert render_markdown(blocks) == (
        "# A \\*title\\*\n\n**warning**\n\ntwo lines\n\n- a\\_b\n- c\\|d\n\n| x | y |\n|---|---|\n| 1 | &lt;b&gt; |"
        "\n\n![Caption \\[1\\]](figures/my%20fig.png)\n\n*Caption \\[1\\]* ([PDF](figures/my%20fig.pdf))"
        "\n\n![no pdf](f.png)\n\n*no pdf*\n")


def test_html_of_each_kind_of_block_in_a_self_contained_page() -> None:
    blocks = [Heading("Results", 2), Paragraph("warning", strong=True), Paragraph("a & b"), Bullets(["x"]),
              Table(["x"], [["<i>"]]), Image("figures/a b.png", 'say "hi"', "figures/a b.pdf")]
    page = render_html(blocks, "report <1>")
    assert page.startswith('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
                           "<title>report &lt;1&gt;</title>\n<style>")
    assert page.endswith("</body>\n</html>\n")
    assert "<h2>Results</h2>\n<p class=\"strong\">warning</p>\n<p>a &amp; b</p>\n<ul>\n<li>x</li>\n</ul>" in page
    assert ("<table>\n<thead><tr><th>x</th></tr></thead>\n<tbody>\n<tr><td>&lt;i&gt;</td></tr>\n</tbody>\n"
            "</table>") in page
    assert ('<figure><img src="figures/a%20b.png" alt="say &quot;hi&quot;"><figcaption>say &quot;hi&quot; '
            '(<a href="figures/a%20b.pdf">PDF</a>)</figcaption></figure>') in page
    assert "<script" not in page and "http" not in page  # nothing fetched from elsewhere
