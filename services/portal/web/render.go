package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/portal"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pages are the templates, each page parsed with the layout.
var pages = func() map[string]*template.Template {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, name := range names {
		base := strings.TrimPrefix(name, "templates/")
		if base == "layout.html" {
			continue
		}
		out[base] = template.Must(template.New(base).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", name))
	}
	return out
}()

var funcs = template.FuncMap{
	// money writes minor units with two decimals, thousands grouped, and
	// the currency code.
	"money":   formatAmount,
	"grouped": func(n any) string { return groupedAny(n) },
	"word":    statusWord,
	"short8":  shortID,
	"pretty":  prettyBody,
	"idref":   func(href, id string) idRef { return idRef{Href: href, ID: id} },
	// isUUID tells an order's or top-up's id (what a wallet entry of an
	// order names) from other references.
	"isUUID": func(s string) bool { _, err := uuid.Parse(s); return err == nil && len(s) == 36 },
	// orderrows and esimrows hand a shared table its rows and the
	// environment its links lead to.
	"orderrows": func(env portal.Environment, orders []*orderingv1.Order) orderRows { return orderRows{env, orders} },
	"esimrows":  func(env portal.Environment, esims []*orderingv1.Esim) esimRows { return esimRows{env, esims} },
	// utc writes a time in UTC, saying so.
	"utc": func(ts *timestamppb.Timestamp) string {
		if ts == nil || !ts.IsValid() {
			return ""
		}
		return ts.AsTime().UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso": func(ts *timestamppb.Timestamp) string {
		if ts == nil {
			return ""
		}
		return ts.AsTime().UTC().Format(time.RFC3339)
	},
	// short names an enum value the way the API does: ORDER_STATUS_FAILED
	// is "failed".
	"short": func(v fmt.Stringer, prefix string) string {
		return strings.ToLower(strings.TrimPrefix(v.String(), prefix))
	},
	"add":   func(a, b int) int { return a + b },
	"bytes": byteSize,
	"lower": strings.ToLower,
	"join":  strings.Join,
	// percentOf is pct percent of n, for a meter's bounds.
	"percentOf": func(n, pct int64) int64 { return n / 100 * pct },
}

// view is what every page's template gets.
type view struct {
	Title string
	// Signed-in pages: the user and account, the environment of the page
	// (empty on pages of no environment) and the switch's link.
	Session   *session
	Env       portal.Environment
	navEnv    portal.Environment
	SwitchURL string
	Section   string
	// Form holds the values sent back, Errors the message per field, and
	// Error one for the whole form.
	Form   map[string]string
	Errors map[string]string
	Error  string
	Notice string
	Data   any
	// SearchQuery is what the header's search box shows.
	SearchQuery string
}

// NavEnv is the environment the navigation's links lead to: the page's,
// or on pages of none (settings, errors) the sandbox, or the one the
// path names.
func (v view) NavEnv() portal.Environment {
	if v.Env != "" {
		return v.Env
	}
	if v.navEnv != "" {
		return v.navEnv
	}
	return portal.Sandbox
}

type orderRows struct {
	Env    portal.Environment
	Orders []*orderingv1.Order
}

type esimRows struct {
	Env   portal.Environment
	Esims []*orderingv1.Esim
}

// idRef is a link to a page named by an id.
type idRef struct{ Href, ID string }

// LiveDisabled reports a live page of an account without live: the
// banner says so.
func (v view) LiveDisabled() bool {
	return v.Env == portal.Live && v.Session != nil && !v.Session.GetAccount().GetLiveEnabled()
}

// Other is the environment the switch links to.
func (v view) Other() portal.Environment { return v.Env.Other() }

// Email and AccountName are the header's.
func (v view) Email() string       { return v.Session.GetUser().GetEmail() }
func (v view) AccountName() string { return v.Session.GetAccount().GetName() }
func (v view) Currency() string    { return v.Session.GetAccount().GetCurrency() }

// envView is a view of an environment's page; section is its first path
// element after the environment ("" for the overview), where the switch
// leads in the other environment.
func envView(e envRequest, title, section string, data any) view {
	sw := "/" + string(e.env.Other()) + "/"
	if section != "" {
		sw += section
	}
	return view{Title: title, Session: e.session, Env: e.env, SwitchURL: sw, Section: section, Data: data}
}

// render writes a page. It renders into a buffer first, so that a
// template error becomes the 500 page rather than half a page.
func (a *App) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	t, ok := pages[page]
	if !ok {
		panic("no template " + page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		a.Log.ErrorContext(r.Context(), "render", "page", page, "err", err)
		if page != "error.html" {
			a.errorPage(w, r, http.StatusInternalServerError, "Something went wrong", "")
		}
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func (a *App) static(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		a.notFound(w, r) // no directory listings
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	http.FileServerFS(staticFiles).ServeHTTP(w, r)
}

// byteSize writes a byte count the way plans name their data: in units
// of 1024 (a "5 GB" plan has 5 << 30 bytes), with at most two decimals.
func byteSize(n int64) string {
	if n < 1024 && n > -1024 {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v := float64(n)
	unit := ""
	for _, u := range []string{"KB", "MB", "GB", "TB"} {
		v /= 1024
		unit = u
		if v < 1024 && v > -1024 {
			break
		}
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	return s + " " + unit
}
