package portaltest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/portal/web"
)

var getenv = os.Getenv

// Password is the password SignUp gives new users.
const Password = "correct horse battery staple"

// Browser is an HTTP client with a cookie jar that sends what a browser
// on the portal's own pages sends (Origin, Sec-Fetch-Site) and does not
// follow redirects, so tests see them.
type Browser struct {
	t      testing.TB
	base   *url.URL
	Client *http.Client
}

// Response is one answer, its body read.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Location is the redirect's target.
func (r Response) Location() string { return r.Header.Get("Location") }

// NewBrowser is a browser without a session.
func (p *Platform) NewBrowser() *Browser {
	jar, _ := cookiejar.New(nil)
	base, _ := url.Parse(p.URL)
	return &Browser{t: p.t, base: base, Client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// NewBrowserFrom is a browser without a session whose connections come
// from addr, a loopback address (RandomLoopback), so that a test of the
// per-address limits counts on an address of its own: every other test,
// of this run or another, comes from 127.0.0.1, whose counters outlive a
// test in Redis.
func (p *Platform) NewBrowserFrom(addr string) *Browser {
	b := p.NewBrowser()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	b.Client.Transport = &http.Transport{DialContext: d.DialContext}
	return b
}

// RandomLoopback is an address of 127.0.0.0/8 other than 127.0.0.1,
// drawn at random. Linux routes the whole block to the loopback
// interface; a connection from any of them reaches a server on
// 127.0.0.1.
func RandomLoopback() string {
	b := make([]byte, 3)
	for {
		_, _ = rand.Read(b)
		if b[2] != 0 && b[2] != 255 && (b[0] != 0 || b[1] != 0 || b[2] != 1) {
			return fmt.Sprintf("127.%d.%d.%d", b[0], b[1], b[2])
		}
	}
}

// Do sends req as is (with the browser's cookies).
func (b *Browser) Do(req *http.Request) Response {
	b.t.Helper()
	resp, err := b.Client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: read: %v", req.Method, req.URL, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

// Get fetches path, as a link on the portal's own pages would.
func (b *Browser) Get(path string) Response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base.String()+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.Do(req)
}

// Post submits a form on path as the portal's own pages do.
func (b *Browser) Post(path string, form url.Values) Response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base.String()+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base.Scheme+"://"+b.base.Host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.Do(req)
}

// At is a browser on the portal at base (StartPortal's), signed in as b
// is.
func (b *Browser) At(base string) *Browser {
	u, err := url.Parse(base)
	if err != nil {
		b.t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	if c := b.SessionCookie(); c != nil {
		jar.SetCookies(u, []*http.Cookie{c})
	}
	return &Browser{t: b.t, base: u, Client: &http.Client{Jar: jar, CheckRedirect: b.Client.CheckRedirect}}
}

// SessionCookie is the browser's session cookie, or nil; a browser test
// (chromedp) sets it in its own browser to start signed in.
func (b *Browser) SessionCookie() *http.Cookie {
	for _, c := range b.Client.Jar.Cookies(b.base) {
		if c.Name == web.CookieName {
			return c
		}
	}
	return nil
}

// SetSessionCookie puts c in the browser's jar.
func (b *Browser) SetSessionCookie(c *http.Cookie) {
	b.Client.Jar.SetCookies(b.base, []*http.Cookie{c})
}

// User is a partner signed up through the portal.
type User struct {
	Email, Password, AccountName, Currency string
	AccountID                              string
	*Browser
}

// SignUp signs a new partner up through the portal's form and returns
// them signed in; accountName "" picks one.
func (p *Platform) SignUp(accountName, currency string) *User {
	p.t.Helper()
	if accountName == "" {
		accountName = "Test Travel"
	}
	u := &User{Email: UniqueEmail("partner"), Password: Password, AccountName: accountName, Currency: currency, Browser: p.NewBrowser()}
	res := u.Post("/signup", url.Values{"email": {u.Email}, "password": {u.Password}, "account_name": {accountName}, "currency": {currency}})
	if res.Status != http.StatusSeeOther || res.Location() != "/sandbox/" || u.SessionCookie() == nil {
		p.t.Fatalf("sign up: %d %s\n%.2000s", res.Status, res.Location(), res.Body)
	}
	u.AccountID = p.AccountOf(u.Browser)
	return u
}

// SignIn signs email in on a new browser; it fails the test unless the
// portal accepts.
func (p *Platform) SignIn(email, password string) *Browser {
	p.t.Helper()
	b := p.NewBrowser()
	res := b.Post("/signin", url.Values{"email": {email}, "password": {password}})
	if res.Status != http.StatusSeeOther || b.SessionCookie() == nil {
		p.t.Fatalf("sign in %s: %d\n%.2000s", email, res.Status, res.Body)
	}
	return b
}

// AccountOf is the account id of b's session, as accounts knows it.
func (p *Platform) AccountOf(b *Browser) string {
	p.t.Helper()
	c := b.SessionCookie()
	if c == nil {
		p.t.Fatal("not signed in")
	}
	s, err := accountsSession(p, c.Value)
	if err != nil {
		p.t.Fatalf("GetSession: %v", err)
	}
	return s
}

// accountsSession asks accounts, as the portal does, whose token is.
func accountsSession(p *Platform, token string) (string, error) {
	c := accountsv1.NewAccountsProtobufClient(p.AccountsURL, internalauthtest.Client(internalauth.Portal))
	s, err := c.GetSession(context.Background(), &accountsv1.GetSessionRequest{Token: token})
	if err != nil {
		return "", err
	}
	return s.GetAccount().GetId(), nil
}
