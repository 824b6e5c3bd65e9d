package portal

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestLaunchDesktopGoingDownWords_RA4_RU6: a launch that failed because
// her own desktop's agent said that its machine goes down (NoCapacity
// with ReasonDesktopGoingDown, R-A4) tells her, in each of the portal's
// languages, that the computer of what she opened is restarting or
// shutting down, to try again in the wait its answer gave (its
// Retry-After, at most 30 s: 30 s, or 7 s when its machine is down
// sooner), or in a minute when it kept none (an older replica's launch),
// and to tell her helpdesk only if it does not come back; not that no
// session host can take it. A NoCapacity without the reason keeps the
// words for the pool's capacity, and one for an administrator
// (ReasonStartByAdministrator) the helpdesk's.
func TestLaunchDesktopGoingDownWords_RA4_RU6(t *testing.T) {
	down := &vdibroker.Error{Code: vdibroker.ENoCapacity, Reason: vdibroker.ReasonDesktopGoingDown, Message: `session host "mine-1", assigned to alice, is shutting down or restarting`}
	full := vdibroker.Errorf(vdibroker.ENoCapacity, `host pool "mine" has no capacity`)
	admin := &vdibroker.Error{Code: vdibroker.ENoCapacity, Reason: vdibroker.ReasonStartByAdministrator, Message: "an administrator can start it again"}
	const name = "\u2068My desk\u2069"
	for _, tc := range []struct {
		name string
		err  error
		wait time.Duration     // the answer's Retry-After, 0: none kept
		want map[string]string // by language
	}{
		{"going down, 30 s", down, 30 * time.Second, map[string]string{
			"en": "The computer of " + name + " is restarting or shutting down. Try again in 30 seconds. If it does not come back, tell your helpdesk.",
			"de": "Der Computer von " + name + " wird neu gestartet oder heruntergefahren. Versuchen Sie es in 30 Sekunden erneut. Ist er nicht bald wieder verfügbar, wenden Sie sich an Ihren Helpdesk.",
			"pt": "O computador de " + name + " está a reiniciar ou a encerrar. Tente novamente dentro de 30 segundos. Se não voltar a ficar disponível, contacte o seu helpdesk.",
			"ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ " + name + " أو إيقاف تشغيله. حاول مرة أخرى بعد ٣٠ ثانية. إذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم.",
		}},
		// Down sooner than 30 s: the wait the answer gave.
		{"going down, 7 s", down, 7 * time.Second, map[string]string{
			"en": "The computer of " + name + " is restarting or shutting down. Try again in 7 seconds. If it does not come back, tell your helpdesk.",
			"ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ " + name + " أو إيقاف تشغيله. حاول مرة أخرى بعد ٧ ثوانٍ. إذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم.",
		}},
		// No wait kept: a minute, the most the broker says and then some.
		{"going down, no wait", down, 0, map[string]string{
			"en": "The computer of " + name + " is restarting or shutting down. Try again in a minute; if it does not come back, tell your helpdesk.",
			"de": "Der Computer von " + name + " wird neu gestartet oder heruntergefahren. Versuchen Sie es in einer Minute erneut; ist er nicht bald wieder verfügbar, wenden Sie sich an Ihren Helpdesk.",
			"pt": "O computador de " + name + " está a reiniciar ou a encerrar. Tente novamente dentro de um minuto; se não voltar a ficar disponível, contacte o seu helpdesk.",
			"ar": "جارٍ إعادة تشغيل جهاز الكمبيوتر الخاص بـ " + name + " أو إيقاف تشغيله. حاول مرة أخرى بعد دقيقة؛ وإذا لم يصبح متاحًا من جديد، فأبلغ مكتب الدعم.",
		}},
		// The others keep their words.
		{"no capacity, 30 s", full, 30 * time.Second, map[string]string{
			"en": "No session host can take " + name + " right now. Try again in 30 seconds. If it keeps happening, tell your helpdesk.",
		}},
		{"no capacity, no wait", full, 0, map[string]string{
			"en": "No session host can take " + name + " right now. Try again in a few minutes; if it keeps happening, tell your helpdesk.",
		}},
		{"for an administrator", admin, 0, map[string]string{
			"en": "The computer of " + name + " did not start or has shut down, and opening it again will not start it. Ask your helpdesk to start it for you.",
		}},
	} {
		for _, lang := range []string{"en", "de", "pt", "ar"} {
			want, ok := tc.want[lang]
			if !ok {
				continue
			}
			t.Run(tc.name+" "+lang, func(t *testing.T) {
				// Ended at end, kept launchTTL after it; its wait as run
				// keeps it (Until).
				end := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
				l := &vdibroker.PortalLaunch{Name: "My desk", State: launchFailed, Message: failure(tc.err, "req-1"),
					CreateTime: end.Add(-time.Second), ExpireTime: end.Add(launchTTL)}
				if tc.wait > 0 {
					l.Until = end.Add(tc.wait)
				}
				lg := newLang(lang)
				v := (&Portal{}).view("s", l, lg, end)
				if want := want + " " + lg.T("launch.reference", verbatim("req-1")); v.State != launchFailed || v.Message != want {
					t.Errorf("%s: %q\nwant %q", v.State, v.Message, want)
				}
				if v.Title != lg.T("error.title") {
					t.Errorf("title %q", v.Title)
				}
			})
		}
	}
}
