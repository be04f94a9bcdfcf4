# ruff: noqa: E501
"""The hand-written pages (see handwritten.py): one dict per page."""

from __future__ import annotations

import json

ONETRUST = """<div id="onetrust-consent-sdk"><div class="onetrust-pc-dark-filter ot-hide ot-fade-in"></div><div id="onetrust-banner-sdk" class="otFlat vertical-align-content" tabindex="0" role="region" aria-label="Cookie banner"><div role="dialog" aria-modal="true" aria-describedby="onetrust-policy-text" aria-label="Privacy"><div class="ot-sdk-container"><div class="ot-sdk-row"><div id="onetrust-group-container" class="ot-sdk-eight ot-sdk-columns"><div class="banner_logo"></div><div id="onetrust-policy"><h2 id="onetrust-policy-title">We value your privacy</h2><div id="onetrust-policy-text">We and our partners use cookies and similar technologies to store and access information on your device, personalise content and ads, and analyse our traffic. You can change your choices at any time by clicking Cookie Settings at the bottom of the page.<a class="ot-cookie-policy-link" href="/cookie-policy" aria-label="More information about your privacy, opens in a new tab">Cookie Policy</a></div></div></div><div id="onetrust-button-group-parent" class="ot-sdk-three ot-sdk-columns"><div id="onetrust-button-group"><button id="onetrust-pc-btn-handler">Cookie Settings</button><button id="onetrust-reject-all-handler">Reject All</button><button id="onetrust-accept-btn-handler">Accept All Cookies</button></div></div></div></div></div></div></div>"""

COOKIEBOT = """<div id="CybotCookiebotDialog" name="CybotCookiebotDialog" role="dialog" aria-modal="true" aria-labelledby="CybotCookiebotDialogBodyContentTitle" class="CybotCookiebotDialogActive CybotEdge" lang="{lang}" dir="ltr" data-template="popup"><div class="CybotCookiebotDialogContentWrapper"><div id="CybotCookiebotDialogHeader"><div id="CybotCookiebotDialogPoweredbyCybot"><a href="https://www.cookiebot.com/" target="_blank" rel="noopener nofollow" title="Cookiebot - opens in a new window">Cookiebot</a></div></div><div id="CybotCookiebotDialogNav" role="tablist"><ul class="CybotCookiebotDialogNavItems"><li><a id="CybotCookiebotDialogNavDeclaration" href="#" class="CybotCookiebotDialogNavItemLink CybotCookiebotDialogActive" role="tab">{consent}</a></li><li><a id="CybotCookiebotDialogNavDetails" href="#" class="CybotCookiebotDialogNavItemLink" role="tab">{details}</a></li></ul></div><div id="CybotCookiebotDialogTabContent"><div id="CybotCookiebotDialogBody"><h2 id="CybotCookiebotDialogBodyContentTitle">{title}</h2><div id="CybotCookiebotDialogBodyContentText">{text}</div></div></div><div id="CybotCookiebotDialogFooter"><div id="CybotCookiebotDialogBodyButtonsWrapper"><button id="CybotCookiebotDialogBodyButtonDecline" class="CybotCookiebotDialogBodyButton">{deny}</button><button id="CybotCookiebotDialogBodyLevelButtonLevelOptinAllowAll" class="CybotCookiebotDialogBodyButton">{allow}</button></div></div></div></div>"""

DIDOMI = """<div id="didomi-host" data-nosnippet="true" aria-hidden="false"><div class="didomi-popup-backdrop didomi-notice-popup didomi-popup__backdrop" role="dialog" aria-label="Didomi"><div class="didomi-popup-container didomi-popup-notice didomi-popup-notice-with-data-processing"><div class="didomi-popup-notice-text-container"><div class="didomi-popup-notice-text" id="didomi-notice"><div class="didomi-notice-text"><p><strong>{title}</strong></p><p>{text}</p></div></div></div><div class="didomi-popup-notice-buttons"><button class="didomi-components-button didomi-button didomi-button-standard" id="didomi-notice-learn-more-button">{more}</button><button class="didomi-components-button didomi-button didomi-dismiss-button" id="didomi-notice-agree-button">{agree}</button></div></div></div></div>"""

QUANTCAST = """<div id="qc-cmp2-container" data-nosnippet=""><div class="qc-cmp2-consent-info"><div id="qc-cmp2-ui" role="dialog" aria-label="qc-cmp2-ui" aria-modal="true" tabindex="0"><div class="qc-cmp2-summary-section"><h2 class="qc-cmp2-summary-info-header">{title}</h2><div class="qc-cmp2-summary-info"><p>{text}</p></div></div><div class="qc-cmp2-footer qc-cmp2-footer-overlay qc-cmp2-footer-scrolled"><div class="qc-cmp2-summary-buttons"><button mode="secondary" size="large" class=" css-47sehv"><span>{more}</span></button><button mode="primary" size="large" class=" css-47sehv"><span>{agree}</span></button></div></div></div></div></div>"""

USERCENTRICS = """<div id="usercentrics-root" data-nosnippet="true"></div><script id="usercentrics-cmp" src="https://app.usercentrics.eu/browser-ui/latest/loader.js" data-settings-id="Xy12ab3Cd" async></script>"""


def _menu(items: str, cls: str = "menu-item") -> str:
    return "".join(
        f'<li class="{cls}"><a href="/{i.lower().replace(" ", "-")}/">{i}</a></li>'
        for i in items.split("|")
    )


def _next_data(props: dict) -> str:
    return '<script id="__NEXT_DATA__" type="application/json">' + json.dumps(props) + "</script>"


PAGES: list[dict] = []

# 1. Next.js news site: div soup with hashed class names, no semantic tags, __NEXT_DATA__
# carrying the article again, OneTrust at the end of the body.
_NEXT_BODY = [
    "The regional water authority will spend €410 million over the next eight years replacing lead service pipes in 46,000 homes, its board decided on Thursday after a two-hour debate.",
    "The programme, the largest of its kind in the country, starts in the old town districts in spring, where tests found lead levels above the legal limit in one in nine samples last year.",
    "Households will not be charged for the work on the public side of the meter, but owners will be asked to pay a fixed contribution of €350 towards the private connection, with exemptions for low-income households.",
    "“We know where the pipes are, we know what they cost, and we know what happens if we wait,” said the authority's chief engineer, Dana Okafor. “Every year of delay means another cohort of children drinking from them.”",
    "Critics on the board argued that the contribution would slow take-up. A motion to drop it was defeated by seven votes to five.",
]
PAGES.append(
    {
        "name": "r10_news_nextjs_divsoup",
        "url": "https://www.metrowire.example/local/water-authority-lead-pipes-410m",
        "kind": "news",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en"><head><meta charSet="utf-8"/><title>Water authority to replace 46,000 lead pipes in €410m plan | MetroWire</title><meta name="viewport" content="width=device-width"/><link rel="preload" href="/_next/static/css/8b1e2a.css" as="style"/><script type="application/ld+json">{json.dumps({"@context": "https://schema.org", "@type": "NewsArticle", "headline": "Water authority to replace 46,000 lead pipes in €410m plan", "datePublished": "2025-03-06T09:12:00Z", "author": [{"@type": "Person", "name": "Lena Marsh"}]})}</script></head><body><div id="__next"><div class="css-1dbjc4n r-13awgt0"><div class="css-k008qs e1xy2kz0"><div class="css-1a9yx2m"><a href="/" class="css-4rbku5 css-18t94o4"><span class="css-1qaijid">MetroWire</span></a></div><div class="css-175oi2r e1s3wk10"><div class="css-9l3uo3">{"".join(f'<div class="css-1e3v4 nav-link"><a href="/{x.lower()}">{x}</a></div>' for x in ["Local", "Politics", "Business", "Climate", "Sport", "Culture", "Podcasts", "Newsletters"])}</div></div><div class="css-9x8a1c"><a href="/subscribe">Subscribe for €1</a><a href="/login">Log in</a></div></div>
<div class="css-1x0ly7e ePq9s0"><div class="css-wq7nud"><div class="css-ep2d8 breadcrumbs"><a href="/">Home</a><span>›</span><a href="/local">Local</a></div>
<!--G--><div class="css-18k7p8m"><h1 class="css-1ytvy5z e1h9rw200">Water authority to replace 46,000 lead pipes in €410m plan</h1><div class="css-1ws7wtl"><p class="css-pxcb2s">Households will pay a fixed €350 towards the private side of the connection, with exemptions for low-income owners.</p></div></div><!--/G-->
<div class="css-1gnxp8c"><div class="css-fyx8qb"><span class="css-0">By <a href="/authors/lena-marsh">Lena Marsh</a></span><span class="css-0">6 March 2025, 9:12am</span></div><div class="css-ki5a3j share"><button aria-label="Share on Facebook">Facebook</button><button aria-label="Share on X">X</button><button aria-label="Copy link">Copy link</button></div></div>
<div class="css-2k2mhs"><div class="css-1vq4tpb"><img src="/_next/image?url=%2Fpipes.jpg&amp;w=1200&amp;q=75" alt="Workers lay new pipes" class="css-9pa8cd"/><div class="css-1f8ly7u"><span class="css-cens5h">Workers lay new water pipes in the old town. Photo: MetroWire</span></div></div></div>
<!--G--><div class="css-s99gq0 e1x0s4h60"><div class="css-53u6y8">{"".join(f'<div class="css-1n1kv0b"><p class="css-at9mc1 evys1bk0">{p}</p></div>' for p in _NEXT_BODY[:3])}<!--X--><div class="css-1q4m1v5 ad-slot" data-testid="ad-slot"><div class="css-1bk8n7g">Advertisement</div><div id="div-gpt-ad-1" style="min-height:250px"></div></div><!--/X-->{"".join(f'<div class="css-1n1kv0b"><p class="css-at9mc1 evys1bk0">{p}</p></div>' for p in _NEXT_BODY[3:])}<div class="css-1n1kv0b"><h2 class="css-6h8ht5">What happens next</h2></div><div class="css-1n1kv0b"><p class="css-at9mc1 evys1bk0">Letters will go to the first 5,000 households in February. Residents can check whether their street is included using the authority's postcode search, and the full schedule will be published on 1 April.</p></div></div></div><!--/G-->
<div class="css-1nc4q0l"><div class="css-9n3mvn">Read more</div>{"".join(f'<div class="css-4rbku5"><a href="/local/{i}"><div class="css-1qgmh3o"><span>{t}</span></div></a></div>' for i, t in enumerate(["Council approves new tram line to the airport", "Heatwave warning issued for the weekend", "Teachers vote to accept pay deal", "Why your energy bill is going up again"]))}</div>
<div class="css-1iq0a1h newsletter"><h3>Get MetroWire in your inbox</h3><p>The day's biggest local stories, every morning at 7am.</p><input placeholder="Email address"/><button>Sign up</button></div>
</div></div>
<div class="css-1j1xnfm footer"><div class="css-n4m8ob">{"".join(f'<a href="/{x.lower()}">{x}</a>' for x in ["About us", "Contact", "Careers", "Advertise", "Privacy notice", "Cookie settings", "Terms and conditions"])}</div><div class="css-0">© 2025 MetroWire Media Ltd. All rights reserved.</div></div></div></div>
{_next_data({"props": {"pageProps": {"article": {"id": "a-93821", "headline": "Water authority to replace 46,000 lead pipes in €410m plan", "body": [{"type": "paragraph", "text": p} for p in _NEXT_BODY], "tags": ["water", "infrastructure"]}, "related": [{"title": "Council approves new tram line to the airport"}]}, "__N_SSG": True}, "page": "/[section]/[slug]", "query": {"section": "local", "slug": "water-authority-lead-pipes-410m"}, "buildId": "k3J9x", "isFallback": False, "gsp": True, "scriptLoader": []})}
<script src="/_next/static/chunks/main-7a8c.js" async=""></script>
{ONETRUST}</body></html>""",
        "present": [
            "# Water authority to replace 46,000 lead pipes in €410m plan",
            "The regional water authority will spend €410 million",
            "Critics on the board argued",
            "## What happens next",
            "the full schedule will be published on 1 April.",
        ],
        "absent": [
            "We value your privacy",
            "Accept All Cookies",
            "Council approves new tram line",
            "Get MetroWire in your inbox",
            "Cookie settings",
            "Advertisement",
        ],
    }
)

# 2. Ghost / Casper: article.article > header.article-header, section.gh-content; a
# subscribe CTA and "read more" cards after it; member signup portal.
_GHOST = [
    "<p>For three years I kept every receipt from the workshop in a shoebox. Last winter I finally typed them all into a spreadsheet, and the result changed how I price furniture.</p>",
    "<p>The short version: I was undercharging for small pieces and overcharging for large ones, because I estimated time by the size of the object rather than by the number of joints.</p>",
    '<h2 id="counting-joints">Counting joints, not hours</h2>',
    "<p>A small side table with four legs and two stretchers has twelve mortise-and-tenon joints. A dining table twice the size may have the same twelve. Cutting and fitting a joint takes me about forty minutes whatever the size of the piece, so the small table costs nearly as much labour as the big one.</p>",
    '<figure class="kg-card kg-image-card kg-card-hascaption"><img src="/content/images/2025/01/joints.jpg" class="kg-image" alt="" loading="lazy" width="2000" height="1333"><figcaption>Twelve joints, whatever the size of the table.</figcaption></figure>',
    "<p>Once I priced by joint count, my quotes for small commissions went up by about 30% and for large ones down by 10%. I lost two small jobs and gained five large ones.</p>",
    '<h2 id="what-i-track-now">What I track now</h2>',
    "<ul><li>Number of joints and their type</li><li>Board feet of timber, by species</li><li>Finishing time, which depends on surface area</li><li>Delivery distance</li></ul>",
    '<blockquote class="kg-blockquote-alt">Price the work you do, not the object you deliver.</blockquote>',
    "<p>None of this is new to professional cabinetmakers, but nobody told me when I started, and the shoebox did.</p>",
]
PAGES.append(
    {
        "name": "r10_blog_ghost_casper",
        "url": "https://slowgrain.example/pricing-by-joints/",
        "kind": "blog",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Pricing furniture by the joint, not the hour</title><link rel="stylesheet" type="text/css" href="/assets/built/screen.css?v=2a1"><script defer src="https://cdn.jsdelivr.net/ghost/portal@~2.37/umd/portal.min.js" data-ghost="https://slowgrain.example/"></script><style id="gh-members-styles">.gh-post-upgrade-cta-content{{display:flex}}</style></head><body class="post-template tag-business has-sans-title has-sans-body"><div class="viewport"><header id="gh-head" class="gh-head outer is-head-left-logo"><div class="gh-head-inner inner"><div class="gh-head-brand"><a class="gh-head-logo" href="https://slowgrain.example">Slow Grain</a><button class="gh-burger"></button></div><nav class="gh-head-menu"><ul class="nav">{_menu("Home|Projects|Business|Tools|About", "nav-home")}</ul></nav><div class="gh-head-actions"><a class="gh-head-link" href="#/portal/signin" data-portal="signin">Sign in</a><a class="gh-head-button" href="#/portal/signup" data-portal="signup">Subscribe</a></div></div></header><div class="site-content"><main id="site-main" class="site-main"><article class="article post tag-business featured">
<header class="article-header gh-canvas"><div class="article-tag post-card-tags"><span class="post-card-primary-tag"><a href="/tag/business/">Business</a></span><span class="post-card-featured">Featured</span></div><!--G--><h1 class="article-title">Pricing furniture by the joint, not the hour</h1><p class="article-excerpt">What three years of workshop receipts taught me about quoting commissions.</p><!--/G--><div class="article-byline"><section class="article-byline-content"><ul class="author-list"><li class="author-list-item"><a href="/author/tom/" class="author-avatar"><img class="author-profile-image" src="/content/images/tom.jpg" alt="Tom Reyes"></a></li></ul><div class="article-byline-meta"><h4 class="author-name"><a href="/author/tom/">Tom Reyes</a></h4><div class="byline-meta-content"><time class="byline-meta-date" datetime="2025-01-19">Jan 19, 2025</time><span class="byline-reading-time"><span class="bull">•</span> 3 min read</span></div></div></section></div><figure class="article-image"><img src="/content/images/2025/01/shoebox.jpg" alt="A shoebox full of receipts"></figure></header>
<!--G--><section class="gh-content gh-canvas">{"".join(_GHOST)}</section><!--/G-->
<section class="article-comments gh-canvas"><script defer src="https://cdn.jsdelivr.net/ghost/comments-ui@~0.17/umd/comments-ui.min.js" data-ghost-comments="https://slowgrain.example/" data-title="12 comments" data-count="true"></script></section></article></main>
<footer class="footer-cta outer"><div class="inner"><h2 class="footer-cta-title">Sign up for more like this.</h2><a class="footer-cta-button" href="#/portal" data-portal=""><div class="footer-cta-input">Enter your email</div><span>Subscribe</span></a></div></footer>
<aside class="read-more-wrap outer"><div class="read-more inner"><article class="post-card post"><a class="post-card-image-link" href="/sharpening-on-a-budget/"><img class="post-card-image" src="/content/images/s.jpg" alt=""></a><div class="post-card-content"><a class="post-card-content-link" href="/sharpening-on-a-budget/"><header class="post-card-header"><h2 class="post-card-title">Sharpening on a budget: the three stones I actually use</h2></header><div class="post-card-excerpt">You do not need a wall of waterstones to keep chisels keen.</div></a></div></article><article class="post-card post"><div class="post-card-content"><a class="post-card-content-link" href="/first-commission/"><header class="post-card-header"><h2 class="post-card-title">My first paid commission, and everything that went wrong</h2></header><div class="post-card-excerpt">A walnut bookcase, a tight deadline and a warped top.</div></a></div></article></div></aside></div>
<footer class="site-footer outer"><div class="inner"><section class="copyright"><a href="https://slowgrain.example">Slow Grain</a> © 2025</section><nav class="site-footer-nav"><ul class="nav"><li><a href="/privacy/">Privacy</a></li><li><a href="/rss/">RSS</a></li></ul></nav><div class="gh-powered-by"><a href="https://ghost.org/" target="_blank" rel="noopener">Powered by Ghost</a></div></div></footer></div></body></html>""",
        "present": [
            "# Pricing furniture by the joint, not the hour",
            "For three years I kept every receipt",
            "## Counting joints, not hours",
            "Twelve joints, whatever the size of the table.",
            "nobody told me when I started, and the shoebox did.",
        ],
        "absent": [
            "Sign up for more like this.",
            "Sharpening on a budget",
            "Powered by Ghost",
            "My first paid commission",
        ],
    }
)

# 3. Substack post: div.available-content > div.body.markup, a subscribe widget inside
# the body, a paywall teaser after it, comments (longer than the visible post).
_SUB = [
    "<p>Every January the same chart goes around: the share of people who say they will exercise more, and the share who still do in March. This year I wanted to know whether the people who stick with it have anything in common, so I asked you.</p>",
    "<p>Just over 2,300 readers answered the survey. Thank you. Here is what came back.</p>",
    '<h3 class="header-anchor-post">The habit comes before the goal</h3>',
    "<p>The strongest difference between those still exercising in March and those who had stopped was not fitness, age or income. It was whether they had attached the new habit to something they already did every day: a commute, a school run, a lunch break.</p>",
    "<p>Among readers who had tied exercise to an existing routine, 64% were still going after ten weeks. Among those who had set a time on its own, 31% were.</p>",
]
_SUB_COMMENTS = "".join(
    f'<div class="comment"><div class="comment-content"><div class="comment-meta"><a href="/@u{i}">{n}</a><span>Jan {10 + i}</span></div><div class="comment-body"><p>{t}</p></div><div class="comment-actions"><button>Like ({i * 3})</button><button>Reply</button><button>Share</button></div></div></div>'
    for i, (n, t) in enumerate(
        [
            (
                "Marta K",
                "This matches my experience exactly. I only started running consistently when I began getting off the bus two stops early on the way to work; before that I had tried three times with a gym membership and given up every time by February. The bus stop trick has now lasted two years and I barely think about it.",
            ),
            (
                "Jonas",
                "I would be curious whether the effect holds for people who work from home and have no commute to attach things to. In my case the routine I attached exercise to was the morning coffee, and it worked, but my partner tried the same with lunch and it fell apart within a fortnight because lunch moves around.",
            ),
            (
                "Priya S.",
                "Great survey. One thing I missed: did you ask about whether people exercised alone or with someone? In my running club the people who drop out are almost always the ones who came alone and never found a partner to run with, regardless of whether it fit a routine.",
            ),
            (
                "anon reader",
                "Slightly sceptical of self-reported data here, people who stuck with it are more likely to answer a survey about sticking with it. Still, the routine effect is big enough that it probably survives that bias, and it matches what the habit literature says.",
            ),
            (
                "Dev",
                "Saving this to send to my brother who has bought four different fitness apps this month.",
            ),
        ]
    )
)
PAGES.append(
    {
        "name": "r10_newsletter_substack",
        "url": "https://thehabitletter.substack.example/p/who-keeps-going",
        "kind": "blog",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>Who keeps going after January? - by Sam Ortiz</title><meta property="og:type" content="article"><script type="application/ld+json">{json.dumps({"@context": "https://schema.org", "@type": "NewsArticle", "headline": "Who keeps going after January?", "isAccessibleForFree": False, "hasPart": {"@type": "WebPageElement", "isAccessibleForFree": False, "cssSelector": ".paywall"}})}</script></head><body><div id="entry"><div id="main" class="main typography use-theme-bg"><div class="topbar-spacer"></div><div class="main-menu"><div class="topbar-content"><a href="/" class="navbar-logo-container">The Habit Letter</a><div class="navbar-buttons"><button class="button primary subscribe-btn">Subscribe</button><a href="/account/login" class="button">Sign in</a></div></div></div><div class="single-post-container"><div class="container"><div class="single-post"><div class="post-header"><!--G--><h1 class="post-title published">Who keeps going after January?</h1><h3 class="subtitle">What 2,300 readers told me about the habits that last</h3><!--/G--><div class="post-meta"><div class="meta-author-wrap"><a href="https://substack.example/@samortiz">Sam Ortiz</a></div><div class="pencraft">Feb 02, 2025</div><div class="post-ufi"><a class="post-ufi-button like-button">142</a><a class="post-ufi-button comment-button" href="/p/who-keeps-going/comments">27</a><a class="post-ufi-button share-button">Share</a></div></div></div>
<div class="available-content"><!--G--><div dir="auto" class="body markup">{"".join(_SUB[:2])}<!--X--><div class="subscription-widget-wrap-editor" data-attrs="{{&quot;url&quot;:&quot;https://thehabitletter.substack.example/subscribe&quot;}}"><div class="subscription-widget show-subscribe"><div class="preamble"><p class="cta-caption">The Habit Letter is a reader-supported publication. To receive new posts and support my work, consider becoming a free or paid subscriber.</p></div><form class="subscription-widget-subscribe"><input type="email" class="email-input" placeholder="Type your email…"><input type="submit" class="button primary" value="Subscribe"></form></div></div><!--/X-->{"".join(_SUB[2:])}</div><!--/G--></div>
<div class="paywall"><h2 class="paywall-title">Keep reading with a 7-day free trial</h2><p class="paywall-subtitle">Subscribe to The Habit Letter to keep reading this post and get 7 days of free access to the full post archives.</p><a class="button primary" href="/subscribe?simple=true&amp;next=/p/who-keeps-going">Start trial</a><p class="paywall-login">Already a paid subscriber? <a href="/account/login">Sign in</a></p></div>
<div class="post-footer"><div class="post-ufi"><a class="post-ufi-button">142 Likes</a><a class="post-ufi-button">Restack</a></div></div></div></div>
<div class="comments-section"><div class="comments-page"><h4 class="comments-heading">Discussion about this post</h4><div class="comment-list">{_SUB_COMMENTS}</div></div></div></div>
<div class="footer-wrap"><div class="footer"><div class="footer-buttons"><a href="/privacy">Privacy</a><a href="/tos">Terms</a><a href="https://substack.com/ccpa#personal-data-collected">Collection notice</a></div><div class="footer-substack-cta"><a href="https://substack.com/signup">Start Writing</a><a href="https://substack.com/app">Get the app</a></div><div class="footer-text">Substack is the home for great culture</div></div></div></div></div><script>window._preloads = JSON.parse("{{\\"isEU\\":true,\\"language\\":\\"en\\",\\"post\\":{{\\"id\\":151234}}}}")</script></body></html>""",
        "present": [
            "# Who keeps going after January?",
            "Just over 2,300 readers answered the survey.",
            "The habit comes before the goal",
            "Among those who had set a time on its own, 31% were.",
        ],
        "absent": [
            "Keep reading with a 7-day free trial",
            "reader-supported publication",
            "Discussion about this post",
            "This matches my experience exactly",
            "Substack is the home for great culture",
        ],
    }
)

# 4. Live blog: the content is many sibling entries (article.block), newest first, each
# with a time and a short text; key points box at the top; Quantcast CMP.
_LIVE = [
    (
        "14:52",
        "Polls close in two hours",
        "<p>Turnout at 2pm was 48.1%, up from 44.7% at the same point in the last election, the electoral commission said.</p>",
    ),
    (
        "14:20",
        "Queues reported in the northern districts",
        "<p>Voters in Riverside and Old Mill have waited up to 40 minutes at some stations. The commission said extra staff had been sent.</p><p>“No one who is in the queue at 8pm will be turned away,” a spokesperson said.</p>",
    ),
    (
        "13:05",
        "",
        '<p>Both main candidates have now voted. The incumbent mayor cast her ballot at the primary school on Elm Street shortly after 1pm.</p><figure><img src="/live/img/vote.jpg" alt=""><figcaption>The mayor leaves the polling station on Elm Street.</figcaption></figure>',
    ),
    (
        "11:30",
        "What is at stake",
        "<p>The winner will control a budget of £1.2bn and decide the future of the congestion charge, which the challenger has promised to scrap.</p><ul><li>Budget: £1.2bn a year</li><li>Term: four years</li><li>Candidates: six</li></ul>",
    ),
    (
        "09:00",
        "Welcome",
        "<p>Good morning and welcome to our live coverage of the mayoral election. Polls opened at 7am and close at 10pm; the count starts overnight.</p>",
    ),
]
_LIVE_HTML = "".join(
    f'<article class="block" id="block-{i}" data-block-id="{i}"><header class="block-header"><time class="block-time published-time" datetime="2025-05-01T{t}:00+01:00">{t}</time>'
    + (f'<h2 class="block-title">{h}</h2>' if h else "")
    + f'</header><div class="block-elements">{b}</div><footer class="block-footer"><div class="block-share"><a class="share-facebook" href="#">Share</a><a class="share-x" href="#">Post</a></div></footer></article>'
    for i, (t, h, b) in enumerate(_LIVE)
)
_LIVE_GOLD = "".join(
    f"<article><p>{t}</p>" + (f"<h2>{h}</h2>" if h else "") + f"{b}</article>" for t, h, b in _LIVE
)
PAGES.append(
    {
        "name": "r10_news_liveblog",
        "url": "https://www.dailypost.example/politics/live/2025/may/01/mayoral-election-live",
        "kind": "news",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en-GB"><head><meta charset="utf-8"><title>Mayoral election 2025 live: turnout up as polls close in two hours</title><script type="application/ld+json">{json.dumps({"@context": "https://schema.org", "@type": "LiveBlogPosting", "headline": "Mayoral election 2025 live", "coverageStartTime": "2025-05-01T07:00:00+01:00", "liveBlogUpdate": [{"@type": "BlogPosting", "headline": h or "Update", "articleBody": "..."} for _, h, _ in _LIVE]})}</script></head><body><div id="bannerandheader"><header class="site-header"><a class="logo" href="/">The Daily Post</a><nav class="pillars" aria-label="Sections"><ul>{_menu("News|Opinion|Sport|Culture|Lifestyle")}</ul></nav><nav class="subnav"><ul>{_menu("UK|World|Climate|Politics|Business|Science|Tech|Global development")}</ul></nav><a class="support" href="/contribute">Support us</a></header></div>
<main id="maincontent"><div class="live-header"><div class="live-kicker"><span class="pulse"></span>Live</div><!--G--><h1 class="headline">Mayoral election 2025 live: turnout up as polls close in two hours</h1><div class="standfirst"><p>Voters head to the polls across the city; results expected early on Friday</p></div><!--/G--></div>
<div class="live-layout"><aside class="live-aside"><!--G--><div class="key-events"><h2>Key events</h2><ul><li><a href="#block-0">Polls close in two hours</a></li><li><a href="#block-1">Queues reported in the northern districts</a></li><li><a href="#block-3">What is at stake</a></li></ul></div><!--/G--><div class="live-filter"><label><input type="checkbox"> Show key events only</label></div></aside>
<div class="live-feed"><div class="live-updated">Updated <time>14:52</time></div><!--G-->{_LIVE_HTML}<!--/G--><div class="pagination"><a href="?page=2">Older</a><a href="?page=last">Oldest</a></div></div></div>
<section class="onwards"><h2>Most viewed</h2><ol>{"".join(f'<li><a href="/x{i}">{t}</a></li>' for i, t in enumerate(["Rail strikes called off after last-minute deal", "The best paperbacks of the month", "Inside the city’s oldest pub", "Quiz of the week"]))}</ol></section></main>
<footer class="site-footer"><ul>{_menu("About us|Contact us|Complaints|Terms|Privacy policy|Cookie policy|Securedrop")}</ul><p>© 2025 Daily Post News &amp; Media Limited or its affiliated companies. All rights reserved.</p></footer>
{QUANTCAST.format(title="We value your privacy", text="We and our partners store and/or access information on a device, such as cookies and process personal data, such as unique identifiers and standard information sent by a device for personalised advertising and content, advertising and content measurement, audience research and services development.", more="MORE OPTIONS", agree="AGREE")}</body></html>""".replace(
            "<!--G-->" + _LIVE_HTML + "<!--/G-->", "<!--G-->" + _LIVE_HTML + "<!--/G-->"
        ),
        "present": [
            "# Mayoral election 2025 live",
            "Turnout at 2pm was 48.1%",
            "Voters in Riverside and Old Mill",
            "Both main candidates have now voted",
            "Budget: £1.2bn a year",
            "Good morning and welcome to our live coverage",
        ],
        "absent": [
            "We value your privacy",
            "MORE OPTIONS",
            "Rail strikes called off",
            "Show key events only",
            "Securedrop",
        ],
    }
)

# 5. WordPress (Astra) post with Jetpack related posts, a share bar and an author box
# INSIDE .entry-content (where plugins put them), tags and post navigation after it.
PAGES.append(
    {
        "name": "r10_blog_astra_jetpack",
        "url": "https://greenbalcony.example/2025/04/growing-tomatoes-in-pots/",
        "kind": "blog",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en-US"><head><meta charset="UTF-8"><title>Growing tomatoes in pots: what worked on a north-facing balcony &#8211; Green Balcony</title><link rel='stylesheet' id='astra-theme-css-css' href='/wp-content/themes/astra/assets/css/minified/main.min.css' media='all' /><link rel='stylesheet' id='jetpack_related-posts-css' href='/wp-content/plugins/jetpack/modules/related-posts/related-posts.css' /></head><body class="post-template-default single single-post postid-812 single-format-standard wp-custom-logo ast-desktop ast-separate-container ast-right-sidebar astra-4.6.4"><a class="skip-link screen-reader-text" href="#content">Skip to content</a><div class="hfeed site" id="page"><header class="site-header header-main-layout-1 ast-primary-menu-enabled ast-logo-title-inline" id="masthead" itemtype="https://schema.org/WPHeader" itemscope="itemscope"><div id="ast-desktop-header"><div class="ast-main-header-wrap main-header-bar-wrap"><div class="ast-primary-header-bar ast-primary-header main-header-bar site-header-focus-item"><div class="site-primary-header-wrap ast-builder-grid-row-container site-header-focus-item ast-container"><div class="ast-builder-layout-element site-header-focus-item ast-header-html-1"><span class="site-title"><a href="/" rel="home">Green Balcony</a></span></div><div class="ast-builder-menu-1 ast-builder-menu ast-flex"><nav class="site-navigation ast-flex-grow-1 navigation-accessibility" id="primary-site-navigation-desktop" aria-label="Site Navigation" itemtype="https://schema.org/SiteNavigationElement" itemscope="itemscope"><div class="main-navigation ast-inline-flex"><ul id="ast-hf-menu-1" class="main-header-menu ast-menu-shadow ast-nav-menu ast-flex submenu-with-border stack-on-mobile">{_menu("Home|Vegetables|Herbs|Flowers|Small spaces|About|Shop", "menu-item menu-item-type-post_type menu-item-object-page")}</ul></div></nav></div></div></div></div></div></header>
<div id="content" class="site-content"><div class="ast-container"><div id="primary" class="content-area primary"><div class="ast-breadcrumbs-wrapper"><div class="ast-breadcrumbs-inner"><nav role="navigation" aria-label="Breadcrumbs" class="breadcrumb-trail breadcrumbs"><div class="ast-breadcrumbs"><ul class="trail-items"><li class="trail-item trail-begin"><a href="/">Home</a></li><li class="trail-item"><a href="/category/vegetables/">Vegetables</a></li><li class="trail-item trail-end"><span>Growing tomatoes in pots</span></li></ul></div></nav></div></div><main id="main" class="site-main"><article class="post-812 post type-post status-publish format-standard has-post-thumbnail hentry category-vegetables tag-containers tag-tomatoes ast-article-single" id="post-812" itemtype="https://schema.org/CreativeWork" itemscope="itemscope"><div class="ast-post-format- single-layout-1"><header class="entry-header"><div class="post-thumb-img-content post-thumb"><img width="1024" height="683" src="/wp-content/uploads/2025/04/tomatoes-1024x683.jpg" class="attachment-large size-large wp-post-image" alt="" decoding="async" /></div><!--G--><h1 class="entry-title" itemprop="headline">Growing tomatoes in pots: what worked on a north-facing balcony</h1><!--/G--><div class="entry-meta"><span class="posted-by vcard author" itemtype="https://schema.org/Person" itemscope="itemscope" itemprop="author"> By <a title="View all posts by Ines" href="/author/ines/" rel="author" class="url fn n" itemprop="url"><span class="author-name" itemprop="name">Ines</span></a></span> / <span class="posted-on"><span class="published" itemprop="datePublished"> April 12, 2025 </span></span> / <span class="comments-link"><a href="#comments">4 Comments</a></span></div></header>
<div class="entry-content clear" itemprop="text"><!--G-->
<p>Our balcony gets three hours of direct sun in July and none at all before May. Everyone told me tomatoes would not grow there. Last summer we picked just under six kilos from four pots.</p>
<h2 class="wp-block-heading">Choose small, early varieties</h2>
<p>Cherry and cocktail tomatoes ripen with far less heat than beefsteaks. We grew ‘Sungold’, ‘Stupice’ and ‘Latah’; ‘Stupice’ was the first to ripen, at the start of August, and kept going until October.</p>
<h2 class="wp-block-heading">Bigger pots than you think</h2>
<p>A tomato plant in a 10-litre pot dries out twice a day in a warm spell. In 30-litre pots ours needed water once a day at most, and the fruit did not split.</p>
<figure class="wp-block-table"><table><thead><tr><th>Variety</th><th>First ripe</th><th>Yield per plant</th></tr></thead><tbody><tr><td>Stupice</td><td>2 August</td><td>1.9 kg</td></tr><tr><td>Sungold</td><td>11 August</td><td>1.6 kg</td></tr><tr><td>Latah</td><td>6 August</td><td>1.2 kg</td></tr></tbody></table><figcaption class="wp-element-caption">Our 2024 harvest, weighed every evening.</figcaption></figure>
<h2 class="wp-block-heading">Feed weekly once the first truss sets</h2>
<p>Potting compost runs out of nutrients within six weeks. A high-potash liquid feed once a week from the first flowers made the biggest single difference to yield.</p>
<!--/G--><div class="sharedaddy sd-sharing-enabled"><div class="robots-nocontent sd-block sd-social sd-social-icon-text sd-sharing"><h3 class="sd-title">Share this:</h3><div class="sd-content"><ul><li class="share-facebook"><a rel="nofollow noopener noreferrer" class="share-facebook sd-button share-icon" href="?share=facebook" target="_blank" title="Click to share on Facebook"><span>Facebook</span></a></li><li class="share-pinterest"><a class="share-pinterest sd-button share-icon" href="?share=pinterest"><span>Pinterest</span></a></li><li class="share-end"></li></ul></div></div></div><div class='sharedaddy sd-block sd-like jetpack-likes-widget-wrapper jetpack-likes-widget-unloaded' id='like-post-wrapper-1234-812' data-name='like-post-frame-1234-812'><h3 class="sd-title">Like this:</h3><div class='likes-widget-placeholder post-likes-widget-placeholder' style='height: 55px;'><span class='button'><span>Like</span></span> <span class="loading">Loading...</span></div></div>
<div id='jp-relatedposts' class='jp-relatedposts' ><h3 class="jp-relatedposts-headline"><em>Related</em></h3><div class="jp-relatedposts-items jp-relatedposts-items-visual jp-relatedposts-grid"><div class="jp-relatedposts-post jp-relatedposts-post0 jp-relatedposts-post-thumbs" data-post-id="744" data-post-format="false"><a class="jp-relatedposts-post-a" href="/2024/09/saving-tomato-seed/" title="Saving tomato seed in a jam jar">Saving tomato seed in a jam jar</a><p class="jp-relatedposts-post-excerpt">Fermenting the seed for three days gets rid of the gel coat and some seed-borne disease.</p><p class="jp-relatedposts-post-date">September 3, 2024</p><p class="jp-relatedposts-post-context">In &quot;Vegetables&quot;</p></div><div class="jp-relatedposts-post jp-relatedposts-post1" data-post-id="701"><a class="jp-relatedposts-post-a" href="/2024/06/herbs-in-shade/">Five herbs that grow in the shade</a><p class="jp-relatedposts-post-excerpt">Mint, parsley, chives, chervil and lovage do not need full sun.</p><p class="jp-relatedposts-post-date">June 14, 2024</p></div></div></div></div>
<div class="ast-single-author-box ast-author-meta"><div class="ast-author-details"><div class="post-author-avatar"><img alt='' src='/avatar/ines.jpg' class='avatar avatar-100 photo' height='100' width='100' /></div><div class="post-author-bio"><a class="url fn n" href="/author/ines/" itemprop="url" rel="author"><h4 class="author-title" itemprop="name">Ines</h4></a><div class="post-author-desc">Ines grows vegetables on a fourth-floor balcony in Leeds and writes about small-space gardening. She has never owned a garden.</div></div></div></div>
<footer class="entry-footer"><span class="cat-links">Posted in <a href="/category/vegetables/" rel="category tag">Vegetables</a></span><span class="tags-links"> Tagged <a href="/tag/containers/" rel="tag">containers</a>, <a href="/tag/tomatoes/" rel="tag">tomatoes</a></span></footer></div></article><nav class="navigation post-navigation" aria-label="Posts"><div class="nav-links"><div class="nav-previous"><a href="/2025/03/chitting-potatoes/" rel="prev"><span class="ast-post-nav">&larr; Previous Post</span><p>Chitting potatoes on the windowsill</p></a></div><div class="nav-next"><a href="/2025/05/sweet-peas/" rel="next"><span class="ast-post-nav">Next Post &rarr;</span><p>Sweet peas up a drainpipe</p></a></div></div></nav>
<div id="comments" class="comments-area comment-form-position-below"><div class="comments-count-wrapper"><h3 class="comments-title">4 thoughts on &ldquo;Growing tomatoes in pots&rdquo;</h3></div><ol class="ast-comment-list"><li class="comment even thread-even depth-1" id="li-comment-91"><article id="comment-91" class="ast-comment"><div class="ast-comment-info"><header class="ast-comment-meta ast-row ast-comment-author vcard capitalize"><div class="ast-comment-cite-wrap"><cite><b class="fn">Rob</b></cite></div></header><section class="ast-comment-content comment"><p>Did you try Tumbling Tom? Ours did well in a hanging basket facing east.</p></section></div></article></li></ol><div id="respond" class="comment-respond"><h3 id="reply-title" class="comment-reply-title">Leave a Comment</h3><form action="/wp-comments-post.php" method="post" id="ast-commentform" class="comment-form"><p class="comment-notes"><span id="email-notes">Your email address will not be published.</span> Required fields are marked <span class="required">*</span></p><textarea id="comment" name="comment"></textarea><p class="comment-form-cookies-consent"><input id="wp-comment-cookies-consent" name="wp-comment-cookies-consent" type="checkbox" value="yes" /> <label for="wp-comment-cookies-consent">Save my name, email, and website in this browser for the next time I comment.</label></p></form></div></div></main></div>
<div class="widget-area secondary" id="secondary" role="complementary"><div class="sidebar-main"><aside id="search-2" class="widget widget_search"><form role="search" method="get" class="search-form" action="/"><input type="search" class="search-field" placeholder="Search &hellip;" name="s" /></form></aside><aside id="recent-posts-2" class="widget widget_recent_entries"><h2 class="widget-title">Recent Posts</h2><nav aria-label="Recent Posts"><ul><li><a href="/2025/05/sweet-peas/">Sweet peas up a drainpipe</a></li><li><a href="/2025/03/chitting-potatoes/">Chitting potatoes on the windowsill</a></li></ul></nav></aside></div></div></div></div>
<footer class="site-footer" id="colophon"><div class="site-below-footer-wrap ast-builder-grid-row-container site-footer-focus-item"><div class="ast-footer-copyright"><p>Copyright &copy; 2025 Green Balcony | Powered by Green Balcony</p></div></div></footer></div></body></html>""",
        "present": [
            "# Growing tomatoes in pots",
            "Our balcony gets three hours of direct sun",
            "## Bigger pots than you think",
            "Stupice | 2 August | 1.9 kg",
            "Our 2024 harvest, weighed every evening.",
            "made the biggest single difference to yield.",
        ],
        "absent": [
            "Saving tomato seed in a jam jar",
            "Share this:",
            "Ines grows vegetables on a fourth-floor balcony",
            "Chitting potatoes",
            "Did you try Tumbling Tom?",
            "Save my name, email",
        ],
    }
)

# 6. Short news brief (< 250 characters of text) in a heavy news chrome with a Didomi banner.
PAGES.append(
    {
        "name": "r10_news_short_brief_fr",
        "url": "https://www.lequotidien.example/faits-divers/2025/02/14/pont-ferme",
        "kind": "news",
        "lang": "fr",
        "html": f"""<!DOCTYPE html><html lang="fr"><head><meta charset="utf-8"><title>Le pont de la Gare fermé jusqu'à lundi - Le Quotidien</title></head><body class="article-page"><header class="header"><div class="header__top"><a class="header__logo" href="/">Le Quotidien</a><a class="header__subscribe" href="/abonnement">S'abonner dès 1 €</a><a href="/connexion">Se connecter</a></div><nav class="header__nav" role="navigation"><ul class="nav__list">{_menu("Actualité|Faits divers|Politique|Économie|Sports|Culture|Météo|Annonces légales|Jeux", "nav__item")}</ul></nav></header><div class="page"><div class="page__main"><nav class="breadcrumb"><a href="/">Accueil</a> &gt; <a href="/faits-divers">Faits divers</a></nav><div class="article"><div class="article__header"><!--G--><h1 class="article__title">Le pont de la Gare fermé jusqu'à lundi</h1><!--/G--><div class="article__meta"><span class="article__date">Publié le 14/02/2025 à 18h40</span><span class="article__author">La rédaction</span></div><div class="article__share"><a href="#">Partager sur Facebook</a><a href="#">Partager sur X</a><a href="#">Envoyer par e-mail</a></div></div><!--G--><div class="article__content"><p class="article__paragraph">Une fissure a été découverte vendredi sur une pile du pont de la Gare. L'ouvrage reste fermé à toute circulation jusqu'à lundi au moins, le temps d'une expertise. Une déviation est mise en place par le quai Nord.</p></div><!--/G--><div class="article__tags"><span>Mots-clés :</span><a href="/tag/circulation">Circulation</a><a href="/tag/travaux">Travaux</a></div></div>
<section class="related"><h2 class="related__title">À lire aussi</h2><ul class="related__list"><li class="related__item"><a href="/a1"><h3>Travaux : la rue Victor-Hugo en sens unique tout l'été</h3><p>La mairie a présenté jeudi le calendrier du chantier qui doit durer jusqu'en septembre et modifier la circulation dans tout le centre-ville.</p></a></li><li class="related__item"><a href="/a2"><h3>Inondations : le point sur les routes coupées dans le département</h3><p>Une dizaine de routes départementales restaient fermées samedi matin après les fortes pluies de la nuit.</p></a></li><li class="related__item"><a href="/a3"><h3>Le marché de Noël a attiré 80 000 visiteurs</h3><p>Un record pour la douzième édition, selon les organisateurs qui prévoient déjà de l'agrandir l'an prochain.</p></a></li></ul></section>
<section class="newsletter-box"><h2>Recevez l'essentiel de l'actualité</h2><p>Chaque matin, les informations de votre ville dans votre boîte mail.</p><form><input type="email" placeholder="Votre adresse e-mail"><button>Je m'inscris</button></form></section></div>
<aside class="page__aside"><div class="most-read"><h2>Les plus lus</h2><ol><li><a href="/m1">Un restaurant étoilé ouvre sur le port</a></li><li><a href="/m2">Carnaval : le programme complet du week-end</a></li><li><a href="/m3">Le lycée Jean-Moulin fermé après une fuite de gaz</a></li><li><a href="/m4">Football : le club local renverse le leader</a></li></ol></div><div class="pub">Publicité</div></aside></div>
<footer class="footer"><ul>{_menu("Qui sommes-nous|Contact|Mentions légales|Politique de confidentialité|Gérer mes cookies|CGV")}</ul><p>© Le Quotidien 2025 - Tous droits réservés</p></footer>
{DIDOMI.format(title="Vos choix concernant l'utilisation de cookies", text="Avec votre accord, nos partenaires et nous utilisons des cookies ou technologies similaires pour stocker et accéder à des informations personnelles comme votre visite sur ce site. Vous pouvez retirer votre consentement ou vous opposer aux traitements basés sur l'intérêt légitime à tout moment en cliquant sur « En savoir plus » ou dans notre politique de confidentialité sur ce site.", more="En savoir plus", agree="Accepter &amp; Fermer")}</body></html>""",
        "present": [
            "# Le pont de la Gare fermé jusqu'à lundi",
            "Une fissure a été découverte vendredi",
            "Une déviation est mise en place par le quai Nord.",
        ],
        "absent": [
            "Vos choix concernant l'utilisation de cookies",
            "la rue Victor-Hugo en sens unique",
            "Recevez l'essentiel",
            "Un restaurant étoilé",
            "Gérer mes cookies",
        ],
    }
)

# 7. Discourse topic (server-rendered crawler view): the posts are the content.
_POSTS = [
    (
        "anna_k",
        "<p>After upgrading to 3.2 our nightly backup job fails with <code>pg_dump: error: server version mismatch</code>. The container ships PostgreSQL 15 but the backup script still calls the version 13 client. Has anyone else run into this?</p>",
    ),
    (
        "falco",
        "<p>Yes, the backup image pins its own client. Set <code>PG_CLIENT_VERSION=15</code> in <code>app.yml</code> and rebuild:</p><pre><code>./launcher rebuild app</code></pre><p>That picks up the matching <code>pg_dump</code>.</p>",
    ),
    (
        "anna_k",
        "<p>That fixed it, thank you. The first backup after the rebuild took 14 minutes instead of the usual 9, but the ones since are back to normal.</p>",
    ),
    (
        "moderator_jo",
        "<p>Marking this as solved. For anyone finding this later: the release notes for 3.2 mention the client change under <em>Breaking changes</em>.</p>",
    ),
]
_PROP = {True: "mainEntity", False: "comment"}
_TYPE = {True: "DiscussionForumPosting", False: "Comment"}
_TOPICS_HTML = "".join(
    f'<tr class="topic-list-item"><td class="main-link" itemprop="itemListElement"><a href="/t/{i}" class="title raw-link raw-topic-link" itemprop="url">{t}</a><div class="link-bottom-line"><a href="/c/support/6" class="badge-wrapper bullet"><span class="badge-category clear-badge">Support</span></a></div></td><td class="replies"><span class="posts">{i + 2}</span></td><td class="views"><span class="views">{(i + 1) * 311}</span></td><td>Feb 2025</td></tr>'
    for i, t in enumerate(
        [
            "Restore from S3 backup hangs at 90%",
            "Upgrading PostgreSQL from 13 to 15 in the standard install",
            "Nightly backups are twice as large after 3.1",
        ]
    )
)
_POSTS_HTML = "".join(
    f'<div id="post_{i + 1}" itemprop="{_PROP[i == 0]}" itemscope itemtype="http://schema.org/{_TYPE[i == 0]}" class="topic-body crawler-post"><!--X--><div class="crawler-post-meta"><span class="creator" itemprop="author" itemscope itemtype="http://schema.org/Person"><a itemprop="url" href="/u/{u}"><span itemprop="name">{u}</span></a></span><span class="crawler-post-infos"><time itemprop="datePublished" datetime="2025-03-0{i + 1}T10:00:00Z" class="post-time">March {i + 1}, 2025, 10:00am</time><span itemprop="position">{i + 1}</span></span></div><!--/X--><div class="post" itemprop="text">{b}</div><!--X--><div itemprop="interactionStatistic" itemscope itemtype="http://schema.org/InteractionCounter"><meta itemprop="interactionType" content="http://schema.org/LikeAction"/><meta itemprop="userInteractionCount" content="{i}" /><span class="post-likes">{i} Likes</span></div><!--/X--></div>'
    for i, (u, b) in enumerate(_POSTS)
)
PAGES.append(
    {
        "name": "r10_forum_discourse",
        "url": "https://meta.community.example/t/backup-fails-after-upgrade-pg-dump-version-mismatch/28411",
        "kind": "forum",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en" class="desktop-view not-mobile-device text-size-normal anon"><head><meta charset="utf-8"><title>Backup fails after upgrade: pg_dump version mismatch - Support - Community Meta</title><link rel="canonical" href="https://meta.community.example/t/backup-fails-after-upgrade-pg-dump-version-mismatch/28411"><script type="application/ld+json">{json.dumps({"@context": "http://schema.org", "@type": "DiscussionForumPosting", "headline": "Backup fails after upgrade: pg_dump version mismatch", "author": {"@type": "Person", "name": "anna_k"}})}</script></head><body class="crawler"><header><a href="/"><img src="/uploads/logo.png" alt="Community Meta" id="site-logo"></a></header><div id="main-outlet" class="wrap" role="main"><div id="topic-title"><!--G--><h1><a href="/t/backup-fails-after-upgrade-pg-dump-version-mismatch/28411">Backup fails after upgrade: pg_dump version mismatch</a></h1><!--/G--><div class="topic-category" itemscope itemtype="http://schema.org/BreadcrumbList"><span itemprop="itemListElement"><a href="/c/support/6" class="badge-wrapper bullet" itemprop="item"><span class="badge-category-bg"></span><span class="badge-category clear-badge"><span class="category-name" itemprop="name">Support</span></span></a></span></div><div class="list-tags"><a href="/tag/backup" class="discourse-tag" rel="tag">backup</a>, <a href="/tag/postgres" class="discourse-tag" rel="tag">postgres</a></div></div>
<!--G-->{_POSTS_HTML}<!--/G-->
<div id="related-topics" class="more-topics__list " role="complementary" aria-labelledby="related-topics-title"><h3 id="related-topics-title" class="more-topics__list-title">Related topics</h3><div class="topic-list-container" itemscope itemtype="http://schema.org/ItemList"><table class="topic-list"><thead><tr><th>Topic</th><th></th><th>Replies</th><th>Views</th><th>Activity</th></tr></thead><tbody>{_TOPICS_HTML}</tbody></table></div></div></div>
<footer class="container wrap"><nav class="crawler-nav"><ul><li itemscope itemtype="http://schema.org/SiteNavigationElement"><span itemprop="name"><a href="/" itemprop="url">Home </a></span></li><li><span itemprop="name"><a href="/categories" itemprop="url">Categories </a></span></li><li><span itemprop="name"><a href="/guidelines" itemprop="url">Guidelines </a></span></li><li><span itemprop="name"><a href="/tos" itemprop="url">Terms of Service </a></span></li><li><span itemprop="name"><a href="/privacy" itemprop="url">Privacy Policy </a></span></li></ul></nav></footer><div id="noscript-footer"><p>Powered by <a href="https://www.discourse.org">Discourse</a>, best viewed with JavaScript enabled</p></div></body></html>""",
        "present": [
            "Backup fails after upgrade: pg_dump version mismatch",
            "our nightly backup job fails with",
            "./launcher rebuild app",
            "That fixed it, thank you.",
            "Marking this as solved.",
        ],
        "absent": [
            "Restore from S3 backup hangs at 90%",
            "Powered by Discourse",
            "Terms of Service",
        ],
    }
)

# 8. Shopify product page (Dawn theme): the description (.product__description.rte) with
# the product title and price; variant pickers, reviews app, "You may also like".
PAGES.append(
    {
        "name": "r10_shop_shopify_dawn",
        "url": "https://harbourknits.example/products/merino-fisherman-beanie",
        "kind": "shop",
        "lang": "en",
        "html": f"""<!doctype html><html class="no-js" lang="en"><head><meta charset="utf-8"><title>Merino Fisherman Beanie &ndash; Harbour Knits</title><script type="application/ld+json">{json.dumps({"@context": "http://schema.org/", "@type": "Product", "name": "Merino Fisherman Beanie", "offers": [{"@type": "Offer", "price": "34.00", "priceCurrency": "GBP", "availability": "http://schema.org/InStock"}], "description": "A ribbed beanie knitted from undyed merino."})}</script><script>window.ShopifyAnalytics = window.ShopifyAnalytics || {{}}; window.ShopifyAnalytics.meta = {{"product":{{"id":8123,"gid":"gid://shopify/Product/8123","vendor":"Harbour Knits","type":"Hats","variants":[{{"id":4401,"price":3400,"name":"Merino Fisherman Beanie - Oatmeal"}}]}}}};</script></head><body class="gradient"><a class="skip-to-content-link button visually-hidden" href="#MainContent">Skip to content</a><div id="shopify-section-announcement-bar" class="shopify-section"><div class="announcement-bar" role="region" aria-label="Announcement"><p class="announcement-bar__message h5">Free UK delivery on orders over £50</p></div></div><div id="shopify-section-header" class="shopify-section section-header"><sticky-header class="header-wrapper color-background-1 gradient"><header class="header header--middle-left header--mobile-center page-width header--has-menu"><a href="/" class="header__heading-link link link--text focus-inset"><span class="h2">Harbour Knits</span></a><nav class="header__inline-menu"><ul class="list-menu list-menu--inline" role="list">{_menu("Shop all|Hats|Scarves|Jumpers|Yarn|Our story|Journal", "list-menu__item")}</ul></nav><div class="header__icons"><a href="/search" class="header__icon header__icon--search">Search</a><a href="/account/login" class="header__icon header__icon--account">Log in</a><a href="/cart" class="header__icon header__icon--cart" id="cart-icon-bubble">Cart</a></div></header></sticky-header></div>
<main id="MainContent" class="content-for-layout focus-none" role="main" tabindex="-1"><section id="shopify-section-template--main" class="shopify-section section"><section class="page-width section-template--main-padding"><div class="product product--large product--left product--thumbnail_slider product--mobile-hide grid grid--1-col grid--2-col-tablet"><div class="grid__item product__media-wrapper"><media-gallery id="MediaGallery-template--main" role="region" class="product__column-sticky" aria-label="Gallery Viewer"><div id="GalleryStatus-template--main" class="visually-hidden" role="status"></div><slider-component id="GalleryViewer-template--main" class="slider-mobile-gutter"><ul id="Slider-Gallery-template--main" class="product__media-list contains-media grid grid--peek list-unstyled slider slider--mobile" role="list"><li class="product__media-item grid__item slider__slide is-active"><div class="product-media-container media-type-image media-fit-contain"><img src="//harbourknits.example/cdn/shop/files/beanie-oatmeal.jpg?v=1&amp;width=1946" alt="Oatmeal merino beanie on a wooden table" width="1946" height="1946"></div></li></ul></slider-component></media-gallery></div>
<div class="product__info-wrapper grid__item"><section id="ProductInfo-template--main" class="product__info-container product__column-sticky"><p class="product__text inline-richtext caption-with-letter-spacing">Harbour Knits</p><div class="product__title"><!--G--><h1>Merino Fisherman Beanie</h1><!--/G--></div><div class="no-js-hidden" id="price-template--main" role="status"><div class="price price--large price--show-badge"><div class="price__container"><div class="price__regular"><span class="visually-hidden visually-hidden--inline">Regular price</span><span class="price-item price-item--regular">£34.00 GBP</span></div></div></div></div><div class="product__tax caption rte">Tax included. <a href="/policies/shipping-policy">Shipping</a> calculated at checkout.</div><variant-radios class="no-js-hidden" data-section="template--main" data-url="/products/merino-fisherman-beanie"><fieldset class="js product-form__input"><legend class="form__label">Colour</legend><input type="radio" id="c-1" name="Colour" value="Oatmeal" checked><label for="c-1">Oatmeal</label><input type="radio" id="c-2" name="Colour" value="Charcoal"><label for="c-2">Charcoal</label><input type="radio" id="c-3" name="Colour" value="Sea green"><label for="c-3">Sea green</label></fieldset></variant-radios><div class="product-form__input product-form__quantity"><label class="quantity__label form__label" for="Quantity">Quantity</label><quantity-input class="quantity"><button class="quantity__button" name="minus" type="button">-</button><input class="quantity__input" type="number" name="quantity" id="Quantity" min="1" value="1"><button class="quantity__button" name="plus" type="button">+</button></quantity-input></div><div><product-form class="product-form" data-hide-errors="false"><form method="post" action="/cart/add" id="product-form-template--main" accept-charset="UTF-8" class="form" enctype="multipart/form-data" novalidate="novalidate" data-type="add-to-cart-form"><input type="hidden" name="form_type" value="product"><div class="product-form__buttons"><button id="ProductSubmitButton-template--main" type="submit" name="add" class="product-form__submit button button--full-width button--secondary"><span>Add to cart</span></button><div data-shopify="payment-button" class="shopify-payment-button"></div></div></form></product-form></div>
<!--G--><div class="product__description rte quick-add-hidden"><p>A close-fitting ribbed beanie knitted in the Yorkshire Dales from undyed British merino. The fisherman rib is deep enough to fold the brim twice over the ears.</p><ul><li>100% British merino wool, undyed</li><li>One size, stretches to fit 54–60 cm</li><li>Hand wash cold and dry flat</li></ul><p>Each beanie takes about four hours to knit on our hand-operated machine and is finished by hand.</p></div><!--/G-->
<div class="product__accordion accordion quick-add-hidden"><details id="Details-collapsible-row-0"><summary><div class="summary__title"><h2 class="h4 accordion__title inline-richtext">Shipping &amp; Returns</h2></div></summary><div class="accordion__content rte" id="ProductAccordion-collapsible-row-0"><p>Free UK delivery on orders over £50. Returns accepted within 30 days of delivery.</p></div></details></div><share-button id="Share-template--main" class="share-button quick-add-hidden"><button class="share-button__button hidden">Share</button><details><summary class="share-button__button">Share</summary><div class="share-button__fallback"><input type="text" class="field__input" id="url" value="https://harbourknits.example/products/merino-fisherman-beanie"><button class="share-button__copy">Copy link</button></div></details></share-button></section></div></div></section></section>
<div id="shopify-section-template--reviews" class="shopify-section"><div class="jdgm-widget jdgm-review-widget jdgm--done-setup" data-id="8123"><div class="jdgm-rev-widg"><h2 class="jdgm-rev-widg__title">Customer Reviews</h2><div class="jdgm-rev-widg__summary"><div class="jdgm-rev-widg__summary-text">Based on 18 reviews</div></div><div class="jdgm-rev-widg__reviews"><div class="jdgm-rev jdgm-divider-top"><div class="jdgm-rev__header"><span class="jdgm-rev__author">Claire</span><span class="jdgm-rev__timestamp">01/12/2024</span></div><div class="jdgm-rev__content"><b class="jdgm-rev__title">Warmest hat I own</b><div class="jdgm-rev__body"><p>Bought the charcoal one for winter swimming, it is properly warm and has not lost its shape after a season of use.</p></div></div></div></div></div></div></div>
<section id="shopify-section-template--related" class="shopify-section"><product-recommendations class="related-products page-width section-template--related-padding isolate" data-url="/recommendations/products?section_id=template--related&amp;product_id=8123&amp;limit=4"><h2 class="related-products__heading inline-richtext h2">You may also like</h2><ul class="grid product-grid grid--4-col-desktop" role="list"><li class="grid__item"><div class="card-wrapper product-card-wrapper"><div class="card__content"><h3 class="card__heading h5"><a href="/products/cable-scarf" class="full-unstyled-link">Cable Knit Scarf</a></h3><div class="price"><span class="price-item price-item--regular">£58.00 GBP</span></div></div></div></li><li class="grid__item"><div class="card__content"><h3 class="card__heading h5"><a href="/products/sea-socks" class="full-unstyled-link">Sea Boot Socks</a></h3><div class="price"><span class="price-item">£22.00 GBP</span></div></div></li></ul></product-recommendations></section></main>
<div id="shopify-section-footer" class="shopify-section"><footer class="footer color-background-1 gradient section-footer-padding"><div class="footer__content-top page-width"><div class="footer-block grid__item footer-block--newsletter"><h2 class="footer-block__heading">Subscribe to our emails</h2><form method="post" action="/contact#ContactFooter" id="ContactFooter" class="footer__newsletter newsletter-form"><input id="NewsletterForm--footer" type="email" name="contact[email]" class="field__input" placeholder="Email"></form></div></div><div class="footer__content-bottom"><div class="footer__copyright caption"><small class="copyright__content">&copy; 2025, <a href="/">Harbour Knits</a></small><small class="copyright__content"><a target="_blank" rel="nofollow" href="https://www.shopify.com">Powered by Shopify</a></small></div></div></footer></div>
{COOKIEBOT.format(lang="en", consent="Consent", details="Details", title="This website uses cookies", text="We use cookies to personalise content and ads, to provide social media features and to analyse our traffic. We also share information about your use of our site with our social media, advertising and analytics partners who may combine it with other information that you've provided to them.", deny="Deny", allow="Allow all")}</body></html>""",
        "present": [
            "Merino Fisherman Beanie",
            "A close-fitting ribbed beanie knitted in the Yorkshire Dales",
            "- One size, stretches to fit 54–60 cm",
            "finished by hand.",
        ],
        "absent": [
            "This website uses cookies",
            "Cable Knit Scarf",
            "Subscribe to our emails",
            "Powered by Shopify",
            "Allow all",
        ],
    }
)

# 9. MkDocs Material: article.md-content__inner.md-typeset, navigation drawers on both
# sides, admonitions, code with line numbers in a table, a footer with prev/next.
PAGES.append(
    {
        "name": "r10_docs_mkdocs_material",
        "url": "https://docs.tidepool.example/guides/retries/",
        "kind": "docs",
        "lang": "en",
        "html": f"""<!doctype html><html lang="en" class="no-js"><head><meta charset="utf-8"><title>Retries and backoff - Tidepool</title><link rel="stylesheet" href="../../assets/stylesheets/main.6543a935.min.css"></head><body dir="ltr" data-md-color-scheme="default" data-md-color-primary="indigo"><input class="md-toggle" data-md-toggle="drawer" type="checkbox" id="__drawer" autocomplete="off"><input class="md-toggle" data-md-toggle="search" type="checkbox" id="__search" autocomplete="off"><label class="md-overlay" for="__drawer"></label><div data-md-component="skip"><a href="#retries-and-backoff" class="md-skip">Skip to content</a></div><header class="md-header md-header--shadow" data-md-component="header"><nav class="md-header__inner md-grid" aria-label="Header"><a href="../.." title="Tidepool" class="md-header__button md-logo" aria-label="Tidepool" data-md-component="logo"></a><div class="md-header__title" data-md-component="header-title"><div class="md-header__ellipsis"><div class="md-header__topic"><span class="md-ellipsis">Tidepool</span></div><div class="md-header__topic" data-md-component="header-topic"><span class="md-ellipsis">Retries and backoff</span></div></div></div><div class="md-search" data-md-component="search" role="dialog"><label class="md-search__overlay" for="__search"></label><div class="md-search__inner" role="search"><form class="md-search__form" name="search"><input type="text" class="md-search__input" name="query" aria-label="Search" placeholder="Search"></form></div></div><div class="md-header__source"><a href="https://github.com/tidepool/tidepool" title="Go to repository" class="md-source" data-md-component="source"><div class="md-source__repository">tidepool/tidepool</div></a></div></nav></header>
<div class="md-container" data-md-component="container"><nav class="md-tabs" aria-label="Tabs" data-md-component="tabs"><div class="md-grid"><ul class="md-tabs__list">{_menu("Home|Getting started|Guides|Reference|Changelog", "md-tabs__item")}</ul></div></nav><main class="md-main" data-md-component="main"><div class="md-main__inner md-grid"><div class="md-sidebar md-sidebar--primary" data-md-component="sidebar" data-md-type="navigation"><div class="md-sidebar__scrollwrap"><div class="md-sidebar__inner"><nav class="md-nav md-nav--primary md-nav--lifted" aria-label="Navigation" data-md-level="0"><ul class="md-nav__list" data-md-scrollfix>{_menu("Installation|Configuration|Connections|Retries and backoff|Timeouts|Logging|Testing with fakes|Deploying", "md-nav__item")}</ul></nav></div></div></div><div class="md-sidebar md-sidebar--secondary" data-md-component="sidebar" data-md-type="toc"><div class="md-sidebar__scrollwrap"><div class="md-sidebar__inner"><nav class="md-nav md-nav--secondary" aria-label="Table of contents"><label class="md-nav__title" for="__toc">Table of contents</label><ul class="md-nav__list" data-md-component="toc" data-md-scrollfix><li class="md-nav__item"><a href="#the-default-policy" class="md-nav__link">The default policy</a></li><li class="md-nav__item"><a href="#idempotent-requests" class="md-nav__link">Idempotent requests</a></li></ul></nav></div></div></div>
<div class="md-content" data-md-component="content"><article class="md-content__inner md-typeset"><a href="https://github.com/tidepool/tidepool/edit/main/docs/guides/retries.md" title="Edit this page" class="md-content__button md-icon">Edit</a><!--G--><h1 id="retries-and-backoff">Retries and backoff<a class="headerlink" href="#retries-and-backoff" title="Permanent link">&para;</a></h1>
<p>Tidepool retries a failed request when the failure is likely to be temporary: a connection reset, a timeout, or a 502, 503 or 504 response.</p>
<h2 id="the-default-policy">The default policy<a class="headerlink" href="#the-default-policy" title="Permanent link">&para;</a></h2>
<p>By default a request is tried up to three times, waiting 0.5 seconds before the second attempt and 1 second before the third, with up to 20% random jitter.</p>
<div class="language-python highlight"><table class="highlighttable"><tr><!--X--><td class="linenos"><div class="linenodiv"><pre><span></span><span class="normal">1</span>
<span class="normal">2</span>
<span class="normal">3</span></pre></div></td><!--/X--><td class="code"><div><pre><span></span><code><span class="kn">from</span> <span class="nn">tidepool</span> <span class="kn">import</span> <span class="n">Client</span><span class="p">,</span> <span class="n">Retry</span>
<span class="n">client</span> <span class="o">=</span> <span class="n">Client</span><span class="p">(</span><span class="n">retry</span><span class="o">=</span><span class="n">Retry</span><span class="p">(</span><span class="n">attempts</span><span class="o">=</span><span class="mi">5</span><span class="p">))</span>
</code></pre></div></td></tr></table></div>
<div class="admonition warning"><p class="admonition-title">Warning</p><p>Retries multiply the load on a struggling server. Keep the number of attempts low for calls made inside a web request.</p></div>
<h2 id="idempotent-requests">Idempotent requests<a class="headerlink" href="#idempotent-requests" title="Permanent link">&para;</a></h2>
<p>Only GET, HEAD, PUT, DELETE and OPTIONS requests are retried. A POST is retried only when it carries an <code>Idempotency-Key</code> header.</p>
<!--/G--><aside class="md-source-file"><span class="md-source-file__fact"><span class="md-icon" title="Last update"></span><span class="git-revision-date-localized-plugin git-revision-date-localized-plugin-date">March 4, 2025</span></span></aside></article></div>
<script>var tabs=__md_get("__tabs");</script></div></main>
<footer class="md-footer"><nav class="md-footer__inner md-grid" aria-label="Footer"><a href="../connections/" class="md-footer__link md-footer__link--prev" aria-label="Previous: Connections"><div class="md-footer__title"><span class="md-footer__direction">Previous</span><div class="md-ellipsis">Connections</div></div></a><a href="../timeouts/" class="md-footer__link md-footer__link--next" aria-label="Next: Timeouts"><div class="md-footer__title"><span class="md-footer__direction">Next</span><div class="md-ellipsis">Timeouts</div></div></a></nav><div class="md-footer-meta md-typeset"><div class="md-footer-meta__inner md-grid"><div class="md-copyright"><div class="md-copyright__highlight">Copyright &copy; 2025 Tidepool contributors</div>Made with <a href="https://squidfunk.github.io/mkdocs-material/" target="_blank" rel="noopener">Material for MkDocs</a></div></div></div></footer></div></body></html>""",
        "present": [
            "# Retries and backoff",
            "## The default policy",
            "client = Client(retry=Retry(attempts=5))",
            "Retries multiply the load on a struggling server.",
            "carries an Idempotency-Key header.",
        ],
        "absent": ["Made with", "Testing with fakes", "Table of contents", "Previous"],
    }
)

# 10. Docusaurus: article > div.theme-doc-markdown.markdown; breadcrumbs, a TOC column,
# "Edit this page", pagination nav, tabs (only the first tab is visible).
PAGES.append(
    {
        "name": "r10_docs_docusaurus",
        "url": "https://kelpjs.example/docs/guides/caching",
        "kind": "docs",
        "lang": "en",
        "html": f"""<!doctype html><html lang="en" dir="ltr" class="docs-wrapper plugin-docs plugin-id-default docs-version-current docs-doc-page docs-doc-id-guides/caching" data-has-hydrated="false"><head><meta charset="UTF-8"><title data-rh="true">Caching | Kelp</title><link rel="stylesheet" href="/assets/css/styles.3b1c4d.css"></head><body class="navigation-with-keyboard"><script>!function(){{var t=localStorage.getItem("theme");document.documentElement.setAttribute("data-theme",t||"light")}}()</script><div id="__docusaurus"><div role="region" aria-label="Skip to main content"><a class="skipToContent_fXgn" href="#__docusaurus_skipToContent_fallback">Skip to main content</a></div><nav aria-label="Main" class="navbar navbar--fixed-top"><div class="navbar__inner"><div class="navbar__items"><a class="navbar__brand" href="/"><b class="navbar__title text--truncate">Kelp</b></a><a aria-current="page" class="navbar__item navbar__link navbar__link--active" href="/docs/intro">Docs</a><a class="navbar__item navbar__link" href="/api">API</a><a class="navbar__item navbar__link" href="/blog">Blog</a></div><div class="navbar__items navbar__items--right"><a href="https://github.com/kelpjs/kelp" target="_blank" rel="noopener noreferrer" class="navbar__item navbar__link">GitHub</a><div class="navbarSearchContainer_Bca1"><button type="button" class="DocSearch DocSearch-Button" aria-label="Search"><span class="DocSearch-Button-Placeholder">Search</span></button></div></div></div></nav><div id="__docusaurus_skipToContent_fallback" class="main-wrapper mainWrapper_z2l0"><div class="docsWrapper_hBAB"><div class="docRoot_UBD9"><aside class="theme-doc-sidebar-container docSidebarContainer_YfHR"><div class="sidebarViewport_aRkj"><div class="sidebar_njMd"><nav aria-label="Docs sidebar" class="menu thin-scrollbar menu_SIkG"><ul class="theme-doc-sidebar-menu menu__list">{_menu("Introduction|Installation|Routing|Data loading|Caching|Deployment|Plugins|FAQ", "theme-doc-sidebar-item-link menu__list-item")}</ul></nav></div></div></aside><main class="docMainContainer_TBSr"><div class="container padding-top--md padding-bottom--lg"><div class="row"><div class="col docItemCol_VOVn"><div class="docItemContainer_Djhp"><article><nav class="theme-doc-breadcrumbs breadcrumbsContainer_Z_bl" aria-label="Breadcrumbs"><ul class="breadcrumbs" itemscope="" itemtype="https://schema.org/BreadcrumbList"><li class="breadcrumbs__item"><a aria-label="Home page" class="breadcrumbs__link" href="/">Home</a></li><li class="breadcrumbs__item"><span class="breadcrumbs__link">Guides</span></li><li class="breadcrumbs__item breadcrumbs__item--active"><span class="breadcrumbs__link" itemprop="name">Caching</span></li></ul></nav><div class="tocCollapsible_ETCw theme-doc-toc-mobile tocMobile_ITEo"><button type="button" class="clean-btn tocCollapsibleButton_TO0P">On this page</button></div>
<!--G--><div class="theme-doc-markdown markdown"><header><h1>Caching</h1></header>
<p>Kelp caches the result of every data loader for the lifetime of a request. Across requests, nothing is cached unless a loader says so.</p>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="opting-in">Opting in<a href="#opting-in" class="hash-link" aria-label="Direct link to Opting in" title="Direct link to Opting in">&ZeroWidthSpace;</a></h2>
<p>Return a <code>maxAge</code> in seconds from a loader to let Kelp keep its result in the shared cache:</p>
<div class="tabs-container tabList__CuJ"><ul role="tablist" aria-orientation="horizontal" class="tabs"><li role="tab" tabindex="0" aria-selected="true" class="tabs__item tabItem_LNqP tabs__item--active">npm</li><li role="tab" tabindex="-1" aria-selected="false" class="tabs__item tabItem_LNqP">yarn</li></ul><div class="margin-top--md"><div role="tabpanel" class="tabItem_Ymn6"><div class="language-js codeBlockContainer_Ckt0 theme-code-block"><div class="codeBlockContent_biex"><pre tabindex="0" class="prism-code language-js codeBlock_bY9V thin-scrollbar"><code class="codeBlockLines_e6Vv"><span class="token-line"><span class="token keyword">export</span> <span class="token keyword">const</span> <span class="token function-variable function">load</span> <span class="token operator">=</span> <span class="token punctuation">(</span><span class="token punctuation">)</span> <span class="token operator">=&gt;</span> <span class="token punctuation">(</span><span class="token punctuation">{{</span> maxAge<span class="token operator">:</span> <span class="token number">60</span> <span class="token punctuation">}}</span><span class="token punctuation">)</span><span class="token punctuation">;</span></span></code></pre></div></div></div><div role="tabpanel" class="tabItem_Ymn6" hidden=""><div class="language-js codeBlockContainer_Ckt0 theme-code-block"><pre class="prism-code language-js"><code>yarn add @kelp/cache-redis</code></pre></div></div></div></div>
<div class="theme-admonition theme-admonition-tip admonition_xJq3 alert alert--success"><div class="admonitionHeading_Gvgb">tip</div><div class="admonitionContent_BuS1"><p>Set <code>maxAge</code> to 0 in development to see fresh data on every reload.</p></div></div>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="invalidation">Invalidation<a href="#invalidation" class="hash-link" aria-label="Direct link to Invalidation">&ZeroWidthSpace;</a></h2>
<p>Call <code>invalidate(key)</code> from an action to drop one entry, or <code>invalidateAll()</code> after a deployment.</p></div><!--/G-->
<footer class="theme-doc-footer docusaurus-mt-lg"><div class="theme-doc-footer-edit-meta-row row"><div class="col"><a href="https://github.com/kelpjs/kelp/edit/main/docs/guides/caching.md" target="_blank" rel="noopener noreferrer" class="theme-edit-this-page">Edit this page</a></div><div class="col lastUpdated_JAkA"><span class="theme-last-updated">Last updated on <b><time datetime="2025-02-11T09:00:00.000Z">Feb 11, 2025</time></b></span></div></div></footer></article><nav class="pagination-nav docusaurus-mt-lg" aria-label="Docs pages"><a class="pagination-nav__link pagination-nav__link--prev" href="/docs/guides/data-loading"><div class="pagination-nav__sublabel">Previous</div><div class="pagination-nav__label">Data loading</div></a><a class="pagination-nav__link pagination-nav__link--next" href="/docs/guides/deployment"><div class="pagination-nav__sublabel">Next</div><div class="pagination-nav__label">Deployment</div></a></nav></div></div><div class="col col--3"><div class="tableOfContents_bqdL thin-scrollbar theme-doc-toc-desktop"><ul class="table-of-contents table-of-contents__left-border"><li><a href="#opting-in" class="table-of-contents__link toc-highlight">Opting in</a></li><li><a href="#invalidation" class="table-of-contents__link toc-highlight">Invalidation</a></li></ul></div></div></div></div></main></div></div></div><footer class="footer footer--dark"><div class="container container-fluid"><div class="row footer__links"><div class="col footer__col"><div class="footer__title">Community</div><ul class="footer__items clean-list"><li class="footer__item"><a href="https://discord.example/kelp" class="footer__link-item">Discord</a></li><li class="footer__item"><a href="https://x.example/kelpjs" class="footer__link-item">X</a></li></ul></div></div><div class="footer__bottom text--center"><div class="footer__copyright">Copyright © 2025 Kelp contributors. Built with Docusaurus.</div></div></div></footer></div></body></html>""",
        "present": [
            "# Caching",
            "Kelp caches the result of every data loader",
            "## Opting in",
            "export const load = () => ({ maxAge: 60 });",
            "Set maxAge to 0 in development",
            "invalidateAll() after a deployment.",
        ],
        "absent": [
            "Edit this page",
            "Built with Docusaurus",
            "Data loading",
            "yarn add @kelp/cache-redis",
            "On this page",
        ],
    }
)

# 11. GOV.UK guidance page (govuk-frontend): govuk-cookie-banner, gem-c-govspeak body,
# contents list, related navigation, "Is this page useful?" feedback.
PAGES.append(
    {
        "name": "r10_gov_govuk",
        "url": "https://www.gov.example/guidance/register-a-private-water-supply",
        "kind": "government",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en" class="govuk-template govuk-template--rebranded"><head><meta charset="utf-8"><title>Register a private water supply - GOV.UK</title></head><body class="govuk-template__body"><script>document.body.className += ' js-enabled' + ('noModule' in HTMLScriptElement.prototype ? ' govuk-frontend-supported' : '');</script><div id="global-cookie-message" class="gem-c-cookie-banner govuk-clearfix" data-module="cookie-banner" data-nosnippet role="region" aria-label="Cookies on GOV.UK"><div class="govuk-cookie-banner js-banner-wrapper" role="region" aria-label="Cookies on GOV.UK"><div class="gem-c-cookie-banner__message govuk-cookie-banner__message govuk-width-container"><div class="govuk-grid-row"><div class="govuk-grid-column-two-thirds"><h2 class="govuk-cookie-banner__heading govuk-heading-m">Cookies on GOV.UK</h2><div tabindex="-1" class="govuk-cookie-banner__content gem-c-cookie-banner__content"><p class="govuk-body">We use some essential cookies to make this website work.</p><p class="govuk-body">We’d like to set additional cookies to understand how you use GOV.UK, remember your settings and improve government services.</p><p class="govuk-body">We also use cookies set by other sites to help us deliver content from their services.</p></div></div></div><div class="js-confirmation-buttons govuk-button-group"><button class="govuk-button" type="submit" data-accept-cookies="true">Accept additional cookies</button><button class="govuk-button" type="submit" data-reject-cookies="true">Reject additional cookies</button><a class="govuk-link" href="/help/cookies">View cookies</a></div></div></div></div><a href="#main-content" class="govuk-skip-link" data-module="govuk-skip-link">Skip to main content</a>
<header class="gem-c-layout-super-navigation-header" role="banner" data-module="super-navigation-mega-menu"><div class="gem-c-layout-super-navigation-header__container govuk-width-container"><a class="govuk-header__link govuk-header__link--homepage" href="/">GOV.UK</a><nav aria-labelledby="super-navigation-menu-heading" class="gem-c-layout-super-navigation-header__content"><h2 id="super-navigation-menu-heading" class="govuk-visually-hidden">Navigation menu</h2><div class="gem-c-layout-super-navigation-header__navigation-item"><a class="gem-c-layout-super-navigation-header__navigation-item-link" href="/browse">Menu</a></div><div id="super-navigation-menu" hidden class="gem-c-layout-super-navigation-header__navigation-dropdown-menu"><ul class="govuk-list">{_menu("Benefits|Births, death, marriages and care|Business and self-employed|Childcare and parenting|Citizenship and living in the UK|Crime, justice and the law|Disabled people|Driving and transport|Education and learning|Employing people|Environment and countryside|Housing and local services|Money and tax|Passports, travel and living abroad|Visas and immigration|Working, jobs and pensions", "govuk-list__item")}</ul></div></nav></div></header>
<div class="govuk-width-container"><div class="gem-c-contextual-breadcrumbs"><div class="govuk-breadcrumbs" data-module="ga4-link-tracker"><ol class="govuk-breadcrumbs__list"><li class="govuk-breadcrumbs__list-item"><a class="govuk-breadcrumbs__link" href="/">Home</a></li><li class="govuk-breadcrumbs__list-item"><a class="govuk-breadcrumbs__link" href="/environment">Environment</a></li><li class="govuk-breadcrumbs__list-item"><a class="govuk-breadcrumbs__link" href="/environment/water">Water</a></li></ol></div></div>
<main role="main" id="main-content" class="govuk-main-wrapper govuk-main-wrapper--auto-spacing" lang="en"><div class="govuk-grid-row gem-print-columns-none"><div class="govuk-grid-column-two-thirds"><div class="gem-c-heading govuk-!-margin-bottom-8"><span class="govuk-caption-xl gem-c-heading__context">Guidance</span><!--G--><h1 class="gem-c-heading__text govuk-heading-l">Register a private water supply</h1><!--/G--></div></div><div class="govuk-grid-column-two-thirds"><!--G--><p class="gem-c-lead-paragraph">How to register a borehole, spring or well that supplies drinking water to more than one household or to a business.</p><!--/G--></div></div>
<div class="govuk-grid-row gem-print-columns-none"><div class="govuk-grid-column-two-thirds"><div class="gem-c-metadata" data-module="gem-toggle metadata"><dl><dt class="gem-c-metadata__term">From:</dt><dd class="gem-c-metadata__definition"><a href="/government/organisations/water-inspectorate" class="govuk-link">Drinking Water Inspectorate</a></dd><dt class="gem-c-metadata__term">Published</dt><dd class="gem-c-metadata__definition">3 April 2024</dd><dt class="gem-c-metadata__term">Last updated</dt><dd class="gem-c-metadata__definition">12 February 2025</dd></dl></div></div></div>
<div class="govuk-grid-row gem-print-columns-none"><div class="govuk-grid-column-two-thirds"><aside class="gem-c-contents-list" aria-label="Contents" role="navigation"><h2 class="gem-c-contents-list__title">Contents</h2><ol class="gem-c-contents-list__list"><li class="gem-c-contents-list__list-item"><a class="gem-c-contents-list__link govuk-link" href="#who-must-register">Who must register</a></li><li class="gem-c-contents-list__list-item"><a class="gem-c-contents-list__link govuk-link" href="#how-to-register">How to register</a></li><li class="gem-c-contents-list__list-item"><a class="gem-c-contents-list__link govuk-link" href="#testing">Testing</a></li></ol></aside>
<!--G--><div class="gem-c-govspeak govuk-govspeak" data-module="govspeak"><div class="govspeak">
<h2 id="who-must-register">Who must register</h2><p>You must register a private water supply with your local council if it provides water for drinking, cooking or washing to:</p><ul><li>2 or more households</li><li>a business, including holiday lets and campsites</li><li>a public building such as a school or village hall</li></ul><p>A supply to a single household does not need to be registered, but the council may still test it on request.</p>
<h2 id="how-to-register">How to register</h2><p>Contact the environmental health team at your council. You will need to give:</p><ol class="steps"><li>the location of the source and any storage tanks</li><li>the number of properties and people it supplies</li><li>any treatment you use, such as UV filters</li></ol><div role="note" aria-label="Information" class="application-notice info-notice"><p>Registration is free. You can be fined up to £1,000 if you do not register a supply that should be registered.</p></div>
<h2 id="testing">Testing</h2><p>The council will carry out a risk assessment every 5 years and test the water at least once a year. Councils can charge up to £100 for a sample visit and £25 to £100 per analysis.</p>
</div></div><!--/G-->
<div class="gem-c-print-link govuk-!-display-none-print"><button class="govuk-link govuk-body-s gem-c-print-link__button" data-module="print-link">Print this page</button></div></div>
<div class="govuk-grid-column-one-third"><div class="gem-c-related-navigation"><h2 id="related-nav-related_items" class="gem-c-related-navigation__main-heading" data-track-count="sidebarRelatedItemSection">Related content</h2><nav class="gem-c-related-navigation__nav-section" aria-labelledby="related-nav-related_items" data-module="gem-toggle"><ul class="gem-c-related-navigation__link-list"><li class="gem-c-related-navigation__link"><a class="govuk-link gem-c-related-navigation__section-link" href="/private-water-supplies-testing">Private water supplies: test results and what they mean</a></li><li class="gem-c-related-navigation__link"><a class="govuk-link" href="/borehole-abstraction-licence">Get a licence to take water from a borehole</a></li></ul></nav></div></div></div>
<div class="gem-c-feedback govuk-!-display-none-print" data-module="feedback ga4-event-tracker"><div class="gem-c-feedback__prompt gem-c-feedback__js-show js-prompt" tabindex="-1"><div class="gem-c-feedback__prompt-content"><div class="gem-c-feedback__prompt-questions js-prompt-questions"><div class="gem-c-feedback__prompt-question-answer"><h2 class="gem-c-feedback__prompt-question">Is this page useful?</h2><ul class="gem-c-feedback__option-list"><li class="gem-c-feedback__option-list-item"><button class="govuk-button gem-c-feedback__prompt-link">Yes</button></li><li><button class="govuk-button gem-c-feedback__prompt-link">No</button></li></ul></div></div><div class="gem-c-feedback__prompt-questions"><button class="govuk-button gem-c-feedback__prompt-link">Report a problem with this page</button></div></div></div></div></main></div>
<footer class="gem-c-layout-footer govuk-footer" role="contentinfo"><div class="govuk-width-container"><div class="govuk-footer__navigation"><div class="govuk-grid-column-two-thirds"><h2 class="govuk-footer__heading govuk-heading-m">Services and information</h2><ul class="govuk-footer__list govuk-footer__list--columns-2">{_menu("Benefits|Business and self-employed|Childcare and parenting|Driving and transport|Money and tax|Working, jobs and pensions", "govuk-footer__list-item")}</ul></div></div><div class="govuk-footer__meta"><div class="govuk-footer__meta-item govuk-footer__meta-item--grow"><h2 class="govuk-visually-hidden">Support links</h2><ul class="govuk-footer__inline-list"><li class="govuk-footer__inline-list-item"><a class="govuk-footer__link" href="/help">Help</a></li><li class="govuk-footer__inline-list-item"><a class="govuk-footer__link" href="/help/privacy-notice">Privacy</a></li><li class="govuk-footer__inline-list-item"><a class="govuk-footer__link" href="/help/cookies">Cookies</a></li></ul><span class="govuk-footer__licence-description">All content is available under the <a class="govuk-footer__link" href="https://www.nationalarchives.gov.uk/doc/open-government-licence/version/3/" rel="license">Open Government Licence v3.0</a>, except where otherwise stated</span></div><div class="govuk-footer__meta-item"><a class="govuk-footer__link govuk-footer__copyright-logo" href="https://www.nationalarchives.gov.uk/information-management/re-using-public-sector-information/uk-government-licensing-framework/crown-copyright/">© Crown copyright</a></div></div></div></footer></body></html>""",
        "present": [
            "# Register a private water supply",
            "How to register a borehole, spring or well",
            "- 2 or more households",
            "## How to register",
            "Registration is free.",
            "£25 to £100 per analysis.",
        ],
        "absent": [
            "We use some essential cookies",
            "Is this page useful?",
            "Private water supplies: test results",
            "Open Government Licence",
            "Childcare and parenting",
        ],
    }
)

# 12. MediaWiki article whose references (footnotes) ARE content; infobox, navbox, catlinks,
# edit section links, "Jump to navigation".
PAGES.append(
    {
        "name": "r10_wiki_mediawiki_refs",
        "url": "https://wiki.example.org/wiki/Tidal_mill",
        "kind": "wiki",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html class="client-nojs vector-feature-language-in-header-enabled" lang="en" dir="ltr"><head><meta charset="UTF-8"><title>Tidal mill - Examplepedia</title></head><body class="skin-vector skin-vector-search-vue mediawiki ltr sitedir-ltr mw-hide-empty-elt ns-0 ns-subject page-Tidal_mill rootpage-Tidal_mill skin-vector-2022 action-view"><a class="mw-jump-link" href="#bodyContent">Jump to content</a><div class="vector-header-container"><header class="vector-header mw-header"><div class="vector-header-start"><nav class="vector-main-menu-landmark" aria-label="Site"><div id="vector-main-menu-dropdown" class="vector-dropdown vector-main-menu-dropdown vector-button-flush-left vector-button-flush-right"><div class="vector-dropdown-content"><div id="p-navigation" class="vector-menu mw-portlet mw-portlet-navigation"><div class="vector-menu-heading">Navigation</div><div class="vector-menu-content"><ul class="vector-menu-content-list">{_menu("Main page|Contents|Current events|Random article|About Examplepedia|Contact us|Donate", "mw-list-item")}</ul></div></div></div></div></nav><a href="/wiki/Main_Page" class="mw-logo">Examplepedia</a></div><div class="vector-header-end"><div id="p-search" role="search" class="vector-search-box-vue vector-search-box-collapses vector-search-box-show-thumbnail vector-search-box-auto-expand-width vector-search-box"><form action="/w/index.php" id="searchform" class="vector-search-box-form"><input type="search" name="search" placeholder="Search Examplepedia" aria-label="Search Examplepedia" id="searchInput"></form></div></div></header></div>
<div class="mw-page-container"><div class="mw-page-container-inner"><div class="vector-main-menu-container"></div><div class="vector-sitenotice-container"><div id="siteNotice"></div></div><div class="vector-column-start"><div class="vector-sticky-pinned-container"><nav id="mw-panel-toc" aria-label="Contents" data-event-name="ui.sidebar-toc" class="mw-table-of-contents-container vector-toc-landmark"><div id="vector-toc-pinned-container" class="vector-pinned-container"><div id="vector-toc" class="vector-toc vector-pinnable-element"><div class="vector-pinnable-header vector-toc-pinnable-header vector-pinnable-header-pinned" data-feature-name="toc-pinned"><h2 class="vector-pinnable-header-label">Contents</h2></div><ul class="vector-toc-contents" id="mw-panel-toc-list"><li id="toc-mw-content-text" class="vector-toc-list-item vector-toc-level-1"><a href="#" class="vector-toc-link"><div class="vector-toc-text">(Top)</div></a></li><li class="vector-toc-list-item vector-toc-level-1"><a class="vector-toc-link" href="#History"><div class="vector-toc-text"><span class="vector-toc-numb">1</span><span>History</span></div></a></li><li class="vector-toc-list-item vector-toc-level-1"><a class="vector-toc-link" href="#Operation"><div class="vector-toc-text"><span class="vector-toc-numb">2</span><span>Operation</span></div></a></li><li class="vector-toc-list-item vector-toc-level-1"><a class="vector-toc-link" href="#References"><div class="vector-toc-text"><span class="vector-toc-numb">3</span><span>References</span></div></a></li></ul></div></div></nav></div></div>
<div class="mw-content-container"><main id="content" class="mw-body"><header class="mw-body-header vector-page-titlebar"><!--G--><h1 id="firstHeading" class="firstHeading mw-first-heading"><span class="mw-page-title-main">Tidal mill</span></h1><!--/G--><div id="p-lang-btn" class="vector-dropdown mw-portlet mw-portlet-lang"><input type="checkbox" id="p-lang-btn-checkbox" role="button" aria-haspopup="true" class="vector-dropdown-checkbox mw-interlanguage-selector" aria-label="Go to an article in another language. Available in 14 languages"><label id="p-lang-btn-label" for="p-lang-btn-checkbox" class="vector-dropdown-label cdx-button"><span class="vector-dropdown-label-text">14 languages</span></label></div></header><div class="vector-page-toolbar"><div class="vector-page-toolbar-container"><div id="left-navigation"><nav aria-label="Namespaces"><div id="p-associated-pages" class="vector-menu vector-menu-tabs mw-portlet"><div class="vector-menu-content"><ul class="vector-menu-content-list"><li id="ca-nstab-main" class="selected vector-tab-noicon mw-list-item"><a href="/wiki/Tidal_mill" title="View the content page [c]" accesskey="c"><span>Article</span></a></li><li id="ca-talk" class="vector-tab-noicon mw-list-item"><a href="/wiki/Talk:Tidal_mill" rel="discussion" title="Discuss improvements to the content page [t]" accesskey="t"><span>Talk</span></a></li></ul></div></div></nav></div><div id="right-navigation" class="vector-collapsible"><nav aria-label="Views"><div id="p-views" class="vector-menu vector-menu-tabs mw-portlet mw-portlet-views"><div class="vector-menu-content"><ul class="vector-menu-content-list"><li id="ca-view" class="selected vector-tab-noicon mw-list-item"><a href="/wiki/Tidal_mill"><span>Read</span></a></li><li id="ca-edit" class="vector-tab-noicon mw-list-item"><a href="/w/index.php?title=Tidal_mill&amp;action=edit" title="Edit this page [e]" accesskey="e"><span>Edit</span></a></li><li id="ca-history" class="vector-tab-noicon mw-list-item"><a href="/w/index.php?title=Tidal_mill&amp;action=history" title="Past revisions of this page [h]" accesskey="h"><span>View history</span></a></li></ul></div></div></nav></div></div></div>
<div id="bodyContent" class="vector-body" aria-labelledby="firstHeading" data-mw-ve-target-container><div class="vector-body-before-content"><div class="mw-indicators"></div><div id="siteSub" class="noprint">From Examplepedia, the free encyclopedia</div></div><div id="contentSub"><div id="mw-content-subtitle"></div></div><div id="mw-content-text" class="mw-body-content"><div class="mw-content-ltr mw-parser-output" lang="en" dir="ltr"><!--G-->
<table class="infobox vcard"><tbody><tr><th colspan="2" class="infobox-above">Tidal mill</th></tr><tr><th scope="row" class="infobox-label">Power source</th><td class="infobox-data">Tidal range</td></tr><tr><th scope="row" class="infobox-label">Earliest known</th><td class="infobox-data">c. 619–630 AD</td></tr></tbody></table>
<p>A <b>tidal mill</b> is a water mill driven by the rise and fall of the tide. A dam with a sluice is built across a suitable tidal inlet, or a section of river estuary is made into a reservoir.<sup id="cite_ref-1" class="reference"><a href="#cite_note-1"><span class="cite-bracket">[</span>1<span class="cite-bracket">]</span></a></sup> As the tide comes in, it enters the mill pond through a one-way gate, which closes automatically when the tide begins to fall.</p>
<div class="mw-heading mw-heading2"><h2 id="History">History</h2><span class="mw-editsection"><span class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Tidal_mill&amp;action=edit&amp;section=1" title="Edit section: History"><span>edit</span></a><span class="mw-editsection-bracket">]</span></span></div>
<p>The earliest excavated tidal mill, at Nendrum Monastery on an island in Strangford Lough, dates from around 619 AD.<sup id="cite_ref-2" class="reference"><a href="#cite_note-2"><span class="cite-bracket">[</span>2<span class="cite-bracket">]</span></a></sup> By the eighteenth century there were about 76 tide mills in London alone.<sup id="cite_ref-3" class="reference"><a href="#cite_note-3"><span class="cite-bracket">[</span>3<span class="cite-bracket">]</span></a></sup></p>
<div class="mw-heading mw-heading2"><h2 id="Operation">Operation</h2><span class="mw-editsection"><span class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Tidal_mill&amp;action=edit&amp;section=2" title="Edit section: Operation"><span>edit</span></a><span class="mw-editsection-bracket">]</span></span></div>
<p>A tide mill can work for only part of each tidal cycle, typically four hours around low tide, so working hours shifted by about fifty minutes every day. Millers had to be ready to work at night.</p>
<div class="mw-heading mw-heading2"><h2 id="References">References</h2><span class="mw-editsection"><span class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Tidal_mill&amp;action=edit&amp;section=3" title="Edit section: References"><span>edit</span></a><span class="mw-editsection-bracket">]</span></span></div>
<div class="reflist"><div class="mw-references-wrap"><ol class="references"><li id="cite_note-1"><span class="mw-cite-backlink"><b><a href="#cite_ref-1">^</a></b></span> <span class="reference-text"><cite class="citation book cs1">Minchinton, Walter (1979). <i>Tide mills of England and Wales</i>. Transactions of the Newcomen Society. pp. 339–353.</cite></span></li><li id="cite_note-2"><span class="mw-cite-backlink"><b><a href="#cite_ref-2">^</a></b></span> <span class="reference-text"><cite class="citation journal cs1">McErlean, Thomas; Crothers, Norman (2007). "Harnessing the Tides: The Early Medieval Tide Mills at Nendrum Monastery". <i>Northern Ireland Archaeological Monographs</i> (7).</cite></span></li><li id="cite_note-3"><span class="mw-cite-backlink"><b><a href="#cite_ref-3">^</a></b></span> <span class="reference-text">Wailes, Rex (1940). "Tide mills in England and Wales". <i>Junior Institution of Engineers</i>.</span></li></ol></div></div>
<!--/G--><div class="navbox-styles"></div><div role="navigation" class="navbox" aria-labelledby="Watermills" style="padding:3px"><table class="nowraplinks mw-collapsible autocollapse navbox-inner"><tbody><tr><th scope="col" class="navbox-title" colspan="2"><div id="Watermills">Watermills</div></th></tr><tr><th scope="row" class="navbox-group">Types</th><td class="navbox-list-with-group navbox-list navbox-odd"><div><ul><li><a href="/wiki/Ship_mill">Ship mill</a></li><li><a href="/wiki/Stamp_mill">Stamp mill</a></li><li><a href="/wiki/Sawmill">Sawmill</a></li><li><a href="/wiki/Fulling_mill">Fulling mill</a></li></ul></div></td></tr></tbody></table></div></div><noscript><img src="https://wiki.example.org/wiki/Special:CentralAutoLogin/start?type=1x1" alt="" width="1" height="1" style="border: none; position: absolute;"></noscript><div class="printfooter" data-nosnippet="">Retrieved from "<a dir="ltr" href="https://wiki.example.org/w/index.php?title=Tidal_mill&amp;oldid=1234">https://wiki.example.org/w/index.php?title=Tidal_mill&amp;oldid=1234</a>"</div></div><div id="catlinks" class="catlinks" data-mw="interface"><div id="mw-normal-catlinks" class="mw-normal-catlinks"><a href="/wiki/Help:Category" title="Help:Category">Categories</a>: <ul><li><a href="/wiki/Category:Watermills" title="Category:Watermills">Watermills</a></li><li><a href="/wiki/Category:Tidal_power" title="Category:Tidal power">Tidal power</a></li></ul></div></div></div></main></div>
<div class="mw-footer-container"><footer id="footer" class="mw-footer" role="contentinfo"><ul id="footer-info"><li id="footer-info-lastmod"> This page was last edited on 9 January 2025, at 17:02<span class="anonymous-show">&#160;(UTC)</span>.</li><li id="footer-info-copyright">Text is available under the <a rel="nofollow" href="//creativecommons.org/licenses/by-sa/4.0/">Creative Commons Attribution-ShareAlike License 4.0</a>; additional terms may apply.</li></ul><ul id="footer-places"><li id="footer-places-privacy"><a href="https://foundation.example.org/wiki/Privacy_policy">Privacy policy</a></li><li id="footer-places-about"><a href="/wiki/Examplepedia:About">About Examplepedia</a></li></ul></footer></div></div></div></body></html>""",
        "present": [
            "# Tidal mill",
            "A tidal mill is a water mill driven by the rise and fall of the tide.",
            "Nendrum Monastery",
            "## References",
            "Tide mills of England and Wales",
            "Harnessing the Tides",
        ],
        "absent": [
            "Jump to content",
            "Ship mill",
            "Retrieved from",
            "Creative Commons Attribution-ShareAlike",
            "View history",
            "From Examplepedia, the free encyclopedia",
        ],
    }
)

# 13. Recipe blog with a WP Recipe Maker card after a long story, a "Jump to Recipe" bar,
# ads between paragraphs, Mediavine-like ad wrappers, comments with ratings.
PAGES.append(
    {
        "name": "r10_recipe_wprm_card",
        "url": "https://crumbandcopper.example/brown-butter-oat-cookies/",
        "kind": "recipe",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en-US"><head><meta charset="UTF-8"><title>Brown Butter Oat Cookies - Crumb &amp; Copper</title><script type="application/ld+json">{json.dumps({"@context": "https://schema.org", "@graph": [{"@type": "Recipe", "name": "Brown Butter Oat Cookies", "recipeIngredient": ["115 g butter", "100 g oats"], "recipeYield": "16"}]})}</script></head><body class="post-template-default single single-post postid-2231 grow-content-body"><div class="site-container"><ul class="genesis-skip-link"><li><a href="#genesis-content" class="screen-reader-shortcut"> Skip to primary navigation</a></li></ul><header class="site-header"><div class="wrap"><div class="title-area"><p class="site-title"><a href="/">Crumb &amp; Copper</a></p></div><nav class="nav-primary" aria-label="Main"><ul id="menu-header" class="menu genesis-nav-menu menu-primary">{_menu("Recipes|Cookies|Cakes|Bread|About|Shop my kitchen", "menu-item")}</ul></nav></div></header>
<div class="site-inner"><div class="content-sidebar-wrap"><main class="content" id="genesis-content"><article class="post-2231 post type-post status-publish format-standard has-post-thumbnail category-cookies entry" aria-label="Brown Butter Oat Cookies"><header class="entry-header"><!--G--><h1 class="entry-title">Brown Butter Oat Cookies</h1><!--/G--><p class="entry-meta">By <span class="entry-author"><a href="/about/" class="entry-author-link" rel="author"><span class="entry-author-name">Maya</span></a></span> · Published: <time class="entry-time">Oct 2, 2024</time> · <a href="#comments" class="entry-comments-link">38 Comments</a></p></header><div class="entry-content"><div class="wprm-recipe-snippet wprm-block-text-normal"><a href="#recipe" data-recipe="2240" class="wprm-recipe-jump wprm-recipe-link wprm-jump-to-recipe-shortcode wprm-block-text-normal wprm-recipe-jump-inline-button wprm-recipe-link-inline-button wprm-color-accent">Jump to Recipe</a> <a href="https://crumbandcopper.example/wprm_print/brown-butter-oat-cookies" class="wprm-recipe-print wprm-recipe-link wprm-print-recipe-shortcode wprm-block-text-normal wprm-recipe-print-inline-button" target="_blank" rel="nofollow">Print Recipe</a></div><p class="disclosure"><em>This post may contain affiliate links. Please read our disclosure policy.</em></p>
<!--G--><p>These are the cookies I bake when I have ten minutes and a bag of oats. Browning the butter first takes an extra three minutes and gives them a toffee flavour that plain melted butter does not.</p>
<h2 class="wp-block-heading">Why brown the butter?</h2>
<p>As butter cooks, its milk solids toast and turn nutty. You lose a little water, which makes the dough firmer, so these cookies spread less and stay chewy in the middle.</p><!--X--><div class="adthrive-ad adthrive-content adthrive-content-1 adthrive-ad-cls" data-google-query-id="CKz" style="min-height: 250px;"><div id="cls-video-container-xyz"><span class="adthrive-ad-label">Advertisement</span></div></div><!--/X-->
<h2 class="wp-block-heading">Tips for the best cookies</h2>
<ul class="wp-block-list"><li>Let the brown butter cool for ten minutes so it does not melt the sugar.</li><li>Rest the dough for 30 minutes; the oats absorb moisture and the cookies hold their shape.</li><li>Take them out when the edges are golden and the centres still look soft.</li></ul><!--/G-->
<div id="recipe"></div><!--G--><div id="wprm-recipe-container-2240" class="wprm-recipe-container" data-recipe-id="2240" data-servings="16"><div class="wprm-recipe wprm-recipe-template-custom"><div class="wprm-container-float-right"><div class="wprm-recipe-image wprm-block-image-rounded"><img style="border-width:0px;" width="200" height="200" src="/wp-content/uploads/cookies-200x200.jpg" class="attachment-200x200 size-200x200" alt="oat cookies"></div></div><h2 class="wprm-recipe-name wprm-block-text-bold">Brown Butter Oat Cookies</h2><!--X--><div class="wprm-spacer"></div><div class="wprm-recipe-rating wprm-recipe-rating-recipe-2240"><span class="wprm-recipe-rating-details wprm-block-text-normal"><span class="wprm-recipe-rating-average">4.9</span> from <span class="wprm-recipe-rating-count">52</span> votes</span></div><a href="https://crumbandcopper.example/wprm_print/brown-butter-oat-cookies" class="wprm-recipe-print wprm-recipe-link wprm-print-recipe-shortcode wprm-block-text-normal">Print Recipe</a><a href="https://www.pinterest.com/pin/create/bookmarklet/" class="wprm-recipe-pin wprm-recipe-link wprm-block-text-normal" target="_blank" rel="nofollow noopener">Pin Recipe</a><!--/X--><div class="wprm-recipe-summary wprm-block-text-normal"><span style="display: block;">Chewy oat cookies with toffee notes from browned butter.</span></div><div class="wprm-recipe-meta-container wprm-recipe-times-container"><div class="wprm-recipe-block-container wprm-recipe-time-container wprm-recipe-prep-time-container"><span class="wprm-recipe-details-label wprm-block-text-bold wprm-recipe-time-label wprm-recipe-prep-time-label">Prep Time </span><span class="wprm-recipe-time wprm-block-text-normal"><span class="wprm-recipe-details wprm-recipe-details-minutes wprm-recipe-prep_time wprm-recipe-prep_time-minutes">15<span class="sr-only screen-reader-text wprm-screen-reader-text"> minutes</span></span> <span class="wprm-recipe-details-unit wprm-recipe-details-minutes wprm-recipe-prep_time-unit wprm-recipe-prep_timeunit-minutes" aria-hidden="true">mins</span></span></div><div class="wprm-recipe-block-container wprm-recipe-time-container wprm-recipe-cook-time-container"><span class="wprm-recipe-details-label wprm-recipe-time-label">Cook Time </span><span class="wprm-recipe-time"><span class="wprm-recipe-details">11</span> <span class="wprm-recipe-details-unit" aria-hidden="true">mins</span></span></div></div>
<div class="wprm-recipe-ingredients-container wprm-recipe-2240-ingredients-container wprm-block-text-normal" data-recipe="2240" data-servings="16"><h3 class="wprm-recipe-header wprm-recipe-ingredients-header wprm-block-text-uppercase wprm-align-left wprm-header-decoration-none">Ingredients</h3><div class="wprm-recipe-ingredient-group"><ul class="wprm-recipe-ingredients"><li class="wprm-recipe-ingredient" style="list-style-type: disc;" data-uid="0"><span class="wprm-recipe-ingredient-amount">115</span> <span class="wprm-recipe-ingredient-unit">g</span> <span class="wprm-recipe-ingredient-name">unsalted butter</span></li><li class="wprm-recipe-ingredient" style="list-style-type: disc;" data-uid="1"><span class="wprm-recipe-ingredient-amount">150</span> <span class="wprm-recipe-ingredient-unit">g</span> <span class="wprm-recipe-ingredient-name">light brown sugar</span></li><li class="wprm-recipe-ingredient" data-uid="2"><span class="wprm-recipe-ingredient-amount">1</span> <span class="wprm-recipe-ingredient-name">egg</span></li><li class="wprm-recipe-ingredient" data-uid="3"><span class="wprm-recipe-ingredient-amount">120</span> <span class="wprm-recipe-ingredient-unit">g</span> <span class="wprm-recipe-ingredient-name">plain flour</span></li><li class="wprm-recipe-ingredient" data-uid="4"><span class="wprm-recipe-ingredient-amount">100</span> <span class="wprm-recipe-ingredient-unit">g</span> <span class="wprm-recipe-ingredient-name">rolled oats</span></li></ul></div></div>
<div class="wprm-recipe-instructions-container wprm-recipe-2240-instructions-container wprm-block-text-normal" data-recipe="2240"><h3 class="wprm-recipe-header wprm-recipe-instructions-header wprm-block-text-uppercase">Instructions</h3><div class="wprm-recipe-instruction-group"><ul class="wprm-recipe-instructions"><li id="wprm-recipe-2240-step-0-0" class="wprm-recipe-instruction" style="list-style-type: decimal;"><div class="wprm-recipe-instruction-text" style="margin-bottom: 5px;">Melt the butter in a light-coloured pan and cook, stirring, until it smells nutty and the solids are brown. Pour into a bowl and cool for 10 minutes.</div></li><li id="wprm-recipe-2240-step-0-1" class="wprm-recipe-instruction" style="list-style-type: decimal;"><div class="wprm-recipe-instruction-text">Whisk in the sugar and egg, then fold in the flour and oats. Rest the dough for 30 minutes.</div></li><li id="wprm-recipe-2240-step-0-2" class="wprm-recipe-instruction"><div class="wprm-recipe-instruction-text">Roll into 16 balls and bake at 180 °C for 10–11 minutes.</div></li></ul></div></div>
<div class="wprm-recipe-notes-container wprm-block-text-normal"><h3 class="wprm-recipe-header wprm-recipe-notes-header">Notes</h3><div class="wprm-recipe-notes"><span style="display: block;">The dough keeps for 3 days in the fridge.</span></div></div></div></div><!--/G-->
<div class="wprm-recipe-block-container wprm-call-to-action wprm-call-to-action-simple" style="color: #ffffff;background-color: #616161;"><span class="wprm-recipe-icon wprm-call-to-action-icon"></span> <span class="wprm-call-to-action-text-container"><span class="wprm-call-to-action-header">Tried this recipe?</span><span class="wprm-call-to-action-text">Mention <a href="https://www.instagram.com/crumbandcopper" target="_blank" rel="noreferrer noopener">@crumbandcopper</a> or tag <a href="https://www.instagram.com/explore/tags/crumbandcopper" target="_blank">#crumbandcopper</a>!</span></span></div></div>
<footer class="entry-footer"><p class="entry-meta"><span class="entry-categories">Filed Under: <a href="/category/cookies/" rel="category tag">Cookies</a></span></p></footer></article>
<h2 class="screen-reader-text">Reader Interactions</h2><div class="entry-comments" id="comments"><h3>Comments</h3><ol class="comment-list"><li class="comment even thread-even depth-1" id="comment-5512"><article id="article-comment-5512"><header class="comment-header"><p class="comment-author"><span class="comment-author-name">Beth</span> <span class="says">says</span></p></header><div class="comment-content"><p><img class="wprm-comment-rating" src="/stars-5.svg" alt="5 stars" width="80" height="16"><br>Made these twice this week, the brown butter really makes them. I added a handful of chopped walnuts.</p></div></article></li></ol></div></main>
<aside class="sidebar sidebar-primary widget-area" role="complementary" aria-label="Primary Sidebar"><section id="text-2" class="widget widget_text"><div class="widget-wrap"><h3 class="widgettitle widget-title">Hi, I'm Maya!</h3><div class="textwidget"><p>I bake small batches in a tiny kitchen and write down everything that works.</p></div></div></section></aside></div></div>
<footer class="site-footer"><div class="wrap"><p>Copyright &#x000A9; 2025 Crumb &amp; Copper · Privacy Policy · Accessibility</p></div></footer></div></body></html>""",
        "present": [
            "# Brown Butter Oat Cookies",
            "Browning the butter first takes an extra three minutes",
            "## Why brown the butter?",
            "unsalted butter",
            "Roll into 16 balls and bake at 180 °C",
            "The dough keeps for 3 days in the fridge.",
        ],
        "absent": [
            "Made these twice this week",
            "Tried this recipe?",
            "Hi, I'm Maya!",
            "Advertisement",
            "Filed Under",
        ],
    }
)

# 14. Listicle: numbered h2 items, each with an image, caption and credit, "Shop now"
# affiliate buttons, a newsletter modal markup and a sticky share rail.
_ITEMS = [
    (
        "Lisbon, Portugal",
        "Trams, tiled facades and custard tarts are the cliché, but autumn is the real reason to go: the sea is still warm in October and the crowds have left.",
        "The Alfama district at dusk.",
    ),
    (
        "Ljubljana, Slovenia",
        "A compact, car-free centre on a green river, an hour from the Alps and two from the Adriatic. Rent a bike at the station and you will not need anything else.",
        "Triple Bridge over the Ljubljanica.",
    ),
    (
        "Valencia, Spain",
        "The old riverbed turned into a nine-kilometre park runs through the whole city, from the science museum to the zoo, and the paella was invented a few kilometres south.",
        "Cyclists in the Turia Gardens.",
    ),
    (
        "Ghent, Belgium",
        "Bruges without the coach parties: canals, medieval guildhalls and a student population that keeps the bars open late.",
        "The Graslei quay on a summer evening.",
    ),
]
_ITEMS_HTML = "".join(
    f'<h2 class="listicle-item__title"><span class="listicle-item__number">{i + 1}.</span> {t}</h2><figure class="listicle-item__media"><img src="/img/city-{i}.jpg" alt="" loading="lazy"><figcaption class="caption">{c} <span class="credit">Photo: Getty Images</span></figcaption></figure><p>{b}</p><div class="affiliate-cta"><a class="button affiliate-button" href="https://partner.example/?city={i}" rel="sponsored nofollow">Check hotel prices</a></div>'
    for i, (t, b, c) in enumerate(_ITEMS)
)
_ITEMS_GOLD = "".join(
    f"<h2>{i + 1}. {t}</h2><figure><figcaption>{c} Photo: Getty Images</figcaption></figure><p>{b}</p>"
    for i, (t, b, c) in enumerate(_ITEMS)
)
PAGES.append(
    {
        "name": "r10_listicle_travel",
        "url": "https://www.wanderweekly.example/travel/city-breaks-autumn",
        "kind": "news",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>4 European city breaks that are better in autumn | Wander Weekly</title></head><body><div class="page-wrapper"><header class="site-header"><div class="site-header__logo"><a href="/">Wander Weekly</a></div><nav class="primary-nav"><ul>{_menu("Destinations|City breaks|Beaches|Food &amp; drink|Deals|Travel news")}</ul></nav></header><div class="share-rail share-rail--sticky"><a href="#" class="share-rail__link">Pinterest</a><a href="#" class="share-rail__link">Facebook</a><a href="#" class="share-rail__link">Email</a></div>
<div class="content-wrapper"><div class="listicle"><div class="listicle__intro"><!--G--><h1 class="listicle__headline">4 European city breaks that are better in autumn</h1><p class="listicle__dek">Warm seas, empty squares and cheaper flights: where to go when the summer crowds have gone home.</p><!--/G--><div class="byline">By Chloe Varga · Updated 18 September 2025</div><p class="affiliate-disclosure">We may earn a commission when you buy through links on our site.</p></div>
<!--G--><div class="listicle__body">{_ITEMS_HTML}</div><!--/G-->
<div class="listicle__more"><h3>More city breaks</h3><ul><li><a href="/travel/winter-city-breaks">The best winter city breaks in Europe</a></li><li><a href="/travel/weekend-in-porto">48 hours in Porto</a></li><li><a href="/travel/rail-city-breaks">City breaks you can reach by train</a></li></ul></div></div></div>
<div class="modal modal--newsletter" role="dialog" aria-modal="true" aria-labelledby="nl-title" style="display:none"><div class="modal__dialog"><h2 id="nl-title">Get our best travel deals</h2><p>Join 250,000 readers and get hand-picked deals every Thursday.</p><form><input type="email" placeholder="Your email"><button>Sign me up</button></form><button class="modal__close" aria-label="Close">×</button></div></div>
<footer class="site-footer"><p>Wander Weekly is part of Example Publishing Ltd. © 2025. All rights reserved.</p><ul>{_menu("About|Contact|Advertise|Privacy|Cookies|Terms")}</ul></footer></div>
{ONETRUST}</body></html>""".replace(
            '<!--G--><div class="listicle__body">', '<!--G--><div class="listicle__body">'
        ),
        "present": [
            "# 4 European city breaks that are better in autumn",
            "## 1. Lisbon, Portugal",
            "Triple Bridge over the Ljubljanica.",
            "the paella was invented a few kilometres south.",
            "Bruges without the coach parties",
        ],
        "absent": [
            "Get our best travel deals",
            "48 hours in Porto",
            "We value your privacy",
            "Check hotel prices",
            "part of Example Publishing Ltd.",
        ],
    }
)

# 15. FAQ page of <details> accordions (a utility's help centre), with a "Was this
# helpful?" widget and a chat launcher.
_FAQ = [
    (
        "How do I submit a meter reading?",
        "<p>Log in to your account and choose <strong>Submit a reading</strong>, or text your reading to 60123 with your account number. Readings sent before 8pm are on your next bill.</p>",
    ),
    (
        "Why is my bill higher than usual?",
        "<p>Bills in winter are usually higher because you use more energy for heating. If we did not receive a reading, your bill is based on an estimate. Send us a reading and we will correct it.</p>",
    ),
    (
        "Can I change my payment date?",
        "<p>Yes. You can choose any date between the 1st and the 28th of the month. The change applies from your next payment.</p>",
    ),
    (
        "What happens if I move house?",
        "<p>Tell us at least two days before you move. You will need:</p><ul><li>your moving date</li><li>your new address</li><li>a final meter reading on the day you leave</li></ul>",
    ),
]
_FAQ_HTML = "".join(
    f'<details class="faq-accordion__item"><summary class="faq-accordion__question"><h3>{q}</h3></summary><div class="faq-accordion__answer">{a}</div></details>'
    for q, a in _FAQ
)
PAGES.append(
    {
        "name": "r10_faq_details",
        "url": "https://help.brightpower.example/billing-faq",
        "kind": "government",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Billing and payments: frequently asked questions | BrightPower Help</title><script type="application/ld+json">{json.dumps({"@context": "https://schema.org", "@type": "FAQPage", "mainEntity": [{"@type": "Question", "name": q, "acceptedAnswer": {"@type": "Answer", "text": "..."}} for q, _ in _FAQ]})}</script></head><body><div class="help-header"><a href="/" class="help-header__logo">BrightPower Help Centre</a><form class="help-search" action="/search"><input type="search" placeholder="Search for answers"></form><a href="https://brightpower.example/login" class="help-header__login">Log in</a></div><div class="help-layout"><div class="help-layout__nav"><ul class="category-list">{_menu("Billing and payments|Meter readings|Moving home|Smart meters|Switching to us|Complaints", "category-list__item")}</ul></div><div class="help-layout__content"><ol class="breadcrumbs"><li><a href="/">Help Centre</a></li><li>Billing and payments</li></ol><!--G--><h1>Billing and payments: frequently asked questions</h1><p class="intro">Answers to the questions our customers ask most about bills, payments and meter readings.</p><div class="faq-accordion">{_FAQ_HTML}</div><!--/G--><div class="article-vote"><span class="article-vote__question">Was this article helpful?</span><button class="article-vote__up">Yes</button><button class="article-vote__down">No</button><span class="article-vote__count">1,204 out of 1,530 found this helpful</span></div><div class="contact-box"><h2>Still need help?</h2><p>Our team is available Monday to Friday, 8am to 6pm.</p><a href="/contact" class="button">Contact us</a></div></div></div><div class="help-footer"><p>BrightPower Energy Ltd is registered in England and Wales, company number 01234567.</p><ul>{_menu("Privacy|Cookies|Accessibility|Terms")}</ul></div><div id="chat-launcher" class="intercom-lightweight-app"><div class="intercom-lightweight-app-launcher" role="button" aria-label="Open Intercom Messenger">Chat with us</div></div>{COOKIEBOT.format(lang="en", consent="Consent", details="Details", title="This website uses cookies", text="We use cookies to personalise content and to analyse our traffic. We also share information about your use of our site with our analytics partners.", deny="Deny", allow="Allow all")}</body></html>""",
        "present": [
            "# Billing and payments: frequently asked questions",
            "How do I submit a meter reading?",
            "Readings sent before 8pm are on your next bill.",
            "- a final meter reading on the day you leave",
        ],
        "absent": [
            "Was this article helpful?",
            "company number 01234567",
            "This website uses cookies",
            "Chat with us",
        ],
    }
)

# 16. Chinese portal article (Sina/NetEase-like): div#artibody, no spaces, a "相关新闻"
# block and a comment box after it, editor line inside the body.
PAGES.append(
    {
        "name": "r10_news_zh_portal",
        "url": "https://news.xinwen.example/c/2025-04-08/doc-imzx1234.shtml",
        "kind": "news",
        "lang": "zh",
        "html": f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>南方多地启动防汛应急响应 水库提前腾库迎汛_新闻中心_新闻网</title></head><body><div class="top-nav"><div class="top-nav-wrap"><a href="/">新闻网首页</a>{"".join(f'<a href="/{i}">{t}</a>' for i, t in enumerate(["新闻", "财经", "科技", "体育", "娱乐", "汽车", "博客", "视频", "房产"]))}</div><div class="top-nav-login"><a href="/login">登录</a><a href="/reg">注册</a></div></div><div class="main-content w1240"><div class="path"><a href="/">新闻中心</a> &gt; <a href="/china">国内新闻</a> &gt; 正文</div><div class="article-content-left"><!--G--><h1 class="main-title">南方多地启动防汛应急响应 水库提前腾库迎汛</h1><!--/G--><div class="date-source"><span class="date">2025年04月08日 09:32</span><a href="/source" class="source">新华社</a></div><div class="article-toolbar"><a class="share-wechat">微信</a><a class="share-weibo">微博</a><a class="font-size">字号</a></div>
<!--G--><div class="article" id="artibody"><p>　　新华社广州4月8日电　受强降雨影响，广东、广西、福建等地近日相继启动防汛四级应急响应。气象部门预计，未来三天华南地区仍将有大到暴雨，局部地区有大暴雨。</p><p>　　广东省水利厅表示，全省大中型水库已提前腾出库容约十二亿立方米，重点对二百余座病险水库实行空库运行，并派出十个工作组赴一线指导。</p><p>　　广西壮族自治区应急管理厅提醒，山区群众要警惕山洪和地质灾害，遇到强降雨时应及时转移到安全地带，不要在河道、沟谷附近停留。</p><p>　　据了解，今年汛期较常年偏早约十天。水利部已要求各地加强值班值守，做好人员转移和物资储备等准备工作。</p><p class="show_author">责任编辑：张明</p></div><!--/G-->
<div class="article-bottom"><div class="keywords">文章关键词：<a href="/tag/1">防汛</a><a href="/tag/2">暴雨</a></div><div class="related-news"><h3>相关新闻</h3><ul><li><a href="/r1">气象台发布暴雨蓝色预警 华南局地有大暴雨</a></li><li><a href="/r2">长江流域进入主汛期前的准备工作全面展开</a></li><li><a href="/r3">多地中小学调整上学时间应对强降雨</a></li></ul></div><div class="comment-box" id="comment"><h3>我要评论</h3><textarea placeholder="文明上网，理性发言"></textarea><div class="comment-list"><div class="comment-item"><span class="user">网友甲</span><p>希望大家注意安全，出门记得带伞。</p></div></div></div></div></div>
<div class="article-content-right"><div class="hot-list"><h3>热点排行</h3><ol><li><a href="/h1">新能源汽车下乡活动启动</a></li><li><a href="/h2">多地公布清明假期出游数据</a></li></ol></div></div></div><div class="footer"><p>新闻网 版权所有 Copyright © 2025 All Rights Reserved</p><p><a href="/about">关于我们</a> | <a href="/contact">联系我们</a> | <a href="/privacy">隐私政策</a></p></div></body></html>""",
        "present": [
            "南方多地启动防汛应急响应",
            "全省大中型水库已提前腾出库容约十二亿立方米",
            "今年汛期较常年偏早约十天",
        ],
        "absent": ["气象台发布暴雨蓝色预警", "希望大家注意安全", "热点排行", "版权所有"],
    }
)

# 17. Arabic news (RTL) with the body split into sibling divs between ads, a "اقرأ أيضا"
# box INSIDE the article body, and a newsletter box.
PAGES.append(
    {
        "name": "r10_news_ar_split",
        "url": "https://www.akhbar.example/news/2025/3/12/desalination-plant",
        "kind": "news",
        "lang": "ar",
        "html": f"""<!DOCTYPE html><html lang="ar" dir="rtl"><head><meta charset="utf-8"><title>افتتاح أكبر محطة لتحلية المياه بالطاقة الشمسية في المنطقة | أخبار</title></head><body><header class="site-header"><a class="logo" href="/">أخبار</a><nav class="main-nav"><ul>{_menu("الرئيسية|سياسة|اقتصاد|رياضة|ثقافة|علوم وتكنولوجيا|فيديو")}</ul></nav></header><main class="site-main"><div class="article-header"><ul class="breadcrumb"><li><a href="/">الرئيسية</a></li><li><a href="/economy">اقتصاد</a></li></ul><!--G--><h1 class="article-title">افتتاح أكبر محطة لتحلية المياه بالطاقة الشمسية في المنطقة</h1><p class="article-excerpt">المحطة تنتج ثلاثمئة ألف متر مكعب يوميا وتخفض تكلفة المياه بنحو الثلث</p><!--/G--><div class="article-dates">نشر في 12/3/2025</div></div>
<!--G--><div class="wysiwyg wysiwyg--all-content"><p>افتتحت السلطات اليوم الأربعاء محطة لتحلية مياه البحر تعمل بالطاقة الشمسية، بطاقة إنتاجية تبلغ ثلاثمئة ألف متر مكعب يوميا، تكفي لتزويد نحو مليون ونصف مليون شخص بمياه الشرب.</p><p>وقال وزير الطاقة في كلمة خلال الافتتاح إن المحطة ستخفض تكلفة إنتاج المتر المكعب بنحو الثلث مقارنة بالمحطات التي تعمل بالغاز، كما ستقلل الانبعاثات بأكثر من أربعمئة ألف طن سنويا.</p></div><!--/G-->
<div class="ad-container"><span class="ad-label">إعلان</span><div id="ad-mid-1"></div></div>
<!--G--><div class="wysiwyg wysiwyg--all-content"><!--X--><div class="more-on-topic"><h3>اقرأ أيضا</h3><ul><li><a href="/r1">الجفاف يهدد المحاصيل الزراعية في الجنوب</a></li><li><a href="/r2">خطة وطنية لترشيد استهلاك المياه</a></li></ul></div><!--/X--><h2>شراكة بين القطاعين العام والخاص</h2><p>وبنيت المحطة بالشراكة بين الحكومة وتحالف من شركات محلية ودولية، بتكلفة إجمالية بلغت ثمانمئة مليون دولار، ويستمر عقد التشغيل خمسة وعشرين عاما.</p><p>ويرى خبراء أن نجاح المشروع قد يشجع دولا أخرى في المنطقة على التوسع في استخدام الطاقة المتجددة لتحلية المياه، في ظل تزايد الطلب وتراجع الموارد المائية الجوفية.</p></div><!--/G-->
<div class="newsletter-signup"><h3>اشترك في النشرة البريدية</h3><form><input type="email" placeholder="البريد الإلكتروني"><button>اشترك</button></form></div><div class="article-topics"><a href="/topics/water">مياه</a><a href="/topics/energy">طاقة</a></div><section class="more-section"><h2>المزيد من اقتصاد</h2><ul><li><a href="/m1">ارتفاع أسعار الذهب إلى مستوى قياسي جديد</a></li><li><a href="/m2">البنك المركزي يبقي أسعار الفائدة دون تغيير</a></li></ul></section></main><footer class="site-footer"><p>جميع الحقوق محفوظة © 2025 شبكة أخبار</p><ul>{_menu("من نحن|اتصل بنا|سياسة الخصوصية|شروط الاستخدام")}</ul></footer>
{DIDOMI.format(title="نحن نهتم بخصوصيتك", text="نستخدم نحن وشركاؤنا ملفات تعريف الارتباط (cookies) لتخزين المعلومات والوصول إليها على جهازك، ولعرض إعلانات ومحتوى مخصص. يمكنك تغيير اختياراتك في أي وقت.", more="المزيد من الخيارات", agree="موافق")}</body></html>""",
        "present": [
            "افتتاح أكبر محطة لتحلية المياه",
            "افتتحت السلطات اليوم الأربعاء محطة",
            "## شراكة بين القطاعين العام والخاص",
            "وتراجع الموارد المائية الجوفية.",
        ],
        "absent": [
            "الجفاف يهدد المحاصيل",
            "اشترك في النشرة البريدية",
            "ارتفاع أسعار الذهب",
            "نحن نهتم بخصوصيتك",
            "جميع الحقوق محفوظة",
        ],
    }
)

# 18. Hindi news with the article text in <div class="story"> blocks and a long "ये भी पढ़ें"
# list; Devanagari has spaces but its marks are not \\w letters in every tokenizer.
PAGES.append(
    {
        "name": "r10_news_hi",
        "url": "https://www.samachar.example/india/monsoon-arrives-kerala-2025",
        "kind": "news",
        "lang": "hi",
        "html": f"""<!DOCTYPE html><html lang="hi"><head><meta charset="utf-8"><title>केरल में समय से पहले पहुंचा मानसून, अगले हफ्ते कर्नाटक में दस्तक | समाचार</title></head><body><div class="header"><a href="/" class="logo">समाचार</a><ul class="menu">{_menu("होम|देश|विदेश|राज्य|खेल|मनोरंजन|बिज़नेस|टेक")}</ul></div><div class="container"><div class="left-col"><div class="breadcrumb"><a href="/">होम</a> / <a href="/india">देश</a></div><!--G--><h1>केरल में समय से पहले पहुंचा मानसून, अगले हफ्ते कर्नाटक में दस्तक</h1><h2 class="synopsis">मौसम विभाग के अनुसार इस बार मानसून सामान्य से तीन दिन पहले आया है</h2><!--/G--><div class="byline">नई दिल्ली | 28 मई 2025, 10:15 AM IST</div><div class="social-share"><a href="#">WhatsApp</a><a href="#">Facebook</a><a href="#">Twitter</a></div>
<!--G--><div class="story"><p>भारत मौसम विज्ञान विभाग ने बुधवार को बताया कि दक्षिण-पश्चिम मानसून केरल के तट पर पहुंच गया है। आम तौर पर मानसून एक जून के आसपास केरल पहुंचता है, लेकिन इस बार यह तीन दिन पहले आ गया है।</p><p>विभाग के महानिदेशक ने कहा कि अगले सात दिनों में मानसून कर्नाटक, तमिलनाडु और पूर्वोत्तर राज्यों के कुछ हिस्सों तक पहुंच सकता है। इस दौरान तटीय इलाकों में भारी बारिश की संभावना है।</p></div><!--/G--><div class="also-read"><strong>ये भी पढ़ें</strong><ul><li><a href="/a1">दिल्ली में लू का अलर्ट, तापमान 45 डिग्री के पार</a></li><li><a href="/a2">किसानों के लिए सरकार की नई बीमा योजना</a></li><li><a href="/a3">मुंबई में प्री-मानसून बारिश से जलभराव</a></li></ul></div><!--G--><div class="story"><p>किसानों के लिए यह अच्छी खबर है, क्योंकि खरीफ फसलों की बुवाई काफी हद तक मानसून की बारिश पर निर्भर करती है। विभाग ने इस साल सामान्य से अधिक बारिश का अनुमान जताया है।</p><p>मछुआरों को अगले चार दिनों तक समुद्र में न जाने की सलाह दी गई है।</p></div><!--/G--><div class="tags"><span>टैग:</span><a href="/tag/monsoon">मानसून</a><a href="/tag/kerala">केरल</a></div></div><div class="right-col"><div class="trending"><h3>ट्रेंडिंग</h3><ul><li><a href="/t1">आईपीएल फाइनल की तारीख घोषित</a></li><li><a href="/t2">सोने के दाम में भारी गिरावट</a></li></ul></div></div></div><div class="footer"><p>कॉपीराइट © 2025 समाचार मीडिया प्राइवेट लिमिटेड। सर्वाधिकार सुरक्षित।</p></div></body></html>""",
        "present": [
            "केरल में समय से पहले पहुंचा मानसून",
            "दक्षिण-पश्चिम मानसून केरल के तट पर पहुंच गया है।",
            "मछुआरों को अगले चार दिनों तक समुद्र में न जाने की सलाह दी गई है।",
        ],
        "absent": ["दिल्ली में लू का अलर्ट", "आईपीएल फाइनल", "सर्वाधिकार सुरक्षित"],
    }
)

# 19. Russian tech blog (Habr-like): tm-article-body, hubs, voting, long comment thread
# longer than the article.
_RU_COMMENTS = "".join(
    f'<article class="tm-comment-thread"><div class="tm-comment"><div class="tm-comment__header"><a class="tm-user-info__username" href="/users/u{i}">{u}</a><time>вчера в {10 + i}:0{i}</time></div><div class="tm-comment__body-content"><p>{t}</p></div><div class="tm-comment-footer"><button>Ответить</button><span class="tm-votes-meter__value">+{i + 1}</span></div></div></article>'
    for i, (u, t) in enumerate(
        [
            (
                "alex_dev",
                "Мы делали почти то же самое, но упёрлись в то, что при большом числе партиций автовакуум не успевал за вставками. В итоге пришлось настраивать его отдельно для каждой таблицы, и только тогда всё заработало стабильно.",
            ),
            (
                "dba_olga",
                "Интересно, почему не рассмотрели TimescaleDB? Там партиционирование по времени из коробки, и сжатие старых чанков даёт экономию места в разы. Мы перешли на неё год назад и не жалеем, хотя обновления версий иногда доставляют хлопот.",
            ),
            (
                "ivan_p",
                "Хорошая статья, спасибо. Было бы полезно увидеть графики нагрузки до и после, а также цифры по времени выполнения типичных запросов на чтение, а не только на вставку.",
            ),
            (
                "sergey_k",
                "Про pg_partman стоило упомянуть подробнее: с ним создание новых партиций заранее делается одной командой в кроне, и не нужно писать свои скрипты.",
            ),
        ]
    )
)
PAGES.append(
    {
        "name": "r10_blog_ru_habr",
        "url": "https://techblog.example.ru/articles/812345/",
        "kind": "blog",
        "lang": "ru",
        "html": f"""<!DOCTYPE html><html lang="ru"><head><meta charset="utf-8"><title>Как мы разбили таблицу на 2 ТБ на партиции без простоя / Техблог</title></head><body><div id="app"><div class="tm-layout__wrapper"><div class="tm-header"><div class="tm-page-width"><a class="tm-header__logo" href="/">Техблог</a><nav class="tm-main-menu"><a href="/articles/">Статьи</a><a href="/news/">Новости</a><a href="/hubs/">Хабы</a><a href="/companies/">Компании</a><a href="/users/">Авторы</a></nav><a class="tm-header-user-menu__login" href="/login">Войти</a></div></div><div class="tm-page"><div class="tm-page-width"><div class="tm-page__main tm-page__main_has-sidebar"><div class="tm-article-presenter"><div class="tm-article-presenter__body"><div class="tm-misprint-area"><div class="tm-misprint-area__wrapper"><article class="tm-article-presenter__content tm-article-presenter__content_narrow"><div class="tm-article-presenter__header"><div class="tm-article-snippet tm-article-snippet"><div class="tm-article-snippet__meta-container"><span class="tm-user-info"><a href="/users/pgmaster/" class="tm-user-info__username">pgmaster</a></span><span class="tm-article-datetime-published"><time datetime="2025-02-20T09:00:00.000Z">20 фев в 12:00</time></span></div><!--G--><h1 lang="ru" class="tm-title tm-title_h1"><span>Как мы разбили таблицу на 2 ТБ на партиции без простоя</span></h1><!--/G--><div class="tm-article-snippet__hubs"><span class="tm-article-snippet__hubs-item"><a href="/hubs/postgresql/" class="tm-article-snippet__hubs-item-link">PostgreSQL*</a></span><span class="tm-article-snippet__hubs-item"><a href="/hubs/sql/">SQL*</a></span></div><div class="tm-article-labels"><span class="tm-article-reading-time__label">Время на прочтение 4 мин</span></div></div></div>
<!--G--><div id="post-content-body" class="tm-article-body"><div><div class="article-formatted-body article-formatted-body article-formatted-body_version-2"><div xmlns="http://www.w3.org/1999/xhtml"><p>Таблица с событиями платёжного сервиса выросла до двух терабайт, и запросы по последним суткам стали занимать секунды. Рассказываем, как мы перевели её на декларативное партиционирование по месяцам, не останавливая запись.</p><h2>План</h2><ol><li><p>Создать новую партиционированную таблицу с той же схемой.</p></li><li><p>Настроить триггер, дублирующий новые записи в обе таблицы.</p></li><li><p>Перенести исторические данные пачками по сто тысяч строк.</p></li><li><p>Переключить приложение и удалить старую таблицу.</p></li></ol><h2>Перенос данных</h2><p>Перенос занял девять дней. Чтобы не мешать основной нагрузке, скрипт работал только ночью и делал паузу, если задержка репликации превышала пять секунд.</p><pre><code class="sql">INSERT INTO events_new SELECT * FROM events WHERE id BETWEEN $1 AND $2;</code></pre><p>После переключения медианное время запроса по последним суткам снизилось с 2,4 секунды до 40 миллисекунд.</p></div></div></div></div><!--/G-->
<div class="tm-article-presenter__meta"><div class="tm-separated-list tm-article-presenter__meta-list"><span class="tm-separated-list__title">Теги:</span><ul class="tm-separated-list__list"><li><a href="/search/?q=postgresql">postgresql</a></li><li><a href="/search/?q=partitioning">partitioning</a></li></ul></div></div></article></div></div><div class="tm-article-sticky-panel"><div class="tm-data-icons"><div class="tm-votes-meter"><span class="tm-votes-meter__value">+42</span></div><span class="bookmarks-button__counter">118</span><a class="tm-article-comments-counter-link">Комментарии 4</a></div></div>
<div class="tm-article-blocks"><div class="tm-article-author"><div class="tm-user-card"><a class="tm-user-card__title" href="/users/pgmaster/">Дмитрий @pgmaster</a><div class="tm-user-card__short-info">Ведущий инженер баз данных</div></div></div><div class="tm-comments-wrapper"><h2 class="tm-comments-wrapper__title">Комментарии 4</h2><div class="tm-comments">{_RU_COMMENTS}</div></div><div class="tm-article-blocks__similar"><h2>Публикации</h2><ul><li><a href="/p1">Шардирование PostgreSQL: опыт трёх лет эксплуатации</a></li><li><a href="/p2">Почему мы отказались от ORM</a></li></ul></div></div></div></div></div><div class="tm-page__sidebar"><div class="tm-sexy-sidebar"><div class="tm-block"><h2>Лучшие за сутки</h2><ul><li><a href="/b1">Как устроен планировщик запросов</a></li></ul></div></div></div></div></div><div class="tm-footer"><div class="tm-footer__copyright">© 2006–2025, Техблог</div></div></div></div></body></html>""",
        "present": [
            "Как мы разбили таблицу на 2 ТБ на партиции без простоя",
            "Таблица с событиями платёжного сервиса выросла до двух терабайт",
            "## Перенос данных",
            "INSERT INTO events_new SELECT",
            "снизилось с 2,4 секунды до 40 миллисекунд.",
        ],
        "absent": [
            "упёрлись в то, что при большом числе партиций",
            "Почему мы отказались от ORM",
            "Лучшие за сутки",
            "Ведущий инженер баз данных",
        ],
    }
)

# 20. A statistics page whose main content is a table (an election results page).
_ROWS = [
    ("Northfield", "12,481", "9,904", "3,112", "61.2%"),
    ("Riverside", "10,227", "11,391", "2,874", "58.7%"),
    ("Old Town", "8,903", "7,116", "4,402", "66.0%"),
    ("Harbour", "6,750", "8,012", "1,998", "54.9%"),
    ("Hillcrest", "9,384", "6,201", "2,645", "63.4%"),
    ("Total", "47,745", "42,624", "15,031", "60.8%"),
]
_TABLE = (
    '<table class="results-table"><caption>Votes by ward, city council election 2025</caption><thead><tr><th>Ward</th><th>Green Alliance</th><th>Civic Party</th><th>Independents</th><th>Turnout</th></tr></thead><tbody>'
    + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in _ROWS)
    + "</tbody></table>"
)
PAGES.append(
    {
        "name": "r10_table_results",
        "url": "https://elections.cityhall.example/2025/results",
        "kind": "government",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>City council election 2025: results by ward</title></head><body><div id="skip"><a href="#content">Skip to content</a></div><div id="header"><a href="/" id="logo">City Hall</a><ul id="topmenu">{_menu("Residents|Business|Council|Elections|Planning|Bins and recycling|Contact")}</ul></div><div id="wrapper"><div id="leftcol"><h3>Elections</h3><ul>{_menu("Register to vote|Polling stations|Postal votes|Candidates|Results|Past elections")}</ul></div><div id="content"><!--G--><h1>City council election 2025: results by ward</h1><p>Final results, declared on 2 May 2025 at 4.10am.</p>{_TABLE}<p>The Green Alliance won 23 of the 45 seats and will form the council’s administration.</p><!--/G--><p class="updated">Page last updated: 2 May 2025</p><div class="share"><a href="#">Share on Facebook</a><a href="#">Share on X</a></div></div></div><div id="footer"><p>City Hall, Market Square. Opening hours: Monday to Friday 9am to 5pm.</p><ul>{_menu("Accessibility|Privacy|Cookies|Freedom of information")}</ul></div></body></html>""",
        "present": [
            "# City council election 2025: results by ward",
            "Northfield | 12,481 | 9,904 | 3,112 | 61.2%",
            "Total | 47,745 | 42,624 | 15,031 | 60.8%",
            "won 23 of the 45 seats",
        ],
        "absent": ["Polling stations", "Bins and recycling", "Share on Facebook", "Opening hours"],
    }
)

# 21. News page whose teasers below the story are <article> cards while the story itself is
# a plain div (the semantic tag marks the wrong thing); Usercentrics (shadow DOM, empty).
_CARDS = "".join(
    f'<article class="teaser-card"><a href="/sport/{i}"><img src="/t{i}.jpg" alt=""><h3 class="teaser-card__title">{t}</h3><p class="teaser-card__text">{d}</p></a></article>'
    for i, (t, d) in enumerate(
        [
            (
                "Derby ends goalless in the rain",
                "Neither side managed a shot on target in the second half as the pitch became waterlogged.",
            ),
            (
                "New coach signs three-year deal",
                "The former youth team manager takes over with the club fourth from bottom.",
            ),
            (
                "Stadium expansion approved",
                "The north stand will add 4,000 seats by the start of the 2027 season.",
            ),
        ]
    )
)
PAGES.append(
    {
        "name": "r10_news_de_teaser_articles",
        "url": "https://www.sportblatt.example/fussball/regionalliga/frauenteam-aufstieg-1234",
        "kind": "news",
        "lang": "de",
        "html": f"""<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>Frauenteam schafft den Aufstieg in die Zweite Liga | Sportblatt</title>{USERCENTRICS}</head><body><div class="page"><header class="page-header"><a class="brand" href="/">Sportblatt</a><nav class="nav-main"><ul>{_menu("Fußball|Handball|Eishockey|Tennis|Motorsport|Ergebnisse|Tabellen")}</ul></nav></header><div class="page-body"><div class="story"><div class="story__kicker">Regionalliga</div><!--G--><h1 class="story__headline">Frauenteam schafft den Aufstieg in die Zweite Liga</h1><p class="story__teaser">Mit einem 3:1 gegen den Tabellenzweiten sichert sich die Mannschaft am letzten Spieltag den ersten Platz.</p><!--/G--><div class="story__byline">Von Jana Keller · 09.06.2025, 18:40 Uhr</div>
<!--G--><div class="story__text"><p>Vor 2.300 Zuschauern, so vielen wie noch nie bei einem Heimspiel der Frauen, drehte die Mannschaft einen frühen Rückstand. Kapitänin Lea Brandt glich kurz vor der Pause per Kopf aus.</p><p>In der zweiten Hälfte trafen die eingewechselte Mira Yilmaz und erneut Brandt. Damit beendet das Team die Saison mit 58 Punkten, zwei mehr als der direkte Konkurrent.</p><h2 class="story__subhead">Planung für die neue Liga</h2><p>Der Verein will den Etat für die Frauenabteilung auf 450.000 Euro verdoppeln. Drei Spielerinnen sollen neue Verträge erhalten, außerdem wird ein zweiter Trainerposten geschaffen.</p><p>„Wir haben lange auf diesen Tag hingearbeitet“, sagte Trainerin Sabine Roth. „Jetzt müssen wir zeigen, dass wir auch in der Zweiten Liga mithalten können.“</p></div><!--/G--></div>
<section class="more-stories"><h2 class="more-stories__title">Mehr aus dem Sport</h2>{_CARDS}</section></div><footer class="page-footer"><p>© 2025 Sportblatt Medien GmbH</p><ul>{_menu("Impressum|Datenschutz|Privatsphäre-Einstellungen|AGB")}</ul></footer></div></body></html>""",
        "present": [
            "# Frauenteam schafft den Aufstieg in die Zweite Liga",
            "Mit einem 3:1 gegen den Tabellenzweiten",
            "Vor 2.300 Zuschauern",
            "## Planung für die neue Liga",
            "auch in der Zweiten Liga mithalten können.“",
        ],
        "absent": [
            "Derby ends goalless",
            "Mehr aus dem Sport",
            "Privatsphäre-Einstellungen",
            "Sportblatt Medien GmbH",
        ],
    }
)

# 22. Medium-like post: everything is div/section soup with hashed classes inside one
# <article>; claps and responses bar, "More from the author" after it, a sign-up nag.
PAGES.append(
    {
        "name": "r10_blog_medium_like",
        "url": "https://medium.example/@rkoh/what-a-year-of-on-call-taught-me-5f1e2d",
        "kind": "blog",
        "lang": "en",
        "html": f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>What a year of on-call taught me | by R. Koh | Medium</title><script type="application/ld+json">{json.dumps({"@context": "http://schema.org", "@type": "NewsArticle", "headline": "What a year of on-call taught me", "author": {"@type": "Person", "name": "R. Koh"}})}</script></head><body><div id="root"><div class="a b c"><div class="l m n"><div class="o p"><a href="/" aria-label="Homepage">Medium</a><div class="q r"><a href="/m/signin">Sign in</a><a class="s t" href="/m/signin?operation=register">Get started</a></div></div></div><div class="u v"><article><div class="w x"><section><div class="y z ab"><div class="ac ae"><!--G--><h1 id="9a1b" class="pw-post-title ag ah ai">What a year of on-call taught me</h1><!--/G--><div class="aj ak"><div class="al am"><a href="/@rkoh" rel="noopener follow"><img alt="R. Koh" class="an" src="/avatar.png" width="44" height="44"></a><div class="ao"><span class="ap"><a href="/@rkoh" rel="noopener follow">R. Koh</a></span><span class="aq"><button>Follow</button></span><div class="ar"><span data-testid="storyReadTime">5 min read</span><span>·</span><span data-testid="storyPublishDate">Jan 7, 2025</span></div></div></div><div class="as at"><div class="au"><button data-testid="headerClapButton" aria-label="clap">1.2K</button><button aria-label="responses">34</button></div><div class="av"><button aria-label="Add to list">Save</button><button aria-label="Listen">Listen</button><button aria-label="Share">Share</button></div></div></div>
<!--G--><p id="01cd" class="pw-post-body-paragraph aw ax ay">Last January I joined the on-call rotation for our payments platform. Twelve months, 26 weeks on call and 311 pages later, here is what I would tell myself on day one.</p><h2 id="2b7e" class="az ba bb">Most alerts are not incidents</h2><p id="3c8f" class="pw-post-body-paragraph aw ax ay">Of the 311 pages, 204 needed no action at all. We deleted or rewrote 40 alerts in the first quarter, and pages per week dropped from 9 to 3.</p><h2 id="4d9a" class="az ba bb">Write the runbook while you are tired</h2><p id="5e0b" class="pw-post-body-paragraph aw ax ay">The best runbooks we have were written at 4am by the person who had just fixed the problem. Clean them up the next day, but capture the steps while they are fresh.</p><blockquote class="bc bd"><p id="6f1c" class="pw-post-body-paragraph be bf">If you had to think about it at 4am, the next person will too.</p></blockquote><p id="7a2d" class="pw-post-body-paragraph aw ax ay">Finally, hand over properly. A fifteen-minute call at the end of each shift saved more incidents than any tool we bought.</p><!--/G--></div></div></section></div></article>
<div class="bg bh"><div class="bi"><button aria-label="clap">1.2K</button><button aria-label="responses">34</button></div><div class="bj"><a href="/tag/sre">Sre</a><a href="/tag/on-call">On Call</a><a href="/tag/devops">DevOps</a></div></div><div class="bk bl"><h2 class="bm">Written by R. Koh</h2><p class="bn">2.1K Followers</p><p class="bo">Site reliability engineer. Writing about incidents, pagers and sleep.</p><button>Follow</button></div><div class="bp bq"><h2 class="br">More from R. Koh</h2><div class="bs"><a href="/@rkoh/p1"><h3>Postmortems nobody reads</h3><p>How we made incident reviews short enough that people actually finish them.</p></a></div><div class="bs"><a href="/@rkoh/p2"><h3>The dashboard we deleted</h3><p>Forty panels, one useful graph, and what we replaced it with.</p></a></div></div><div class="bt bu"><h2>Recommended from Medium</h2><div class="bs"><a href="/x/p3"><h3>Ten Kubernetes mistakes I made so you don't have to</h3></a></div></div></div><div class="bv bw"><p>Help</p><p>Status</p><p>About</p><p>Careers</p><p>Press</p><p>Blog</p><p>Privacy</p><p>Terms</p><p>Text to speech</p></div></div></div><div class="overlay" role="dialog" aria-modal="true"><h2>Create an account to read the full story.</h2><p>The author made this story available to Medium members only.</p><a href="/m/signin?operation=register">Sign up with Google</a></div></body></html>""",
        "present": [
            "# What a year of on-call taught me",
            "Twelve months, 26 weeks on call and 311 pages later",
            "## Most alerts are not incidents",
            "If you had to think about it at 4am",
            "saved more incidents than any tool we bought.",
        ],
        "absent": [
            "Postmortems nobody reads",
            "Recommended from Medium",
            "Create an account to read the full story.",
            "Text to speech",
            "Site reliability engineer. Writing about",
        ],
    }
)
