package portal

import (
	"net/http"
	"slices"
	"strings"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// The portal's languages (R-U6): every string a page shows is a message
// of this catalogue, by id, in each of them; templates hold no text of
// their own. A page's language is ?lang= (remembered in a cookie), else
// the cookie, else the best match of Accept-Language, else English.

// langs are the languages, English first (the fallback).
var langs = []language.Tag{language.English, language.German, language.Portuguese, language.Arabic}

// langCodes are langs' codes, as ?lang= and the cookie name them; a
// language's own name for itself is the switch's label.
var (
	langCodes = []string{"en", "de", "pt", "ar"}
	langNames = []string{"English", "Deutsch", "Português", "العربية"}
)

// rtl are the languages written right to left.
var rtl = map[string]bool{"ar": true}

// langCookie remembers a choice of ?lang=.
const langCookie = "vdibroker_portal_lang"

var matcher = language.NewMatcher(langs)

// messages are the texts by id and language code. Arguments are fmt's
// verbs.
var messages = map[string]map[string]string{
	"app.title":                {"en": "Your desktops and apps", "de": "Ihre Desktops und Apps", "pt": "Os seus ambientes de trabalho e aplicações", "ar": "أسطح المكتب والتطبيقات الخاصة بك"},
	"language":                 {"en": "Language", "de": "Sprache", "pt": "Idioma", "ar": "اللغة"},
	"signin.title":             {"en": "Sign in", "de": "Anmelden", "pt": "Iniciar sessão", "ar": "تسجيل الدخول"},
	"signin.sso":               {"en": "Sign in with your organisation", "de": "Mit Ihrer Organisation anmelden", "pt": "Iniciar sessão com a sua organização", "ar": "سجّل الدخول عبر مؤسستك"},
	"signin.token":             {"en": "Or sign in with an access token", "de": "Oder mit einem Zugriffstoken anmelden", "pt": "Ou inicie sessão com um token de acesso", "ar": "أو سجّل الدخول باستخدام رمز وصول"},
	"signin.tokenOnly":         {"en": "Sign in with the access token your administrator gave you", "de": "Melden Sie sich mit dem Zugriffstoken an, das Sie von Ihrem Administrator erhalten haben", "pt": "Inicie sessão com o token de acesso que o seu administrador lhe deu", "ar": "سجّل الدخول باستخدام رمز الوصول الذي أعطاك إياه المسؤول"},
	"signin.tokenLabel":        {"en": "Access token", "de": "Zugriffstoken", "pt": "Token de acesso", "ar": "رمز الوصول"},
	"signin.submit":            {"en": "Sign in", "de": "Anmelden", "pt": "Entrar", "ar": "دخول"},
	"signedInAs":               {"en": "Signed in as %s", "de": "Angemeldet als %s", "pt": "Sessão iniciada como %s", "ar": "تم تسجيل الدخول باسم %s"},
	"signout":                  {"en": "Sign out", "de": "Abmelden", "pt": "Sair", "ar": "تسجيل الخروج"},
	"signout.provider":         {"en": "Signing you out of your organisation too…", "de": "Sie werden auch bei Ihrer Organisation abgemeldet…", "pt": "A terminar também a sessão na sua organização…", "ar": "جارٍ تسجيل خروجك من مؤسستك أيضًا…"},
	"continue":                 {"en": "Continue", "de": "Weiter", "pt": "Continuar", "ar": "متابعة"},
	"resources.heading":        {"en": "Desktops and apps", "de": "Desktops und Apps", "pt": "Ambientes de trabalho e aplicações", "ar": "أسطح المكتب والتطبيقات"},
	"resources.none":           {"en": "No desktop or app is assigned to you yet. Ask your helpdesk for the ones you need.", "de": "Ihnen ist noch kein Desktop und keine App zugewiesen. Fragen Sie Ihren Helpdesk nach denen, die Sie brauchen.", "pt": "Ainda não lhe foi atribuído nenhum ambiente de trabalho nem aplicação. Peça ao seu helpdesk os que precisa.", "ar": "لم يُخصَّص لك أي سطح مكتب أو تطبيق بعد. اطلب من مكتب الدعم ما تحتاج إليه."},
	"kind.Desktop":             {"en": "Desktop", "de": "Desktop", "pt": "Ambiente de trabalho", "ar": "سطح المكتب"},
	"kind.RemoteApp":           {"en": "App", "de": "App", "pt": "Aplicação", "ar": "تطبيق"},
	"resources.unavailable":    {"en": "Cannot be opened right now. Tell your helpdesk.", "de": "Kann gerade nicht geöffnet werden. Wenden Sie sich an Ihren Helpdesk.", "pt": "Não é possível abrir neste momento. Contacte o seu helpdesk.", "ar": "لا يمكن فتحه الآن. أبلغ مكتب الدعم."},
	"open":                     {"en": "Open", "de": "Öffnen", "pt": "Abrir", "ar": "فتح"},
	"sessions.heading":         {"en": "My sessions", "de": "Meine Sitzungen", "pt": "As minhas sessões", "ar": "جلساتي"},
	"sessions.unread":          {"en": "Sessions at other sites could not all be read: you may have more than these.", "de": "Sitzungen an anderen Standorten konnten nicht alle gelesen werden: Sie haben vielleicht mehr als diese.", "pt": "Não foi possível ler todas as sessões noutros locais: pode ter mais do que estas.", "ar": "تعذّرت قراءة كل الجلسات في المواقع الأخرى: قد تكون لديك جلسات أكثر من هذه."},
	"sessions.noReconnect":     {"en": "Cannot be reconnected from here: opening it here would start a new session.", "de": "Kann von hier aus nicht wieder verbunden werden: Beim Öffnen hier würde eine neue Sitzung gestartet.", "pt": "Não é possível voltar a ligar a partir daqui: abri-lo aqui iniciaria uma nova sessão.", "ar": "لا يمكن إعادة الاتصال بها من هنا: فتحه من هنا سيبدأ جلسة جديدة."},
	"sessions.elsewhere":       {"en": "At another site", "de": "An einem anderen Standort", "pt": "Noutro local", "ar": "في موقع آخر"},
	"sessions.none":            {"en": "You have no open sessions.", "de": "Sie haben keine offenen Sitzungen.", "pt": "Não tem sessões abertas.", "ar": "ليست لديك جلسات مفتوحة."},
	"sessions.what":            {"en": "Desktop or apps", "de": "Desktop oder Apps", "pt": "Ambiente de trabalho ou aplicações", "ar": "سطح المكتب أو التطبيقات"},
	"sessions.host":            {"en": "Host", "de": "Host", "pt": "Anfitrião", "ar": "المضيف"},
	"sessions.state":           {"en": "State", "de": "Status", "pt": "Estado", "ar": "الحالة"},
	"sessions.actions":         {"en": "Actions", "de": "Aktionen", "pt": "Ações", "ar": "الإجراءات"},
	"sessions.since":           {"en": "Since", "de": "Seit", "pt": "Desde", "ar": "منذ"},
	"state.Active":             {"en": "Active", "de": "Aktiv", "pt": "Ativa", "ar": "نشطة"},
	"state.Disconnected":       {"en": "Disconnected", "de": "Getrennt", "pt": "Desligada", "ar": "منفصلة"},
	"state.Pending":            {"en": "Starting", "de": "Wird gestartet", "pt": "A iniciar", "ar": "قيد البدء"},
	"state.LoggingOff":         {"en": "Logging off", "de": "Wird abgemeldet", "pt": "A terminar", "ar": "جارٍ تسجيل الخروج"},
	"sessions.loggedOff":       {"en": "The session has been logged off.", "de": "Die Sitzung wurde abgemeldet.", "pt": "A sessão foi terminada.", "ar": "تم تسجيل خروج الجلسة."},
	"sessions.slow":            {"en": "The session is taking longer than usual to log off. Reload this page later to see whether it has ended.", "de": "Das Abmelden der Sitzung dauert länger als üblich. Laden Sie diese Seite später neu, um zu sehen, ob sie beendet ist.", "pt": "A sessão está a demorar mais do que o habitual a terminar. Recarregue esta página mais tarde para ver se já terminou.", "ar": "يستغرق تسجيل خروج الجلسة وقتًا أطول من المعتاد. أعد تحميل هذه الصفحة لاحقًا لترى ما إذا كانت قد انتهت."},
	"logoff.confirm":           {"en": "Log off %s? Anything not saved in it will be lost.", "de": "%s abmelden? Alles, was darin nicht gespeichert ist, geht verloren.", "pt": "Terminar %s? Tudo o que não estiver guardado nela será perdido.", "ar": "هل تريد تسجيل الخروج من %s؟ سيُفقد كل ما لم يُحفظ فيها."},
	"logoff":                   {"en": "Log off", "de": "Sitzung abmelden", "pt": "Terminar", "ar": "تسجيل خروج الجلسة"},
	"cancel":                   {"en": "Cancel", "de": "Abbrechen", "pt": "Cancelar", "ar": "إلغاء"},
	"disconnect":               {"en": "Disconnect", "de": "Trennen", "pt": "Desligar", "ar": "قطع الاتصال"},
	"reconnect":                {"en": "Reconnect", "de": "Wieder verbinden", "pt": "Voltar a ligar", "ar": "إعادة الاتصال"},
	"flash.loggedOff":          {"en": "The session is being logged off. It leaves this list once its host has done so.", "de": "Die Sitzung wird abgemeldet. Sie verschwindet aus dieser Liste, sobald ihr Host das erledigt hat.", "pt": "A sessão está a ser terminada. Sai desta lista quando o anfitrião o tiver feito.", "ar": "جارٍ تسجيل خروج الجلسة. ستختفي من هذه القائمة عندما يُتمّ المضيف ذلك."},
	"flash.disconnected":       {"en": "The session is being disconnected. Its state here changes once its host has done so.", "de": "Die Sitzung wird getrennt. Ihr Status hier ändert sich, sobald ihr Host das erledigt hat.", "pt": "A sessão está a ser desligada. O estado aqui muda quando o anfitrião o tiver feito.", "ar": "جارٍ قطع اتصال الجلسة. ستتغير حالتها هنا عندما يُتمّ المضيف ذلك."},
	"error.podUnavailable":     {"en": "This session cannot be logged off or disconnected from here right now: the site that holds it did not take the request. You can still end it from within the session itself; if this keeps happening, tell your helpdesk.", "de": "Diese Sitzung kann von hier aus gerade nicht abgemeldet oder getrennt werden: Der Standort, an dem sie läuft, hat die Anfrage nicht angenommen. Sie können sie weiterhin in der Sitzung selbst beenden; passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "Neste momento não é possível terminar nem desligar esta sessão a partir daqui: o local onde ela está não aceitou o pedido. Pode continuar a terminá-la dentro da própria sessão; se continuar a acontecer, contacte o seu helpdesk.", "ar": "لا يمكن تسجيل خروج هذه الجلسة أو قطع اتصالها من هنا الآن: لم يقبل الموقع الذي توجد فيه الطلب. لا يزال بإمكانك إنهاؤها من داخل الجلسة نفسها؛ وإذا تكرر ذلك، فأبلغ مكتب الدعم."},
	"launch.preparing":         {"en": "Preparing %s…", "de": "%s wird vorbereitet…", "pt": "A preparar %s…", "ar": "جارٍ تجهيز %s…"},
	"launch.starting":          {"en": "Starting a computer for %s", "de": "Ein Computer für %s wird gestartet", "pt": "A iniciar um computador para %s", "ar": "جارٍ تشغيل جهاز كمبيوتر لـ %s"},
	"launch.startingOn":        {"en": "%s is starting. The connection file downloads by itself when it is ready.", "de": "%s wird gestartet. Die Verbindungsdatei wird automatisch heruntergeladen, sobald sie bereit ist.", "pt": "%s está a iniciar. O ficheiro de ligação é transferido automaticamente quando estiver pronto.", "ar": "%s قيد التشغيل. سيتم تنزيل ملف الاتصال تلقائيًا عندما يصبح جاهزًا."},
	"launch.ready":             {"en": "Your connection file for %s is ready.", "de": "Ihre Verbindungsdatei für %s ist bereit.", "pt": "O seu ficheiro de ligação para %s está pronto.", "ar": "ملف الاتصال الخاص بـ %s جاهز."},
	"launch.readyHint":         {"en": "The file downloads by itself. Open it with your Remote Desktop client to connect; if nothing downloaded, use the link below.", "de": "Die Datei wird automatisch heruntergeladen. Öffnen Sie sie mit Ihrem Remotedesktop-Client, um sich zu verbinden; wurde nichts heruntergeladen, nutzen Sie den Link unten.", "pt": "O ficheiro é transferido automaticamente. Abra-o com o seu cliente de Ambiente de Trabalho Remoto para se ligar; se nada foi transferido, use a ligação abaixo.", "ar": "يتم تنزيل الملف تلقائيًا. افتحه باستخدام عميل سطح المكتب البعيد للاتصال؛ إذا لم يتم تنزيل أي شيء، فاستخدم الرابط أدناه."},
	"launch.finding":           {"en": "Finding a session host for you. The connection file downloads by itself when it is ready.", "de": "Für Sie wird ein Sitzungshost gesucht. Die Verbindungsdatei wird automatisch heruntergeladen, sobald sie bereit ist.", "pt": "A procurar um anfitrião de sessão para si. O ficheiro de ligação é transferido automaticamente quando estiver pronto.", "ar": "جارٍ البحث عن مضيف جلسة لك. سيتم تنزيل ملف الاتصال تلقائيًا عندما يصبح جاهزًا."},
	"launch.lost":              {"en": "Lost contact with the service. Trying again…", "de": "Keine Verbindung zum Dienst. Neuer Versuch läuft…", "pt": "Sem ligação ao serviço. A tentar novamente…", "ar": "انقطع الاتصال بالخدمة. جارٍ إعادة المحاولة…"},
	"launch.download":          {"en": "Download the connection file", "de": "Verbindungsdatei herunterladen", "pt": "Transferir o ficheiro de ligação", "ar": "تنزيل ملف الاتصال"},
	"launch.failedNoCapacity":  {"en": "No session host can take %s right now. Try again in a few minutes; if it keeps happening, tell your helpdesk.", "de": "Zurzeit kann kein Sitzungshost %s aufnehmen. Versuchen Sie es in einigen Minuten erneut; passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "Neste momento nenhum anfitrião de sessão pode abrir %s. Tente novamente dentro de alguns minutos; se continuar a acontecer, contacte o seu helpdesk.", "ar": "لا يستطيع أي مضيف جلسات فتح %s الآن. حاول مرة أخرى بعد بضع دقائق؛ وإذا تكرر ذلك، فأبلغ مكتب الدعم."},
	"launch.noCapacityFor":     {"en": "No session host can take %s right now.", "de": "Zurzeit kann kein Sitzungshost %s aufnehmen.", "pt": "Neste momento nenhum anfitrião de sessão pode abrir %s.", "ar": "لا يستطيع أي مضيف جلسات فتح %s الآن."},
	"launch.keepsHappening":    {"en": "If it keeps happening, tell your helpdesk.", "de": "Passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "Se continuar a acontecer, contacte o seu helpdesk.", "ar": "إذا تكرر ذلك، فأبلغ مكتب الدعم."},
	"launch.failedStartingFor": {"en": "A session host for %s is still starting.", "de": "Ein Sitzungshost für %s wird noch gestartet.", "pt": "Um anfitrião de sessão para %s ainda está a iniciar.", "ar": "لا يزال مضيف جلسات لـ %s قيد التشغيل."},
	"launch.failedStarting":    {"en": "A session host for %s is still starting. Try again in a minute.", "de": "Ein Sitzungshost für %s wird noch gestartet. Versuchen Sie es in einer Minute erneut.", "pt": "Um anfitrião de sessão para %s ainda está a iniciar. Tente novamente dentro de um minuto.", "ar": "لا يزال مضيف جلسات لـ %s قيد التشغيل. حاول مرة أخرى بعد دقيقة."},
	"launch.failedHelpdesk":    {"en": "The computer of %s did not start or has shut down, and opening it again will not start it. Ask your helpdesk to start it for you.", "de": "Der Computer von %s ist nicht gestartet oder wurde heruntergefahren, und erneutes Öffnen startet ihn nicht. Bitten Sie Ihren Helpdesk, ihn für Sie zu starten.", "pt": "O computador de %s não chegou a iniciar ou foi encerrado, e abri-lo novamente não o inicia. Peça ao seu helpdesk que o inicie por si.", "ar": "جهاز الكمبيوتر الخاص بـ %s لم يبدأ أو تم إيقاف تشغيله، ولن يشغّله فتحه مرة أخرى. اطلب من مكتب الدعم تشغيله لك."},
	"launch.failedGoingDown":   {"en": "The computer of %s is restarting or shutting down. Try again in a minute; if it does not come back, tell your helpdesk.", "de": "Der Computer von %s wird neu gestartet oder heruntergefahren. Versuchen Sie es in einer Minute erneut; ist er nicht bald wieder verfügbar, wenden Sie sich an Ihren Helpdesk.", "pt": "O computador de %s está a reiniciar ou a encerrar. Tente novamente dentro de um minuto; se não voltar a ficar disponível, contacte o seu helpdesk.", "ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ %s أو إيقاف تشغيله. حاول مرة أخرى بعد دقيقة؛ وإذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم."},
	"launch.goingDownFor":      {"en": "The computer of %s is restarting or shutting down.", "de": "Der Computer von %s wird neu gestartet oder heruntergefahren.", "pt": "O computador de %s está a reiniciar ou a encerrar.", "ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ %s أو إيقاف تشغيله."},
	"launch.ifNotBack":         {"en": "If it does not come back, tell your helpdesk.", "de": "Ist er nicht bald wieder verfügbar, wenden Sie sich an Ihren Helpdesk.", "pt": "Se não voltar a ficar disponível, contacte o seu helpdesk.", "ar": "إذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم."},
	"launch.failedNotEntitled": {"en": "You may no longer open %s. Ask your helpdesk if you need it.", "de": "Sie dürfen %s nicht mehr öffnen. Fragen Sie Ihren Helpdesk, wenn Sie es brauchen.", "pt": "Já não pode abrir %s. Peça ao seu helpdesk se precisar.", "ar": "لم يعد بإمكانك فتح %s. اسأل مكتب الدعم إذا كنت تحتاج إليه."},
	"launch.failedNotAssigned": {"en": "No desktop of %s is assigned to you yet. Ask your helpdesk.", "de": "Ihnen ist noch kein Desktop von %s zugewiesen. Fragen Sie Ihren Helpdesk.", "pt": "Ainda não lhe foi atribuído nenhum ambiente de trabalho de %s. Contacte o seu helpdesk.", "ar": "لم يُخصَّص لك أي سطح مكتب من %s بعد. اسأل مكتب الدعم."},
	"launch.failedRemoteApp":   {"en": "%s cannot be opened as an app: the computers it is offered on can show only whole desktops. Tell your helpdesk.", "de": "%s kann nicht als App geöffnet werden: Die Computer, auf denen sie angeboten wird, können nur ganze Desktops anzeigen. Wenden Sie sich an Ihren Helpdesk.", "pt": "Não é possível abrir %s como aplicação: os computadores onde é disponibilizada só conseguem mostrar ambientes de trabalho completos. Contacte o seu helpdesk.", "ar": "لا يمكن فتح %s كتطبيق: أجهزة الكمبيوتر التي يُقدَّم عليها لا تعرض إلا أسطح مكتب كاملة. أبلغ مكتب الدعم."},
	"launch.failedGone":        {"en": "%s is no longer offered. Go back to see what you may open.", "de": "%s wird nicht mehr angeboten. Gehen Sie zurück, um zu sehen, was Sie öffnen dürfen.", "pt": "%s já não está disponível. Volte atrás para ver o que pode abrir.", "ar": "لم يعد %s متاحًا. ارجع لترى ما يمكنك فتحه."},
	"launch.failedUnavailable": {"en": "%s cannot be opened for a moment. Try again in a few seconds.", "de": "%s kann gerade nicht geöffnet werden. Versuchen Sie es in einigen Sekunden erneut.", "pt": "De momento não é possível abrir %s. Tente novamente dentro de alguns segundos.", "ar": "لا يمكن فتح %s للحظة. حاول مرة أخرى بعد بضع ثوانٍ."},
	"launch.failedOther":       {"en": "%s could not be opened. Try again; if it keeps happening, tell your helpdesk.", "de": "%s konnte nicht geöffnet werden. Versuchen Sie es erneut; passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "Não foi possível abrir %s. Tente novamente; se continuar a acontecer, contacte o seu helpdesk.", "ar": "تعذّر فتح %s. حاول مرة أخرى؛ وإذا تكرر ذلك، فأبلغ مكتب الدعم."},
	"launch.reference":         {"en": "Reference for your helpdesk: %s", "de": "Referenz für Ihren Helpdesk: %s", "pt": "Referência para o seu helpdesk: %s", "ar": "المرجع لمكتب الدعم: %s"},
	"launch.gone":              {"en": "This launch is over. Open the desktop or app again to connect: a launch hands its connection file only once, within two minutes.", "de": "Dieser Start ist beendet. Öffnen Sie den Desktop oder die App erneut, um sich zu verbinden: Ein Start gibt seine Verbindungsdatei nur einmal und nur zwei Minuten lang aus.", "pt": "Este lançamento terminou. Abra novamente o ambiente de trabalho ou a aplicação para se ligar: um lançamento só entrega o ficheiro de ligação uma vez, durante dois minutos.", "ar": "انتهى هذا التشغيل. افتح سطح المكتب أو التطبيق مرة أخرى للاتصال: يُسلِّم التشغيل ملف الاتصال مرة واحدة فقط خلال دقيقتين."},
	"back":                     {"en": "Back to your desktops and apps", "de": "Zurück zu Ihren Desktops und Apps", "pt": "Voltar aos seus ambientes de trabalho e aplicações", "ar": "العودة إلى أسطح المكتب والتطبيقات"},
	"noscript":                 {"en": "Reload this page to see whether it is ready.", "de": "Laden Sie diese Seite neu, um zu sehen, ob sie bereit ist.", "pt": "Recarregue esta página para ver se já está pronto.", "ar": "أعد تحميل هذه الصفحة لمعرفة ما إذا كان جاهزًا."},
	"error.title":              {"en": "Something went wrong", "de": "Etwas ist schiefgegangen", "pt": "Algo correu mal", "ar": "حدث خطأ ما"},
	"error.csrf":               {"en": "The form was stale or came from another site. Reload the page and try again.", "de": "Das Formular war veraltet oder kam von einer anderen Website. Laden Sie die Seite neu und versuchen Sie es erneut.", "pt": "O formulário estava desatualizado ou veio de outro site. Recarregue a página e tente novamente.", "ar": "النموذج قديم أو جاء من موقع آخر. أعد تحميل الصفحة وحاول مرة أخرى."},
	"error.expired":            {"en": "Your sign-in has expired. Sign in again.", "de": "Ihre Anmeldung ist abgelaufen. Melden Sie sich erneut an.", "pt": "A sua sessão expirou. Inicie sessão novamente.", "ar": "انتهت صلاحية تسجيل دخولك. سجّل الدخول مرة أخرى."},
	"error.signinNeeded":       {"en": "Please sign in first.", "de": "Bitte melden Sie sich zuerst an.", "pt": "Inicie sessão primeiro.", "ar": "يُرجى تسجيل الدخول أولًا."},
	"error.notFound":           {"en": "There is no such page.", "de": "Diese Seite gibt es nicht.", "pt": "Esta página não existe.", "ar": "لا توجد صفحة كهذه."},
	"error.tooMany":            {"en": "Too many requests from your address. Wait a minute and try again.", "de": "Zu viele Anfragen von Ihrer Adresse. Warten Sie eine Minute und versuchen Sie es erneut.", "pt": "Demasiados pedidos do seu endereço. Aguarde um minuto e tente novamente.", "ar": "طلبات كثيرة جدًا من عنوانك. انتظر دقيقة ثم حاول مرة أخرى."},
	"error.launches":           {"en": "You have too many launches under way. Wait for one to finish.", "de": "Sie haben zu viele laufende Starts. Warten Sie, bis einer fertig ist.", "pt": "Tem demasiados lançamentos em curso. Aguarde que um termine.", "ar": "لديك عمليات تشغيل كثيرة جارية. انتظر حتى تنتهي إحداها."},
	"error.signoutFailed":      {"en": "You are still signed in: the service could not reach its database to end your sign-in. Sign out again in a moment.", "de": "Sie sind noch angemeldet: Der Dienst hat seine Datenbank nicht erreicht, um Ihre Anmeldung zu beenden. Melden Sie sich in einem Moment erneut ab.", "pt": "Continua com sessão iniciada: o serviço não conseguiu aceder à sua base de dados para terminar a sua sessão. Termine a sessão novamente dentro de momentos.", "ar": "ما زلت مسجّل الدخول: تعذّر على الخدمة الوصول إلى قاعدة بياناتها لإنهاء تسجيل دخولك. سجّل الخروج مرة أخرى بعد قليل."},
	"error.portalFull":         {"en": "The portal has as many people signed in as it is set to take. Try again later; if it keeps happening, tell your helpdesk.", "de": "Im Portal sind so viele Personen angemeldet, wie es zulässt. Versuchen Sie es später erneut; passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "O portal tem tantas pessoas com sessão iniciada quantas está configurado para aceitar. Tente novamente mais tarde; se continuar a acontecer, contacte o seu helpdesk.", "ar": "وصل عدد المسجَّلين في البوابة إلى الحد الذي ضُبطت عليه. حاول مرة أخرى لاحقًا؛ وإذا تكرر ذلك فأبلغ مكتب الدعم."},
	"error.unavailable":        {"en": "The service is busy or cannot reach its database. Try again in a few seconds.", "de": "Der Dienst ist ausgelastet oder erreicht seine Datenbank nicht. Versuchen Sie es in einigen Sekunden erneut.", "pt": "O serviço está ocupado ou não consegue aceder à sua base de dados. Tente novamente dentro de alguns segundos.", "ar": "الخدمة مشغولة أو لا تستطيع الوصول إلى قاعدة بياناتها. حاول مرة أخرى بعد بضع ثوانٍ."},
	"error.notUser":            {"en": "This token is not an end user's. Administrators use the console.", "de": "Dieses Token gehört keinem Endbenutzer. Administratoren verwenden die Konsole.", "pt": "Este token não é de um utilizador final. Os administradores usam a consola.", "ar": "هذا الرمز لا يخص مستخدمًا نهائيًا. يستخدم المسؤولون وحدة التحكم."},
	"error.noToken":            {"en": "Enter an access token.", "de": "Geben Sie ein Zugriffstoken ein.", "pt": "Introduza um token de acesso.", "ar": "أدخل رمز وصول."},
	"error.badToken":           {"en": "This access token is not valid or has expired. Ask your helpdesk for a new one.", "de": "Dieses Zugriffstoken ist ungültig oder abgelaufen. Bitten Sie Ihren Helpdesk um ein neues.", "pt": "Este token de acesso não é válido ou expirou. Peça um novo ao seu helpdesk.", "ar": "رمز الوصول هذا غير صالح أو منتهي الصلاحية. اطلب رمزًا جديدًا من مكتب الدعم."},
	"error.ssoFailed":          {"en": "Signing in with your organisation did not complete. Sign in again; if it keeps happening, tell your helpdesk.", "de": "Die Anmeldung über Ihre Organisation wurde nicht abgeschlossen. Melden Sie sich erneut an; passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "O início de sessão com a sua organização não foi concluído. Inicie sessão novamente; se continuar a acontecer, contacte o seu helpdesk.", "ar": "لم يكتمل تسجيل الدخول عبر مؤسستك. سجّل الدخول مرة أخرى؛ وإذا تكرر ذلك، فأبلغ مكتب الدعم."},
	"error.failed":             {"en": "That did not work. Try again; if it keeps happening, tell your helpdesk.", "de": "Das hat nicht funktioniert. Versuchen Sie es erneut; passiert es wieder, wenden Sie sich an Ihren Helpdesk.", "pt": "Isso não funcionou. Tente novamente; se continuar a acontecer, contacte o seu helpdesk.", "ar": "لم ينجح ذلك. حاول مرة أخرى؛ وإذا تكرر ذلك، فأبلغ مكتب الدعم."},
	"error.sessionGone":        {"en": "That session has already ended, or it is not yours. Go back to see your sessions as they are now.", "de": "Diese Sitzung ist bereits beendet oder gehört nicht Ihnen. Gehen Sie zurück, um Ihre aktuellen Sitzungen zu sehen.", "pt": "Essa sessão já terminou ou não é sua. Volte atrás para ver as suas sessões atuais.", "ar": "انتهت هذه الجلسة بالفعل أو أنها لا تخصك. ارجع لترى جلساتك الحالية."},
	"error.badResource":        {"en": "That is not, or no longer, one of your desktops or apps.", "de": "Das ist nicht oder nicht mehr einer Ihrer Desktops oder Apps.", "pt": "Isso não é, ou já não é, um dos seus ambientes de trabalho ou aplicações.", "ar": "هذا ليس، أو لم يعد، من أسطح المكتب أو التطبيقات الخاصة بك."},
	"error.tooFast":            {"en": "You are doing that faster than the service takes. Wait a few seconds and try again.", "de": "Sie tun das schneller, als der Dienst es annimmt. Warten Sie einige Sekunden und versuchen Sie es erneut.", "pt": "Está a fazer isso mais depressa do que o serviço aceita. Aguarde alguns segundos e tente novamente.", "ar": "أنت تقوم بذلك أسرع مما تقبله الخدمة. انتظر بضع ثوانٍ ثم حاول مرة أخرى."},
}

// pluralMessages are the texts whose form follows a number (the first
// argument): a case per CLDR plural category the language has, "other"
// always.
var pluralMessages = map[string]map[string][]string{
	"resources.count": {
		"en": {"one", "You have %d desktop or app.", "other", "You have %d desktops and apps."},
		"de": {"one", "Sie haben %d Desktop oder App.", "other", "Sie haben %d Desktops und Apps."},
		"pt": {"one", "Tem %d ambiente de trabalho ou aplicação.", "other", "Tem %d ambientes de trabalho e aplicações."},
		"ar": {"zero", "ليس لديك أي سطح مكتب أو تطبيق.", "one", "لديك سطح مكتب أو تطبيق واحد.", "two", "لديك موردان.", "few", "لديك %d موارد.", "many", "لديك %d موردًا.", "other", "لديك %d مورد."},
	},
	// R-GW1: a file through an RD gateway opens one connection, within
	// the access token's lifetime (serve --gateway-token-ttl, minutes).
	"launch.gatewayOnce": {
		"en": {"one", "This file connects only once, and only within %d minute. To connect again, or later, choose Open again for a new file.",
			"other", "This file connects only once, and only within %d minutes. To connect again, or later, choose Open again for a new file."},
		"de": {"one", "Mit dieser Datei können Sie sich nur einmal verbinden, und nur innerhalb von %d Minute. Um sich erneut oder später zu verbinden, wählen Sie wieder „Öffnen“ für eine neue Datei.",
			"other", "Mit dieser Datei können Sie sich nur einmal verbinden, und nur innerhalb von %d Minuten. Um sich erneut oder später zu verbinden, wählen Sie wieder „Öffnen“ für eine neue Datei."},
		"pt": {"one", "Este ficheiro liga apenas uma vez, e apenas dentro de %d minuto. Para se ligar novamente, ou mais tarde, escolha «Abrir» outra vez para obter um novo ficheiro.",
			"other", "Este ficheiro liga apenas uma vez, e apenas dentro de %d minutos. Para se ligar novamente, ou mais tarde, escolha «Abrir» outra vez para obter um novo ficheiro."},
		"ar": {"one", "لا يتصل هذا الملف إلا مرة واحدة، وخلال دقيقة واحدة فقط. للاتصال مرة أخرى أو لاحقًا، اختر «فتح» من جديد للحصول على ملف جديد.",
			"two", "لا يتصل هذا الملف إلا مرة واحدة، وخلال دقيقتين فقط. للاتصال مرة أخرى أو لاحقًا، اختر «فتح» من جديد للحصول على ملف جديد.",
			"few", "لا يتصل هذا الملف إلا مرة واحدة، وخلال %d دقائق فقط. للاتصال مرة أخرى أو لاحقًا، اختر «فتح» من جديد للحصول على ملف جديد.",
			"other", "لا يتصل هذا الملف إلا مرة واحدة، وخلال %d دقيقة فقط. للاتصال مرة أخرى أو لاحقًا، اختر «فتح» من جديد للحصول على ملف جديد."},
	},
	// A wait the broker's answer gave (its Retry-After, R-A4), as
	// launchWait rounds it: seconds under a minute, else minutes.
	"launch.tryAgainSeconds": {
		"en": {"one", "Try again in %d second.", "other", "Try again in %d seconds."},
		"de": {"one", "Versuchen Sie es in %d Sekunde erneut.", "other", "Versuchen Sie es in %d Sekunden erneut."},
		"pt": {"one", "Tente novamente dentro de %d segundo.", "other", "Tente novamente dentro de %d segundos."},
		"ar": {"one", "حاول مرة أخرى بعد ثانية واحدة.", "two", "حاول مرة أخرى بعد ثانيتين.", "few", "حاول مرة أخرى بعد %d ثوانٍ.", "many", "حاول مرة أخرى بعد %d ثانية.", "other", "حاول مرة أخرى بعد %d ثانية."},
	},
	"launch.tryAgainMinutes": {
		"en": {"one", "Try again in %d minute.", "other", "Try again in %d minutes."},
		"de": {"one", "Versuchen Sie es in %d Minute erneut.", "other", "Versuchen Sie es in %d Minuten erneut."},
		"pt": {"one", "Tente novamente dentro de %d minuto.", "other", "Tente novamente dentro de %d minutos."},
		"ar": {"one", "حاول مرة أخرى بعد دقيقة.", "two", "حاول مرة أخرى بعد دقيقتين.", "few", "حاول مرة أخرى بعد %d دقائق.", "many", "حاول مرة أخرى بعد %d دقيقة.", "other", "حاول مرة أخرى بعد %d دقيقة."},
	},
	"launch.waited": {
		"en": {"one", "Waiting for %d second.", "other", "Waiting for %d seconds."},
		"de": {"one", "Wartet seit %d Sekunde.", "other", "Wartet seit %d Sekunden."},
		"pt": {"one", "À espera há %d segundo.", "other", "À espera há %d segundos."},
		"ar": {"zero", "بدأ الانتظار للتو.", "one", "الانتظار منذ ثانية واحدة.", "two", "الانتظار منذ ثانيتين.", "few", "الانتظار منذ %d ثوانٍ.", "many", "الانتظار منذ %d ثانية.", "other", "الانتظار منذ %d ثانية."},
	},
}

// cat is the catalogue the printers read, built once from messages and
// pluralMessages.
var cat = func() catalog.Catalog {
	b := catalog.NewBuilder(catalog.Fallback(language.English))
	for i, tag := range langs {
		code := langCodes[i]
		for id, byLang := range messages {
			if err := b.SetString(tag, id, byLang[code]); err != nil {
				panic(err)
			}
		}
		for id, byLang := range pluralMessages {
			cases := make([]any, len(byLang[code]))
			for j, c := range byLang[code] {
				cases[j] = c
			}
			if err := b.Set(tag, id, plural.Selectf(1, "%d", cases...)); err != nil {
				panic(err)
			}
		}
	}
	return b
}()

// lang is a page's language: its code, direction and printer.
type lang struct {
	Code string
	Dir  string
	p    *message.Printer
}

// T is the message id in the page's language, with args. A text
// argument (a desktop's name, a host, a user, a reference) is set apart
// by FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE (Unicode BiDi, UAX #9,
// X5c), as <bdi> would set it apart in markup: its own direction comes
// from its first letter, and it cannot reorder the sentence around it.
// Without them "Notepad++" in an Arabic sentence shows its "++" before
// the name, and an Arabic name in an English sentence takes the words
// after it into its run.
func (l *lang) T(id string, args ...any) string {
	args = slices.Clone(args) // the caller's slice stays as it was
	for i, a := range args {
		switch a := a.(type) {
		case string:
			args[i] = isolate(a)
		case verbatim:
			args[i] = string(a)
		}
	}
	return l.p.Sprintf(id, args...)
}

// verbatim is an argument of T written as it is: a request id her
// helpdesk is given (hexadecimal, one direction), which she may copy,
// and which then must not carry the isolates.
type verbatim string

// isolate sets s apart as T's arguments are. The isolate must close
// where s ends, whatever s holds: a name's own POP DIRECTIONAL ISOLATE
// with no isolate of the name's before it would close the FSI early
// (UAX #9, BD9), after which an override in the name ("\u2069\u202e")
// reverses the rest of the sentence, her helpdesk reference included;
// and an isolate the name opens and does not close would take the PDI,
// leaving the sentence after the name inside. Such a PDI is dropped and
// such an isolate closed (each is invisible); an embedding or override
// the name leaves open ends at the PDI (UAX #9, X6a).
func isolate(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteRune('\u2068')
	open := 0
	for _, r := range s {
		switch r {
		case '\u2066', '\u2067', '\u2068': // LRI, RLI, FSI
			open++
		case '\u2069': // PDI
			if open == 0 {
				continue
			}
			open--
		}
		b.WriteRune(r)
	}
	for ; open > 0; open-- {
		b.WriteRune('\u2069')
	}
	b.WriteRune('\u2069')
	return b.String()
}

// Choices are the switch's languages.
func (l *lang) Choices() []langChoice {
	out := make([]langChoice, len(langCodes))
	for i, c := range langCodes {
		out[i] = langChoice{Code: c, Name: langNames[i], Current: c == l.Code}
	}
	return out
}

type langChoice struct {
	Code, Name string
	Current    bool
}

// newLang returns the language of code (one of langCodes).
func newLang(code string) *lang {
	for i, c := range langCodes {
		if c == code {
			l := &lang{Code: c, Dir: "ltr", p: message.NewPrinter(langs[i], message.Catalog(cat))}
			if rtl[c] {
				l.Dir = "rtl"
			}
			return l
		}
	}
	return newLang("en")
}

// knownLang reports whether code is one of the portal's languages.
func knownLang(code string) bool {
	for _, c := range langCodes {
		if c == code {
			return true
		}
	}
	return false
}

// pickLang chooses r's language: ?lang= (set in the cookie on w), the
// cookie, Accept-Language, English.
func pickLang(w http.ResponseWriter, r *http.Request, secure bool) *lang {
	if q := r.URL.Query().Get("lang"); knownLang(q) {
		http.SetCookie(w, &http.Cookie{Name: langCookie, Value: q, Path: Prefix, MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
		return newLang(q)
	}
	if ck, err := r.Cookie(langCookie); err == nil && knownLang(ck.Value) {
		return newLang(ck.Value)
	}
	return newLang(matchAccept(r.Header.Get("Accept-Language")))
}

// matchAccept is the portal's language that best matches an
// Accept-Language header (x/text's matching: "de-AT" is German,
// "pt-BR" Portuguese), English when none does.
func matchAccept(h string) string {
	if len(h) > 512 {
		h = h[:512]
	}
	tags, _, err := language.ParseAcceptLanguage(strings.TrimSpace(h))
	if err != nil || len(tags) == 0 {
		return "en"
	}
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return "en"
	}
	return langCodes[i]
}
