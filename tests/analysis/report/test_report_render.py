"""Markdown and HTML of the report's blocks (``analysis.report.render``): one content, every value escaped for
its format (the Markdown without HTML entities: a backslash where a character would become markup), folded
sections, the HTML self-contained."""

from __future__ import annotations

from report_folder import EVIL, analysis_folder

from analysis import report
from analysis.report import Bullets, Folded, Heading, Image, Paragraph, Table, render_html, render_markdown


def test_every_value_is_escaped(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    md, page = (p.read_text() for p in report.write_report(folder))
    assert EVIL not in page and EVIL not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\<script>alert(1)\\</script>" in md and "&lt;" not in md  # no tag, and no entity either
    assert page.count("<script") == 0 and "<style>" in page  # inline CSS, nothing else active


def test_markdown_of_each_kind_of_block() -> None:
    blocks = [Heading("A *title*", 1), Paragraph("warning", strong=True), Paragraph("two\nlines"),
              Bullets(["a_b", "c|d"]), Table(["x", "y"], [["1", "<b>"]]),
              Image("figures/my fig.png", "Caption [1]", "figures/my fig.pdf"), Image("f.png", "no pdf")]
    assert render_markdown(blocks) == (
        "# A \\*title\\*\n\n**warning**\n\ntwo lines\n\n- a_b\n- c\\|d\n\n| x | y |\n|---|---|\n| 1 | \\<b> |"
        "\n\n![Caption [1]](figures/my%20fig.png)\n\n*Caption [1]* ([PDF](figures/my%20fig.pdf))"
        "\n\n![no pdf](f.png)\n\n*no pdf*\n")


def test_markdown_text_reads_as_written_and_only_what_would_be_markup_is_escaped() -> None:
    def md(text: str) -> str:
        return render_markdown([Paragraph(text)]).rstrip("\n")

    assert md("a < b, c > d, p <= 0.05 & q") == "a < b, c > d, p <= 0.05 & q"  # no entities
    assert md("sg.all_34, p'_t, _emphasis_") == "sg.all_34, p'\\_t, \\_emphasis\\_"  # intraword _ is text
    assert md("<b>, </i>, <!-- x -->, &amp;, &#60;") == "\\<b>, \\</i>, \\<!-- x -->, \\&amp;, \\&#60;"
    assert md("CI [9064, 9777] and [a](b) and [x]: y") == "CI [9064, 9777] and [a\\](b) and [x]: y"
    assert md("[x]: y") == "\\[x]: y" and md("> quote") == "\\> quote" and md("a > b") == "a > b"
    assert md("*a* `b` #c |d| \\e") == "\\*a\\* \\`b\\` #c \\|d\\| \\\\e" and md("# x") == "\\# x"


def test_a_folded_section_is_a_heading_and_its_brief_in_markdown_and_details_in_html() -> None:
    blocks = [Folded("Welch tests", [Paragraph("all of them"), Table(["p"], [["0.1\n[0, 1]"]])],
                     brief=[Paragraph("the significant ones")]),
              Folded("Setup", [Bullets(["seeds: 3"])])]
    assert render_markdown(blocks) == ("## Welch tests\n\nthe significant ones\n\n## Setup\n\n- seeds: 3\n")
    page = render_html(blocks, "r")
    assert ("<details>\n<summary><h2>Welch tests</h2></summary>\n<p>all of them</p>\n<table>\n<thead><tr><th>p</th>"
            "</tr></thead>\n<tbody>\n<tr><td>0.1<br>[0, 1]</td></tr>\n</tbody>\n</table>\n</details>") in page
    assert "the significant ones" not in page and '<details>\n<summary><h2>Setup</h2></summary>' in page
    assert '<table class="compact">' in render_html([Table(["a"], [["1"]], compact=True)], "r")


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
