# ruff: noqa: E501
"""The quality set's articles (see build.py).  Body lines: ``## h2``, ``### h3``, ``- item``,
``1. item``, ``| cell | cell``, ``> quote``, fenced code, ``[text](url)`` links, else a
paragraph.  In forum threads ``<hr>`` (written ``---`` here) separates the posts."""

from __future__ import annotations

ARTICLES: list[dict] = [
    {
        "name": "news_en_divs",
        "kind": "news",
        "lang": "en",
        "skeleton": "news_divs",
        "url": "https://www.dailyexample.co.uk/news/2025/jun/03/ferry-service-restored",
        "title": "Island ferry service restored after three-week strike | Daily Example",
        "headline": "Island ferry service restored after three-week strike",
        "standfirst": "Crews return to work after union accepts a 6.5% pay offer, ending disruption"
        " that left islanders without fresh food deliveries.",
        "byline": "By Morag Campbell, Scotland correspondent",
        "body": """
Ferries to the northern isles resumed on Tuesday morning after crews voted to accept a revised pay offer, ending a strike that had stranded hundreds of travellers and emptied supermarket shelves on the islands.
The first sailing left the harbour at 6.45am with 212 passengers and 38 lorries on board, many of them carrying fresh produce, medicines and post that had been held at the mainland terminal since the walkout began.
The union said 81% of members who voted had backed the deal, which includes a 6.5% rise this year and a guaranteed review of rest periods. "Nobody wanted to be on strike, but the crews were exhausted," said the union's regional organiser, Ewan Drummond.
## Businesses count the cost
Hoteliers on the islands estimate they lost more than £2m in cancelled bookings at the start of the tourist season. A fish processing plant in the main town laid off 40 seasonal workers after it was unable to ship its catch.
"We are relieved, but the damage has been done," said Fiona MacLeod, who runs a guest house near the pier. "Visitors who cancelled in May will not come back in June."
The operator said it would run extra sailings over the next fortnight to clear the backlog of freight, and that passengers with cancelled tickets could claim a full refund online.
## What happens next
The Scottish government has promised an independent review of the ferry contract, which expires in 2027. Islanders have long complained that the ageing fleet breaks down too often and that there is no spare vessel when one is taken out of service.
""",
        "present": [
            "# Island ferry service restored after three-week strike",
            "Crews return to work after union accepts a 6.5% pay offer",
            "The first sailing left the harbour at 6.45am with 212 passengers",
            "## Businesses count the cost",
            "there is no spare vessel when one is taken out of service.",
        ],
        "absent": ["Most read", "Great piece, thanks", "Advertisement", "Share on Facebook"],
    },
    {
        "name": "news_de_html5",
        "kind": "news",
        "lang": "de",
        "skeleton": "html5",
        "url": "https://www.beispiel-zeitung.de/wirtschaft/energiewende-speicher-100.html",
        "title": "Energiewende: Bundesnetzagentur genehmigt Großspeicher | Beispiel-Zeitung",
        "headline": "Bundesnetzagentur genehmigt ersten Großspeicher im Norden",
        "standfirst": "Der Batteriespeicher bei Husum soll überschüssigen Windstrom aufnehmen und"
        " das Netz in windreichen Nächten entlasten.",
        "byline": "Von Katrin Vogel",
        "body": """
Die Bundesnetzagentur hat am Montag den Bau eines der größten Batteriespeicher Europas genehmigt. Die Anlage bei Husum soll eine Leistung von 250 Megawatt haben und ab 2027 überschüssigen Strom aus Windparks aufnehmen, der bislang oft abgeregelt werden muss.
Nach Angaben des Betreibers können die Batterien genug Energie speichern, um rund 180.000 Haushalte einen Abend lang zu versorgen. Die Kosten beziffert das Unternehmen auf etwa 300 Millionen Euro, einen Teil davon trägt der Bund.
## Kritik an langen Genehmigungsverfahren
Branchenverbände begrüßten die Entscheidung, kritisierten aber die Dauer des Verfahrens. Von der Antragstellung bis zur Genehmigung vergingen fast drei Jahre. „Wir brauchen solche Speicher jetzt, nicht erst Ende des Jahrzehnts“, sagte eine Sprecherin des Bundesverbands Energiespeicher.
Umweltverbände äußerten sich vorsichtig positiv. Sie verwiesen jedoch darauf, dass für die Batterien Rohstoffe wie Lithium benötigt würden, deren Abbau in den Förderländern erhebliche Folgen für Wasser und Böden habe.
## Wie geht es weiter?
1. Baubeginn ist für das Frühjahr 2026 geplant.
1. Der Netzanschluss erfolgt über das Umspannwerk Husum-Nord.
1. Der Regelbetrieb soll im Herbst 2027 beginnen.
""",
        "present": [
            "# Bundesnetzagentur genehmigt ersten Großspeicher im Norden",
            "Der Batteriespeicher bei Husum soll überschüssigen Windstrom aufnehmen",
            "„Wir brauchen solche Speicher jetzt, nicht erst Ende des Jahrzehnts“",
            "1. Baubeginn ist für das Frühjahr 2026 geplant.",
        ],
        "absent": ["Alle akzeptieren", "Startseite"],
    },
    {
        "name": "news_fr_divs",
        "kind": "news",
        "lang": "fr",
        "skeleton": "news_divs",
        "url": "https://www.exemple-presse.fr/societe/article/2025/06/02/velo-lyon",
        "title": "À Lyon, le vélo dépasse la voiture aux heures de pointe – Exemple Presse",
        "headline": "À Lyon, le vélo dépasse la voiture aux heures de pointe",
        "standfirst": "Pour la première fois, les compteurs de la métropole enregistrent plus de"
        " cyclistes que d'automobilistes sur les ponts du Rhône.",
        "byline": "Par Claire Dubois",
        "body": """
Les chiffres publiés lundi par la métropole de Lyon confirment une tendance observée depuis plusieurs années : entre 7 heures et 9 heures, les ponts qui franchissent le Rhône voient désormais passer davantage de vélos que de voitures.
Sur le pont Lafayette, les capteurs ont compté en moyenne 4 850 cyclistes par matinée en mai, contre 4 300 véhicules motorisés. Il y a cinq ans, le rapport était inverse, avec près de deux voitures pour un vélo.
« Les aménagements ont fait la différence », estime l'adjoint chargé des mobilités, qui cite les pistes séparées créées depuis 2021 et les nouveaux stationnements sécurisés près des gares.
## Les commerçants partagés
Tous ne se réjouissent pas. Plusieurs associations de commerçants du centre dénoncent une baisse de fréquentation qu'elles attribuent à la suppression de places de stationnement. La chambre de commerce réclame une étude indépendante.
Les usagers, eux, réclament surtout plus de places pour garer leur vélo. Aux abords de la gare Part-Dieu, les arceaux sont saturés dès 8 heures, et les vols restent fréquents malgré la vidéosurveillance.
""",
        "present": [
            "# À Lyon, le vélo dépasse la voiture aux heures de pointe",
            "Pour la première fois, les compteurs de la métropole enregistrent",
            "« Les aménagements ont fait la différence »",
            "## Les commerçants partagés",
        ],
        "absent": ["Accepter et fermer", "Réagir à cet article", "Partager sur Facebook"],
    },
    {
        "name": "news_es_html5",
        "kind": "news",
        "lang": "es",
        "skeleton": "html5",
        "url": "https://www.ejemplo.es/sociedad/2025-06-04/sequia-embalses.html",
        "title": "Los embalses recuperan el 60% tras las lluvias de primavera | Ejemplo",
        "headline": "Los embalses recuperan el 60% de su capacidad tras las lluvias de primavera",
        "standfirst": "La reserva hídrica mejora en todas las cuencas salvo en el Segura, donde"
        " siguen vigentes las restricciones de riego.",
        "byline": "Lucía Fernández",
        "body": """
Las lluvias de marzo y abril han permitido que la reserva hídrica española alcance el 60,3% de su capacidad total, según los datos publicados este martes por el Ministerio para la Transición Ecológica. Hace un año, los embalses se encontraban al 44%.
La mejora es especialmente notable en las cuencas del Guadalquivir y del Guadiana, que en 2024 habían registrado mínimos históricos. En Andalucía, la Junta ha levantado las restricciones al consumo doméstico en más de 200 municipios.
Sin embargo, los expertos advierten de que la situación sigue siendo frágil. «Un año húmedo no compensa una década de sequía», explica Javier Ortega, hidrólogo de la Universidad de Murcia.
## El Segura, la excepción
La cuenca del Segura apenas supera el 20% de su capacidad. Los regantes del Campo de Cartagena mantienen recortes del 30% en las dotaciones y piden que se acelere la construcción de nuevas desaladoras.
| Cuenca | Reserva | Hace un año
| Guadalquivir | 58% | 26%
| Guadiana | 71% | 39%
| Segura | 21% | 17%
""",
        "present": [
            "# Los embalses recuperan el 60% de su capacidad tras las lluvias de primavera",
            "«Un año húmedo no compensa una década de sequía»",
            "Cuenca | Reserva | Hace un año",
            "Guadiana | 71% | 39%",
        ],
        "absent": ["Política de privacidad", "Te puede interesar"],
    },
    {
        "name": "news_ru_divs",
        "kind": "news",
        "lang": "ru",
        "skeleton": "news_divs",
        "url": "https://www.primer-media.ru/society/2025/06/05/biblioteka",
        "title": "В Казани открылась новая центральная библиотека — Пример Медиа",
        "headline": "В Казани открылась новая центральная библиотека",
        "standfirst": "Здание на берегу Казанки вмещает полмиллиона книг и открыто круглосуточно.",
        "byline": "Анна Соколова",
        "body": """
В Казани в четверг открылась новая центральная городская библиотека. Пятиэтажное здание на берегу Казанки строили четыре года, а его фонд насчитывает около 500 тысяч книг, в том числе редкие издания на татарском языке.
Читальные залы будут работать круглосуточно, а для школьников предусмотрены отдельные комнаты для занятий и мастерских. На последнем этаже разместилась смотровая площадка с видом на кремль.
«Мы хотели, чтобы библиотека стала местом, куда приходят не только за книгами, но и за общением», — рассказала директор учреждения Гульнара Хасанова.
## Электронный каталог
Все книги доступны для поиска в электронном каталоге, а редкие издания постепенно оцифровываются. К концу года в открытом доступе должно появиться более 20 тысяч отсканированных книг и газет XIX века.
""",
        "present": [
            "# В Казани открылась новая центральная библиотека",
            "Читальные залы будут работать круглосуточно",
            "## Электронный каталог",
        ],
        "absent": ["Поделиться ВКонтакте", "Обсуждение"],
    },
    {
        "name": "news_zh_divs",
        "kind": "news",
        "lang": "zh",
        "skeleton": "news_divs",
        "url": "https://news.example.cn/2025/06/06/gaotie.html",
        "title": "沪渝高铁重庆段开通运营_示例新闻网",
        "headline": "沪渝高铁重庆段开通运营",
        "standfirst": "新线路将重庆至武汉的最短旅行时间缩短至三小时以内。",
        "byline": "记者 王磊",
        "body": """
6月6日上午，沪渝蓉高速铁路重庆至万州段正式开通运营。首趟列车从重庆北站驶出，经长寿、垫江、梁平，最终抵达万州北站，全程用时约一小时。
该段线路全长约二百五十公里，设计时速三百五十公里，共设车站八座。开通后，重庆主城至万州的旅行时间由原来的两个多小时缩短至一小时左右，重庆至武汉的最短旅行时间缩短至三小时以内。
铁路部门介绍，建设过程中，施工单位克服了山区地质复杂、隧道众多等困难，全线桥隧比超过百分之八十。
## 带动沿线经济发展
专家认为，新线路的开通将进一步加强成渝地区与长江中游城市群的联系，促进沿线旅游和农产品流通。梁平区相关负责人表示，当地已规划建设高铁新城，预计将吸引更多企业落户。
""",
        "present": [
            "# 沪渝高铁重庆段开通运营",
            "首趟列车从重庆北站驶出",
            "## 带动沿线经济发展",
        ],
        "absent": ["分享到微博", "网友评论", "相关阅读"],
    },
    {
        "name": "news_ja_html5",
        "kind": "news",
        "lang": "ja",
        "skeleton": "html5",
        "url": "https://www.sample-shimbun.example.jp/articles/20250607/k001.html",
        "title": "北陸新幹線、敦賀―新大阪の着工時期を再検討 - サンプル新聞",
        "headline": "北陸新幹線の延伸、着工時期を再検討へ",
        "standfirst": "建設費の高騰を受け、国土交通省は工程の見直しを始めた。",
        "byline": "経済部 山本健",
        "body": """
国土交通省は７日、北陸新幹線の敦賀から新大阪までの延伸区間について、着工時期を再検討すると発表した。資材価格や人件費の高騰で、建設費が当初の見込みを大きく上回る可能性が出てきたためだ。
当初の計画では２０２５年度中の着工を目指していたが、京都府内のルートをめぐる地元との調整も続いており、開業時期は２０４０年代半ば以降にずれ込む見通しとなった。
沿線の自治体からは「一日も早い全線開業を」との声が相次いでいる。福井県の知事は記者会見で、「工程の遅れは地域経済にとって大きな損失だ」と述べた。
## 地下水への影響も課題
京都市内では地下トンネルの建設による地下水への影響を懸念する声が根強い。酒造業者などは、仕込み水の水質が変わるおそれがあるとして、詳しい調査を求めている。
""",
        "present": [
            "# 北陸新幹線の延伸、着工時期を再検討へ",
            "国土交通省は７日、北陸新幹線の敦賀から新大阪までの延伸区間について",
            "## 地下水への影響も課題",
        ],
        "absent": ["同意する", "メールマガジンに登録する"],
    },
    {
        "name": "blog_ko_wordpress",
        "kind": "blog",
        "lang": "ko",
        "skeleton": "wordpress",
        "url": "https://blog.example.kr/2025/06/jeju-trail/",
        "title": "제주 올레길 7코스 걷기 후기 – 작은 블로그",
        "headline": "제주 올레길 7코스 걷기 후기",
        "standfirst": "서귀포 외돌개에서 월평까지, 바다를 따라 걷는 17킬로미터의 기록.",
        "byline": "민지",
        "body": """
지난 주말, 드디어 제주 올레길 7코스를 걸었다. 서귀포 시내에서 버스를 타고 외돌개 입구에 내려 아침 여덟 시쯤 출발했는데, 이른 시간이라 그런지 길이 한산해서 좋았다.
7코스는 올레길 중에서도 경치가 가장 아름다운 코스로 꼽힌다. 해안 절벽을 따라 이어지는 길에서 보이는 바다 색깔이 정말 말로 표현하기 어려울 정도였다.
## 준비물
- 편한 운동화와 모자
- 물 두 병 이상
- 간단한 간식과 자외선 차단제
중간에 법환포구에서 점심으로 고기국수를 먹었다. 국물이 진하고 고기가 두툼해서 다시 걸을 힘이 났다. 전체 코스는 쉬는 시간을 포함해 여섯 시간 정도 걸렸다.
## 마치며
다음에는 가을에 8코스를 걸어볼 생각이다. 처음 올레길을 걷는 분들에게 7코스를 꼭 추천하고 싶다.
""",
        "present": [
            "# 제주 올레길 7코스 걷기 후기",
            "지난 주말, 드디어 제주 올레길 7코스를 걸었다.",
            "- 물 두 병 이상",
            "## 마치며",
        ],
        "absent": ["Lovely post!", "Previous post", "Recent Posts", "Tagged"],
    },
    {
        "name": "news_ar_rtl",
        "kind": "news",
        "lang": "ar",
        "skeleton": "news_divs",
        "url": "https://www.almithal.example/news/2025/06/08/solar",
        "title": "افتتاح أكبر محطة للطاقة الشمسية في المنطقة | شبكة المثال",
        "headline": "افتتاح أكبر محطة للطاقة الشمسية في المنطقة",
        "standfirst": "المحطة الجديدة تكفي لتزويد مئتي ألف منزل بالكهرباء وتخفض الانبعاثات بشكل كبير.",
        "byline": "بقلم أحمد الخطيب",
        "body": """
افتتحت الحكومة يوم الأحد أكبر محطة للطاقة الشمسية في المنطقة، بقدرة إنتاجية تبلغ ألف ميغاواط، وذلك بعد ثلاث سنوات من أعمال البناء في الصحراء جنوب العاصمة.
وقال وزير الطاقة في كلمة خلال حفل الافتتاح إن المحطة ستوفر الكهرباء لنحو مئتي ألف منزل، وستسهم في خفض انبعاثات ثاني أكسيد الكربون بأكثر من مليون طن سنويا.
وتضم المحطة أكثر من مليوني لوح شمسي، إضافة إلى نظام لتخزين الطاقة بالبطاريات يسمح بتزويد الشبكة بالكهرباء بعد غروب الشمس.
## خطط للتوسع
وأكد الوزير أن الحكومة تسعى إلى رفع حصة الطاقة المتجددة إلى ثلاثين في المئة من إجمالي الإنتاج بحلول عام ألفين وثلاثين، مشيرا إلى أن مشروعات جديدة لطاقة الرياح ستطرح قريبا.
""",
        "present": [
            "# افتتاح أكبر محطة للطاقة الشمسية في المنطقة",
            "بقدرة إنتاجية تبلغ ألف ميغاواط",
            "## خطط للتوسع",
        ],
        "absent": ["شارك على فيسبوك", "التعليقات", "Most read"],
    },
    {
        "name": "blog_he_rtl",
        "kind": "blog",
        "lang": "he",
        "skeleton": "wordpress",
        "url": "https://blog.example.co.il/2025/06/sourdough/",
        "title": "איך אופים לחם מחמצת בבית – בלוג קטן",
        "headline": "איך אופים לחם מחמצת בבית",
        "standfirst": "מדריך פשוט למתחילים, מהכנת המחמצת ועד הכיכר הראשונה.",
        "byline": "נועה",
        "body": """
כבר שנתיים שאני אופה לחם מחמצת כמעט בכל שבוע, והרבה חברים שאלו אותי איך מתחילים. אז החלטתי לכתוב מדריך קצר וברור.
השלב הראשון הוא הכנת המחמצת. מערבבים כמות שווה של קמח מלא ומים בצנצנת, מכסים ומשאירים בטמפרטורת החדר. בכל יום זורקים חצי ומאכילים בקמח ומים טריים.
## מה צריך
- קמח לחם לבן וקמח מלא
- מים פושרים
- מלח
- סבלנות
אחרי כשבוע המחמצת אמורה להכפיל את עצמה תוך כמה שעות מההאכלה. זה הסימן שהיא מוכנה לאפייה. את הבצק משאירים לתפיחה ארוכה במקרר, ואופים בסיר ברזל בחום גבוה.
""",
        "present": [
            "# איך אופים לחם מחמצת בבית",
            "השלב הראשון הוא הכנת המחמצת.",
            "- מים פושרים",
        ],
        "absent": ["Lovely post!", "Previous post", "Recent Posts"],
    },
    {
        "name": "gov_en",
        "kind": "government",
        "lang": "en",
        "skeleton": "government",
        "url": "https://www.example.gov/winter-fuel-payment/how-to-claim",
        "title": "Winter Fuel Payment: How to claim - EXAMPLE.GOV",
        "headline": "Winter Fuel Payment: how to claim",
        "standfirst": "You usually do not need to claim. You'll get it automatically if you're"
        " eligible and you get the State Pension or another social security benefit.",
        "body": """
If you're eligible but do not get paid automatically, you'll need to make a claim. You can claim by post or by phone.
## If you've not claimed before
You'll need a claim form if you've never had a Winter Fuel Payment. You'll need to know:
- your National Insurance number
- your bank or building society details
- your date of marriage or civil partnership (if appropriate)
Send the form to the Winter Fuel Payment Centre. The address is on the form. You must claim by 31 March 2026.
## If you live abroad
You can only claim if you live in one of the countries listed in the [eligibility rules](https://www.example.gov/winter-fuel-payment/eligibility) and you have a genuine and sufficient link with the UK.
| Winter | Born on or before | Claim by
| 2024 to 2025 | 22 September 1944 | 31 March 2025
| 2025 to 2026 | 22 September 1945 | 31 March 2026
""",
        "present": [
            "# Winter Fuel Payment: how to claim",
            "You usually do not need to claim.",
            "- your National Insurance number",
            "2025 to 2026 | 22 September 1945 | 31 March 2026",
        ],
        "absent": ["Is this page useful?", "Skip to main content", "BETA This is a new service"],
    },
    {
        "name": "gov_de_aspnet",
        "kind": "government",
        "lang": "de",
        "skeleton": "aspnet",
        "url": "https://www.beispielstadt.de/buergerservice/page.aspx?id=4711",
        "title": "Wohnsitz anmelden – Stadt Beispielstadt",
        "headline": "Wohnsitz anmelden",
        "standfirst": "Wer in Beispielstadt eine Wohnung bezieht, muss sich innerhalb von zwei"
        " Wochen beim Bürgerbüro anmelden.",
        "body": """
Die Anmeldung ist Pflicht für alle Personen, die eine Wohnung in Beispielstadt beziehen. Sie müssen sich innerhalb von zwei Wochen nach dem Einzug persönlich im Bürgerbüro anmelden. Eine Anmeldung per Post ist nicht möglich.
## Benötigte Unterlagen
- gültiger Personalausweis oder Reisepass
- Wohnungsgeberbestätigung des Vermieters
- bei Familien: Geburtsurkunden der Kinder
## Gebühren
Die Anmeldung ist gebührenfrei. Für eine Meldebescheinigung wird eine Gebühr von 5 Euro erhoben.
## Termin vereinbaren
Termine können online oder telefonisch unter 0123 456-0 vereinbart werden. Ohne Termin kann es zu längeren Wartezeiten kommen. Das Bürgerbüro ist montags bis freitags von 8 bis 16 Uhr geöffnet, donnerstags bis 18 Uhr.
""",
        "present": [
            "# Wohnsitz anmelden",
            "Wer in Beispielstadt eine Wohnung bezieht",
            "- Wohnungsgeberbestätigung des Vermieters",
            "Die Anmeldung ist gebührenfrei.",
        ],
        "absent": ["Opening hours", "Alle akzeptieren"],
    },
    {
        "name": "gov_fr_aspnet",
        "kind": "government",
        "lang": "fr",
        "skeleton": "aspnet",
        "url": "https://www.mairie-exemple.fr/demarches/Default.aspx?page=carte-identite",
        "title": "Carte nationale d'identité – Mairie d'Exemple",
        "headline": "Demander une carte nationale d'identité",
        "body": """
La demande de carte d'identité se fait en mairie, sur rendez-vous. Vous pouvez remplir une pré-demande en ligne afin de gagner du temps lors de votre passage au guichet.
## Pièces à fournir
- une photo d'identité de moins de six mois
- un justificatif de domicile récent
- l'ancienne carte en cas de renouvellement
La carte est gratuite, sauf en cas de perte ou de vol : un timbre fiscal de 25 euros est alors demandé. Le délai de fabrication est d'environ trois semaines, et vous serez prévenu par SMS lorsque votre titre sera disponible.
""",
        "present": [
            "# Demander une carte nationale d'identité",
            "La demande de carte d'identité se fait en mairie, sur rendez-vous.",
            "- un justificatif de domicile récent",
        ],
        "absent": ["Contact us", "Accepter et fermer"],
    },
    {
        "name": "wiki_en",
        "kind": "wiki",
        "lang": "en",
        "skeleton": "mediawiki",
        "url": "https://en.examplepedia.org/wiki/Lighthouse_of_Alexandria",
        "title": "Lighthouse of Alexandria - Examplepedia",
        "headline": "Lighthouse of Alexandria",
        "standfirst": "The Lighthouse of Alexandria, sometimes called the Pharos of Alexandria, was"
        " a lighthouse built by the Ptolemaic Kingdom of Ancient Egypt during the reign of"
        " Ptolemy II Philadelphus (280–247 BC).",
        "body": """
It has been estimated to have been at least 100 metres in overall height. One of the Seven Wonders of the Ancient World, for many centuries it was one of the tallest man-made structures in the world.
## History
The lighthouse was badly damaged by three earthquakes between 956 and 1323 AD and became an abandoned ruin. It was the third-longest surviving ancient wonder, after the Mausoleum at Halicarnassus and the extant Great Pyramid of Giza, surviving in part until 1480, when the last of its remnant stones were used to build the Citadel of Qaitbay on the site.
In 1994, a team of French archaeologists dove into the water of Alexandria's Eastern Harbour and discovered some remains of the lighthouse on the sea floor.
## Construction
The lighthouse was built on the island of Pharos. Its construction took twelve years and it was completed around 280 BC. The structure was built of large blocks of light-coloured stone, and was made up of three tapering tiers: a lower square section with a central core, a middle octagonal section, and, at the top, a circular section.
## See also
- Colossus of Rhodes
- List of tallest buildings and structures
""",
        "present": [
            "# Lighthouse of Alexandria",
            "sometimes called the Pharos of Alexandria",
            "## Construction",
            "- Colossus of Rhodes",
        ],
        "absent": ["Topic 17", "This page was last edited", "Navigation"],
    },
    {
        "name": "wiki_pt",
        "kind": "wiki",
        "lang": "pt",
        "skeleton": "mediawiki",
        "url": "https://pt.examplepedia.org/wiki/Ipê-amarelo",
        "title": "Ipê-amarelo – Examplepédia, a enciclopédia livre",
        "headline": "Ipê-amarelo",
        "standfirst": "Ipê-amarelo é o nome popular de diversas espécies de árvores do gênero"
        " Handroanthus, nativas das florestas tropicais da América do Sul.",
        "body": """
A árvore é conhecida pela floração intensa e amarela, que ocorre no fim do inverno, quando a planta perde todas as folhas. Em muitas cidades brasileiras, a floração dos ipês é considerada um sinal de que a estação seca está chegando ao fim.
## Usos
A madeira do ipê é muito densa e resistente, sendo usada na construção civil, em decks e em pisos. Por causa da exploração intensa, algumas espécies estão ameaçadas de extinção em certas regiões.
## Simbolismo
O ipê-amarelo foi declarado árvore-símbolo do Brasil em 1961. A espécie aparece em poemas, canções e pinturas, e é frequentemente plantada em praças e avenidas.
""",
        "present": [
            "# Ipê-amarelo",
            "A árvore é conhecida pela floração intensa e amarela",
            "## Simbolismo",
        ],
        "absent": ["Topic 3", "This page was last edited"],
    },
    {
        "name": "docs_en",
        "kind": "docs",
        "lang": "en",
        "skeleton": "docs",
        "url": "https://docs.projectdocs.example/guide/configuration/",
        "title": "Configuration - ProjectDocs",
        "headline": "Configuration",
        "standfirst": "ProjectDocs reads its settings from a projectdocs.yml file at the root of"
        " your repository.",
        "body": """
Every setting has a default, so the smallest valid configuration file only names the site. Settings given on the command line win over the file.
```
site_name: My Project
theme:
  name: material
```
## Options
| Option | Default | Meaning
| site_name | (required) | The title shown in the header
| docs_dir | docs | Where the Markdown sources are
| strict | false | Turn warnings into errors
## Environment variables
Any value can be read from the environment with the !ENV tag. This keeps secrets such as API tokens out of the repository.
> Changing docs_dir also changes the paths of the pages in the navigation.
""",
        "present": [
            "# Configuration",
            "site_name: My Project\ntheme:\n  name: material",
            "docs_dir | docs | Where the Markdown sources are",
            "Any value can be read from the environment with the !ENV tag.",
        ],
        "absent": ["Page 12 of the guide", "Previous: Installation"],
    },
    {
        "name": "docs_ja",
        "kind": "docs",
        "lang": "ja",
        "skeleton": "docs",
        "url": "https://docs.example.jp/ja/latest/tutorial/install.html",
        "title": "インストール - サンプルライブラリ ドキュメント",
        "headline": "インストール",
        "standfirst": "サンプルライブラリは Python 3.10 以降で動作します。",
        "body": """
最も簡単な方法は pip を使ってインストールすることです。仮想環境を作成してから、次のコマンドを実行してください。
```
python -m venv .venv
.venv/bin/pip install samplelib
```
## 動作確認
インストールが終わったら、バージョンを表示して正しく導入されたことを確認します。エラーが出る場合は、Python のバージョンを確認してください。
## アンインストール
不要になった場合は pip uninstall samplelib で削除できます。設定ファイルは削除されないため、必要に応じて手動で削除してください。
""",
        "present": [
            "# インストール",
            "最も簡単な方法は pip を使ってインストールすることです。",
            "python -m venv .venv",
        ],
        "absent": ["Page 3 of the guide", "Next: Reference"],
    },
    {
        "name": "shop_en",
        "kind": "shop",
        "lang": "en",
        "skeleton": "shop",
        "url": "https://shop.example.com/products/enamel-teapot",
        "title": "Enamel Teapot 1.2 l – Sage | Example Home",
        "headline": "Enamel Teapot 1.2 l – Sage",
        "body": """
A classic enamel teapot with a removable stainless-steel infuser, large enough for four cups. Suitable for all hob types, including induction.
## Details
- Capacity: 1.2 litres
- Material: enamelled steel, beech wood handle
- Dishwasher safe (infuser only)
## Care
Let the teapot cool down before cleaning. Do not heat it empty, and avoid abrasive sponges, which can scratch the enamel.
""",
        "present": [
            "# Enamel Teapot 1.2 l – Sage",
            "A classic enamel teapot with a removable stainless-steel infuser",
            "- Capacity: 1.2 litres",
        ],
        "absent": ["Similar item 3", "You may also like", "Free shipping over", "Add to cart"],
    },
    {
        "name": "shop_it",
        "kind": "shop",
        "lang": "it",
        "skeleton": "shop",
        "url": "https://negozio.example.it/prodotti/moka-6-tazze",
        "title": "Moka Express 6 tazze – Negozio Esempio",
        "headline": "Moka Express 6 tazze",
        "body": """
La caffettiera moka in alluminio per preparare a casa un caffè dal gusto autentico. Il modello da sei tazze è perfetto per la colazione in famiglia.
## Caratteristiche
- Alluminio di alta qualità
- Valvola di sicurezza brevettata
- Manico ergonomico resistente al calore
## Come si usa
Riempire la caldaia d'acqua fino alla valvola, inserire il filtro con il caffè macinato senza pressarlo e avvitare bene. Mettere sul fuoco basso e togliere appena il caffè inizia a gorgogliare.
""",
        "present": [
            "# Moka Express 6 tazze",
            "La caffettiera moka in alluminio",
            "- Valvola di sicurezza brevettata",
        ],
        "absent": ["Similar item 5", "Accetta tutti", "Iscriviti alla newsletter"],
    },
    {
        "name": "forum_en",
        "kind": "forum",
        "lang": "en",
        "skeleton": "forum",
        "url": "https://forum.example.org/viewtopic.php?t=48213",
        "title": "Raspberry Pi keeps rebooting under load - Example Forum",
        "headline": "Raspberry Pi keeps rebooting under load",
        "body": """
My Pi 4 reboots whenever I start a compile job or copy large files to the USB disk. The red LED blinks just before it happens. I am using the phone charger that came with my old tablet. Any ideas?
---
That sounds like an under-voltage problem. The Pi 4 needs a stable 5.1 V at 3 A, and most phone chargers cannot deliver that under load. Run vcgencmd get_throttled: if it returns anything other than 0x0, the supply is the culprit.
---
Thanks, it returned 0x50005. I swapped in the official power supply and the reboots stopped. I also moved the disk to a powered USB hub to be safe.
""",
        "present": [
            "My Pi 4 reboots whenever I start a compile job",
            "Run vcgencmd get_throttled",
            "I swapped in the official power supply and the reboots stopped.",
        ],
        "absent": ["Who is online", "sent from my phone", "Post Reply", "Joined: 2019"],
    },
    {
        "name": "forum_pl",
        "kind": "forum",
        "lang": "pl",
        "skeleton": "forum",
        "url": "https://forum.przyklad.pl/watek/9921-piec-gazowy",
        "title": "Piec gazowy gaśnie przy mrozie - Forum Przykład",
        "headline": "Piec gazowy gaśnie przy mrozie",
        "body": """
Od kilku dni mój piec kondensacyjny gaśnie w nocy, gdy temperatura spada poniżej minus dziesięciu stopni. Na wyświetlaczu pojawia się błąd E28. Czy ktoś miał podobny problem?
---
Błąd E28 zwykle oznacza zamarznięty odpływ kondensatu. Sprawdź, czy rurka wychodząca na zewnątrz nie jest zatkana lodem. Warto ją zaizolować albo poprowadzić do kanalizacji wewnątrz budynku.
---
Dzięki, to było to. Polałem rurkę ciepłą wodą, piec ruszył, a na weekend kupię otulinę.
""",
        "present": [
            "Na wyświetlaczu pojawia się błąd E28.",
            "Błąd E28 zwykle oznacza zamarznięty odpływ kondensatu.",
        ],
        "absent": ["Who is online", "sent from my phone", "Akceptuję"],
    },
    {
        "name": "recipe_en",
        "kind": "recipe",
        "lang": "en",
        "skeleton": "recipe",
        "url": "https://www.homecook.example/banana-bread/",
        "title": "Easy One-Bowl Banana Bread - Home Cook Example",
        "headline": "Easy One-Bowl Banana Bread",
        "standfirst": "Moist, sweet and ready for the oven in ten minutes.",
        "body": """
This is the banana bread I have been baking for my family for over ten years. It only needs one bowl and uses the overripe bananas everyone has at the back of the fruit bowl.
The secret is to use really ripe bananas with plenty of brown spots. They are sweeter and make the bread moist, so you can use less sugar.
If your bananas are not ripe yet, bake them in their skins at 150 °C for fifteen minutes until they turn black.
## Ingredients
- 3 ripe bananas
- 75 g melted butter
- 150 g sugar
- 1 egg, beaten
- 1 teaspoon baking soda
- 190 g plain flour
## Instructions
1. Preheat the oven to 175 °C and butter a loaf tin.
1. Mash the bananas in a bowl, then stir in the melted butter.
1. Mix in the baking soda, sugar, egg and flour.
1. Pour into the tin and bake for 55 to 60 minutes.
""",
        "present": [
            "# Easy One-Bowl Banana Bread",
            "The secret is to use really ripe bananas",
            "- 75 g melted butter",
            "1. Preheat the oven to 175 °C and butter a loaf tin.",
        ],
        "absent": ["Advertisement", "Jump to Recipe", "About me", "made it twice already"],
    },
    {
        "name": "recipe_nl",
        "kind": "recipe",
        "lang": "nl",
        "skeleton": "recipe",
        "url": "https://www.kookvoorbeeld.nl/recepten/erwtensoep/",
        "title": "Echte Hollandse erwtensoep - Kookvoorbeeld",
        "headline": "Echte Hollandse erwtensoep",
        "standfirst": "Dikke snert zoals oma hem maakte, met rookworst en knolselderij.",
        "body": """
Erwtensoep hoort bij de winter. Deze soep trekt het beste een paar uur en smaakt de volgende dag nog lekkerder, dus maak gerust een grote pan.
Laat de spliterwten niet weken: ze koken vanzelf kapot. Roer wel regelmatig, zodat de soep niet aanbrandt.
Een goede snert is zo dik dat er een lepel rechtop in blijft staan.
## Ingrediënten
- 500 g spliterwten
- 1 knolselderij
- 2 winterpenen
- 1 rookworst
## Bereiding
1. Kook de spliterwten met twee liter water en de speklap in een uur gaar.
1. Voeg de groenten toe en laat nog een half uur zachtjes koken.
1. Warm de rookworst in de soep en breng op smaak met peper en zout.
""",
        "present": [
            "# Echte Hollandse erwtensoep",
            "Laat de spliterwten niet weken",
            "- 500 g spliterwten",
        ],
        "absent": ["Advertisement", "Jump to Recipe", "Akkoord"],
    },
    {
        "name": "megamenu_en",
        "kind": "shop",
        "lang": "en",
        "skeleton": "megamenu",
        "url": "https://www.bigstore.example/blog/how-to-choose-a-mattress",
        "title": "How to choose a mattress | Big Store Blog",
        "headline": "How to choose a mattress",
        "standfirst": "Firmness, materials and trial periods: what matters, and what is marketing.",
        "body": """
Most people keep a mattress for eight to ten years, so it is worth taking the time to choose well. The right mattress depends mainly on how you sleep and how much you weigh.
Side sleepers usually need a softer mattress that lets the shoulder and hip sink in. Back and stomach sleepers are generally better supported by a medium-firm one.
## Foam or springs?
Memory foam moulds to the body and absorbs movement, which helps if you share the bed. Pocket springs sleep cooler and feel more responsive. Hybrid mattresses combine a spring core with foam layers on top.
## Use the trial period
Many shops offer a trial of 100 nights or more. It takes a few weeks for your body to get used to a new mattress, so do not decide after the first night.
""",
        "present": [
            "# How to choose a mattress",
            "Most people keep a mattress for eight to ten years",
            "## Use the trial period",
            "so do not decide after the first night.",
        ],
        "absent": ["Category 3.4", "Department 7"],
    },
    {
        "name": "blog_en_wordpress",
        "kind": "blog",
        "lang": "en",
        "skeleton": "wordpress",
        "url": "https://smallblog.example/2025/05/why-i-switched-to-a-paper-planner/",
        "title": "Why I switched back to a paper planner – A Small Blog",
        "headline": "Why I switched back to a paper planner",
        "byline": "Tom",
        "body": """
For about six years I ran my life out of a to-do app. It synced everywhere, reminded me of everything, and somehow I still felt like I was always behind.
In January I bought a plain dot-grid notebook and decided to try a paper planner for one month. Five months later, I have not gone back.
## What changed
Writing things down by hand forces me to choose. When moving an unfinished task to tomorrow means writing it out again, I quickly notice the tasks I keep postponing, and I either do them or cross them out.
I also stopped checking my list twenty times a day. The notebook stays open on my desk, and that is enough.
## What I miss
Recurring reminders. Paying the rent or renewing a passport is still in my calendar app, because a notebook cannot wake me up at the right moment. Read more about my setup in [this post about the hybrid system](https://notes.elsewhere.example/hybrid-planning).
""",
        "present": [
            "# Why I switched back to a paper planner",
            "For about six years I ran my life out of a to-do app.",
            "## What I miss",
            "this post about the hybrid system (https://notes.elsewhere.example/hybrid-planning)",
        ],
        "absent": ["Lovely post!", "Skip to content", "Leave a Reply", "Next post"],
    },
    {
        "name": "news_it_html5",
        "kind": "news",
        "lang": "it",
        "skeleton": "html5",
        "url": "https://www.esempio.it/cronaca/2025/06/09/venezia-ticket.html",
        "title": "Venezia, il ticket d'accesso torna a luglio - Esempio",
        "headline": "Venezia, il contributo d'accesso torna nei fine settimana di luglio",
        "standfirst": "Il Comune conferma la tariffa di cinque euro per i turisti giornalieri; dieci"
        " euro per chi prenota all'ultimo momento.",
        "byline": "di Marco Rossi",
        "body": """
Il Comune di Venezia ha confermato che il contributo d'accesso per i visitatori giornalieri sarà applicato anche nei fine settimana di luglio. La tariffa resta di cinque euro, ma sale a dieci euro per chi si registra meno di quattro giorni prima della visita.
Secondo l'amministrazione, nei primi mesi di sperimentazione il sistema ha permesso di ridurre i picchi di presenze nelle giornate più affollate. Le associazioni dei residenti sono però scettiche e chiedono un numero chiuso.
Sono esentati i residenti del Veneto, gli studenti e i lavoratori pendolari, oltre ai turisti che pernottano in una struttura del centro storico.
""",
        "present": [
            "# Venezia, il contributo d'accesso torna nei fine settimana di luglio",
            "La tariffa resta di cinque euro",
            "Sono esentati i residenti del Veneto",
        ],
        "absent": ["Accetta tutti", "Potrebbe interessarti"],
    },
    {
        "name": "news_pl_plaincookie",
        "kind": "news",
        "lang": "pl",
        "skeleton": "news_divs",
        "cookie": "plain",
        "url": "https://www.przyklad.pl/kraj/2025/06/10/pociagi-nocne",
        "title": "Wracają pociągi nocne nad morze - Przykład",
        "headline": "Wracają pociągi nocne nad morze",
        "standfirst": "Od lipca z Krakowa i Katowic do Gdyni pojedzie nocny pociąg z wagonami"
        " sypialnymi.",
        "byline": "Piotr Nowak",
        "body": """
Przewoźnik zapowiedział, że w wakacje uruchomi nocne połączenia z południa Polski nad Bałtyk. Pociągi będą kursować codziennie od końca czerwca do początku września.
W składzie znajdą się wagony sypialne i kuszetki, a bilety można już kupować w kasach i przez internet. Ceny miejsc w kuszetce zaczynają się od 89 złotych.
To odpowiedź na rosnące zainteresowanie podróżami koleją. W ubiegłym roku pociągi nad morze były wyprzedane na kilka tygodni przed wyjazdem.
""",
        "present": [
            "# Wracają pociągi nocne nad morze",
            "W składzie znajdą się wagony sypialne i kuszetki",
        ],
        "absent": ["Akceptuję", "Używamy plików cookie"],
    },
    {
        "name": "qa_en",
        "kind": "forum",
        "lang": "en",
        "skeleton": "qa",
        "url": "https://stack.example/questions/4711/read-a-file-line-by-line",
        "title": "python - How do I read a large file line by line? - Stack Example",
        "headline": "How do I read a large file line by line?",
        "body": """
My log file is about 12 GB, and reading it with read() runs out of memory. How can I process it one line at a time?
---
Iterate over the file object itself. A file object is an iterator over its lines, and it only keeps one buffer in memory at a time:
```
with open("big.log") as f:
    for line in f:
        handle(line)
```
---
If the lines are very long or there are no newlines at all, read fixed-size chunks with f.read(65536) in a loop instead, and split the chunks yourself.
""",
        "present": [
            "# How do I read a large file line by line?",
            "My log file is about 12 GB",
            "Iterate over the file object itself.",
            'with open("big.log") as f:',
            "read fixed-size chunks with f.read(65536)",
        ],
        "absent": ["Hot Network Questions", "Thanks, that helped", "author1", "Up vote"],
    },
    {
        "name": "news_de_cssinjs",
        "kind": "news",
        "lang": "de",
        "skeleton": "cssinjs",
        "url": "https://www.beispiel-news.de/panorama/hitze-schulen-id1234.html",
        "title": "Hitze: Schulen dürfen früher schließen | Beispiel News",
        "headline": "Hitze: Schulen dürfen früher schließen",
        "standfirst": "Ab 30 Grad im Klassenzimmer können Schulleitungen den Unterricht verkürzen.",
        "body": """
Wegen der anhaltenden Hitze dürfen Schulen in Niedersachsen den Unterricht ab sofort früher beenden. Das Kultusministerium hat eine entsprechende Regelung am Montag veröffentlicht, nachdem sich Eltern und Lehrkräfte über unerträgliche Temperaturen in den Klassenzimmern beschwert hatten.
Maßgeblich ist die Temperatur im Raum, nicht die Außentemperatur. Liegt sie um 11 Uhr über 27 Grad, kann die Schulleitung hitzefrei geben. Für Grundschulkinder muss allerdings eine Betreuung bis zum regulären Schulschluss angeboten werden.
Der Landeselternrat begrüßte die Entscheidung, forderte aber langfristige Lösungen wie Sonnenschutz, Ventilatoren und begrünte Schulhöfe. Viele Schulgebäude stammen aus den Siebzigerjahren und heizen sich im Sommer stark auf.
""",
        "present": [
            "# Hitze: Schulen dürfen früher schließen",
            "Ab 30 Grad im Klassenzimmer können Schulleitungen",
            "Maßgeblich ist die Temperatur im Raum, nicht die Außentemperatur.",
        ],
        "absent": [
            "leser1",
            "ich sehe das anders",
            "Das könnte Sie auch interessieren",
            "Startseite",
        ],
    },
]
