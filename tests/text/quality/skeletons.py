# ruff: noqa: E501
"""The chrome of the quality set's sites: one function per kind of site (see build.py)."""

from __future__ import annotations

import html

# Per language: menu entries, the cookie banner, its button, the footer line, the heading
# and entries of a related-links box, the newsletter box and the share bar.
CHROME = {
    "en": {
        "menu": "Home|World|Business|Technology|Science|Culture|Sport|Opinion",
        "cookie": "We and our 847 partners store and access information on your device, such as"
        " cookies, and process personal data for personalised ads and content measurement.",
        "accept": "Accept all cookies",
        "footer": "© 2025 Example Media Group. All rights reserved. Terms of use · Privacy policy",
        "related": "More from this section",
        "items": "Markets slide as oil prices climb|Five things to know before the budget"
        "|How the housing crunch reached the suburbs",
        "newsletter": "Sign up for our daily briefing newsletter",
        "share": "Share on Facebook|Share on X|Copy link",
        "comments": "Join the conversation",
    },
    "de": {
        "menu": "Startseite|Politik|Wirtschaft|Kultur|Sport|Wissen|Reise",
        "cookie": "Wir verwenden Cookies und ähnliche Technologien, um Inhalte zu personalisieren."
        " Mit einem Klick auf „Alle akzeptieren“ stimmen Sie der Verarbeitung Ihrer Daten zu.",
        "accept": "Alle akzeptieren",
        "footer": "© 2025 Beispiel Verlag GmbH · Impressum · Datenschutz",
        "related": "Das könnte Sie auch interessieren",
        "items": "Bahn kündigt neue Fahrpläne an|Wetter: Sturmtief zieht über Norddeutschland"
        "|Rentenreform im Bundestag",
        "newsletter": "Jetzt den Newsletter abonnieren",
        "share": "Auf Facebook teilen|Per E-Mail senden",
        "comments": "Kommentare anzeigen",
    },
    "fr": {
        "menu": "Accueil|International|Politique|Économie|Culture|Sport",
        "cookie": "Nous utilisons des cookies pour améliorer votre expérience. En cliquant sur"
        " « Accepter », vous consentez à leur utilisation par nos partenaires.",
        "accept": "Accepter et fermer",
        "footer": "© 2025 Exemple Presse SA · Mentions légales · Politique de confidentialité",
        "related": "À lire aussi",
        "items": "La réforme des retraites revient au Sénat|Canicule : les conseils des médecins"
        "|Le prix du pain augmente encore",
        "newsletter": "Inscrivez-vous à notre lettre d'information",
        "share": "Partager sur Facebook|Copier le lien",
        "comments": "Réagir à cet article",
    },
    "es": {
        "menu": "Portada|España|Internacional|Economía|Cultura|Deportes",
        "cookie": "Utilizamos cookies propias y de terceros para mostrarle publicidad"
        " personalizada. Puede aceptar todas las cookies pulsando el botón «Aceptar».",
        "accept": "Aceptar",
        "footer": "© 2025 Ejemplo Ediciones · Aviso legal · Política de privacidad",
        "related": "Te puede interesar",
        "items": "El Gobierno aprueba el nuevo plan de vivienda|Ola de calor en el sur"
        "|La liga arranca con sorpresas",
        "newsletter": "Suscríbete a nuestro boletín",
        "share": "Compartir en Facebook|Compartir en WhatsApp",
        "comments": "Comentarios",
    },
    "ru": {
        "menu": "Главная|Политика|Экономика|Общество|Культура|Спорт",
        "cookie": "Мы используем файлы cookie, чтобы сайт работал лучше. Продолжая пользоваться"
        " сайтом, вы соглашаетесь с политикой конфиденциальности и accept cookies.",
        "accept": "Принять",
        "footer": "© 2025 Пример Медиа. Все права защищены.",
        "related": "Читайте также",
        "items": "Курс рубля снова изменился|В Москве открыли новую станцию метро"
        "|Прогноз погоды на выходные",
        "newsletter": "Подпишитесь на нашу рассылку",
        "share": "Поделиться ВКонтакте|Поделиться в Telegram",
        "comments": "Обсуждение",
    },
    "zh": {
        "menu": "首页|国内|国际|财经|科技|体育|娱乐",
        "cookie": "本网站使用cookie以改善您的浏览体验。继续浏览即表示您同意我们的隐私政策 (accept cookies)。",
        "accept": "接受",
        "footer": "© 2025 示例新闻网 版权所有 京ICP备00000000号",
        "related": "相关阅读",
        "items": "多地出台楼市新政|新能源汽车销量再创新高|暑期旅游市场火热",
        "newsletter": "订阅我们的新闻简报",
        "share": "分享到微博|分享到微信",
        "comments": "网友评论",
    },
    "ja": {
        "menu": "トップ|国内|国際|経済|スポーツ|エンタメ",
        "cookie": "当サイトではクッキー(cookie)を使用しています。「同意する」をクリックすると、cookieの使用に同意したものとみなされます (consent)。",
        "accept": "同意する",
        "footer": "© 2025 サンプル新聞社 無断転載を禁じます",
        "related": "関連記事",
        "items": "円相場、一時１５０円台に|梅雨明けは来週か|新型ロケット打ち上げ成功",
        "newsletter": "メールマガジンに登録する",
        "share": "Xでシェア|LINEで送る",
        "comments": "コメントを見る",
    },
    "ko": {
        "menu": "홈|정치|경제|사회|국제|스포츠",
        "cookie": "이 웹사이트는 더 나은 서비스를 위해 쿠키(cookie)를 사용합니다. 동의(accept)를 누르면 쿠키 사용에 동의하게 됩니다.",
        "accept": "동의",
        "footer": "© 2025 예시일보. 무단 전재 및 재배포 금지",
        "related": "관련 기사",
        "items": "서울 아파트값 상승세 지속|장마 시작, 남부지방 폭우|국가대표팀 평가전 승리",
        "newsletter": "뉴스레터 구독하기",
        "share": "카카오톡 공유|페이스북 공유",
        "comments": "댓글",
    },
    "ar": {
        "menu": "الرئيسية|أخبار|اقتصاد|رياضة|ثقافة|منوعات",
        "cookie": "يستخدم هذا الموقع ملفات تعريف الارتباط (cookies) لتحسين تجربتك. بالنقر على"
        " «موافق» فإنك توافق على سياسة الخصوصية (accept).",
        "accept": "موافق",
        "footer": "© 2025 جميع الحقوق محفوظة لشبكة المثال الإخبارية",
        "related": "اقرأ أيضا",
        "items": "ارتفاع أسعار النفط في الأسواق العالمية|افتتاح معرض الكتاب الدولي"
        "|المنتخب يتأهل إلى النهائي",
        "newsletter": "اشترك في النشرة البريدية",
        "share": "شارك على فيسبوك|شارك على واتساب",
        "comments": "التعليقات",
    },
    "he": {
        "menu": "ראשי|חדשות|כלכלה|ספורט|תרבות|אוכל",
        "cookie": "אתר זה משתמש בעוגיות (cookies) כדי לשפר את חוויית הגלישה. המשך הגלישה מהווה"
        " הסכמה למדיניות הפרטיות (accept).",
        "accept": "אישור",
        "footer": "© 2025 כל הזכויות שמורות לדוגמה מדיה",
        "related": "כתבות נוספות",
        "items": "מחירי הדירות ממשיכים לעלות|גל חום צפוי בסוף השבוע|הנבחרת ניצחה במשחק אימון",
        "newsletter": "הירשמו לניוזלטר שלנו",
        "share": "שתפו בפייסבוק|שתפו בוואטסאפ",
        "comments": "תגובות",
    },
    "pt": {
        "menu": "Início|Brasil|Mundo|Economia|Cultura|Esportes",
        "cookie": "Usamos cookies para personalizar anúncios e melhorar a sua experiência. Ao"
        " clicar em «Aceitar», você concorda com a nossa política de privacidade.",
        "accept": "Aceitar",
        "footer": "© 2025 Exemplo Comunicação. Todos os direitos reservados.",
        "related": "Leia também",
        "items": "Inflação desacelera em junho|Frente fria chega ao Sul|Seleção convoca novos"
        " jogadores",
        "newsletter": "Assine a nossa newsletter",
        "share": "Compartilhar no Facebook|Compartilhar no WhatsApp",
        "comments": "Comentários",
    },
    "it": {
        "menu": "Home|Cronaca|Politica|Economia|Cultura|Sport",
        "cookie": "Questo sito utilizza cookie di profilazione propri e di terze parti. Cliccando"
        " su «Accetta» acconsenti all'uso dei cookie.",
        "accept": "Accetta tutti",
        "footer": "© 2025 Esempio Editore S.p.A. · P.IVA 00000000000 · Privacy",
        "related": "Potrebbe interessarti",
        "items": "Sciopero dei trasporti venerdì|Caldo record in Sicilia|La Serie A presenta il"
        " calendario",
        "newsletter": "Iscriviti alla newsletter",
        "share": "Condividi su Facebook|Condividi su WhatsApp",
        "comments": "Commenti",
    },
    "pl": {
        "menu": "Strona główna|Kraj|Świat|Gospodarka|Kultura|Sport",
        "cookie": "Używamy plików cookie, aby zapewnić najlepszą jakość usług. Kliknij"
        " „Akceptuję”, aby wyrazić zgodę na przetwarzanie danych (consent).",
        "accept": "Akceptuję",
        "footer": "© 2025 Przykład Media Sp. z o.o. Wszelkie prawa zastrzeżone.",
        "related": "Czytaj także",
        "items": "Nowe przepisy drogowe od lipca|Upały w całym kraju|Reprezentacja w finale",
        "newsletter": "Zapisz się do newslettera",
        "share": "Udostępnij na Facebooku|Kopiuj link",
        "comments": "Komentarze",
    },
    "nl": {
        "menu": "Home|Binnenland|Buitenland|Economie|Cultuur|Sport",
        "cookie": "Wij gebruiken cookies om onze website te verbeteren en advertenties te tonen."
        " Klik op ‘Akkoord’ om cookies te accepteren.",
        "accept": "Akkoord",
        "footer": "© 2025 Voorbeeld Media B.V. · Privacyverklaring · Cookiebeleid",
        "related": "Lees ook",
        "items": "Kabinet presenteert woonplan|Hittegolf houdt aan|Oranje wint oefenduel",
        "newsletter": "Schrijf je in voor de nieuwsbrief",
        "share": "Deel op Facebook|Deel via WhatsApp",
        "comments": "Reacties",
    },
}


def _e(text: str) -> str:
    return html.escape(text, quote=False)


def _menu(chrome: dict, cls: str = "menu", item: str = "menu-item", prefix: str = "/") -> str:
    entries = chrome["menu"].split("|")
    return (
        f'<ul class="{cls}">'
        + "".join(
            f'<li class="{item}"><a href="{prefix}{index}/">{_e(entry)}</a></li>'
            for index, entry in enumerate(entries)
        )
        + "</ul>"
    )


def _related(chrome: dict, cls: str = "related-articles") -> str:
    items = "".join(
        f'<li><a href="/story/{index}"><img src="/t/{index}.jpg" alt="">'
        f"<span>{_e(item)}</span></a></li>"
        for index, item in enumerate(chrome["items"].split("|"))
    )
    return f'<div class="{cls}"><h3>{_e(chrome["related"])}</h3><ul>{items}</ul></div>'


def _share(chrome: dict) -> str:
    return (
        '<div class="share-buttons">'
        + "".join(
            f'<a href="https://social.example/share?u=1" class="share">{_e(s)}</a>'
            for s in chrome["share"].split("|")
        )
        + "</div>"
    )


def _cookie(chrome: dict, style: str) -> str:
    text, accept = _e(chrome["cookie"]), _e(chrome["accept"])
    if style == "onetrust":
        return (
            '<div id="onetrust-consent-sdk"><div id="onetrust-banner-sdk" class="otFlat">'
            f'<div class="ot-sdk-container"><p id="onetrust-policy-text">{text}</p>'
            f'<button id="onetrust-accept-btn-handler">{accept}</button></div></div></div>'
        )
    if style == "plain":
        # No telling class at all: only the text says what it is.
        return (
            f'<div class="box-17 fixed-bottom"><p>{text}</p><a href="/privacy">{accept}</a></div>'
        )
    return (
        f'<div class="cookie-notice" id="cookie-law-info-bar"><span>{text}</span>'
        f'<a href="#" class="cli-accept">{accept}</a></div>'
    )


def _newsletter(chrome: dict) -> str:
    return (
        '<div class="newsletter-box"><h4>Newsletter</h4>'
        f'<form action="/subscribe"><p>{_e(chrome["newsletter"])}</p>'
        '<input type="email" name="email"><button>OK</button></form></div>'
    )


def _head(article: dict, extra: str = "") -> str:
    lang = article["lang"]
    direction = ' dir="rtl"' if lang in ("ar", "he") else ""
    charset = article.get("encoding", "utf-8")
    style = "".join(f".c{i}{{margin:{i}px}}" for i in range(120))
    script = "".join(f"window.cfg{i}={{id:{i},flag:true}};" for i in range(60))
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}"{direction}><head><meta charset="{charset}">'
        f"<title>{_e(article['title'])}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{style}</style><script>{script}</script>{extra}</head>\n"
    )


def _headline(article: dict, standfirst_in: str = "p") -> str:
    standfirst = article.get("standfirst")
    out = f'<h1 class="headline">{_e(article["headline"])}</h1>'
    if standfirst:
        out += f'<{standfirst_in} class="standfirst">{_e(standfirst)}</{standfirst_in}>'
    return out


def _byline(article: dict) -> str:
    return f'<div class="byline"><span class="author">{_e(article.get("byline", ""))}</span></div>'


def news_divs(article: dict, body: str) -> str:
    """A news CMS: nested divs, classes only, standfirst in a <header> outside <article>."""
    c = CHROME[article["lang"]]
    return (
        _head(article)
        + '<body class="article-page"><div id="wrapper">'
        + _cookie(c, article.get("cookie", "notice"))
        + '<div class="header"><div class="logo"><a href="/">Example</a></div>'
        + _menu(c, "main-menu")
        + "</div>"
        + '<div id="content" class="container"><div class="col-main">'
        + f'<header class="article-header">{_headline(article)}</header>'
        + _byline(article)
        + _share(c)
        + f'<div class="article-body">{body}</div>'
        + _share(c)
        + _related(c)
        + f'<div id="comments" class="comments"><h3>{_e(c["comments"])}</h3>'
        '<div class="comment"><p>Great piece, thanks. Totally agree with the mayor on this one.</p>'
        "</div></div>"
        + '</div><div class="col-side sidebar"><h3>Most read</h3>'
        + _related(c, "most-read")
        + _newsletter(c)
        + '<div class="ad-slot"><p>Advertisement</p></div></div></div>'
        + f'<div class="footer"><p>{_e(c["footer"])}</p></div></div></body></html>\n'
    )


def html5(article: dict, body: str) -> str:
    """Semantic HTML5: header/nav/main/article/aside/footer, cookie dialog."""
    c = CHROME[article["lang"]]
    return (
        _head(article)
        + "<body>"
        + f'<div role="dialog" aria-label="cookies" class="consent">{_e(c["cookie"])}'
        f"<button>{_e(c['accept'])}</button></div>"
        + '<header class="site-header"><a href="/" class="brand">Example</a>'
        + f"<nav>{_menu(c)}</nav></header>"
        + '<main id="main"><article>'
        + f"<header>{_headline(article)}<p class='meta'>{_e(article.get('byline', ''))}</p></header>"
        + body
        + f"<footer><p>{_e(c['share'].split('|')[0])}</p></footer>"
        + "</article>"
        + f'<section class="related">{_related(c, "teasers")}</section>'
        + f"<aside><h2>{_e(c['related'])}</h2>{_newsletter(c)}</aside>"
        + "</main>"
        + f"<footer><p>{_e(c['footer'])}</p></footer></body></html>\n"
    )


def wordpress(article: dict, body: str) -> str:
    """A WordPress theme (Twenty-something): site, masthead, entry-content, comments-area."""
    c = CHROME[article["lang"]]
    return (
        _head(article)
        + '<body class="post-template-default single single-post has-sidebar">'
        + '<div id="page" class="site"><a class="skip-link" href="#content">Skip to content</a>'
        + '<header id="masthead" class="site-header"><div class="site-branding">'
        '<p class="site-title"><a href="/">A Small Blog</a></p>'
        '<p class="site-description">Notes on food, travel and code</p></div>'
        + f'<nav id="site-navigation" class="main-navigation">{_menu(c, "menu")}</nav></header>'
        + '<div id="content" class="site-content"><div id="primary" class="content-area">'
        + '<main id="main" class="site-main"><article class="post type-post hentry">'
        + f'<header class="entry-header">{_headline(article)}'
        f'<div class="entry-meta">Posted on 3 June 2025 by {_e(article.get("byline", "admin"))}</div></header>'
        + f'<div class="entry-content">{body}</div>'
        + '<footer class="entry-footer"><span class="cat-links">Posted in <a href="/c/1">Misc</a>'
        '</span><span class="tags-links">Tagged <a href="/t/a">notes</a>, <a href="/t/b">life</a>'
        "</span></footer></article>"
        + '<nav class="navigation post-navigation"><a href="/prev">Previous post</a>'
        '<a href="/next">Next post</a></nav>'
        + f'<div id="comments" class="comments-area"><h2 class="comments-title">{_e(c["comments"])}'
        '</h2><ol class="comment-list"><li class="comment"><div class="comment-content"><p>'
        "Lovely post! I tried this last weekend and it worked perfectly for us.</p></div></li></ol>"
        '<div id="respond" class="comment-respond"><form><p>Leave a Reply</p>'
        "<textarea></textarea></form></div></div>"
        + "</main></div>"
        + '<aside id="secondary" class="widget-area"><section class="widget widget_recent_entries">'
        + f"<h2>Recent Posts</h2>{_related(c, 'recent')}</section></aside></div>"
        + f'<footer id="colophon" class="site-footer"><p>{_e(c["footer"])}</p></footer></div>'
        + _cookie(c, article.get("cookie", "notice"))
        + "</body></html>\n"
    )


def aspnet(article: dict, body: str) -> str:
    """An ASP.NET WebForms page: everything inside one <form>, layout tables."""
    c = CHROME[article["lang"]]
    return (
        _head(article) + '<body><form method="post" action="./page.aspx" id="aspnetForm">'
        '<input type="hidden" name="__VIEWSTATE" value="/wEPDwUKMTY1NDU2MTA1MmRk">'
        + '<table class="layout" width="100%"><tr><td colspan="2" class="banner">'
        + _menu(c, "topnav")
        + '</td></tr><tr><td class="leftcol" width="200">'
        + '<div class="quicklinks"><a href="/a">Forms</a><br><a href="/b">Contact us</a><br>'
        '<a href="/c">Opening hours</a></div></td><td class="maincol">'
        + '<div id="ctl00_ContentPlaceHolder1_pnlContent">'
        + _headline(article)
        + body
        + "</div></td></tr></table>"
        + f'<div id="ctl00_footer"><p>{_e(c["footer"])}</p></div>'
        + _cookie(c, "plain")
        + "</form></body></html>\n"
    )


def mediawiki(article: dict, body: str) -> str:
    """A MediaWiki article: mw-parser-output, toc, navboxes, sidebar portlets."""
    c = CHROME[article["lang"]]
    return (
        _head(article)
        + '<body class="mediawiki"><div id="mw-page-base"></div>'
        + '<div id="content" class="mw-body" role="main">'
        + f'<h1 id="firstHeading" class="firstHeading">{_e(article["headline"])}</h1>'
        + '<div id="bodyContent" class="vector-body"><div id="siteSub">From Examplepedia, the'
        " free encyclopedia</div>"
        + '<div id="mw-content-text"><div class="mw-parser-output">'
        + '<div id="toc" class="toc" role="navigation"><h2>Contents</h2><ul><li>1 History</li>'
        "<li>2 See also</li></ul></div>"
        + (f"<p>{_e(article['standfirst'])}</p>" if article.get("standfirst") else "")
        + body
        + '<div class="navbox"><table><tr><th>Related topics</th><td>'
        + " · ".join(f'<a href="/wiki/T{i}">Topic {i}</a>' for i in range(30))
        + "</td></tr></table></div>"
        + "</div></div></div></div>"
        + '<div id="mw-navigation"><div id="mw-panel"><div class="portal"><h3>Navigation</h3>'
        + _menu(c, "vector-menu-content-list")
        + "</div></div></div>"
        + '<div id="footer" role="contentinfo"><p>This page was last edited on 1 June 2025.'
        "</p></div></body></html>\n"
    )


def docs(article: dict, body: str) -> str:
    """A docs site (MkDocs Material): md-nav sidebars, md-content, md-footer."""
    c = CHROME[article["lang"]]
    toc = "".join(
        f'<li class="md-nav__item"><a class="md-nav__link" href="/p{i}/">Page {i} of the'
        f" guide</a></li>"
        for i in range(40)
    )
    return (
        _head(article) + '<body dir="ltr"><header class="md-header"><nav class="md-header__inner">'
        '<a href="/" class="md-logo">ProjectDocs</a></nav></header>'
        + '<div class="md-container"><main class="md-main"><div class="md-main__inner">'
        + '<div class="md-sidebar md-sidebar--primary"><div class="md-sidebar__scrollwrap">'
        f'<ul class="md-nav__list">{toc}</ul></div></div>'
        + '<div class="md-content"><article class="md-content__inner md-typeset">'
        + f"<h1>{_e(article['headline'])}</h1>"
        + (f"<p>{_e(article['standfirst'])}</p>" if article.get("standfirst") else "")
        + body
        + "</article></div></div></main>"
        + '<footer class="md-footer"><div class="md-footer__inner"><a class="md-footer__link"'
        ' href="/prev/">Previous: Installation</a><a href="/next/">Next: Reference</a></div>'
        f'<div class="md-copyright">{_e(c["footer"])}</div></footer></div></body></html>\n'
    )


def shop(article: dict, body: str) -> str:
    """A shop's product page: breadcrumbs, gallery, price box, tabs, recommendations."""
    c = CHROME[article["lang"]]
    return (
        _head(article, '<script type="application/ld+json">{"@type":"Product"}</script>')
        + '<body class="template-product">'
        + _cookie(c, "onetrust")
        + '<div class="announcement-bar">Free shipping over €50</div>'
        + '<header class="site-header">'
        + _menu(c, "mega-menu", "mega-menu__item")
        + "</header>"
        + '<main id="MainContent" class="content-for-layout">'
        + '<nav class="breadcrumbs" aria-label="breadcrumbs"><a href="/">Home</a> / '
        '<a href="/c">Catalogue</a></nav>'
        + '<div class="product"><div class="product__media"><img src="/p.jpg" alt="photo"></div>'
        + '<div class="product__info">'
        + _headline(article)
        + '<div class="price"><span class="price-item">€89,00</span></div>'
        + '<form action="/cart/add"><select name="size"><option>M</option></select>'
        "<button>Add to cart</button></form>"
        + f'<div class="product__description rte">{body}</div></div></div>'
        + '<div class="product-recommendations"><h2>You may also like</h2><ul>'
        + "".join(
            f'<li class="card"><a href="/p/{i}">Similar item {i}</a><span>€{i}9,00</span></li>'
            for i in range(8)
        )
        + "</ul></div></main>"
        + f'<footer class="footer"><p>{_e(c["footer"])}</p>{_newsletter(c)}</footer>'
        + "</body></html>\n"
    )


def forum(article: dict, body: str) -> str:
    """A forum thread: posts are the content, user panels and signatures are not."""
    c = CHROME[article["lang"]]
    posts = []
    for index, part in enumerate(body.split("<hr>")):
        posts.append(
            f'<div class="post" id="p{index}"><div class="postprofile"><a href="/u/{index}">'
            f"user{index}</a><br>Posts: {index * 37 + 5}<br>Joined: 2019</div>"
            f'<div class="postbody"><div class="content">{part}</div>'
            '<div class="signature">-- sent from my phone</div></div></div>'
        )
    return (
        _head(article)
        + '<body id="phpbb"><div id="wrap">'
        + '<div class="headerbar"><a href="/">Example Forum</a>'
        + _menu(c, "navbar")
        + "</div>"
        + '<div id="page-body"><h2 class="topic-title">'
        + _e(article["headline"])
        + "</h2>"
        + '<div class="action-bar"><a href="/reply">Post Reply</a> '
        '<div class="pagination">Page 1 of 1</div></div>'
        + "".join(posts)
        + '<div class="action-bar bottom"><a href="/reply">Post Reply</a></div>'
        + '<div class="stat-block"><h3>Who is online</h3><p>Users browsing this forum: '
        "Bing [Bot] and 3 guests</p></div></div>"
        + f'<div class="footer"><p>{_e(c["footer"])}</p></div>'
        + _cookie(c, article.get("cookie", "notice"))
        + "</div></body></html>\n"
    )


def recipe(article: dict, body: str) -> str:
    """A recipe blog: jump-to-recipe button, ads between paragraphs, recipe card."""
    c = CHROME[article["lang"]]
    parts = body.split("</p>", 3)
    padded = (
        "</p><div class='ad-container'><p>Advertisement</p></div>".join(parts[:3])
        + "</p>"
        + (parts[3] if len(parts) > 3 else "")
    )
    return (
        _head(article)
        + '<body class="single-recipe"><div class="site-container">'
        + '<header class="site-header">'
        + _menu(c, "genesis-nav-menu")
        + "</header>"
        + '<div class="site-inner"><div class="content-sidebar-wrap"><main class="content">'
        + '<article class="post type-post entry">'
        + f'<header class="entry-header">{_headline(article)}</header>'
        + '<a href="#recipe" class="jump-to-recipe">Jump to Recipe</a>'
        + f'<div class="entry-content">{padded}</div>'
        + '<div class="social-share">'
        + _share(c)
        + "</div>"
        + "</article>"
        + f'<div class="comments"><h3>{_e(c["comments"])}</h3><p>5 stars, made it twice already!</p></div>'
        + '</main><aside class="sidebar sidebar-primary widget-area"><section class="widget">'
        "<h4>About me</h4><p>Hi, I am a home cook sharing family recipes since 2012.</p>"
        + "</section>"
        + _newsletter(c)
        + "</aside></div></div>"
        + f'<footer class="site-footer"><p>{_e(c["footer"])}</p></footer></div>'
        + _cookie(c, "notice")
        + "</body></html>\n"
    )


def government(article: dict, body: str) -> str:
    """A government page (GOV.UK design system): phase banner, feedback form, related nav."""
    c = CHROME[article["lang"]]
    return (
        _head(article)
        + '<body class="govuk-template__body">'
        + '<div class="govuk-cookie-banner" role="region" aria-label="Cookies on Example.gov">'
        f'<div class="govuk-cookie-banner__message"><p>{_e(c["cookie"])}</p>'
        f'<button class="govuk-button">{_e(c["accept"])}</button></div></div>'
        + '<a href="#main-content" class="govuk-skip-link">Skip to main content</a>'
        + '<header class="govuk-header" role="banner"><div class="govuk-header__container">'
        '<a href="/" class="govuk-header__link">EXAMPLE.GOV</a></div></header>'
        + '<div class="govuk-width-container"><div class="govuk-phase-banner"><p>'
        "BETA This is a new service – your feedback will help us to improve it.</p></div>"
        + '<div class="govuk-breadcrumbs"><ol class="govuk-breadcrumbs__list">'
        '<li><a href="/">Home</a></li><li><a href="/benefits">Benefits</a></li></ol></div>'
        + '<main class="govuk-main-wrapper" id="main-content" role="main">'
        + '<div class="govuk-grid-row"><div class="govuk-grid-column-two-thirds">'
        + _headline(article, "p")
        + f'<div class="govspeak">{body}</div></div>'
        + '<div class="govuk-grid-column-one-third"><aside class="app-related-items"'
        ' role="complementary"><h2>Related content</h2>'
        + _related(c, "related-list")
        + "</aside></div></div>"
        + '<div class="gem-c-feedback"><h2>Is this page useful?</h2>'
        '<a href="/yes">Yes</a> <a href="/no">No</a> <a href="/report">Report a problem with'
        " this page</a></div></main></div>"
        + f'<footer class="govuk-footer" role="contentinfo"><p>{_e(c["footer"])}</p></footer>'
        + "</body></html>\n"
    )


def megamenu(article: dict, body: str) -> str:
    """A page whose mega-menu (div/ul soup, no <nav>) is larger than the parser input."""
    c = CHROME[article["lang"]]
    columns = []
    for column in range(120):
        links = "".join(
            f'<li class="mega-menu__item mega-menu__item--level-3"><a class="mega-menu__link"'
            f' href="https://www.bigstore.example/c/department-{column}/category-{row}/'
            f'?ref=megamenu&amp;position={column}-{row}" data-track="menu-{column}-{row}">'
            f"Category {column}.{row}</a></li>"
            for row in range(14)
        )
        columns.append(
            f'<li class="mega-menu__column"><span>Department {column}</span>'
            f'<ul class="mega-menu__list">{links}</ul></li>'
        )
    return (
        _head(article)
        + '<body><div class="page-wrapper">'
        + '<div class="header-container"><div class="mega-menu">'
        + f'<ul class="mega-menu__columns">{"".join(columns)}</ul></div></div>'
        + '<div class="page-main"><div class="column main">'
        + _headline(article)
        + f'<div class="article-text">{body}</div>'
        + "</div></div>"
        + f'<div class="page-footer"><p>{_e(c["footer"])}</p></div></div></body></html>\n'
    )


def qa(article: dict, body: str) -> str:
    """A Q&A site: the question and its answers (votes, signatures, comments around them),
    a linked headline, a sidebar of hot questions."""
    c = CHROME[article["lang"]]
    posts = []
    for index, part in enumerate(body.split("<hr>")):
        kind = "question" if index == 0 else "answer"
        comments = "".join(
            f'<li class="comment"><span class="comment-copy">Thanks, that helped ({index}.{n}).'
            f'</span> <a class="comment-user" href="/u/{n}">user{n}</a></li>'
            for n in range(2)
        )
        posts.append(
            f'<div class="{kind}" id="{kind}-{index}"><div class="votecell">'
            f'<button>Up vote</button><div class="js-vote-count">{index * 7}</div></div>'
            f'<div class="postcell"><div class="s-prose js-post-body">{part}</div>'
            f'<div class="user-info"><a href="/u/{index}">author{index}</a> 12.3k</div></div>'
            f'<div class="comments"><ul class="comments-list">{comments}</ul></div></div>'
        )
    hot = "".join(
        f'<li><a href="/q/{n}">Why does question {n} keep coming back?</a></li>' for n in range(15)
    )
    return (
        _head(article)
        + '<body><header class="s-topbar"><a href="/">Stack Example</a>'
        + f"<nav>{_menu(c, 'top-nav')}</nav></header>"
        + '<div class="container"><div id="content"><div id="question-header">'
        + f'<h1><a href="{article["url"]}">{_e(article["headline"])}</a></h1></div>'
        + f'<div id="mainbar">{posts[0]}<div id="answers"><h2>{len(posts) - 1} Answers</h2>'
        + "".join(posts[1:])
        + '</div></div><div id="sidebar"><div class="module"><h4>Hot Network Questions</h4>'
        + f"<ul>{hot}</ul></div></div></div></div>"
        + f'<footer class="site-footer"><p>{_e(c["footer"])}</p></footer>'
        + _cookie(c, "onetrust")
        + "</body></html>\n"
    )


def cssinjs(article: dict, body: str) -> str:
    """A news site built with CSS-in-JS: generated class names only, so no class says what
    anything is; teasers and comments sit beside the article body in one wrapper."""
    c = CHROME[article["lang"]]
    menu = "".join(
        f'<div class="r-1awozwy"><a href="/{n}">{_e(entry)}</a></div>'
        for n, entry in enumerate(c["menu"].split("|"))
    )
    teasers = "".join(
        f'<div class="css-175oi2r"><a href="/story/{n}"><h3>{_e(item)}</h3></a>'
        f"<p>{_e(item)} — {_e(c['related'])}.</p></div>"
        for n, item in enumerate(c["items"].split("|"))
    )
    comments = "".join(
        f"<div class=css-1qaijid><b>leser{n}</b><p>{_e(c['comments'])}: {n + 1}/3 — ich sehe"
        " das anders, aber danke für den Bericht.</p></div>"
        for n in range(3)
    )
    return (
        _head(article)
        + '<body><div id="root"><div class="css-1dbjc4n r-13awgt0">'
        + f'<div class="css-1dbjc4n r-18u37iz">{menu}</div>'
        + '<div class="css-main r-1h0z5md"><div class="css-901oao">'
        + f'<h1 class="css-4rbku5">{_e(article["headline"])}</h1>'
        + (
            f'<p class="css-1g7ukpd">{_e(article["standfirst"])}</p>'
            if article.get("standfirst")
            else ""
        )
        + f'</div><div class="css-1wbh2a0">{body}</div>'
        + f'<div class="css-9x1nfd">{teasers}</div><div class="css-c1xq">{comments}</div></div>'
        + f'<div class="css-1dbjc4n r-f"><p>{_e(c["footer"])}</p></div></div></div>'
        + "</body></html>\n"
    )


SKELETONS = {
    "qa": qa,
    "cssinjs": cssinjs,
    "news_divs": news_divs,
    "html5": html5,
    "wordpress": wordpress,
    "aspnet": aspnet,
    "mediawiki": mediawiki,
    "docs": docs,
    "shop": shop,
    "forum": forum,
    "recipe": recipe,
    "government": government,
    "megamenu": megamenu,
}
