"""What the model reads: realistic pages and the rendering details they exposed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from django_webfetch.text import fence
from tests.text.plain import extract_text

PAGES = Path(__file__).parent / "pages"


def page(name: str, url: str) -> str:
    return extract_text(
        (PAGES / name).read_bytes(), "text/html", url=url, mode="page", time_limit=60.0
    )


def urls(text: str) -> int:
    """Characters spent on `` (url)`` suffixes."""
    return sum(len(match) for match in re.findall(r" \((?:https?|mailto):[^)]*\)", text))


@pytest.mark.parametrize(
    "name",
    [
        "news_article.html",
        "wiki_ada.html",
        "sphinx_sessions.html",
        "product.html",
        "github_readme.html",
        "shift_jis.html",
    ],
)
def test_realistic_pages_are_20_to_120_kib(name):
    assert 20 * 1024 <= len((PAGES / name).read_bytes()) <= 120 * 1024


# -- pages ------------------------------------------------------------------------------------


def test_news_article():
    text = page("news_article.html", "https://news.example/2025/05/grid")
    assert text.startswith(
        "Grid operator to spend £4.2bn on new power lines | The Example Post\n\n"
        "Skip to main content\n"
        "Live Election results: follow live (https://news.example/live/election)\n"
    )
    assert "# Grid operator to spend £4.2bn on new power lines\n\nFive-year plan" in text
    assert (
        "spend £4.2 billion over the next five years on new transmission lines, the largest"
        " single investment since the network was nationalised in 1948"
        " (https://news.example/2019/01/grid-history)." in text
    )
    assert "“We are connecting tomorrow’s generation to yesterday’s wires,” said Priya" in text
    assert "Key figures\nInvestment: £4.2bn\nNew cable: 1,100 km\nStart: 2026" in text
    assert "This article was amended on 15 May 2025" in text
    # Cookie dialog (role="dialog"), site header and footer, nav, rails, newsletter form.
    for chrome in ("847 partners", "I Accept", "Subscribe", "Most read", "All rights", "Copy link"):
        assert chrome not in text, chrome
    # A same-page link ("#main-content") is text only.
    assert "#main-content" not in text


def test_wikipedia_article_fits_and_footnotes_stay_short():
    text = page("wiki_ada.html", "https://en.wikipedia.org/wiki/Ada_Lovelace")
    # Before: 65% of the 20,000 characters were URLs and the text stopped in "Work".
    assert len(text) < 20_000
    assert urls(text) < len(text) // 4
    assert "## Legacy" in text and "### In popular culture" in text
    assert (
        "the Analytical Engine (https://en.wikipedia.org/wiki/Analytical_Engine).[1][2] She was"
        in text
    )
    # The second link to an article shows no URL again; footnote links are text only.
    assert "Lovelace worked with Charles Babbage on the Analytical Engine, and" in text
    assert "#cite_note" not in text and "Jump to content\n" in text
    # display:none (short description, hidden dates) and role="navigation" (navbox) are gone.
    assert "English mathematician (1815" not in text and "(1815-12-10)" not in text
    assert "navbox" not in text
    # Infobox rows stay rows; references are numbered like their [n] markers.
    assert "Born | Augusta Ada Byron\n10 December 1815\nLondon, England\nDied |" in text
    assert "Known for |\n- Mathematics\n- Computing\nSpouse |" in text
    assert (
        "Number of operation | Nature of operation | Variables acted upon | Result\n"
        "1 | × | 1V2 × 1V3 | 2n\n" in text
    )
    assert "\n25. ^ Toole, Betty Alexandra (1998)." in text


def test_sphinx_docs_page():
    text = page(
        "sphinx_sessions.html", "https://httpkit.readthedocs.io/en/latest/user/sessions.html"
    )
    # The breadcrumbs (role="navigation") and the toctree sidebar (nav) are dropped.
    assert text.startswith(
        "Sessions — httpkit 2.32.0 documentation\n\n# Sessions\n\n"
        "The Session (https://httpkit.readthedocs.io/en/latest/api.html#httpkit.Session) object"
    )
    assert "¶" not in text and "Installation" not in text and "Search docs" not in text
    assert (
        ">>> s.headers.update({'x-test': 'true'})\n\n>>> # both 'x-test' and 'x-test2' are sent\n"
        in text
    )
    assert (
        "1. Create a Session.\n\n2. Mount an adapter with max_retries:\n\n"
        "def retry(session, attempts=3):\n    for attempt in range(attempts):\n" in text
    )
    # Cells wrapped in <p> (every Sphinx table) stay on their row.
    assert (
        "Session attributes\nAttribute | Meaning\n"
        "headers | A case-insensitive dictionary of headers sent with every request.\n"
        "auth | Default authentication tuple.\n\nMay also be a callable.\n"
        "verify | True by default.\n\n## API reference" in text
    )
    assert "See API reference below." in text
    assert "Previous" not in text and "Copyright" not in text


def test_product_page():
    text = page("product.html", "https://shop.example/p/tb40?colour=green")
    # The breadcrumb list (class="breadcrumb") is navigation, pruned before the parser.
    assert "1. Home (https://shop.example/)" not in text
    assert "# Trailblazer 40L Hiking Backpack\n\n★★★★☆ 212 reviews\n" in text
    assert "Volume | 40 l\nWeight | 1.35 kg\nDimensions | 65 × 32 × 24 cm\n" in text
    assert "Warranty\nLifetime, see https://shop.example/warranty.\n" in text
    assert "5 star (https://shop.example/p/tb40?stars=5#reviews) | | 62%\n" in text
    # A link around blocks (a product card) puts its URL after the card's last line.
    assert "Similar pack 3\n€82,95 (https://shop.example/p/item-3)\nSimilar pack 4" in text
    for chrome in ("@context", "INITIAL_STATE", "Add to cart", "We use cookies", "Impressum"):
        assert chrome not in text, chrome


def test_github_readme():
    text = page("github_readme.html", "https://github.com/octo/fastgrep")
    assert "\n## README\n\n# fastgrep\n\n" in text
    assert (
        "The binary name is fg. See INSTALL.md"
        " (https://github.com/octo/fastgrep/blob/main/INSTALL.md) or the install guide"
        " (https://github.com/octo/docs/install.md) for details." in text
    )
    assert (
        "- Cargo (needs Rust 1.74+):\n  - cargo install fastgrep\n"
        "  - or from source: cargo build --release\n"
        "- Debian/Ubuntu: download the .deb from the releases page"
        " (https://github.com/octo/fastgrep/releases)\n\n"
        "1. Clone the repository.\n2. Run make.\n" in text
    )
    assert (
        "Tool | Command | Line count | Time\n"
        "fastgrep | fg -n -w '[A-Z]+_SUSPEND' | 450 | 0.106s\n" in text
    )
    assert (
        "$ fg --flag-0 'fn main' src/\nsrc/main.rs:1:fn main() {\n"
        "src/lib.rs:42:    // fn main is not here\n" in text
    )
    assert (
        "See Installation above, https://github.com/octo/fastgrep/blob/main/CHANGELOG.md,"
        " or docs.example/fastgrep." in text
    )
    for chrome in ("Pricing", "Sign in", "Terms", "Dismiss", "Global"):
        assert chrome not in text, chrome


def test_shift_jis_declared_in_a_meta_tag():
    text = page("shift_jis.html", "https://www.tokyo-shimpo.example/news/2025/0515/bousai.html")
    assert text.startswith("防災計画を発表 – 東京新報\n\n")
    assert "\ufffd" not in text
    # cp932 (what browsers call Shift_JIS): circled digits, wave dash, 髙.
    assert "専門家は①耐震化の加速、②備蓄の拡充、③情報伝達の多様化――の三点" in text
    assert "約３５０億円～４００億円" in text and "髙橋氏" in text
    assert '新宿区 | １２０ | "拡充" & 点検\n港区 | ８５ | <予定>' in text
    assert "価格：¥1,000（税込） ／ ①② … «引用» ★" in text
    assert (
        "過去の記事 (https://www.tokyo-shimpo.example/news/2025/archive/2025.html)"
        " | 閉じる | データ" in text
    )
    # A layout table: the content cell starts its heading on a new paragraph.
    assert "スポーツ (https://www.tokyo-shimpo.example/sports/) |\n# 都、新防災計画を発表" in text
    fenced = fence(text, source_url="https://www.tokyo-shimpo.example/", status_line="HTTP 200")
    assert len(fenced.encode()) < 48_000


# -- the same pages in the main-content mode (the default) ----------------------------------


def main_text(name: str, url: str) -> str:
    return extract_text((PAGES / name).read_bytes(), "text/html", url=url, time_limit=60.0)


def test_main_content_of_the_realistic_pages():
    text = main_text("news_article.html", "https://news.example/2025/05/grid")
    assert text.startswith(
        # The <title> repeats the headline: the headline leads.
        "# Grid operator to spend £4.2bn on new power lines\n\nFive-year plan aims"
    )
    assert "the largest single investment since the network was nationalised in 1948." in text
    assert text.endswith(
        "This article was amended on 15 May 2025 to correct the length of the planned line."
    )
    for chrome in ("Skip to main content", "Live", "Most read", "Subscribe", "847 partners"):
        assert chrome not in text, chrome

    text = main_text("wiki_ada.html", "https://en.wikipedia.org/wiki/Ada_Lovelace")
    assert text.startswith("# Ada Lovelace\n\n")
    assert "Jump to content" not in text and "Main page" not in text
    assert "the Analytical Engine.[1][2] She was" in text  # links within the site: text only
    assert "Ada, the Enchantress of Numbers (https://archive.org/details/" in text  # elsewhere

    text = main_text(
        "sphinx_sessions.html", "https://httpkit.readthedocs.io/en/latest/user/sessions.html"
    )
    assert text.startswith("# Sessions\n\n")
    assert "Return type:\n\nhttpkit.Response" in text
    assert "Previous" not in text and "Search docs" not in text

    text = main_text("product.html", "https://shop.example/p/tb40?colour=green")
    assert "# Trailblazer 40L Hiking Backpack" in text
    assert "Volume | 40 l\nWeight | 1.35 kg" in text
    for chrome in ("Similar pack", "Home", "Add to cart", "We use cookies", "Impressum"):
        assert chrome not in text, chrome

    text = main_text("github_readme.html", "https://github.com/octo/fastgrep")
    assert text.startswith("GitHub - octo/fastgrep: A fast grep written in Rust\n\n# fastgrep\n\n")
    assert "Pricing" not in text and "Sign in" not in text


# -- rendering details ------------------------------------------------------------------------

URL = "https://e.example/dir/page?x=1"


def render(markup: str, url: str | None = URL) -> str:
    return extract_text(markup.encode(), "text/html", url=url)


def test_inline_whitespace():
    assert render("<p><b>foo</b>bar <span>a</span> <span>b</span></p>") == "foobar a b"
    assert render('<p><a href="/x">foo </a>bar</p>') == "foo (https://e.example/x) bar"


def test_links_to_this_page_show_no_url():
    assert render('<p><a href="#s">Jump</a> <a href="?x=1">self</a> <a href="?x=2">other</a>') == (
        "Jump self other (https://e.example/dir/page?x=2)"
    )
    # Permalink glyphs of headings are dropped; other same-page links keep their text.
    assert render('<h2>Intro<a href="#intro">¶</a></h2><h3>A<a href="#a">#</a></h3>') == (
        "## Intro\n\n### A"
    )
    assert render('<h2>Intro<a href="#intro"><span>¶</span></a></h2>') == "## Intro¶"
    assert render('<p><a href="#top">¶</a></p>', url=None) == "¶ (#top)"


def test_a_url_is_shown_once():
    assert render('<p><a href="/a">A</a>, <a href="/a">again</a>, <a href="/b">B</a>') == (
        "A (https://e.example/a), again, B (https://e.example/b)"
    )


def test_link_text_that_shows_the_url():
    html = (
        '<p><a href="https://x.example/a/">https://x.example/a/</a>'
        ' <a href="https://www.y.example/">y.example</a>'
        ' <a href="https://z.example/">z.example/other</a></p>'
    )
    assert render(html) == ("https://x.example/a/ y.example z.example/other (https://z.example/)")
    long_label = "w" * 2200
    assert render(f'<a href="/l">{long_label}</a>') == f"{long_label} (https://e.example/l)"


def test_table_cells_with_blocks_stay_on_their_row():
    html = (
        "<table><tr><th><p>k</p></th><th><div>v</div></th></tr>"
        "<tr><td><p>a</p><p>b</p></td><td><p>c</p></td></tr>"
        "<tr><td></td><td><div></div></td><td>e</td></tr>"
        "<tr><td><ul><li>x</li><li>y</li></ul></td><td><h3>h</h3></td></tr></table>"
    )
    assert render(html) == "k | v\na\n\nb | c\n| | e\n- x\n- y |\n### h"


def test_lists_ordered_nested_and_separate():
    html = (
        "<p>Intro</p><ul><li>u1<ol><li>o1</li><li>o2</li></ol></li><li>u2</li></ul>"
        "<ol><li>first</li><li>second</li></ol><li>stray</li><p>after</p>"
    )
    assert render(html) == (
        "Intro\n\n- u1\n  1. o1\n  2. o2\n- u2\n\n1. first\n2. second\n\n- stray\n\nafter"
    )


def test_chrome_roles_dialogs_and_hidden_styles_are_dropped():
    html = (
        '<div role="navigation">nav</div><div role=" Banner ">banner</div>'
        '<div role="contentinfo">info</div><div role="complementary">rail</div>'
        '<div role="search">search</div><div role="dialog">cookies</div>'
        '<div role="alertdialog">alert</div><dialog open>modal</dialog>'
        '<div style="display: none">dn</div><span style="color:red; VISIBILITY:hidden">vh</span>'
        '<p style="display:none !important">imp</p><p style="display&#58;none">ent</p>'
        '<div role="main">main</div><div role="note">note</div>'
        '<p style="display:block;color:red">styled</p><p style>bare</p>'
    )
    assert render(html) == "main\nnote\n\nstyled\n\nbare"


def test_style_and_role_are_not_copied_to_the_parser():
    from django_webfetch.text.scan import scan

    result = scan('<p role="note" style="display:none" role="navigation">x</p><b style=x>y</b>')
    assert result.markup == "<!DOCTYPE html><p hidden></p><b>y</b>"


def test_a_cut_url_never_ends_in_half_an_escape():
    # Deterministic: the property tests reach this branch only by chance.
    from django_webfetch.text import render_redirect_target

    rendered = render_redirect_target("https://e.example/" + "a" * 480 + "é")
    assert rendered.endswith("a" * 480 + " (cut)")
