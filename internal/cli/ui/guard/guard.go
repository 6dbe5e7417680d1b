// Package guard keeps a local web console to the person who started it.
// The console listens on loopback, where any web page the person opens could
// reach it, so every request must prove it comes from the console's own
// pages:
//
//   - the Host header names the loopback address the console listens on,
//     which turns away a page that rebinds its own DNS name to 127.0.0.1;
//   - the request carries the session cookie, which only the URL the console
//     printed (with its random token) sets;
//   - a request that writes (any method but GET and HEAD) comes from the
//     console's origin (Origin, and Sec-Fetch-Site when the browser sends
//     it) and carries the console's CSRF token in its form.
//
// Every answer forbids framing, sniffing, referrers to other sites and
// caching, and has a Content-Security-Policy that allows scripts, styles
// and images from the console alone: no inline script, no inline style,
// nothing from elsewhere.
package guard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// cookiePrefix starts the session cookie's name, which ends with the
// console's port: a browser keeps cookies by host, not by port, so two
// consoles on one machine (two contexts, two people) would otherwise take
// each other's session.
const cookiePrefix = "kubeskills-ui-"

// CSRFField is the form field that carries the CSRF token.
const CSRFField = "csrf"

// TokenParam is the query parameter of the URL that starts a session.
const TokenParam = "token"

// ContentSecurityPolicy is sent with every answer.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Guard checks every request to the console listening on port of loopback.
type Guard struct {
	cookie  string
	hosts   []string
	origins []string
	token   string
	csrf    string
}

// New returns the guard of a console listening on 127.0.0.1:port, with
// fresh random tokens.
func New(port int) (*Guard, error) {
	token, err := NewToken()
	if err != nil {
		return nil, err
	}
	csrf, err := NewToken()
	if err != nil {
		return nil, err
	}
	g := &Guard{cookie: cookiePrefix + strconv.Itoa(port), token: token, csrf: csrf}
	for _, h := range []string{"127.0.0.1", "localhost"} {
		host := net.JoinHostPort(h, strconv.Itoa(port))
		g.hosts = append(g.hosts, host)
		g.origins = append(g.origins, "http://"+host)
	}
	return g, nil
}

// NewToken returns 32 random bytes, base64url-encoded: a value nobody can
// guess.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to make a random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// URL is the address that starts a session: the one to open in a browser.
func (g *Guard) URL(path string) string {
	return "http://" + g.hosts[0] + path + "?" + url.Values{TokenParam: {g.token}}.Encode()
}

// CSRF is the token a form that writes must carry in CSRFField.
func (g *Guard) CSRF() string { return g.csrf }

// Wrap returns next behind the guard's checks.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !slices.Contains(g.hosts, r.Host) {
			http.Error(w, "this console answers only to "+g.hosts[0]+" (Host "+strconv.Quote(r.Host)+" refused)", http.StatusMisdirectedRequest)
			return
		}
		if t := r.URL.Query().Get(TokenParam); t != "" {
			g.startSession(w, r, t)
			return
		}
		if c, err := r.Cookie(g.cookie); err != nil || !equal(c.Value, g.token) {
			http.Error(w, "no session: open the URL that `kubectl skills ui` printed", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := g.checkWrite(r); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// startSession sets the session cookie for the right token, and sends the
// browser to the same page without it, so that the token stays out of the
// history and of the address bar.
func (g *Guard) startSession(w http.ResponseWriter, r *http.Request, token string) {
	if r.Method != http.MethodGet || !equal(token, g.token) {
		http.Error(w, "wrong token: open the URL that `kubectl skills ui` printed", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	u := *r.URL
	q := u.Query()
	q.Del(TokenParam)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// checkWrite tells whether a request that writes comes from the console's
// own page.
func (g *Guard) checkWrite(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("refused: a write from another site (Sec-Fetch-Site %q)", site)
	}
	if o := r.Header.Get("Origin"); !slices.Contains(g.origins, o) {
		return fmt.Errorf("refused: a write from origin %q, not from this console", o)
	}
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("refused: the form cannot be read: %w", err)
	}
	if !equal(r.PostForm.Get(CSRFField), g.csrf) {
		return fmt.Errorf("refused: the form's CSRF token is missing or wrong; reload the page")
	}
	return nil
}

// equal compares two tokens in constant time.
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
