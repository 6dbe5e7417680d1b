package guard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// session returns the guard of a console on port 8123, a handler behind it
// that counts what reaches it, and the session cookie a browser gets from
// the printed URL.
func session(t *testing.T) (*Guard, http.Handler, *int, *http.Cookie) {
	t.Helper()
	g, err := New(8123)
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	u, err := url.Parse(g.URL("/runs"))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, u.RequestURI(), nil)
	req.Host = u.Host
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/runs" {
		t.Fatalf("the printed URL answered %d, Location %q; want 303 to /runs, without the token", rec.Code, rec.Header().Get("Location"))
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Name != "kubeskills-ui-8123" {
		t.Fatalf("cookies %+v, want one HttpOnly SameSite=Strict session cookie named after the port", cookies)
	}
	return g, h, &reached, cookies[0]
}

// TestGuard sends each request a hostile page or a stray client could send,
// and the console's own, and checks which reach the console.
func TestGuard(t *testing.T) {
	g, h, reached, cookie := session(t)
	form := func(csrf string) string { return url.Values{CSRFField: {csrf}, "reason": {"ok"}}.Encode() }
	for _, tc := range []struct {
		name         string
		method, host string
		origin, site string
		cookie       *http.Cookie
		body         string
		want         int
	}{
		{name: "a page of the console", method: "GET", host: "127.0.0.1:8123", cookie: cookie, want: 200},
		{name: "localhost names the same console", method: "GET", host: "localhost:8123", cookie: cookie, want: 200},
		{name: "DNS rebinding: a hostile name that resolves to loopback", method: "GET", host: "evil.example:8123", cookie: cookie, want: 421},
		{name: "another port", method: "GET", host: "127.0.0.1:9999", cookie: cookie, want: 421},
		{name: "no session", method: "GET", host: "127.0.0.1:8123", want: 401},
		{name: "a forged session", method: "GET", host: "127.0.0.1:8123", cookie: &http.Cookie{Name: g.cookie, Value: "guess"}, want: 401},
		{name: "a write from the console", method: "POST", host: "127.0.0.1:8123", origin: "http://127.0.0.1:8123", site: "same-origin",
			cookie: cookie, body: form(g.CSRF()), want: 200},
		{name: "a write from a forged origin", method: "POST", host: "127.0.0.1:8123", origin: "http://evil.example",
			cookie: cookie, body: form(g.CSRF()), want: 403},
		{name: "a write with no origin", method: "POST", host: "127.0.0.1:8123", cookie: cookie, body: form(g.CSRF()), want: 403},
		{name: "a write from another site", method: "POST", host: "127.0.0.1:8123", origin: "http://127.0.0.1:8123", site: "cross-site",
			cookie: cookie, body: form(g.CSRF()), want: 403},
		{name: "a write without the CSRF token", method: "POST", host: "127.0.0.1:8123", origin: "http://127.0.0.1:8123",
			cookie: cookie, body: form(""), want: 403},
		{name: "a write with a wrong CSRF token", method: "POST", host: "127.0.0.1:8123", origin: "http://127.0.0.1:8123",
			cookie: cookie, body: form("x" + g.CSRF()), want: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := *reached
			req := httptest.NewRequest(tc.method, "/runs/agents/r1", strings.NewReader(tc.body))
			req.Host = tc.host
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if tc.cookie != nil {
				req.AddCookie(tc.cookie)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("answered %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
			}
			if got := *reached - before; (tc.want == 200) != (got == 1) {
				t.Errorf("reached the console %d times, want it to only when allowed", got)
			}
			if csp := rec.Header().Get("Content-Security-Policy"); csp != ContentSecurityPolicy {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if rec.Header().Get("X-Frame-Options") != "DENY" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("headers %v, want framing and sniffing refused", rec.Header())
			}
		})
	}
}

// TestTokens: each console has tokens of its own, and a wrong token in the
// URL starts no session.
func TestTokens(t *testing.T) {
	a, b := must(New(8123)), must(New(8123))
	if a.token == b.token || a.csrf == b.csrf || a.token == a.csrf || len(a.token) < 43 {
		t.Fatalf("tokens are not fresh and random: %q %q %q", a.token, b.token, a.csrf)
	}
	u, _ := url.Parse(b.URL("/"))
	req := httptest.NewRequest(http.MethodGet, u.RequestURI(), nil)
	req.Host = u.Host
	rec := httptest.NewRecorder()
	a.Wrap(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Errorf("another console's token answered %d with cookies %v, want 401 and none", rec.Code, rec.Result().Cookies())
	}
	if !strings.HasPrefix(a.URL("/"), "http://127.0.0.1:8123/?token=") {
		t.Errorf("URL %q, want one on loopback", a.URL("/"))
	}
}

func must(g *Guard, err error) *Guard {
	if err != nil {
		panic(err)
	}
	return g
}
